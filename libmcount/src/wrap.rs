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

/// Interposed `close_range(2)` (glibc 2.34): the program's range without libmcount's
/// descriptors (its data files, the data directory, the recorder's pidfd, the aio marker),
/// which the interposed `close` protects too; a program that closes everything from 3 up
/// must not take the tracer's files with it, nor get their numbers back from its next
/// `open` for the tracer to write into. The range goes to the kernel in pieces around
/// them. On failure, -1 and `errno`, as glibc's.
#[unsafe(no_mangle)]
pub extern "C" fn close_range(
    first: libc::c_uint,
    last: libc::c_uint,
    flags: libc::c_int,
) -> libc::c_int {
    let flags = flags as libc::c_uint;
    let result = if flags & libc::CLOSE_RANGE_CLOEXEC != 0 || first > last {
        // Marking close-on-exec takes nothing away (libmcount's are already marked).
        sys::close_range(first, last, flags)
    } else {
        in_pieces(
            first,
            last,
            |each| config::each_own_fd(first, last, each),
            |a, b| sys::close_range(a, b, flags),
        )
    };
    match result {
        Ok(_) => 0,
        Err(e) => {
            // SAFETY: this thread's errno word.
            unsafe { *libc::__errno_location() = e };
            -1
        }
    }
}

/// Calls `close(a, b)` on each piece of `first..=last` between the descriptors that `owns`
/// gives (increasing, within the range), up to the first error, which it returns.
fn in_pieces(
    first: u32,
    last: u32,
    owns: impl FnOnce(&mut dyn FnMut(u32)),
    mut close: impl FnMut(u32, u32) -> sys::SysResult<usize>,
) -> sys::SysResult<usize> {
    let mut result = Ok(0);
    // The next descriptor to close; `None` once past `last` (an own descriptor at `u32::MAX`).
    let mut from = Some(first);
    owns(&mut |own| {
        if let Some(f) = from.filter(|&f| own > f && result.is_ok()) {
            result = close(f, own - 1);
        }
        from = own.checked_add(1);
    });
    match from {
        Some(f) if f <= last && result.is_ok() => close(f, last),
        _ => result,
    }
}

/// Interposed `closefrom(3)` (glibc 2.34): every descriptor from `lowfd` up but libmcount's
/// (see [`close_range`]); where the kernel has no `close_range`, one `close` at a time up to
/// the descriptor limit, as glibc falls back to.
#[unsafe(no_mangle)]
pub extern "C" fn closefrom(lowfd: libc::c_int) {
    // SAFETY: this thread's errno word: closefrom leaves it as it was.
    let errno = unsafe { *libc::__errno_location() };
    let first = lowfd.max(0) as libc::c_uint;
    if close_range(first, libc::c_uint::MAX, 0) != 0 {
        let mut lim = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: `lim` is a valid rlimit to fill.
        let max = if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } == 0 {
            lim.rlim_cur.min(1 << 20) as libc::c_uint
        } else {
            1024
        };
        for fd in first..max {
            if !config::is_own_fd(fd as i32) {
                sys::close(fd as i32);
            }
        }
    }
    // SAFETY: as above.
    unsafe { *libc::__errno_location() = errno };
}

#[cfg(test)]
mod tests {
    use super::in_pieces;

    /// The pieces closed around libmcount's descriptors, from 0 (every descriptor) too.
    #[test]
    fn ranges_are_closed_around_own_descriptors() {
        let pieces = |first, last, owns: &[u32]| {
            let mut got = Vec::new();
            let r = in_pieces(
                first,
                last,
                |each| owns.iter().for_each(|&o| each(o)),
                |a, b| {
                    got.push((a, b));
                    Ok(0)
                },
            );
            assert_eq!(r, Ok(0));
            got
        };
        assert_eq!(pieces(0, u32::MAX, &[]), [(0, u32::MAX)]);
        assert_eq!(
            pieces(3, u32::MAX, &[900, 901, 905]),
            [(3, 899), (902, 904), (906, u32::MAX)]
        );
        assert_eq!(pieces(900, 901, &[900, 901]), []);
        assert_eq!(pieces(900, 950, &[900]), [(901, 950)]);
        assert_eq!(pieces(3, 10, &[10]), [(3, 9)]);
        // The first error stops the closing and is returned.
        let mut calls = 0;
        let r = in_pieces(
            3,
            100,
            |each| each(50),
            |_, _| {
                calls += 1;
                Err(libc::EINVAL)
            },
        );
        assert_eq!((r, calls), (Err(libc::EINVAL), 1));
    }
}
