//! Context switches and task events (`perf-cpu*.dat`) in replay's lines: one
//! `linux:schedule` line for a switch-out and its switch-in with nothing printed between
//! (the switch-out line is held back by the printer until then), `linux:sched-out` and
//! `linux:sched-in` lines otherwise or with `--no-merge`, `--flat`'s numbered lines, and with
//! `--event-full` the task names, new tasks, exits and switches outside every call.

use super::printer::{self, LineCtx};
use super::{line_ctx, Engine};
use crate::walk::core::SchedStep;
use crate::Result;
use record_format::TraceDir;

impl Engine<'_, '_> {
    /// A switch-in ends a `linux:schedule` line carrying the time switched out (its
    /// switch-out begins nothing on its own: the task is off the CPU until it).
    pub(super) fn sched(&mut self, s: &SchedStep) -> Result<()> {
        if !s.visible || !self.core.enabled || self.cfg.no_event {
            return Ok(());
        }
        let switch = crate::perf::is_sched(s.id);
        if switch && (self.cfg.no_sched || (s.preempted && self.cfg.no_sched_preempt)) {
            return Ok(());
        }
        // With -Z, a switch where no shown call is open shows nothing (as uftrace).
        if self.cfg.size_filter.is_some() && self.layout.tasks[s.task].display_depth == 0 {
            return Ok(());
        }
        let no_merge = self.printer.opts().no_merge;
        let t = &mut self.layout.tasks[s.task];
        let depth = t.display_depth as u32;
        // --event-full: task events, and a switch-in without its switch-out.
        let task_event = match s.id {
            crate::perf::TASK_NAME => Some(format!(
                "linux:task-name (comm=\"{}\")",
                self.core
                    .merge
                    .comm(s.task)
                    .chars()
                    .take(15)
                    .collect::<String>()
            )),
            crate::perf::TASK_NEW => Some("linux:task-new".to_string()),
            crate::perf::TASK_EXIT => Some("linux:task-exit".to_string()),
            crate::perf::SCHED_IN if !t.sched_split => Some("linux:sched-in".to_string()),
            _ => None,
        };
        if let Some(text) = task_event {
            self.stamp(s.task, s.time);
            let ctx = LineCtx {
                addr: printer::NO_ADDR,
                ..line_ctx(&self.core.merge, &self.layout.tasks, s.task, 0, None)
            };
            return Ok(self.printer.sched(&ctx, None, depth, &text)?);
        }
        if !s.exit {
            // A switch-out line waits: with nothing printed before the task's switch-in, the
            // two make one `linux:schedule` line (not with --no-merge).
            t.sched_split = true;
            t.split_preempted = s.preempted;
            let text = if s.preempted {
                "linux:sched-out (pre-empted)"
            } else {
                "linux:sched-out"
            };
            self.stamp(s.task, s.time);
            let ctx = LineCtx {
                addr: printer::NO_ADDR,
                ..line_ctx(&self.core.merge, &self.layout.tasks, s.task, 0, None)
            };
            if no_merge {
                self.printer.sched(&ctx, None, depth, text)?;
            } else {
                self.printer.defer_sched(&ctx, depth, text)?;
            }
            return Ok(());
        }
        let tid = self.core.merge.tid(s.task);
        let was_split = std::mem::take(&mut t.sched_split);
        let merged = was_split && self.printer.take_sched(tid);
        let text = match (was_split && !merged, s.preempted) {
            (true, _) => "linux:sched-in",
            (false, true) => "linux:schedule (pre-empted)",
            (false, false) => "linux:schedule",
        };
        // The address column shows the switch-out's event id on the line that ends the
        // switch, with the module `[event]`.
        let addr = s.id;
        // One `linux:schedule` line stands at its switch-out (stamped already when its line
        // was held back), a `linux:sched-in` at the switch-in.
        if !merged {
            let time = if was_split {
                s.time
            } else {
                s.time.saturating_sub(s.total)
            };
            self.stamp(s.task, time);
        }
        let ctx = line_ctx(&self.core.merge, &self.layout.tasks, s.task, 0, None);
        // Before its process's task is known (--event-full) the module is unknown.
        let module = if ctx.time < self.layout.tasks[s.task].known_from {
            "[unknown]"
        } else {
            "[event]"
        };
        let ctx = LineCtx {
            addr,
            module,
            ..ctx
        };
        self.printer.sched(&ctx, Some(s.total), depth, text)?;
        Ok(())
    }

    /// `--flat`: a context switch as its own numbered line (`linux:sched-out`,
    /// `linux:sched-in`); returns whether it printed one. As uftrace, only the switches
    /// between the task's first and last records show.
    pub(super) fn flat_sched(&mut self, s: &SchedStep, n: usize) -> Result<bool> {
        if self.cfg.no_sched || self.cfg.no_event || (s.preempted && self.cfg.no_sched_preempt) {
            return Ok(false);
        }
        let started = self.core.tasks[s.task].stack.started();
        if !started || !self.core.merge.task_goes_past(s.task, s.time) {
            return Ok(false);
        }
        let text = match (s.exit, s.preempted) {
            (true, _) => "linux:sched-in",
            (false, true) => "linux:sched-out (pre-empted)",
            (false, false) => "linux:sched-out",
        };
        let tid = self.core.merge.tid(s.task);
        let line = format!("[{n}] !!! {tid}: {text} time ({})", s.time);
        self.printer.raw(&line)?;
        self.last_task = Some(s.task);
        Ok(true)
    }
}

/// The time of the first `TASK` line of task `pid` (0 without one).
pub(super) fn known_from(dir: &TraceDir, pid: u32) -> u64 {
    use record_format::task::TaskLine;
    dir.tasks
        .iter()
        .find_map(|t| match *t {
            TaskLine::Task { time, tid, .. } if tid == pid => Some(time),
            _ => None,
        })
        .unwrap_or(0)
}
