//! The text of `replay`: header, field columns, indentation, function and comment lines.

use crate::config::{Field, ReplayOptions};
use crate::timeval::push_duration;
use std::collections::HashMap;
use std::fmt::Write as _;
use std::io::{self, Write};

/// What a line is about, for the columns left of ` | `.
#[derive(Debug, Clone, Copy)]
pub struct LineCtx<'a> {
    pub tid: u32,
    pub comm: &'a str,
    pub module: &'a str,
    pub addr: u64,
    /// Timestamp the line stands for.
    pub time: u64,
    /// Timestamp of the previous line of this task (for `delta`).
    pub prev: Option<u64>,
}

/// What an entry or leaf line shows of a call.
#[derive(Debug, Clone, Copy)]
pub struct Call<'a> {
    pub name: &'a str,
    /// Rendered arguments (without parentheses).
    pub args: &'a str,
    /// Rendered return value (leaf lines).
    pub ret: Option<&'a str>,
    /// ANSI color of the name (`-T f@color=...`).
    pub color: Option<&'a str>,
    /// `file:line` (`--srcline`).
    pub srcline: Option<&'a str>,
}

/// The duration column: blank, a time, or a word (`backtrace`).
#[derive(Debug, Clone, Copy)]
pub enum DurCol<'a> {
    Blank,
    Time(u64),
    Word(&'a str),
}

/// Spaces cached after ` [  tid] | ` for the indentation (64 levels).
const TAIL_SPACES: usize = 128;

const GRAY: &str = "\x1b[90m";
const RED: &str = "\x1b[91m";
const RESET: &str = "\x1b[0m";
const GREEN: &str = "\x1b[32m";

/// [`LineCtx::addr`] of a line whose address column is blank.
pub const NO_ADDR: u64 = u64::MAX;

/// Writes replay lines to an output stream.
pub struct ReplayPrinter<'w> {
    out: &'w mut dyn Write,
    opts: ReplayOptions,
    buf: String,
    header_done: bool,
    first_time: u64,
    last_tid: Option<u32>,
    columns: HashMap<u32, usize>,
    tid_cache: (u32, String),
    /// The fields are the default `duration,tid`: see [`ReplayPrinter::push_default_fields`].
    default_fields: bool,
    /// For the default fields: ` [  tid] | ` of the last task printed, then
    /// [`TAIL_SPACES`] spaces.
    tid_tail: (u32, String),
    /// A `linux:sched-out` line held back: printed before the next line, unless the task's
    /// switch-in comes first (one `linux:schedule` line then).
    pending: Option<PendingSched>,
}

/// A held-back switch-out line: its context as it was when the switch happened.
struct PendingSched {
    tid: u32,
    comm: String,
    time: u64,
    prev: Option<u64>,
    depth: u32,
    text: &'static str,
}

fn header_text(f: Field, tid_width: usize) -> &'static str {
    match f {
        Field::Duration => " DURATION ",
        Field::Tid if tid_width == 6 => "   TID  ",
        Field::Tid => "   TID   ",
        Field::Addr => "   ADDRESS  ",
        Field::Time => "     TIMESTAMP    ",
        Field::Delta => " TIMEDELTA",
        Field::Elapsed => "  ELAPSED ",
        Field::Task => "      TASK NAME",
        Field::Module => "     MODULE NAME",
    }
}

fn field_width(f: Field, tid_width: usize) -> usize {
    match f {
        Field::Tid => tid_width + 2,
        f => header_text(f, tid_width).len(),
    }
}

impl<'w> ReplayPrinter<'w> {
    pub fn new(out: &'w mut dyn Write, opts: ReplayOptions, first_time: u64) -> Self {
        let default_fields = opts.fields == [Field::Duration, Field::Tid];
        ReplayPrinter {
            out,
            opts,
            buf: String::with_capacity(72 * 1024),
            header_done: false,
            first_time,
            last_tid: None,
            columns: HashMap::new(),
            tid_cache: (0, String::new()),
            default_fields,
            tid_tail: (0, String::new()),
            pending: None,
        }
    }

    pub fn set_first_time(&mut self, t: u64) {
        self.first_time = t;
    }

    /// The underlying stream, for notices printed before the trace.
    pub fn out(&mut self) -> &mut dyn Write {
        let _ = self.flush_lines();
        &mut *self.out
    }

    /// Lines are collected in `buf` and written in large blocks.
    fn flush_lines(&mut self) -> io::Result<()> {
        if !self.buf.is_empty() {
            self.out.write_all(self.buf.as_bytes())?;
            self.buf.clear();
        }
        Ok(())
    }

    pub fn opts(&self) -> &ReplayOptions {
        &self.opts
    }

    #[inline]
    fn header(&mut self) -> io::Result<()> {
        if self.header_done {
            return Ok(());
        }
        self.write_header()
    }

    #[cold]
    fn write_header(&mut self) -> io::Result<()> {
        self.header_done = true;
        self.flush_lines()?;
        let source = match (self.opts.srcline, self.opts.color) {
            (false, _) => "",
            (true, false) => " [SOURCE]",
            (true, true) => "\x1b[90m [SOURCE]\x1b[0m",
        };
        if self.opts.flat {
            return writeln!(self.out, "{source}");
        }
        if self.opts.fields.is_empty() {
            return Ok(());
        }
        let mut h = String::new();
        for (i, f) in self.opts.fields.iter().enumerate() {
            h.push_str(if i == 0 { "#" } else { " " });
            h.push_str(header_text(*f, self.opts.tid_width));
        }
        h.push_str("   FUNCTION");
        h.push_str(source);
        writeln!(self.out, "{h}")
    }

    /// A record of a task shown was read, though it printed nothing (yet): as uftrace, the
    /// output has its header even when the filters hide every line.
    pub fn record_seen(&mut self) -> io::Result<()> {
        self.header()
    }

    /// Ends the output: an empty result (no record read) is a single empty line.
    pub fn finish(&mut self) -> io::Result<()> {
        self.flush_sched()?;
        self.flush_lines()?;
        if !self.header_done && (!self.opts.fields.is_empty() || self.opts.flat) {
            writeln!(self.out)?;
        }
        self.header_done = true;
        Ok(())
    }

    /// Starts a line: header if needed, task separator, fields, ` | ` and the indentation.
    fn start(&mut self, ctx: &LineCtx<'_>, dur: DurCol<'_>, depth: u32) -> io::Result<()> {
        if self.pending.is_some() {
            self.flush_sched()?;
        }
        self.header()?;
        if self.opts.task_newline && self.last_tid.is_some_and(|t| t != ctx.tid) {
            if !self.opts.fields.is_empty() {
                let w: usize = self
                    .opts
                    .fields
                    .iter()
                    .map(|f| 1 + field_width(*f, self.opts.tid_width))
                    .sum();
                let _ = write!(self.buf, "{:w$} | ", "");
            }
            self.buf.push('\n');
        }
        self.last_tid = Some(ctx.tid);
        if self.default_fields && self.opts.column_offset.is_none() {
            self.push_default_fields(ctx.tid, dur, depth as usize);
            return Ok(());
        }
        self.push_fields(ctx, dur);
        let mut indent = depth as usize;
        if let Some(off) = self.opts.column_offset {
            let n = self.columns.len();
            let col = *self.columns.entry(ctx.tid).or_insert(n);
            indent += col * off as usize;
        }
        const SPACES: &str = "                                                                ";
        let mut n = indent * 2;
        while n > 0 {
            let k = n.min(SPACES.len());
            self.buf.push_str(&SPACES[..k]);
            n -= k;
        }
        Ok(())
    }

    /// The columns of the default `-f duration,tid`, ` | ` and the indentation, without
    /// walking the field list: the tid column, the bar and the indentation are one slice of
    /// the task's cached ` [  tid] | ` followed by spaces.
    #[inline]
    fn push_default_fields(&mut self, tid: u32, dur: DurCol<'_>, indent: usize) {
        self.buf.push(' ');
        match dur {
            DurCol::Blank => self.buf.push_str("          "),
            DurCol::Time(ns) => push_duration(&mut self.buf, ns, self.opts.color),
            DurCol::Word(w) => {
                let _ = write!(self.buf, "{w:>10}");
            }
        }
        if self.tid_tail.0 != tid || self.tid_tail.1.is_empty() {
            let tw = self.opts.tid_width;
            let mut s = format!(" [{tid:>tw$}] | ");
            s.extend(std::iter::repeat_n(' ', TAIL_SPACES));
            self.tid_tail = (tid, s);
        }
        let tail = &self.tid_tail.1;
        let bar = tail.len() - TAIL_SPACES;
        match tail.get(..bar + indent * 2) {
            Some(t) => self.buf.push_str(t),
            None => {
                self.buf.push_str(tail);
                let rest = bar + indent * 2 - tail.len();
                self.buf.extend(std::iter::repeat_n(' ', rest));
            }
        }
    }

    /// The columns of `-f` and ` | `.
    fn push_fields(&mut self, ctx: &LineCtx<'_>, dur: DurCol<'_>) {
        let color = self.opts.color;
        let tw = self.opts.tid_width;
        for f in &self.opts.fields {
            self.buf.push(' ');
            match f {
                Field::Duration => match dur {
                    DurCol::Blank => self.buf.push_str("          "),
                    DurCol::Time(ns) => push_duration(&mut self.buf, ns, color),
                    DurCol::Word(w) => {
                        let _ = write!(self.buf, "{w:>10}");
                    }
                },
                Field::Tid => {
                    if self.tid_cache.0 != ctx.tid || self.tid_cache.1.is_empty() {
                        self.tid_cache = (ctx.tid, format!("[{:>tw$}]", ctx.tid));
                    }
                    self.buf.push_str(&self.tid_cache.1);
                }
                Field::Addr if ctx.addr == NO_ADDR => self.buf.push_str("            "),
                Field::Addr => {
                    let _ = write!(self.buf, "{:>12x}", ctx.addr);
                }
                Field::Time => {
                    let _ = write!(
                        self.buf,
                        "{:>8}.{:09}",
                        ctx.time / 1_000_000_000,
                        ctx.time % 1_000_000_000
                    );
                }
                Field::Delta => match ctx.prev {
                    Some(p) => push_duration(&mut self.buf, ctx.time.saturating_sub(p), color),
                    None => self.buf.push_str("          "),
                },
                Field::Elapsed => push_duration(
                    &mut self.buf,
                    ctx.time.saturating_sub(self.first_time),
                    color,
                ),
                Field::Task => {
                    let comm: String = ctx.comm.chars().take(15).collect();
                    let _ = write!(self.buf, "{comm:>15}");
                }
                Field::Module => {
                    let m: String = ctx.module.chars().take(16).collect();
                    let _ = write!(self.buf, "{m:>16}");
                }
            }
        }
        if !self.opts.fields.is_empty() {
            self.buf.push_str(" | ");
        }
    }

    fn end(&mut self) -> io::Result<()> {
        self.buf.push('\n');
        if self.buf.len() >= 64 * 1024 {
            self.flush_lines()?;
        }
        Ok(())
    }

    fn name(&mut self, name: &str, color: Option<&str>) {
        match color.filter(|_| self.opts.color) {
            Some(c) => {
                let _ = write!(self.buf, "{c}{name}{RESET}");
            }
            None => self.buf.push_str(name),
        }
    }

    fn parens(&mut self, name: &str, args: &str) {
        if !args.is_empty() {
            self.buf.push('(');
            self.buf.push_str(args);
            self.buf.push(')');
        } else if !name.ends_with(')') {
            // A name that ends with its own parentheses (`X::operator()`, `X::operator(cast)`)
            // gets none more, as uftrace prints it.
            self.buf.push_str("()");
        }
    }

    /// ` /* file:line */` after an entry or a leaf (`--srcline`; not with `--no-comment`).
    fn location(&mut self, srcline: Option<&str>) {
        let Some(loc) = srcline.filter(|_| self.opts.srcline && !self.opts.no_comment) else {
            return;
        };
        if self.opts.color {
            let _ = write!(self.buf, "{GRAY} /* {loc} */{RESET}");
        } else {
            let _ = write!(self.buf, " /* {loc} */");
        }
    }

    /// `name(args) {`
    pub fn entry(&mut self, ctx: &LineCtx<'_>, depth: u32, call: &Call<'_>) -> io::Result<()> {
        self.start(ctx, DurCol::Blank, depth)?;
        self.name(call.name, call.color);
        self.parens(call.name, call.args);
        self.buf.push_str(" {");
        self.location(call.srcline);
        self.end()
    }

    /// `name(args) = ret;`
    pub fn leaf(
        &mut self,
        ctx: &LineCtx<'_>,
        dur: u64,
        depth: u32,
        call: &Call<'_>,
    ) -> io::Result<()> {
        self.start(ctx, DurCol::Time(dur), depth)?;
        self.name(call.name, call.color);
        self.parens(call.name, call.args);
        if let Some(r) = call.ret {
            self.buf.push_str(" = ");
            self.buf.push_str(r);
        }
        self.buf.push(';');
        self.location(call.srcline);
        self.end()
    }

    /// `} = ret; /* name */`
    pub fn exit(
        &mut self,
        ctx: &LineCtx<'_>,
        dur: Option<u64>,
        depth: u32,
        name: &str,
        ret: Option<&str>,
    ) -> io::Result<()> {
        self.start(ctx, dur.map_or(DurCol::Blank, DurCol::Time), depth)?;
        self.buf.push('}');
        if let Some(r) = ret {
            let _ = write!(self.buf, " = {r};");
        }
        if !self.opts.no_comment {
            if self.opts.color {
                let _ = write!(self.buf, "{GRAY} /* {name} */{RESET}");
            } else {
                self.buf.push_str(" /* ");
                self.buf.push_str(name);
                self.buf.push_str(" */");
            }
        }
        self.end()
    }

    /// `/* text */` at a depth (events, lost records).
    pub fn comment(
        &mut self,
        ctx: &LineCtx<'_>,
        dur: Option<u64>,
        depth: u32,
        text: &str,
        red: bool,
    ) -> io::Result<()> {
        self.start(ctx, dur.map_or(DurCol::Blank, DurCol::Time), depth)?;
        if red && self.opts.color {
            let _ = write!(self.buf, "{RED}/* {text} */{RESET}");
        } else {
            let _ = write!(self.buf, "/* {text} */");
        }
        self.end()
    }

    /// A context-switch line `/* linux:schedule */`: green with `--color`, indentation
    /// included (the colour is reset after the newline, as uftrace does).
    pub fn sched(
        &mut self,
        ctx: &LineCtx<'_>,
        dur: Option<u64>,
        depth: u32,
        text: &str,
    ) -> io::Result<()> {
        if !self.opts.color {
            return self.comment(ctx, dur, depth, text, false);
        }
        self.start(ctx, dur.map_or(DurCol::Blank, DurCol::Time), 0)?;
        let indent = depth as usize * 2;
        let _ = write!(
            self.buf,
            "{GREEN}{:indent$}/* {RESET}{GREEN}{text}{RESET}{GREEN} */\n{RESET}",
            ""
        );
        if self.buf.len() >= 64 * 1024 {
            self.flush_lines()?;
        }
        Ok(())
    }

    /// Holds back a switch-out line of `ctx`'s task (see [`ReplayPrinter::take_sched`]).
    pub fn defer_sched(
        &mut self,
        ctx: &LineCtx<'_>,
        depth: u32,
        text: &'static str,
    ) -> io::Result<()> {
        self.flush_sched()?;
        self.pending = Some(PendingSched {
            tid: ctx.tid,
            comm: ctx.comm.to_string(),
            time: ctx.time,
            prev: ctx.prev,
            depth,
            text,
        });
        Ok(())
    }

    /// Drops the held-back switch-out line of task `tid`, if it is the one held back: no
    /// line came since, its switch-in makes one `linux:schedule` line.
    pub fn take_sched(&mut self, tid: u32) -> bool {
        if self.pending.as_ref().is_some_and(|p| p.tid == tid) {
            self.pending = None;
            return true;
        }
        false
    }

    fn flush_sched(&mut self) -> io::Result<()> {
        let Some(p) = self.pending.take() else {
            return Ok(());
        };
        let ctx = LineCtx {
            tid: p.tid,
            comm: &p.comm,
            module: "",
            addr: NO_ADDR,
            time: p.time,
            prev: p.prev,
        };
        self.sched(&ctx, None, p.depth, p.text)
    }

    /// One `backtrace` line: `/* [ 0] main */`.
    pub fn backtrace(&mut self, ctx: &LineCtx<'_>, index: usize, name: &str) -> io::Result<()> {
        self.start(ctx, DurCol::Word("backtrace"), 0)?;
        let _ = write!(self.buf, "/* [{index:2}] {name} */");
        self.end()
    }

    /// A raw line (for `--flat`).
    pub fn raw(&mut self, line: &str) -> io::Result<()> {
        self.header()?;
        self.buf.push_str(line);
        self.end()
    }

    /// The block listing functions still open at the end of the data.
    pub fn remaining(&mut self, tasks: &[(u32, Vec<(u16, String)>)]) -> io::Result<()> {
        if tasks.is_empty() {
            return Ok(());
        }
        self.finish()?;
        let title = "uftrace stopped tracing with remaining functions";
        writeln!(self.out, "\n{title}\n{}", "=".repeat(title.len()))?;
        for (tid, frames) in tasks {
            writeln!(self.out, "task: {tid}")?;
            for (d, name) in frames.iter().rev() {
                writeln!(self.out, "[{d}] {name}")?;
            }
            // An empty line ends each task's list.
            writeln!(self.out)?;
        }
        Ok(())
    }
}
