//! A streaming walk over the calls of a trace, for the commands that aggregate (`report`,
//! `graph`, `dump`'s graph formats, histograms).
//!
//! Records come in time order from [`Merge`] (which already applied `-r`, `-t`, `time=` and
//! `-C`). Per task the walker keeps a [`TaskStack`] (uftrace's call-stack bookkeeping, see
//! [`crate::callstack`]): one slot per open call
//! holding its address, entry time and the time spent in its direct children; an exit turns the
//! slot into a finished call (total time, self time = total minus children). Every direct
//! child counts for its parent's self time, even one the filters hide (`-N`, `-D`,
//! `--no-libcall`), as in uftrace. The filters (`-F -N -H -D -T`, `--no-libcall`, `--tid`)
//! then decide which entries and exits are *reported* to the [`Visitor`].
//!
//! Special cases follow uftrace's reader: a fork child starts inside its parent's calls (slots
//! it never entered have address 0); `exec*` empties the stack; `longjmp` returns to the depth
//! of the last `setjmp`; after LOST records the stack is re-synchronised from the next record's
//! depth. Calls still open when a task's data ends are finished at the task's last timestamp
//! (or the end of `-r`) and reported with [`Call::unfinished`] set, innermost first.
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

pub use crate::callstack::Frame;
use crate::callstack::{Closed, TaskStack, Verdict};
use crate::config::{Config, TimePoint};
use crate::filter::FuncFilter;
use crate::merge::{Head, Merge};
use crate::symbols::{FuncId, FuncInfo, Symbolizer};
use crate::Result;
use record_format::libcall::{stack_effect, StackEffect};
use record_format::{RecordKind, TraceDir};

mod fast;
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
    /// outermost of recursive calls in totals).
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
    tasks: &'a [TaskState],
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
    fn exit(&mut self, _view: &View<'_, '_>, _call: &Call) {}
    /// `count` records of the task were lost (0 when unknown).
    fn lost(&mut self, _view: &View<'_, '_>, _task: usize, _count: u64) {}
}

#[derive(Debug)]
struct TaskState {
    stack: TaskStack,
    allowed: bool,
    /// Times of the task's first and last records (non-LOST).
    first_time: u64,
    last_time: u64,
    /// Exits reported to the visitor.
    exits: u64,
    /// Time of the last exit reported (`exits_only` mode).
    last_exit: u64,
    /// The session of the task's last record, valid for times in [sess_from, sess_until).
    session: Option<usize>,
    sess_from: u64,
    sess_until: u64,
}

impl TaskState {
    /// Whether some outer open call has the same address as slot `i`.
    fn recursive(&self, i: usize, addr: u64) -> bool {
        self.stack.slots()[..i].iter().any(|s| s.addr == addr)
    }
}

/// The walker over one data directory.
pub struct Walker<'d> {
    dir: &'d TraceDir,
    merge: Merge<'d>,
    tasks: Vec<TaskState>,
    enabled: bool,
    setjmp_count: usize,
    /// End of `-r` (absolute ns), closing unfinished calls.
    range_stop: Option<u64>,
    no_libcall: bool,
    /// Report every exit, whatever the filters, without stack fix-ups (`report --task`).
    exits_only: bool,
    /// Read each task's file directly, task after task (see [`Walker::task_order`]).
    direct: bool,
    /// Nothing reorders records at read time (`-t`, `-r`, `-C`, `time=`) and no trigger
    /// switches tracing for all tasks: the direct reader may be used.
    direct_ok: bool,
    /// No filter, trigger or hide pattern: every function's decision is the default.
    no_filters: bool,
    /// Nothing can hide a call (no filter, trigger, `-D`, `--no-libcall`): every entry and
    /// exit is reported and only the stack fix-ups remain (see [`Walker::plain_step`]).
    plain: bool,
    /// Per function: its stack effect, once known.
    fixups: Vec<Option<Option<StackEffect>>>,
    notices: Vec<String>,
}

impl<'d> Walker<'d> {
    /// Opens the walk: compiles the filters of `cfg` against the trace's functions. The
    /// `Usage:` complaints about them are in [`Walker::notices`].
    pub fn new(dir: &'d TraceDir, cfg: &Config) -> Result<Walker<'d>> {
        // --no-libcall is applied here, after the filters (whose own handling of it would
        // keep an exec or longjmp from changing the stack). Arguments are not shown.
        let (mut merge, notices) = crate::merge::open_merge(
            dir,
            &Config {
                no_libcall: false,
                args: Vec::new(),
                retvals: Vec::new(),
                ..cfg.clone()
            },
        );
        let first = merge.first_time();
        let mut range_stop = None;
        if let Some(r) = cfg.time_range {
            let at = |p: TimePoint| match p {
                TimePoint::Elapsed(ns) => first.saturating_add(ns),
                TimePoint::Absolute(ns) => ns,
            };
            let start = r.start.map_or(0, at);
            let stop = r.stop.map_or(u64::MAX, at);
            // uftrace closes unfinished calls at the stop value as written: an elapsed
            // stop is compared with absolute times, which leaves such calls out.
            range_stop = r.stop.map(|p| match p {
                TimePoint::Elapsed(ns) | TimePoint::Absolute(ns) => ns,
            });
            merge.set_range(start, stop);
            merge.restart();
        }
        let no_filters = merge.filters.is_empty();
        // Kernel records come through the merge, nested into the tasks' streams.
        let direct_ok = cfg.time_filter.is_none()
            && dir.kernel.is_none()
            && cfg.time_range.is_none()
            && cfg.caller.is_empty()
            && cfg.triggers.is_empty();
        let tasks = dir
            .data
            .iter()
            .map(|d| TaskState {
                stack: TaskStack::new(cfg.depth),
                allowed: cfg.tids.is_empty() || cfg.tids.contains(&d.tid),
                first_time: 0,
                last_time: 0,
                exits: 0,
                last_exit: 0,
                session: None,
                sess_from: 1,
                sess_until: 0,
            })
            .collect();
        Ok(Walker {
            dir,
            merge,
            tasks,
            enabled: true,
            setjmp_count: 0,
            range_stop,
            no_libcall: cfg.no_libcall,
            exits_only: false,
            direct: false,
            direct_ok,
            no_filters,
            plain: no_filters && cfg.depth.is_none() && !cfg.no_libcall,
            fixups: Vec::new(),
            notices,
        })
    }

    /// Switches to the walk of `report --task`: entries are not looked at (no filters, no
    /// exec/longjmp fix-ups, `--no-libcall` ignored), every exit is reported, and unfinished
    /// calls are closed at the task's last exit (as uftrace's task report does).
    pub fn exits_only(mut self) -> Self {
        self.exits_only = true;
        self
    }

    fn exit_only<V: Visitor + ?Sized>(
        &mut self,
        ti: usize,
        h: &Head,
        closed: Option<Closed>,
        v: &mut V,
    ) {
        let (RecordKind::Exit, Some(c)) = (h.raw.kind, closed) else {
            return;
        };
        let t = &mut self.tasks[ti];
        let i = t.stack.open_calls();
        t.last_exit = h.raw.time;
        self.report_exit(ti, h, c, i, v);
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
        let t = &mut self.tasks[ti];
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
            recursive: t.recursive(depth, c.addr),
            unfinished: false,
        };
        let view = View {
            merge: &self.merge,
            tasks: &self.tasks,
        };
        v.exit(&view, &call);
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
        &self.notices
    }

    /// The symbolizer (names of functions, sessions).
    pub fn symbols(&self) -> &Symbolizer<'d> {
        &self.merge.sym
    }

    /// Mutable access to the symbolizer (e.g. to list every function).
    pub fn symbols_mut(&mut self) -> &mut Symbolizer<'d> {
        &mut self.merge.sym
    }

    /// Per task (in `TraceDir::data` order): its times and number of calls, after [`run`].
    ///
    /// [`run`]: Walker::run
    pub fn task_summary(&self) -> Vec<TaskSummary> {
        self.tasks
            .iter()
            .enumerate()
            .map(|(i, t)| TaskSummary {
                tid: self.merge.tid(i),
                first: t.first_time,
                last: t.last_time,
                exits: t.exits,
                allowed: t.allowed,
            })
            .collect()
    }

    /// The task name (basename of the executable of its last session).
    pub fn comm(&self, task: usize) -> &str {
        self.tasks[task]
            .session
            .map_or("", |s| self.merge.sym.session_comm(s))
    }

    /// Timestamp of the first record of the trace.
    pub fn first_time(&self) -> u64 {
        self.merge.first_time()
    }

    /// Walks the whole trace, then reports the unfinished calls. Returns the warnings met
    /// while reading (broken or truncated data).
    pub fn run<V: Visitor + ?Sized>(&mut self, v: &mut V) -> Result<Vec<String>> {
        if self.direct {
            self.run_direct(v);
        } else {
            while let Some((ti, h)) = self.merge.pop() {
                if self.tasks[ti].allowed {
                    if matches!(h.raw.kind, RecordKind::Entry | RecordKind::Exit) {
                        self.track_session(ti, h.raw.time);
                    }
                    self.step(ti, h, v);
                }
            }
        }
        self.finish_remaining(v);
        Ok(std::mem::take(&mut self.merge.warnings))
    }

    /// One record of task `ti` (in time order within the task).
    #[inline]
    fn step<V: Visitor + ?Sized>(&mut self, ti: usize, h: Head, v: &mut V) {
        if h.raw.kind == RecordKind::Event {
            return;
        }
        if h.raw.kind != RecordKind::Lost {
            let t = &mut self.tasks[ti];
            if t.first_time == 0 {
                t.first_time = h.raw.time;
            }
            t.last_time = h.raw.time;
        }
        let closed = self.consume(ti, &h);
        if self.exits_only {
            self.exit_only(ti, &h, closed, v);
            return;
        }
        if self.plain {
            self.plain_step(ti, &h, closed, v);
            return;
        }
        match h.raw.kind {
            RecordKind::Lost => {
                let view = View {
                    merge: &self.merge,
                    tasks: &self.tasks,
                };
                v.lost(&view, ti, h.raw.addr);
            }
            RecordKind::Entry => {
                let ff = if self.no_filters {
                    FuncFilter::default()
                } else {
                    self.merge.decide(h.func)
                };
                let idx = self.tasks[ti].stack.open_calls().saturating_sub(1);
                if !self.fstack_entry(ti, &h, &ff) {
                    self.tasks[ti].stack.hide(idx);
                    return;
                }
                // --no-libcall hides library calls only after the filters saw them: an
                // exec or longjmp still changes the stack (as in uftrace).
                let libcall = self.no_libcall && self.merge.sym.func(h.func).is_plt;
                if !libcall && v.wants_entries() {
                    let entry = Entry {
                        task: ti,
                        func: h.func,
                        addr: h.raw.addr,
                        time: h.raw.time,
                        depth: idx,
                    };
                    let view = View {
                        merge: &self.merge,
                        tasks: &self.tasks,
                    };
                    v.entry(&view, &entry);
                }
                let stack = &mut self.tasks[ti].stack;
                match stack.take_jump(idx) {
                    Some(StackEffect::Exec) => stack.exec(),
                    Some(StackEffect::Longjmp) => stack.longjmp_to(self.setjmp_count),
                    _ => {}
                }
            }
            RecordKind::Exit => {
                let i = self.tasks[ti].stack.open_calls();
                let shown = self.tasks[ti].stack.exit();
                if !self.enabled || !shown {
                    return;
                }
                if self.no_libcall && self.merge.sym.func(h.func).is_plt {
                    return;
                }
                let c = closed.unwrap_or_default();
                self.report_exit(ti, &h, c, i, v);
            }
            RecordKind::Event => {}
        }
    }

    /// Closes the calls still open at the end of each task (uftrace's "remaining functions").
    fn finish_remaining<V: Visitor + ?Sized>(&mut self, v: &mut V) {
        for ti in 0..self.tasks.len() {
            let t = &self.tasks[ti];
            if !t.allowed || t.stack.open_calls() == 0 {
                continue;
            }
            let task_last = if self.exits_only {
                t.last_exit
            } else {
                t.last_time
            };
            let last = self.range_stop.unwrap_or(task_last);
            while let Some(closed) = self.tasks[ti].stack.close_open(last) {
                let Some(c) = closed else { continue };
                let t = &self.tasks[ti];
                let i = t.stack.open_calls();
                let recursive = t.recursive(i, c.addr);
                // Named in the task's last session, like uftrace (an address from before an
                // exec may no longer resolve).
                let func = self.merge.sym.resolve(t.session, last, c.addr);
                let call = Call {
                    task: ti,
                    func,
                    addr: c.addr,
                    exit_addr: c.addr,
                    total: c.total,
                    child: c.child,
                    time: last,
                    depth: i,
                    recursive,
                    unfinished: true,
                };
                let view = View {
                    merge: &self.merge,
                    tasks: &self.tasks,
                };
                v.exit(&view, &call);
            }
        }
    }

    /// Pairing of every record (a LOST record, like uftrace's reader, also starts the task).
    #[inline]
    fn consume(&mut self, ti: usize, h: &Head) -> Option<Closed> {
        let stack = &mut self.tasks[ti].stack;
        if h.raw.kind == RecordKind::Lost {
            stack.align(&h.raw);
        }
        stack.consume(&h.raw, h.func)
    }

    /// The filters at a function entry; `false` when the entry is not reported.
    fn fstack_entry(&mut self, ti: usize, h: &Head, ff: &FuncFilter) -> bool {
        let has_filter = self.merge.filters.has_filter;
        let effect = self.fixup(h.func);
        let stack = &mut self.tasks[ti].stack;
        // setjmp marks the level longjmp returns to, whatever the filters hide below -N.
        if effect == Some(StackEffect::Setjmp) && !stack.inside_notrace() {
            self.setjmp_count = stack.open_calls();
        }
        stack.enter(ff, has_filter, ff.hide, effect, Some(&mut self.enabled)) == Verdict::Shown
    }

    /// The stack effect of a function (cached per id).
    #[inline]
    fn fixup(&mut self, func: FuncId) -> Option<StackEffect> {
        let i = func as usize;
        if self.fixups.len() <= i {
            self.fixups.resize(i + 1, None);
        }
        *self.fixups[i].get_or_insert_with(|| stack_effect(&self.merge.sym.func(func).name))
    }
}
