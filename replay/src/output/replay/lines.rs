//! The lines of each shown step: an entry (a leaf `f();` when the look-ahead found its exit
//! next), an exit, LOST, an event, a backtrace, and the `extern.dat` lines between them, with
//! their arguments, return values and `--libname` names.

use super::printer::{Call, LineCtx};
use super::{line_ctx, pick_name, srcline, Engine};
use crate::merge::Head;
use crate::symbols::FuncId;
use crate::walk::core::EntryStep;
use crate::Result;

impl Engine<'_, '_> {
    /// Renders the arguments (or the return value) recorded in a payload; empty when the
    /// record has none (`more` clear) or with `--no-args`.
    fn args_text(&mut self, func: FuncId, h: &Head, ti: usize, ret: bool) -> String {
        if !h.raw.more || self.printer.opts().no_args {
            return String::new();
        }
        let mut s = String::new();
        if !self.core.merge.push_args(ti, func, h, ret, &mut s) {
            s.clear();
        }
        s
    }

    /// `name` or `name@lib` (`--libname`, library calls only).
    /// Puts `name@lib` into `self.name` for `--libname` on a library call; returns whether
    /// it did (otherwise the symbol's own name is printed).
    fn fill_name(&mut self, ti: usize, func: FuncId) -> bool {
        if !(self.printer.opts().libname && self.core.merge.sym.func(func).is_plt) {
            return false;
        }
        self.name.clear();
        self.name.push_str(&self.core.merge.sym.func(func).name);
        let session = self.core.merge.session_of(ti);
        if let Some(lib) = self.core.merge.sym.library_of(session, func) {
            self.name.push('@');
            self.name.push_str(&lib);
        }
        true
    }

    pub(super) fn lost(&mut self, ti: usize, h: &Head) -> Result<()> {
        let depth = (self.layout.tasks[ti].display_depth + 1) as u32;
        let text = format!("LOST {} records!!", h.raw.addr);
        let ctx = LineCtx {
            time: h.raw.time,
            ..line_ctx(&self.core.merge, &self.layout.tasks, ti, 0, None)
        };
        Ok(self.printer.comment(&ctx, None, depth, &text, true)?)
    }

    pub(super) fn entry(&mut self, e: &EntryStep) -> Result<()> {
        if !e.reported {
            return Ok(());
        }
        let (ti, h) = (e.task, &e.head);
        let depth = self.layout.tasks[ti].display_depth as u32;
        if e.actions.backtrace {
            self.backtrace(ti)?;
        }
        let args = self.args_text(h.func, h, ti, false);
        let own = self.fill_name(ti, h.func);
        let idx = e.slot;
        let exit = if self.printer.opts().no_merge {
            None
        } else {
            let layout = &mut self.layout;
            self.core
                .leaf(e, self.cfg.no_event, &mut |step| layout.step(step))
        };
        let ret = match &exit {
            Some(exit) => Some(self.args_text(h.func, exit, ti, true)).filter(|r| !r.is_empty()),
            None => None,
        };
        let slot = self.core.tasks[ti].stack.slots()[idx];
        let ctx = line_ctx(
            &self.core.merge,
            &self.layout.tasks,
            ti,
            slot.addr,
            Some(h.func),
        );
        let call = Call {
            name: pick_name(own, &self.name, &self.core.merge, h.func),
            args: &args,
            ret: ret.as_deref(),
            color: e.actions.color,
            srcline: srcline(self.printer.opts().srcline, &self.core.merge, h.func),
        };
        if exit.is_some() {
            self.printer.leaf(&ctx, slot.start, depth, &call)?;
        } else {
            self.printer.entry(&ctx, depth, &call)?;
            self.update_entry(ti);
        }
        Ok(())
    }

    pub(super) fn exit(&mut self, ti: usize, i: usize, h: &Head) -> Result<()> {
        let slot = self.core.tasks[ti].stack.slots()[i];
        let depth = self.update_exit(ti) as u32;
        let ret = Some(self.args_text(h.func, h, ti, true)).filter(|r| !r.is_empty());
        let own = self.fill_name(ti, h.func);
        let ctx = line_ctx(
            &self.core.merge,
            &self.layout.tasks,
            ti,
            slot.addr,
            Some(h.func),
        );
        self.printer.exit(
            &ctx,
            Some(slot.start),
            depth,
            pick_name(own, &self.name, &self.core.merge, h.func),
            ret.as_deref(),
        )?;
        Ok(())
    }

    fn backtrace(&mut self, ti: usize) -> Result<()> {
        let n = self.core.tasks[ti].stack.open_calls().saturating_sub(1);
        for i in 0..n {
            let slot = *self.core.tasks[ti].stack.frame(i);
            let name = match slot.func {
                Some(f) => self.core.merge.sym.func(f).name.clone(),
                None => format!("<{:x}>", slot.addr),
            };
            let ctx = line_ctx(
                &self.core.merge,
                &self.layout.tasks,
                ti,
                slot.addr,
                slot.func,
            );
            self.printer.backtrace(&ctx, i, &name)?;
        }
        Ok(())
    }

    pub(super) fn event(&mut self, ti: usize, h: &Head) -> Result<()> {
        let depth = self.layout.tasks[ti].display_depth as u32;
        let Some(text) = self.core.shown_event_text(ti, h, self.cfg.no_sched) else {
            return Ok(());
        };
        let ctx = LineCtx {
            time: h.raw.time,
            ..line_ctx(&self.core.merge, &self.layout.tasks, ti, 0, None)
        };
        self.printer.comment(&ctx, None, depth, &text, false)?;
        Ok(())
    }

    /// Prints the `extern.dat` lines before `upto` as comments of the task of the last record
    /// (shown where an event of that task would be).
    pub(super) fn flush_extern(&mut self, upto: u64) -> Result<()> {
        while let Some((time, msg)) = self.core.merge.next_extern(upto) {
            self.printer.record_seen()?;
            let Some(ti) = self.last_task else { continue };
            if !self.core.merge.task_goes_past(ti, time) || !self.core.event_shown(ti) {
                continue;
            }
            // Not inside a call entered before the data (or `-r`) starts, as uftrace.
            if self.core.tasks[ti]
                .stack
                .open()
                .last()
                .is_some_and(|f| f.addr == 0)
            {
                continue;
            }
            let text = format!("external-data: {msg}");
            let ctx = LineCtx {
                time,
                ..line_ctx(&self.core.merge, &self.layout.tasks, ti, 0, None)
            };
            self.printer.comment(&ctx, None, 0, &text, false)?;
        }
        Ok(())
    }
}
