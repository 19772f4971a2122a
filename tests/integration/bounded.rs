//! Running `utrace` on hostile input with a time limit and a memory limit, measuring its peak
//! memory: the child's address space is capped (`RLIMIT_AS`, set between fork and exec) so that
//! a runaway reader fails fast instead of taking the machine down. A child still running at the
//! deadline is killed (with its process group) and reported as hung.
//!
//! The peak resident set is measured by `/usr/bin/time` (package `time`), which forks the
//! command from its own small process: Linux counts into a process's `ru_maxrss` the resident
//! set of the memory it had before its `exec`, and a child forked from the test process (large,
//! with many tests running) would report that, not utrace's. Without `/usr/bin/time` the
//! child's own `ru_maxrss` from `wait4` is taken, an overestimate.

use std::io::Read;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// How one bounded run ended.
#[derive(Debug)]
pub struct Bounded {
    /// The command line, for messages.
    pub command: String,
    /// `None` when the child was killed at the deadline.
    pub status: Option<ExitStatus>,
    pub stdout: String,
    pub stderr: String,
    /// Peak resident set of the child, in KiB.
    pub max_rss_kib: u64,
    pub elapsed: Duration,
}

impl Bounded {
    pub fn hung(&self) -> bool {
        self.status.is_none()
    }

    /// Killed by a signal (a crash, or an abort when memory ran out).
    pub fn signal(&self) -> Option<i32> {
        self.status.and_then(|s| s.signal())
    }

    pub fn code(&self) -> Option<i32> {
        self.status.and_then(|s| s.code())
    }

    pub fn panicked(&self) -> bool {
        self.stderr.contains("panicked")
    }

    /// Ran out of the address space it was given.
    pub fn out_of_memory(&self) -> bool {
        self.stderr.contains("memory allocation of")
            || self.stderr.contains("out of memory")
            || self.stderr.contains("Cannot allocate memory")
    }
}

impl std::fmt::Display for Bounded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "$ {}", self.command)?;
        match self.status {
            Some(s) => writeln!(f, "--- status: {s}")?,
            None => writeln!(f, "--- hung: killed after {:?}", self.elapsed)?,
        }
        writeln!(f, "--- max rss: {} KiB", self.max_rss_kib)?;
        writeln!(f, "--- stdout:\n{}", self.stdout)?;
        write!(f, "--- stderr:\n{}", self.stderr)
    }
}

/// Runs `cmd` (stdin closed, output captured) with at most `as_limit` bytes of address space,
/// killing it after `time`.
pub fn run(mut cmd: Command, time: Duration, as_limit: u64) -> Bounded {
    let mut words = vec![cmd.get_program().to_string_lossy().into_owned()];
    words.extend(cmd.get_args().map(|a| a.to_string_lossy().into_owned()));
    let command = words.join(" ");
    let timer = std::path::Path::new(TIME);
    let report = tempfile::NamedTempFile::new().expect("temporary file");
    if timer.exists() {
        let mut wrapped = Command::new(timer);
        wrapped
            .arg("-f")
            .arg("%M")
            .arg("-o")
            .arg(report.path())
            .arg(cmd.get_program())
            .args(cmd.get_args());
        for (k, v) in cmd.get_envs() {
            match v {
                Some(v) => wrapped.env(k, v),
                None => wrapped.env_remove(k),
            };
        }
        if let Some(dir) = cmd.get_current_dir() {
            wrapped.current_dir(dir);
        }
        cmd = wrapped;
    }
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let limit = libc::rlimit {
        rlim_cur: as_limit,
        rlim_max: as_limit,
    };
    // SAFETY: the closure runs in the forked child before exec and only calls setrlimit and
    // setpgid, which are async-signal-safe, with a value copied into the closure; it allocates
    // nothing.
    unsafe {
        cmd.pre_exec(move || {
            if libc::setrlimit(libc::RLIMIT_AS, &limit) != 0 || libc::setpgid(0, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let start = Instant::now();
    // Reaped by `wait4` below, which also gives its peak memory.
    #[allow(clippy::zombie_processes)]
    let mut child = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run `{command}`: {e}"));
    let stdout = drain(child.stdout.take().expect("piped stdout"));
    let stderr = drain(child.stderr.take().expect("piped stderr"));
    let pid = child.id() as libc::pid_t;
    let mut killed = false;
    let (raw, usage) = loop {
        let mut raw = 0;
        // SAFETY: an all-zero rusage is a valid value of this plain C struct.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        let flags = if killed { 0 } else { libc::WNOHANG };
        // SAFETY: `pid` is our unreaped child; `raw` and `usage` are valid for writes. The
        // child is reaped here, never by `Child::wait`, which is not called on it.
        let r = unsafe { libc::wait4(pid, &mut raw, flags, &mut usage) };
        if r == pid {
            break (raw, usage);
        }
        assert!(
            r == 0,
            "wait4 `{command}`: {}",
            std::io::Error::last_os_error()
        );
        if start.elapsed() > time {
            // SAFETY: the child is not reaped yet, so `pid` still names it and its group.
            unsafe { libc::kill(-pid, libc::SIGKILL) };
            killed = true;
        } else {
            std::thread::sleep(Duration::from_millis(2));
        }
    };
    let elapsed = start.elapsed();
    let mut status = ExitStatus::from_raw(raw);
    let mut max_rss_kib = u64::try_from(usage.ru_maxrss).unwrap_or(0);
    if timer.exists() && !killed {
        // `time` exits with the command's status (128 + N for signal N) and writes "Command
        // terminated by signal N" or "... non-zero status N" before the peak, in KiB.
        let text = std::fs::read_to_string(report.path()).unwrap_or_default();
        let mut lines = text.lines().rev();
        if let Some(kib) = lines.next().and_then(|l| l.trim().parse().ok()) {
            max_rss_kib = kib;
        }
        if let Some(sig) = lines
            .next()
            .and_then(|l| l.strip_prefix("Command terminated by signal "))
            .and_then(|n| n.trim().parse::<i32>().ok())
        {
            status = ExitStatus::from_raw(sig);
        }
    }
    Bounded {
        command,
        status: (!killed).then_some(status),
        stdout: stdout.join().expect("stdout reader"),
        stderr: stderr.join().expect("stderr reader"),
        max_rss_kib,
        elapsed,
    }
}

/// GNU time, which measures the command's own peak memory.
const TIME: &str = "/usr/bin/time";

fn drain(mut pipe: impl Read + Send + 'static) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = pipe.read_to_end(&mut bytes);
        String::from_utf8_lossy(&bytes).into_owned()
    })
}
