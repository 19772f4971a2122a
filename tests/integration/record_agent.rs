//! The agent (`record -g`, issue 20): `utrace live -p PID` / `utrace record -p PID` change the
//! tracing of a program recorded with an agent while it runs. `agent_phases` runs numbered
//! phases (phase1() … phase6(), each `run() -> work() -> leaf()`) and waits between them for
//! a go file (its waiting is not instrumented), so each change lands between two phases and
//! the recorded tree shows, phase by phase, exactly what the tracing in force let through.
//!
//! - `--trace=off` then `--trace=on` around phase 2 records what uftrace 0.13 records with
//!   `-T phase2@trace_off -T phase3@trace_on` (differential, both replayers).
//! - `-T`, `-N`, `FUNC@clear`, `-F`, `-t`, `-D` changed one after the other (one of them sent
//!   with `record -p`), checked against the expected tree; a client with nothing to send fails.
//! - A `-F` given to `record -g` is cleared at run time (`FUNC@clear`).
//! - `fork`, `vfork`, `exec` and a main thread's `pthread_exit` record the same with `-g`.
//! - Another user cannot connect (the socket's directory is private) and, when the socket is
//!   made reachable, is refused by the agent's `SO_PEERCRED` check: tracing does not change.
//! - Garbage on the socket is answered with errors; the program runs on, prints the same,
//!   exits 0, and its trace is whole.

use crate::normalize;
use crate::util::{self, Mode};
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const PROG: &str = "agent_phases";

/// Whether `prog` is this file's program (it waits for go files unless given `-`).
pub fn covers(prog: &str) -> bool {
    prog == PROG
}

/// `utrace record -g` of `agent_phases SIGDIR PHASES`, running.
struct Recording {
    child: util::ChildGuard,
    sig: PathBuf,
    data: PathBuf,
    out: PathBuf,
    err: PathBuf,
}

impl Recording {
    fn start(tmp: &Path, phases: u32, opts: &[&str]) -> Recording {
        let prog = util::testprog(PROG, Mode::Pg);
        let sig = tmp.join("sig");
        std::fs::create_dir_all(&sig).unwrap();
        let data = tmp.join("data");
        let (out, err) = (tmp.join("rec.out"), tmp.join("rec.err"));
        let child = Command::new(util::utrace_bin())
            .args(["record", "-g", "--no-libcall", "--no-event"])
            .args(opts)
            .arg("-d")
            .arg(&data)
            .arg(&prog)
            .arg(&sig)
            .arg(phases.to_string())
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&out).unwrap())
            .stderr(std::fs::File::create(&err).unwrap())
            .spawn()
            .expect("utrace record");
        Recording {
            child: util::ChildGuard::new(child),
            sig,
            data,
            out,
            err,
        }
    }

    /// Waits until the program has run phase `k`; its pid.
    fn ready(&mut self, k: u32) -> i32 {
        let path = self.sig.join(format!("ready{k}"));
        let start = Instant::now();
        loop {
            if let Ok(text) = std::fs::read_to_string(&path) {
                return text.trim().parse().expect("pid in the ready file");
            }
            if let Ok(Some(status)) = self.child.child_mut().try_wait() {
                panic!(
                    "utrace record ended ({status}) before phase {k}: {}",
                    self.log()
                );
            }
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "no phase {k} after 30 s"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Lets the program go on after phase `k`.
    fn go(&self, k: u32) {
        std::fs::write(self.sig.join(format!("go{k}")), b"").unwrap();
    }

    fn log(&self) -> String {
        let read = |p: &Path| std::fs::read_to_string(p).unwrap_or_default();
        format!("stdout:\n{}stderr:\n{}", read(&self.out), read(&self.err))
    }

    /// Waits for the recording to end; its stdout (the program's).
    fn finish(mut self) -> (String, PathBuf) {
        let start = Instant::now();
        let status = loop {
            if let Some(s) = self.child.child_mut().try_wait().unwrap() {
                break s;
            }
            assert!(start.elapsed() < Duration::from_secs(60), "record hangs");
            std::thread::sleep(Duration::from_millis(5));
        };
        assert!(status.success(), "utrace record: {status}\n{}", self.log());
        let out = std::fs::read_to_string(&self.out).unwrap();
        (out, self.data.clone())
    }
}

/// `utrace SUBCOMMAND -p PID ARGS` (the client), as user `as_user` (via setpriv) if given.
fn client(sub: &str, pid: i32, args: &[&str], as_user: Option<&str>) -> util::Output {
    let mut cmd = match as_user {
        Some(user) => {
            let mut c = Command::new("setpriv");
            c.args([
                &format!("--reuid={user}"),
                "--regid=nogroup",
                "--clear-groups",
            ])
            .arg(util::utrace_bin());
            c
        }
        None => Command::new(util::utrace_bin()),
    };
    cmd.arg(sub).arg("-p").arg(pid.to_string()).args(args);
    util::run_for(cmd, Duration::from_secs(30))
}

/// The function column of `utrace replay -f none` of `dir`.
fn tree(dir: &Path) -> String {
    let out = util::utrace_replay(dir, &["-f", "none"]);
    out.assert_success();
    normalize::whole(&out.stdout)
}

/// The lines of one full `phaseN()` call at depth 1.
fn full_phase(n: u32) -> String {
    let work = "      work() {\n        leaf();\n        leaf();\n      } /* work */\n";
    format!("  phase{n}() {{\n    run() {{\n{work}{work}    }} /* run */\n  }} /* phase{n} */\n")
}

/// The effective uid of this test process.
fn euid() -> u32 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let uids = status.lines().find_map(|l| l.strip_prefix("Uid:")).unwrap();
    uids.split_whitespace().nth(1).unwrap().parse().unwrap()
}

fn socket_of(pid: i32) -> PathBuf {
    PathBuf::from(format!("/tmp/utrace-agent-{}/{pid}.sock", euid()))
}

#[test]
fn agent_trace_off_on_matches_uftrace_trace_triggers() {
    let tmp = tempfile::tempdir().unwrap();
    let mut rec = Recording::start(tmp.path(), 3, &[]);
    let pid = rec.ready(1);
    assert!(socket_of(pid).exists(), "no agent socket for {pid}");
    client("live", pid, &["--trace=off"], None).assert_success();
    rec.go(1);
    rec.ready(2);
    client("live", pid, &["--trace=on"], None).assert_success();
    rec.go(2);
    rec.ready(3);
    rec.go(3);
    let (out, data) = rec.finish();
    assert!(out.starts_with("done "), "{out}");
    assert!(!socket_of(pid).exists(), "agent socket left behind");
    let want = format!(
        "main() {{\n{}{}}} /* main */\n",
        full_phase(1),
        full_phase(3)
    );
    assert_eq!(tree(&data), want);

    if !util::need_uftrace("agent_trace_off_on_matches_uftrace_trace_triggers") {
        return;
    }
    // uftrace 0.13 has no agent: triggers at the same places give the same shape.
    let sig = tmp.path().join("sig-uftrace");
    std::fs::create_dir_all(&sig).unwrap();
    for k in 1..=3 {
        std::fs::write(sig.join(format!("go{k}")), b"").unwrap();
    }
    let theirs = tmp.path().join("uftrace-data");
    let prog = util::testprog(PROG, Mode::Pg);
    util::uftrace_record(
        &theirs,
        &[
            "--no-libcall",
            "-T",
            "phase2@trace_off",
            "-T",
            "phase3@trace_on",
        ],
        &prog,
        &[sig.to_str().unwrap(), "3"],
    );
    let want = normalize::whole(&util::uftrace_replay(&theirs, &[]).stdout);
    let failures = util::compare_replays("agent --trace=off/on", &want, &data, normalize::whole);
    util::assert_no_failures(&failures);
}

#[test]
fn agent_changes_depth_filters_and_time_threshold() {
    let tmp = tempfile::tempdir().unwrap();
    let mut rec = Recording::start(tmp.path(), 6, &[]);
    let steps: [(&str, &[&str]); 5] = [
        ("live", &["-T", "phase2@depth=1"]),
        ("live", &["-N", "work"]),
        ("record", &["-N", "work@clear", "-F", "phase4"]),
        ("live", &["-F", "phase4@clear", "-t", "10ms"]),
        ("live", &["-t", "0", "-D", "3"]),
    ];
    let mut pid = 0;
    for (k, (sub, args)) in (1..).zip(steps) {
        pid = rec.ready(k);
        client(sub, pid, args, None).assert_success();
        rec.go(k);
    }
    rec.ready(6);
    // Nothing to send is a usage error, and changes nothing.
    let none = client("live", pid, &[], None);
    assert!(!none.status.success(), "{none}");
    rec.go(6);
    let (_, data) = rec.finish();
    let want = format!(
        "main() {{\n{}  phase2();\n  phase3() {{\n    run();\n  }} /* phase3 */\n{}  phase5() {{\n    slow();\n  }} /* phase5 */\n  phase6() {{\n    run();\n  }} /* phase6 */\n}} /* main */\n",
        full_phase(1),
        full_phase(4),
    );
    assert_eq!(
        tree(&data),
        want,
        "{}",
        normalize::diff(&want, &tree(&data))
    );
}

/// Filters given to `record -g` are the agent's to change: `-F phase1` from the command line,
/// cleared at run time, lets phase2 be recorded whole (at the top: main was not recorded).
#[test]
fn agent_clears_a_filter_of_the_command_line() {
    let tmp = tempfile::tempdir().unwrap();
    let mut rec = Recording::start(tmp.path(), 2, &["-F", "phase1"]);
    let pid = rec.ready(1);
    client("live", pid, &["-F", "phase1@clear"], None).assert_success();
    rec.go(1);
    rec.ready(2);
    rec.go(2);
    let (_, data) = rec.finish();
    let top = |n| {
        full_phase(n)
            .lines()
            .map(|l| format!("{}\n", &l[2..]))
            .collect::<String>()
    };
    assert_eq!(tree(&data), format!("{}{}", top(1), top(2)));
}

/// Root only: `setpriv` to another user.
fn can_switch_user() -> bool {
    euid() == 0
        && Command::new("setpriv")
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
}

#[test]
fn agent_refuses_another_user() {
    if !can_switch_user() {
        eprintln!("skipping agent_refuses_another_user: needs root and setpriv");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let mut rec = Recording::start(tmp.path(), 2, &[]);
    let pid = rec.ready(1);
    let sock = socket_of(pid);
    let dir = sock.parent().unwrap().to_path_buf();
    // The directory is private: another user cannot even find the socket (and cannot attach
    // with ptrace either).
    let nobody = client("live", pid, &["--trace=off"], Some("nobody"));
    assert!(!nobody.status.success(), "{nobody}");
    assert!(nobody.stderr.contains("another user"), "{nobody}");
    // Opened up, the socket reaches the agent, whose peer check refuses the other user.
    use std::os::unix::fs::PermissionsExt;
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!((mode(&dir), mode(&sock)), (0o700, 0o600));
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o711)).unwrap();
    std::fs::set_permissions(&sock, std::fs::Permissions::from_mode(0o666)).unwrap();
    let refused = client("live", pid, &["--trace=off"], Some("nobody"));
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    assert!(!refused.status.success(), "{refused}");
    assert!(refused.stderr.contains("not the same user"), "{refused}");
    rec.go(1);
    rec.ready(2);
    rec.go(2);
    let (_, data) = rec.finish();
    let want = format!(
        "main() {{\n{}{}}} /* main */\n",
        full_phase(1),
        full_phase(2)
    );
    assert_eq!(tree(&data), want);
}

/// Sends `bytes` on a new connection to the agent of `pid`; what comes back before the agent
/// closes or goes quiet.
fn raw_exchange(pid: i32, bytes: &[u8]) -> Vec<u8> {
    let mut s = UnixStream::connect(socket_of(pid)).expect("connect to the agent");
    s.set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    s.write_all(bytes).unwrap();
    let _ = s.shutdown(std::net::Shutdown::Write);
    let mut back = Vec::new();
    let _ = s.read_to_end(&mut back);
    back
}

/// The reply types in `bytes` (8-byte headers, type in the first two).
fn reply_kinds(mut bytes: &[u8]) -> Vec<u16> {
    let mut kinds = Vec::new();
    while bytes.len() >= 8 {
        let len = u32::from_le_bytes(bytes[4..8].try_into().unwrap()) as usize;
        kinds.push(u16::from_le_bytes([bytes[0], bytes[1]]));
        bytes = &bytes[(8 + len).min(bytes.len())..];
    }
    kinds
}

#[test]
fn agent_survives_malformed_messages() {
    const OK: u16 = 0x80;
    const ERROR: u16 = 0x81;
    let header = |kind: u16, len: u32| {
        let mut h = kind.to_le_bytes().to_vec();
        h.extend([0, 0]);
        h.extend(len.to_le_bytes());
        h
    };
    let tmp = tempfile::tempdir().unwrap();
    let mut rec = Recording::start(tmp.path(), 2, &[]);
    let pid = rec.ready(1);
    // Not this protocol at all.
    let back = raw_exchange(pid, b"GET / HTTP/1.0\r\n\r\n");
    assert_eq!(reply_kinds(&back), [ERROR]);
    // Longer than the agent takes: refused before reading it.
    let back = raw_exchange(pid, &header(2, u32::MAX));
    assert_eq!(reply_kinds(&back), [ERROR]);
    // Well framed but wrong: each answered, the connection goes on.
    let mut bad = header(999, 3);
    bad.extend(b"xyz");
    bad.extend(header(3, 2)); // depth: 2 bytes instead of 4
    bad.extend([1, 2]);
    bad.extend(header(2, 1)); // trace: neither 0 nor 1
    bad.push(7);
    bad.extend(header(5, 3)); // triggers: bad match type, then bad UTF-8
    bad.extend(b"x\xff\xfe");
    bad.extend(header(1, 0)); // hello: fine
    let back = raw_exchange(pid, &bad);
    assert_eq!(reply_kinds(&back), [ERROR, ERROR, ERROR, ERROR, OK]);
    // Cut short in the middle of a payload, and an empty connection.
    let mut cut = header(5, 100);
    cut.extend(b"rmain@notrace");
    assert!(reply_kinds(&raw_exchange(pid, &cut)).is_empty());
    assert!(raw_exchange(pid, b"").is_empty());
    // A well-formed client still works afterwards.
    client("live", pid, &["-D", "100"], None).assert_success();
    rec.go(1);
    rec.ready(2);
    rec.go(2);
    let (out, data) = rec.finish();
    // The program printed what an untraced run prints.
    let plain = Command::new(util::testprog(PROG, Mode::Pg))
        .args(["-", "2"])
        .output()
        .unwrap();
    assert!(plain.status.success());
    assert_eq!(out, String::from_utf8_lossy(&plain.stdout));
    let want = format!(
        "main() {{\n{}{}}} /* main */\n",
        full_phase(1),
        full_phase(2)
    );
    assert_eq!(tree(&data), want);
}

/// `record -g` leaves processes alone: `fork` children (which have no agent), `vfork` and
/// `exec` (whose new image starts a fresh agent), and a program whose main thread calls
/// `pthread_exit` (the agent thread must not keep it alive) record the same trees as without
/// `-g`, per task, and exit the same.
#[test]
fn agent_keeps_fork_exec_vfork_and_exit_working() {
    let tmp = tempfile::tempdir().unwrap();
    let cases: [(&str, &[&str]); 4] = [
        ("fork", &[]),
        ("vfork", &[]),
        ("exec", &[]),
        (PROG, &["-", "0"]),
    ];
    let mut failures = Vec::new();
    for (name, args) in cases {
        let prog = util::testprog(name, Mode::Pg);
        let mut trees = Vec::new();
        for opts in [&["--no-libcall"][..], &["--no-libcall", "-g"][..]] {
            let dir = tmp.path().join(format!("{name}{}", opts.len()));
            let out = util::record_with(false, &dir, &prog, args, opts);
            out.assert_success();
            let replay = util::utrace_replay(&dir, &[]);
            replay.assert_success();
            // Leaves folded: where two processes run at once, whether a leaf prints as one
            // line depends on how their records interleave (`record_matrix::Norm`).
            let tasks = normalize::by_task(&replay.stdout, normalize::Anchor::Main);
            trees.push((out.stdout, normalize::fold_leaves(&tasks)));
        }
        if trees[0] != trees[1] {
            failures.push(format!(
                "{name}: with -g (+) differs from without (-):\n{}\n{}",
                normalize::diff(&trees[0].0, &trees[1].0),
                normalize::diff(&trees[0].1, &trees[1].1)
            ));
        }
    }
    util::assert_no_failures(&failures);
}
