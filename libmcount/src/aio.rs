//! libaio's `io_submit`, `io_getevents` and `io_pgetevents`, interposed: with `record -k`
//! ([`env::AIO_MARKER`]), each call writes into tracefs' `trace_marker_raw` the iocbs it
//! submitted or the events it returned, once it has returned, in the layout of
//! [`record_format::aio`]; the kernel stores the write as an `ftrace:raw_data` event of the
//! task, between the call's system call events. The analysis then knows each block request's
//! iocb and the very call that reaped it (`report --io`).
//!
//! Interposed rather than hooked through the PLT: the events are read after the call
//! returns, which the PLT hook's exit (shared with every traced function) has no room for,
//! and calls from libraries or with `--no-libcall` are seen too. The real functions are the
//! next definitions (libaio's, looked up by the constructor, or at the first call when libaio
//! came later); without one, the raw system call, which is what libaio makes.
//!
//! What the program sees is unchanged: a marker is written after the call returns, of the
//! iocbs the kernel accepted, read with `process_vm_readv` (by then another thread may have
//! reaped and freed them: an unmapped one is written as zeros, never a fault), or of the
//! events it wrote into the caller's array; `errno` is not touched (raw system calls),
//! nothing is allocated, and the marker's descriptor is opened when the session starts,
//! parked above the program's range (`config::keep_fd`). If it cannot be opened, no marker
//! is written. Each marker is one `write` system call in the trace, under the call it
//! describes.
//!
//! Known limit: the interposed functions carry no symbol version, so a binary bound to
//! libaio's compatibility `io_getevents@LIBAIO_0.1` (four arguments; libaio before 0.3.93,
//! 2003) would reach the five-argument one. Every libaio of the last twenty years binds
//! `io_getevents@@LIBAIO_0.4`.

use crate::{config, sys};
use core::sync::atomic::{AtomicI32, AtomicU64, AtomicUsize, Ordering};
use record_format::aio::{self, Iocb};
use std::ffi::{CStr, CString};

/// The marker's descriptor, -1 when markers are off or the file could not be opened.
static FD: AtomicI32 = AtomicI32::new(-1);

/// A real function: its address (0: not looked up yet, or not found), and when it was not
/// found, the dynamic linker's generation of objects then
/// ([`crate::patch::module::generation`]; 0: never missed).
struct Real {
    f: AtomicUsize,
    missed_at: AtomicU64,
}

impl Real {
    const fn new() -> Real {
        Real {
            f: AtomicUsize::new(0),
            missed_at: AtomicU64::new(0),
        }
    }
}

static REAL_SUBMIT: Real = Real::new();
static REAL_GETEVENTS: Real = Real::new();
static REAL_PGETEVENTS: Real = Real::new();

/// Opens the marker file of the session being started (`None`: no markers), now, out of the
/// way of the program's descriptors and system calls. An earlier session's descriptor stays
/// open (a thread may still be writing through it) but is no longer used.
pub fn set_marker(path: Option<CString>) {
    let fd = path
        .and_then(|p| sys::openat(libc::AT_FDCWD, &p, libc::O_WRONLY | libc::O_CLOEXEC, 0).ok())
        .and_then(config::keep_fd)
        .unwrap_or(-1);
    // Relaxed: published with the session state's Release store.
    FD.store(fd, Ordering::Relaxed);
}

/// Looks the real functions up (constructor: `dlsym` is not async-signal-safe).
pub fn init() {
    for (slot, name) in [
        (&REAL_SUBMIT, c"io_submit"),
        (&REAL_GETEVENTS, c"io_getevents"),
        (&REAL_PGETEVENTS, c"io_pgetevents"),
    ] {
        lookup(slot, name);
    }
}

/// The next definition of `name` after libmcount's, found once; while there is none, looked
/// up again only when the dynamic linker has loaded or unloaded objects since (libaio may
/// come later). The program's `errno` and `dlerror` are left as they were.
fn lookup(real: &Real, name: &CStr) -> usize {
    // Relaxed: any thread may look it up again; the answer is the same.
    let f = real.f.load(Ordering::Relaxed);
    if f != 0 {
        return f;
    }
    let missed = real.missed_at.load(Ordering::Relaxed);
    let now = crate::patch::module::generation();
    if missed != 0 && now == missed {
        return 0;
    }
    // SAFETY: this thread's errno, valid as long as the thread.
    let errno = unsafe { *libc::__errno_location() };
    // SAFETY: NUL-terminated name; RTLD_NEXT is a valid pseudo-handle.
    let f = unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr()) } as usize;
    if f == 0 {
        // The program's next `dlerror` must not report our lookup.
        // SAFETY: no arguments; clears this thread's dlerror state.
        unsafe { libc::dlerror() };
        real.missed_at.store(now, Ordering::Relaxed);
    }
    // SAFETY: as above; the program's errno, as it was.
    unsafe { *libc::__errno_location() = errno };
    real.f.store(f, Ordering::Relaxed);
    f
}

/// The marker's descriptor; `None` when markers or tracing are off.
fn marker_fd() -> Option<i32> {
    if !config::tracing() {
        return None;
    }
    let fd = FD.load(Ordering::Relaxed);
    (fd >= 0).then_some(fd)
}

/// Writes markers of `kind` for the first `n` items (a call's result) on `ctx`, at most
/// `per_write` to a write: `fill(first, count, out)` encodes items `first..first + count`
/// into `out`, `item` bytes each.
fn mark(
    kind: u32,
    ctx: usize,
    n: i32,
    (per_write, item): (usize, usize),
    fill: impl Fn(usize, usize, &mut [u8]),
) {
    if n <= 0 {
        return;
    }
    let Some(fd) = marker_fd() else {
        return;
    };
    let total = (n as usize).min(aio::MAX_ITEMS);
    let mut w = [0u8; aio::MAX_WRITE];
    let mut first = 0;
    while first < total {
        let count = (total - first).min(per_write);
        let end = aio::HEADER_SIZE + count * item;
        fill(first, count, &mut w[aio::HEADER_SIZE..end]);
        aio::encode_header(&mut w, kind, count, ctx as u64, first);
        let _ = sys::write(fd, &w[..end]);
        first += count;
    }
}

/// Writes the first `n` iocbs of `iocbpp` that `io_submit` on `ctx` submitted (its result).
fn mark_submit(ctx: usize, n: i32, iocbpp: usize) {
    let sizes = (aio::IOCBS_PER_WRITE, aio::IOCB_SIZE);
    mark(aio::SUBMIT, ctx, n, sizes, |first, count, out| {
        let (ptrs, raws, whole) = read_iocbs(iocbpp, first, count);
        for k in 0..count {
            // An iocb no longer mapped (reaped and freed by another thread already) is
            // written as zeros: the analysis matches nothing to it.
            let cb = if k < whole {
                Iocb::from_struct(ptrs[k], &raws[k])
            } else {
                Iocb::default()
            };
            cb.encode(&mut out[k * aio::IOCB_SIZE..(k + 1) * aio::IOCB_SIZE]);
        }
    });
}

/// Iocbs `first..first + count` of the array at `iocbpp`: their pointers and bytes, read with
/// `process_vm_readv` (two system calls): the kernel read them during `io_submit`, but by its
/// return another thread may have reaped and freed them, which must not fault the program.
/// The third value is how many were read whole.
#[allow(clippy::type_complexity)]
fn read_iocbs(
    iocbpp: usize,
    first: usize,
    count: usize,
) -> (
    [u64; aio::IOCBS_PER_WRITE],
    [[u8; aio::IOCB_READ]; aio::IOCBS_PER_WRITE],
    usize,
) {
    let mut ptrs = [0u64; aio::IOCBS_PER_WRITE];
    let mut raws = [[0u8; aio::IOCB_READ]; aio::IOCBS_PER_WRITE];
    let count = count.min(aio::IOCBS_PER_WRITE);
    let mut bytes = [0u8; 8 * aio::IOCBS_PER_WRITE];
    let got = sys::read_self(iocbpp.wrapping_add(8 * first), &mut bytes[..8 * count]) / 8;
    for (p, b) in ptrs.iter_mut().zip(bytes.chunks_exact(8)).take(got) {
        *p = u64::from_le_bytes(b.try_into().unwrap_or_default());
    }
    let empty = libc::iovec {
        iov_base: core::ptr::null_mut(),
        iov_len: 0,
    };
    let mut local = [empty; aio::IOCBS_PER_WRITE];
    let mut remote = [empty; aio::IOCBS_PER_WRITE];
    for k in 0..got {
        local[k].iov_base = raws[k].as_mut_ptr() as *mut libc::c_void;
        local[k].iov_len = aio::IOCB_READ;
        remote[k].iov_base = ptrs[k] as *mut libc::c_void;
        remote[k].iov_len = aio::IOCB_READ;
    }
    // SAFETY: each local iovec is one of `raws`' arrays, writable, of its length.
    let read = unsafe { sys::read_self_iov(&local[..got], &remote[..got]) };
    (ptrs, raws, read / aio::IOCB_READ)
}

/// Writes the `n` events at `events` that a call on `ctx` returned (its result).
fn mark_reaped(ctx: usize, n: i32, events: usize) {
    let sizes = (aio::EVENTS_PER_WRITE, aio::EVENT_SIZE);
    mark(aio::REAPED, ctx, n, sizes, |first, count, out| {
        // SAFETY: the call has just written these `n` events (`struct io_event`, the
        // item's layout) into the program's array: mapped and readable.
        let src = unsafe {
            core::slice::from_raw_parts(
                (events as *const u8).add(first * aio::IO_EVENT),
                count * aio::IO_EVENT,
            )
        };
        out.copy_from_slice(src);
    });
}

/// The size of the kernel's signal set (64 signals), which `io_pgetevents(2)` checks.
const KERNEL_SIGSET: usize = 8;

type SubmitFn = unsafe extern "C" fn(usize, isize, usize) -> i32;
type GetEventsFn = unsafe extern "C" fn(usize, isize, isize, usize, usize) -> i32;
type PGetEventsFn = unsafe extern "C" fn(usize, isize, isize, usize, usize, usize) -> i32;

/// Interposed libaio `io_submit(ctx, nr, iocbpp)`.
///
/// # Safety
/// As libaio's: `iocbpp` holds `nr` iocb pointers.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn io_submit(ctx: usize, nr: isize, iocbpp: usize) -> i32 {
    let n = match lookup(&REAL_SUBMIT, c"io_submit") {
        0 => {
            let a = [ctx, nr as usize, iocbpp, 0, 0, 0];
            // SAFETY: the caller's arguments, as io_submit(2) takes them.
            (unsafe { sys::aio_syscall(sys::SYS_IO_SUBMIT, a) }) as i32
        }
        f => {
            // SAFETY: `f` is libaio's io_submit, which has this signature.
            let f: SubmitFn = unsafe { core::mem::transmute(f) };
            // SAFETY: the caller's guarantees.
            unsafe { f(ctx, nr, iocbpp) }
        }
    };
    mark_submit(ctx, n, iocbpp);
    n
}

/// Interposed libaio `io_getevents(ctx, min_nr, nr, events, timeout)`.
///
/// # Safety
/// As libaio's: `events` has room for `nr` events, `timeout` null or a timespec.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn io_getevents(
    ctx: usize,
    min_nr: isize,
    nr: isize,
    events: usize,
    timeout: usize,
) -> i32 {
    let n = match lookup(&REAL_GETEVENTS, c"io_getevents") {
        0 => {
            let a = [ctx, min_nr as usize, nr as usize, events, timeout, 0];
            // SAFETY: the caller's arguments, as io_getevents(2) takes them.
            (unsafe { sys::aio_syscall(sys::SYS_IO_GETEVENTS, a) }) as i32
        }
        f => {
            // SAFETY: `f` is libaio's io_getevents, which has this signature.
            let f: GetEventsFn = unsafe { core::mem::transmute(f) };
            // SAFETY: the caller's guarantees.
            unsafe { f(ctx, min_nr, nr, events, timeout) }
        }
    };
    mark_reaped(ctx, n, events);
    n
}

/// Interposed libaio `io_pgetevents(ctx, min_nr, nr, events, timeout, sigmask)`.
///
/// # Safety
/// As libaio's.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn io_pgetevents(
    ctx: usize,
    min_nr: isize,
    nr: isize,
    events: usize,
    timeout: usize,
    sigmask: usize,
) -> i32 {
    let n = match lookup(&REAL_PGETEVENTS, c"io_pgetevents") {
        0 => {
            // No libaio in sight (loaded `RTLD_LOCAL`, say): the system call as libaio makes
            // it, the mask passed as the kernel's { mask, size of a kernel sigset } pair.
            let mask = [sigmask, KERNEL_SIGSET];
            let a = [
                ctx,
                min_nr as usize,
                nr as usize,
                events,
                timeout,
                mask.as_ptr() as usize,
            ];
            // SAFETY: the caller's arguments, as io_pgetevents(2) takes them; `mask` lives
            // across the call.
            (unsafe { sys::aio_syscall(sys::SYS_IO_PGETEVENTS, a) }) as i32
        }
        f => {
            // SAFETY: `f` is libaio's io_pgetevents, which has this signature.
            let f: PGetEventsFn = unsafe { core::mem::transmute(f) };
            // SAFETY: the caller's guarantees.
            unsafe { f(ctx, min_nr, nr, events, timeout, sigmask) }
        }
    };
    mark_reaped(ctx, n, events);
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An iocb no longer readable (freed and unmapped by another thread after the `io_submit`
    /// returned) ends the read without a fault; those before it are read whole.
    #[test]
    fn iocbs_no_longer_mapped_are_not_read() {
        let mut good = [0u8; 64];
        good[..8].copy_from_slice(&0x1234u64.to_le_bytes());
        good[40..48].copy_from_slice(&4096u64.to_le_bytes());
        // SAFETY: a fresh anonymous page that cannot be read (PROT_NONE), kept mapped for the
        // whole test so that no other test thread's mapping takes its place.
        let gone = unsafe {
            let p = libc::mmap(
                core::ptr::null_mut(),
                4096,
                libc::PROT_NONE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            );
            assert_ne!(p, libc::MAP_FAILED);
            p as u64
        };
        let list = [good.as_ptr() as u64, gone, good.as_ptr() as u64];
        let (ptrs, raws, whole) = read_iocbs(list.as_ptr() as usize, 0, 3);
        assert_eq!(whole, 1);
        assert_eq!(ptrs[..3], list);
        let cb = Iocb::from_struct(ptrs[0], &raws[0]);
        assert_eq!((cb.data, cb.offset), (0x1234, 4096));
        // The array itself unmapped: nothing read.
        assert_eq!(read_iocbs(gone as usize, 0, 2).2, 0);
        // SAFETY: the page mapped above, no longer used.
        unsafe { libc::munmap(gone as *mut libc::c_void, 4096) };
    }
}
