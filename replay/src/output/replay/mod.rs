//! `replay`: the call graph as indented lines. Each task's pairing and filters are its
//! [`TaskStack`]; beside it this module keeps what the tree layout needs and uftrace's reader
//! keeps too — a display-depth counter, the depth a fork child starts at, the setjmp depth —
//! because users compare outputs line by line, and the depth of a line after fork, exec,
//! longjmp or a filter depends on that bookkeeping rather than on the call tree alone.
//!
//! Records come in time order from [`Merge`]; `-r`, `-t` and `-C` were already applied there
//! (see the merge's `gate`). For each shown entry the walk looks at the next record of the
//! whole trace: when that is the same task's matching exit (after consuming the records that
//! would not be shown), the call is printed as a leaf `f();`. [`printer`] writes the lines.

use crate::callstack::{TaskStack, Verdict};
use crate::config::{Config, ReplayOptions};
use crate::filter::FuncFilter;

use crate::merge::{Head, Merge};
use crate::payload::events::EventState;
pub mod printer;
use printer::{Call, LineCtx, ReplayPrinter};

use crate::merge::open_merge;
use crate::symbols::FuncId;
use crate::Result;
use record_format::libcall::{stack_effect, StackEffect};
use record_format::{RecordKind, TraceDir};
use std::io::Write;

/// A task: its call stack and what the tree layout keeps beside it.
#[derive(Debug)]
struct TaskState {
    stack: TaskStack,
    display_depth: i64,
    display_depth_set: bool,
    fork_display_depth: i64,
    fork_handled: bool,
    /// Time of the record being shown and of the one before (`time`, `delta` columns).
    timestamp: u64,
    timestamp_last: u64,
    allowed: bool,
    ppid_task: Option<usize>,
}

/// The replay engine over one data directory.
pub struct Engine<'d, 'w> {
    cfg: &'d Config,
    merge: Merge<'d>,
    tasks: Vec<TaskState>,
    /// `--trace=on|off` state, toggled by trace_on/trace_off triggers (global, as in uftrace).
    enabled: bool,
    setjmp_depth: i64,
    setjmp_count: usize,
    /// Per function: its stack effect, once known.
    effects: Vec<Option<Option<StackEffect>>>,
    printer: ReplayPrinter<'w>,
    events: EventState,
    last_task: Option<usize>,
    finished: bool,
    /// The name of the line being printed (reused buffer).
    name: String,
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
    ) -> Result<Engine<'d, 'w>> {
        let (mut merge, notices) = open_merge(dir, cfg);
        let mut printer = ReplayPrinter::new(out, opts.clone(), 0);
        for n in &notices {
            writeln!(printer.out(), "Usage: {n}")?;
        }
        let first = merge.first_time();
        printer.set_first_time(first);
        if let Some(r) = cfg.time_range {
            let start = r.start.map_or(0, |p| time_point(p, first));
            let stop = r.stop.map_or(u64::MAX, |p| time_point(p, first));
            merge.set_range(start, stop);
            merge.restart();
        }
        let ppids = parent_tasks(dir);
        let tasks = dir
            .data
            .iter()
            .enumerate()
            .map(|(i, d)| TaskState {
                stack: TaskStack::new(cfg.depth),
                display_depth: 0,
                display_depth_set: cfg.time_range.is_none_or(|r| r.start.is_none()),
                fork_display_depth: 0,
                fork_handled: false,
                timestamp: 0,
                timestamp_last: 0,
                allowed: cfg.tids.is_empty() || cfg.tids.contains(&d.tid),
                ppid_task: ppids[i],
            })
            .collect();
        Ok(Engine {
            cfg,
            merge,
            tasks,
            enabled: true,
            setjmp_depth: 0,
            setjmp_count: 0,
            effects: Vec::new(),
            printer,
            events: EventState::default(),
            last_task: None,
            finished: false,
            name: String::new(),
        })
    }

    /// Runs the whole replay; returns the warnings met while reading.
    pub fn run(mut self) -> Result<Vec<String>> {
        if self.printer.opts().flat {
            self.run_flat()?;
            return Ok(self.merge.warnings);
        }
        while let Some((ti, head)) = self.merge.pop() {
            if self.merge.has_extern() {
                self.flush_extern(head.raw.time)?;
            }
            if !self.tasks[ti].allowed {
                continue;
            }
            self.consume(ti, &head);
            if head.raw.kind == RecordKind::Event && self.cfg.no_event {
                continue;
            }
            self.graph_record(ti, &head)?;
            if self.finished {
                break;
            }
        }
        self.flush_extern(u64::MAX)?;
        self.printer.finish()?;
        let remaining = self.remaining();
        self.printer.remaining(&remaining)?;
        Ok(self.merge.warnings)
    }

    /// Stack bookkeeping of a record taken from the stream (uftrace's "consume").
    #[inline]
    fn consume(&mut self, ti: usize, h: &Head) {
        let fork_depth = self.tasks[ti]
            .ppid_task
            .map_or(0, |p| self.tasks[p].fork_display_depth);
        let t = &mut self.tasks[ti];
        let r = &h.raw;
        if r.kind == RecordKind::Event {
            return;
        }
        if !t.stack.started() && !t.fork_handled {
            // A fork child starts at the depth its parent's fork was shown at.
            if fork_depth != 0 {
                t.display_depth = fork_depth;
                t.display_depth_set = true;
            }
            t.fork_handled = true;
        }
        if r.kind == RecordKind::Lost {
            t.stack.align(r);
            t.display_depth_set = false;
        }
        t.stack.consume(r, h.func);
    }

    /// Filter bookkeeping at a function entry; `false` when the entry is not shown.
    fn fstack_entry(&mut self, ti: usize, h: &Head, ff: &FuncFilter) -> bool {
        let has_filter = self.merge.filters.has_filter;
        let effect = self.effect(h.func);
        let no_libcall_plt = self.merge.filters.no_libcall && self.merge.sym.func(h.func).is_plt;
        let t = &mut self.tasks[ti];
        // setjmp marks the point longjmp returns to, whatever the filters hide.
        if effect == Some(StackEffect::Setjmp) && !t.stack.inside_notrace() {
            self.setjmp_depth = t.display_depth + 1;
            self.setjmp_count = t.stack.open_calls();
        }
        let hide = ff.hide || no_libcall_plt;
        let verdict = t
            .stack
            .enter(ff, has_filter, hide, effect, Some(&mut self.enabled));
        if verdict != Verdict::Outside && effect == Some(StackEffect::Fork) {
            t.fork_display_depth = t.display_depth + 1;
        }
        if verdict == Verdict::Disabled && ff.actions.trace_off {
            t.display_depth_set = false;
        }
        if verdict != Verdict::Shown {
            return false;
        }
        if !t.display_depth_set {
            t.display_depth = (t.stack.open_calls() as i64 - 1).max(0);
            t.display_depth_set = true;
        }
        true
    }

    /// The stack effect of a function (cached per id).
    #[inline]
    fn effect(&mut self, func: FuncId) -> Option<StackEffect> {
        let i = func as usize;
        if self.effects.len() <= i {
            self.effects.resize(i + 1, None);
        }
        *self.effects[i].get_or_insert_with(|| stack_effect(&self.merge.sym.func(func).name))
    }

    /// Filter bookkeeping at a function exit (the slot above the stack counter).
    #[inline]
    fn fstack_exit(&mut self, ti: usize) {
        self.tasks[ti].stack.exit();
    }

    /// Display-depth bookkeeping after a shown entry line or before a shown exit line.
    fn fstack_update_entry(&mut self, ti: usize, idx: usize) {
        let t = &mut self.tasks[ti];
        match t.stack.take_jump(idx) {
            Some(StackEffect::Exec) => {
                t.display_depth = 0;
                t.stack.exec();
            }
            Some(StackEffect::Longjmp) => {
                t.display_depth = self.setjmp_depth;
                t.stack.longjmp_to(self.setjmp_count);
            }
            _ => t.display_depth += 1,
        }
    }

    fn fstack_update_exit(&mut self, ti: usize) -> i64 {
        let t = &mut self.tasks[ti];
        if !t.display_depth_set {
            t.display_depth = t.stack.open_calls() as i64 + 1;
            t.display_depth_set = true;
        }
        t.display_depth = (t.display_depth - 1).max(0);
        t.display_depth
    }

    /// Whether a peeked record would be skipped (not shown): uftrace's skip check.
    #[inline]
    fn would_skip(&mut self, ti: usize, h: &Head) -> bool {
        let has_filter = self.merge.filters.has_filter;
        if self.tasks[ti].stack.inside_notrace() {
            return true;
        }
        if h.raw.kind == RecordKind::Exit {
            let s = &mut self.tasks[ti].stack;
            let i = s.open_calls().saturating_sub(1);
            return s.hidden(i);
        }
        let ff = if h.raw.kind == RecordKind::Entry {
            self.merge.decide(h.func)
        } else {
            FuncFilter::default()
        };
        if h.raw.kind == RecordKind::Entry
            && self.merge.filters.no_libcall
            && self.merge.sym.func(h.func).is_plt
        {
            return true;
        }
        let s = &self.tasks[ti].stack;
        let mut depth = s.depth_left();
        if ff.notrace {
            return true;
        }
        if ff.filter {
            depth = s.default_depth();
        } else if has_filter && !s.inside_filter() {
            return true;
        }
        if ff.hide {
            return true;
        }
        if ff.actions.depth.is_some() || ff.actions.trace_on {
            return false;
        }
        ff.actions.trace_off || depth <= 0
    }

    /// Consumes records that would not be shown and returns the task of the next record.
    #[inline]
    fn skip(&mut self, ti: usize, curr_depth: u16) -> Option<usize> {
        let s = &mut self.tasks[ti].stack;
        let idx = s.open_calls().saturating_sub(1);
        if s.jumps(idx) {
            return None;
        }
        loop {
            let next = self.merge.peek()?;
            let h = *self.merge.head(next)?;
            if next == ti && curr_depth >= h.raw.depth {
                return Some(next);
            }
            if h.raw.kind == RecordKind::Lost {
                return None;
            }
            if !self.tasks[next].allowed || (h.raw.kind == RecordKind::Event && self.cfg.no_event) {
                // Invisible to the whole replay: take it out of the way.
                self.merge.pop();
                if self.tasks[next].allowed {
                    self.consume(next, &h);
                }
                continue;
            }
            if !self.would_skip(next, &h) {
                return Some(next);
            }
            self.merge.pop();
            self.consume(next, &h);
            if h.raw.kind == RecordKind::Entry {
                let ff = self.merge.decide(h.func);
                self.fstack_entry(next, &h, &ff);
            } else {
                self.fstack_exit(next);
            }
            if !self.enabled {
                return None;
            }
        }
    }

    /// Renders the arguments (or the return value) recorded in a payload; empty when the
    /// record has none (`more` clear) or with `--no-args`.
    fn args_text(&mut self, func: FuncId, h: &Head, ti: usize, ret: bool) -> String {
        if !h.raw.more || self.printer.opts().no_args {
            return String::new();
        }
        let mut s = String::new();
        if !self.merge.push_args(ti, func, h, ret, &mut s) {
            s.clear();
        }
        s
    }

    /// `name` or `name@lib` (`--libname`, library calls only).
    /// Puts `name@lib` into `self.name` for `--libname` on a library call; returns whether
    /// it did (otherwise the symbol's own name is printed).
    fn fill_name(&mut self, ti: usize, func: FuncId) -> bool {
        if !(self.printer.opts().libname && self.merge.sym.func(func).is_plt) {
            return false;
        }
        self.name.clear();
        self.name.push_str(&self.merge.sym.func(func).name);
        if self.printer.opts().libname && self.merge.sym.func(func).is_plt {
            let session = self.merge.session_of(ti);
            if let Some(lib) = self.merge.sym.library_of(session, func) {
                self.name.push('@');
                self.name.push_str(&lib);
            }
        }
        true
    }

    fn graph_record(&mut self, ti: usize, h: &Head) -> Result<()> {
        if h.raw.kind == RecordKind::Lost {
            let depth = (self.tasks[ti].display_depth + 1) as u32;
            let text = format!("LOST {} records!!", h.raw.addr);
            let ctx = line_ctx(&self.merge, &self.tasks, ti, 0, None);
            let ctx = LineCtx {
                time: h.raw.time,
                ..ctx
            };
            return Ok(self.printer.comment(&ctx, None, depth, &text, true)?);
        }
        if h.raw.kind == RecordKind::Event {
            return self.event(ti, h);
        }
        if h.raw.kind == RecordKind::Exit
            && self.merge.filters.no_libcall
            && self.merge.sym.func(h.func).is_plt
        {
            // uftrace drops library-call exits before any bookkeeping.
            return Ok(());
        }
        let t = &mut self.tasks[ti];
        t.timestamp_last = t.timestamp;
        t.timestamp = h.raw.time;
        self.last_task = Some(ti);
        match h.raw.kind {
            RecordKind::Entry => self.entry(ti, h),
            _ => self.exit(ti, h),
        }
    }

    fn entry(&mut self, ti: usize, h: &Head) -> Result<()> {
        let ff = self.merge.decide(h.func);
        if !self.fstack_entry(ti, h, &ff) {
            return Ok(());
        }
        let depth = self.tasks[ti].display_depth as u32;
        if ff.actions.backtrace {
            self.backtrace(ti)?;
        }
        let args = self.args_text(h.func, h, ti, false);
        let own = self.fill_name(ti, h.func);
        let idx = self.tasks[ti].stack.open_calls().saturating_sub(1);
        let next = if self.printer.opts().no_merge {
            None
        } else {
            self.skip(ti, h.raw.depth)
        };
        let leaf = next == Some(ti)
            && self
                .merge
                .head(ti)
                .is_some_and(|n| n.raw.depth == h.raw.depth && n.raw.kind == RecordKind::Exit);
        let color = ff.actions.color;
        if leaf {
            let (_, exit) = self.merge.pop().expect("peeked above");
            self.consume(ti, &exit);
            let ret = Some(self.args_text(h.func, &exit, ti, true)).filter(|r| !r.is_empty());
            let slot = self.tasks[ti].stack.slots()[idx];
            let ctx = line_ctx(&self.merge, &self.tasks, ti, slot.addr, Some(h.func));
            self.printer.leaf(
                &ctx,
                slot.start,
                depth,
                &Call {
                    name: pick_name(own, &self.name, &self.merge, h.func),
                    args: &args,
                    ret: ret.as_deref(),
                    color,
                },
            )?;
            self.fstack_exit(ti);
        } else {
            let addr = self.tasks[ti].stack.slots()[idx].addr;
            let ctx = line_ctx(&self.merge, &self.tasks, ti, addr, Some(h.func));
            self.printer.entry(
                &ctx,
                depth,
                &Call {
                    name: pick_name(own, &self.name, &self.merge, h.func),
                    args: &args,
                    ret: None,
                    color,
                },
            )?;
            self.fstack_update_entry(ti, idx);
        }
        if ff.actions.finish {
            self.finished = true;
        }
        Ok(())
    }

    fn exit(&mut self, ti: usize, h: &Head) -> Result<()> {
        let stack = &mut self.tasks[ti].stack;
        let i = stack.open_calls();
        let slot = *stack.frame(i);
        if self.enabled && !stack.hidden(i) {
            let depth = self.fstack_update_exit(ti) as u32;
            let ret = Some(self.args_text(h.func, h, ti, true)).filter(|r| !r.is_empty());
            let own = self.fill_name(ti, h.func);
            let ctx = line_ctx(&self.merge, &self.tasks, ti, slot.addr, Some(h.func));
            self.printer.exit(
                &ctx,
                Some(slot.start),
                depth,
                pick_name(own, &self.name, &self.merge, h.func),
                ret.as_deref(),
            )?;
        }
        self.fstack_exit(ti);
        Ok(())
    }

    fn backtrace(&mut self, ti: usize) -> Result<()> {
        let n = self.tasks[ti].stack.open_calls().saturating_sub(1);
        for i in 0..n {
            let slot = *self.tasks[ti].stack.frame(i);
            let name = match slot.func {
                Some(f) => self.merge.sym.func(f).name.clone(),
                None => format!("<{:x}>", slot.addr),
            };
            let ctx = line_ctx(&self.merge, &self.tasks, ti, slot.addr, slot.func);
            self.printer.backtrace(&ctx, i, &name)?;
        }
        Ok(())
    }

    fn event(&mut self, ti: usize, h: &Head) -> Result<()> {
        let depth = self.tasks[ti].display_depth as u32;
        let s = &mut self.tasks[ti].stack;
        let i = s.open_calls();
        if !self.enabled || s.hidden(i) {
            return Ok(());
        }
        // Outside every `-F` function, or inside a `-N` one, as uftrace hides them.
        if s.inside_notrace() || (self.merge.filters.has_filter && !s.inside_filter()) {
            return Ok(());
        }
        let Some(text) = self.merge.event_text(ti, h, &mut self.events) else {
            return Ok(());
        };
        if self.cfg.no_sched && text.starts_with("linux:sched") {
            return Ok(());
        }
        let ctx = LineCtx {
            time: h.raw.time,
            ..line_ctx(&self.merge, &self.tasks, ti, 0, None)
        };
        self.printer.comment(&ctx, None, depth, &text, false)?;
        Ok(())
    }

    fn flush_extern(&mut self, upto: u64) -> Result<()> {
        while let Some((time, msg)) = self.merge.next_extern(upto) {
            let Some(ti) = self.last_task.or((!self.tasks.is_empty()).then_some(0)) else {
                return Ok(());
            };
            let text = format!("external-data: {msg}");
            let ctx = LineCtx {
                time,
                ..line_ctx(&self.merge, &self.tasks, ti, 0, None)
            };
            self.printer.comment(&ctx, None, 0, &text, false)?;
        }
        Ok(())
    }

    /// Functions still open at the end, per task, innermost last: (index, name).
    fn remaining(&self) -> Vec<(u32, Vec<(u16, String)>)> {
        let mut out = Vec::new();
        for (ti, t) in self.tasks.iter().enumerate() {
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
            let frames = (zero..user)
                .map(|k| {
                    let s = slots.get(k).copied().unwrap_or_default();
                    let name = s.func.map_or_else(
                        || format!("<{:x}>", s.addr),
                        |f| self.merge.sym.func(f).name.clone(),
                    );
                    ((k - zero) as u16, name)
                })
                .collect();
            out.push((self.merge.tid(ti), frames));
        }
        out
    }

    fn run_flat(&mut self) -> Result<()> {
        use std::fmt::Write as _;
        let mut n = 0usize;
        let mut line = String::new();
        while let Some((ti, h)) = self.merge.pop() {
            if !self.tasks[ti].allowed {
                continue;
            }
            self.consume(ti, &h);
            if h.raw.kind == RecordKind::Event && self.cfg.no_event {
                continue;
            }
            line.clear();
            let tid = self.merge.tid(ti);
            match h.raw.kind {
                RecordKind::Entry | RecordKind::Exit => {
                    let f = self.merge.sym.func(h.func);
                    if self.merge.filters.no_libcall && f.is_plt {
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
                        let total = self.tasks[ti]
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
                    let text = self
                        .merge
                        .event_text(ti, &h, &mut self.events)
                        .unwrap_or_default();
                    let _ = write!(line, "[{n}] !!! {tid}: {text} time ({})", h.raw.time);
                }
            }
            self.printer.raw(&line)?;
            n += 1;
        }
        self.printer.finish()?;
        let remaining = self.remaining();
        self.printer.remaining(&remaining)?;
        Ok(())
    }
}

/// The name to print: the `--libname` buffer or the symbol's own name.
fn pick_name<'a>(own: bool, buf: &'a str, merge: &'a Merge<'_>, func: FuncId) -> &'a str {
    if own {
        buf
    } else {
        &merge.sym.func(func).name
    }
}

fn line_ctx<'a>(
    merge: &'a Merge<'_>,
    tasks: &[TaskState],
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
