//! The recorder under attack and under faults (issue: safe under attack and under faults).
//!
//! - SIGINT and SIGTERM to `utrace record` stop the program at once, as uftrace does, finish
//!   the data directory and exit 0; nothing is left running or in `/dev/shm`.
//! - SIGKILL of `utrace record` or `utrace live`: the traced program stops being traced (its
//!   data stops growing) and runs on to its end; the recorder's guardian moves the rings into
//!   the data files and finishes the directory (record), or removes it (live); nothing is left
//!   in `/dev/shm` and the data replays with utrace and uftrace.
//! - Run as root under `umask 000`, the data directory is 0755 and its files 0644, so a user
//!   (`nobody`) cannot swap a data file for a link to a file of root's.
//! - A full disk (a 2 MB tmpfs): one error line, and what was written replays.
//! - `/dev/shm` too small for the rings: the threads write their own data; one warning.
//! - `-b` larger than memory and `-S` naming no file: one error line, nothing left behind.

use std::os::unix::fs::MetadataExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::util::{self, is_root, ChildGuard, Mode};

/// Waits until `cond` holds, for at most `limit`.
fn wait_for(limit: Duration, what: &str, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(start.elapsed() < limit, "timed out waiting: {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The pid of the first `TASK` line of `dir/task.txt`, once there is one.
fn traced_pid(dir: &Path) -> i32 {
    let task = dir.join("task.txt");
    let mut pid = None;
    wait_for(
        Duration::from_secs(20),
        "the traced program to start",
        || {
            pid = std::fs::read_to_string(&task).ok().and_then(|t| {
                t.lines()
                    .find(|l| l.starts_with("TASK "))
                    .and_then(|l| l.split(' ').find_map(|w| w.strip_prefix("pid=")))
                    .and_then(|p| p.parse().ok())
            });
            pid.is_some()
        },
    );
    pid.unwrap()
}

/// Whether process `pid` still runs (a zombie does not count).
fn running(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rsplit_once(')')
                .map(|(_, r)| r.trim_start().starts_with('Z'))
        })
        .is_some_and(|zombie| !zombie)
}

/// Ring directories of the recorder `pid` still in `/dev/shm`.
fn rings_of(pid: u32) -> Vec<String> {
    let prefix = format!("utrace-{pid}-");
    std::fs::read_dir("/dev/shm")
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with(&prefix))
                .collect()
        })
        .unwrap_or_default()
}

/// Total size of the files in `dir`.
fn dir_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .filter_map(|e| e.metadata().ok())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0)
}

/// Starts `utrace ARGS` in `cwd` with output captured.
fn spawn_utrace(cwd: &Path, args: &[&str]) -> ChildGuard {
    let mut cmd = Command::new(util::utrace_bin());
    cmd.current_dir(cwd)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    ChildGuard::new(cmd.spawn().unwrap())
}

fn kill(pid: u32, sig: i32) {
    // SAFETY: kill takes no pointers.
    assert_eq!(unsafe { libc::kill(pid as i32, sig) }, 0);
}

/// The data replays with utrace (and uftrace when installed) and shows `func`.
fn assert_replays(dir: &Path, func: &str) {
    let ours = util::utrace_replay(dir, &[]);
    ours.assert_success();
    assert!(ours.stdout.contains(func), "{ours}");
    if util::uftrace_available() {
        let theirs = util::uftrace_replay(dir, &[]);
        theirs.assert_success();
        assert!(theirs.stdout.contains(func), "{theirs}");
    }
}

#[test]
fn sigint_and_sigterm_stop_the_recording() {
    let prog = util::testprog("spin", Mode::Pg);
    for sig in [libc::SIGINT, libc::SIGTERM] {
        let tmp = tempfile::tempdir().unwrap();
        let prog_arg = prog.to_str().unwrap();
        let mut utrace = spawn_utrace(tmp.path(), &["record", prog_arg, "20000"]);
        let dir = tmp.path().join("uftrace.data");
        let pid = traced_pid(&dir);
        std::thread::sleep(Duration::from_millis(300));
        let recorder = utrace.child_mut().id();
        kill(recorder, sig);
        let start = Instant::now();
        let status = utrace.child_mut().wait().unwrap();
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "signal {sig} ignored"
        );
        let mut stderr = String::new();
        std::io::Read::read_to_string(utrace.child_mut().stderr.as_mut().unwrap(), &mut stderr)
            .unwrap();
        // uftrace's code for a recording stopped this way.
        assert_eq!(status.code(), Some(0), "signal {sig}: {stderr}");
        assert!(!running(pid), "signal {sig}: the program still runs");
        assert!(rings_of(recorder).is_empty(), "{:?}", rings_of(recorder));
        assert!(dir.join("info").is_file());
        assert_replays(&dir, "work()");
    }
}

#[test]
fn sigkill_of_the_recorder_stops_tracing() {
    let prog = util::testprog("spin", Mode::Pg);
    let prog_arg = prog.to_str().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let mut utrace = spawn_utrace(tmp.path(), &["record", prog_arg, "3000"]);
    let dir = tmp.path().join("uftrace.data");
    let pid = traced_pid(&dir);
    std::thread::sleep(Duration::from_millis(300));
    let recorder = utrace.child_mut().id();
    kill(recorder, libc::SIGKILL);
    let _ = utrace.child_mut().wait();
    // The guardian finishes the directory and removes the rings.
    wait_for(Duration::from_secs(10), "the rings to be removed", || {
        rings_of(recorder).is_empty()
    });
    // The program noticed within a ring's worth of records: nothing grows any more.
    std::thread::sleep(Duration::from_millis(300));
    let size = dir_bytes(&dir);
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(dir_bytes(&dir), size, "the data still grows");
    // It runs on untraced to its normal end: no process is left.
    wait_for(Duration::from_secs(20), "the program to end", || {
        !running(pid)
    });
    assert!(rings_of(recorder).is_empty());
    assert!(dir.join("info").is_file());
    assert_replays(&dir, "work()");
}

#[test]
fn sigkill_of_live_removes_its_directory() {
    let prog = util::testprog("spin", Mode::Pg);
    let prog_arg = prog.to_str().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let before = live_dirs();
    let mut utrace = spawn_utrace(tmp.path(), &["live", prog_arg, "3000"]);
    let recorder = utrace.child_mut().id();
    let mut dir = None;
    wait_for(Duration::from_secs(20), "the live directory", || {
        dir = live_dirs().into_iter().find(|d| !before.contains(d));
        dir.as_ref().is_some_and(|d| d.join("task.txt").is_file())
    });
    let dir = dir.unwrap();
    let pid = traced_pid(&dir);
    std::thread::sleep(Duration::from_millis(300));
    kill(recorder, libc::SIGKILL);
    let _ = utrace.child_mut().wait();
    wait_for(Duration::from_secs(10), "the live directory to go", || {
        !dir.exists() && rings_of(recorder).is_empty()
    });
    wait_for(Duration::from_secs(20), "the program to end", || {
        !running(pid)
    });
}

fn live_dirs() -> Vec<PathBuf> {
    std::fs::read_dir("/tmp")
        .map(|d| {
            d.flatten()
                .map(|e| e.path())
                .filter(|p| {
                    p.file_name()
                        .unwrap()
                        .to_string_lossy()
                        .starts_with("utrace-live-")
                })
                .collect()
        })
        .unwrap_or_default()
}

/// As root under `umask 000`: the directory is 0755, its files 0644, and a user who tries to
/// put a link to a file of root's in place of a data file while the program runs cannot.
#[test]
fn data_files_cannot_be_swapped_by_another_user() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let prog = util::testprog("spin", Mode::Pg);
    // A directory everyone can enter, as /tmp is.
    let tmp = tempfile::tempdir().unwrap();
    std::fs::set_permissions(
        tmp.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let victim = tmp.path().join("victim");
    std::fs::write(&victim, b"root's file\n").unwrap();
    let mut cmd = Command::new(util::utrace_bin());
    cmd.current_dir(tmp.path())
        .args(["record", prog.to_str().unwrap(), "1500"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    // SAFETY: umask is async-signal-safe and only changes the child's creation mask.
    unsafe {
        cmd.pre_exec(|| {
            libc::umask(0);
            Ok(())
        });
    }
    let mut utrace = ChildGuard::new(cmd.spawn().unwrap());
    let dir = tmp.path().join("uftrace.data");
    let pid = traced_pid(&dir);
    let dat = dir.join(format!("{pid}.dat"));
    wait_for(Duration::from_secs(10), "the data file", || dat.exists());
    let attack = format!(
        "rm -f {0} ; ln -s {1} {0} ; echo x > {2}/planted",
        dat.display(),
        victim.display(),
        dir.display()
    );
    let out = util::run({
        let mut sh = Command::new("sh");
        sh.args(["-c", &attack]).uid(65534).gid(65534);
        sh
    });
    assert!(!out.status.success(), "the attack went through: {out}");
    assert!(utrace.child_mut().wait().unwrap().success());
    assert_eq!(std::fs::read(&victim).unwrap(), b"root's file\n");
    assert!(!dir.join("planted").exists());
    let mode = |p: &Path| std::fs::symlink_metadata(p).unwrap().mode() & 0o7777;
    assert_eq!(mode(&dir), 0o755);
    for e in std::fs::read_dir(&dir).unwrap().flatten() {
        assert_eq!(mode(&e.path()), 0o644, "{}", e.path().display());
    }
    assert_replays(&dir, "work()");
}

/// A 2 MB tmpfs filled in the middle of the recording: one error line, and the data written
/// before the disk was full replays.
#[test]
fn full_disk_keeps_what_was_written() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let mnt = tempfile::tempdir().unwrap();
    let mounted = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=2m", "tmpfs"])
        .arg(mnt.path())
        .status()
        .is_ok_and(|s| s.success());
    if !mounted {
        eprintln!("skipped: cannot mount a tmpfs");
        return;
    }
    struct Unmount<'a>(&'a Path);
    impl Drop for Unmount<'_> {
        fn drop(&mut self) {
            let _ = Command::new("umount").arg(self.0).status();
        }
    }
    let _unmount = Unmount(mnt.path());
    // Most of the room taken before the recording starts: the disk fills however slowly a
    // loaded machine runs the program.
    std::fs::write(mnt.path().join("filler"), vec![1u8; 1536 << 10]).unwrap();
    let prog = util::testprog("spin", Mode::Pg);
    let dir = mnt.path().join("uftrace.data");
    let out = util::run({
        let mut cmd = Command::new(util::utrace_bin());
        cmd.args(["record", "-d"])
            .arg(&dir)
            .args([prog.to_str().unwrap(), "2000"]);
        cmd
    });
    assert!(!out.status.success(), "{out}");
    assert_eq!(out.stderr.matches("no space left").count(), 1, "{out}");
    assert!(!out.stderr.contains("errno 28"), "{out}");
    assert_replays(&dir, "work()");
}

/// `/dev/shm` too small for the rings (a 6 MB tmpfs mounted over it in a mount namespace of
/// the recording's own): the threads keep their rings in private memory and write their own
/// data instead of crashing on SIGBUS, the recorder says so once, and the trace is complete.
#[test]
fn small_dev_shm_makes_threads_write_their_own_data() {
    if !is_root() || !Path::new("/usr/bin/unshare").exists() {
        eprintln!("skipped: needs root and unshare");
        return;
    }
    let prog = util::testprog("thread", Mode::Pg);
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("uftrace.data");
    let script = "mount -t tmpfs -o size=6m tmpfs /dev/shm || exit 99; exec \"$@\"";
    let out = util::run({
        let mut cmd = Command::new("unshare");
        cmd.args(["-m", "sh", "-c", script, "sh"])
            .arg(util::utrace_bin())
            .args(["record", "--no-event", "-d"])
            .arg(&dir)
            .arg(&prog);
        cmd
    });
    if out.status.code() == Some(99) {
        eprintln!("skipped: cannot mount a tmpfs in a mount namespace\n{out}");
        return;
    }
    assert!(out.status.success(), "{out}");
    assert_eq!(
        out.stderr
            .matches("WARN: /dev/shm is short of space")
            .count(),
        1,
        "{out}"
    );
    let r = util::utrace_replay(&dir, &["-f", "none"]);
    assert!(r.status.success(), "{r}");
    assert_eq!(r.stdout.matches("worker() {").count(), 2, "{r}");
    assert_eq!(r.stdout.matches("step() {").count(), 2, "{r}");
}

#[test]
fn bad_record_options_leave_nothing_behind() {
    let prog = util::testprog("spin", Mode::Pg);
    let tmp = tempfile::tempdir().unwrap();
    for (args, says) in [
        (&["-b", "99999G"][..], "buffer size 99999G is too large"),
        (
            &["-S", "/nonexistent.py"][..],
            "cannot open script /nonexistent.py: No such file",
        ),
    ] {
        let out = util::run({
            let mut cmd = Command::new(util::utrace_bin());
            cmd.current_dir(tmp.path())
                .arg("record")
                .args(args)
                .args([prog.to_str().unwrap(), "10"]);
            cmd
        });
        assert!(!out.status.success(), "{out}");
        assert!(out.stderr.contains(says), "{out}");
        assert!(!out.stdout.contains("done"), "the program ran: {out}");
        assert!(!tmp.path().join("uftrace.data").exists(), "{out}");
    }
}

/// `record -k` killed with SIGKILL: the guardian turns the kernel tracing of the recording off
/// (its tracefs instance is removed, the traced pid no longer filtered in) and deletes the
/// spooled pages.
#[test]
fn sigkill_of_a_kernel_recording_restores_tracefs() {
    const TRACEFS: &str = "/sys/kernel/tracing";
    if !is_root() || !Path::new(TRACEFS).join("events/raw_syscalls").exists() {
        eprintln!("skipped: needs root and tracefs");
        return;
    }
    let prog = util::testprog("spin", Mode::Pg);
    let _tracefs = util::tracefs_lock();
    let tmp = tempfile::tempdir().unwrap();
    let mut utrace = spawn_utrace(
        tmp.path(),
        &["record", "-k", prog.to_str().unwrap(), "3000"],
    );
    let dir = tmp.path().join("uftrace.data");
    let pid = traced_pid(&dir);
    std::thread::sleep(Duration::from_millis(300));
    let recorder = utrace.child_mut().id();
    let instance = Path::new(TRACEFS).join(format!("instances/utrace-{recorder}"));
    let filtered = || {
        std::fs::read_to_string(Path::new(TRACEFS).join("set_event_pid"))
            .unwrap_or_default()
            .split_whitespace()
            .any(|p| p == pid.to_string())
    };
    assert!(filtered(), "the traced pid is not in set_event_pid");
    kill(recorder, libc::SIGKILL);
    let _ = utrace.child_mut().wait();
    wait_for(Duration::from_secs(10), "tracefs to be restored", || {
        !instance.exists() && !filtered() && rings_of(recorder).is_empty()
    });
    let spooled: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().ends_with(".raw"))
        .collect();
    assert!(spooled.is_empty(), "{spooled:?}");
    wait_for(Duration::from_secs(20), "the program to end", || {
        !running(pid)
    });
}
