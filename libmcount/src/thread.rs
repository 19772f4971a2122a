//! Per-thread state: the shadow stack, the data-file writer, the recursion guard, and what the
//! hooks do with them.
//!
//! Each thread's [`ThreadState`] lives in its own anonymous `mmap` (header followed by the
//! shadow-stack array: no allocator, async-signal-safe), created lazily by the thread's first
//! hook. The thread pointer slot (see `arch`) holds its address, or [`DEAD`] for a thread that
//! must not be traced (initialisation failed or in progress, or the thread has ended). A
//! `pthread` key with a destructor gives the thread-exit callback.

use crate::arch::{tls_get, tls_set, EntryRegs, ExitRegs};
use crate::args::{self, FuncArgs};
use crate::buffer::DatWriter;
use crate::clock::Clock;
use crate::filter::{self, Decision, FilterState, Filters, Saved};
use crate::frame_flags::{self as flags, ARGS_SAVED};
use crate::rstack::{Frame, ShadowStack, NO_SLOT};
use crate::{clock, plt, session, sys, tasklog};
use core::sync::atomic::{AtomicBool, Ordering};
use record_format::raw::{header_word, RecordKind, RECORD_SIZE};

/// What an ENTRY record's payload is read from: the function's items and the saved registers.
type Capture<'a> = Option<(&'a FuncArgs, &'a EntryRegs)>;

/// Bytes kept per frame for the argument payload of an ENTRY record written later: a u16
/// length, then the payload (uftrace keeps as much).
const PENDING_ARGS: usize = 1024;

/// Thread pointer value of a thread that is not traced.
pub const DEAD: usize = 1;

/// How the entry hook must treat the return slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hook {
    /// Not traced: leave the slot alone.
    None,
    /// Write the exit trampoline into the slot.
    Hijack,
    /// Tail call: the slot already holds the trampoline.
    Alias,
}

/// `ThreadState::block` bits: any of them sends the trampolines' fast paths to Rust.
pub mod block {
    /// A handler runs on this thread: nested hooks (signal handlers, functions that libmcount
    /// calls) return at once.
    pub const GUARD: u32 = 1;
    /// No new entries (thread teardown); exits still pop.
    pub const DISABLED: u32 = 2;
    /// A C++ exception is being unwound: return slots are restored (see `unwind`).
    pub const EXCEPTION: u32 = 4;
    /// The session needs the full entry handler (filters, arguments…).
    pub const SLOW: u32 = 8;
    /// A `vfork` child may be running on this state (see `ThreadState::vfork_child`).
    pub const VFORK: u32 = 16;
}

/// One thread's runtime state. `#[repr(C)]`: the trampolines' fast paths read `block`,
/// `fast_depth`, `rstack`, `writer.buf` and `clock` at fixed offsets (see `arch`).
#[repr(C)]
#[derive(Debug)]
pub struct ThreadState {
    /// [`block`] bits.
    pub block: u32,
    pub tid: i32,
    /// The fast entry path runs only while the shadow stack holds fewer frames than this
    /// (the smaller of its capacity and `-D`).
    pub fast_depth: usize,
    pub rstack: ShadowStack,
    pub writer: DatWriter,
    pub clock: Clock,
    /// Record-time filter counters (used while `filter::get()` is set).
    pub filt: FilterState,
    /// The limits each frame with `flags::LIMITS` replaced, indexed like the shadow stack
    /// (`max_stack` entries after the frames in this state's mapping; null in unit tests that
    /// do not filter).
    saved: *mut Saved,
    /// The argument payloads of pending ENTRY records (`-t`, `-C` with `-A`), [`PENDING_ARGS`]
    /// bytes per shadow-stack index (null when arguments or filters are off).
    pending: *mut u8,
    /// Functions at this depth or deeper are not hooked (`-D`).
    pub depth_limit: usize,
    /// Size of the mapping holding this state.
    map_len: usize,
    /// The process that called `vfork` (while `block::VFORK` is set).
    vfork_pid: i32,
    /// This thread's `errno` (null until known).
    errno: *mut i32,
    /// The last `setjmp` calls, for the `longjmp` that lands in one of them.
    jumps: [JumpPoint; JUMP_POINTS],
    /// Where the next [`JumpPoint`] goes.
    next_jump: usize,
}

/// The shadow stack when `setjmp(env)` was called (through the PLT).
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
struct JumpPoint {
    /// The `jmp_buf` address (0: unused).
    env: usize,
    /// Frames on the shadow stack.
    len: usize,
    /// The depth `setjmp` was recorded at, and its address.
    depth: u32,
    ip: usize,
}

/// `setjmp` points remembered per thread.
const JUMP_POINTS: usize = 8;

static STACK_FULL_WARNED: AtomicBool = AtomicBool::new(false);

/// Tells once per process, in uftrace's words, that calls deeper than the shadow stack
/// (`--max-stack`) are folded into their caller.
fn warn_stack_full(cap: usize) {
    if STACK_FULL_WARNED.swap(true, Ordering::Relaxed) {
        return;
    }
    let mut line = crate::tasklog::LineBuf::<128>::new();
    line.push_bytes(b"WARN: call depth beyond ");
    line.push_dec(cap as u64);
    line.push_bytes(b" is not recorded.\n      (use --max-stack=DEPTH to record more)\n");
    crate::log_raw(line.as_bytes());
}

impl ThreadState {
    pub fn new(rstack: ShadowStack, writer: DatWriter, tid: i32) -> ThreadState {
        let fast_depth = rstack.capacity();
        ThreadState {
            block: 0,
            tid,
            fast_depth,
            rstack,
            writer,
            clock: Clock::new(),
            filt: FilterState::default(),
            saved: core::ptr::null_mut(),
            pending: core::ptr::null_mut(),
            depth_limit: usize::MAX,
            map_len: 0,
            vfork_pid: 0,
            errno: core::ptr::null_mut(),
            jumps: [JumpPoint::default(); JUMP_POINTS],
            next_jump: 0,
        }
    }

    #[inline]
    fn flag(&self, bit: u32) -> bool {
        self.block & bit != 0
    }

    #[inline]
    fn set_flag(&mut self, bit: u32, on: bool) {
        if on {
            self.block |= bit;
        } else {
            self.block &= !bit;
        }
    }

    #[inline]
    pub fn guard(&self) -> bool {
        self.flag(block::GUARD)
    }

    #[inline]
    pub fn set_guard(&mut self, on: bool) {
        self.set_flag(block::GUARD, on);
    }

    pub fn disabled(&self) -> bool {
        self.flag(block::DISABLED)
    }

    pub fn set_disabled(&mut self, on: bool) {
        self.set_flag(block::DISABLED, on);
    }

    pub fn in_exception(&self) -> bool {
        self.flag(block::EXCEPTION)
    }

    pub fn set_in_exception(&mut self, on: bool) {
        self.set_flag(block::EXCEPTION, on);
    }

    /// Sets `-D` (functions at this depth or deeper are not hooked).
    /// This thread's `errno` address.
    #[inline]
    pub fn errno_location(&self) -> *mut i32 {
        if self.errno.is_null() {
            // SAFETY: __errno_location has no preconditions.
            unsafe { libc::__errno_location() }
        } else {
            self.errno
        }
    }

    pub fn set_depth_limit(&mut self, depth: usize) {
        self.depth_limit = depth;
        self.fast_depth = self.rstack.capacity().min(depth);
    }

    /// A hooked function starts: push it and write its ENTRY record.
    #[inline]
    pub fn enter(
        &mut self,
        parent_loc: usize,
        parent_ip: usize,
        child_ip: usize,
        tramp: usize,
    ) -> Hook {
        self.enter_flagged(parent_loc, parent_ip, child_ip, tramp, 0, None, None)
    }

    /// [`ThreadState::enter`] with `extra` frame flags (`flags::REARM`), the registers the
    /// entry trampoline saved (for arguments; `None` where there are none, as in
    /// `-finstrument-functions` hooks) and the TSC it read on entry (`None`: read it now).
    #[inline]
    // The hooks' raw inputs, passed straight through from the trampolines.
    #[allow(clippy::too_many_arguments)]
    pub fn enter_flagged(
        &mut self,
        parent_loc: usize,
        parent_ip: usize,
        child_ip: usize,
        tramp: usize,
        extra: u16,
        regs: Option<&EntryRegs>,
        tsc: Option<u64>,
    ) -> Hook {
        if self.disabled() || self.rstack.len() >= self.depth_limit {
            return Hook::None;
        }
        if self.rstack.is_full() {
            warn_stack_full(self.rstack.capacity());
            return Hook::None;
        }
        let (mut flags, depth, record) = match filter::get() {
            None => (0, self.rstack.len() as u32, true),
            Some(f) => match self.filt.decide(f, child_ip as u64) {
                Decision::Skip => return Hook::None,
                Decision::Hook(fl) => self.filter_push(f, child_ip as u64, fl),
            },
        };
        let mut capture = None;
        if let (Some(table), Some(regs)) = (args::get(), regs) {
            let spec = table.lookup(child_ip as u64);
            args::remember(child_ip, spec);
            if let Some(spec) = spec {
                flags |= spec.ret_flags();
                if !spec.args.is_empty() {
                    capture = Some((spec, regs));
                }
            }
        }
        // An ENTRY written later (`-t`, `-C`) keeps its arguments as they are now.
        if flags & (flags::PENDING | flags::NORECORD) == flags::PENDING {
            if let Some((spec, regs)) = capture {
                if self.save_args(self.rstack.len(), spec, regs, parent_loc) {
                    flags |= ARGS_SAVED;
                }
            }
        }
        self.writer.prepare();
        let start = match tsc {
            Some(t) => self.clock.at(t),
            None => self.clock.now(),
        };
        let frame = Frame {
            parent_loc,
            parent_ip,
            child_ip,
            depth,
            flags: flags | extra,
            start,
        };
        self.rstack.push(frame);
        self.entered(&frame, record, capture);
        if parent_ip == tramp {
            Hook::Alias
        } else {
            Hook::Hijack
        }
    }

    /// Pops (with EXIT records) every frame whose return slot satisfies `dead`: frames that
    /// an unwinder or `longjmp` removed from the stack. Returns the number left.
    pub fn prune(&mut self, dead: impl Fn(usize) -> bool) -> usize {
        let mut keep = self.rstack.len();
        while let Some(f) = keep.checked_sub(1).and_then(|i| self.rstack.get(i)) {
            if f.parent_loc == NO_SLOT || !dead(f.parent_loc) {
                break;
            }
            keep -= 1;
        }
        if keep < self.rstack.len() {
            self.writer.prepare();
            let now = self.clock.now();
            self.close_to(keep, now);
        }
        keep
    }

    /// Puts the original return addresses back into every hijacked slot (innermost first, so
    /// that tail-call aliases, whose saved address is the trampoline, are overwritten by the
    /// real one).
    ///
    /// # Safety
    /// Every frame left on the shadow stack must be live: its slot a return-address word of
    /// this thread's stack.
    pub unsafe fn restore_slots(&mut self, tramp: usize) {
        for i in (0..self.rstack.len()).rev() {
            if let Some(f) = self.rstack.get(i) {
                if f.parent_loc != NO_SLOT && f.parent_ip != tramp {
                    // SAFETY: guaranteed live by the caller.
                    unsafe { (f.parent_loc as *mut usize).write(f.parent_ip) };
                }
            }
        }
    }

    /// Hijacks every slot again after an exception has been caught.
    ///
    /// # Safety
    /// As for [`ThreadState::restore_slots`].
    pub unsafe fn rehijack_slots(&mut self, tramp: usize) {
        for i in 0..self.rstack.len() {
            if let Some(f) = self.rstack.get(i) {
                if f.parent_loc != NO_SLOT {
                    // SAFETY: guaranteed live by the caller.
                    unsafe { (f.parent_loc as *mut usize).write(tramp) };
                }
            }
        }
    }

    /// A hijacked function returned through return slot `slot`: write EXIT records for it and
    /// for every frame above it (skipped by `longjmp` or an unhooked unwind), pop them, and
    /// return the original return address. `None` when no frame owns the slot.
    #[inline]
    pub fn exit(&mut self, slot: usize) -> Option<usize> {
        self.exit_with(slot, None)
    }

    /// [`ThreadState::exit`] with the registers the exit trampoline saved (the return value).
    #[inline]
    pub fn exit_with(&mut self, slot: usize, regs: Option<&ExitRegs>) -> Option<usize> {
        let k = self.rstack.find_slot(slot)?;
        let parent_ip = self.rstack.get(k)?.parent_ip;
        self.writer.prepare();
        let now = self.clock.now();
        self.close_to_with(k, now, regs);
        Some(parent_ip)
    }

    /// A call recorded as having no duration (its return is not hooked: `setjmp`, `vfork`,
    /// `dlopen`…): ENTRY and EXIT at the same time, at the depth it would have.
    pub fn instant(&mut self, child_ip: usize, regs: Option<&EntryRegs>) {
        self.instant_parts(child_ip, regs, true);
    }

    /// `setjmp(env)`: an [`ThreadState::instant`] call, and the shadow stack's state kept for
    /// the `longjmp(env)` that may come.
    pub fn setjmp(&mut self, child_ip: usize, regs: Option<&EntryRegs>) {
        let Some(depth) = self.instant_parts(child_ip, regs, true) else {
            return;
        };
        let Some(env) = regs.map(|r| r.rdi).filter(|&e| e != 0) else {
            return;
        };
        let at = match self.jumps.iter().position(|j| j.env == env) {
            Some(i) => i,
            None => {
                let i = self.next_jump % JUMP_POINTS;
                self.next_jump = self.next_jump.wrapping_add(1);
                i
            }
        };
        self.jumps[at] = JumpPoint {
            env,
            len: self.rstack.len(),
            depth,
            ip: child_ip,
        };
    }

    /// `longjmp(env)`: its ENTRY; then, if `env` is a known `setjmp` point below, the frames
    /// jumped over are dropped without records and `setjmp` returns again (its EXIT), which
    /// is what uftrace records.
    pub fn longjmp(&mut self, child_ip: usize, regs: Option<&EntryRegs>) {
        if self.instant_parts(child_ip, regs, false).is_none() {
            return;
        }
        let Some(env) = regs.map(|r| r.rdi) else {
            return;
        };
        let Some(point) = self
            .jumps
            .iter()
            .copied()
            .find(|j| j.env == env && j.env != 0 && j.len <= self.rstack.len())
        else {
            return;
        };
        let filters = filter::get();
        while let Some(i) = self.rstack.len().checked_sub(1).filter(|&i| i >= point.len) {
            let Some(f) = self.rstack.get(i).copied() else {
                break;
            };
            if f.flags & flags::REARM != 0 {
                if let Some(p) = plt::get() {
                    p.rearm(f.child_ip);
                }
            }
            if filters.is_some() {
                let saved = match f.flags & flags::LIMITS {
                    0 => Saved::default(),
                    _ => self.saved_slot(i).copied().unwrap_or_default(),
                };
                self.filt.pop(f.flags, &saved);
            }
            self.rstack.truncate(i);
        }
        self.writer.prepare();
        let now = self.clock.now();
        let frame = Frame {
            parent_loc: NO_SLOT,
            parent_ip: 0,
            child_ip: point.ip,
            depth: point.depth,
            flags: 0,
            start: now,
        };
        self.writer.record(now, exit_word(&frame));
    }

    /// Writes the ENTRY (and with `exit`, the EXIT) record of a call that is not hooked at
    /// its return; returns the depth used, `None` when it is not recorded.
    fn instant_parts(
        &mut self,
        child_ip: usize,
        regs: Option<&EntryRegs>,
        exit: bool,
    ) -> Option<u32> {
        if self.disabled() || self.rstack.len() >= self.depth_limit || self.rstack.is_full() {
            return None;
        }
        let depth = match filter::get() {
            None => self.rstack.len() as u32,
            Some(f) => match self.filt.decide(f, child_ip as u64) {
                Decision::Hook(fl) if fl & (flags::NORECORD | flags::PENDING) == 0 => {
                    self.filt.recorded
                }
                _ => return None,
            },
        };
        if !filter::tracing() {
            return None;
        }
        let capture = args::get()
            .zip(regs)
            .and_then(|(table, regs)| Some((table.lookup(child_ip as u64)?, regs)))
            .filter(|(spec, _)| !spec.args.is_empty());
        self.writer.prepare();
        let now = self.clock.now();
        let frame = Frame {
            parent_loc: NO_SLOT,
            parent_ip: 0,
            child_ip,
            depth,
            flags: 0,
            start: now,
        };
        self.write_entry(now, &frame, capture);
        if exit {
            self.writer.record(now, exit_word(&frame));
        }
        Some(depth)
    }

    /// `vfork` was called: until the parent runs again, hooks must leave the shared state
    /// alone (the child runs on the parent's memory).
    pub fn start_vfork(&mut self) {
        self.vfork_pid = sys::getpid();
        self.set_flag(block::VFORK, true);
    }

    /// Whether this is a `vfork` child running on its parent's state. The parent's first
    /// hook after the child exec'd or exited ends the `vfork`.
    pub fn vfork_child(&mut self) -> bool {
        if !self.flag(block::VFORK) {
            return false;
        }
        if sys::getpid() == self.vfork_pid {
            self.set_flag(block::VFORK, false);
            return false;
        }
        true
    }

    /// Where the frame owning `slot` returns to, without popping it (a `vfork` child).
    pub fn peek_exit(&self, slot: usize) -> Option<usize> {
        let k = self.rstack.find_slot(slot)?;
        Some(self.rstack.get(k)?.parent_ip)
    }

    /// `__cyg_profile_func_enter`: push without hijacking.
    pub fn cyg_enter(&mut self, this_fn: usize, call_site: usize) {
        if self.disabled() {
            return;
        }
        let depth = self.rstack.depth();
        self.writer.prepare();
        let start = self.clock.now();
        // Once entries overflow, later ones overflow too, so that exits pair up.
        let overflowing = depth != self.rstack.len() || depth >= self.depth_limit;
        if overflowing || self.rstack.is_full() {
            if !overflowing {
                warn_stack_full(self.rstack.capacity());
            }
            self.rstack.push_overflow();
            return;
        }
        // Every entry is pushed (exits are paired by function address), filtered ones as
        // NORECORD.
        let (flags, depth, record) = match filter::get() {
            None => (0, depth as u32, true),
            Some(f) => {
                let fl = match self.filt.decide(f, this_fn as u64) {
                    Decision::Skip => flags::NORECORD,
                    Decision::Hook(fl) => fl,
                };
                self.filter_push(f, this_fn as u64, fl)
            }
        };
        let frame = Frame {
            parent_loc: NO_SLOT,
            parent_ip: call_site,
            child_ip: this_fn,
            depth,
            flags,
            start,
        };
        self.rstack.push(frame);
        self.entered(&frame, record, None);
    }

    /// Counts a new frame (about to be pushed at the top) in the filter state: returns its
    /// flags, its record depth and whether its ENTRY record is written now.
    fn filter_push(&mut self, f: &Filters, addr: u64, fl: u16) -> (u16, u32, bool) {
        let (depth, saved) = self.filt.push(f, addr, fl);
        if fl & flags::LIMITS != 0 {
            if let Some(slot) = self.saved_slot(self.rstack.len()) {
                *slot = saved;
            }
        }
        filter::switch_before(fl);
        let write = fl & (flags::NORECORD | flags::PENDING) == 0 && filter::tracing();
        (fl, depth, write)
    }

    /// Writes the ENTRY record of `frame`, just pushed, if `record`; a `-C` function first
    /// writes the entries of its callers that were waiting for it.
    #[inline]
    fn entered(&mut self, frame: &Frame, record: bool, capture: Capture) {
        if frame.flags == 0 {
            if record {
                self.write_entry(frame.start, frame, capture);
            }
            return;
        }
        if record && frame.flags & flags::CALLER != 0 {
            self.write_pending(self.rstack.len() - 1);
        }
        if record {
            self.write_entry(frame.start, frame, capture);
        }
        filter::switch_after(frame.flags);
    }

    /// The ENTRY record of `frame`, with its argument payload if there is one.
    #[inline]
    fn write_entry(&mut self, time: u64, frame: &Frame, capture: Capture) {
        let Some((spec, regs)) = capture else {
            self.writer.record(time, entry_word(frame));
            return;
        };
        let word = header_word(
            RecordKind::Entry,
            true,
            frame.depth as u16,
            frame.child_ip as u64,
        );
        let parent_loc = match frame.parent_loc {
            NO_SLOT => 0,
            slot => slot,
        };
        self.writer
            .record_with(RECORD_SIZE + spec.args_max, |out: &mut [u8]| {
                let (head, rest) = out.split_at_mut(RECORD_SIZE);
                head[..8].copy_from_slice(&time.to_le_bytes());
                head[8..].copy_from_slice(&word.to_le_bytes());
                RECORD_SIZE + args::entry_payload(spec, regs, parent_loc, rest)
            });
    }

    /// The EXIT record of `frame`, with its return value when `regs` holds it.
    #[inline]
    fn write_exit(&mut self, time: u64, frame: &Frame, regs: Option<&ExitRegs>) {
        if frame.flags & flags::RETVAL != 0 {
            if let (Some(regs), Some(table)) = (regs, args::get()) {
                if let Some(spec) = table.lookup(frame.child_ip as u64) {
                    let word = header_word(
                        RecordKind::Exit,
                        true,
                        frame.depth as u16,
                        frame.child_ip as u64,
                    );
                    self.writer
                        .record_with(RECORD_SIZE + spec.ret_max, |out: &mut [u8]| {
                            let (head, rest) = out.split_at_mut(RECORD_SIZE);
                            head[..8].copy_from_slice(&time.to_le_bytes());
                            head[8..].copy_from_slice(&word.to_le_bytes());
                            RECORD_SIZE + args::exit_payload(spec, regs, rest)
                        });
                    return;
                }
            }
        }
        self.writer.record(time, exit_word(frame));
    }

    /// Saves the argument payload of the frame about to be pushed at index `i`, whose ENTRY
    /// is pending; `false` when there is no room for it.
    fn save_args(&mut self, i: usize, spec: &FuncArgs, regs: &EntryRegs, loc: usize) -> bool {
        if self.pending.is_null() || i >= self.rstack.capacity() || spec.args_max + 2 > PENDING_ARGS
        {
            return false;
        }
        // SAFETY: `pending` holds `PENDING_ARGS` bytes for each of the `capacity` indexes,
        // owned by this thread (see the field).
        let slot = unsafe {
            core::slice::from_raw_parts_mut(self.pending.add(i * PENDING_ARGS), PENDING_ARGS)
        };
        let (len, rest) = slot.split_at_mut(2);
        let parent_loc = if loc == NO_SLOT { 0 } else { loc };
        let n = args::entry_payload(spec, regs, parent_loc, &mut rest[..spec.args_max]);
        len.copy_from_slice(&(n as u16).to_le_bytes());
        true
    }

    /// The payload [`ThreadState::save_args`] kept for index `i`.
    fn saved_args(&self, i: usize) -> &[u8] {
        if self.pending.is_null() || i >= self.rstack.capacity() {
            return &[];
        }
        // SAFETY: as in `save_args`; the slot was written when its frame was pushed.
        let slot = unsafe {
            core::slice::from_raw_parts(self.pending.add(i * PENDING_ARGS), PENDING_ARGS)
        };
        let n = u16::from_le_bytes([slot[0], slot[1]]) as usize;
        slot.get(2..2 + n).unwrap_or(&[])
    }

    /// Where frame `i` keeps the limits it replaced.
    fn saved_slot(&mut self, i: usize) -> Option<&mut Saved> {
        if self.saved.is_null() || i >= self.rstack.capacity() {
            return None;
        }
        // SAFETY: `saved` points to `capacity` entries owned by this thread (see the field).
        Some(unsafe { &mut *self.saved.add(i) })
    }

    /// `__cyg_profile_func_exit`: pop the matching frame (and frames above it that a `longjmp`
    /// skipped); unmatched exits are ignored.
    pub fn cyg_exit(&mut self, this_fn: usize) {
        if self.rstack.pop_overflow() {
            return;
        }
        let Some(k) = self.rstack.find_cyg(this_fn) else {
            return;
        };
        self.writer.prepare();
        let now = self.clock.now();
        self.close_to(k, now);
    }

    /// Pops frames `keep..` innermost first at time `now`, writing their EXIT records as the
    /// filters say (see `filter`).
    fn close_to(&mut self, keep: usize, now: u64) {
        self.close_to_with(keep, now, None);
    }

    /// [`ThreadState::close_to`], frame `keep` returning with `regs` (frames above it were
    /// skipped by a `longjmp` or an unwinder: their return values are unknown).
    fn close_to_with(&mut self, keep: usize, now: u64, regs: Option<&ExitRegs>) {
        let filters = filter::get();
        while let Some(i) = self.rstack.len().checked_sub(1).filter(|&i| i >= keep) {
            let Some(f) = self.rstack.get(i).copied() else {
                break;
            };
            if f.flags & flags::REARM != 0 {
                if let Some(p) = plt::get() {
                    p.rearm(f.child_ip);
                }
            }
            let ret = regs.filter(|_| i == keep);
            let Some(filters) = filters else {
                self.write_exit(now, &f, ret);
                self.rstack.truncate(i);
                continue;
            };
            if f.flags & flags::NORECORD == 0 && filter::tracing() {
                if f.flags & flags::PENDING == 0 {
                    self.write_exit(now, &f, ret);
                } else if !filters.has_caller && now.saturating_sub(f.start) >= self.filt.time {
                    // The limits in force are this frame's own: its callees have popped.
                    self.write_pending(i + 1);
                    self.write_exit(now, &f, ret);
                }
            }
            let saved = match f.flags & flags::LIMITS {
                0 => Saved::default(),
                _ => self.saved_slot(i).copied().unwrap_or_default(),
            };
            self.filt.pop(f.flags, &saved);
            self.rstack.truncate(i);
        }
    }

    /// Writes the ENTRY records still pending (`-t`, `-C`) in frames `0..end`, outermost
    /// first.
    #[cold]
    fn write_pending(&mut self, end: usize) {
        for j in 0..end {
            let Some(f) = self.rstack.get_mut(j) else {
                break;
            };
            if f.flags & (flags::PENDING | flags::NORECORD) == flags::PENDING {
                let args = f.flags & ARGS_SAVED != 0;
                f.flags &= !(flags::PENDING | ARGS_SAVED);
                let (time, depth, addr) = (f.start, f.depth as u16, f.child_ip as u64);
                if !args {
                    self.writer.record(time, entry_word(f));
                    continue;
                }
                let word = header_word(RecordKind::Entry, true, depth, addr);
                let mut buf = [0u8; PENDING_ARGS];
                let saved = self.saved_args(j);
                let n = saved.len();
                buf[..n].copy_from_slice(saved);
                self.writer.record_with(RECORD_SIZE + n, |out: &mut [u8]| {
                    out[..8].copy_from_slice(&time.to_le_bytes());
                    out[8..16].copy_from_slice(&word.to_le_bytes());
                    out[RECORD_SIZE..RECORD_SIZE + n].copy_from_slice(&buf[..n]);
                    RECORD_SIZE + n
                });
            }
        }
    }
}

#[inline]
fn entry_word(f: &Frame) -> u64 {
    header_word(RecordKind::Entry, false, f.depth as u16, f.child_ip as u64)
}

#[inline]
fn exit_word(f: &Frame) -> u64 {
    header_word(RecordKind::Exit, false, f.depth as u16, f.child_ip as u64)
}

/// The calling thread's state, created on first use; `None` if the thread is not traced.
#[inline]
pub fn current() -> Option<&'static mut ThreadState> {
    let p = tls_get();
    let p = match p {
        0 => {
            // Setting up calls the C library: the program's errno must survive it.
            // SAFETY: __errno_location returns this thread's errno address.
            let errno = unsafe { libc::__errno_location() };
            // SAFETY: as above.
            let saved = unsafe { *errno };
            let p = init_current(true);
            // SAFETY: as above.
            unsafe { *errno = saved };
            p
        }
        DEAD => return None,
        p => p,
    };
    // SAFETY: a value other than 0/DEAD in the slot is a live ThreadState mapping that belongs
    // to this thread only (each thread has its own slot).
    (p > DEAD).then(|| unsafe { &mut *(p as *mut ThreadState) })
}

/// The calling thread's state if it has one (including a disabled thread with live frames).
#[inline]
pub fn existing() -> Option<&'static mut ThreadState> {
    let p = tls_get();
    // SAFETY: as in `current`.
    (p > DEAD).then(|| unsafe { &mut *(p as *mut ThreadState) })
}

/// Creates the calling thread's state; `announce` writes its `TASK` line. Returns the value
/// stored in the thread pointer slot.
#[cold]
#[inline(never)]
pub fn init_current(announce: bool) -> usize {
    // Hooks that fire while we set up (signals, interposed functions) see DEAD and return.
    tls_set(DEAD);
    let Some(cfg) = session::config() else {
        return DEAD;
    };
    let tid = sys::gettid();
    let header = size_of::<ThreadState>().next_multiple_of(align_of::<Frame>());
    let frames_len = cfg.max_stack * size_of::<Frame>();
    let saved_at = (header + frames_len).next_multiple_of(align_of::<Saved>());
    let saved_len = if filter::get().is_some() {
        cfg.max_stack * size_of::<Saved>()
    } else {
        0
    };
    let pending_at = saved_at + saved_len;
    let pending_len = if filter::get().is_some() && crate::args::get().is_some() {
        cfg.max_stack * PENDING_ARGS
    } else {
        0
    };
    let map_len = (pending_at + pending_len).next_multiple_of(sys::PAGE_SIZE);
    let mem = match sys::mmap(
        map_len,
        libc::PROT_READ | libc::PROT_WRITE,
        libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
        -1,
        0,
    ) {
        Ok(m) => m,
        Err(e) => {
            crate::log_error(b"cannot allocate thread state", e);
            return DEAD;
        }
    };
    // SAFETY: the frames follow the header inside the fresh mapping, which is large enough for
    // `max_stack` of them and belongs to this thread only.
    let rstack = unsafe { ShadowStack::from_raw(mem.add(header) as *mut Frame, cfg.max_stack) };
    let writer = DatWriter::new(cfg.dirfd, tid, cfg.window, session::ring_prefix());
    let mut state = ThreadState::new(rstack, writer, tid);
    state.map_len = map_len;
    if let Some(f) = filter::get() {
        state.filt = FilterState::new(f);
        // SAFETY: `saved_len` bytes for `max_stack` entries follow the frames in the mapping.
        state.saved = unsafe { mem.add(saved_at) } as *mut Saved;
    }
    if pending_len != 0 {
        // SAFETY: `pending_len` bytes follow the saved limits in the mapping.
        state.pending = unsafe { mem.add(pending_at) };
    }
    // SAFETY: __errno_location has no preconditions; the address is this thread's for life.
    state.errno = unsafe { libc::__errno_location() };
    state.set_depth_limit(cfg.depth);
    if cfg.slow {
        state.block |= block::SLOW;
    }
    let td = mem as *mut ThreadState;
    // SAFETY: the mapping is page-aligned, writable and large enough for the header.
    unsafe { td.write(state) };
    if announce {
        let line = tasklog::task_line(clock::now(), tid, sys::getpid());
        if let Err(e) = tasklog::append(cfg.dirfd, line.as_bytes()) {
            crate::log_error(b"cannot append to task.txt", e);
        }
    }
    session::register_thread(td as usize);
    tls_set(td as usize);
    td as usize
}

/// Thread exit (`pthread` key destructor): close the data file; free the state unless frames
/// are still live (then only disable it: their returns still need it).
///
/// # Safety
/// `p` must be the calling thread's state pointer (registered by `init_current`).
pub unsafe extern "C" fn thread_exit(p: *mut libc::c_void) {
    if p.is_null() || p as usize != tls_get() {
        return;
    }
    // SAFETY: `p` is this thread's live state (checked against the slot above).
    let td = unsafe { &mut *(p as *mut ThreadState) };
    td.set_guard(true);
    crate::dlopen::scan();
    td.set_disabled(true);
    td.writer.close();
    if td.rstack.is_empty() {
        tls_set(DEAD);
        let len = td.map_len;
        // SAFETY: the slot no longer points at the state and no frame can return through it.
        unsafe { sys::munmap(p as *mut u8, len) };
    } else {
        td.set_guard(false);
    }
}

/// Process end (library destructor) for the calling thread: close its data file. Frames stay
/// on the shadow stack (replay shows them as unfinished) and can still return through it.
pub fn finish_current() {
    if let Some(td) = existing() {
        td.set_guard(true);
        td.set_disabled(true);
        td.writer.close();
        td.set_guard(false);
    }
}

/// `pthread_atfork` child handler: the child keeps the parent's shadow stack (its hijacked
/// frames return in the child too) but writes its own `<pid>.dat`; announce it with `FORK`.
pub extern "C" fn fork_child() {
    let Some(cfg) = session::config() else {
        return;
    };
    let tid = sys::gettid();
    let line = tasklog::fork_line(clock::now(), tid, sys::getppid());
    if let Err(e) = tasklog::append(cfg.dirfd, line.as_bytes()) {
        crate::log_error(b"cannot append to task.txt", e);
    }
    match tls_get() {
        0 => {
            init_current(false);
        }
        DEAD => {}
        _ => {
            if let Some(td) = existing() {
                td.tid = tid;
                td.writer.abandon(tid, session::ring_prefix());
                session::register_thread(td as *mut ThreadState as usize);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use record_format::raw::RawRecord;
    use std::os::fd::AsRawFd;

    const TRAMP: usize = 0xdead;

    fn run(t: impl FnOnce(&mut ThreadState)) -> Vec<RawRecord> {
        let dir = tempfile::tempdir().unwrap();
        let d = std::fs::File::open(dir.path()).unwrap();
        let mut frames = vec![
            Frame {
                parent_loc: 0,
                parent_ip: 0,
                child_ip: 0,
                depth: 0,
                flags: 0,
                start: 0
            };
            4
        ];
        // SAFETY: `frames` outlives the state.
        let rs = unsafe { ShadowStack::from_raw(frames.as_mut_ptr(), frames.len()) };
        let mut td = ThreadState::new(rs, DatWriter::new(d.as_raw_fd(), 1, 0, None), 1);
        t(&mut td);
        td.writer.close();
        let data = std::fs::read(dir.path().join("1.dat")).unwrap_or_default();
        data.chunks(16)
            .map(|c| RawRecord::decode(c.try_into().unwrap()).unwrap())
            .collect()
    }

    fn shape(recs: &[RawRecord]) -> Vec<(RecordKind, u16, u64)> {
        recs.iter().map(|r| (r.kind, r.depth, r.addr)).collect()
    }

    #[test]
    fn nesting_tail_calls_and_longjmp() {
        use RecordKind::{Entry as N, Exit as X};
        let recs = run(|td| {
            assert_eq!(td.enter(0x1000, 0x10, 1, TRAMP), Hook::Hijack); // main
            assert_eq!(td.enter(0x0f00, 0x11, 2, TRAMP), Hook::Hijack); // f
            assert_eq!(td.enter(0x0f00, TRAMP, 3, TRAMP), Hook::Alias); // g, tail-called
            assert_eq!(td.exit(0x0f00), Some(TRAMP)); // g returns to the trampoline again
            assert_eq!(td.exit(0x0f00), Some(0x11)); // f
            td.enter(0x0f00, 0x12, 4, TRAMP); // h
            td.enter(0x0e00, 0x13, 5, TRAMP); // i, skipped by a longjmp out of i
            assert_eq!(td.exit(0x0f00), Some(0x12)); // h returns: i is closed too
            assert_eq!(td.exit(0x0123), None);
            assert_eq!(td.exit(0x1000), Some(0x10));
        });
        assert_eq!(
            shape(&recs),
            [
                (N, 0, 1),
                (N, 1, 2),
                (N, 2, 3),
                (X, 2, 3),
                (X, 1, 2),
                (N, 1, 4),
                (N, 2, 5),
                (X, 2, 5),
                (X, 1, 4),
                (X, 0, 1)
            ]
        );
        assert!(recs.windows(2).all(|w| w[0].time <= w[1].time));
    }

    #[test]
    fn exception_restores_prunes_and_rehijacks() {
        use RecordKind::{Entry as N, Exit as X};
        // A fake stack: slot i is the return-address word at &stack[i] (higher i = outer).
        let mut stack = [0usize; 8];
        let base = stack.as_mut_ptr() as usize;
        let slot = |i: usize| base + i * 8;
        // The runtime writes these words through raw pointers: access them the same way so the
        // optimiser cannot assume they are unchanged.
        // SAFETY: `i` < 8, so the pointer is a word of `stack`.
        let get = |i: usize| unsafe { std::ptr::read_volatile((base + i * 8) as *const usize) };
        // SAFETY: as above.
        let set = |i: usize, v: usize| unsafe {
            std::ptr::write_volatile((base + i * 8) as *mut usize, v)
        };
        let recs = run(|td| {
            for (i, ip) in [(7, 70), (5, 50), (3, 30)] {
                set(i, ip);
                td.enter(slot(i), ip, i, TRAMP);
                set(i, TRAMP);
            }
            // tail call from the innermost frame: same slot, saved address = trampoline
            td.enter(slot(3), TRAMP, 9, TRAMP);
            // SAFETY: all slots are words of `stack`.
            unsafe { td.restore_slots(TRAMP) };
            assert_eq!((get(7), get(5), get(3)), (70, 50, 30));
            // caught in the frame whose callee used slot 5: frames at slots <= 5 are gone
            assert_eq!(td.prune(|s| s <= slot(5)), 1);
            // SAFETY: as above.
            unsafe { td.rehijack_slots(TRAMP) };
            assert_eq!((stack[7], stack[5], stack[3]), (TRAMP, 50, 30));
        });
        assert_eq!(
            shape(&recs),
            [
                (N, 0, 7),
                (N, 1, 5),
                (N, 2, 3),
                (N, 3, 9),
                (X, 3, 9),
                (X, 2, 3),
                (X, 1, 5)
            ]
        );
    }

    #[test]
    fn depth_limit() {
        let recs = run(|td| {
            td.set_depth_limit(2);
            assert_eq!(td.enter(0x1000, 7, 1, TRAMP), Hook::Hijack);
            assert_eq!(td.enter(0x0f00, 7, 2, TRAMP), Hook::Hijack);
            assert_eq!(td.enter(0x0e00, 7, 3, TRAMP), Hook::None);
            td.cyg_enter(4, 0);
            td.cyg_enter(5, 0);
            td.cyg_exit(5);
            td.cyg_exit(4);
            assert_eq!(td.rstack.depth(), 2);
        });
        assert_eq!(recs.len(), 2);
    }

    #[test]
    fn full_stack_is_not_hooked() {
        let recs = run(|td| {
            for i in 0..4 {
                assert_eq!(td.enter(0x1000 - i * 16, 7, i, TRAMP), Hook::Hijack);
            }
            assert_eq!(td.enter(0x100, 7, 9, TRAMP), Hook::None);
            assert_eq!(td.rstack.len(), 4);
        });
        assert_eq!(recs.len(), 4);
    }

    #[test]
    fn cyg_profile_pairs_and_overflow() {
        use RecordKind::{Entry as N, Exit as X};
        let recs = run(|td| {
            for f in 1..=6 {
                td.cyg_enter(f, 0);
            }
            assert_eq!(td.rstack.depth(), 6);
            for f in (1..=6).rev() {
                td.cyg_exit(f);
            }
            td.cyg_exit(1); // unbalanced: ignored
            td.cyg_enter(7, 0);
            td.cyg_enter(8, 0); // skipped by longjmp
            td.cyg_exit(7);
            assert!(td.rstack.is_empty());
        });
        let want: Vec<_> = (1..=4)
            .map(|f| (N, f as u16 - 1, f))
            .chain((1..=4).rev().map(|f| (X, f as u16 - 1, f)))
            .chain([(N, 0, 7), (N, 1, 8), (X, 1, 8), (X, 0, 7)])
            .collect();
        assert_eq!(shape(&recs), want);
    }
}
