//! The one time-ordered walk of the analysis: every command reads a trace through [`Core`].
//!
//! ```text
//! Merge::pop ──▶ --tid ──▶ Core::step ──────────────────────────────▶ Step (Entry / Exit /
//!  (time order,            TaskStack::consume (pairing, durations,     Event / Lost / Sched)
//!   -r -t -C)              LOST resync), filters + triggers, fix-ups
//! perf-cpu*.dat ─────────▶ sched (context switches as linux:schedule)
//! ```
//!
//! The core owns the [`Merge`], one [`TaskCore`] per task (its [`TaskStack`], `--tid`
//! verdict and times), the `trace_on`/`trace_off` state, the setjmp levels, the per-function
//! fix-up table and the `-r` stop. [`Core::next_step`] hands over one [`Step`] at a time;
//! [`Core::step`] is the same for a record read by someone else (the walker's direct reader).
//! The calls left open at the end are closed by [`Core::close_next`]. Where uftrace's readers
//! differ, the [`Policy`] says which one to follow. The printer's look-ahead (an entry and
//! its exit printed as one leaf line) is in [`super::leaf`]; the perf merge in
//! `sched`.
//!
//! A shown entry of the exec or longjmp family changes the stack only once its consumer saw
//! it (the stack at the entry still holds the calls it leaves): the change is pending until
//! the next step, or until the consumer takes it with [`Core::take_jump`].

use super::policy::{Fixups, Libcall, Policy, Setjmp};
use crate::callstack::{Closed, TaskStack, Verdict};
use crate::filter::FuncFilter;
use crate::merge::{Head, Merge};
use crate::perf::PerfEvent;
use record_format::libcall::StackEffect;
use record_format::{RecordKind, TraceDir};

mod jumps;
mod open;

/// An entry record and what the filters made of it.
#[derive(Debug, Clone, Copy)]
pub struct EntryStep {
    pub task: usize,
    pub head: Head,
    /// The call's slot in the task's stack (0 = outermost).
    pub slot: usize,
    pub verdict: Verdict,
    /// Shown, and not a library call kept from the output ([`Libcall::NotReported`]).
    pub reported: bool,
    /// What the function's triggers ask of the consumer.
    pub actions: EntryActions,
    /// The function's stack effect (exec, fork, setjmp, longjmp families).
    pub effect: Option<StackEffect>,
    /// A setjmp that marked the level longjmp returns to.
    pub setjmp: bool,
    /// The record is the first of its task (a fork child starts here).
    pub first: bool,
}

/// The triggers of an entry that its consumer acts on (replay's lines).
#[derive(Debug, Clone, Copy, Default)]
pub struct EntryActions {
    pub trace_off: bool,
    pub backtrace: bool,
    pub finish: bool,
    pub color: Option<&'static str>,
}

/// An exit record and the call it closed.
#[derive(Debug, Clone, Copy)]
pub struct ExitStep {
    pub task: usize,
    pub head: Head,
    pub closed: Closed,
    /// The call's slot (the number of calls still open around it).
    pub slot: usize,
    pub reported: bool,
    pub first: bool,
}

/// One step of the walk.
#[derive(Debug, Clone, Copy)]
pub enum Step {
    Entry(EntryStep),
    Exit(ExitStep),
    /// An event record (user, kernel or perf event in the data file): no bookkeeping.
    Event {
        task: usize,
        head: Head,
    },
    Lost {
        task: usize,
        head: Head,
        first: bool,
    },
    /// A context switch ([`Policy::sched`]): switched out (`exit == false`, a
    /// `linux:schedule` call begins) or back in (it ends, `total` long).
    Sched(SchedStep),
}

/// A context switch of a task.
#[derive(Debug, Clone, Copy)]
pub struct SchedStep {
    pub task: usize,
    pub time: u64,
    pub exit: bool,
    pub total: u64,
    /// Inside a call the filters show.
    pub visible: bool,
    /// The switch-out it ends was a pre-emption (`linux:schedule (pre-empted)`).
    pub preempted: bool,
    /// The perf event (for a switch-in that ends a switch-out, the switch-out's id).
    pub id: u64,
}

/// A call closed at the end of the data ([`Core::close_next`]).
#[derive(Debug, Clone, Copy)]
pub struct Unclosed {
    pub task: usize,
    pub closed: Closed,
    pub slot: usize,
    /// The time it was closed at.
    pub time: u64,
}

/// One task as the walk keeps it.
#[derive(Debug)]
pub struct TaskCore {
    pub stack: TaskStack,
    /// The process it belongs to (its `TASK` line in task.txt; its tid without one).
    pub pid: u32,
    /// Passed `--tid`.
    pub allowed: bool,
    /// Times of the task's first and last entries or exits (0 when none).
    pub first_time: u64,
    pub last_time: u64,
    /// Time of its last exit.
    pub last_exit: u64,
    /// Exits reported (counted by the walker).
    pub exits: u64,
    /// Time of its last record of any kind, context switches included.
    pub last_seen: u64,
    /// The level of its last setjmp ([`Setjmp::PerTask`]).
    setjmp: usize,
    /// Its last switch-out: time, and whether it was a pre-emption.
    pub(super) sched_out: Option<(u64, bool)>,
    /// The session of the task's last record, valid for times in [sess_from, sess_until)
    /// (kept by the walker, see [`super::Walker`]).
    pub session: Option<usize>,
    pub(super) sess_from: u64,
    pub(super) sess_until: u64,
    /// An exec emptied its stack since the consumer last asked ([`Core::take_exec_reset`]).
    exec_reset: bool,
}

impl TaskCore {
    /// Whether some outer open call has the same address as slot `i`.
    pub fn recursive(&self, i: usize, addr: u64) -> bool {
        self.stack.slots()[..i].iter().any(|s| s.addr == addr)
    }
}

/// The walk over one data directory.
pub struct Core<'d> {
    pub merge: Merge<'d>,
    pub tasks: Vec<TaskCore>,
    pub policy: Policy,
    /// The `trace_on`/`trace_off` state.
    pub enabled: bool,
    /// The level of the last setjmp ([`Setjmp::Global`]).
    setjmp: usize,
    /// A shown exec or longjmp not applied yet: (task, effect).
    pending: Option<(usize, StackEffect)>,
    /// Execs whose other threads still run the old image: (pid, start of the new image's
    /// session, exec'ing task). See [`Core::apply_due_execs`].
    deferred_execs: Vec<(u32, u64, usize)>,
    /// The earliest start in `deferred_execs` (`u64::MAX`: none).
    pub(super) exec_due: u64,
    /// Some task's `exec_reset` is set.
    exec_reset_any: bool,
    /// Per function: its stack effect, once known.
    fixups: Vec<Option<Option<StackEffect>>>,
    /// `-r` as absolute times, and its stop as written (closing unfinished calls).
    pub(super) range: (u64, u64),
    range_stop: Option<u64>,
    /// No filter, trigger or hide pattern: every function's decision is the default.
    no_filters: bool,
    /// Nothing can hide a call: only the fix-ups remain (see [`Core::step`]).
    pub(super) plain: bool,
    /// `--no-libcall`.
    no_libcall: bool,
    /// The perf events by time and the next one ([`Policy::sched`]).
    pub(super) perf: Vec<(usize, PerfEvent)>,
    pub(super) perf_next: usize,
    /// End of the events [`Core::next_sched`] looks at (the direct reader: the end of the
    /// task's own).
    pub(super) perf_until: usize,
    /// `-t`: context switches shorter than this are dropped, as calls are.
    pub(super) sched_min: u64,
    /// `--event-full` (replay): every switch and task event is stepped, also outside calls.
    pub sched_all: bool,
    /// `Usage:` complaints about the filters and argument specs.
    pub notices: Vec<String>,
}

impl<'d> Core<'d> {
    /// The next step in time order (records of tasks `--tid` leaves out are skipped), or
    /// `None` at the end of the data. Context switches come before the record they precede.
    #[inline]
    pub fn next_step(&mut self) -> Option<Step> {
        loop {
            if self.perf_next < self.perf.len() {
                let upto = self
                    .merge
                    .peek()
                    .and_then(|t| self.merge.head(t))
                    .map_or(u64::MAX, |h| h.raw.time);
                if let Some(s) = self.next_sched(upto) {
                    return Some(Step::Sched(s));
                }
            }
            let (ti, head) = self.merge.pop()?;
            if self.tasks[ti].allowed {
                return Some(self.step(ti, head));
            }
        }
    }

    /// The origin of elapsed times shown ([`super::sched::origin`], from the perf events the
    /// walk already holds).
    pub fn elapsed_origin(&self, dir: &TraceDir, tids: &[u32], first: u64) -> u64 {
        super::sched::origin(&self.perf, dir, tids, self.range, first, self.sched_all)
    }

    /// The time of the next step, `None` at the end of the data (records of tasks `--tid`
    /// leaves out and switches outside `-r` included: an upper bound for what comes before it).
    pub fn peek_time(&self) -> Option<u64> {
        let record = self
            .merge
            .peek()
            .and_then(|t| self.merge.head(t))
            .map(|h| h.raw.time);
        let switch = self.perf.get(self.perf_next).map(|e| e.1.time);
        match (record, switch) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// The step of record `h` of task `ti` (records of a task must come in order).
    #[inline]
    pub fn step(&mut self, ti: usize, h: Head) -> Step {
        self.apply_pending();
        if h.raw.time >= self.exec_due {
            self.apply_due_execs(h.raw.time);
        }
        let t = &mut self.tasks[ti];
        t.last_seen = h.raw.time;
        let first = !t.stack.started();
        match h.raw.kind {
            RecordKind::Event => Step::Event { task: ti, head: h },
            RecordKind::Lost => {
                if self.policy.lost_aligns {
                    t.stack.align(&h.raw);
                }
                t.stack.consume(&h.raw, h.func);
                Step::Lost {
                    task: ti,
                    head: h,
                    first,
                }
            }
            RecordKind::Entry => {
                if t.first_time == 0 {
                    t.first_time = h.raw.time;
                }
                t.last_time = h.raw.time;
                t.stack.consume(&h.raw, h.func);
                Step::Entry(self.entry(ti, h, first))
            }
            RecordKind::Exit => {
                if t.first_time == 0 {
                    t.first_time = h.raw.time;
                }
                t.last_time = h.raw.time;
                t.last_exit = h.raw.time;
                let closed = t.stack.consume(&h.raw, h.func).unwrap_or_default();
                Step::Exit(self.exit(ti, h, closed, first))
            }
        }
    }

    /// The filters and fix-ups at the entry `h` just consumed.
    #[inline]
    fn entry(&mut self, ti: usize, h: Head, first: bool) -> EntryStep {
        let slot = self.tasks[ti].stack.open_calls().saturating_sub(1);
        let effect = if self.policy.fixups == Fixups::Off {
            None
        } else {
            self.fixup(h.func)
        };
        let mut step = EntryStep {
            task: ti,
            head: h,
            slot,
            verdict: Verdict::Shown,
            reported: true,
            actions: EntryActions::default(),
            effect,
            setjmp: false,
            first,
        };
        if !self.policy.filters {
            step.reported = false;
            return step;
        }
        if self.plain {
            // Nothing can hide a call: the filter bookkeeping would accept it.
            if effect == Some(StackEffect::Setjmp) {
                self.setjmp = self.tasks[ti].stack.open_calls();
                step.setjmp = true;
            }
            if matches!(effect, Some(StackEffect::Exec | StackEffect::Longjmp)) {
                self.pending = effect.map(|e| (ti, e));
            }
            return step;
        }
        // Inside a -N function every entry is hidden before its own filters are looked at.
        let ff = if self.no_filters || self.tasks[ti].stack.inside_notrace() {
            FuncFilter::default()
        } else {
            self.merge.decide(h.func)
        };
        let a = &ff.actions;
        step.actions = EntryActions {
            trace_off: a.trace_off,
            backtrace: a.backtrace,
            finish: a.finish,
            color: a.color,
        };
        let has_filter = self.merge.filters.has_filter;
        let every = self.policy.fixups == Fixups::Every;
        let stack = &mut self.tasks[ti].stack;
        // setjmp marks the level longjmp returns to, whatever the filters hide below -N.
        if effect == Some(StackEffect::Setjmp)
            && self.policy.setjmp == Setjmp::Global
            && !stack.inside_notrace()
        {
            self.setjmp = stack.open_calls();
            step.setjmp = true;
        }
        let marks = if every { None } else { effect };
        let enabled = self.policy.triggers.then_some(&mut self.enabled);
        step.verdict = stack.enter(&ff, has_filter, ff.hide, marks, enabled);
        let shown = step.verdict == Verdict::Shown;
        if !shown && self.policy.disabled_hides_exit {
            stack.hide(slot);
        }
        step.reported = shown
            && !(self.policy.libcall == Libcall::NotReported
                && self.no_libcall
                && self.merge.sym.func(h.func).is_plt);
        if every {
            if effect == Some(StackEffect::Setjmp) && self.policy.setjmp == Setjmp::PerTask {
                self.tasks[ti].setjmp = self.tasks[ti].stack.open_calls();
                step.setjmp = true;
            }
            if let Some(e) = effect {
                self.apply(ti, e);
            }
        } else if shown {
            if let Some(e) = self.tasks[ti].stack.take_jump(slot) {
                self.pending = Some((ti, e));
            }
        }
        step
    }

    /// The filters at the exit `h` just consumed.
    #[inline]
    fn exit(&mut self, ti: usize, h: Head, closed: Closed, first: bool) -> ExitStep {
        let stack = &mut self.tasks[ti].stack;
        let mut step = ExitStep {
            task: ti,
            head: h,
            closed,
            slot: stack.open_calls(),
            reported: true,
            first,
        };
        if !self.policy.filters || self.plain {
            return step;
        }
        let plt = self.no_libcall && self.merge.sym.func(h.func).is_plt;
        if plt && self.policy.libcall == Libcall::HiddenExitDropped {
            stack.forget_marks(step.slot);
            step.reported = false;
            return step;
        }
        let shown = stack.exit();
        step.reported =
            shown && self.enabled && !(plt && self.policy.libcall == Libcall::NotReported);
        step
    }

    /// `--no-libcall`.
    pub fn no_libcall(&self) -> bool {
        self.no_libcall
    }

    /// Whether an event of task `ti` shows now: tracing on, and inside the calls the filters
    /// show (outside every `-F` function, or inside a `-N` one, uftrace hides them).
    pub fn event_shown(&mut self, ti: usize) -> bool {
        let s = &mut self.tasks[ti].stack;
        let i = s.open_calls();
        if !self.enabled || s.hidden(i) {
            return false;
        }
        !(s.inside_notrace() || (self.merge.filters.has_filter && !s.inside_filter()))
    }

    /// Whether event record `h` of task `ti` can show now, in replay and to a script: a user
    /// event (not a kernel tracepoint) only inside a call, as uftrace shows one
    /// ([`TaskStack::event_placed`](crate::callstack::TaskStack::event_placed): not at the top
    /// level, nor inside a call entered before the data or `-r` starts, nor only inside
    /// calls hidden by `-Z`).
    pub fn user_event_placed(&self, ti: usize, h: &Head) -> bool {
        h.kernel_event.is_some() || self.tasks[ti].stack.event_placed()
    }

    /// The text (`name (fields)`) of event record `h` of task `ti` when replay shows it
    /// ([`Core::event_shown`], [`Core::user_event_placed`], and above the `-D` depth); with
    /// `no_sched` (`--no-sched`), not a `linux:sched*` one.
    pub fn shown_event_text(&mut self, ti: usize, h: &Head, no_sched: bool) -> Option<String> {
        if !self.event_shown(ti)
            || !self.user_event_placed(ti, h)
            || self.tasks[ti].stack.depth_left() <= 0
        {
            return None;
        }
        let text = self.merge.event_text(ti, h)?;
        (!(no_sched && text.starts_with("linux:sched"))).then_some(text)
    }
}

#[cfg(test)]
#[path = "core_tests.rs"]
mod tests;
