//! `--keep-pid`: the traced program runs in the process that started `utrace` (same pid, same
//! parent: the shell waits for the program itself), and the recording is done by a process
//! forked off it.
//!
//! [`split`] forks twice (the recorder is then no child of the program, which could otherwise
//! reap it with a `wait()` of its own); the original process waits on a socket for the
//! recorder's `go <pid>`, sent once the recorder has started its guardian and writer thread,
//! then execs the program with the recorder's pid in `UTRACE_RECORDER` and its end of the
//! socket in `UTRACE_KEEP_PID`. If the recorder fails before, the original process exits
//! with status 1 after it has printed why.
//!
//! The program is not the recorder's child, so [`KeptPid::run`] watches a pidfd of it and its
//! socket: libmcount's destructor sends `exit <status>` from the end of `exit()` and then
//! waits until the socket is closed, which happens when the recorder process (and its
//! guardian) have finished: the data directory is complete (and `live` has printed the
//! replay) before the shell gets the program's exit status. A program that ends otherwise
//! (killed by a signal, `_exit`) is seen through the pidfd, with its wait status from
//! `PIDFD_GET_INFO` once its parent has reaped it (Linux 6.15+; -1 "unknown" before, or if it
//! is not reaped within two seconds); its data is then finished just after the shell got
//! control back. Descendants that outlive the program are not waited for (the
//! recorder is no subreaper of theirs), and `info` has the CPU times and peak memory of the
//! program's process only (read from `/proc` while it waits in `exit()`), no other usage.

use anyhow::Context;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, IntoRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use super::launch::{Ended, Launch};

/// The program, seen from the recorder.
pub struct KeptPid {
    /// Its pid (the one `utrace` was started with).
    pid: libc::pid_t,
    pidfd: OwnedFd,
    socket: UnixStream,
}

/// Forks the recorder; returns in the recorder. In this process, waits for the recorder's go
/// and execs the program: never returns there. Call it while this process has one thread.
pub fn split(launch: &Launch<'_>) -> anyhow::Result<KeptPid> {
    let (ours, theirs) = UnixStream::pair().context("cannot create a socket")?;
    let pid = std::process::id() as libc::pid_t;
    // SAFETY: this process has a single thread (the caller's promise): the children continue
    // with consistent memory.
    match unsafe { libc::fork() } {
        -1 => Err(std::io::Error::last_os_error()).context("cannot fork the recorder"),
        0 => {
            // SAFETY: as above; the intermediate child exits at once, so the recorder is
            // re-parented away from the program.
            match unsafe { libc::fork() } {
                0 => {
                    drop(theirs);
                    let pidfd = pidfd_open(pid).context("cannot watch the program")?;
                    Ok(KeptPid {
                        pid,
                        pidfd,
                        socket: ours,
                    })
                }
                // SAFETY: _exit ends the intermediate process without running anything.
                _ => unsafe { libc::_exit(0) },
            }
        }
        child => {
            drop(ours);
            let mut status = 0;
            // SAFETY: `child` is this process's child; `status` is a valid out-pointer.
            unsafe { libc::waitpid(child, &mut status, 0) };
            become_program(launch, theirs)
        }
    }
}

/// The original process: waits for the recorder, then execs the program.
fn become_program(launch: &Launch<'_>, mut socket: UnixStream) -> ! {
    let mut line = Vec::new();
    let mut byte = [0u8; 1];
    while line.last() != Some(&b'\n') {
        match socket.read(&mut byte) {
            Ok(1) => line.push(byte[0]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            // The recorder failed (and said why).
            _ => std::process::exit(1),
        }
    }
    let recorder = String::from_utf8_lossy(&line)
        .trim()
        .strip_prefix("go ")
        .unwrap_or("")
        .to_string();
    let fd = socket.into_raw_fd();
    // SAFETY: fcntl on the descriptor just taken from the socket; clears FD_CLOEXEC only, so
    // that libmcount in the program finds it.
    unsafe { libc::fcntl(fd, libc::F_SETFD, 0) };
    let mut cmd = launch.command();
    cmd.env(record_format::env::RECORDER, recorder);
    cmd.env(
        record_format::env::KEEP_PID,
        format!("{}:{fd}", std::process::id()),
    );
    let err = cmd.exec();
    eprintln!("utrace: cannot run '{}': {err}", launch.exe.display());
    std::process::exit(1)
}

fn pidfd_open(pid: libc::pid_t) -> std::io::Result<OwnedFd> {
    // SAFETY: pidfd_open takes a pid and flags; it returns a new descriptor or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a fresh descriptor owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

/// Set by SIGINT, SIGTERM, SIGHUP or SIGQUIT to the recorder.
static STOPPED: AtomicBool = AtomicBool::new(false);

extern "C" fn stop_signal(_: libc::c_int) {
    STOPPED.store(true, Ordering::Relaxed);
}

impl KeptPid {
    /// The program's pid.
    pub fn pid(&self) -> libc::pid_t {
        self.pid
    }

    /// Lets the program start and waits for its end (see the module).
    pub fn run(self) -> anyhow::Result<Ended> {
        let KeptPid {
            pid,
            pidfd,
            mut socket,
        } = self;
        let signals = super::launch::StopSignals::install(stop_signal);
        // SAFETY: time(NULL) only returns the current time.
        let started_at = unsafe { libc::time(std::ptr::null_mut()) };
        let start = Instant::now();
        socket
            .write_all(format!("go {}\n", std::process::id()).as_bytes())
            .context("cannot start the program")?;
        let waited = wait(pid, &pidfd, &mut socket);
        drop(signals);
        let (raw_status, usage) = waited?;
        // Closed when this process ends: the program's exit waits for it (see the module).
        let _ = socket.into_raw_fd();
        Ok(Ended {
            raw_status,
            usage,
            elapsed_ns: u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX),
            started_at,
            stopped: STOPPED.load(Ordering::Relaxed),
        })
    }
}

/// Waits for `exit <status>` on the socket or the end of the process; returns a wait status
/// and what is known of the process's resource usage.
fn wait(
    pid: libc::pid_t,
    pidfd: &OwnedFd,
    socket: &mut UnixStream,
) -> anyhow::Result<(i32, libc::rusage)> {
    let mut text = Vec::new();
    let mut open = true;
    let mut killed = false;
    loop {
        if STOPPED.load(Ordering::Relaxed) && !killed {
            killed = true;
            // SAFETY: pidfd_send_signal on our pidfd of the program (no pid reuse possible).
            unsafe {
                libc::syscall(
                    libc::SYS_pidfd_send_signal,
                    pidfd.as_raw_fd(),
                    libc::SIGKILL,
                    std::ptr::null::<libc::siginfo_t>(),
                    0,
                )
            };
        }
        let mut fds = [
            libc::pollfd {
                fd: pidfd.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: if open { socket.as_raw_fd() } else { -1 },
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        // SAFETY: `fds` is a valid array of two pollfd structs.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), 2, -1) };
        if n < 0 {
            let err = std::io::Error::last_os_error();
            if err.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(err).context("waiting for the traced program failed");
        }
        if fds[1].revents != 0 {
            let mut buf = [0u8; 64];
            match socket.read(&mut buf) {
                Ok(0) | Err(_) => open = false,
                Ok(k) => text.extend_from_slice(&buf[..k]),
            }
            if let Some(status) = exit_line(&text) {
                // The process waits in exit(): its times are final.
                return Ok(((status & 0xff) << 8, usage_of(pid)));
            }
        }
        if fds[0].revents != 0 {
            // The kernel keeps the status once the parent (the shell) has reaped the process,
            // which it does at once; two seconds at most.
            let status = (0..400).find_map(|_| {
                exit_status(pidfd).or_else(|| {
                    std::thread::sleep(std::time::Duration::from_millis(5));
                    None
                })
            });
            let status = status.unwrap_or_else(|| {
                super::debug(format!("the exit status of {pid} is unknown"));
                -1
            });
            // SAFETY: rusage is plain data; all-zero is valid.
            return Ok((status, unsafe { std::mem::zeroed() }));
        }
    }
}

/// The CPU times and peak memory of the living process `pid` (from `/proc`), in the
/// `rusage` fields `info` reports; zero where unknown.
fn usage_of(pid: libc::pid_t) -> libc::rusage {
    // SAFETY: rusage is plain data; all-zero is valid.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1);
    if let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // `pid (comm) state ...`: utime and stime are fields 14 and 15, the 12th and 13th
        // after the comm.
        let fields: Vec<&str> = stat
            .rsplit_once(')')
            .map_or(Vec::new(), |(_, rest)| rest.split_whitespace().collect());
        let ticks = |i: usize| {
            fields
                .get(i)
                .and_then(|f| f.parse::<i64>().ok())
                .unwrap_or(0)
        };
        let tv = |t: i64| libc::timeval {
            tv_sec: t / hz,
            tv_usec: (t % hz) * 1_000_000 / hz,
        };
        usage.ru_utime = tv(ticks(11));
        usage.ru_stime = tv(ticks(12));
    }
    if let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) {
        usage.ru_maxrss = status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or(0);
    }
    usage
}

/// The status of a complete `exit <status>` line.
fn exit_line(text: &[u8]) -> Option<i32> {
    let text = std::str::from_utf8(text).ok()?;
    let (line, _) = text.split_once('\n')?;
    line.strip_prefix("exit ")?.trim().parse().ok()
}

/// The wait status of the ended process of `pidfd` (`PIDFD_GET_INFO` with
/// `PIDFD_INFO_EXIT`, Linux 6.15+).
fn exit_status(pidfd: &OwnedFd) -> Option<i32> {
    /// `struct pidfd_info`, its first version (64 bytes).
    #[repr(C)]
    struct PidfdInfo {
        mask: u64,
        cgroupid: u64,
        ids: [u32; 11],
        exit_code: i32,
    }
    const PIDFD_INFO_EXIT: u64 = 1 << 3;
    // _IOWR(0xFF, 11, struct pidfd_info): direction 3, size 64, type 0xFF, number 11.
    const PIDFD_GET_INFO: libc::c_ulong =
        (3 << 30) | ((size_of::<PidfdInfo>() as libc::c_ulong) << 16) | (0xff << 8) | 11;
    let mut info = PidfdInfo {
        mask: PIDFD_INFO_EXIT,
        cgroupid: 0,
        ids: [0; 11],
        exit_code: 0,
    };
    // SAFETY: the ioctl fills at most `size_of::<PidfdInfo>()` bytes of `info`.
    let r = unsafe { libc::ioctl(pidfd.as_raw_fd(), PIDFD_GET_INFO, &mut info) };
    (r == 0 && info.mask & PIDFD_INFO_EXIT != 0).then_some(info.exit_code)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_lines() {
        assert_eq!(exit_line(b"exit 3\n"), Some(3));
        assert_eq!(exit_line(b"exit 3"), None);
        assert_eq!(exit_line(b"go\n"), None);
    }

    #[test]
    fn exit_status_of_an_ended_child() {
        let child = std::process::Command::new("sh")
            .args(["-c", "exit 5"])
            .spawn()
            .unwrap();
        let pidfd = pidfd_open(child.id() as libc::pid_t).unwrap();
        let status = child.wait_with_output().unwrap().status;
        assert_eq!(status.code(), Some(5));
        // Kernels before 6.15 cannot tell.
        if let Some(raw) = exit_status(&pidfd) {
            assert_eq!(raw, 5 << 8);
        }
    }
}
