//! Per-thread state: the shadow stack, the data-file writer, the recursion guard, and what the
//! hooks do with them.
//!
//! Each thread's [`ThreadState`] lives in its own anonymous `mmap` (header followed by the
//! shadow-stack array: no allocator, async-signal-safe), created lazily by the thread's first
//! hook (see `lifecycle`, which also handles thread exit and `fork`). The thread pointer slot
//! (see `arch`) holds its address, or [`DEAD`] for a thread that must not be traced
//! (initialisation failed or in progress, or the thread has ended).

use crate::args::{self, FuncArgs};
use crate::buffer::DatWriter;
use crate::clock::Clock;
use crate::cpu::{EntryRegs, ExitRegs};
use crate::filter::{self, Decision, FilterState, Filters, Saved};
use crate::frame_flags::{self as flags, ARGS_SAVED};
use crate::plt;
use crate::rstack::{Frame, ShadowStack, NO_SLOT};
use core::sync::atomic::{AtomicBool, Ordering};
use record_format::raw::{header_word, RecordKind, RECORD_SIZE};

/// What an ENTRY record's payload is read from: the function's items and the saved registers.
type Capture<'a> = Option<(&'a FuncArgs, &'a EntryRegs)>;

/// Bytes kept per frame for the argument payload of an ENTRY record written later: a u16
/// length, then the payload (uftrace keeps as much).
pub(crate) const PENDING_ARGS: usize = 1024;

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
    /// A `vfork` child may be running on this state, or this is a `vfork` child's own state
    /// (see `thread::vfork`): hooks settle which first (`lifecycle`).
    pub const VFORK: u32 = 16;
    /// A PLT slot called unbound with its return not hooked (`longjmp`, `setjmp`…) waits to
    /// be re-armed: the next hook does it (no PLT call may come before the slot's next use).
    pub const REARM: u32 = 32;
    /// The session this state was set up for has ended (`utrace_detach`) or another one has
    /// started (a second `utrace_attach`): set on every known state by `lifecycle::mark_stale`
    /// while the process's other threads are stopped. The thread's next hook drops the old
    /// writer without writing and, if a session is on, joins it (`lifecycle`).
    pub const STALE: u32 = 64;
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
    pub(crate) saved: *mut Saved,
    /// The argument payloads of pending ENTRY records (`-t`, `-C` with `-A`), [`PENDING_ARGS`]
    /// bytes per shadow-stack index (null when arguments or filters are off).
    pub(crate) pending: *mut u8,
    /// Functions at this depth or deeper are not hooked (`-D`).
    pub depth_limit: usize,
    /// Size of the mapping holding this state.
    pub(crate) map_len: usize,
    /// The process that called `vfork` (while `block::VFORK` is set); in a `vfork` child's
    /// own state, the child's pid.
    vfork_pid: i32,
    /// In a `vfork` child's own state: the parent's state, put back in the thread pointer
    /// slot when the parent runs again (null otherwise). See `vfork`.
    vfork_parent: *mut ThreadState,
    /// This thread's `errno` (null until known).
    pub(crate) errno: *mut i32,
    /// The last `setjmp` calls, for the `longjmp` that lands in one of them.
    jumps: [JumpPoint; JUMP_POINTS],
    /// Where the next [`JumpPoint`] goes.
    next_jump: usize,
    /// `read=` counters of the open frames.
    pub(crate) reads: reads::Reads,
    /// `-W cpu`: the CPU of the last entry ([`watch::UNSEEN`] before the first).
    pub(crate) cpu: i32,
    /// While an exception unwinds: the stack pointer of the call that started (or resumed)
    /// it. Hooked calls with slots below its own are the unwinder's, not a landing pad's.
    unwind_sp: usize,
    /// PLT slots this thread sent to the lazy binder (see [`crate::plt::Claims`]).
    pub(crate) plt_claims: crate::plt::Claims,
}

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
    crate::log::raw(line.as_bytes());
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
            vfork_parent: core::ptr::null_mut(),
            errno: core::ptr::null_mut(),
            jumps: [JumpPoint::default(); JUMP_POINTS],
            next_jump: 0,
            reads: reads::Reads::default(),
            cpu: watch::UNSEEN,
            unwind_sp: 0,
            plt_claims: crate::plt::Claims::new(),
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

    /// Takes the [`block::REARM`] request.
    #[inline]
    pub fn take_rearm(&mut self) -> bool {
        let due = self.flag(block::REARM);
        self.set_flag(block::REARM, false);
        due
    }

    /// Asks the next hook to re-arm the PLT slot left unbound (see [`block::REARM`]).
    pub fn want_rearm(&mut self) {
        self.set_flag(block::REARM, true);
    }

    pub fn in_exception(&self) -> bool {
        self.flag(block::EXCEPTION)
    }

    pub fn set_in_exception(&mut self, on: bool) {
        self.set_flag(block::EXCEPTION, on);
    }

    /// An exception starts (or resumes) unwinding from the call whose caller's stack pointer
    /// is `sp`.
    pub fn start_exception(&mut self, sp: usize) {
        self.unwind_sp = sp;
        self.set_in_exception(true);
    }

    /// Whether a hooked call with return slot `parent_loc` is a landing pad's (traced code
    /// called once the unwinder has reached a frame), rather than one the unwinder itself
    /// makes below the throw (its personality routines and helpers, traced when patched
    /// libraries are: the frames they walk must keep their original return addresses).
    pub fn landing_pad_call(&self, parent_loc: usize) -> bool {
        self.in_exception() && parent_loc >= self.unwind_sp.wrapping_sub(8)
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
        let signalled = crate::signals::take();
        if signalled != 0 {
            filter::switch_before(signalled);
            filter::switch_after(signalled);
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

    /// Hijacks every slot again after an exception has been caught: with `tramp`, or the
    /// dynamic exit trampoline for frames entered through the dynamic entry (`DYN_EXIT`).
    /// Outermost first, so that a slot shared by a tail call ends with the innermost frame's
    /// trampoline, as before.
    ///
    /// # Safety
    /// As for [`ThreadState::restore_slots`].
    pub unsafe fn rehijack_slots(&mut self, tramp: usize) {
        for i in 0..self.rstack.len() {
            if let Some(f) = self.rstack.get(i) {
                if f.parent_loc != NO_SLOT {
                    let t = if f.flags & flags::DYN_EXIT != 0 {
                        crate::cpu::dyn_exit_trampoline_addr()
                    } else {
                        tramp
                    };
                    // SAFETY: guaranteed live by the caller.
                    unsafe { (f.parent_loc as *mut usize).write(t) };
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
        let signalled = crate::signals::take();
        if signalled != 0 {
            filter::switch_before(signalled);
        }
        self.writer.prepare();
        let now = self.clock.now();
        self.close_to_with(k, now, regs);
        if signalled != 0 {
            filter::switch_after(signalled);
        }
        Some(parent_ip)
    }

    /// A call recorded as having no duration (its return is not hooked: `dlopen`…): ENTRY and EXIT at the same time, at the depth it would have.
    pub fn instant(&mut self, child_ip: usize, regs: Option<&EntryRegs>) {
        self.instant_parts(child_ip, regs, true);
    }

    /// Writes the ENTRY (and with `exit`, the EXIT) record of a call that is not hooked at
    /// its return; returns the depth and time used, `None` when it is not recorded.
    fn instant_parts(
        &mut self,
        child_ip: usize,
        regs: Option<&EntryRegs>,
        exit: bool,
    ) -> Option<(u32, u64)> {
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
        Some((depth, now))
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
        // -W cpu: a change is noted just before the ENTRY, the first CPU just after it.
        let first_cpu = match record && crate::config::watch_cpu() {
            true => self.watch_cpu(frame.start),
            false => None,
        };
        self.write_entered(frame, record, capture);
        if let Some(cpu) = first_cpu {
            self.write_watch_cpu(frame.start + 1, cpu);
        }
    }

    #[inline]
    fn write_entered(&mut self, frame: &Frame, record: bool, capture: Capture) {
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
            if frame.flags & flags::READ != 0 {
                self.read_at_entry(self.rstack.len() - 1, frame.child_ip as u64);
            }
        }
        filter::switch_after(frame.flags);
        if frame.flags & flags::LIMITS != 0
            && filter::get().is_some_and(|f| f.dumps_at_entry(frame.child_ip as u64))
        {
            crate::flight::request_dump();
        }
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
        if crate::config::watch_cpu() {
            self.watch_cpu_at_exit(time);
        }
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
                // NORECORD without filters: a frame of an earlier session (see `block::STALE`).
                if f.flags & flags::NORECORD == 0 {
                    self.write_exit(now, &f, ret);
                }
                self.rstack.truncate(i);
                continue;
            };
            if f.flags & flags::NORECORD == 0 && filter::tracing() {
                if f.flags & flags::READ != 0 {
                    self.read_at_exit(i, now);
                }
                if f.flags & flags::PENDING == 0 {
                    self.write_exit(now, &f, ret);
                } else if !filters.has_caller
                    && now.saturating_sub(f.start) >= self.filt.time_in_force(filters)
                {
                    // The limits in force are this frame's own: its callees have popped.
                    self.write_pending(i + 1);
                    self.write_exit(now, &f, ret);
                }
            }
            let saved = match f.flags & flags::LIMITS {
                0 => Saved::default(),
                _ => {
                    let duration = now.saturating_sub(f.start);
                    if filters.dumps_at_exit(f.child_ip as u64, duration) {
                        crate::flight::request_dump();
                    }
                    self.saved_slot(i).copied().unwrap_or_default()
                }
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

mod jump;
mod reads;
#[cfg(test)]
mod tests;
mod vfork;
mod watch;
use jump::{JumpPoint, JUMP_POINTS};
pub use vfork::VforkStep;
