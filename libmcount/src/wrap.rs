//! Interposed libc functions that protect libmcount's own resources.
//!
//! `close`: programs that close every descriptor (daemons, sandboxes: `for (fd = 3; …)
//! close(fd)`) would close the data-directory descriptor, and every later thread start and
//! window refill would fail. Closing it is refused (reported as success), as uftrace does
//! for its channel.
//!
//! `sigaction`, `signal`: while SDT probes are enabled, `SIGTRAP` is libmcount's; the
//! program's own action for it is kept and reported by `crate::sdt` instead (glibc's
//! `signal` calls its internal `sigaction`, which no interposition sees: hence both).

use crate::{config, sys};
use core::sync::atomic::{AtomicUsize, Ordering};

/// glibc's `close`, resolved by the constructor (until then: the raw system call).
static REAL_CLOSE: AtomicUsize = AtomicUsize::new(0);

/// glibc's `sigaction` and `signal`, resolved by the constructor or on first use.
static REAL_SIGACTION: AtomicUsize = AtomicUsize::new(0);
static REAL_SIGNAL: AtomicUsize = AtomicUsize::new(0);

/// Looks up the real `close` (constructor only: `dlsym` is not async-signal-safe).
pub fn init() {
    // SAFETY: NUL-terminated name; RTLD_NEXT is a valid pseudo-handle.
    let f = unsafe { libc::dlsym(libc::RTLD_NEXT, c"close".as_ptr()) } as usize;
    // Relaxed: a stale 0 only means using the raw system call.
    REAL_CLOSE.store(f, Ordering::Relaxed);
    real(&REAL_SIGACTION, c"sigaction");
    real(&REAL_SIGNAL, c"signal");
}

/// The next definition of `name` (after libmcount's), looked up once.
fn real(slot: &AtomicUsize, name: &core::ffi::CStr) -> usize {
    match slot.load(Ordering::Relaxed) {
        0 => {
            // SAFETY: NUL-terminated name; RTLD_NEXT is a valid pseudo-handle.
            let f = unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr()) } as usize;
            slot.store(f, Ordering::Relaxed);
            f
        }
        f => f,
    }
}

type SigactionFn =
    extern "C" fn(libc::c_int, *const libc::sigaction, *mut libc::sigaction) -> libc::c_int;

/// glibc's `sigaction`, whoever asks (libmcount's own handlers).
pub fn real_sigaction(
    sig: libc::c_int,
    act: *const libc::sigaction,
    old: *mut libc::sigaction,
) -> libc::c_int {
    match real(&REAL_SIGACTION, c"sigaction") {
        0 => -1,
        f => {
            // SAFETY: `f` is libc's sigaction, which has this signature.
            let f: SigactionFn = unsafe { core::mem::transmute(f) };
            f(sig, act, old)
        }
    }
}

/// Interposed `sigaction(2)`.
///
/// # Safety
/// As sigaction(2): `act` null or readable, `old` null or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sigaction(
    sig: libc::c_int,
    act: *const libc::sigaction,
    old: *mut libc::sigaction,
) -> libc::c_int {
    if sig == libc::SIGTRAP {
        // SAFETY: the caller passes null or valid sigaction structs (readable `act`,
        // writable `old`), as sigaction(2) requires.
        let (a, o) = unsafe { (act.as_ref(), old.as_mut()) };
        if let Some(r) = crate::sdt::program_sigaction(a, o) {
            return r;
        }
    }
    real_sigaction(sig, act, old)
}

/// Interposed `signal(2)`, glibc's BSD semantics (`SA_RESTART`, the signal blocked in its
/// handler) for `SIGTRAP` while probes own it.
#[unsafe(no_mangle)]
pub extern "C" fn signal(sig: libc::c_int, handler: libc::sighandler_t) -> libc::sighandler_t {
    if sig == libc::SIGTRAP {
        // SAFETY: sigaction is plain data; all-zero is valid.
        let mut act: libc::sigaction = unsafe { core::mem::zeroed() };
        act.sa_sigaction = handler;
        act.sa_flags = libc::SA_RESTART;
        // SAFETY: `act.sa_mask` is a valid sigset_t.
        unsafe { libc::sigaddset(&mut act.sa_mask, sig) };
        // SAFETY: as above.
        let mut old: libc::sigaction = unsafe { core::mem::zeroed() };
        if let Some(r) = crate::sdt::program_sigaction(Some(&act), Some(&mut old)) {
            return if r == 0 {
                old.sa_sigaction
            } else {
                libc::SIG_ERR
            };
        }
    }
    match real(&REAL_SIGNAL, c"signal") {
        0 => libc::SIG_ERR,
        f => {
            // SAFETY: `f` is libc's signal, which has this signature.
            let f: extern "C" fn(libc::c_int, libc::sighandler_t) -> libc::sighandler_t =
                unsafe { core::mem::transmute(f) };
            f(sig, handler)
        }
    }
}

/// Interposed `close(2)`.
#[unsafe(no_mangle)]
pub extern "C" fn close(fd: libc::c_int) -> libc::c_int {
    if fd >= 0 && config::is_own_fd(fd) {
        return 0;
    }
    match REAL_CLOSE.load(Ordering::Relaxed) {
        0 => {
            sys::close(fd);
            0
        }
        f => {
            // SAFETY: `f` is libc's close, which has this signature.
            let f: extern "C" fn(libc::c_int) -> libc::c_int = unsafe { core::mem::transmute(f) };
            f(fd)
        }
    }
}
