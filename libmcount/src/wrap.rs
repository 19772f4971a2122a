//! Interposed libc functions that protect libmcount's own resources.
//!
//! `close`: programs that close every descriptor (daemons, sandboxes: `for (fd = 3; …)
//! close(fd)`) would close the data-directory descriptor, and every later thread start and
//! window refill would fail. Closing it is refused (reported as success), as uftrace does
//! for its channel.

use crate::{config, sys};
use core::sync::atomic::{AtomicUsize, Ordering};

/// glibc's `close`, resolved by the constructor (until then: the raw system call).
static REAL_CLOSE: AtomicUsize = AtomicUsize::new(0);

/// Looks up the real `close` (constructor only: `dlsym` is not async-signal-safe).
pub fn init() {
    // SAFETY: NUL-terminated name; RTLD_NEXT is a valid pseudo-handle.
    let f = unsafe { libc::dlsym(libc::RTLD_NEXT, c"close".as_ptr()) } as usize;
    // Relaxed: a stale 0 only means using the raw system call.
    REAL_CLOSE.store(f, Ordering::Relaxed);
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
