//! The one time-ordered walk of the analysis and its drivers.
//!
//! ```text
//!             ┌── core::Core (Merge, per-task TaskStack, --tid, -r, triggers, fix-ups,
//! TraceDir ──▶│    LOST resync, unfinished calls, perf scheduling) ── Step ──┐
//!             └── fast.rs: direct per-task reader ──▶ Core::step ──────────┤
//!                                                                           ▼
//!   Walker (Visitor: report, graph + tui, task graph, histogram)   timed::Walk (Sink: chrome,
//!   output::replay (lines, with leaf::Core::leaf look-ahead)       flame, graphviz, mermaid)
//! ```
//!
//! - [`core`]: the walk itself. [`core::Core::next_step`] hands over one [`core::Step`] (Entry /
//!   Exit / Event / Lost / Sched) at a time, in time order, after the call stack
//!   ([`crate::callstack`]) paired the record and the filters decided whether it is shown.
//! - [`policy`]: where uftrace's readers differ (fix-ups of hidden entries, exec and the
//!   filters, setjmp per task or global, `--no-libcall`, closing unfinished calls), one named
//!   setting each; the walk's consumers pick [`policy::Policy::REPLAY`], `ANALYSIS`,
//!   `TASK_REPORT`, `DUMP` or `FLAT`.
//! - [`leaf`]: replay's one-record look-ahead (an entry and its exit printed as `f();`).
//! - `sched`: the perf context switches merged in by time (replay, dump; report, graph and
//!   the task graph with [`Walker::with_sched`]; the direct reader merges each task's own).
//! - [`Walker`] (this module): the analysis consumer, handing entries, finished calls and
//!   LOST to a [`Visitor`]; `fast.rs` holds its fast paths (a task's file read directly when
//!   the visitor does not depend on the order across tasks, and entries/exits paired in one
//!   go when no filter can hide a call).
//! - [`timed`]: the dump consumer, handing shown entries and exits with their payloads to a
//!   [`timed::Sink`].
//!
//! For the [`Walker`]: per task the [`TaskStack`](crate::callstack::TaskStack) keeps one
//! slot per open call holding its address, entry time and the time spent in its direct
//! children; an exit turns the slot into a finished call (total time, self time = total
//! minus children). Every direct child counts for its parent's self time, even one the
//! filters hide (`-N`, `-D`, `--no-libcall`), as in uftrace. Special cases follow uftrace's
//! reader: a fork child starts inside its parent's calls (slots it never entered have
//! address 0); `exec*` empties the stack; `longjmp` returns to the depth of the last
//! `setjmp`; after LOST records the stack is re-synchronised from the next record's depth.
//! Calls still open when a task's data ends are finished at the task's last timestamp (or
//! the end of `-r`) and reported with [`Call::unfinished`] set, innermost first.
//!
//! Memory stays flat: nothing but the open slots of each task is kept.
//!
//! ```ignore
//! struct Count(u64);
//! impl Visitor for Count {
//!     fn exit(&mut self, _: &View<'_, '_>, call: &Call) { self.0 += call.total; }
//! }
//! let mut walker = Walker::new(&dir, &cfg)?;
//! for n in walker.notices() { println!("Usage: {n}"); }
//! walker.run(&mut Count(0))?;
//! ```

use self::core::{Core, Step, TaskCore};
use crate::callstack::Closed;
pub use crate::callstack::Frame;
use crate::config::Config;
use crate::merge::{Head, Merge};
use crate::symbols::{FuncId, FuncInfo, Symbolizer};
use crate::Result;
use policy::Policy;
use record_format::TraceDir;

pub mod core;
mod fast;
pub mod leaf;
pub mod policy;
pub mod sched;
pub mod timed;

/// A function entry that passed the filters.
#[derive(Debug, Clone, Copy)]
pub struct Entry {
    /// Index of the task (`TraceDir::data` order).
    pub task: usize,
    pub func: FuncId,
    pub addr: u64,
    pub time: u64,
    /// Index of the call's slot in [`View::stack`] (0 = outermost).
    pub depth: usize,
}

/// A finished call that passed the filters.
#[derive(Debug, Clone, Copy)]
pub struct Call {
    pub task: usize,
    /// The function named by the exit record (for unfinished calls, by the entry address).
    pub func: FuncId,
    /// Address of the call's entry (0 if it was entered before the data starts).
    pub addr: u64,
    /// Address in the exit record (the entry's address for unfinished calls).
    pub exit_addr: u64,
    /// Duration in nanoseconds.
    pub total: u64,
    /// Time spent in direct children; `total - child` is the self time.
    pub child: u64,
    /// Time of the exit (or the time the call was closed at, for unfinished calls).
    pub time: u64,
    /// Index of the call's slot (0 = outermost).
    pub depth: usize,
    /// An outer open call of the same task has the same address (uftrace counts only the
    /// outermost of recursive calls in totals); `false` when [`Visitor::wants_recursive`]
    /// is not.
    pub recursive: bool,
    /// Still open at the end of the task's data.
    pub unfinished: bool,
}

impl Call {
    /// Self time: total minus direct children (never negative).
    pub fn self_time(&self) -> u64 {
        self.total.saturating_sub(self.child)
    }
}

/// What a visitor may look at while the walk runs.
pub struct View<'a, 'd> {
    merge: &'a Merge<'d>,
    tasks: &'a [TaskCore],
}

impl View<'_, '_> {
    /// The symbol of a function id.
    pub fn func(&self, id: FuncId) -> &FuncInfo {
        self.merge.sym.func(id)
    }

    /// The (demangled) name of a function id.
    pub fn name(&self, id: FuncId) -> &str {
        &self.merge.sym.func(id).name
    }

    pub fn tid(&self, task: usize) -> u32 {
        self.merge.tid(task)
    }

    /// The session (index into `TraceDir::sessions`) of the record being visited (for
    /// unfinished calls: of the task's last record).
    pub fn session(&self, task: usize) -> Option<usize> {
        self.tasks[task].session
    }

    /// The open calls of the task, outermost first. During [`Visitor::exit`] the exiting
    /// call is no longer part of it.
    pub fn stack(&self, task: usize) -> &[Frame] {
        self.tasks[task].stack.open()
    }

    /// The symbolizer (for names of frames, modules, session names).
    pub fn symbols(&self) -> &Symbolizer<'_> {
        &self.merge.sym
    }

    /// The task name (basename of the executable of its session).
    pub fn comm(&self, task: usize) -> &str {
        self.tasks[task]
            .session
            .map_or("", |s| self.merge.sym.session_comm(s))
    }
}

/// What the walk saw of one task (see [`Walker::task_summary`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct TaskSummary {
    pub tid: u32,
    /// Times of the first and last records of the task (0 when it had none).
    pub first: u64,
    pub last: u64,
    /// Finished calls reported.
    pub exits: u64,
    /// Passed `--tid`.
    pub allowed: bool,
}

/// Receives the calls of a walk. All methods default to doing nothing.
pub trait Visitor {
    /// Whether [`Visitor::entry`] is wanted (saves a call per entry when not).
    fn wants_entries(&self) -> bool {
        true
    }
    fn entry(&mut self, _view: &View<'_, '_>, _entry: &Entry) {}
    /// Whether [`Call::recursive`] is wanted (it scans the open calls at every exit; when
    /// not, it is `false`).
    fn wants_recursive(&self) -> bool {
        true
    }
    fn exit(&mut self, _view: &View<'_, '_>, _call: &Call) {}
    /// `count` records of the task were lost (0 when unknown).
    fn lost(&mut self, _view: &View<'_, '_>, _task: usize, _count: u64) {}
    /// A `linux:schedule` call ended inside a shown call of the task: switched out for
    /// `total` ns, by a pre-emption when `preempted` (only with [`Walker::with_sched`]).
    fn sched(&mut self, _view: &View<'_, '_>, _task: usize, _total: u64, _preempted: bool) {}
}

/// The walker over one data directory: the core walk with the analysis [`Policy`], its
/// steps handed to a [`Visitor`].
pub struct Walker<'d> {
    dir: &'d TraceDir,
    core: Core<'d>,
    /// Read each task's file directly, task after task (see [`Walker::task_order`]).
    direct: bool,
    /// Nothing reorders records at read time (`-t`, `-r`, `-C`, `time=`) and no trigger
    /// switches tracing for all tasks: the direct reader may be used.
    direct_ok: bool,
    /// Also report the hidden kernel calls that never returned
    /// ([`Walker::with_open_kernel_calls`]).
    open_kernel_calls: bool,
}

impl<'d> Walker<'d> {
    /// Opens the walk: compiles the filters of `cfg` against the trace's functions. The
    /// `Usage:` complaints about them are in [`Walker::notices`].
    pub fn new(dir: &'d TraceDir, cfg: &Config) -> Result<Walker<'d>> {
        // Arguments are not shown.
        let cfg_noargs = Config {
            args: Vec::new(),
            retvals: Vec::new(),
            ..cfg.clone()
        };
        let core = Core::new(dir, &cfg_noargs, Policy::ANALYSIS);
        // Kernel records come through the merge, nested into the tasks' streams.
        let direct_ok = cfg.time_filter.is_none()
            && dir.kernel.is_none()
            && cfg.time_range.is_none()
            && cfg.caller.is_empty()
            && cfg.triggers.is_empty();
        Ok(Walker {
            dir,
            core,
            direct: false,
            direct_ok,
            open_kernel_calls: false,
        })
    }

    /// Switches to the walk of `report --task` ([`Policy::TASK_REPORT`]): entries are not
    /// looked at (no filters, no exec/longjmp fix-ups, `--no-libcall` ignored), every exit is
    /// reported, and unfinished calls are closed at the task's last exit.
    pub fn exits_only(mut self) -> Self {
        self.core.policy = Policy::TASK_REPORT;
        self
    }

    /// Merges the perf context switches of the trace (`perf-cpu*.dat`), as uftrace's report
    /// does: the time a task is switched out counts as callee time of its running call, and
    /// each switch inside a shown call is handed to [`Visitor::sched`]. A switch concerns its
    /// task only: the direct reader merges each task's own into its records.
    pub fn with_sched(mut self) -> Self {
        self.core.policy.sched = true;
        self.core.perf = crate::perf::events_by_time(self.dir);
        self.core.perf_next = 0;
        self.core.perf_until = self.core.perf.len();
        self
    }

    /// `--event-full`: also the context switches outside every call are handed to
    /// [`Visitor::sched`] (uftrace's report then has rows for them).
    pub fn with_event_full(mut self, on: bool) -> Self {
        self.core.sched_all = on;
        self
    }

    /// Also hands over, as unfinished calls after a task's own, the kernel calls outside
    /// every user function that never returned (hidden otherwise), as uftrace's report
    /// counts them: the process's `exit_group` with the calls still open inside it.
    pub fn with_open_kernel_calls(mut self) -> Self {
        self.open_kernel_calls = true;
        self
    }

    /// Declares that the visitor does not depend on the order of records *across* tasks
    /// (per-function statistics do not; a call graph whose children keep first-call order
    /// does). The walker may then read each task's file on its own, task after task, which is
    /// much faster than the time-ordered merge. Records of one task always come in order.
    /// With a single task, or options that need the merge, nothing changes.
    pub fn task_order(mut self) -> Self {
        self.direct = self.direct_ok;
        self
    }

    /// `Usage:` complaints about the filters (print them on stdout before the output).
    pub fn notices(&self) -> &[String] {
        &self.core.notices
    }

    /// The symbolizer (names of functions, sessions).
    pub fn symbols(&self) -> &Symbolizer<'d> {
        &self.core.merge.sym
    }

    /// Mutable access to the symbolizer (e.g. to list every function).
    pub fn symbols_mut(&mut self) -> &mut Symbolizer<'d> {
        &mut self.core.merge.sym
    }

    /// Per task (in `TraceDir::data` order): its times and number of calls, after [`run`].
    ///
    /// [`run`]: Walker::run
    pub fn task_summary(&self) -> Vec<TaskSummary> {
        self.core
            .tasks
            .iter()
            .enumerate()
            .map(|(i, t)| TaskSummary {
                tid: self.core.merge.tid(i),
                first: t.first_time,
                last: t.last_time,
                exits: t.exits,
                allowed: t.allowed,
            })
            .collect()
    }

    /// The task name (basename of the executable of its last session).
    pub fn comm(&self, task: usize) -> &str {
        self.core.tasks[task]
            .session
            .map_or("", |s| self.core.merge.sym.session_comm(s))
    }

    /// Timestamp of the first record of the trace.
    pub fn first_time(&self) -> u64 {
        self.core.merge.first_time()
    }

    /// Walks the whole trace, then reports the unfinished calls. Returns the warnings met
    /// while reading (broken or truncated data).
    pub fn run<V: Visitor + ?Sized>(&mut self, v: &mut V) -> Result<Vec<String>> {
        if self.direct {
            self.run_direct(v);
        } else {
            while let Some(step) = self.core.next_step() {
                self.visit(step, v);
            }
        }
        self.finish_remaining(v);
        Ok(std::mem::take(&mut self.core.merge.warnings))
    }

    /// Hands one step to the visitor.
    #[inline]
    fn visit<V: Visitor + ?Sized>(&mut self, step: Step, v: &mut V) {
        match step {
            Step::Entry(e) => {
                self.track_session(e.task, e.head.raw.time);
                if e.reported && v.wants_entries() {
                    let entry = Entry {
                        task: e.task,
                        func: e.head.func,
                        addr: e.head.raw.addr,
                        time: e.head.raw.time,
                        depth: e.slot,
                    };
                    v.entry(&self.view(), &entry);
                }
            }
            Step::Exit(x) => {
                self.track_session(x.task, x.head.raw.time);
                if x.reported {
                    self.report_exit(x.task, &x.head, x.closed, x.slot, v);
                }
            }
            Step::Lost { task, head, .. } => {
                // The task report counts exits only.
                if self.core.policy.filters {
                    v.lost(&self.view(), task, head.raw.addr);
                }
            }
            Step::Sched(s) => {
                if s.exit && s.visible {
                    v.sched(&self.view(), s.task, s.total, s.preempted);
                }
            }
            Step::Event { .. } => {}
        }
    }

    fn view(&self) -> View<'_, 'd> {
        View {
            merge: &self.core.merge,
            tasks: &self.core.tasks,
        }
    }

    /// Counts the exit `h` of task `ti` and reports its call `c`, closed at depth `depth`.
    #[inline(always)]
    fn report_exit<V: Visitor + ?Sized>(
        &mut self,
        ti: usize,
        h: &Head,
        c: Closed,
        depth: usize,
        v: &mut V,
    ) {
        let t = &mut self.core.tasks[ti];
        t.exits += 1;
        let call = Call {
            task: ti,
            func: h.func,
            addr: c.addr,
            exit_addr: h.raw.addr,
            total: c.total.max(c.child),
            child: c.child,
            time: h.raw.time,
            depth,
            recursive: v.wants_recursive() && t.recursive(depth, c.addr),
            unfinished: false,
        };
        v.exit(&self.view(), &call);
    }

    /// Closes the calls still open at the end of each task (uftrace's "remaining functions").
    fn finish_remaining<V: Visitor + ?Sized>(&mut self, v: &mut V) {
        for ti in 0..self.core.tasks.len() {
            while let Some(u) = self.core.close_next(ti) {
                let t = &self.core.tasks[ti];
                let c = u.closed;
                let recursive = t.recursive(u.slot, c.addr);
                // Named in the task's last session, like uftrace (an address from before an
                // exec may no longer resolve).
                let func = self.core.merge.sym.resolve(t.session, u.time, c.addr);
                let call = Call {
                    task: ti,
                    func,
                    addr: c.addr,
                    exit_addr: c.addr,
                    total: c.total,
                    child: c.child,
                    time: u.time,
                    depth: u.slot,
                    recursive,
                    unfinished: true,
                };
                v.exit(&self.view(), &call);
            }
            if self.open_kernel_calls && self.core.tasks[ti].allowed {
                self.finish_kernel_calls(ti, v);
            }
        }
    }

    /// Reports the hidden kernel calls of task `ti` that never returned.
    fn finish_kernel_calls<V: Visitor + ?Sized>(&mut self, ti: usize, v: &mut V) {
        let session = self.core.tasks[ti].session;
        let open: Vec<_> = self.core.merge.open_kernel_calls(ti).collect();
        for k in open {
            let func = self.core.merge.sym.resolve(session, k.time, k.addr);
            let call = Call {
                task: ti,
                func,
                addr: k.addr,
                exit_addr: k.addr,
                total: k.total,
                child: k.child,
                time: k.time,
                depth: k.depth,
                recursive: false,
                unfinished: true,
            };
            v.exit(&self.view(), &call);
        }
    }
}
