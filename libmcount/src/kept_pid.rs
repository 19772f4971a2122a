//! `--keep-pid`: the program runs in the process that started `utrace record` (its pid kept),
//! and the recorder is no parent that could wait for it. The recorder passes a socket
//! (`UTRACE_KEEP_PID=<pid>:<fd>`); in that process (not in its forks), an `on_exit` handler
//! registered by the constructor writes `exit <status>` to the recorder and waits until the
//! socket is closed. Registered before `__libc_start_main` registers the dynamic loader's
//! destructor pass, it runs after every destructor (libmcount's included): last. So the
//! recorder has finished the data directory (and `live` its output). So the shell that waits
//! for the program gets control back only with the data complete, and the program's exit
//! status is the one recorded. A process that ends otherwise (a signal, `_exit`) is seen by
//! the recorder through a pidfd; its data is then finished after the shell got control.

use crate::{config, sys};
use core::sync::atomic::{AtomicI32, Ordering};

/// The socket to the recorder (-1: none, or not in the program's own process).
static SOCKET: AtomicI32 = AtomicI32::new(-1);
/// The process the socket is for.
static PID: AtomicI32 = AtomicI32::new(0);

unsafe extern "C" {
    /// glibc's `on_exit`: `f(status, arg)` runs from `exit()`, before the destructors.
    fn on_exit(
        f: extern "C" fn(libc::c_int, *mut libc::c_void),
        arg: *mut libc::c_void,
    ) -> libc::c_int;
}

/// Takes the socket of `UTRACE_KEEP_PID` when this is the program's own process (constructor).
pub fn init() {
    let Ok(value) = std::env::var(record_format::env::KEEP_PID) else {
        return;
    };
    let Some((pid, fd)) = value
        .split_once(':')
        .and_then(|(p, f)| Some((p.parse::<i32>().ok()?, f.parse::<i32>().ok()?)))
    else {
        return;
    };
    if pid != sys::getpid() || fd < 0 {
        return;
    }
    let Some(fd) = config::keep_fd(fd) else {
        return;
    };
    // An image this process execs takes the socket over: it stays open across exec, at the
    // number the variable now says.
    // SAFETY: fcntl on a descriptor libmcount owns; clears FD_CLOEXEC only.
    unsafe { libc::fcntl(fd, libc::F_SETFD, 0) };
    let name = std::ffi::CString::new(record_format::env::KEEP_PID);
    if let (Ok(name), Ok(v)) = (name, std::ffi::CString::new(format!("{pid}:{fd}"))) {
        // SAFETY: the constructor runs before the program's threads; both strings are
        // NUL-terminated and copied by setenv.
        unsafe { libc::setenv(name.as_ptr(), v.as_ptr(), 1) };
    }
    // SAFETY: `at_exit` has the handler signature and lives as long as the process.
    if unsafe { on_exit(at_exit, core::ptr::null_mut()) } != 0 {
        config::release_fd(fd);
        return;
    }
    PID.store(pid, Ordering::Relaxed);
    SOCKET.store(fd, Ordering::Relaxed);
}

/// At the end of `exit(status)` in the program's own process: tells the recorder the status
/// and waits until it is done.
extern "C" fn at_exit(status: libc::c_int, _: *mut libc::c_void) {
    let fd = SOCKET.swap(-1, Ordering::Relaxed);
    if fd < 0 || PID.load(Ordering::Relaxed) != sys::getpid() {
        return;
    }
    let mut line = crate::tasklog::LineBuf::<32>::new();
    line.push_bytes(b"exit ");
    line.push_dec(status as u32 as u64);
    line.push(b'\n');
    let bytes = line.as_bytes();
    // MSG_NOSIGNAL: a recorder gone (killed, its guardian done) must not kill the program
    // with SIGPIPE.
    // SAFETY: `bytes` is valid for its length; send reads it only.
    let sent = unsafe {
        libc::send(
            fd,
            bytes.as_ptr() as *const libc::c_void,
            bytes.len(),
            libc::MSG_NOSIGNAL,
        )
    };
    if sent > 0 {
        let mut buf = [0u8; 64];
        // Until end of file (or an error): the recorder and its guardian have closed it.
        loop {
            match sys::read(fd, &mut buf) {
                Ok(0) => break,
                Ok(_) | Err(libc::EINTR) => {}
                Err(_) => break,
            }
        }
    }
    config::release_fd(fd);
}
