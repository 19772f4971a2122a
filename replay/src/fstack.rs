//! The replay engine: walks every task's records in time order (a heap over per-task cursors,
//! [`merge`](crate::merge)), pairs entries with exits on a per-task stack, applies filters and
//! triggers, and hands finished lines to the printer.
//!
//! Leaf merging follows uftrace: an entry is printed as `f();` only when the next line printed
//! at all is its own exit. To decide that without look-ahead, the last entry line is *held*
//! until the next line is known. Entries whose visibility depends on the future (`-t`: their
//! duration; `-C`: whether a target is called below them) are decided at entry by scanning
//! ahead in their task's data, so lines keep their time order across tasks.

use crate::config::{Config, ReplayOptions};
use crate::filter::{FuncFilter, Filters};
use crate::merge::{Head, Merge};
use crate::output::args::{push_args, push_value};
use crate::output::replay::{LineCtx, ReplayPrinter};
use crate::specs::Specs;
use crate::symbols::{FuncId, Symbolizer};
use crate::{ReplayError, Result};
use record_format::argspec::{decode_payload, ArgItem};
use record_format::{RecordKind, TraceDir};
use std::io::Write;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Its entry was never seen (a fork child's inherited frames, data after LOST).
    Phantom,
    NotShown,
    Held,
    Printed,
}

#[derive(Debug, Clone)]
struct Frame {
    func: Option<FuncId>,
    entry_time: Option<u64>,
    rec_depth: u16,
    disp: u32,
    child_depth: u32,
    vis: bool,
    state: State,
    payload: (usize, usize),
    enters_filter: bool,
    notrace: bool,
    caller: bool,
    prev_limit: Option<u32>,
    prev_thresh: Option<Option<u64>>,
}

#[derive(Debug)]
struct TaskState {
    stack: Vec<Frame>,
    filter_count: u32,
    notrace_count: u32,
    caller_count: u32,
    depth_limit: u32,
    threshold: Option<u64>,
    trace_on: bool,
    prev_print: Option<u64>,
    allowed: bool,
    done: bool,
}

/// The replay engine over one data directory.
pub struct Engine<'d, 'w> {
    cfg: &'d Config,
    merge: Merge<'d>,
    tasks: Vec<TaskState>,
    filters: Filters,
    decided: Vec<Option<FuncFilter>>,
    held: Option<usize>,
    range: (u64, u64),
    stop_all: bool,
    printer: ReplayPrinter<'w>,
    last_shown_task: Option<usize>,
    events: crate::output::events::EventState,
}

fn make_ctx<'a>(merge: &'a Merge<'_>, tasks: &[TaskState], ti: usize, func: Option<FuncId>, time: u64) -> LineCtx<'a> {
    let (module, addr) = match func {
        Some(f) => {
            let fi = merge.sym.func(f);
            (fi.module.as_str(), fi.addr)
        }
        None => ("", 0),
    };
    LineCtx {
        tid: merge.tid(ti),
        comm: merge.comm(ti),
        module,
        addr,
        time,
        prev: tasks[ti].prev_print,
    }
}

fn time_point(p: crate::config::TimePoint, first: u64) -> u64 {
    match p {
        crate::config::TimePoint::Elapsed(ns) => first.saturating_add(ns),
        crate::config::TimePoint::Absolute(ns) => ns,
    }
}

impl<'d, 'w> Engine<'d, 'w> {
    pub fn new(
        dir: &'d TraceDir,
        cfg: &'d Config,
        opts: &ReplayOptions,
        out: &'w mut dyn Write,
        warn: &mut dyn FnMut(&str),
    ) -> Result<Engine<'d, 'w>> {
        let sym = Symbolizer::new(dir, cfg.demangle);
        let specs = Specs::new(dir);
        let merge = Merge::new(dir, sym, specs, warn);
        let first = merge.first_time();
        let range = match cfg.time_range {
            Some(r) => (
                r.start.map_or(0, |p| time_point(p, first)),
                r.stop.map_or(u64::MAX, |p| time_point(p, first)),
            ),
            None => (0, u64::MAX),
        };
        let filters = Filters::new(cfg);
        let tasks = dir
            .data
            .iter()
            .map(|d| TaskState {
                stack: Vec::new(),
                filter_count: 0,
                notrace_count: 0,
                caller_count: 0,
                depth_limit: cfg.depth.unwrap_or(u32::MAX),
                threshold: cfg.time_filter,
                trace_on: true,
                prev_print: None,
                allowed: cfg.tids.is_empty() || cfg.tids.contains(&d.tid),
                done: false,
            })
            .collect();
        Ok(Engine {
            cfg,
            merge,
            tasks,
            filters,
            decided: Vec::new(),
            held: None,
            range,
            stop_all: false,
            printer: ReplayPrinter::new(out, opts.clone(), first),
            last_shown_task: None,
            events: Default::default(),
        })
    }

    fn decide(&mut self, id: FuncId) -> FuncFilter {
        let i = id as usize;
        if self.decided.len() <= i {
            self.decided.resize(i + 1, None);
        }
        match self.decided[i] {
            Some(d) => d,
            None => {
                let d = self.filters.decide(self.merge.sym.func(id));
                self.decided[i] = Some(d);
                d
            }
        }
    }

    /// Prints `Usage:` notices for filters that match nothing (and drops those filters).
    fn check_filters(&mut self) -> Result<()> {
        for n in std::mem::take(&mut self.filters.notices) {
            writeln!(self.printer_out(), "Usage: {n}")?;
        }
        if self.filters.is_empty() {
            return Ok(());
        }
        let ids = self.merge.sym.all_functions();
        let funcs: Vec<_> = ids.iter().map(|&i| self.merge.sym.func(i)).collect();
        if let Some(msg) = self.filters.check(&funcs) {
            writeln!(self.printer.out(), "Usage: {msg}")?;
        }
        Ok(())
    }

    fn printer_out(&mut self) -> &mut dyn Write {
        self.printer.out()
    }

    /// Runs the whole replay.
    pub fn run(mut self) -> Result<Vec<String>> {
        self.check_filters()?;
        if self.printer.opts().flat {
            self.run_flat()?;
            return Ok(self.merge.warnings);
        }
        while let Some((ti, head)) = self.merge.pop() {
            if self.tasks[ti].done || !self.tasks[ti].allowed {
                continue;
            }
            if head.raw.time > self.range.1 && head.raw.kind != RecordKind::Lost {
                self.tasks[ti].done = true;
                continue;
            }
            self.flush_extern(head.raw.time)?;
            match head.raw.kind {
                RecordKind::Entry => self.entry(ti, &head)?,
                RecordKind::Exit => self.exit(ti, &head)?,
                RecordKind::Event => self.event(ti, &head)?,
                RecordKind::Lost => self.lost(ti, &head)?,
            }
            if self.stop_all {
                break;
            }
        }
        self.flush_extern(u64::MAX)?;
        self.flush_held()?;
        self.printer.finish()?;
        let remaining = self.remaining();
        self.printer.remaining(&remaining)?;
        Ok(self.merge.warnings)
    }

    fn remaining(&self) -> Vec<(u32, Vec<(u16, String)>)> {
        let mut out = Vec::new();
        for (ti, t) in self.tasks.iter().enumerate() {
            if !t.allowed {
                continue;
            }
            let frames: Vec<(u16, String)> = t
                .stack
                .iter()
                .filter_map(|f| Some((f.rec_depth, self.merge.sym.func(f.func?).name.clone())))
                .collect();
            if !frames.is_empty() {
                out.push((self.merge.tid(ti), frames));
            }
        }
        out
    }

    fn mark_printed(&mut self, ti: usize, time: u64) {
        self.tasks[ti].prev_print = Some(time);
        self.last_shown_task = Some(ti);
    }

    fn args_text(&mut self, func: FuncId, payload: (usize, usize), ti: usize, ret: bool) -> Option<String> {
        if payload.1 == 0 || self.printer.opts().no_args {
            return None;
        }
        let f = self.merge.sym.func(func).clone();
        let spec = self.merge.specs.get(func, &f).clone();
        let items: Vec<&ArgItem> = if ret {
            spec.ret.iter().collect()
        } else {
            spec.args.iter().collect()
        };
        let bytes = self.merge.payload(ti, payload);
        let values = decode_payload(&items, bytes)?;
        let session = self.merge.session_of(ti);
        let mut s = String::new();
        let sym = &mut self.merge.sym;
        let mut lookup = |addr: u64| {
            let id = sym.resolve(session, 0, addr);
            let fi = sym.func(id);
            (fi.known && fi.addr == addr).then(|| fi.name.clone())
        };
        if ret {
            if let (Some(item), Some(v)) = (items.first(), values.first()) {
                push_value(&mut s, item, v, &mut lookup);
            }
        } else {
            let owned: Vec<ArgItem> = items.into_iter().cloned().collect();
            push_args(&mut s, &owned, &values, &mut lookup);
        }
        Some(s)
    }

    /// Prints the held entry as `name(args) {`.
    fn flush_held(&mut self) -> Result<()> {
        let Some(ti) = self.held.take() else {
            return Ok(());
        };
        let Some(idx) = self.tasks[ti].stack.iter().rposition(|f| f.state == State::Held) else {
            return Ok(());
        };
        self.print_entry(ti, idx)
    }

    fn print_entry(&mut self, ti: usize, idx: usize) -> Result<()> {
        let fr = &self.tasks[ti].stack[idx];
        let (Some(func), Some(time), disp, payload) = (fr.func, fr.entry_time, fr.disp, fr.payload) else {
            return Ok(());
        };
        let args = self.args_text(func, payload, ti, false).unwrap_or_default();
        let color = self.decide(func).actions.color;
        let fi = self.merge.sym.func(func);
        let ctx = make_ctx(&self.merge, &self.tasks, ti, Some(func), time);
        self.printer.entry(&ctx, disp, &fi.name, &args, color)?;
        self.tasks[ti].stack[idx].state = State::Printed;
        self.mark_printed(ti, time);
        Ok(())
    }

    /// Makes room for a new line: prints the held entry.
    fn before_line(&mut self, _ti: usize) -> Result<()> {
        self.flush_held()
    }

    /// Pops frames above `depth` that will never see their exit (longjmp, exec).
    fn unwind_to(&mut self, ti: usize, depth: usize) {
        while self.tasks[ti].stack.len() > depth {
            let fr = self.tasks[ti].stack.pop().expect("len checked");
            if fr.state == State::Held && self.held == Some(ti) {
                self.held = None;
                // The entry was never printed: show it as an open call, like uftrace does for
                // functions left by longjmp.
                self.tasks[ti].stack.push(Frame {
                    state: State::Held,
                    ..fr.clone()
                });
                let idx = self.tasks[ti].stack.len() - 1;
                let _ = self.print_entry(ti, idx);
                self.tasks[ti].stack.pop();
            }
            self.undo(ti, &fr);
        }
    }

    fn undo(&mut self, ti: usize, fr: &Frame) {
        let t = &mut self.tasks[ti];
        if fr.enters_filter {
            t.filter_count -= 1;
        }
        if fr.notrace {
            t.notrace_count -= 1;
        }
        if fr.caller {
            t.caller_count -= 1;
        }
        if let Some(l) = fr.prev_limit {
            t.depth_limit = l;
        }
        if let Some(th) = fr.prev_thresh {
            t.threshold = th;
        }
    }

    fn phantom(depth: usize) -> Frame {
        Frame {
            func: None,
            entry_time: None,
            rec_depth: depth as u16,
            disp: depth as u32,
            child_depth: depth as u32 + 1,
            vis: true,
            state: State::Phantom,
            payload: (0, 0),
            enters_filter: false,
            notrace: false,
            caller: false,
            prev_limit: None,
            prev_thresh: None,
        }
    }

    fn entry(&mut self, ti: usize, h: &Head) -> Result<()> {
        let d = h.raw.depth as usize;
        self.unwind_to(ti, d);
        while self.tasks[ti].stack.len() < d {
            let n = self.tasks[ti].stack.len();
            self.tasks[ti].stack.push(Self::phantom(n));
        }
        let ff = self.decide(h.func);
        let has_filter = self.filters.has_filter;
        let has_caller = self.filters.has_caller;
        let in_range = h.raw.time >= self.range.0;
        let t = &mut self.tasks[ti];
        if ff.actions.trace_off {
            t.trace_on = false;
        }
        if ff.actions.trace_on {
            t.trace_on = true;
        }
        let parent_child = t.stack.last().map_or(0, |p| p.child_depth);
        let enters_filter = ff.filter;
        let disp = if enters_filter && t.filter_count == 0 { 0 } else { parent_child };
        let in_region = !has_filter || t.filter_count > 0 || enters_filter;
        let notrace = ff.notrace;
        let below_target = t.caller_count > 0;
        let vis = t.notrace_count == 0
            && !notrace
            && in_region
            && !ff.hide
            && disp < t.depth_limit
            && !below_target;
        let mut fr = Frame {
            func: Some(h.func),
            entry_time: in_range.then_some(h.raw.time),
            rec_depth: h.raw.depth,
            disp,
            child_depth: if ff.hide { disp } else { disp + 1 },
            vis,
            state: State::NotShown,
            payload: h.payload,
            enters_filter,
            notrace,
            caller: ff.caller && !below_target,
            prev_limit: None,
            prev_thresh: None,
        };
        if let Some(n) = ff.actions.depth {
            fr.prev_limit = Some(t.depth_limit);
            t.depth_limit = t.depth_limit.min(disp.saturating_add(n));
        }
        if let Some(th) = ff.actions.time {
            fr.prev_thresh = Some(t.threshold);
            t.threshold = Some(th);
        }
        if enters_filter {
            t.filter_count += 1;
        }
        if notrace {
            t.notrace_count += 1;
        }
        if fr.caller {
            t.caller_count += 1;
        }
        let mut shown = vis && t.trace_on && in_range;
        let threshold = t.threshold.filter(|_| !ff.actions.trace);
        let need_time = shown && threshold.is_some();
        let need_caller = shown && has_caller && !fr.caller;
        if need_time || need_caller {
            let filters = &self.filters;
            let (exit, found) = self.merge.scan_subtree(ti, h.raw.depth, need_time, &mut |sym, f| {
                filters.decide(sym.func(f)).caller
            });
            if let (true, Some(th)) = (need_time, threshold) {
                shown &= exit.is_none_or(|e| e.saturating_sub(h.raw.time) >= th);
            }
            if need_caller {
                shown &= found;
            }
            // Hidden by its duration or by not leading to a target: its exit is hidden too.
            fr.vis &= shown;
        }
        fr.state = if shown { State::Held } else { State::NotShown };
        let state = fr.state;
        if state == State::Held {
            self.before_line(ti)?;
        }
        self.tasks[ti].stack.push(fr);
        if state == State::Held {
            if ff.actions.backtrace {
                self.backtrace(ti)?;
            }
            if self.printer.opts().no_merge || ff.actions.finish {
                let idx = self.tasks[ti].stack.len() - 1;
                self.print_entry(ti, idx)?;
            } else {
                self.held = Some(ti);
            }
        }
        if ff.actions.finish {
            self.stop_all = true;
        }
        Ok(())
    }

    fn backtrace(&mut self, ti: usize) -> Result<()> {
        let n = self.tasks[ti].stack.len().saturating_sub(1);
        for i in 0..n {
            let Some(func) = self.tasks[ti].stack[i].func else {
                continue;
            };
            let name = self.merge.sym.func(func).name.clone();
            let time = self.tasks[ti].stack[n].entry_time.unwrap_or(0);
            let ctx = make_ctx(&self.merge, &self.tasks, ti, Some(func), time);
            self.printer.backtrace(&ctx, i, &name)?;
        }
        Ok(())
    }

    fn exit(&mut self, ti: usize, h: &Head) -> Result<()> {
        let d = h.raw.depth as usize;
        self.unwind_to(ti, d + 1);
        let in_range = h.raw.time >= self.range.0;
        if self.tasks[ti].stack.len() < d + 1 || self.tasks[ti].stack[d].state == State::Phantom {
            // The entry is not ours (a fork child returning from fork, data after LOST).
            let fr = if self.tasks[ti].stack.len() == d + 1 {
                self.tasks[ti].stack.pop()
            } else {
                None
            };
            let disp = fr.as_ref().map_or(d as u32, |f| f.disp);
            let ff = self.decide(h.func);
            let t = &self.tasks[ti];
            // uftrace shows a returning frame it never saw enter whatever the filters say.
            let vis = t.notrace_count == 0 && !ff.notrace && !ff.hide && t.trace_on && in_range;
            if vis {
                self.before_line(ti)?;
                let ret = self.args_text(h.func, h.payload, ti, true);
                let name = self.merge.sym.func(h.func).name.clone();
                let ctx = make_ctx(&self.merge, &self.tasks, ti, Some(h.func), h.raw.time);
                self.printer.exit(&ctx, None, disp, &name, ret.as_deref())?;
                self.mark_printed(ti, h.raw.time);
            }
            return Ok(());
        }
        let fr = self.tasks[ti].stack.pop().expect("len checked");
        self.undo(ti, &fr);
        let func = fr.func.unwrap_or(h.func);
        let dur = fr.entry_time.map(|e| h.raw.time.saturating_sub(e));
        let trace_on = self.tasks[ti].trace_on;
        match fr.state {
            State::Held if self.held == Some(ti) => {
                self.held = None;
                self.leaf(ti, &fr, func, h)?;
            }
            State::Held | State::Printed => {
                if trace_on && in_range {
                    self.before_line(ti)?;
                    self.print_exit(ti, func, dur, fr.disp, h)?;
                }
            }
            State::NotShown | State::Phantom => {
                if fr.vis && trace_on && in_range {
                    self.before_line(ti)?;
                    self.print_exit(ti, func, dur, fr.disp, h)?;
                }
            }
        }
        Ok(())
    }

    fn print_exit(&mut self, ti: usize, func: FuncId, dur: Option<u64>, disp: u32, h: &Head) -> Result<()> {
        let ret = self.args_text(func, h.payload, ti, true);
        let fi = self.merge.sym.func(func);
        let ctx = make_ctx(&self.merge, &self.tasks, ti, Some(func), h.raw.time);
        self.printer.exit(&ctx, dur, disp, &fi.name, ret.as_deref())?;
        self.mark_printed(ti, h.raw.time);
        Ok(())
    }

    fn leaf(&mut self, ti: usize, fr: &Frame, func: FuncId, h: &Head) -> Result<()> {
        let Some(entry) = fr.entry_time else {
            return self.print_exit(ti, func, None, fr.disp, h);
        };
        let args = self.args_text(func, fr.payload, ti, false).unwrap_or_default();
        let ret = self.args_text(func, h.payload, ti, true);
        let color = self.decide(func).actions.color;
        let fi = self.merge.sym.func(func);
        let ctx = make_ctx(&self.merge, &self.tasks, ti, Some(func), entry);
        let dur = h.raw.time.saturating_sub(entry);
        self.printer.leaf(&ctx, dur, fr.disp, &fi.name, &args, ret.as_deref(), color)?;
        self.mark_printed(ti, entry);
        Ok(())
    }

    fn context_visible(&self, ti: usize) -> Option<u32> {
        let t = &self.tasks[ti];
        if !t.trace_on {
            return None;
        }
        match t.stack.last() {
            None => (!self.filters.has_filter).then_some(0),
            Some(f) => {
                let ok = matches!(f.state, State::Held | State::Printed | State::Phantom) && f.vis;
                ok.then_some(f.child_depth)
            }
        }
    }

    fn event(&mut self, ti: usize, h: &Head) -> Result<()> {
        if self.cfg.no_event || h.raw.time < self.range.0 {
            return Ok(());
        }
        let Some(depth) = self.context_visible(ti) else {
            return Ok(());
        };
        let data = self.merge.payload(ti, h.payload).to_vec();
        let Some(text) = self.events.text(self.merge.tid(ti), h.raw.addr, &data, self.merge.event_names()) else {
            return Ok(());
        };
        if self.cfg.no_sched && text.starts_with("linux:sched") {
            return Ok(());
        }
        self.before_line(ti)?;
        let ctx = make_ctx(&self.merge, &self.tasks, ti, None, h.raw.time);
        self.printer.comment(&ctx, None, depth, &text, false)?;
        self.mark_printed(ti, h.raw.time);
        Ok(())
    }

    fn lost(&mut self, ti: usize, h: &Head) -> Result<()> {
        let depth = self.tasks[ti].stack.last().map_or(0, |f| f.child_depth);
        self.before_line(ti)?;
        let text = format!("LOST {} records!!", h.raw.addr);
        let ctx = make_ctx(&self.merge, &self.tasks, ti, None, h.raw.time);
        self.printer.comment(&ctx, None, depth, &text, true)?;
        self.mark_printed(ti, h.raw.time);
        Ok(())
    }

    fn flush_extern(&mut self, upto: u64) -> Result<()> {
        while let Some((time, msg)) = self.merge.next_extern(upto) {
            let ti = self.last_shown_task.unwrap_or(0);
            if time < self.range.0 || time > self.range.1 || self.tasks.is_empty() {
                continue;
            }
            self.flush_held()?;
            let text = format!("external-data: {msg}");
            let ctx = make_ctx(&self.merge, &self.tasks, ti, None, time);
            self.printer.comment(&ctx, None, 0, &text, false)?;
        }
        Ok(())
    }

    fn run_flat(&mut self) -> Result<()> {
        let mut n = 0usize;
        let mut line = String::new();
        while let Some((ti, h)) = self.merge.pop() {
            if !self.tasks[ti].allowed {
                continue;
            }
            line.clear();
            let tid = self.merge.tid(ti);
            use std::fmt::Write as _;
            match h.raw.kind {
                RecordKind::Entry => {
                    let name = &self.merge.sym.func(h.func).name;
                    let _ = write!(line, "[{n}] ==> {tid}/{}: ip ({name}), time ({})", h.raw.depth, h.raw.time);
                    self.tasks[ti].stack.push(Frame {
                        entry_time: Some(h.raw.time),
                        ..Self::phantom(h.raw.depth as usize)
                    });
                }
                RecordKind::Exit => {
                    let name = &self.merge.sym.func(h.func).name;
                    let start = self.tasks[ti].stack.pop().and_then(|f| f.entry_time);
                    let dur = start.map_or(0, |s| h.raw.time.saturating_sub(s));
                    let _ = write!(line, "[{n}] <== {tid}/{}: ip ({name}), time ({}:{dur})", h.raw.depth, h.raw.time);
                }
                RecordKind::Lost => {
                    let _ = write!(line, "[{n}] XXX {tid}: lost {} records", h.raw.addr);
                }
                RecordKind::Event => {
                    if self.cfg.no_event {
                        continue;
                    }
                    let data = self.merge.payload(ti, h.payload).to_vec();
                    let text = self
                        .events
                        .text(tid, h.raw.addr, &data, self.merge.event_names())
                        .unwrap_or_default();
                    let _ = write!(line, "[{n}] !!! {tid}: {text} time ({})", h.raw.time);
                }
            }
            self.printer.raw(&line)?;
            n += 1;
        }
        self.printer.finish()?;
        Ok(())
    }
}

impl From<std::fmt::Error> for ReplayError {
    fn from(e: std::fmt::Error) -> Self {
        ReplayError::Other(e.to_string())
    }
}
