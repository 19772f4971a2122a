//! The one per-task call stack of the analysis: entry/exit pairing, durations (total and
//! child time), the filter counters of `-F -N -H -D` and triggers, the LOST re-synchronisation,
//! the exec/setjmp/longjmp fix-ups and the calls still open at the end of the data.
//!
//! It keeps uftrace's bookkeeping rather than a tree, because users compare outputs line by
//! line and the depth of a line after fork, exec, longjmp or a filter depends on it: a stack
//! counter over reusable slots (a slot may still describe an older call when the data skips
//! frames), an "inside `-F`" counter, an "inside `-N`" counter and the remaining `-D` depth.
//!
//! The one walk ([`crate::walk::core`]) drives it, record by record:
//!
//! 1. [`TaskStack::consume`] pairs the record (time bookkeeping, before any filter); a task's
//!    first record, or the first after LOST, re-synchronises the counter from the record's depth.
//! 2. at an entry, [`TaskStack::enter`] applies the filters and says whether it is shown;
//! 3. at an exit, [`TaskStack::exit`] restores the filter counters of the matching entry;
//! 4. after a shown entry of the exec or longjmp family ([`TaskStack::take_jump`]),
//!    [`TaskStack::exec`] or [`TaskStack::longjmp_to`] fix the counter up;
//! 5. at the end, [`TaskStack::close_open`] finishes the calls left open, innermost first.

use crate::filter::FuncFilter;
use crate::symbols::FuncId;
use record_format::libcall::StackEffect;
use record_format::{RawRecord, RecordKind};

/// Frame flags (one byte per slot).
/// The entry matched `-F`: the "inside" counter was raised.
const FILTERED: u8 = 1;
/// The entry matched `-N`: the "outside" counter was raised.
const NOTRACE: u8 = 2;
/// The entry was not shown, so neither is its exit.
const NORECORD: u8 = 4;
/// A shown entry of the exec family, not yet applied.
const EXEC: u8 = 8;
/// A shown entry of the longjmp family, not yet applied.
const LONGJMP: u8 = 16;
/// Hidden by `-Z`/`size=`: as if not recorded, its time is its parent's own (only its shown
/// callees count as the parent's children).
const SMALL: u8 = 32;

/// One slot of a task's call stack.
#[derive(Debug, Clone, Copy, Default)]
pub struct Frame {
    /// Recorded address of the entry; 0 for a call entered before the task's data starts (a
    /// fork child inherits its parent's open calls).
    pub addr: u64,
    /// The function of the entry (`None` when never entered).
    pub func: Option<FuncId>,
    /// Entry time while the call is open; once closed by an exit, its duration (exit minus
    /// entry time), as in uftrace's reader.
    pub start: u64,
    /// Time spent in direct children so far.
    pub child: u64,
    valid: bool,
    flags: u8,
    /// `-D` depth to restore at the exit.
    orig_depth: i64,
    /// `-Z` size limit to restore at the exit.
    orig_size: u32,
}

/// A call closed by an exit record (or at the end of the data).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Closed {
    pub addr: u64,
    /// Exit minus entry time (0 for a call whose entry was never seen).
    pub total: u64,
    /// Time spent in direct children.
    pub child: u64,
}

/// What the filters decided about an entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Shown,
    /// Inside a `-N` function, a `-N` function itself, or outside every `-F` function.
    Outside,
    /// Passed `-F`/`-N` but hidden by `-H`, `--no-libcall` or the `-D` depth.
    Hidden,
    /// Tracing is off (a `trace_off` trigger): not shown, yet its exit is not marked hidden.
    Disabled,
}

/// One task's call stack and filter state.
#[derive(Debug, Clone)]
pub struct TaskStack {
    frames: Vec<Frame>,
    count: usize,
    started: bool,
    after_lost: bool,
    in_count: i64,
    out_count: i64,
    depth: i64,
    default_depth: i64,
    /// Functions smaller than this are hidden (`-Z`, or a `size=` trigger above).
    size: u32,
    default_size: u32,
}

impl TaskStack {
    /// `depth_limit`: `-D` (none = unlimited).
    pub fn new(depth_limit: Option<u32>) -> TaskStack {
        let default_depth = depth_limit.map_or(i64::from(u16::MAX), i64::from);
        TaskStack {
            frames: Vec::new(),
            count: 0,
            started: false,
            after_lost: false,
            in_count: 0,
            out_count: 0,
            depth: default_depth,
            default_depth,
            size: 0,
            default_size: 0,
        }
    }

    /// `-Z`: functions smaller than `size` bytes are hidden (their callees shown in their
    /// place).
    pub fn set_size_limit(&mut self, size: u32) {
        self.size = size;
        self.default_size = size;
    }

    /// The slot `i`, created (never entered) when the stack has not been that deep yet.
    #[inline]
    pub fn frame(&mut self, i: usize) -> &mut Frame {
        if self.frames.len() <= i {
            let fresh = Frame {
                orig_depth: self.default_depth,
                orig_size: self.default_size,
                ..Frame::default()
            };
            self.frames.resize(i + 1, fresh);
        }
        &mut self.frames[i]
    }

    /// Every slot known so far (open ones first, then stale ones).
    pub fn slots(&self) -> &[Frame] {
        &self.frames
    }

    /// The open calls, outermost first.
    pub fn open(&self) -> &[Frame] {
        &self.frames[..self.count.min(self.frames.len())]
    }

    /// Number of open calls (the stack counter).
    #[inline]
    pub fn open_calls(&self) -> usize {
        self.count
    }

    /// Started, and not waiting for the first record after LOST: an entry or exit needs no
    /// re-synchronisation.
    #[inline]
    pub fn in_sync(&self) -> bool {
        self.started && !self.after_lost
    }

    /// Whether the task's first record was consumed.
    pub fn started(&self) -> bool {
        self.started
    }

    /// Inside a `-N` function (everything is hidden).
    #[inline]
    pub fn inside_notrace(&self) -> bool {
        self.out_count > 0
    }

    /// Inside at least one `-F` function.
    #[inline]
    pub fn inside_filter(&self) -> bool {
        self.in_count > 0
    }

    /// The remaining `-D` depth.
    #[inline]
    pub fn depth_left(&self) -> i64 {
        self.depth
    }

    /// The size below which functions are hidden here (`-Z`, `size=`; 0: none).
    #[inline]
    pub fn size_limit(&self) -> u32 {
        self.size
    }

    /// The `-D` depth an `-F` function starts with.
    pub fn default_depth(&self) -> i64 {
        self.default_depth
    }

    /// Whether the entry in slot `i` was hidden (so its exit is too).
    #[inline]
    pub fn hidden(&mut self, i: usize) -> bool {
        self.frame(i).flags & NORECORD != 0
    }

    /// Forgets what the filters marked on the entry in slot `i`: a library call whose exit is
    /// dropped before the bookkeeping (`--no-libcall` in replay) leaves no hidden mark for an
    /// event after it, as uftrace.
    #[inline]
    pub fn forget_marks(&mut self, i: usize) {
        self.frame(i).flags = 0;
    }

    /// Marks the entry in slot `i` hidden.
    #[inline]
    pub fn hide(&mut self, i: usize) {
        self.frame(i).flags |= NORECORD;
    }

    /// Adds time spent switched out to the running call's child time.
    pub fn add_child_time(&mut self, t: u64) {
        if self.count > 0 {
            let f = self.frame(self.count - 1);
            f.child = f.child.wrapping_add(t);
        }
    }

    /// Whether an event at this point is shown: inside a call, and not where the filters hide
    /// calls (below `-D`, inside `-N`, outside `-F`).
    pub fn event_visible(&self, has_filter: bool) -> bool {
        self.count > 0
            && self.out_count == 0
            && self.depth > 0
            && (!has_filter || self.in_count > 0)
    }

    /// Whether a user event at this point has a call to show in, as uftrace places one: the
    /// innermost open call not hidden by its size (`-Z`, `size=`: as if not recorded) exists
    /// and was entered in the data (not before it, or `-r`, starts).
    pub fn event_placed(&self) -> bool {
        self.open()
            .iter()
            .rev()
            .find(|f| f.flags & SMALL == 0)
            .is_some_and(|f| f.addr != 0)
    }

    /// Aligns the stack counter with the depth of `r` at the task's first record (a fork child
    /// starts inside calls it never entered) and at the first record after LOST.
    /// [`TaskStack::consume`] does it for entries and exits; replay and the walker also do it
    /// for a LOST record, as uftrace's reader does (dump does not).
    #[inline]
    pub fn align(&mut self, r: &RawRecord) {
        let is_exit = usize::from(r.kind == RecordKind::Exit);
        if !self.started {
            self.started = true;
            self.count = r.depth as usize + is_exit;
            for i in 0..self.count {
                let f = self.frame(i);
                f.start = r.time;
                f.child = 0;
                f.valid = true;
            }
            self.depth = self.default_depth;
        }
        if self.after_lost && r.kind != RecordKind::Lost {
            self.after_lost = false;
            self.count = r.depth as usize + is_exit;
            for i in 0..=r.depth as usize {
                self.frame(i).start = r.time.saturating_sub(1);
            }
        }
    }

    /// Time bookkeeping of one record, before any filter. Returns the closed call for an
    /// exit. An entry's `func` is kept in its slot.
    #[inline(always)]
    pub fn consume(&mut self, r: &RawRecord, func: FuncId) -> Option<Closed> {
        match r.kind {
            RecordKind::Event => return None,
            RecordKind::Lost => {
                self.after_lost = true;
                return None;
            }
            _ => {}
        }
        self.align(r);
        if r.kind == RecordKind::Entry {
            self.open_call(r, func);
            return None;
        }
        let i = self.count.saturating_sub(1);
        self.count = i;
        let f = self.frame(i);
        let total = if f.valid {
            r.time.saturating_sub(f.start)
        } else {
            0
        };
        f.valid = false;
        f.start = total;
        let closed = Closed {
            addr: f.addr,
            total,
            child: f.child,
        };
        let counted = if f.flags & SMALL != 0 { f.child } else { total };
        if i > 0 {
            let p = &mut self.frames[i - 1];
            p.child = p.child.wrapping_add(counted);
        }
        Some(closed)
    }

    /// [`TaskStack::consume`] of an entry for a stack [in sync](TaskStack::in_sync): the fast
    /// path of walks that no filter can hide anything from. Returns the entry's slot.
    #[inline]
    pub fn push(&mut self, r: &RawRecord, func: FuncId) -> usize {
        debug_assert!(self.in_sync() && r.kind == RecordKind::Entry);
        self.open_call(r, func)
    }

    /// Opens a call for the entry `r` in the next slot; returns the slot.
    #[inline(always)]
    fn open_call(&mut self, r: &RawRecord, func: FuncId) -> usize {
        let i = self.count;
        let f = self.frame(i);
        f.addr = r.addr;
        f.func = Some(func);
        f.start = r.time;
        f.child = 0;
        f.valid = true;
        self.count = i + 1;
        i
    }

    /// [`TaskStack::consume`] of an exit for a stack in sync with at least one open call.
    #[inline]
    pub fn pop(&mut self, r: &RawRecord) -> Closed {
        debug_assert!(self.in_sync() && self.count > 0 && r.kind == RecordKind::Exit);
        let i = self.count - 1;
        self.count = i;
        let f = &mut self.frames[i];
        let total = if f.valid {
            r.time.saturating_sub(f.start)
        } else {
            0
        };
        let closed = Closed {
            addr: f.addr,
            total,
            child: f.child,
        };
        f.valid = false;
        f.start = total;
        if i > 0 {
            let p = &mut self.frames[i - 1];
            p.child = p.child.wrapping_add(total);
        }
        closed
    }

    /// The filters at the entry just consumed (uftrace's order: `-N` and `-F` counters, the
    /// fix-up mark, then `hide` (`-H`, `--no-libcall`), `depth=` and `-D`, triggers).
    /// `effect`: the entry's stack effect, marked for [`TaskStack::take_jump`] when the
    /// counters let it through. `enabled`: the global `trace_on`/`trace_off` state, `None`
    /// when triggers are ignored (dump).
    #[inline(always)]
    pub fn enter(
        &mut self,
        ff: &FuncFilter,
        has_filter: bool,
        hide: bool,
        effect: Option<StackEffect>,
        enabled: Option<&mut bool>,
    ) -> Verdict {
        let i = self.count.saturating_sub(1);
        let orig = self.depth;
        let orig_size = self.size;
        let default_depth = self.default_depth;
        let (in_count, out_count) = (self.in_count, self.out_count);
        let f = self.frame(i);
        f.orig_depth = orig;
        f.orig_size = orig_size;
        f.flags = 0;
        if out_count > 0 {
            f.flags = NORECORD;
            return Verdict::Outside;
        }
        if ff.notrace {
            f.flags = NOTRACE | NORECORD;
            self.out_count += 1;
            return Verdict::Outside;
        }
        if ff.filter {
            f.flags = FILTERED;
            self.in_count += 1;
            self.depth = default_depth;
        } else if has_filter && in_count == 0 {
            f.flags = NORECORD;
            return Verdict::Outside;
        }
        match effect {
            Some(StackEffect::Exec) => self.frames[i].flags |= EXEC,
            Some(StackEffect::Longjmp) => self.frames[i].flags |= LONGJMP,
            _ => {}
        }
        if hide {
            self.frames[i].flags |= NORECORD;
            return Verdict::Hidden;
        }
        // A `size=` trigger's limit holds for its function too.
        if let Some(z) = ff.actions.size {
            self.size = u32::try_from(z).unwrap_or(u32::MAX);
        }
        if ff.size < self.size {
            self.frames[i].flags |= NORECORD | SMALL;
            return Verdict::Hidden;
        }
        if let Some(d) = ff.actions.depth {
            self.depth = i64::from(d);
        }
        if let Some(enabled) = enabled {
            if ff.actions.trace_on {
                *enabled = true;
            }
            if ff.actions.trace_off {
                *enabled = false;
            }
            if !*enabled {
                return Verdict::Disabled;
            }
        }
        if self.depth <= 0 {
            self.frames[i].flags |= NORECORD;
            return Verdict::Hidden;
        }
        self.depth -= 1;
        Verdict::Shown
    }

    /// The filters at the exit just consumed: restores the counters of its entry. `false`
    /// when the entry was hidden.
    #[inline(always)]
    pub fn exit(&mut self) -> bool {
        let i = self.count;
        let f = *self.frame(i);
        if f.flags & FILTERED != 0 {
            self.in_count -= 1;
        } else if f.flags & NOTRACE != 0 {
            self.out_count -= 1;
        }
        self.frames[i].flags = 0;
        self.depth = f.orig_depth;
        self.size = f.orig_size;
        f.flags & NORECORD == 0
    }

    /// Whether the shown entry in slot `i` is of the exec or longjmp family (not yet applied).
    #[inline]
    pub fn jumps(&mut self, i: usize) -> bool {
        self.frame(i).flags & (EXEC | LONGJMP) != 0
    }

    /// Takes the exec/longjmp mark of the entry in slot `i`.
    #[inline]
    pub fn take_jump(&mut self, i: usize) -> Option<StackEffect> {
        let f = self.frame(i);
        let e = if f.flags & EXEC != 0 {
            Some(StackEffect::Exec)
        } else if f.flags & LONGJMP != 0 {
            Some(StackEffect::Longjmp)
        } else {
            None
        };
        f.flags &= !(EXEC | LONGJMP);
        e
    }

    /// After an exec: the new program starts with an empty stack (the calls open before are
    /// never closed).
    #[inline]
    pub fn exec(&mut self) {
        self.count = 0;
    }

    /// Forgets the filter counters and the `-D` depth (dump, after an exec).
    pub fn reset_filters(&mut self) {
        self.in_count = 0;
        self.out_count = 0;
        self.depth = self.default_depth;
        self.size = self.default_size;
    }

    /// After a longjmp: the stack goes back to `level` open calls (the level of the setjmp).
    #[inline]
    pub fn longjmp_to(&mut self, level: usize) {
        self.count = level;
    }

    /// Closes the innermost open call at `last` (end of data). `None` when nothing is open;
    /// `Some(None)` for a call closed without being reported (never entered in the data, or
    /// started after `last`). The duration is at least the child time.
    pub fn close_open(&mut self, last: u64) -> Option<Option<Closed>> {
        if self.count == 0 {
            return None;
        }
        self.count -= 1;
        let i = self.count;
        let f = *self.frame(i);
        if f.addr == 0 || f.start > last {
            return Some(None);
        }
        let total = (last - f.start).max(f.child);
        self.frames[i].valid = false;
        if i > 0 {
            let p = &mut self.frames[i - 1];
            p.child = p.child.wrapping_add(total);
        }
        Some(Some(Closed {
            addr: f.addr,
            total,
            child: f.child,
        }))
    }
}

#[cfg(test)]
#[path = "callstack_tests.rs"]
mod tests;
