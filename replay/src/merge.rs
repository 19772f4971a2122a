//! Time-ordered merge of every task's records.
//!
//! Each task has a cursor over its mapped `.dat` bytes and one decoded *head* record; a binary
//! heap picks the earliest head (ties go to the task listed first in TASKINFO, as uftrace does).
//! Decoding a head resolves its function, since the payload size of an entry or exit depends on
//! the argument spec bound to that function.

use crate::config::KernelView;
use crate::filter::{Filters, FuncFilter};
use crate::payload::args::push_recorded;
use crate::specs::Specs;
use crate::symbols::{FuncId, Symbolizer};
use gate::Gate;
use record_format::argspec::{decode_payload, ArgItem};
use record_format::dir::{GraphRecord, KernelRecords};
use record_format::RawRecord;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

mod externs;
mod gate;
mod open;
mod outside;
mod plain;
mod read;
mod values;
pub use externs::parse_extern;
pub(crate) use open::open_merge;
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

    /// The kernel calls outside every user function still open at the end of task `ti`'s
    /// data, innermost first (hidden calls, which uftrace's report counts).
    pub fn open_kernel_calls(&self, ti: usize) -> impl Iterator<Item = OpenKernelCall> + '_ {
        self.cursors[ti].outside.open()
    }
}

/// Resident memory stays flat on large traces: data read more than twice this many bytes ago
/// is handed back to the kernel.
const RELEASE_WINDOW: usize = 4 << 20;
