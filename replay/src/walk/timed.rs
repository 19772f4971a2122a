//! The time-ordered walk that shows records rather than a tree: `dump`'s `--chrome`,
//! `--flame-graph`, `--graphviz` and `--mermaid` are its [`Sink`]s.
//!
//! It takes the records of every task in time order from [`Merge`] (which applies `-r`, `-t`
//! and `-C`), keeps each task's [`TaskStack`] (durations and the `-F -N -H -D --no-libcall`
//! counters) and hands every shown entry and exit to a [`Sink`], with its rendered arguments
//! when the sink wants them. Calls still open at the end of the data are closed at the task's
//! last timestamp, innermost first, task by task, as uftrace does. The tasks' perf events
//! (`perf-cpu*.dat`) are merged in by time: context switches inside functions become
//! `linux:schedule` calls.
//!
//! Why not [`Walker`](super::Walker): it reports only the calls the filters show, without
//! their payloads; `--chrome` needs the argument payloads, a context switch must be placed
//! against the task's full stack (shown or hidden calls) at the switch's time, and uftrace's
//! dump applies the exec/setjmp/longjmp fix-ups to hidden entries too.

use crate::callstack::{Closed, TaskStack, Verdict};
use crate::config::{Config, TimePoint};
use crate::merge::{open_merge, Head, Merge};
use crate::perf::{self, PerfEvent};
use crate::symbols::FuncId;
use crate::Result;
use record_format::libcall::{stack_effect, StackEffect};
use record_format::task::TaskLine;
use record_format::{RecordKind, TraceDir};
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
    pub name: &'a str,
    /// Rendered arguments (`(1, "a")`) or return value; `None` when none was recorded (or
    /// the sink does not want them).
    pub args: Option<&'a str>,
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
    fn call(&mut self, call: &Call<'_>) -> io::Result<()>;
    /// A LOST record.
    fn lost(&mut self) {}
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

fn time_point(p: TimePoint, first: u64) -> u64 {
    match p {
        TimePoint::Elapsed(ns) => first.saturating_add(ns),
        TimePoint::Absolute(ns) => ns,
    }
}

/// The merged, filtered stream of a data directory.
pub struct Walk<'d> {
    merge: Merge<'d>,
    stacks: Vec<TaskStack>,
    allowed: Vec<bool>,
    tasks: Vec<TaskInfo>,
    range_stop: Option<u64>,
    /// `-r` as absolute times.
    range: (u64, u64),
    /// The perf events (scheduling, task names, exits) of all tasks by time, and the next one.
    perf: Vec<(usize, PerfEvent)>,
    perf_next: usize,
    /// Per function: its stack effect, once known.
    fixups: Vec<Option<Option<StackEffect>>>,
    /// Per task: the stack level of its last setjmp.
    setjmp: Vec<usize>,
    /// Per task: the time of its last record read (shown or not).
    last_time: Vec<u64>,
    /// Each task's last switch-out time.
    sched_out: Vec<Option<u64>>,
    /// Context switches are shown (not with `--no-event`, `--no-sched`).
    show_sched: bool,
    no_args: bool,
    /// `Usage:` notices of the filters and argument specs.
    pub notices: Vec<String>,
}

impl<'d> Walk<'d> {
    pub fn new(dir: &'d TraceDir, cfg: &'d Config, no_args: bool) -> Walk<'d> {
        let (merge, notices) = open_merge(dir, cfg);
        let first = merge.first_time();
        let mut merge = merge;
        let mut range_stop = None;
        let mut range = (0, u64::MAX);
        if let Some(r) = cfg.time_range {
            let start = r.start.map_or(0, |p| time_point(p, first));
            let stop = r.stop.map_or(u64::MAX, |p| time_point(p, first));
            range = (start, stop);
            // uftrace closes unfinished calls at the stop value as written: an elapsed stop
            // is compared with absolute times, which leaves such calls out.
            range_stop = r.stop.map(|p| match p {
                TimePoint::Elapsed(ns) | TimePoint::Absolute(ns) => ns,
            });
            merge.set_range(start, stop);
            merge.restart();
        }
        let tasks = task_infos(dir);
        let perf = perf::events_by_time(dir);
        Walk {
            fixups: Vec::new(),
            setjmp: vec![0; dir.data.len()],
            last_time: vec![0; dir.data.len()],
            show_sched: !(cfg.no_event || cfg.no_sched),
            sched_out: vec![None; dir.data.len()],
            range,
            perf_next: 0,
            perf,
            merge,
            stacks: dir.data.iter().map(|_| TaskStack::new(cfg.depth)).collect(),
            allowed: dir
                .data
                .iter()
                .map(|d| cfg.tids.is_empty() || cfg.tids.contains(&d.tid))
                .collect(),
            tasks,
            range_stop,
            no_args,
            notices,
        }
    }

    pub fn tasks(&self) -> &[TaskInfo] {
        &self.tasks
    }

    /// Feeds every shown entry and exit to `sink`; returns the warnings met while reading.
    pub fn run(mut self, sink: &mut dyn Sink) -> Result<Vec<String>> {
        let mut args = String::new();
        let has_filter = self.merge.filters.has_filter;
        while let Some((ti, head)) = self.merge.pop() {
            if !self.allowed[ti] {
                continue;
            }
            self.perf_events(head.raw.time, sink)?;
            self.last_time[ti] = head.raw.time;
            let closed = self.stacks[ti].consume(&head.raw, head.func);
            let shown = match head.raw.kind {
                RecordKind::Entry => {
                    let ff = self.merge.decide(head.func);
                    let stack = &mut self.stacks[ti];
                    let shown = stack.enter(&ff, has_filter, ff.hide, None, None) == Verdict::Shown;
                    // dump applies the fix-ups whether the entry is shown or not.
                    match self.fixup_of(head.func) {
                        Some(StackEffect::Exec) => {
                            self.stacks[ti].exec();
                            self.stacks[ti].reset_filters();
                        }
                        Some(StackEffect::Setjmp) => self.setjmp[ti] = self.stacks[ti].open_calls(),
                        Some(StackEffect::Longjmp) if self.setjmp[ti] > 0 => {
                            self.stacks[ti].longjmp_to(self.setjmp[ti]);
                        }
                        _ => {}
                    }
                    shown
                }
                RecordKind::Exit => self.stacks[ti].exit(),
                RecordKind::Lost => {
                    sink.lost();
                    false
                }
                RecordKind::Event => false,
            };
            if !shown {
                continue;
            }
            let exit = head.raw.kind == RecordKind::Exit;
            let has_args = sink.wants_args() && self.args_text(ti, &head, exit, &mut args);
            let c = closed.unwrap_or_default();
            let call = Call {
                task: ti,
                tid: self.tasks[ti].tid,
                pid: self.tasks[ti].pid,
                time: head.raw.time,
                exit,
                name: &self.merge.sym.func(head.func).name,
                args: has_args.then_some(args.as_str()),
                total: c.total,
                child: c.child,
            };
            sink.call(&call)?;
        }
        self.perf_events(u64::MAX, sink)?;
        self.close_remaining(sink)?;
        Ok(std::mem::take(&mut self.merge.warnings))
    }

    /// The fix-up kind of a function (decided once per function).
    fn fixup_of(&mut self, func: FuncId) -> Option<StackEffect> {
        let i = func as usize;
        if self.fixups.len() <= i {
            self.fixups.resize(i + 1, None);
        }
        *self.fixups[i].get_or_insert_with(|| stack_effect(&self.merge.sym.func(func).name))
    }

    /// The perf events before `upto`. A context switch inside a function shows as a
    /// `linux:schedule` call: sched-out begins it, sched-in ends it; the time switched out
    /// counts as callee time of the running function (even with `--no-event`). As in uftrace
    /// 0.13, a pre-empting switch-out begins nothing (its sched-in still ends a call), and a
    /// sched-in before the task's first record is ignored.
    fn perf_events(&mut self, upto: u64, sink: &mut dyn Sink) -> io::Result<()> {
        while let Some(&(ti, e)) = self.perf.get(self.perf_next) {
            if e.time >= upto {
                break;
            }
            self.perf_next += 1;
            if !self.allowed[ti] || e.time < self.range.0 || e.time > self.range.1 {
                continue;
            }
            let stack = &mut self.stacks[ti];
            let first = self.last_time[ti] == 0;
            self.last_time[ti] = e.time;
            let mut total = 0;
            let exit = match e.id {
                perf::SCHED_OUT | perf::SCHED_OUT_PREEMPT => {
                    self.sched_out[ti] = Some(e.time);
                    if e.id == perf::SCHED_OUT_PREEMPT {
                        continue;
                    }
                    false
                }
                perf::SCHED_IN => {
                    total = self.sched_out[ti]
                        .take()
                        .map_or(0, |t| e.time.saturating_sub(t));
                    stack.add_child_time(total);
                    if first {
                        continue;
                    }
                    true
                }
                _ => continue,
            };
            if !self.show_sched || !stack.event_visible(self.merge.filters.has_filter) {
                continue;
            }
            sink.call(&Call {
                task: ti,
                tid: self.tasks[ti].tid,
                pid: self.tasks[ti].pid,
                time: e.time,
                exit,
                name: "linux:schedule",
                args: None,
                total,
                child: 0,
            })?;
        }
        Ok(())
    }

    /// Closes the calls still open at the end, innermost first, task by task.
    fn close_remaining(&mut self, sink: &mut dyn Sink) -> Result<()> {
        for ti in 0..self.stacks.len() {
            if !self.allowed[ti] || self.stacks[ti].open_calls() == 0 {
                continue;
            }
            let mut last = self.last_time[ti];
            if let Some(stop) = self.range_stop {
                last = last.min(stop);
            }
            while let Some(closed) = self.stacks[ti].close_open(last) {
                let Some(Closed { addr, total, child }) = closed else {
                    continue;
                };
                if !self.stacks[ti].exit() {
                    continue;
                }
                let session = self.merge.session_of(ti);
                let func = self.merge.sym.resolve(session, last, addr);
                let call = Call {
                    task: ti,
                    tid: self.tasks[ti].tid,
                    pid: self.tasks[ti].pid,
                    time: last,
                    exit: true,
                    name: &self.merge.sym.func(func).name,
                    args: None,
                    total,
                    child,
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
        if !self.merge.push_args(ti, h.func, h, ret, out) {
            out.clear();
            return false;
        }
        if !ret {
            out.push(')');
        }
        true
    }
}
