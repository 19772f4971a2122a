//! The C-ABI entry points: thin shims that check that tracing is on, save `errno`, take the
//! thread's recursion guard, and call the safe methods of [`ThreadState`].
//!
//! Nothing here allocates, locks or panics; nothing returns a `Result` across the FFI.

use crate::cpu::{dyn_exit_trampoline_addr, exit_trampoline_addr, DynRegs, EntryRegs, ExitRegs};
use crate::thread::{Hook, ThreadState};
use crate::{config, lifecycle, plt};

/// The thread's `errno`, put back when dropped.
struct Errno {
    at: *mut i32,
    value: i32,
}

impl Errno {
    #[inline]
    fn save(td: &ThreadState) -> Errno {
        let at = td.errno_location();
        // SAFETY: `at` is this thread's errno address, valid as long as the thread.
        let value = unsafe { *at };
        Errno { at, value }
    }
}

impl Drop for Errno {
    #[inline]
    fn drop(&mut self) {
        // SAFETY: as in `save`.
        unsafe { *self.at = self.value };
    }
}

/// Runs `f` on the thread's state with the guard held and errno preserved; `None` if the
/// thread is not traced or already inside a handler.
#[inline(always)]
fn guarded<R>(f: impl FnOnce(&mut ThreadState) -> R) -> Option<R> {
    if !config::tracing() {
        return None;
    }
    let td = lifecycle::current()?;
    if td.guard() {
        return None;
    }
    if td.take_rearm() {
        if let Some(p) = plt::get() {
            p.rearm_now();
        }
    }
    td.set_guard(true);
    let errno = Errno::save(td);
    let r = f(td);
    drop(errno);
    td.set_guard(false);
    Some(r)
}

/// Called by the `mcount`/`__fentry__` trampolines, with the TSC they read on entry.
///
/// # Safety
/// `parent_loc` must be the address of the calling function's return slot on the current
/// thread's stack; `child_ip` an address inside that function.
pub unsafe extern "C" fn mcount_entry(
    parent_loc: *mut usize,
    child_ip: usize,
    regs: *const EntryRegs,
    tsc: u64,
) {
    // SAFETY: the trampoline passes its save area, live for the whole call.
    let regs = unsafe { regs.as_ref() };
    // SAFETY: the caller's guarantees.
    unsafe {
        enter(
            parent_loc,
            child_ip,
            regs,
            Some(tsc),
            exit_trampoline_addr(),
            0,
        )
    };
}

/// Called by the dynamic entry trampoline (full dynamic patching) for the patched function
/// whose `call` returns to `child_ip`: records the entry as `mcount_entry` does (the frame
/// returns through the dynamic exit trampoline) and returns where the function's displaced
/// instructions run, whether or not it was traced.
///
/// # Safety
/// As for [`mcount_entry`]; `child_ip` must be the return address of a patched `call`.
pub unsafe extern "C" fn dyn_entry(
    parent_loc: *mut usize,
    child_ip: usize,
    regs: *const DynRegs,
) -> usize {
    let Some(out_of_line) = crate::patch::table::lookup(child_ip) else {
        crate::log::fatal(b"dynamic entry from an address that was not patched")
    };
    // SAFETY: the trampoline passes its save area, live for the whole call.
    let regs = unsafe { regs.as_ref() }.map(|r| &r.regs);
    let (tramp, flags) = (dyn_exit_trampoline_addr(), crate::frame_flags::DYN_EXIT);
    // SAFETY: the caller's guarantees.
    unsafe { enter(parent_loc, child_ip, regs, None, tramp, flags) };
    out_of_line
}

/// A hooked function's entry: pushes its frame and hijacks its return slot with `tramp` (the
/// exit trampoline the frame's `flags` name) unless the thread does not trace it.
///
/// # Safety
/// As for [`mcount_entry`].
unsafe fn enter(
    parent_loc: *mut usize,
    child_ip: usize,
    regs: Option<&EntryRegs>,
    tsc: Option<u64>,
    tramp: usize,
    flags: u16,
) {
    guarded(|td| {
        let mut tsc = tsc;
        if td.landing_pad_call(parent_loc as usize) {
            // The records written here are later than the trampoline's TSC.
            tsc = None;
            // A cleanup landing pad calls traced code: frames at or below this slot were
            // unwound; the others get their hijack back until the unwinder resumes.
            td.set_in_exception(false);
            td.prune(|slot| slot <= parent_loc as usize);
            // SAFETY: the frames left are above this live slot, so still on the stack.
            unsafe { td.rehijack_slots(exit_trampoline_addr()) };
        }
        if td.vfork_child() {
            return;
        }
        // SAFETY: the caller guarantees `parent_loc` is a live, aligned stack slot.
        let parent_ip = unsafe { parent_loc.read() };
        let hook = td.enter_flagged(
            parent_loc as usize,
            parent_ip,
            child_ip,
            tramp,
            flags,
            regs,
            tsc,
        );
        if hook == Hook::Hijack {
            // SAFETY: as above; the frame was pushed first, so the exit handler will find it.
            unsafe { parent_loc.write(tramp) };
        }
    });
}

/// Called by the exit trampoline; returns where the hijacked function really returns to.
///
/// # Safety
/// `slot` must be the return slot the returning function used (it was hijacked by
/// `mcount_entry` on this thread).
pub unsafe extern "C" fn mcount_exit(regs: *const ExitRegs, slot: *mut usize) -> usize {
    // SAFETY: the exit trampoline passes its save area, live for the whole call.
    let regs = unsafe { regs.as_ref() };
    // Works whatever the session state: every hijacked frame must be able to return.
    if let Some(td) = lifecycle::existing() {
        let saved = td.guard();
        td.set_guard(true);
        let errno = Errno::save(td);
        let ret = if td.vfork_child() {
            td.peek_exit(slot as usize)
        } else {
            td.exit_with(slot as usize, regs)
        };
        drop(errno);
        td.set_guard(saved);
        if let Some(ip) = ret {
            return ip;
        }
    }
    crate::log::fatal(b"return through the exit trampoline without a matching shadow-stack frame")
}

/// `-finstrument-functions` entry hook, when the fast path in `arch` cannot handle it.
pub extern "C" fn cyg_enter_slow(this_fn: *mut libc::c_void, call_site: *mut libc::c_void) {
    guarded(|td| {
        if !td.vfork_child() {
            td.cyg_enter(this_fn as usize, call_site as usize);
        }
    });
}

/// `-finstrument-functions` exit hook, when the fast path in `arch` cannot handle it.
pub extern "C" fn cyg_exit_slow(this_fn: *mut libc::c_void, _call_site: *mut libc::c_void) {
    // Exits are still paired after the session finished (no new records are written then).
    if let Some(td) = lifecycle::existing() {
        if !td.guard() {
            td.set_guard(true);
            let errno = Errno::save(td);
            if !td.vfork_child() {
                td.cyg_exit(this_fn as usize);
            }
            drop(errno);
            td.set_guard(false);
        }
    }
}

/// Called by the PLT hook (`arch::plt_hook`) for a call through hooked GOT slot `index`;
/// returns where the call goes.
///
/// # Safety
/// `parent_loc` must be the caller's return slot on the current thread's stack.
pub unsafe extern "C" fn plt_entry(
    parent_loc: *mut usize,
    index: usize,
    regs: *const EntryRegs,
) -> usize {
    // SAFETY: the PLT hook passes its save area, live for the whole call.
    let regs = unsafe { regs.as_ref() };
    let Some(p) = plt::get() else {
        crate::log::fatal(b"PLT hook called without hooked slots")
    };
    if p.any_pending() {
        // This thread's calls sent to the lazy binder from here or from a caller are past it.
        if let Some(td) = crate::lifecycle::existing().filter(|td| !td.guard()) {
            td.set_guard(true);
            p.settle(&mut td.plt_claims, parent_loc as usize);
            td.set_guard(false);
        }
    }
    let (target, unbound) = p.target(index);
    let Some(slot) = p.slot(index) else {
        crate::log::fatal(b"PLT hook called for an unknown slot")
    };
    let tramp = exit_trampoline_addr();
    let kind = regs.map_or(slot.kind(), |r| slot.kind().for_call(r));
    // Whether the call returns through the trampoline, whose exit re-arms an unbound slot.
    let hooked = guarded(|td| {
        if td.vfork_child() {
            return false;
        }
        match kind {
            plt::Kind::Hook | plt::Kind::Unwind | plt::Kind::Vfork => {
                // SAFETY: the caller guarantees `parent_loc` is a live, aligned stack slot.
                let parent_ip = unsafe { parent_loc.read() };
                let extra = if unbound {
                    crate::frame_flags::REARM
                } else {
                    0
                };
                let hook = td.enter_flagged(
                    parent_loc as usize,
                    parent_ip,
                    slot.entry(),
                    tramp,
                    extra,
                    regs,
                    None,
                );
                if hook == Hook::Hijack && kind != plt::Kind::Unwind {
                    // SAFETY: as above; the frame was pushed first.
                    unsafe { parent_loc.write(tramp) };
                }
                if kind == plt::Kind::Vfork {
                    // Both processes return through the trampoline (see `thread::vfork`).
                    td.start_vfork();
                }
                hook != Hook::None && kind != plt::Kind::Unwind
            }
            plt::Kind::Setjmp => {
                td.setjmp(slot.entry(), regs);
                false
            }
            plt::Kind::Longjmp => {
                td.longjmp(slot.entry(), regs);
                false
            }
            // `for_call` made the loader's kinds `Hook` or `Instant`.
            _ => {
                td.instant(slot.entry(), regs);
                false
            }
        }
    })
    .unwrap_or(false);
    // A call not traced (filtered out, outside the depth limit, tracing off) goes through
    // the lazy binder too, which leaves the bound address in the slot: re-arm it later.
    if unbound && !hooked {
        let td = crate::lifecycle::existing().filter(|td| !td.guard());
        match td {
            Some(td) => {
                td.set_guard(true);
                p.rearm_later(index, parent_loc as usize, Some(&mut td.plt_claims));
                td.want_rearm();
                td.set_guard(false);
            }
            None => p.rearm_later(index, parent_loc as usize, None),
        }
    }
    target
}

/// gprof's start-up hook (called by `gcrt1.o`'s `__gmon_start__`): a no-op, so that no
/// `SIGPROF` sampling starts.
#[unsafe(no_mangle)]
pub extern "C" fn __monstartup(_lowpc: usize, _highpc: usize) {}

/// gprof's `atexit` handler: a no-op, so that no `gmon.out` is written.
#[unsafe(no_mangle)]
pub extern "C" fn _mcleanup() {}
