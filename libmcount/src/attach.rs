//! Sessions of a running process (`utrace record -p PID`): the recorder stops every thread of
//! the process with ptrace, makes one of them `dlopen` libmcount (no constructor session: the
//! process has no `UTRACE_DIR`) and call [`utrace_attach`] with the path of the settings file
//! it wrote (`record_format::env::ATTACH_FILE`); later, with the threads stopped again, it
//! calls [`utrace_detach`]. Both run on a thread that the recorder diverted between two of
//! its instructions, outside libmcount's code; every other thread is stopped outside it too
//! (the recorder checks their `rip`), so the thread states can be marked without races.
//!
//! Thread states are created lazily by each thread's first hook, for threads that existed at
//! attach time as for later ones. The thread pointer word is an initial-exec TLS object, which
//! a `dlopen`ed library can use only if glibc's static TLS surplus has room for it (glibc
//! reserves some for this: 8 bytes fit; a `dlopen` that fails says "cannot allocate memory in
//! static TLS block", and the recorder reports it).
//!
//! A detach stops the session (`STATE` off: no new entries), unpatches, and marks every state
//! stale (`thread::block::STALE`): each thread drops its writer at its next hook without
//! writing (the recorder salvages the rings), and its hijacked frames still return through the
//! exit trampoline, which works in any state and stays mapped (libmcount is never unloaded).
//! A second attach starts a new session: the stale states join it at their next hook, their
//! old frames marked not to be recorded.

use crate::config::{self, ON, STATE};
use crate::{lifecycle, session};
use core::ffi::{c_char, CStr};
use core::sync::atomic::Ordering;
use record_format::env;
use std::sync::OnceLock;

/// Starts a session with the settings in the file at `path`. Returns 0, or a negative errno
/// (`-EBUSY`: a session is on already; `-EEXIST`: an earlier session had other filters,
/// triggers, argument specs or patterns, see [`FIXED`]).
///
/// # Safety
/// `path` must be a NUL-terminated string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn utrace_attach(path: *const c_char) -> i32 {
    if path.is_null() {
        return -libc::EINVAL;
    }
    if STATE.load(Ordering::Acquire) == ON {
        return -libc::EBUSY;
    }
    // SAFETY: the caller passes a NUL-terminated string.
    let path = unsafe { CStr::from_ptr(path) };
    use std::os::unix::ffi::OsStrExt;
    let bytes = match std::fs::read(std::ffi::OsStr::from_bytes(path.to_bytes())) {
        Ok(b) => b,
        Err(e) => return -e.raw_os_error().unwrap_or(libc::EIO),
    };
    crate::wrap::init();
    let src = session::Source::from_file(&bytes);
    if !same_settings(&src) {
        return -libc::EEXIST;
    }
    // The process's stderr is its own: diagnostics go there only when the recorder asked
    // for them (`-v`), or to the descriptor it named; else nowhere (the recorder reports).
    let logfd = src
        .var(record_format::env::LOGFD)
        .and_then(|v| v.parse::<i32>().ok());
    let verbose = src
        .var(record_format::env::DEBUG)
        .and_then(|v| v.trim().parse::<i32>().ok())
        .is_some_and(|l| l > 0);
    crate::log::LOGFD.store(
        logfd.unwrap_or(if verbose { 2 } else { -1 }),
        Ordering::Relaxed,
    );
    // States of an earlier session move to this one at their next hook.
    lifecycle::mark_stale();
    let old_dir = config::DIRFD.swap(-1, Ordering::Relaxed);
    if old_dir >= 0 {
        crate::sys::close(old_dir);
    }
    let old_recorder = config::RECORDER_FD.swap(-1, Ordering::Relaxed);
    if old_recorder >= 0 {
        crate::sys::close(old_recorder);
    }
    // The session patches what `-P` selects, away from the stopped threads' addresses.
    if let Err(e) = session::start(&src) {
        return -e;
    }
    // Throws and stack walks through hijacked frames (no interposition by precedence here).
    crate::unwind_got::redirect();
    // Fatal signals still at their default action; the program's own handlers are kept.
    crate::crash::install();
    0
}

/// The settings that the first session fixes for the process's lifetime: the filter and
/// trigger table, the argument specs and the `-P`/`-U` patterns are built once (`OnceLock`s)
/// and the PLT hooks' nesting is chosen once.
const FIXED: [&str; 13] = [
    env::TRIGGER,
    env::DEPTH,
    env::PATTERN,
    env::THRESHOLD,
    env::SIZE,
    env::TRACE_OFF,
    env::SIGNAL,
    env::ARGSPEC,
    env::RETSPEC,
    env::AUTO_ARGS,
    env::PATCH,
    env::NEST_LIBCALL,
    env::PLTHOOK,
];

/// Whether `src` has the [`FIXED`] settings of the first attach (true for the first one),
/// which a later session cannot change: it would run with the first one's (`-EEXIST`).
fn same_settings(src: &session::Source) -> bool {
    static FIRST: OnceLock<Vec<Option<std::ffi::OsString>>> = OnceLock::new();
    let these: Vec<_> = FIXED.iter().map(|k| src.var_os(k)).collect();
    *FIRST.get_or_init(|| these.clone()) == these
}

/// Ends the session started by [`utrace_attach`]: no thread writes anymore after it (what
/// their rings hold is the recorder's to salvage). Returns 0, or `-EINVAL` without a session.
#[unsafe(no_mangle)]
pub extern "C" fn utrace_detach() -> i32 {
    if STATE.load(Ordering::Acquire) != ON {
        return -libc::EINVAL;
    }
    crate::dlopen::scan();
    // Pairs with the Acquire loads in the hooks: no new entry from here on.
    config::set_state(config::OFF);
    // Trampolines and moved code stay mapped for frames still on the stacks.
    crate::patch::revert_all();
    if let Some(p) = crate::plt::get() {
        p.set_hooked(false);
    }
    lifecycle::mark_stale();
    // The calling thread drops its writer now.
    let _ = lifecycle::existing();
    0
}
