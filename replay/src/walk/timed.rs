//! The dump formats' consumer of the walk: `dump`'s `--chrome`, `--perfetto`,
//! `--flame-graph`, `--graphviz` and `--mermaid` are its [`Sink`]s.
//!
//! It reads the trace through [`Core`] with [`Policy::DUMP`] (uftrace's dump reader: fix-ups
//! applied to hidden entries too, exec forgetting the filters, a setjmp level per task,
//! unfinished calls closed at the task's last record) and hands every shown entry and exit
//! to a [`Sink`], with its rendered arguments when the sink wants them, and the context
//! switches the core merges in from `perf-cpu*.dat` as `linux:schedule` calls (unless the
//! sink reads them itself, [`Walk::with_sched`]), and the event records replay would show
//! to the sinks that want them. Calls still
//! open at the end of the data are closed innermost first, task by task, as uftrace does.

use super::core::{Core, Step};
use super::policy::Policy;
use crate::callstack::Closed;
use crate::config::Config;
use crate::merge::Head;
use crate::symbols::FuncId;
use crate::Result;
use record_format::task::TaskLine;
use record_format::TraceDir;
use std::io;

/// One shown entry or exit.
#[derive(Debug)]
pub struct Call<'a> {
    pub task: usize,
    pub tid: u32,
    /// The process the task belongs to (its tid for a main thread).
    pub pid: u32,
    pub time: u64,
    pub exit: bool,
    /// The function (`None` for `linux:schedule`).
    pub func: Option<FuncId>,
    pub name: &'a str,
    /// The function's module (basename; `[kernel]` for a kernel function, empty for
    /// `linux:schedule`).
    pub module: &'a str,
    /// Rendered arguments (`(1, "a")`) or return value; `None` when none was recorded (or
    /// the sink does not want them).
    pub args: Option<&'a str>,
    /// `file:line` of an entry's function, when the locations were loaded (`--srcline`).
    pub srcline: Option<&'a str>,
    /// Duration and time spent in callees, for an exit.
    pub total: u64,
    pub child: u64,
}

/// A format fed by the time-ordered walk.
pub trait Sink {
    /// Whether [`Call::args`] should be rendered.
    fn wants_args(&self) -> bool {
        false
    }
    /// Whether [`Call::srcline`] should be looked up for an entry of `func` (with
    /// `--srcline`); a sink that keeps the locations it saw says no the second time.
    fn wants_srcline(&mut self, _func: FuncId) -> bool {
        true
    }
    fn call(&mut self, call: &Call<'_>) -> io::Result<()>;
    /// A LOST record.
    fn lost(&mut self) {}
    /// Whether event records are handed to [`Sink::event`] (rendered as text).
    fn wants_events(&self) -> bool {
        false
    }
    /// An event record shown where replay shows it (user SDT and counter events, kernel
    /// tracepoints): `text` is replay's comment text, `name (fields)`.
    fn event(&mut self, _ev: &EventCall<'_>) -> io::Result<()> {
        Ok(())
    }
}

/// One shown event record.
#[derive(Debug)]
pub struct EventCall<'a> {
    pub task: usize,
    pub tid: u32,
    pub pid: u32,
    pub time: u64,
    pub text: &'a str,
    /// A kernel tracepoint (`-k`), not a user or perf event.
    pub kernel: bool,
}

/// What the walk knows about the tasks, for headers.
#[derive(Debug, Clone)]
pub struct TaskInfo {
    pub tid: u32,
    pub pid: u32,
    /// Basename of the task's first executable.
    pub comm: String,
}

/// The process of task `tid` (its `TASK` line; the tid itself without one).
pub fn task_pid(dir: &TraceDir, tid: u32) -> u32 {
    dir.tasks
        .iter()
        .find_map(|t| match t {
            TaskLine::Task { tid: t, pid, .. } if *t == tid => Some(*pid),
            _ => None,
        })
        .unwrap_or(tid)
}

/// The tasks of `dir` in TASKINFO order.
pub fn task_infos(dir: &TraceDir) -> Vec<TaskInfo> {
    dir.data
        .iter()
        .map(|d| {
            let pid = task_pid(dir, d.tid);
            let exe = dir
                .tasks
                .iter()
                .find_map(|t| match t {
                    TaskLine::Sess {
                        pid: spid, exename, ..
                    } if *spid == d.tid || *spid == pid => Some(exename.as_str()),
                    _ => None,
                })
                .or(dir.info.exename.as_deref())
                .unwrap_or("");
            let base = exe.rsplit('/').next().unwrap_or(exe);
            // The kernel keeps 15 characters of a task name.
            let comm: String = base.chars().take(15).collect();
            TaskInfo {
                tid: d.tid,
                pid,
                comm,
            }
        })
        .collect()
}

/// The merged, filtered stream of a data directory, as the dump formats see it.
pub struct Walk<'d> {
    core: Core<'d>,
    tasks: Vec<TaskInfo>,
    /// Context switches are shown (not with `--no-event`, `--no-sched`).
    show_sched: bool,
    no_args: bool,
    /// `--srcline`: entries carry their source location.
    srcline: bool,
    /// `--no-event`.
    no_event: bool,
    /// `--no-sched`: context switches among the events are left out.
    no_sched: bool,
    /// `Usage:` notices of the filters and argument specs.
    pub notices: Vec<String>,
}

impl<'d> Walk<'d> {
    pub fn new(dir: &'d TraceDir, cfg: &'d Config, no_args: bool) -> Walk<'d> {
        Walk::with_sched(dir, cfg, no_args, true)
    }

    /// [`Walk::new`], with the `perf-cpu*.dat` context switches merged in as `linux:schedule`
    /// calls only when `sched` (a sink that reads them itself passes `false`).
    pub fn with_sched(dir: &'d TraceDir, cfg: &'d Config, no_args: bool, sched: bool) -> Walk<'d> {
        let policy = Policy {
            sched,
            ..Policy::DUMP
        };
        let mut core = Core::new(dir, cfg, policy);
        Walk {
            notices: std::mem::take(&mut core.notices),
            core,
            tasks: task_infos(dir),
            show_sched: !(cfg.no_event || cfg.no_sched),
            no_args,
            srcline: cfg.srcline,
            no_event: cfg.no_event,
            no_sched: cfg.no_sched,
        }
    }

    pub fn tasks(&self) -> &[TaskInfo] {
        &self.tasks
    }

    /// Feeds every shown entry and exit to `sink`; returns the warnings met while reading.
    pub fn run(mut self, sink: &mut dyn Sink) -> Result<Vec<String>> {
        let mut args = String::new();
        while let Some(step) = self.core.next_step() {
            let (ti, head, exit, closed) = match step {
                Step::Entry(e) if e.reported => (e.task, e.head, false, Closed::default()),
                Step::Exit(x) if x.reported => (x.task, x.head, true, x.closed),
                Step::Lost { .. } => {
                    sink.lost();
                    continue;
                }
                Step::Sched(s) => {
                    // A pre-emption begins nothing; its switch-in ends the pair.
                    if self.show_sched && s.visible && (s.exit || !s.preempted) {
                        sink.call(&Call {
                            task: s.task,
                            tid: self.tasks[s.task].tid,
                            pid: self.tasks[s.task].pid,
                            time: s.time,
                            exit: s.exit,
                            func: None,
                            name: "linux:schedule",
                            module: "",
                            args: None,
                            srcline: None,
                            total: s.total,
                            child: 0,
                        })?;
                    }
                    continue;
                }
                Step::Event { task, head } => {
                    if sink.wants_events() && !self.no_event {
                        self.event(sink, task, &head)?;
                    }
                    continue;
                }
                _ => continue,
            };
            let has_args = sink.wants_args() && self.args_text(ti, &head, exit, &mut args);
            let call = Call {
                task: ti,
                tid: self.tasks[ti].tid,
                pid: self.tasks[ti].pid,
                time: head.raw.time,
                exit,
                func: Some(head.func),
                name: &self.core.merge.sym.func(head.func).name,
                module: &self.core.merge.sym.func(head.func).module,
                args: has_args.then_some(args.as_str()),
                srcline: match exit || !self.srcline || !sink.wants_srcline(head.func) {
                    true => None,
                    false => self.core.merge.sym.srcline(head.func).map(|l| l.text()),
                },
                total: closed.total,
                child: closed.child,
            };
            sink.call(&call)?;
        }
        self.close_remaining(sink)?;
        Ok(std::mem::take(&mut self.core.merge.warnings))
    }

    /// Hands event record `h` of task `ti` to `sink` when replay would show it
    /// ([`Core::shown_event_text`]).
    fn event(&mut self, sink: &mut dyn Sink, ti: usize, h: &Head) -> io::Result<()> {
        let Some(text) = self.core.shown_event_text(ti, h, self.no_sched) else {
            return Ok(());
        };
        sink.event(&EventCall {
            task: ti,
            tid: self.tasks[ti].tid,
            pid: self.tasks[ti].pid,
            time: h.raw.time,
            text: &text,
            kernel: h.kernel_event.is_some(),
        })
    }

    /// Closes the calls still open at the end, innermost first, task by task.
    fn close_remaining(&mut self, sink: &mut dyn Sink) -> Result<()> {
        for ti in 0..self.tasks.len() {
            while let Some(u) = self.core.close_next(ti) {
                let merge = &mut self.core.merge;
                let session = merge.session_of(ti);
                let func = merge.sym.resolve(session, u.time, u.closed.addr);
                let call = Call {
                    task: ti,
                    tid: self.tasks[ti].tid,
                    pid: self.tasks[ti].pid,
                    time: u.time,
                    exit: true,
                    func: Some(func),
                    name: &merge.sym.func(func).name,
                    module: &merge.sym.func(func).module,
                    args: None,
                    srcline: None,
                    total: u.closed.total,
                    child: u.closed.child,
                };
                sink.call(&call)?;
            }
        }
        Ok(())
    }

    /// Renders the arguments (entry, in parentheses) or return value (exit) of `h` into
    /// `out`; `false` when the record carries none.
    fn args_text(&mut self, ti: usize, h: &Head, ret: bool, out: &mut String) -> bool {
        out.clear();
        if !h.raw.more || self.no_args {
            return false;
        }
        if !ret {
            out.push('(');
        }
        if !self.core.merge.push_args(ti, h.func, h, ret, out) {
            out.clear();
            return false;
        }
        if !ret {
            out.push(')');
        }
        true
    }
}
