//! `replay`: the call graph as indented lines. It reads the trace through the one walk
//! ([`Core`], [`Policy::REPLAY`]; `--flat` with [`Policy::FLAT`]) and keeps beside it only
//! what the tree layout needs and uftrace's reader keeps too — a display-depth counter, the
//! depth a fork child starts at, the setjmp depth — because users compare outputs line by
//! line, and the depth of a line after fork, exec, longjmp or a filter depends on that
//! bookkeeping rather than on the call tree alone.
//!
//! For each shown entry the walk's look-ahead ([`Core::leaf`]) tells whether the next record
//! shown is the entry's own exit (the records hidden in between consumed): the call is then
//! printed as a leaf `f();`. External data (`extern.dat`) is interleaved by time.
//! [`printer`] writes the lines.

use crate::callstack::Verdict;
use crate::config::{Config, ReplayOptions};
use crate::merge::Merge;
use crate::walk::core::{Core, EntryStep, Step};
use crate::walk::policy::Policy;
mod lines;
pub mod printer;
mod sched;
use printer::{LineCtx, ReplayPrinter};

use crate::symbols::FuncId;
use crate::Result;
use record_format::libcall::StackEffect;
use record_format::{RecordKind, TraceDir};
use std::io::Write;

/// What the tree layout keeps of a task beside the walk's call stack.
#[derive(Debug, Default)]
struct Layout {
    display_depth: i64,
    display_depth_set: bool,
    fork_display_depth: i64,
    /// A `linux:sched-out` line was printed: the switch-in shows as `linux:sched-in`.
    sched_split: bool,
    /// That switch-out was a pre-emption.
    split_preempted: bool,
    /// Time of the record being shown and of the one before (`time`, `delta` columns).
    timestamp: u64,
    timestamp_last: u64,
    ppid_task: Option<usize>,
    /// Time of the `TASK` line of the task's process leader: before it, a switch line's
    /// module is `[unknown]` (as uftrace, which finds no session then).
    known_from: u64,
}

/// The display bookkeeping of every task, kept in step with the walk.
struct Layouts {
    tasks: Vec<Layout>,
    /// The display depth longjmp returns to (one for all tasks, as uftrace keeps).
    setjmp_depth: i64,
}

impl Layouts {
    /// Follows a step of the walk (shown or not): a fork child starts at the depth its
    /// parent's fork was shown at; LOST forgets the depth; the entry bookkeeping.
    fn step(&mut self, step: &Step) {
        let (ti, first) = match step {
            Step::Entry(e) => (e.task, e.first),
            Step::Exit(x) => (x.task, x.first),
            Step::Lost { task, first, .. } => (*task, *first),
            Step::Event { .. } | Step::Sched(_) => return,
        };
        if first {
            let fork_depth = self.tasks[ti]
                .ppid_task
                .map_or(0, |p| self.tasks[p].fork_display_depth);
            if fork_depth != 0 {
                let t = &mut self.tasks[ti];
                t.display_depth = fork_depth;
                t.display_depth_set = true;
            }
        }
        match step {
            Step::Lost { .. } => self.tasks[ti].display_depth_set = false,
            Step::Entry(e) => self.entry(e),
            _ => {}
        }
    }

    fn entry(&mut self, e: &EntryStep) {
        let t = &mut self.tasks[e.task];
        if e.setjmp {
            self.setjmp_depth = t.display_depth + 1;
        }
        if e.verdict != Verdict::Outside && e.effect == Some(StackEffect::Fork) {
            t.fork_display_depth = t.display_depth + 1;
        }
        if e.verdict == Verdict::Disabled && e.actions.trace_off {
            t.display_depth_set = false;
        }
        if e.verdict == Verdict::Shown && !t.display_depth_set {
            t.display_depth = e.slot as i64;
            t.display_depth_set = true;
        }
    }
}

/// The replay engine over one data directory.
pub struct Engine<'d, 'w> {
    cfg: &'d Config,
    core: Core<'d>,
    layout: Layouts,
    printer: ReplayPrinter<'w>,
    last_task: Option<usize>,
    /// The name of the line being printed (reused buffer).
    name: String,
}

impl<'d, 'w> Engine<'d, 'w> {
    pub fn new(
        dir: &'d TraceDir,
        cfg: &'d Config,
        opts: &ReplayOptions,
        out: &'w mut dyn Write,
    ) -> Result<Engine<'d, 'w>> {
        let policy = if opts.flat {
            Policy::FLAT
        } else {
            Policy::REPLAY
        };
        // Context switches show as `/* linux:schedule */` lines, unless asked not to.
        let policy = Policy {
            // With --no-sched or --no-event they still break leaves (`usleep() { }`), as
            // uftrace's hidden records do.
            sched: true,
            ..policy
        };
        let mut core = Core::new(dir, cfg, policy);
        core.sched_all = cfg.event_full && !opts.flat;
        let mut printer = ReplayPrinter::new(out, opts.clone(), 0);
        for n in &core.notices {
            writeln!(printer.out(), "Usage: {n}")?;
        }
        let first = core.merge.first_time();
        let origin = core.elapsed_origin(dir, &cfg.tids, first);
        printer.set_first_time(origin);
        let ppids = parent_tasks(dir);
        let tasks = (0..dir.data.len())
            .map(|i| Layout {
                known_from: sched::known_from(dir, core.tasks[i].pid),
                // Shown calls keep their real depth after a range start or `--disable`.
                display_depth_set: cfg.time_range.is_none_or(|r| r.start.is_none())
                    && !cfg.start_disabled,
                ppid_task: ppids[i],
                ..Layout::default()
            })
            .collect();
        Ok(Engine {
            cfg,
            core,
            layout: Layouts {
                tasks,
                setjmp_depth: 0,
            },
            printer,
            last_task: None,
            name: String::new(),
        })
    }

    /// Runs the whole replay; returns the warnings met while reading.
    pub fn run(mut self) -> Result<Vec<String>> {
        if self.printer.opts().flat {
            self.run_flat()?;
            return Ok(self.core.merge.warnings);
        }
        loop {
            // External data before the next step, seen in the state before it.
            if self.core.merge.has_extern() {
                let upto = self.core.peek_time().unwrap_or(u64::MAX);
                self.flush_extern(upto)?;
            }
            let Some(step) = self.core.next_step() else {
                break;
            };
            self.exec_reset();
            self.layout.step(&step);
            // Whatever the record, uftrace prints the header once one passed the reader.
            self.printer.record_seen()?;
            match step {
                Step::Event { .. } if self.cfg.no_event => continue,
                Step::Event { task, head } => self.event(task, &head)?,
                // A task's data that opens with a LOST record (a flight recorder's dump)
                // shows no line for it, as uftrace 0.13 does.
                Step::Lost { first: true, .. } => {}
                Step::Lost { task, head, .. } => self.lost(task, &head)?,
                Step::Entry(e) => {
                    self.stamp(e.task, e.head.raw.time);
                    self.entry(&e)?;
                }
                Step::Exit(x) => {
                    // uftrace drops library-call exits before any bookkeeping.
                    let plt =
                        self.core.no_libcall() && self.core.merge.sym.func(x.head.func).is_plt;
                    if !plt {
                        self.stamp(x.task, x.head.raw.time);
                        if x.reported {
                            self.exit(x.task, x.slot, &x.head)?;
                        }
                    }
                }
                Step::Sched(s) => self.sched(&s)?,
            }
        }
        // (Records of tasks `--tid` leaves out may have hidden the end of the data.)
        if self.core.merge.has_extern() {
            self.flush_extern(u64::MAX)?;
        }
        if self.core.merge.user_record_passed_over() {
            self.printer.record_seen()?;
        }
        self.printer.finish()?;
        self.core.apply_due_execs(u64::MAX);
        let remaining = self.remaining();
        self.printer.remaining(&remaining)?;
        Ok(self.core.merge.warnings)
    }

    /// The time columns move to a shown entry or exit of task `ti`.
    fn stamp(&mut self, ti: usize, time: u64) {
        let t = &mut self.layout.tasks[ti];
        t.timestamp_last = t.timestamp;
        t.timestamp = time;
        self.last_task = Some(ti);
    }

    /// Display-depth bookkeeping after a shown entry line (the walk's exec or longjmp is
    /// applied here).
    fn update_entry(&mut self, ti: usize) {
        let jump = self.core.take_jump();
        if jump == Some(StackEffect::Exec) {
            // The thread starts over in the new image (the process's other threads where
            // the walk ends their old image, see `exec_reset`).
            self.exec_reset();
            return;
        }
        let t = &mut self.layout.tasks[ti];
        match jump {
            Some(StackEffect::Longjmp) => t.display_depth = self.layout.setjmp_depth,
            _ => t.display_depth += 1,
        }
    }

    /// The display depth of the tasks whose stack an exec emptied starts over.
    fn exec_reset(&mut self) {
        for ti in self.core.take_exec_resets() {
            self.layout.tasks[ti].display_depth = 0;
        }
    }

    fn update_exit(&mut self, ti: usize) -> i64 {
        let open = self.core.tasks[ti].stack.open_calls() as i64;
        let t = &mut self.layout.tasks[ti];
        if !t.display_depth_set {
            t.display_depth = open + 1;
            t.display_depth_set = true;
        }
        t.display_depth = (t.display_depth - 1).max(0);
        t.display_depth
    }

    /// Functions still open at the end, per task, innermost last: (index, name).
    fn remaining(&self) -> Vec<(u32, Vec<(u16, String)>)> {
        let mut out = Vec::new();
        for (ti, t) in self.core.tasks.iter().enumerate() {
            let (count, slots) = (t.stack.open_calls(), t.stack.slots());
            if !t.allowed || count == 0 {
                continue;
            }
            let zero = (0..count)
                .take_while(|&k| slots.get(k).is_none_or(|s| s.addr == 0))
                .count();
            // Kernel calls (above every user one) are not listed, as uftrace.
            let user = (zero..count)
                .take_while(|&k| slots.get(k).is_none_or(|s| s.addr >> 47 == 0))
                .count()
                + zero;
            if zero == user {
                continue;
            }
            let mut frames: Vec<(u16, String)> = (zero..user)
                .map(|k| {
                    let s = slots.get(k).copied().unwrap_or_default();
                    let name = s.func.map_or_else(
                        || format!("<{:x}>", s.addr),
                        |f| self.core.merge.sym.func(f).name.clone(),
                    );
                    ((k - zero) as u16, name)
                })
                .collect();
            // A `linux:sched-out` line whose switch-in never came (after `-r`'s stop).
            if self.layout.tasks[ti].sched_split && user == count {
                let name = if self.layout.tasks[ti].split_preempted {
                    "linux:schedule (pre-empted)"
                } else {
                    "linux:schedule"
                };
                frames.push(((user - zero) as u16, name.to_string()));
            }
            out.push((self.core.merge.tid(ti), frames));
        }
        out
    }

    fn run_flat(&mut self) -> Result<()> {
        use std::fmt::Write as _;
        let mut n = 0usize;
        let mut line = String::new();
        loop {
            if self.core.merge.has_extern() {
                let upto = self.core.peek_time().unwrap_or(u64::MAX);
                self.flat_extern(upto, &mut n)?;
            }
            let Some(step) = self.core.next_step() else {
                break;
            };
            let (ti, h) = match step {
                Step::Entry(e) => (e.task, e.head),
                Step::Exit(x) => (x.task, x.head),
                Step::Lost { task, head, .. } => (task, head),
                Step::Event { .. } if self.cfg.no_event => continue,
                Step::Event { task, head } => (task, head),
                Step::Sched(s) => {
                    if self.flat_sched(&s, n)? {
                        n += 1;
                    }
                    continue;
                }
            };
            line.clear();
            let tid = self.core.merge.tid(ti);
            match h.raw.kind {
                RecordKind::Entry | RecordKind::Exit => {
                    let f = self.core.merge.sym.func(h.func);
                    if self.cfg.no_libcall && f.is_plt {
                        continue;
                    }
                    let (d, name) = (h.raw.depth, &f.name);
                    if h.raw.kind == RecordKind::Entry {
                        let _ = write!(
                            line,
                            "[{n}] ==> {tid}/{d}: ip ({name}), time ({})",
                            h.raw.time
                        );
                    } else {
                        let total = self.core.tasks[ti]
                            .stack
                            .slots()
                            .get(d as usize)
                            .map_or(0, |s| s.start);
                        let _ = write!(
                            line,
                            "[{n}] <== {tid}/{d}: ip ({name}), time ({}:{total})",
                            h.raw.time
                        );
                    }
                }
                RecordKind::Lost => {
                    let _ = write!(line, "[{n}] XXX {tid}: lost {} records", h.raw.addr);
                }
                RecordKind::Event => {
                    let text = self.core.merge.event_text(ti, &h).unwrap_or_default();
                    let _ = write!(line, "[{n}] !!! {tid}: {text} time ({})", h.raw.time);
                }
            }
            self.printer.raw(&line)?;
            self.last_task = Some(ti);
            n += 1;
        }
        self.printer.finish()?;
        let remaining = self.remaining();
        self.printer.remaining(&remaining)?;
        Ok(())
    }
}

impl Engine<'_, '_> {
    /// `--flat`: the `extern.dat` lines before `upto`, numbered on from `n`, as lines of the
    /// task of the last record.
    fn flat_extern(&mut self, upto: u64, n: &mut usize) -> Result<()> {
        while let Some((time, msg)) = self.core.merge.next_extern(upto) {
            self.printer.record_seen()?;
            let Some(ti) = self.last_task else { continue };
            if !self.core.merge.task_goes_past(ti, time) {
                continue;
            }
            let tid = self.core.merge.tid(ti);
            let line = format!("[{n}] !!! {tid}: external-data: {msg} time ({time})");
            self.printer.raw(&line)?;
            *n += 1;
        }
        Ok(())
    }
}

/// The source location printed after function `f` (`--srcline` only: not looked up otherwise).
fn srcline<'a>(on: bool, merge: &'a Merge<'_>, f: FuncId) -> Option<&'a str> {
    on.then(|| merge.sym.srcline(f).map(|l| l.text())).flatten()
}

/// The name to print: the `--libname` buffer or the symbol's own name.
fn pick_name<'a>(own: bool, buf: &'a str, merge: &'a Merge<'_>, func: FuncId) -> &'a str {
    if own {
        buf
    } else {
        &merge.sym.func(func).name
    }
}

/// For each task, the index of its parent task (from FORK lines).
fn parent_tasks(dir: &TraceDir) -> Vec<Option<usize>> {
    use record_format::task::TaskLine;
    dir.data
        .iter()
        .map(|d| {
            dir.tasks.iter().find_map(|t| match t {
                TaskLine::Fork { pid, ppid, .. } if *pid == d.tid => {
                    dir.data.iter().position(|x| x.tid == *ppid)
                }
                _ => None,
            })
        })
        .collect()
}

/// The context of a line of task `ti` (`addr`, `func`: the call's).
fn line_ctx<'a>(
    merge: &'a Merge<'_>,
    tasks: &[Layout],
    ti: usize,
    addr: u64,
    func: Option<FuncId>,
) -> LineCtx<'a> {
    let t = &tasks[ti];
    let module = match func {
        Some(f) => merge.sym.func(f).module.as_str(),
        None => "",
    };
    LineCtx {
        tid: merge.tid(ti),
        comm: merge.comm(ti),
        module,
        addr,
        time: t.timestamp,
        prev: (t.timestamp_last != 0).then_some(t.timestamp_last),
    }
}
