//! Running the traced program with libmcount preloaded and waiting for its whole process tree
//! (runtime.md §9.3): the recorder becomes a child subreaper, so descendants orphaned by their
//! parents are re-parented to it and `waitpid(-1)` sees every one of them end.

use anyhow::{bail, Context};
use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::time::Instant;

/// The runtime library's file name.
pub const LIBMCOUNT: &str = "libmcount.so";

/// Where libmcount is: `DIR/libmcount.so` with `--libmcount-path=DIR` (an error if it is not
/// there), else `libmcount.so` next to the `utrace` executable (a build tree), else the copy
/// built into `utrace`, written out on first use ([`super::embedded`]).
pub fn find_libmcount(dir: Option<&Path>) -> anyhow::Result<PathBuf> {
    if let Some(dir) = dir {
        let lib = dir.join(LIBMCOUNT);
        if !lib.is_file() {
            bail!("utrace could not find libmcount.so for record-tracing");
        }
        return Ok(std::fs::canonicalize(&lib).unwrap_or(lib));
    }
    let beside = std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(|d| d.join(LIBMCOUNT)));
    if let Some(lib) = beside.filter(|lib| lib.is_file()) {
        return Ok(std::fs::canonicalize(&lib).unwrap_or(lib));
    }
    super::embedded::install()
}

/// What to run.
#[derive(Debug)]
pub struct Launch<'a> {
    /// The executable to run.
    pub exe: &'a Path,
    /// argv, argv[0] as the user wrote it.
    pub argv: &'a [OsString],
    /// Variables to set (the env contract, `LD_PRELOAD`, ...).
    pub env: Vec<(String, OsString)>,
    /// Variables to remove (stale contract variables inherited from our own environment).
    pub env_remove: Vec<&'static str>,
    /// `--no-randomize-addr`: run the program without address space randomization.
    pub no_randomize: bool,
}

impl Launch<'_> {
    /// The program's command: its argv (argv[0] as written) and environment; with
    /// `--no-randomize-addr`, address randomization is turned off for this process first,
    /// which the program inherits.
    pub fn command(&self) -> Command {
        if self.no_randomize {
            disable_aslr();
        }
        let mut cmd = Command::new(self.exe);
        if let Some(arg0) = self.argv.first() {
            cmd.arg0(arg0);
        }
        cmd.args(self.argv.iter().skip(1));
        for name in &self.env_remove {
            cmd.env_remove(name);
        }
        for (name, value) in &self.env {
            cmd.env(name, value);
        }
        cmd
    }
}

/// How the program and its descendants ended.
#[derive(Debug, Clone, Copy)]
pub struct Ended {
    /// The raw `wait()` status of the program (the direct child).
    pub raw_status: i32,
    /// `getrusage(RUSAGE_CHILDREN)` after every descendant was reaped.
    pub usage: libc::rusage,
    /// Nanoseconds from spawning to the end of the last descendant.
    pub elapsed_ns: u64,
    /// Wall-clock seconds (`time_t`) when the program was started.
    pub started_at: libc::time_t,
    /// The recorder was told to stop (SIGINT, SIGTERM, SIGHUP, SIGQUIT) and stopped the
    /// program.
    pub stopped: bool,
}

/// The traced program while it runs (0 otherwise), for [`stop_signal`].
static CHILD: AtomicI32 = AtomicI32::new(0);
/// Set by [`stop_signal`]: the recording was stopped.
static STOPPED: AtomicBool = AtomicBool::new(false);

/// SIGINT, SIGTERM, SIGHUP or SIGQUIT to the recorder (a Ctrl-C, or `kill` from another
/// terminal): stop the program as uftrace does, at once (SIGKILL); [`wait_all`] then stops
/// the rest of the process tree and the recorder finishes the data directory. Only
/// async-signal-safe calls (atomics and kill).
extern "C" fn stop_signal(_: libc::c_int) {
    STOPPED.store(true, Ordering::Relaxed);
    // Relaxed: pairs with nothing; the value is set before the handler is installed.
    let pid = CHILD.load(Ordering::Relaxed);
    if pid > 0 {
        // SAFETY: kill is async-signal-safe and touches no memory. `pid` is our child: CHILD
        // is cleared right after the child is reaped, so its pid cannot have been reused.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
}

/// Sends SIGKILL to every descendant of this process (found in `/proc`, whoever their parent
/// is now within the tree).
fn kill_descendants() {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return;
    };
    let mut parent_of = Vec::new();
    for e in entries.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else {
            continue;
        };
        // `pid (comm) state ppid ...`: comm may hold spaces and parentheses.
        let ppid = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|p| p.parse::<i32>().ok());
        if let Some(ppid) = ppid {
            parent_of.push((pid, ppid));
        }
    }
    let mut tree = vec![std::process::id() as i32];
    let mut i = 0;
    while let Some(&p) = tree.get(i) {
        tree.extend(parent_of.iter().filter(|(_, pp)| *pp == p).map(|(c, _)| *c));
        i += 1;
    }
    for &pid in &tree[1..] {
        // SAFETY: kill takes no pointers; the pid is a descendant found just now.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
}

/// The signals that tell the recorder to stop: a Ctrl-C, or `kill` from another terminal.
pub const STOP_SIGNALS: [libc::c_int; 4] =
    [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT];

/// A handler installed for the [`STOP_SIGNALS`] while this lives: the previous actions come
/// back when it is dropped (on every path, errors included). Without `SA_RESTART`: a wait the
/// signal interrupts sees `EINTR`.
pub struct StopSignals {
    old: [libc::sigaction; 4],
}

impl StopSignals {
    /// Installs `handler`, which must be async-signal-safe.
    pub fn install(handler: extern "C" fn(libc::c_int)) -> StopSignals {
        let handler = handler as *const () as libc::sighandler_t;
        // SAFETY: sigaction is plain data; all-zero is a valid value (empty mask, no flags).
        let mut old: [libc::sigaction; 4] = unsafe { std::mem::zeroed() };
        for (&sig, old) in STOP_SIGNALS.iter().zip(old.iter_mut()) {
            // SAFETY: as above.
            let mut new: libc::sigaction = unsafe { std::mem::zeroed() };
            new.sa_sigaction = handler;
            // SAFETY: both pointers refer to valid sigaction structs for the duration of the
            // call; the handler is async-signal-safe (the caller's promise).
            unsafe { libc::sigaction(sig, &new, old) };
        }
        StopSignals { old }
    }
}

impl Drop for StopSignals {
    fn drop(&mut self) {
        for (&sig, old) in STOP_SIGNALS.iter().zip(&self.old) {
            // SAFETY: `old` is the action returned by the sigaction call in `install`.
            unsafe { libc::sigaction(sig, old, std::ptr::null_mut()) };
        }
    }
}

impl Ended {
    /// What is known of a program that has not ended (or whose end was not seen): started
    /// `elapsed` ago, exit status unknown (-1, as uftrace writes it).
    pub fn not_yet(elapsed: std::time::Duration) -> Ended {
        // SAFETY: time(NULL) only returns the current time.
        let now = unsafe { libc::time(std::ptr::null_mut()) };
        Ended {
            raw_status: -1,
            // SAFETY: rusage is plain data; all-zero is valid.
            usage: unsafe { std::mem::zeroed() },
            elapsed_ns: u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX),
            started_at: now - elapsed.as_secs() as libc::time_t,
            stopped: false,
        }
    }
}

/// Runs the program and waits until it and every descendant have ended.
pub fn run(launch: &Launch<'_>) -> anyhow::Result<Ended> {
    // SAFETY: prctl(PR_SET_CHILD_SUBREAPER) takes integer arguments only and changes nothing
    // but how orphaned descendants of this process are re-parented.
    if unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1 as libc::c_ulong, 0, 0, 0) } != 0 {
        return Err(std::io::Error::last_os_error()).context("cannot become a child subreaper");
    }
    let mut cmd = launch.command();

    // SAFETY: time(NULL) only returns the current time.
    let started_at = unsafe { libc::time(std::ptr::null_mut()) };
    let start = Instant::now();
    let signals = StopSignals::install(stop_signal);
    let waited = cmd
        .spawn()
        .with_context(|| format!("cannot run '{}'", launch.exe.display()))
        .map(|child| {
            let pid = child.id() as libc::pid_t;
            CHILD.store(pid, Ordering::Relaxed);
            // A signal that came before the child was known.
            if STOPPED.load(Ordering::Relaxed) {
                stop_signal(libc::SIGTERM);
            }
            wait_all(pid)
        });
    drop(signals);
    let raw_status = waited??;
    let elapsed_ns = u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX);

    // SAFETY: rusage is plain data, all-zero is valid.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `usage` is a valid, writable rusage struct.
    unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut usage) };
    Ok(Ended {
        raw_status,
        usage,
        elapsed_ns,
        started_at,
        stopped: STOPPED.load(Ordering::Relaxed),
    })
}

/// Adds `ADDR_NO_RANDOMIZE` to this process's execution domain; children inherit it and keep
/// it across exec. The recorder itself is already mapped, so nothing changes for it.
fn disable_aslr() {
    const QUERY: libc::c_ulong = 0xffff_ffff;
    // SAFETY: personality() with 0xffffffff only returns the current persona.
    let current = unsafe { libc::personality(QUERY) };
    if current >= 0 {
        let persona = current as libc::c_ulong | libc::ADDR_NO_RANDOMIZE as libc::c_ulong;
        // SAFETY: setting ADDR_NO_RANDOMIZE only affects the layout of images exec'd later.
        unsafe { libc::personality(persona) };
    }
}

/// Reaps children until none is left; returns the wait status of `main`.
fn wait_all(main: libc::pid_t) -> anyhow::Result<i32> {
    let mut main_status = None;
    loop {
        let mut status = 0;
        // SAFETY: `status` is a valid out-pointer; waiting for any child has no other effect.
        let pid = unsafe { libc::waitpid(-1, &mut status, 0) };
        let err = std::io::Error::last_os_error();
        if STOPPED.load(Ordering::Relaxed) {
            kill_descendants();
        }
        if pid < 0 {
            match err.raw_os_error() {
                Some(libc::EINTR) => continue,
                Some(libc::ECHILD) => break,
                _ => return Err(err).context("waiting for the traced program failed"),
            }
        }
        if pid == main {
            CHILD.store(0, Ordering::Relaxed);
            main_status = Some(status);
        }
    }
    main_status.context("the traced program was not waited for")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn libmcount_lookup() {
        let dir = tempfile::tempdir().unwrap();
        let err = find_libmcount(Some(dir.path())).unwrap_err();
        assert_eq!(
            err.to_string(),
            "utrace could not find libmcount.so for record-tracing"
        );
        std::fs::write(dir.path().join(LIBMCOUNT), b"").unwrap();
        let found = find_libmcount(Some(dir.path())).unwrap();
        assert!(found.ends_with(LIBMCOUNT));
    }

    extern "C" fn noop(_: libc::c_int) {}

    /// The action installed for SIGHUP now.
    fn hup_action() -> libc::sighandler_t {
        // SAFETY: plain data; all-zero is valid.
        let mut now: libc::sigaction = unsafe { std::mem::zeroed() };
        // SAFETY: a null new action only reads the current one into `now`.
        unsafe { libc::sigaction(libc::SIGHUP, std::ptr::null(), &mut now) };
        now.sa_sigaction
    }

    /// The stop handlers are the recorder's only while the guard lives: `live -p`'s replay
    /// once ignored Ctrl-C.
    #[test]
    fn stop_signals_are_given_back() {
        let before = hup_action();
        let guard = StopSignals::install(noop);
        assert_eq!(hup_action(), noop as *const () as libc::sighandler_t);
        drop(guard);
        assert_eq!(hup_action(), before);
    }
}
