//! Time-ordered merge of every task's records.
//!
//! Each task has a cursor over its mapped `.dat` bytes and one decoded *head* record; a binary
//! heap picks the earliest head (ties go to the task listed first in TASKINFO, as uftrace does).
//! Decoding a head resolves its function, since the payload size of an entry or exit depends on
//! the argument spec bound to that function.

use crate::config::{Config, KernelView};
use crate::filter::{Filters, FuncFilter};
use crate::payload::args::push_recorded;
use crate::specs::Specs;
use crate::symbols::{FuncId, Symbolizer};
use gate::Gate;
use record_format::argspec::{decode_payload, payload_len, ArgItem};
use record_format::dat::{event_payload_len, read_header, BadRecord};
use record_format::dir::{GraphRecord, KernelRecords};
use record_format::raw::RECORD_SIZE;
use record_format::{RawRecord, RecordKind, TraceDir};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

mod externs;
mod gate;
mod outside;
mod plain;
mod values;
pub use externs::parse_extern;
pub use outside::OpenKernelCall;

/// One decoded record.
#[derive(Debug, Clone, Copy)]
pub struct Head {
    pub raw: RawRecord,
    /// The function (entries and exits only).
    pub func: FuncId,
    /// (offset, length) of the payload in the task's data.
    pub payload: (usize, usize),
    /// A kernel event: its index in the kernel files' events.
    pub kernel_event: Option<u32>,
}

#[derive(Debug)]
struct Cursor<'d> {
    file: &'d record_format::dat::DatFile,
    /// Bytes before this offset were handed back to the kernel.
    released: usize,
    tid: u32,
    bytes: &'d [u8],
    pos: usize,
    last_time: u64,
    session: Option<usize>,
    sess_from: u64,
    sess_until: u64,
    first_session: Option<usize>,
    /// (addr, session, func) of the last resolved record.
    memo: (u64, Option<usize>, FuncId),
    /// The task's kernel function records (`-k`), in time order, and the next one.
    kernel: Vec<GraphRecord>,
    kpos: usize,
    /// User functions open after the last user record taken (kernel records nest under
    /// them).
    user_depth: u32,
    /// Kernel calls open outside every user function.
    outside: outside::Outside,
}

/// The records of `kernel`, by task index (`tids`: the tasks' tids), each in time order; the
/// events' texts stay in the returned [`KernelRecords`]; problems go to `warnings`.
fn kernel_records(
    kernel: &record_format::dir::KernelData,
    tids: &[u32],
    warnings: &mut Vec<String>,
) -> (Vec<Vec<GraphRecord>>, KernelRecords) {
    let mut out = vec![Vec::new(); tids.len()];
    let task_of: HashMap<u32, usize> = tids.iter().enumerate().map(|(i, &t)| (t, i)).collect();
    let mut recs = kernel.graph_records();
    warnings.append(&mut recs.problems);
    for cpu in std::mem::take(&mut recs.cpus) {
        for r in cpu {
            let tid = recs.owner(&r, |t| task_of.contains_key(&t));
            if let Some(&ti) = task_of.get(&tid) {
                out[ti].push(GraphRecord { tid, ..r });
            }
        }
    }
    for recs in &mut out {
        recs.sort_by_key(|r| r.time);
    }
    let lost = kernel.lost_events();
    if lost > 0 {
        warnings.push(format!(
            "the kernel lost {lost} events while recording: some kernel calls are missing"
        ));
    }
    (out, recs)
}

/// The merged stream of all tasks.
pub struct Merge<'d> {
    pub sym: Symbolizer<'d>,
    pub specs: Specs,
    pub filters: Filters,
    decided: Vec<Option<FuncFilter>>,
    gate: Gate,
    cursors: Vec<Cursor<'d>>,
    heads: Vec<Option<Head>>,
    heap: BinaryHeap<Reverse<(u64, usize)>>,
    /// The task whose head is not in the heap (see [`Merge::pop`]).
    current: Option<usize>,
    externs: Vec<(u64, String)>,
    ext_pos: usize,
    event_names: HashMap<u64, String>,
    /// The kernel files' events (and their formats), which kernel EVENT heads point into.
    kernel_events: KernelRecords,
    kernel_view: KernelView,
    /// No reader-level filter is in effect (see [`Merge::update_plain`]): records go from the
    /// data straight to the heads.
    plain: bool,
    first_time: u64,
    /// `--kernel-only` passed over a user record inside `-r` (see
    /// [`Merge::user_record_passed_over`]).
    user_passed_over: bool,
    /// Problems met while decoding (printed as warnings by the caller).
    pub warnings: Vec<String>,
}

impl<'d> Merge<'d> {
    pub fn new(
        dir: &'d TraceDir,
        sym: Symbolizer<'d>,
        specs: Specs,
        filters: Filters,
        gate: Gate,
        kernel_view: KernelView,
    ) -> Merge<'d> {
        let cursors: Vec<Cursor<'d>> = dir
            .data
            .iter()
            .map(|d| Cursor {
                file: d,
                released: 0,
                tid: d.tid,
                bytes: d.bytes(),
                pos: 0,
                last_time: 0,
                session: None,
                sess_from: 1,
                sess_until: 0,
                first_session: None,
                memo: (0, None, 0),
                kernel: Vec::new(),
                kpos: 0,
                user_depth: 0,
                outside: outside::Outside::default(),
            })
            .collect();
        let n = cursors.len();
        let mut warnings = Vec::new();
        let mut cursors = cursors;
        let mut kernel_events = KernelRecords::default();
        if let Some(k) = &dir.kernel {
            let tids: Vec<u32> = cursors.iter().map(|c| c.tid).collect();
            let (by_task, events) = kernel_records(k, &tids, &mut warnings);
            for (c, recs) in cursors.iter_mut().zip(by_task) {
                c.kernel = recs;
            }
            kernel_events = events;
        }
        let mut event_names = HashMap::new();
        if let Some(t) = dir.read_text("events.txt") {
            event_names.extend(record_format::sdt::parse_events_txt(&t));
        }
        let mut m = Merge {
            sym,
            specs,
            filters,
            decided: Vec::new(),
            gate,
            cursors,
            heads: vec![None; n],
            heap: BinaryHeap::with_capacity(n),
            current: None,
            externs: dir
                .extern_data
                .as_deref()
                .map(parse_extern)
                .unwrap_or_default(),
            ext_pos: 0,
            event_names,
            kernel_events,
            kernel_view,
            plain: false,
            first_time: u64::MAX,
            user_passed_over: false,
            warnings,
        };
        m.gate.init(n);
        m.update_plain();
        for i in 0..n {
            m.load(i);
        }
        m.first_time = m
            .heads
            .iter()
            .flatten()
            .filter(|h| h.raw.kind != RecordKind::Lost)
            .map(|h| h.raw.time)
            .min()
            .unwrap_or(0);
        m
    }

    /// Filter decisions for a function (computed once).
    #[inline]
    pub fn decide(&mut self, id: FuncId) -> FuncFilter {
        match self.decided.get(id as usize) {
            Some(Some(d)) => *d,
            _ => self.decide_first(id),
        }
    }

    #[cold]
    #[inline(never)]
    fn decide_first(&mut self, id: FuncId) -> FuncFilter {
        let i = id as usize;
        if self.decided.len() <= i {
            self.decided.resize(i + 1, None);
        }
        let mut d = self.filters.decide(self.sym.func(id));
        // `-L`: hidden as `-H` hides (its callees stay, one level up).
        if !d.hide && !self.filters.loc.is_empty() {
            let file = self.sym.srcline(id).map(|l| l.file());
            let loc = &self.filters.loc;
            d.hide = loc.hides(file);
            d.loc_hidden = d.hide && (self.filters.has_filter || loc.hidden_by_pattern(file));
        }
        self.decided[i] = Some(d);
        d
    }

    /// Sets the time range once the first timestamp is known.
    pub fn set_range(&mut self, start: u64, stop: u64) {
        self.gate.range = (start, stop);
        self.update_plain();
    }

    /// Drops all heads and reloads them through the gate (after its settings changed).
    pub fn restart(&mut self) {
        self.heap.clear();
        self.current = None;
        for c in &mut self.cursors {
            c.pos = 0;
            c.last_time = 0;
            c.released = 0;
            c.kpos = 0;
            c.user_depth = 0;
            c.outside = outside::Outside::default();
        }
        for h in &mut self.heads {
            *h = None;
        }
        self.gate.init(self.cursors.len());
        self.update_plain();
        for i in 0..self.cursors.len() {
            self.load(i);
        }
    }

    /// The task whose record comes next, without taking it.
    #[inline]
    pub fn peek(&self) -> Option<usize> {
        let cur = self.current.filter(|&c| self.heads[c].is_some());
        let top = self.heap.peek().map(|Reverse(k)| *k);
        match (cur, top) {
            (Some(c), Some((t, i))) => {
                let ct = self.heads[c].as_ref().map_or(u64::MAX, |h| h.raw.time);
                Some(if (ct, c) < (t, i) { c } else { i })
            }
            (Some(c), None) => Some(c),
            (None, Some((_, i))) => Some(i),
            (None, None) => None,
        }
    }

    /// The pending head of task `ti`.
    #[inline]
    pub fn head(&self, ti: usize) -> Option<&Head> {
        self.heads[ti].as_ref()
    }

    pub fn first_time(&self) -> u64 {
        self.first_time
    }

    /// Whether `--kernel-only` passed over a user record inside `-r`: uftrace reads it before
    /// leaving it out, and prints the output's header.
    pub fn user_record_passed_over(&self) -> bool {
        self.user_passed_over
    }

    pub fn tid(&self, ti: usize) -> u32 {
        self.cursors[ti].tid
    }

    /// The task's current session.
    pub fn session_of(&self, ti: usize) -> Option<usize> {
        self.cursors[ti].session.or(self.cursors[ti].first_session)
    }

    /// The task name (basename of its current executable).
    pub fn comm(&self, ti: usize) -> &str {
        self.session_of(ti).map_or("", |s| self.sym.session_comm(s))
    }

    pub fn payload(&self, ti: usize, (off, len): (usize, usize)) -> &'d [u8] {
        let b = self.cursors[ti].bytes;
        b.get(off..off + len).unwrap_or(&[])
    }

    /// Appends the arguments (entry) or return value (exit) in the payload of `h`, a record
    /// of task `ti`, as the spec and replay-time selection of `func` show them. `false` when
    /// the payload does not decode.
    pub fn push_args(
        &mut self,
        ti: usize,
        func: FuncId,
        h: &Head,
        ret: bool,
        out: &mut String,
    ) -> bool {
        let session = self.session_of(ti);
        let payload = self.payload(ti, h.payload);
        let spec = self.specs.get(func, self.sym.func(func));
        let items: Vec<&ArgItem> = if ret {
            spec.ret.iter().collect()
        } else {
            spec.args.iter().collect()
        };
        let Some(values) = decode_payload(&items, payload) else {
            return false;
        };
        let sym = &mut self.sym;
        // At the record's time: a function of a library `dlopen` loaded by then is named too.
        let time = h.raw.time;
        let mut lookup = |addr: u64| {
            let id = sym.resolve(session, time, addr);
            let fi = sym.func(id);
            fi.known.then(|| fi.name.clone())
        };
        push_recorded(out, spec, ret, &values, &mut lookup);
        true
    }

    pub fn event_names(&self) -> &HashMap<u64, String> {
        &self.event_names
    }

    /// The comment text of event record `h` of task `ti`: a kernel tracepoint rendered from
    /// its print format (`block:block_rq_issue (254,0 WS 4096 ...)`), or a user event;
    /// `None` for an unknown event.
    pub fn event_text(&mut self, ti: usize, h: &Head) -> Option<String> {
        if let Some(i) = h.kernel_event {
            let name = self.kernel_events.event_name(i);
            let sym = &self.sym;
            let text = self
                .kernel_events
                .event_text(i, &|addr| sym.kernel_symbol(addr));
            return Some(if text.is_empty() {
                name
            } else {
                format!("{name} ({text})")
            });
        }
        let data = self.payload(ti, h.payload);
        crate::payload::events::text(h.raw.addr, data, &self.event_names)
    }

    /// Takes the earliest record of all tasks.
    ///
    /// The task that supplied the previous record is kept out of the heap while its next record
    /// is still the earliest, so a single busy task costs no heap operations.
    ///
    /// Inlined: the caller reads the record right away, and a returned copy written piecewise
    /// would stall those reads.
    #[inline(always)]
    pub fn pop(&mut self) -> Option<(usize, Head)> {
        let ti = match self.current.take() {
            Some(c) => match (self.heads[c].as_ref(), self.heap.peek()) {
                (None, _) => self.heap.pop()?.0 .1,
                (Some(_), None) => c,
                (Some(h), Some(Reverse((t, i)))) if (h.raw.time, c) < (*t, *i) => c,
                (Some(h), Some(_)) => {
                    let key = (h.raw.time, c);
                    self.heap.push(Reverse(key));
                    self.heap.pop()?.0 .1
                }
            },
            None => self.heap.pop()?.0 .1,
        };
        let head = self.heads[ti].take()?;
        self.current = Some(ti);
        self.load(ti);
        Some((ti, head))
    }

    fn broken(&mut self, ti: usize, what: BadRecord) {
        let c = &self.cursors[ti];
        let msg = match what {
            BadRecord::Magic => format!(
                "invalid record in {}.dat at offset {}: broken data?",
                c.tid, c.pos
            ),
            BadRecord::Truncated => format!("{}.dat is truncated at offset {}", c.tid, c.pos),
        };
        self.warnings.push(msg);
        self.cursors[ti].pos = self.cursors[ti].bytes.len();
    }

    /// The session of task `ti` at `time` (the last one found while `time` stays in its span).
    #[inline(always)]
    fn resolve_session(&mut self, ti: usize, time: u64) -> Option<usize> {
        let c = &self.cursors[ti];
        if time >= c.sess_from && time < c.sess_until {
            return c.session;
        }
        self.find_session(ti, time)
    }

    #[inline(never)]
    fn find_session(&mut self, ti: usize, time: u64) -> Option<usize> {
        let tid = self.cursors[ti].tid;
        let (s, from, until) = match self.sym.session_at(tid, time) {
            Some((s, until)) => (Some(s), time, until),
            None => (None, time, time + 1),
        };
        let c = &mut self.cursors[ti];
        c.session = s;
        c.sess_from = from;
        c.sess_until = until;
        if c.first_session.is_none() {
            c.first_session = s;
        }
        s
    }

    /// Decodes the record at `pos` of task `ti`: the record, its function and payload, and the
    /// offset of the next record. `Ok(None)` at the end of the data.
    #[inline]
    fn decode(
        &mut self,
        ti: usize,
        pos: usize,
        last_time: u64,
    ) -> Result<Option<(Head, usize)>, Stop> {
        let bytes = self.cursors[ti].bytes;
        let mut raw = match read_header(bytes, pos) {
            None => return Ok(None),
            Some(Err(e)) => return Err(Stop::Bad(e)),
            Some(Ok(r)) => r,
        };
        let pstart = pos + RECORD_SIZE;
        if raw.kind == RecordKind::Lost {
            raw.time = last_time;
        }
        let mut func = 0;
        let mut plen = 0;
        match raw.kind {
            RecordKind::Entry | RecordKind::Exit => {
                let session = self.resolve_session(ti, raw.time);
                // An exit usually follows its own entry: remember the last resolution.
                let c = &self.cursors[ti];
                func = if c.memo.0 == raw.addr && c.memo.1 == session && raw.addr != 0 {
                    c.memo.2
                } else {
                    let f = self.sym.resolve(session, raw.time, raw.addr);
                    self.cursors[ti].memo = (raw.addr, session, f);
                    f
                };
                if raw.more {
                    let f = self.sym.func(func).clone();
                    let spec = self.specs.get(func, &f);
                    let items: Vec<&ArgItem> = if raw.kind == RecordKind::Entry {
                        spec.args.iter().collect()
                    } else {
                        spec.ret.iter().collect()
                    };
                    if items.is_empty() {
                        return Err(Stop::NoSpec(f.name));
                    }
                    plen = payload_len(&items, &bytes[pstart.min(bytes.len())..])
                        .ok_or(Stop::Bad(BadRecord::Truncated))?;
                }
            }
            RecordKind::Event if raw.more => {
                plen = event_payload_len(bytes, pstart).map_err(Stop::Bad)?
            }
            _ => {}
        }
        // Event payloads carry a u16 length before the data; hand over only the data.
        let payload = if raw.kind == RecordKind::Event && plen > 0 {
            let n = u16::from_le_bytes([bytes[pstart], bytes[pstart + 1]]) as usize;
            (pstart + 2, n)
        } else {
            (pstart, plen)
        };
        Ok(Some((
            Head {
                raw,
                func,
                payload,
                kernel_event: None,
            },
            pstart + plen,
        )))
    }

    /// Puts the task's next record that passes the reader-level filters into its head and
    /// queues it.
    #[inline]
    fn load(&mut self, ti: usize) {
        if self.plain && self.load_plain(ti) {
            return;
        }
        let head = if self.gate.time_active() {
            if self.gate.buffer_empty(ti) {
                self.fill_time_buffer(ti);
            }
            self.gate.pop_buffer(ti)
        } else {
            self.read_raw(ti)
        };
        let Some(head) = head else { return };
        let time = head.raw.time;
        self.heads[ti] = Some(head);
        if self.current != Some(ti) {
            self.heap.push(Reverse((time, ti)));
        }
    }

    /// The next record of the task inside the time range and, with `-C`, on a path to a target.
    #[inline]
    fn read_raw(&mut self, ti: usize) -> Option<Head> {
        loop {
            let (pos, last) = (self.cursors[ti].pos, self.cursors[ti].last_time);
            let decoded = self.decode(ti, pos, last);
            // A kernel record earlier than the task's next user record comes first.
            if let Some(k) = self.cursors[ti].kernel.get(self.cursors[ti].kpos).copied() {
                let user_time = match &decoded {
                    Ok(Some((h, _))) => h.raw.time,
                    _ => u64::MAX,
                };
                if k.time < user_time {
                    self.cursors[ti].kpos += 1;
                    match self.kernel_head(ti, k) {
                        Some(h) => return Some(h),
                        None => continue,
                    }
                }
            }
            let (head, next) = match decoded {
                Ok(Some(h)) => h,
                Ok(None) => return None,
                Err(Stop::Bad(e)) => {
                    self.broken(ti, e);
                    return None;
                }
                Err(Stop::NoSpec(name)) => {
                    self.warnings.push(format!(
                        "record missing argument info for {name} in {}.dat",
                        self.cursors[ti].tid
                    ));
                    self.cursors[ti].pos = self.cursors[ti].bytes.len();
                    return None;
                }
            };
            let c = &mut self.cursors[ti];
            if head.raw.kind != RecordKind::Lost {
                c.last_time = c.last_time.max(head.raw.time);
            }
            c.pos = next;
            match head.raw.kind {
                RecordKind::Entry => c.user_depth = u32::from(head.raw.depth) + 1,
                RecordKind::Exit => c.user_depth = u32::from(head.raw.depth),
                _ => {}
            }
            if matches!(head.raw.kind, RecordKind::Entry | RecordKind::Exit) {
                c.outside.clear();
            }
            if c.pos > c.released + 2 * RELEASE_WINDOW {
                c.released = c.pos - RELEASE_WINDOW;
                c.file.release(c.released);
            }
            if head.raw.kind != RecordKind::Lost && !self.gate.in_range(head.raw.time) {
                continue;
            }
            if self.kernel_view.only && head.raw.kind != RecordKind::Lost {
                self.user_passed_over = true;
                continue;
            }
            if self.gate.caller && !self.caller_pass(ti, &head) {
                continue;
            }
            return Some(head);
        }
    }

    /// The head of kernel record `k` of task `ti`, nested under the user functions open then;
    /// `None` outside every user function (uftrace's default `--kernel-skip-out`) or outside
    /// the time range.
    fn kernel_head(&mut self, ti: usize, k: GraphRecord) -> Option<Head> {
        let view = self.kernel_view;
        let user = self.cursors[ti].user_depth;
        // Events outside every user function stay hidden even with `--kernel-full`, as uftrace.
        let outside = user == 0 && (!view.full || k.event.is_some());
        if !self.gate.in_range(k.time) {
            return None;
        }
        if outside {
            if !view.full {
                self.cursors[ti].outside.take(&k);
            }
            return None;
        }
        // Alone, kernel records nest only among themselves.
        let above = if view.only { 0 } else { user };
        if view.depth.is_some_and(|d| k.depth >= d) && k.event.is_none() {
            return None;
        }
        let session = self.resolve_session(ti, k.time);
        let func = self.sym.resolve(session, k.time, k.func);
        Some(Head {
            raw: k.raw(above),
            func,
            payload: (0, 0),
            kernel_event: k.event,
        })
    }

    /// The kernel calls outside every user function still open at the end of task `ti`'s
    /// data, innermost first (hidden calls, which uftrace's report counts).
    pub fn open_kernel_calls(&self, ti: usize) -> impl Iterator<Item = OpenKernelCall> + '_ {
        self.cursors[ti].outside.open()
    }

    /// `-C`: keeps targets and functions that call one; drops the rest with their subtrees.
    /// A call that never returns is kept: nothing proves it uninteresting.
    fn caller_pass(&mut self, ti: usize, h: &Head) -> bool {
        let d = h.raw.depth;
        match h.raw.kind {
            RecordKind::Entry => {
                if self.gate.entry_inside_dropped(ti, d) {
                    return false;
                }
                if self.decide(h.func).caller {
                    return true;
                }
                let pos = self.cursors[ti].pos;
                let (exit, found) = self.scan_from(ti, pos, d, true);
                if !found && exit.is_some() {
                    self.gate.drop_entry(ti, d);
                    return false;
                }
                true
            }
            RecordKind::Exit => self.gate.exit(ti, d),
            _ => !self.gate.inside_dropped(ti),
        }
    }

    /// `-t` and `time=` triggers, as uftrace's task reader does them: entries wait in a
    /// buffer until an exit decides; an exit shorter than the threshold deletes itself and the
    /// last buffered entry, a longer one releases the whole buffer.
    fn fill_time_buffer(&mut self, ti: usize) {
        while let Some(h) = self.read_raw(ti) {
            let threshold = self.gate.threshold(ti).unwrap_or(0);
            match h.raw.kind {
                RecordKind::Entry => {
                    if let Some(t) = self.decide(h.func).actions.time {
                        self.gate.push_time(ti, h.raw.depth, t);
                    }
                    self.gate.push_buffer(ti, h);
                }
                RecordKind::Exit => {
                    self.gate.pop_time(ti, h.raw.depth);
                    let Some(last) = self.gate.last_buffered_time(ti) else {
                        self.gate.push_buffer(ti, h);
                        return;
                    };
                    if h.raw.time.saturating_sub(last) < threshold
                        && !self.decide(h.func).actions.trace
                    {
                        self.gate.drop_last_buffered(ti);
                    } else {
                        self.gate.push_buffer(ti, h);
                        return;
                    }
                }
                _ => {
                    self.gate.push_buffer(ti, h);
                    return;
                }
            }
        }
    }

    /// Looks ahead in task `ti` from byte offset `pos`, just after an entry at `depth`: returns
    /// the time of its exit (`None` if it never returns) and whether a `-C` target is called
    /// inside. Stops early once a target is found unless `need_exit`.
    fn scan_from(
        &mut self,
        ti: usize,
        mut pos: usize,
        depth: u16,
        need_exit: bool,
    ) -> (Option<u64>, bool) {
        let mut found = false;
        let mut last = self.cursors[ti].last_time;
        while let Ok(Some((h, next))) = self.decode(ti, pos, last) {
            match h.raw.kind {
                RecordKind::Entry if h.raw.depth <= depth => return (None, found),
                RecordKind::Entry => {
                    found = found || (self.filters.has_caller && self.decide(h.func).caller);
                    if found && !need_exit {
                        return (None, true);
                    }
                }
                RecordKind::Exit if h.raw.depth == depth => return (Some(h.raw.time), found),
                RecordKind::Exit if h.raw.depth < depth => return (None, found),
                _ => {}
            }
            last = last.max(h.raw.time);
            pos = next;
        }
        (None, found)
    }
}

/// Resident memory stays flat on large traces: data read more than twice this many bytes ago
/// is handed back to the kernel.
const RELEASE_WINDOW: usize = 4 << 20;

/// Why decoding stopped.
enum Stop {
    Bad(BadRecord),
    NoSpec(String),
}

/// The symbolizer, specs and filters of `dir` in a [`Merge`], with the `Usage:` notices they
/// produced.
pub(crate) fn open_merge<'d>(dir: &'d TraceDir, cfg: &Config) -> (Merge<'d>, Vec<String>) {
    let mut sym = Symbolizer::new(dir, cfg.demangle);
    if cfg.srcline || !cfg.loc_filters.is_empty() {
        sym.load_srclines();
    }
    let mut specs = Specs::new(dir);
    specs.select(&cfg.args, &cfg.retvals, cfg.match_type);
    let mut filters = Filters::new(cfg);
    let mut notices: Vec<String> = specs.notices.clone();
    notices.append(&mut filters.notices);
    let mut hints = Vec::new();
    let any_filter = !filters.is_empty();
    if any_filter || specs.has_selection() {
        let ids = sym.all_functions();
        if !filters.loc.is_empty() {
            filters.check_locations(ids.iter().filter_map(|&i| Some(sym.srcline(i)?.file())));
        }
        let funcs: Vec<_> = ids.iter().map(|&i| sym.func(i)).collect();
        if any_filter {
            if let Some(msg) = filters.check(&funcs, specs.binds_any(&funcs)) {
                notices.push(msg);
            }
        }
        hints = specs.selection_hints(&funcs);
    }
    let gate = Gate::new(
        cfg.time_filter,
        filters.has_time_trigger(),
        filters.has_caller,
    );
    let mut merge = Merge::new(dir, sym, specs, filters, gate, cfg.kernel);
    merge.warnings.extend(hints);
    (merge, notices)
}
