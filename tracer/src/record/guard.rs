//! The recorder's guardian: a small process that outlives a recorder killed with SIGKILL (or
//! ended by any error) and leaves the data directory as a finished recording would: the rings
//! in `/dev/shm` moved into the data files and removed, the `.sym` files and `info` written,
//! `live`'s temporary directory removed.
//!
//! It is forked before the traced program starts, while the recorder has no other thread (but
//! `-S`'s script thread, which waits for the first records then, holding no lock), and
//! forked again so that it is no child of the recorder (whose `waitpid(-1)` waits for the
//! traced process tree only). It leaves the terminal's session, so a Ctrl-C reaches the
//! recorder and the program, not it. It reads a pipe: lines the recorder [`Guardian::send`]s
//! as the recording goes (what undoes the kernel tracing, `-k`), then a line `done` when the
//! recording is complete, and the guardian exits; end of file without that line means the
//! recorder is gone, and the guardian runs the clean-up it was given (with a copy of the
//! recorder's memory as it was at the fork, and the lines it was sent) and exits. The traced threads notice the
//! recorder's end themselves (libmcount polls a pidfd of it) and stop recording.

use anyhow::Context;
use std::io::{Read, Write};
use std::os::fd::{FromRawFd, OwnedFd};

/// The line that says the recording was completed by the recorder.
const DONE: &str = "done";

pub struct Guardian {
    /// The write end of the pipe the guardian waits on.
    pipe: Option<std::fs::File>,
    /// The intermediate child (which forks the guardian and exits) until it is reaped.
    intermediate: Option<libc::pid_t>,
}

impl Guardian {
    /// Forks the guardian, which runs `orphaned` with the text it was sent if this process
    /// ends before [`Guardian::done`]. Call it only while this process has a single thread.
    pub fn start(orphaned: impl FnOnce(&str)) -> anyhow::Result<Guardian> {
        let mut fds = [0; 2];
        // SAFETY: `fds` is a valid array of two ints for pipe2 to fill.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return Err(std::io::Error::last_os_error()).context("cannot create a pipe");
        }
        // SAFETY: pipe2 succeeded: both descriptors are open and owned by nobody else.
        let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        // SAFETY: this process has a single thread (the caller's promise), so the child
        // continues with consistent memory; it calls only `guardian_main`, which ends in _exit.
        match unsafe { libc::fork() } {
            -1 => Err(std::io::Error::last_os_error()).context("cannot start the guardian"),
            0 => {
                drop(write);
                // SAFETY: as above; the intermediate child exits at once, so the guardian is
                // re-parented away from the recorder.
                match unsafe { libc::fork() } {
                    0 => guardian_main(read, orphaned),
                    // SAFETY: _exit ends this intermediate process without running anything.
                    _ => unsafe { libc::_exit(0) },
                }
            }
            // Not waited for here: it is reaped by [`Guardian::settle`], by which time it has
            // most likely ended, so that the recorder does not wait for it to be scheduled.
            child => {
                drop(read);
                Ok(Guardian {
                    pipe: Some(std::fs::File::from(write)),
                    intermediate: Some(child),
                })
            }
        }
    }

    /// Reaps the intermediate child: it has forked the guardian and ended, so the guardian is
    /// no child of this process. Call it before this process becomes a child subreaper (an
    /// orphaned guardian would be re-parented to it) and before waiting for any child.
    pub fn settle(&mut self) {
        if let Some(child) = self.intermediate.take() {
            let mut status = 0;
            // SAFETY: `child` is this process's child, not reaped yet; `status` is a valid
            // out-pointer.
            unsafe { libc::waitpid(child, &mut status, 0) };
        }
    }

    /// Hands the guardian whole lines of text for its clean-up.
    pub fn send(&mut self, lines: &str) {
        if let Some(pipe) = self.pipe.as_mut() {
            let _ = pipe.write_all(lines.as_bytes());
        }
    }

    /// The recording is complete: the guardian exits without doing anything.
    pub fn done(mut self) {
        self.send(&format!("{DONE}\n"));
        self.pipe = None;
        self.settle();
    }
}

impl Drop for Guardian {
    fn drop(&mut self) {
        self.settle();
    }
}

/// The guardian process: waits for the recorder's word or its end.
fn guardian_main(read: OwnedFd, orphaned: impl FnOnce(&str)) -> ! {
    // SAFETY: setsid and signal only change this process's session and dispositions; the
    // guardian runs no handler, so ignoring is all it needs.
    unsafe {
        libc::setsid();
        for sig in [
            libc::SIGINT,
            libc::SIGQUIT,
            libc::SIGHUP,
            libc::SIGTSTP,
            libc::SIGPIPE,
        ] {
            libc::signal(sig, libc::SIG_IGN);
        }
    }
    // Nothing may keep the recorder's standard output open (a pipe reader waits for its end).
    if let Ok(null) = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/null")
    {
        use std::os::fd::AsRawFd;
        // SAFETY: dup2 onto the standard descriptors of this process only.
        unsafe {
            libc::dup2(null.as_raw_fd(), 0);
            libc::dup2(null.as_raw_fd(), 1);
        }
    }
    let mut pipe = std::fs::File::from(read);
    let mut text = Vec::new();
    // Until end of file: the recorder's end (or its `done`) closes the pipe.
    let _ = pipe.read_to_end(&mut text);
    let text = String::from_utf8_lossy(&text);
    if !text.lines().any(|l| l == DONE) {
        orphaned(&text);
    }
    // SAFETY: _exit ends the process without running the recorder's exit handlers.
    unsafe { libc::_exit(0) }
}
