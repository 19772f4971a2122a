//! libmcount's one-line diagnostics, written with a raw `write` to the log descriptor (stderr,
//! or `UTRACE_LOGFD`, which the session constructor stores in [`LOGFD`]).

use crate::{sys, tasklog};
use core::sync::atomic::{AtomicI32, Ordering};

/// Where diagnostics go.
pub(crate) static LOGFD: AtomicI32 = AtomicI32::new(2);

/// The debug level (`UTRACE_DEBUG`, set by the recorder's `-v`): 0, no debug lines.
pub(crate) static DEBUG: AtomicI32 = AtomicI32::new(0);

/// Writes the debug line `<domain>: <parts...>` when the debug level is at least `level`
/// (the recorder's `-v` count for the `mcount` domain), as uftrace's runtime prints its steps.
pub(crate) fn debug(level: i32, domain: &[u8], parts: &[&[u8]]) {
    if DEBUG.load(Ordering::Relaxed) < level {
        return;
    }
    let mut line = tasklog::LineBuf::<512>::new();
    line.push_bytes(domain);
    line.push_bytes(b": ");
    for p in parts {
        line.push_bytes(p);
    }
    line.push(b'\n');
    raw(line.as_bytes());
}

/// Writes `utrace: <msg> (errno N)` to the log descriptor (stderr unless `UTRACE_LOGFD`).
pub(crate) fn error(msg: &[u8], errno: i32) {
    let mut line = tasklog::LineBuf::<256>::new();
    line.push_bytes(b"utrace: ");
    line.push_bytes(msg);
    if errno != 0 {
        line.push_bytes(b" (errno ");
        line.push_dec(errno as u64);
        line.push(b')');
    }
    line.push(b'\n');
    raw(line.as_bytes());
}

/// Writes `bytes` as they are to the log descriptor.
pub(crate) fn raw(bytes: &[u8]) {
    let fd = LOGFD.load(Ordering::Relaxed);
    let _ = sys::write(fd, bytes);
}

/// Logs and aborts: used only where continuing is impossible.
pub(crate) fn fatal(msg: &[u8]) -> ! {
    error(msg, 0);
    // SAFETY: abort has no preconditions.
    unsafe { libc::abort() }
}
