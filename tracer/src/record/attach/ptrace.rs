//! Holding every thread of a running process still with ptrace, without the process ever
//! seeing it: `PTRACE_SEIZE` (never `PTRACE_ATTACH`, which sends a `SIGSTOP`) and
//! `PTRACE_INTERRUPT` for each thread in `/proc/PID/task`, rescanned until no new thread
//! appears (every thread that could create one is stopped). A signal that arrives meanwhile
//! stops its thread in a signal-delivery-stop: it is kept (with its `siginfo`) and suppressed
//! for as long as the thread is traced, and sent again just before the thread is let go, never
//! dropped and never re-sent while traced (it would only stop the thread again).

use anyhow::{bail, Context};
use std::collections::BTreeMap;

/// One stopped thread.
#[derive(Default)]
struct Thread {
    /// The signals that stopped the thread while traced, in order, delivered at the detach.
    pending: Vec<libc::siginfo_t>,
}

/// The stopped threads of one process.
pub struct Stopped {
    pub pid: i32,
    threads: BTreeMap<i32, Thread>,
    /// Threads that have ended but are still listed (a main thread after `pthread_exit`).
    ended: Vec<i32>,
}

/// `ptrace(req, tid, addr, data)` as a `Result`.
pub fn ptrace(req: libc::c_uint, tid: i32, addr: usize, data: usize) -> std::io::Result<i64> {
    // SAFETY: the requests used here read or write only the buffers whose addresses the
    // callers pass in `addr`/`data`, which are valid for the sizes those requests use.
    let r = unsafe { libc::ptrace(req, tid, addr, data) };
    match r {
        -1 => Err(std::io::Error::last_os_error()),
        r => Ok(r),
    }
}

/// The threads of `pid` now.
fn task_ids(pid: i32) -> std::io::Result<Vec<i32>> {
    let mut tids: Vec<i32> = std::fs::read_dir(format!("/proc/{pid}/task"))?
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .collect();
    tids.sort_unstable();
    Ok(tids)
}

/// Whether thread `tid` of `pid` has ended (gone, or a zombie).
pub fn ended(pid: i32, tid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/stat")) {
        // `tid (comm) S ...`: the state follows the last parenthesis.
        Ok(stat) => stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_some_and(|state| matches!(state, "Z" | "X" | "x")),
        Err(_) => true,
    }
}

/// The `/proc` directory that shows process `pid`'s memory and executable: `/proc/PID`, or,
/// once its main thread has called `pthread_exit` (a zombie whose entries are empty), that of
/// a thread still running.
pub fn proc_dir(pid: i32) -> std::path::PathBuf {
    let main = std::path::PathBuf::from(format!("/proc/{pid}"));
    if !ended(pid, pid) {
        return main;
    }
    task_ids(pid)
        .unwrap_or_default()
        .into_iter()
        .find(|&t| !ended(pid, t))
        .map_or(main, |t| format!("/proc/{pid}/task/{t}").into())
}

/// What a `waitpid` on a seized thread saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// `PTRACE_EVENT_STOP` (our interrupt, or a group stop).
    Event,
    /// The thread is about to receive this signal.
    Signal(i32),
    /// The thread (or the process) has ended.
    Gone,
}

/// Waits for `tid`'s next stop.
pub fn wait_stop(tid: i32) -> std::io::Result<Stop> {
    wait_stop_for(tid, None).map(|s| s.unwrap_or(Stop::Gone))
}

/// Waits for `tid`'s next stop, at most `limit` (`None` after it).
pub fn wait_stop_for(
    tid: i32,
    limit: Option<std::time::Duration>,
) -> std::io::Result<Option<Stop>> {
    let start = std::time::Instant::now();
    let flags = match limit {
        Some(_) => libc::__WALL | libc::WNOHANG,
        None => libc::__WALL,
    };
    loop {
        let mut status = 0;
        // SAFETY: `status` is a valid out-pointer.
        let r = unsafe { libc::waitpid(tid, &mut status, flags) };
        if r == 0 {
            if limit.is_some_and(|l| start.elapsed() >= l) {
                return Ok(None);
            }
            std::thread::sleep(std::time::Duration::from_micros(200));
            continue;
        }
        if r < 0 {
            let e = std::io::Error::last_os_error();
            match e.raw_os_error() {
                Some(libc::EINTR) => continue,
                Some(libc::ECHILD) => return Ok(Some(Stop::Gone)),
                _ => return Err(e),
            }
        }
        return Ok(Some(classify(status)));
    }
}

/// The kind of stop of a raw wait status.
pub fn classify(status: i32) -> Stop {
    if !libc::WIFSTOPPED(status) {
        return Stop::Gone;
    }
    if status >> 16 != 0 {
        // An event stop (PTRACE_EVENT_STOP for an interrupt or a group stop; no other event
        // is enabled). A plain SIGTRAP stop is a signal the process was sent.
        return Stop::Event;
    }
    Stop::Signal(libc::WSTOPSIG(status))
}

impl Stopped {
    /// Seizes and stops every thread of `pid`.
    pub fn stop_all(pid: i32) -> anyhow::Result<Stopped> {
        let mut s = Stopped {
            pid,
            threads: BTreeMap::new(),
            ended: Vec::new(),
        };
        s.stop_new()?;
        if s.threads.is_empty() {
            bail!("no such process: {pid}");
        }
        Ok(s)
    }

    /// Seizes and stops the threads not held yet, until a scan finds no new one.
    fn stop_new(&mut self) -> anyhow::Result<()> {
        for _ in 0..1000 {
            let tids = match task_ids(self.pid) {
                Ok(t) => t,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    bail!("no such process: {}", self.pid)
                }
                Err(e) => return Err(e).context(format!("cannot read /proc/{}/task", self.pid)),
            };
            let new: Vec<i32> = tids
                .into_iter()
                .filter(|t| !self.threads.contains_key(t) && !self.ended.contains(t))
                .collect();
            if new.is_empty() {
                return Ok(());
            }
            for tid in new {
                match ptrace(libc::PTRACE_SEIZE, tid, 0, 0) {
                    Ok(_) => {}
                    // Ended since the scan, or ended and not reaped yet (a main thread that
                    // called pthread_exit stays so until the process ends).
                    Err(e) if e.raw_os_error() == Some(libc::ESRCH) => continue,
                    Err(_) if ended(self.pid, tid) => {
                        self.ended.push(tid);
                        continue;
                    }
                    Err(e) => return Err(super::errors::seize_error(self.pid, e)),
                }
                self.threads.insert(tid, Thread::default());
                self.interrupt_one(tid)?;
            }
        }
        bail!(
            "process {}: new threads keep appearing: cannot stop them all",
            self.pid
        )
    }

    /// A thread stopped for signal `sig` before our interrupt took: keep the signal.
    fn keep_signal(&mut self, tid: i32, sig: i32) -> anyhow::Result<()> {
        self.add_pending(tid, sig);
        Ok(())
    }

    /// The held thread ids, ascending.
    pub fn tids(&self) -> Vec<i32> {
        self.threads.keys().copied().collect()
    }

    /// Keeps signal `sig`, for which `tid` is in a signal-delivery-stop now, with its
    /// `siginfo`: the thread goes on without it and gets it when let go. The trap of one of
    /// utrace's single steps (met late) is dropped: sent again, it would kill the thread.
    pub fn add_pending(&mut self, tid: i32, sig: i32) {
        let info = siginfo(tid, sig);
        let step =
            sig == libc::SIGTRAP && [libc::TRAP_BRKPT, libc::TRAP_TRACE].contains(&info.si_code);
        if let Some(t) = self.threads.get_mut(&tid).filter(|_| !step) {
            t.pending.push(info);
        }
    }

    /// Lets every thread run a little and stops them again (with the threads created
    /// meanwhile): for when one was stopped inside code that must not be interrupted.
    pub fn shake(&mut self) -> anyhow::Result<()> {
        for &tid in self.threads.keys() {
            let _ = ptrace(libc::PTRACE_CONT, tid, 0, 0);
        }
        std::thread::sleep(std::time::Duration::from_millis(2));
        let tids = self.tids();
        self.interrupt(tids)
    }

    /// Single-steps the held thread `tid` until `done(rip)` holds at its instruction pointer,
    /// for at most [`STEP_TIME`]: brings a thread stopped inside code that must not be
    /// interrupted (a hook, a function holding a lock) out of it at once, where letting every
    /// thread run a little and stopping them again may take many tries on a loaded machine.
    /// Signals that arrive meanwhile are kept. Returns whether it got there; a step that
    /// blocks (a system call that waits) is interrupted and the thread stays held where it is.
    pub fn step_out(&mut self, tid: i32, done: impl Fn(u64) -> bool) -> anyhow::Result<bool> {
        let start = std::time::Instant::now();
        while start.elapsed() < STEP_TIME {
            if ptrace(libc::PTRACE_SINGLESTEP, tid, 0, 0).is_err() {
                return Ok(false);
            }
            let slice = Some(std::time::Duration::from_millis(20));
            match wait_stop_for(tid, slice).context("waiting for a thread to step failed")? {
                None => return self.stop_stepping(tid).map(|()| false),
                Some(Stop::Gone) => {
                    self.threads.remove(&tid);
                    return Ok(true);
                }
                Some(Stop::Signal(sig)) if sig != libc::SIGTRAP || !step_trap(tid) => {
                    self.add_pending(tid, sig)
                }
                // A group stop, reported before the step's trap perhaps.
                Some(Stop::Event) => self.take_step_trap(tid)?,
                Some(_) => {}
            }
            match super::inject::position(tid) {
                Some((rip, None)) if done(rip) => return Ok(true),
                _ => {}
            }
        }
        Ok(false)
    }

    /// Stops `tid` again after a single step that did not end in time (it waits in a system
    /// call): interrupts it, letting the step's own trap pass if it comes first.
    fn stop_stepping(&mut self, tid: i32) -> anyhow::Result<()> {
        let _ = ptrace(libc::PTRACE_INTERRUPT, tid, 0, 0);
        loop {
            match self.wait_held(tid)? {
                // The step may have ended with the interrupt: its trap waits queued.
                Stop::Event => return self.take_step_trap(tid),
                Stop::Gone => {
                    self.threads.remove(&tid);
                    return Ok(());
                }
                Stop::Signal(sig) => {
                    if sig != libc::SIGTRAP || !step_trap(tid) {
                        self.add_pending(tid, sig);
                    }
                    // The interrupt is still pending: the thread stops again at once.
                    let _ = ptrace(libc::PTRACE_CONT, tid, 0, 0);
                }
            }
        }
    }

    /// Takes the trap of a single step that waits in held thread `tid`'s queue: it came with
    /// or after a stop that the kernel reports first (an interrupt's, a group stop's), and let
    /// go, the thread would die of it (or a signal kept for it would be the trap, sent again).
    /// Resumed, the thread stops for its queued signal before it runs any instruction: a
    /// step's trap is dropped there (another signal is kept), and an interrupt stops the
    /// thread again.
    fn take_step_trap(&mut self, tid: i32) -> anyhow::Result<()> {
        while trap_queued(self.pid, tid) {
            let _ = ptrace(libc::PTRACE_CONT, tid, 0, 0);
            let mut stop = self.wait_held(tid)?;
            while let Stop::Signal(sig) = stop {
                if sig != libc::SIGTRAP || !step_trap(tid) {
                    self.add_pending(tid, sig);
                }
                let _ = ptrace(libc::PTRACE_INTERRUPT, tid, 0, 0);
                let _ = ptrace(libc::PTRACE_CONT, tid, 0, 0);
                stop = self.wait_held(tid)?;
            }
            if stop == Stop::Gone {
                self.threads.remove(&tid);
                return Ok(());
            }
        }
        Ok(())
    }

    /// Lets every thread but `except` run (the signals kept stay kept): a call in `except`
    /// waits for a lock one of them holds.
    pub fn release_others(&mut self, except: i32) {
        for &tid in self.threads.keys().filter(|&&t| t != except) {
            let _ = ptrace(libc::PTRACE_CONT, tid, 0, 0);
        }
    }

    /// Stops again the threads [`Stopped::release_others`] let run, and those they created.
    pub fn restop_others(&mut self, except: i32) -> anyhow::Result<()> {
        let tids: Vec<i32> = self.tids().into_iter().filter(|&t| t != except).collect();
        self.interrupt(tids)
    }

    /// Stops the running threads `tids` again (forgetting those that are gone), then the
    /// threads created meanwhile.
    fn interrupt(&mut self, tids: Vec<i32>) -> anyhow::Result<()> {
        for tid in tids {
            self.interrupt_one(tid)?;
        }
        self.stop_new()
    }

    /// Stops the running thread `tid` (held from now on), or forgets it when it is gone.
    fn interrupt_one(&mut self, tid: i32) -> anyhow::Result<()> {
        if ptrace(libc::PTRACE_INTERRUPT, tid, 0, 0).is_err() {
            self.threads.remove(&tid);
            return Ok(());
        }
        match self.wait_held(tid)? {
            Stop::Gone => {
                self.threads.remove(&tid);
                if ended(self.pid, tid) {
                    self.ended.push(tid);
                }
            }
            Stop::Event => {}
            Stop::Signal(sig) => self.keep_signal(tid, sig)?,
        }
        Ok(())
    }

    /// Waits for the stop that the interrupt of `tid` asked for, before any of its registers
    /// is changed: gives up (every thread is let go when `self` is dropped) on a stop signal to
    /// utrace or after [`STOP_WAIT`] (a thread in an uninterruptible sleep); a thread that
    /// ended meanwhile (a main thread's `pthread_exit`) is `Gone`.
    fn wait_held(&self, tid: i32) -> anyhow::Result<Stop> {
        let start = std::time::Instant::now();
        loop {
            let slice = Some(std::time::Duration::from_millis(20));
            if let Some(stop) =
                wait_stop_for(tid, slice).context("waiting for a thread to stop failed")?
            {
                return Ok(stop);
            }
            if ended(self.pid, tid) {
                return Ok(Stop::Gone);
            }
            super::check_stop()?;
            if start.elapsed() >= STOP_WAIT {
                bail!(
                    "process {}: thread {tid} does not stop (blocked in the kernel?): attach given up",
                    self.pid
                );
            }
        }
    }

    /// Lets every thread go, each with the signals it was about to receive: they are sent
    /// again while it is still stopped, and taken once it runs untraced.
    pub fn detach_all(self) {
        drop(self);
    }
}

/// How long [`Stopped::step_out`] single-steps one thread at most.
const STEP_TIME: std::time::Duration = std::time::Duration::from_millis(300);

/// Whether the `SIGTRAP` that `tid` is stopped for is the kernel's trap after a single step
/// (not one the process was sent, which is kept).
fn step_trap(tid: i32) -> bool {
    siginfo(tid, libc::SIGTRAP).si_code > 0
}

/// How long a thread may take to stop for an interrupt.
const STOP_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

impl Drop for Stopped {
    fn drop(&mut self) {
        // Also here: a step's trap left queued would kill the thread once let go.
        for tid in self.tids() {
            let _ = self.take_step_trap(tid);
        }
        for (tid, t) in std::mem::take(&mut self.threads) {
            for info in &t.pending {
                resend(self.pid, tid, info);
            }
            let _ = ptrace(libc::PTRACE_DETACH, tid, 0, 0);
        }
    }
}

/// Whether a `SIGTRAP` waits, not blocked, in thread `tid`'s own queue (`SigPnd` of its
/// `/proc` status; a step's trap is sent to the thread).
fn trap_queued(pid: i32, tid: i32) -> bool {
    let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/status")) else {
        return false;
    };
    let mask = |key: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
            .unwrap_or(0)
    };
    let bit = 1u64 << (libc::SIGTRAP - 1);
    mask("SigPnd:") & bit != 0 && mask("SigBlk:") & bit == 0
}

/// The `siginfo` of the signal-delivery-stop `tid` is in (a bare one for `sig` if unreadable).
fn siginfo(tid: i32, sig: i32) -> libc::siginfo_t {
    // SAFETY: plain data; all-zero is valid.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    if ptrace(libc::PTRACE_GETSIGINFO, tid, 0, &raw mut info as usize).is_err()
        || info.si_signo != sig
    {
        // SAFETY: as above.
        info = unsafe { std::mem::zeroed() };
        info.si_signo = sig;
        info.si_code = libc::SI_TKILL;
    }
    info
}

/// Sends `info`'s signal to thread `tid` of `pid` again: with its `siginfo` where the kernel
/// lets another process forge it (negative codes: `sigqueue`, timers, ...), else as `tgkill`
/// (the sender's pid and uid become utrace's).
fn resend(pid: i32, tid: i32, info: &libc::siginfo_t) {
    let mut copy = *info;
    // SAFETY: `copy` is a valid siginfo for the call's duration.
    let queued = info.si_code < 0
        && info.si_code != libc::SI_TKILL
        && unsafe {
            libc::syscall(
                libc::SYS_rt_tgsigqueueinfo,
                pid,
                tid,
                info.si_signo,
                &raw mut copy,
            )
        } == 0;
    if !queued {
        // SAFETY: tgkill takes no pointers.
        unsafe { libc::syscall(libc::SYS_tgkill, pid, tid, info.si_signo) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A step into a system call that blocks is interrupted; its trap, queued behind the
    /// interrupt's stop, once killed the thread let go.
    #[test]
    fn a_step_that_blocks_leaves_no_trap_behind() {
        // SAFETY: the child only calls nanosleep (async-signal-safe) until it is killed.
        let child = unsafe { libc::fork() };
        if child == 0 {
            loop {
                let ts = libc::timespec {
                    tv_sec: 1,
                    tv_nsec: 0,
                };
                // SAFETY: a valid timespec; no remainder wanted.
                unsafe { libc::nanosleep(&ts, std::ptr::null_mut()) };
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
        let mut stopped = Stopped::stop_all(child).unwrap();
        // Restarting the sleep blocks: the step does not end.
        assert!(!stopped.step_out(child, |_| false).unwrap());
        stopped.detach_all();
        std::thread::sleep(std::time::Duration::from_millis(100));
        let mut status = 0;
        // SAFETY: `status` is a valid out-pointer.
        let r = unsafe { libc::waitpid(child, &mut status, libc::WNOHANG) };
        // SAFETY: our own child.
        unsafe { libc::kill(child, libc::SIGKILL) };
        // SAFETY: as above.
        unsafe { libc::waitpid(child, &mut status, 0) };
        assert_eq!(r, 0, "the child ended: status {status:#x}");
    }

    #[test]
    fn wait_statuses_are_classified() {
        // Exited with 0.
        assert_eq!(classify(0), Stop::Gone);
        // Stopped by SIGSEGV (0x7f | sig << 8).
        assert_eq!(
            classify(0x7f | (libc::SIGSEGV << 8)),
            Stop::Signal(libc::SIGSEGV)
        );
        // PTRACE_EVENT_STOP: SIGTRAP | (PTRACE_EVENT_STOP << 8), shifted.
        let event = 0x7f | ((libc::SIGTRAP | (libc::PTRACE_EVENT_STOP << 8)) << 8);
        assert_eq!(classify(event), Stop::Event);
        assert_eq!(
            classify(0x7f | (libc::SIGTRAP << 8)),
            Stop::Signal(libc::SIGTRAP)
        );
    }
}
