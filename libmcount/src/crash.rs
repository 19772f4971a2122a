//! Fatal signals (runtime spec §6.2): before the process dies, put the original return
//! addresses back into the crashing thread's hijacked slots, so that a core dump, a debugger
//! or a crash reporter sees the real stack, and say so on the log descriptor. Records need no
//! flushing (they are in the page cache already). In flight mode the recorder is asked to
//! dump the newest records before the process dies.
//!
//! The handler is installed only for signals still at their default action when the session
//! starts (a program that installs its own handler later simply replaces it). It runs once
//! (`SA_RESETHAND`), then re-raises the signal, which the kernel delivers with the default
//! action as soon as the handler returns.

use crate::cpu::exit_trampoline_addr;
use crate::{lifecycle, sys, tasklog};

const SIGNALS: [i32; 5] = [
    libc::SIGSEGV,
    libc::SIGBUS,
    libc::SIGILL,
    libc::SIGFPE,
    libc::SIGABRT,
];

/// Installs the handler for every fatal signal that has no handler yet.
pub fn install() {
    for sig in SIGNALS {
        // SAFETY: sigaction with a null new action only reads the current one into `old`.
        let mut old: libc::sigaction = unsafe { core::mem::zeroed() };
        // SAFETY: as above.
        if unsafe { libc::sigaction(sig, core::ptr::null(), &mut old) } != 0
            || old.sa_sigaction != libc::SIG_DFL
        {
            continue;
        }
        // SAFETY: a zeroed sigaction is valid; the fields are set below.
        let mut act: libc::sigaction = unsafe { core::mem::zeroed() };
        act.sa_sigaction = on_fatal_signal as *const () as usize;
        act.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK | libc::SA_RESETHAND;
        // SAFETY: `act` is fully initialised and the handler has the SA_SIGINFO signature.
        unsafe { libc::sigaction(sig, &act, core::ptr::null_mut()) };
    }
}

extern "C" fn on_fatal_signal(sig: i32, _info: *mut libc::siginfo_t, uctx: *mut libc::c_void) {
    let tid = sys::gettid();
    if let Some(td) = lifecycle::existing() {
        td.set_guard(true);
        td.set_disabled(true);
        // Frames whose slots lie below the interrupted stack pointer are already gone (longjmp):
        // never write there.
        let sp = if uctx.is_null() {
            0
        } else {
            // SAFETY: the kernel passes a valid ucontext_t to SA_SIGINFO handlers.
            let ctx = unsafe { &*(uctx as *const libc::ucontext_t) };
            ctx.uc_mcontext.gregs[libc::REG_RSP as usize] as usize
        };
        if sp != 0 {
            td.prune(|slot| slot < sp);
            // SAFETY: the frames left have slots at or above the interrupted stack pointer:
            // live frames of this thread.
            unsafe { td.restore_slots(exit_trampoline_addr()) };
        }
    }
    // After an attach's detach the log descriptor may be the program's own by now.
    let on = crate::config::STATE.load(core::sync::atomic::Ordering::Acquire) == crate::config::ON;
    if !on {
        // SAFETY: plain system call wrappers without pointers.
        unsafe { libc::syscall(libc::SYS_tgkill, sys::getpid(), tid, sig) };
        return;
    }
    let mut line = tasklog::LineBuf::<128>::new();
    line.push_bytes(b"process crashed by signal ");
    line.push_dec(sig as u64);
    line.push_bytes(b" in task ");
    line.push_dec(tid as u32 as u64);
    line.push_bytes(b": return addresses restored");
    crate::log::error(line.as_bytes(), 0);
    crate::flight::request_dump();
    // Now at the default action (SA_RESETHAND) and blocked until we return.
    // SAFETY: plain system call wrappers without pointers.
    unsafe { libc::syscall(libc::SYS_tgkill, sys::getpid(), tid, sig) };
}
