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

use super::policy::{Fixups, Libcall, Policy, Setjmp, Unfinished};
use crate::callstack::{Closed, TaskStack, Verdict};
use crate::config::{Config, TimePoint};
use crate::filter::FuncFilter;
use crate::merge::{open_merge, Head, Merge};
use crate::perf::PerfEvent;
use crate::symbols::FuncId;
use record_format::libcall::{stack_effect, StackEffect};
use record_format::{RecordKind, TraceDir};

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

/// The process of each thread by its last `TASK` line (a thread without one is its own).
fn pids(dir: &TraceDir) -> std::collections::HashMap<u32, u32> {
    dir.tasks
        .iter()
        .filter_map(|l| match *l {
            record_format::task::TaskLine::Task { tid, pid, .. } => Some((tid, pid)),
            _ => None,
        })
        .collect()
}

fn time_point(p: TimePoint, first: u64) -> u64 {
    match p {
        TimePoint::Elapsed(ns) => first.saturating_add(ns),
        TimePoint::Absolute(ns) => ns,
    }
}

impl<'d> Core<'d> {
    /// Opens the walk of `dir`: the merge with the filters of `cfg` compiled, `-r` set.
    pub fn new(dir: &'d TraceDir, cfg: &Config, policy: Policy) -> Core<'d> {
        let libcall_filter = matches!(policy.libcall, Libcall::Hidden | Libcall::HiddenExitDropped);
        let (mut merge, notices) = if cfg.no_libcall && !libcall_filter {
            // The filters must not hide library calls themselves (see Libcall::NotReported).
            let cfg = Config {
                no_libcall: false,
                ..cfg.clone()
            };
            open_merge(dir, &cfg)
        } else {
            open_merge(dir, cfg)
        };
        let first = merge.first_time();
        let (mut range, mut range_stop) = ((0, u64::MAX), None);
        if let Some(r) = cfg.time_range {
            // As uftrace, an elapsed start counts from the first function record, a stop
            // from the first record of the data (switches included: the perf files are read
            // for it only then).
            let stop_origin = || {
                let events = crate::perf::events_by_time(dir);
                super::sched::origin(&events, dir, &cfg.tids, (0, u64::MAX), first, false)
            };
            range = (
                r.start.map_or(0, |p| time_point(p, first)),
                r.stop.map_or(u64::MAX, |p| match p {
                    TimePoint::Elapsed(_) => time_point(p, stop_origin()),
                    TimePoint::Absolute(_) => time_point(p, first),
                }),
            );
            // uftrace closes unfinished calls at the stop value as written: an elapsed stop
            // is compared with absolute times, which leaves such calls out.
            range_stop = r.stop.map(|p| match p {
                TimePoint::Elapsed(ns) | TimePoint::Absolute(ns) => ns,
            });
            merge.set_range(range.0, range.1);
            merge.restart();
        }
        let no_filters = (merge.filters.is_empty()
            && !merge.filters.no_libcall
            && !cfg.start_disabled
            && cfg.size_filter.is_none())
            || !policy.filters;
        let plain = no_filters
            && cfg.depth.is_none()
            && (!cfg.no_libcall || policy.libcall == Libcall::Ignored)
            && policy.fixups == Fixups::Shown;
        let pids = pids(dir);
        let tasks = dir
            .data
            .iter()
            .map(|d| TaskCore {
                stack: {
                    let mut s = TaskStack::new(cfg.depth);
                    s.set_size_limit(cfg.size_filter.unwrap_or(0));
                    s
                },
                pid: pids.get(&d.tid).copied().unwrap_or(d.tid),
                allowed: cfg.tids.is_empty() || cfg.tids.contains(&d.tid),
                first_time: 0,
                last_time: 0,
                last_exit: 0,
                exits: 0,
                last_seen: 0,
                setjmp: 0,
                sched_out: None,
                session: None,
                sess_from: 1,
                sess_until: 0,
                exec_reset: false,
            })
            .collect();
        let perf = if policy.sched {
            crate::perf::events_by_time(dir)
        } else {
            Vec::new()
        };
        let perf_until = perf.len();
        Core {
            merge,
            tasks,
            policy,
            enabled: !(cfg.start_disabled && policy.triggers),
            setjmp: 0,
            pending: None,
            deferred_execs: Vec::new(),
            exec_due: u64::MAX,
            exec_reset_any: false,
            fixups: Vec::new(),
            range,
            range_stop,
            no_filters,
            plain,
            no_libcall: cfg.no_libcall,
            perf,
            perf_next: 0,
            perf_until,
            sched_min: cfg.time_filter.unwrap_or(0),
            sched_all: false,
            notices,
        }
    }

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

    /// Applies the pending exec or longjmp, if any.
    #[inline]
    pub(super) fn apply_pending(&mut self) {
        if let Some((ti, e)) = self.pending.take() {
            self.apply(ti, e);
        }
    }

    /// Takes the pending exec or longjmp of the entry just stepped and applies it; returns
    /// it (replay moves its display depth along).
    pub fn take_jump(&mut self) -> Option<StackEffect> {
        let (_, e) = self.pending?;
        self.apply_pending();
        Some(e)
    }

    /// Forgets the pending exec or longjmp (the look-ahead's skipped entries).
    pub(super) fn drop_pending(&mut self) {
        self.pending = None;
    }

    /// `--no-libcall`.
    pub fn no_libcall(&self) -> bool {
        self.no_libcall
    }

    /// Whether the entry just stepped has a pending exec or longjmp.
    pub fn jump_pending(&self) -> bool {
        self.pending.is_some()
    }

    /// Empties task `ti`'s stack after an exec.
    fn exec_task(&mut self, ti: usize) {
        let resets = self.policy.exec_resets_filters;
        let t = &mut self.tasks[ti];
        t.stack.exec();
        if resets {
            t.stack.reset_filters();
        }
        t.exec_reset = true;
        self.exec_reset_any = true;
    }

    /// Empties the stacks of the threads of `pid` other than `ti` (the exec'ing one).
    fn exec_others(&mut self, pid: u32, ti: usize) {
        for i in 0..self.tasks.len() {
            if i != ti && self.tasks[i].pid == pid {
                self.exec_task(i);
            }
        }
    }

    /// Applies the deferred execs whose new image started at or before `time` (`u64::MAX`:
    /// all of them, at the end of the data): the old image's threads are gone from there.
    pub fn apply_due_execs(&mut self, time: u64) {
        let mut i = 0;
        while i < self.deferred_execs.len() {
            let (pid, at, ti) = self.deferred_execs[i];
            if at <= time {
                self.deferred_execs.swap_remove(i);
                self.exec_others(pid, ti);
            } else {
                i += 1;
            }
        }
        self.exec_due = self
            .deferred_execs
            .iter()
            .map(|e| e.1)
            .min()
            .unwrap_or(u64::MAX);
    }

    /// The tasks whose stack an exec emptied since the last call (replay starts their
    /// display depth over).
    pub fn take_exec_resets(&mut self) -> Vec<usize> {
        if !std::mem::take(&mut self.exec_reset_any) {
            return Vec::new();
        }
        let tasks = self.tasks.iter_mut().enumerate();
        tasks
            .filter_map(|(i, t)| std::mem::take(&mut t.exec_reset).then_some(i))
            .collect()
    }

    /// The stack change of an entry of the exec/setjmp/longjmp families.
    fn apply(&mut self, ti: usize, e: StackEffect) {
        let policy = self.policy;
        let pid = self.tasks[ti].pid;
        if e == StackEffect::Exec {
            // The new image replaces every thread of the process: the calls other threads
            // had open are gone too (a thread's exec ends them all, and the new image runs
            // in the leader's tid). But the other threads run on until the kernel ends them
            // in the exec (the leader may still return from a call and enter another after
            // the thread's exec entry): their stacks are emptied where the new image's
            // session starts, when the data has it.
            let (tid, time) = (self.merge.tid(ti), self.tasks[ti].last_time);
            let next = self.merge.sym.session_at(tid, time).map(|(_, next)| next);
            self.exec_task(ti);
            match next {
                Some(at) if at != u64::MAX => {
                    self.deferred_execs.push((pid, at, ti));
                    self.exec_due = self.exec_due.min(at);
                }
                _ => self.exec_others(pid, ti),
            }
            return;
        }
        let t = &mut self.tasks[ti];
        match e {
            StackEffect::Setjmp if policy.setjmp == Setjmp::PerTask => {
                t.setjmp = t.stack.open_calls();
            }
            StackEffect::Longjmp => match policy.setjmp {
                Setjmp::Global => t.stack.longjmp_to(self.setjmp),
                Setjmp::PerTask if t.setjmp > 0 => t.stack.longjmp_to(t.setjmp),
                Setjmp::PerTask => {}
            },
            _ => {}
        }
    }

    /// The stack effect of a function (cached per id).
    #[inline]
    pub fn fixup(&mut self, func: FuncId) -> Option<StackEffect> {
        let i = func as usize;
        if self.fixups.len() <= i {
            self.fixups.resize(i + 1, None);
        }
        *self.fixups[i].get_or_insert_with(|| stack_effect(&self.merge.sym.func(func).name))
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

    /// Closes the innermost call still open in task `ti` at the end of the data (as
    /// [`Policy::unfinished`] says), innermost first; `None` once none is left. Calls never
    /// entered in the data (or hidden, with [`Policy::unfinished_shown_only`]) are skipped.
    pub fn close_next(&mut self, ti: usize) -> Option<Unclosed> {
        self.apply_pending();
        self.apply_due_execs(u64::MAX);
        let t = &mut self.tasks[ti];
        if !t.allowed {
            return None;
        }
        let last = match self.policy.unfinished {
            Unfinished::Open => return None,
            Unfinished::RangeStopOrLast => self.range_stop.unwrap_or(t.last_time),
            Unfinished::LastExit => self.range_stop.unwrap_or(t.last_exit),
            Unfinished::LastSeenCapped => {
                self.range_stop.map_or(t.last_seen, |s| s.min(t.last_seen))
            }
        };
        loop {
            let closed = t.stack.close_open(last)?;
            let Some(c) = closed else { continue };
            if self.policy.unfinished_shown_only && !t.stack.exit() {
                continue;
            }
            return Some(Unclosed {
                task: ti,
                closed: c,
                slot: t.stack.open_calls(),
                time: last,
            });
        }
    }
}

#[cfg(test)]
#[path = "core_tests.rs"]
mod tests;
