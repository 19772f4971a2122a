//! libaio's `io_submit`, `io_getevents` and `io_pgetevents`, interposed: with `record -k`
//! ([`env::AIO_MARKER`]), each call writes into tracefs' `trace_marker_raw` the iocbs it
//! submits (at its entry) or the events it returned (at its return), in the layout of
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
//! iocbs the kernel accepted (it has read them: they are mapped, a bad pointer of the
//! program's is its `EFAULT`, never our fault) or of the events it wrote; `errno` is not
//! touched (a raw `write`), nothing is allocated, and the marker's descriptor is opened when
//! the session starts, parked above the program's range (`config::keep_fd`). If it cannot
//! be opened, no marker is written. Each marker is one `write` system call in the trace,
//! under the call it describes.

use crate::{config, sys};
use core::ffi::c_char;
use core::sync::atomic::{AtomicI32, AtomicPtr, AtomicUsize, Ordering};
use record_format::aio::{self, Iocb};
use std::ffi::{CStr, CString};

/// The marker file's path (a leaked `CString`), null when markers are not asked for.
static PATH: AtomicPtr<c_char> = AtomicPtr::new(core::ptr::null_mut());

/// The marker's descriptor: [`NOT_OPEN`], [`FAILED`] or the descriptor.
static FD: AtomicI32 = AtomicI32::new(NOT_OPEN);
const NOT_OPEN: i32 = -1;
const FAILED: i32 = -2;

/// The real functions (0: not found yet).
static REAL_SUBMIT: AtomicUsize = AtomicUsize::new(0);
static REAL_GETEVENTS: AtomicUsize = AtomicUsize::new(0);
static REAL_PGETEVENTS: AtomicUsize = AtomicUsize::new(0);

/// Sets the marker file of the session being started (`None`: no markers). The previous
/// path is leaked (a thread may hold it); the descriptor of an earlier one is kept.
pub fn set_marker(path: Option<CString>) {
    let p = path.map_or(core::ptr::null_mut(), CString::into_raw);
    // Relaxed: published with the session state's Release store.
    PATH.store(p, Ordering::Relaxed);
    if !p.is_null() {
        // Opened now, out of the way of the program's descriptors and system calls.
        open_marker();
    }
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

/// The next definition of `name` after libmcount's, found once (looked up again at each
/// call while there is none: libaio may be loaded later), the program's `errno` and
/// `dlerror` left as they were.
fn lookup(slot: &AtomicUsize, name: &CStr) -> usize {
    // Relaxed: any thread may look it up again; the answer is the same.
    match slot.load(Ordering::Relaxed) {
        0 => {
            // SAFETY: this thread's errno, valid as long as the thread.
            let errno = unsafe { *libc::__errno_location() };
            // SAFETY: NUL-terminated name; RTLD_NEXT is a valid pseudo-handle.
            let f = unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr()) } as usize;
            if f == 0 {
                // The program's next `dlerror` must not report our lookup.
                // SAFETY: no arguments; clears this thread's dlerror state.
                unsafe { libc::dlerror() };
            }
            // SAFETY: as above; the program's errno, as it was.
            unsafe { *libc::__errno_location() = errno };
            slot.store(f, Ordering::Relaxed);
            f
        }
        f => f,
    }
}

/// The marker's descriptor, opened at the first call; `None` when markers are off or it
/// cannot be opened.
fn marker_fd() -> Option<i32> {
    if !config::tracing() {
        return None;
    }
    match FD.load(Ordering::Relaxed) {
        FAILED => None,
        NOT_OPEN => open_marker(),
        fd => Some(fd),
    }
}

/// Opens the marker file once (a thread that loses the race uses the winner's descriptor).
fn open_marker() -> Option<i32> {
    let p = PATH.load(Ordering::Relaxed);
    if p.is_null() {
        return None;
    }
    // SAFETY: a non-null value is a CString leaked by `set_marker`, never freed.
    let path = unsafe { CStr::from_ptr(p) };
    let opened = sys::openat(libc::AT_FDCWD, path, libc::O_WRONLY | libc::O_CLOEXEC, 0);
    let fd = opened.ok().and_then(config::keep_fd).unwrap_or(FAILED);
    // Relaxed: the descriptor is only written through; a thread that lost the race closes
    // its own and uses the winner's.
    match FD.compare_exchange(NOT_OPEN, fd, Ordering::Relaxed, Ordering::Relaxed) {
        Ok(_) => (fd >= 0).then_some(fd),
        Err(theirs) => {
            if fd >= 0 {
                config::release_fd(fd);
            }
            (theirs >= 0).then_some(theirs)
        }
    }
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
        for k in 0..count {
            // SAFETY: the kernel has just read these `n` pointers and the iocbs they point
            // to (it submitted them): both are mapped and readable; `read_unaligned` as the
            // program may align them as it likes.
            let cb = unsafe {
                let ptr = ((iocbpp as *const usize).add(first + k)).read_unaligned();
                let raw = (ptr as *const [u8; aio::IOCB_READ]).read_unaligned();
                Iocb::from_struct(ptr as u64, &raw)
            };
            cb.encode(&mut out[k * aio::IOCB_SIZE..(k + 1) * aio::IOCB_SIZE]);
        }
    });
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
