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
use crate::cpu::EntryRegs;
use crate::filter::{self, Decision, FilterState, Filters, Saved};
use crate::frame_flags::{self as flags, ARGS_SAVED};
use crate::rstack::{Frame, ShadowStack, NO_SLOT};
use core::sync::atomic::{AtomicBool, Ordering};

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
        let frame = Frame::new(parent_loc, parent_ip, child_ip, depth, flags | extra, start);
        self.rstack.push(frame);
        self.entered(&frame, record, capture);
        if parent_ip == tramp {
            Hook::Alias
        } else {
            Hook::Hijack
        }
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
        let frame = Frame::new(NO_SLOT, 0, child_ip, depth, 0, now);
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
        let frame = Frame::new(NO_SLOT, call_site, this_fn, depth, flags, start);
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
}

mod exits;
mod jump;
mod reads;
mod records;
#[cfg(test)]
mod tests;
mod vfork;
mod watch;
use jump::{JumpPoint, JUMP_POINTS};
use records::exit_word;
pub use vfork::VforkStep;
