//! The session's settings and run state, as the hooks and threads read them: set once by the
//! constructor (`session::init`, before it stores `STATE = ON` with Release), then only read,
//! except the recorder check and the kept descriptors. Nothing here calls back into the
//! modules that use it.

use crate::{filter, sys};
use core::ffi::c_char;
use core::sync::atomic::{
    AtomicBool, AtomicI32, AtomicPtr, AtomicU64, AtomicU8, AtomicUsize, Ordering,
};
use record_format::env;
use std::ffi::{CStr, CString};

pub(crate) const OFF: u8 = 0;
pub(crate) const ON: u8 = 1;
pub(crate) const FINISHED: u8 = 2;

/// OFF until the constructor has set everything below (Release), ON while tracing, FINISHED
/// after the destructor. Hooks load it with Acquire.
pub(crate) static STATE: AtomicU8 = AtomicU8::new(OFF);
/// Which fast path the entry trampolines take, in one byte instead of three tests: `STATE`
/// ON with neither recorded arguments (`args::ARGS_ON`) nor `-t` alone
/// (`filter::FAST_THRESHOLD`): [`PLAIN_ON`]; ON with arguments and no `-t`: [`PLAIN_ARGS`];
/// anything else 1 (the hooks test each). Written with `STATE` only ([`set_state`],
/// [`finish`]), after the other two were set.
pub(crate) static PLAIN: AtomicU8 = AtomicU8::new(1);
/// [`PLAIN`]: the session on, no arguments, no `-t`.
pub(crate) const PLAIN_ON: u8 = 0;
/// [`PLAIN`]: the session on, arguments recorded, no `-t`.
pub(crate) const PLAIN_ARGS: u8 = 2;
pub(crate) static DIRFD: AtomicI32 = AtomicI32::new(-1);
pub(crate) static WINDOW: AtomicUsize = AtomicUsize::new(env::DEFAULT_BUFFER);
pub(crate) static MAX_STACK: AtomicUsize = AtomicUsize::new(env::DEFAULT_MAX_STACK);
pub(crate) static DEPTH: AtomicUsize = AtomicUsize::new(usize::MAX);
pub(crate) static KEY: AtomicUsize = AtomicUsize::new(usize::MAX);
pub(crate) static SID: AtomicU64 = AtomicU64::new(0);
/// A pidfd of the recorder (`UTRACE_RECORDER`), -1 without one.
pub(crate) static RECORDER_FD: AtomicI32 = AtomicI32::new(-1);
/// Set once the recorder was seen gone.
pub(crate) static RECORDER_GONE: AtomicBool = AtomicBool::new(false);
/// `UTRACE_SLOW_PATH=1`: every thread takes the Rust handlers (see [`Config::slow`]).
pub(crate) static SLOW_PATH: AtomicBool = AtomicBool::new(false);
/// `-W cpu`: entries note the CPU the task runs on (on the slow path, see `thread::watch`).
pub(crate) static WATCH_CPU: AtomicBool = AtomicBool::new(false);

/// Lowest descriptor number for libmcount's descriptors, out of the way of the program's.
pub(crate) const HIGH_FD: i32 = 900;

/// Descriptors of the threads' data files (one bit per descriptor number below
/// `OWN_FDS * 64`), which the interposed `close` must not let the program close.
const OWN_FDS: usize = 1024;
static OWN_FD_BITS: [AtomicU64; OWN_FDS] = [const { AtomicU64::new(0) }; OWN_FDS];

/// Moves `fd` above the program's usual range and marks it as libmcount's; `None` (and `fd`
/// closed) when no number is free there: the caller then does without a kept descriptor.
pub fn keep_fd(fd: i32) -> Option<i32> {
    let high = sys::dup_cloexec_above(fd, HIGH_FD);
    sys::close(fd);
    let high = high.ok()?;
    match OWN_FD_BITS.get(high as usize / 64) {
        Some(word) => {
            word.fetch_or(1 << (high % 64), Ordering::Relaxed);
            Some(high)
        }
        None => {
            sys::close(high);
            None
        }
    }
}

/// Forgets a descriptor of [`keep_fd`] without closing it: one a `vfork` child opened in its
/// own descriptor table (while its bookkeeping, in the shared memory, marked it here).
pub fn forget_fd(fd: i32) {
    if let Some(word) = OWN_FD_BITS.get(fd as usize / 64) {
        word.fetch_and(!(1 << (fd % 64)), Ordering::Relaxed);
    }
}

/// Closes a descriptor of [`keep_fd`].
pub fn release_fd(fd: i32) {
    if let Some(word) = OWN_FD_BITS.get(fd as usize / 64) {
        word.fetch_and(!(1 << (fd % 64)), Ordering::Relaxed);
    }
    sys::close(fd);
}

/// What a thread needs to set itself up.
#[derive(Debug, Clone, Copy)]
pub struct Config {
    pub dirfd: i32,
    pub window: usize,
    pub max_stack: usize,
    /// `-D`: functions this deep or deeper are not hooked.
    pub depth: usize,
    /// Entries and exits need the full handler (record-time filters, or forced by
    /// `UTRACE_SLOW_PATH=1`).
    pub slow: bool,
}

/// Sets `STATE` (`ON` or `OFF`), and `PLAIN` with it: off first, on last.
pub(crate) fn set_state(state: u8) {
    if state != ON {
        PLAIN.store(1, Ordering::Release);
    }
    STATE.store(state, Ordering::Release);
    if state == ON && !filter::time_only() {
        let args = crate::args::ARGS_ON.load(Ordering::Relaxed) != 0;
        PLAIN.store(if args { PLAIN_ARGS } else { PLAIN_ON }, Ordering::Release);
        // A `finish` between the two stores (an attach racing the exit) must win: the plain
        // entry paths do not test `STATE` themselves.
        if STATE.load(Ordering::Acquire) != ON {
            PLAIN.store(1, Ordering::Release);
        }
    }
}

/// Moves `STATE` to `FINISHED` (`PLAIN` first); whether it was `ON`.
pub(crate) fn finish() -> bool {
    PLAIN.store(1, Ordering::Release);
    let was_on = STATE.swap(FINISHED, Ordering::AcqRel) == ON;
    // Again, after `STATE`: a `set_state(ON)` may have stored its value in between.
    PLAIN.store(1, Ordering::Release);
    was_on
}

/// Whether hooks may start new functions.
#[inline]
pub fn tracing() -> bool {
    STATE.load(Ordering::Acquire) == ON
}

/// Whether `-W cpu` is on.
#[inline]
pub fn watch_cpu() -> bool {
    WATCH_CPU.load(Ordering::Relaxed)
}

/// The configuration while tracing.
pub fn config() -> Option<Config> {
    tracing().then(|| Config {
        dirfd: DIRFD.load(Ordering::Relaxed),
        window: WINDOW.load(Ordering::Relaxed),
        max_stack: MAX_STACK.load(Ordering::Relaxed),
        depth: DEPTH.load(Ordering::Relaxed),
        slow: (filter::get().is_some() && !filter::time_only())
            || SLOW_PATH.load(Ordering::Relaxed)
            || WATCH_CPU.load(Ordering::Relaxed),
    })
}

/// Name prefix of the threads' shared rings (`UTRACE_RING`), if the recorder set one: a
/// leaked `CString` (one per session; an attached process can see several), null without.
static RING_PREFIX: AtomicPtr<c_char> = AtomicPtr::new(core::ptr::null_mut());

/// Sets the ring prefix of the session being started (before `STATE = ON`, whose Release
/// store publishes it). The previous one is leaked: a thread may still hold it.
pub(crate) fn set_ring_prefix(prefix: Option<CString>) {
    let p = prefix.map_or(core::ptr::null_mut(), |c| c.into_raw());
    RING_PREFIX.store(p, Ordering::Relaxed);
}

/// The ring prefix for `DatWriter`s.
pub fn ring_prefix() -> Option<&'static CStr> {
    let p = RING_PREFIX.load(Ordering::Relaxed);
    // SAFETY: a non-null value is a CString leaked by `set_ring_prefix`, never freed.
    (!p.is_null()).then(|| unsafe { CStr::from_ptr(p) })
}

/// The session id (in `SESS` lines and map names).
pub fn sid() -> u64 {
    SID.load(Ordering::Relaxed)
}

/// Calls `f` with each of libmcount's descriptors in `first..=last` ([`is_own_fd`]), in
/// increasing order.
pub fn each_own_fd(first: u32, last: u32, mut f: impl FnMut(u32)) {
    let specials = [
        DIRFD.load(Ordering::Relaxed),
        RECORDER_FD.load(Ordering::Relaxed),
    ];
    let limit = last.min((OWN_FDS * 64 - 1) as u32);
    let mut fd = first;
    while fd <= limit {
        let w = fd as usize / 64;
        let mut bits = OWN_FD_BITS[w].load(Ordering::Relaxed);
        if tracing() {
            for s in specials.iter().filter(|&&s| s >= 0 && s as usize / 64 == w) {
                bits |= 1 << (s % 64);
            }
        }
        // The bits from `fd` to the end of its word (and no further than `limit`).
        bits &= u64::MAX << (fd % 64);
        while bits != 0 {
            let found = (w * 64) as u32 + bits.trailing_zeros();
            if found > limit {
                return;
            }
            f(found);
            bits &= bits - 1;
        }
        fd = (w as u32 + 1) * 64;
    }
}

/// Whether `fd` is one of libmcount's descriptors (data directory, recorder pidfd, data files).
pub fn is_own_fd(fd: i32) -> bool {
    let kept = OWN_FD_BITS
        .get(fd as usize / 64)
        .is_some_and(|w| w.load(Ordering::Relaxed) & (1 << (fd % 64)) != 0);
    kept || (tracing()
        && (DIRFD.load(Ordering::Relaxed) == fd || RECORDER_FD.load(Ordering::Relaxed) == fd))
}

/// Whether the recorder that started this session has ended (killed, most likely): then no
/// one will move the rings into the data files or finish the directory, so every thread
/// writes what it holds and records nothing more. Cold path: one `poll` per call until the
/// recorder is seen gone.
pub fn recorder_gone() -> bool {
    if RECORDER_GONE.load(Ordering::Relaxed) {
        return true;
    }
    let fd = RECORDER_FD.load(Ordering::Relaxed);
    if fd >= 0 && sys::readable(fd) {
        if !RECORDER_GONE.swap(true, Ordering::Relaxed) {
            crate::log::error(b"the recorder has ended: recording stops", 0);
        }
        return true;
    }
    false
}

/// Hands the thread's state to the `pthread` key so its destructor runs at thread exit.
pub fn register_thread(td: usize) {
    let key = KEY.load(Ordering::Relaxed);
    if key != usize::MAX {
        // SAFETY: `key` was created by pthread_key_create in the constructor.
        unsafe { libc::pthread_setspecific(key as libc::pthread_key_t, td as *const libc::c_void) };
    }
}
