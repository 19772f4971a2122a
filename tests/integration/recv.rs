//! `utrace recv` and `record --host` (uftrace 0.13's network protocol), on this machine only
//! (127.0.0.1 and ::1) and free ports: uftrace sending to utrace and utrace to uftrace, the
//! received directories replayed by both tools against a local recording of the same program;
//! utrace to utrace (IPv6 too), `--run-cmd`, senders that break off or send garbage (the
//! server keeps what came whole and goes on), SIGTERM/SIGINT, and the errors.
//!
//! Every server runs under a guard that kills it when the test ends, however it ends.

use crate::normalize::{self, Anchor};
use crate::util::{self, ChildGuard, Mode, Output};
use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A `recv` server (utrace's or uftrace's) receiving into `root`.
struct Server {
    guard: ChildGuard,
    port: u16,
    root: PathBuf,
    /// Its stderr.
    log: PathBuf,
}

/// A port nothing listens on now (the kernel's pick; free again once the probe is closed).
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Whether a socket listens on TCP `port` (from /proc: a connection to probe would stop
/// uftrace 0.13's `recv`, which exits on a connection closed before its first message).
fn listening(port: u16) -> bool {
    let wanted = format!(":{port:04X} ");
    ["/proc/net/tcp", "/proc/net/tcp6"].iter().any(|table| {
        std::fs::read_to_string(table).is_ok_and(|text| {
            text.lines().skip(1).any(|line| {
                let fields: Vec<&str> = line.split_whitespace().collect();
                fields.len() > 3
                    && format!("{} ", fields[1]).ends_with(&wanted)
                    && fields[3] == "0A"
            })
        })
    })
}

impl Server {
    /// Starts `recv -d ROOT --port P EXTRA` on a free port and waits until it accepts
    /// connections (a port another test took meanwhile: another one).
    fn start(uftrace: bool, root: &Path, extra: &[&str]) -> Server {
        for _ in 0..5 {
            let port = free_port();
            let log = root.with_extension(format!("{port}.log"));
            let bin = match uftrace {
                true => util::uftrace_bin(),
                false => util::utrace_bin(),
            };
            let mut cmd = Command::new(bin);
            cmd.arg("recv")
                .arg("-d")
                .arg(root)
                .arg("--port")
                .arg(port.to_string())
                .args(extra)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(std::fs::File::create(&log).unwrap());
            let mut guard = ChildGuard::new(cmd.spawn().unwrap());
            let start = Instant::now();
            while start.elapsed() < Duration::from_secs(10) {
                if guard.child_mut().try_wait().unwrap().is_some() {
                    break;
                }
                if listening(port) {
                    return Server {
                        guard,
                        port,
                        root: root.to_path_buf(),
                        log,
                    };
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        panic!("cannot start a recv server");
    }

    fn stderr(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Waits until the session `name` has its `info` (the last file a sender sends) whole.
    fn wait_for(&self, name: &str) -> PathBuf {
        let dir = self.root.join(name);
        let info = dir.join("info");
        let start = Instant::now();
        let mut last = None;
        while start.elapsed() < Duration::from_secs(20) {
            let len = std::fs::metadata(&info).map(|m| m.len()).ok();
            if len.is_some_and(|l| l > 40) && len == last {
                return dir;
            }
            last = len;
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("{name} was not received:\n{}", self.stderr());
    }
}

/// `TOOL record --no-event --no-sched --host HOST --port P -d NAME OPTS PROG`, in `cwd`.
fn send(
    uftrace: bool,
    cwd: &Path,
    host: &str,
    port: u16,
    name: &str,
    opts: &[&str],
    prog: &Path,
) -> Output {
    let bin = match uftrace {
        true => util::uftrace_bin(),
        false => util::utrace_bin(),
    };
    let mut cmd = Command::new(bin);
    cmd.current_dir(cwd)
        .args([
            "record",
            "--no-event",
            "--no-sched",
            "--host",
            host,
            "--port",
        ])
        .arg(port.to_string())
        .args(["-d", name])
        .args(opts)
        .arg(prog);
    util::run(cmd)
}

/// The function column per task, leaves folded (whether another task's record comes between
/// an entry and its exit is timing).
fn by_task(out: &str) -> String {
    normalize::fold_leaves(&normalize::by_task(out, Anchor::Main))
}

/// The files of a data directory, thread ids replaced by `TID`, sorted.
fn file_kinds(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .map(|n| match n.strip_suffix(".dat").map(|t| t.parse::<u32>()) {
            Some(Ok(_)) => "TID.dat".to_string(),
            _ if n.starts_with("sid-") => "sid.map".to_string(),
            // Which CPUs the program ran on is chance.
            _ if n.starts_with("kernel-cpu") => "kernel-cpu.dat".to_string(),
            _ if n.starts_with("perf-cpu") => "perf-cpu.dat".to_string(),
            _ => n,
        })
        .collect();
    names.sort();
    names.dedup();
    names
}

/// uftrace 0.13's `record --host` received by `utrace recv`: both tools replay the received
/// directory as uftrace replays a local recording of the same program.
#[test]
fn recv_from_uftrace_matches_a_local_recording() {
    if !util::need_uftrace("recv_from_uftrace_matches_a_local_recording") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(false, &tmp.path().join("recv"), &[]);
    let cwd = tmp.path().join("cwd");
    std::fs::create_dir(&cwd).unwrap();
    let mut failures = Vec::new();
    for name in ["abc", "thread"] {
        let prog = util::testprog(name, Mode::Pg);
        let local = tmp.path().join(format!("{name}.local"));
        util::uftrace_record(&local, &["--no-sched"], &prog, &[]);
        let want = by_task(&util::uftrace_replay(&local, &[]).stdout);
        send(true, &cwd, "127.0.0.1", server.port, name, &[], &prog).assert_success();
        let got = server.wait_for(name);
        failures.extend(util::compare_replays(name, &want, &got, by_task));
    }
    util::assert_no_failures(&failures);
    assert_eq!(std::fs::read_dir(&cwd).unwrap().count(), 0);
    assert!(!server.stderr().contains("WARN"), "{}", server.stderr());
}

/// `utrace record --host` received by uftrace 0.13's `recv`: the same files as a local
/// recording, which both tools replay alike; nothing is written where the sender runs.
#[test]
fn uftrace_recv_takes_utrace_data() {
    if !util::need_uftrace("uftrace_recv_takes_utrace_data") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(true, &tmp.path().join("recv"), &[]);
    let cwd = tmp.path().join("cwd");
    std::fs::create_dir(&cwd).unwrap();
    let mut failures = Vec::new();
    for name in ["abc", "thread"] {
        let prog = util::testprog(name, Mode::Pg);
        let local = tmp.path().join(format!("{name}.local"));
        util::record_with(false, &local, &prog, &[], &["--no-sched"]).assert_success();
        let want = by_task(&util::uftrace_replay(&local, &[]).stdout);
        let out = send(false, &cwd, "127.0.0.1", server.port, name, &[], &prog);
        out.assert_success();
        assert_eq!(out.stderr, "", "{out}");
        let got = server.wait_for(name);
        failures.extend(util::compare_replays(name, &want, &got, by_task));
        assert_eq!(file_kinds(&got), file_kinds(&local), "{name}");
    }
    util::assert_no_failures(&failures);
    assert_eq!(std::fs::read_dir(&cwd).unwrap().count(), 0);
}

/// utrace to utrace, over IPv4 and (where the machine has it) IPv6, with arguments and
/// return values recorded: the received directory replays as the local one, `info` included;
/// a second session of the same name moves the first to `NAME.old`, as `record` does.
#[test]
fn recv_from_utrace_matches_a_local_recording() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(false, &tmp.path().join("recv"), &[]);
    let cwd = tmp.path().join("cwd");
    std::fs::create_dir(&cwd).unwrap();
    let prog = util::testprog("fib", Mode::Pg);
    let opts = ["-A", "fib@arg1", "-R", "fib@retval"];
    let local = tmp.path().join("fib.local");
    util::record_with(
        false,
        &local,
        &prog,
        &[],
        &[&["--no-sched"][..], &opts].concat(),
    )
    .assert_success();
    let want = util::utrace_replay(&local, &[]).stdout;
    assert!(
        want.contains("fib(5) {") && want.contains("} = 5; /* fib */"),
        "{want}"
    );
    let mut hosts = vec!["127.0.0.1"];
    if TcpListener::bind("[::1]:0").is_ok() {
        hosts.push("::1");
    }
    for host in hosts {
        let out = send(false, &cwd, host, server.port, "fib", &opts, &prog);
        out.assert_success();
        let got = server.wait_for("fib");
        let replay = util::utrace_replay(&got, &[]);
        replay.assert_success();
        assert_eq!(by_task(&replay.stdout), by_task(&want), "{host}");
        let info = util::run({
            let mut c = Command::new(util::utrace_bin());
            c.args(["info", "-d"]).arg(&got);
            c
        });
        info.assert_success();
        assert!(info.stdout.contains("fib"), "{info}");
        std::fs::remove_file(got.join("info")).unwrap();
    }
    assert!(server.root.join("fib.old").is_dir());
    assert_eq!(std::fs::read_dir(&cwd).unwrap().count(), 0);
}

/// `-k`: the kernel's data goes too (`kernel-cpuN.dat` in kernel-data messages, the header
/// and symbols as metadata), to utrace's and to uftrace's `recv`: the same files as a local
/// recording, which both tools replay with the task's system call. The sender runs on the
/// last CPU only: the files of the CPUs before it are empty, and an empty file is never sent
/// (no data message makes it), so the received directory lacks `kernel-cpu0.dat`, which the
/// readers must not take for the end of the kernel files. Needs root and tracefs (skipped
/// without).
#[test]
fn record_host_sends_kernel_data() {
    let tracefs = Path::new("/sys/kernel/tracing");
    let root = Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0");
    if !root
        || !tracefs
            .join("events/raw_syscalls/sys_enter/format")
            .exists()
    {
        eprintln!("record_host_sends_kernel_data skipped: needs root and tracefs");
        return;
    }
    // Held to the end: the recordings below use -k too.
    let _tracefs = util::tracefs_lock();
    let tmp = tempfile::tempdir().unwrap();
    let prog = util::testprog("abc", Mode::Pg);
    let local = tmp.path().join("local");
    util::record_with(false, &local, &prog, &[], &["--no-sched", "-k"]).assert_success();
    let mut servers = vec![Server::start(false, &tmp.path().join("u"), &[])];
    if util::uftrace_available() {
        servers.push(Server::start(true, &tmp.path().join("f"), &[]));
    }
    let syscall = "__x64_sys_getpid()";
    let replay = util::utrace_replay(&local, &["--kernel-only"]);
    assert!(replay.stdout.contains(syscall), "{replay}");
    // The highest CPU this machine has online (`0-3`, `0,2-5`, ...).
    let online = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap_or_default();
    let last = online
        .trim()
        .rsplit([',', '-'])
        .next()
        .and_then(|n| n.parse::<u32>().ok())
        .unwrap_or(0);
    for server in &servers {
        let mut cmd = Command::new("taskset");
        cmd.current_dir(tmp.path())
            .args(["-c", &last.to_string()])
            .arg(util::utrace_bin())
            .args(["record", "--no-event", "--no-sched", "-k", "--host"])
            .args(["127.0.0.1", "--port", &server.port.to_string(), "-d", "k"])
            .arg(&prog);
        util::run(cmd).assert_success();
        let got = server.wait_for("k");
        assert_eq!(file_kinds(&got), file_kinds(&local));
        if last > 0 {
            assert!(!got.join("kernel-cpu0.dat").exists());
            assert!(got.join(format!("kernel-cpu{last}.dat")).is_file());
        }
        let replay = util::utrace_replay(&got, &["--kernel-only"]);
        replay.assert_success();
        assert!(replay.stdout.contains(syscall), "{replay}");
        if util::uftrace_available() {
            let replay = util::uftrace_replay(&got, &[]);
            replay.assert_success();
            assert!(replay.stdout.contains(syscall), "{replay}");
        }
    }
}

/// `--run-cmd CMD` runs after each session, its words split at spaces, in the receiving
/// directory (as uftrace's).
#[test]
fn recv_runs_the_command_after_each_session() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(
        false,
        &tmp.path().join("recv"),
        &["--run-cmd", "touch ran one"],
    );
    let prog = util::testprog("abc", Mode::Pg);
    send(
        false,
        tmp.path(),
        "127.0.0.1",
        server.port,
        "abc",
        &[],
        &prog,
    )
    .assert_success();
    server.wait_for("abc");
    let start = Instant::now();
    while !server.root.join("one").exists() && start.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(server.root.join("ran").is_file() && server.root.join("one").is_file());
}

/// One message of the protocol.
fn message(kind: u16, prefix: &[u8], body: &[u8]) -> Vec<u8> {
    let mut m = 0xfaceu16.to_be_bytes().to_vec();
    m.extend(kind.to_be_bytes());
    m.extend(((prefix.len() + body.len()) as u32).to_be_bytes());
    m.extend(prefix);
    m.extend(body);
    m
}

/// A sender that breaks off in the middle of a message, and one that sends garbage: what came
/// whole stays and replays, and the server goes on receiving the next sessions.
#[test]
fn recv_survives_senders_that_break_off() {
    let tmp = tempfile::tempdir().unwrap();
    let mut server = Server::start(false, &tmp.path().join("recv"), &[]);
    let prog = util::testprog("abc", Mode::Pg);
    let local = tmp.path().join("abc.local");
    util::record_with(false, &local, &prog, &[], &["--no-sched"]).assert_success();

    // Garbage, then a connection that closes at once.
    let mut garbage = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
    garbage.write_all(b"GET / HTTP/1.0\r\n\r\n").unwrap();
    drop(garbage);
    drop(TcpStream::connect(("127.0.0.1", server.port)).unwrap());

    // The metadata first, then half the records, then a message cut short.
    let mut s = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
    s.write_all(&message(101, b"", b"cut")).unwrap();
    let mut dat = None;
    for entry in std::fs::read_dir(&local).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_str().unwrap().to_string();
        let bytes = std::fs::read(&path).unwrap();
        if let Some(tid) = name
            .strip_suffix(".dat")
            .and_then(|t| t.parse::<u32>().ok())
        {
            dat = Some((tid, bytes));
        } else if name == "info" {
            // The header's numbers travel big-endian.
            let mut wire = bytes.clone();
            for (off, len) in [(8, 4), (12, 2), (16, 8), (24, 8), (32, 2)] {
                wire[off..off + len].reverse();
            }
            s.write_all(&message(105, b"", &wire)).unwrap();
        } else {
            let mut prefix = (name.len() as u32).to_be_bytes().to_vec();
            prefix.extend(name.as_bytes());
            s.write_all(&message(106, &prefix, &bytes)).unwrap();
        }
    }
    let (tid, records) = dat.unwrap();
    let half = records.len() / 32 * 16;
    s.write_all(&message(102, &tid.to_be_bytes(), &records[..half]))
        .unwrap();
    let rest = message(102, &tid.to_be_bytes(), &records[half..]);
    s.write_all(&rest[..rest.len() - 8]).unwrap();
    drop(s);

    // The server goes on: a whole session after the broken ones.
    let out = send(
        false,
        tmp.path(),
        "127.0.0.1",
        server.port,
        "after",
        &[],
        &prog,
    );
    out.assert_success();
    let after = server.wait_for("after");
    assert!(util::utrace_replay(&after, &[]).stdout.contains("main()"));

    let cut = server.wait_for("cut");
    let start = Instant::now();
    while !server.stderr().contains("cut from") && start.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(
        std::fs::read(cut.join(format!("{tid}.dat"))).unwrap(),
        &records[..half]
    );
    let replay = util::utrace_replay(&cut, &[]);
    replay.assert_success();
    assert!(replay.stdout.contains("main() {"), "{replay}");
    let log = server.stderr();
    assert!(
        log.contains("WARN: cut from 127.0.0.1:") && log.contains("is incomplete"),
        "{log}"
    );
    assert!(log.contains("bad message magic"), "{log}");
    assert!(server.guard_alive());
}

impl Server {
    fn guard_alive(&mut self) -> bool {
        self.guard.child_mut().try_wait().unwrap().is_none()
    }
}

/// A sender that stalls half-way holds no one up: two other sessions, sent at the same time,
/// arrive whole meanwhile.
#[test]
fn recv_serves_senders_at_once() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(false, &tmp.path().join("recv"), &[]);
    let mut stalled = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
    stalled.write_all(&message(101, b"", b"stalled")).unwrap();
    stalled
        .write_all(&message(102, &1u32.to_be_bytes(), &[0; 16])[..12])
        .unwrap();
    let prog = util::testprog("thread", Mode::Pg);
    let senders: Vec<_> = ["one", "two"]
        .into_iter()
        .map(|name| {
            let (cwd, port, prog) = (tmp.path().to_path_buf(), server.port, prog.clone());
            std::thread::spawn(move || send(false, &cwd, "127.0.0.1", port, name, &[], &prog))
        })
        .collect();
    for sender in senders {
        sender.join().unwrap().assert_success();
    }
    for name in ["one", "two"] {
        let dir = server.wait_for(name);
        let replay = util::utrace_replay(&dir, &[]);
        assert_eq!(normalize::tids(&replay.stdout).len(), 3, "{replay}");
    }
    assert!(server.root.join("stalled/default.opts").is_file());
    drop(stalled);
}

/// A server that goes away while the program runs: the program runs to its end all the same,
/// and the recording is kept in the staging directory the error names.
#[test]
fn record_keeps_the_trace_when_the_server_goes_away() {
    let tmp = tempfile::tempdir().unwrap();
    // Takes the start message, then closes.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let server = std::thread::spawn(move || {
        use std::io::Read;
        let (mut s, _) = listener.accept().unwrap();
        let mut head = [0u8; 8];
        s.read_exact(&mut head).unwrap();
        assert_eq!(head[..4], [0xfa, 0xce, 0, 101]);
    });
    let prog = util::testprog("fib", Mode::Pg);
    let mut cmd = Command::new(util::utrace_bin());
    cmd.current_dir(tmp.path())
        .env("TMPDIR", tmp.path())
        .args(["record", "--no-sched", "--host", "127.0.0.1", "--port"])
        .arg(port.to_string())
        .arg(&prog)
        .arg("20");
    let out = util::run(cmd);
    server.join().unwrap();
    assert_eq!(out.status.code(), Some(1), "{out}");
    let kept = out
        .stderr
        .split("; it is kept in ")
        .nth(1)
        .map(|rest| PathBuf::from(rest.trim()))
        .unwrap_or_else(|| panic!("no kept directory named:\n{out}"));
    assert!(
        out.stderr
            .contains(&format!("cannot send the trace to 127.0.0.1:{port}: ")),
        "{out}"
    );
    assert!(kept.starts_with(tmp.path()), "{out}");
    let report = util::run({
        let mut c = Command::new(util::utrace_bin());
        c.args(["report", "-d"]).arg(&kept);
        c
    });
    // fib(20) makes 13529 calls of fib.
    assert!(report.stdout.contains("13529  fib"), "{report}");
}

/// Records go out while the program runs, not only at its end: a program that would run for
/// minutes is stopped with SIGINT (as Ctrl-C) once the first records have arrived, and the
/// session is then completed (metadata, `info`, end), with status 0 as for a local recording.
#[test]
fn record_host_streams_while_the_program_runs() {
    use std::io::Read;
    use std::sync::mpsc;
    let tmp = tempfile::tempdir().unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let (first_data, got_data) = mpsc::channel();
    let reader = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        let mut kinds = Vec::new();
        loop {
            let mut head = [0u8; 8];
            if s.read_exact(&mut head).is_err() {
                break;
            }
            let kind = u16::from_be_bytes([head[2], head[3]]);
            let len = u32::from_be_bytes([head[4], head[5], head[6], head[7]]);
            std::io::copy(&mut (&mut s).take(u64::from(len)), &mut std::io::sink()).unwrap();
            if kind == 102 && !kinds.contains(&102) {
                let _ = first_data.send(());
            }
            kinds.push(kind);
            if kind == 107 {
                break;
            }
        }
        kinds
    });
    let prog = util::testprog("fib", Mode::Pg);
    let mut cmd = Command::new(util::utrace_bin());
    cmd.current_dir(tmp.path())
        .args(["record", "--no-sched", "--host", "127.0.0.1", "--port"])
        .arg(port.to_string())
        .arg(&prog)
        .arg("45")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let mut sender = ChildGuard::new(cmd.spawn().unwrap());
    let streamed = got_data.recv_timeout(Duration::from_secs(20));
    let pid = sender.child_mut().id() as libc::pid_t;
    // Also when nothing came: the recorder stops the program (which would run for minutes).
    // SAFETY: `pid` is our own child, still running (the guard reaps it).
    assert_eq!(unsafe { libc::kill(pid, libc::SIGINT) }, 0);
    streamed.expect("no records while the program runs");
    let kinds = reader.join().unwrap();
    let status = sender.child_mut().wait().unwrap();
    assert_eq!(status.code(), Some(0));
    assert_eq!(kinds.first(), Some(&101), "{kinds:?}");
    assert_eq!(kinds[kinds.len() - 2..], [105, 107], "{kinds:?}");
    assert!(kinds.contains(&106), "{kinds:?}");
    assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 0);
}

/// SIGTERM and SIGINT end the server with status 0, as uftrace's.
#[test]
fn recv_stops_on_sigterm_and_sigint() {
    let tmp = tempfile::tempdir().unwrap();
    for (i, sig) in [libc::SIGTERM, libc::SIGINT].into_iter().enumerate() {
        let mut server = Server::start(false, &tmp.path().join(format!("recv{i}")), &[]);
        let pid = server.guard.child_mut().id() as libc::pid_t;
        // SAFETY: `pid` is our own child, still running (the guard reaps it).
        assert_eq!(unsafe { libc::kill(pid, sig) }, 0);
        let start = Instant::now();
        let status = loop {
            if let Some(status) = server.guard.child_mut().try_wait().unwrap() {
                break status;
            }
            assert!(start.elapsed() < Duration::from_secs(10), "still running");
            std::thread::sleep(Duration::from_millis(10));
        };
        assert_eq!(status.code(), Some(0), "signal {sig}: {}", server.stderr());
    }
}

/// An unreachable server, bad ports and `live --host` stop with one line and status 1, before
/// the program runs and without writing anything; a port in use stops `recv`. `--help` lists
/// the options, the banner lists `recv`.
#[test]
fn recv_and_host_errors() {
    let tmp = tempfile::tempdir().unwrap();
    let prog = util::testprog("abc", Mode::Pg);
    let prog = prog.to_str().unwrap();
    let utrace = |args: &[&str]| {
        let mut cmd = Command::new(util::utrace_bin());
        cmd.current_dir(tmp.path()).args(args);
        util::run(cmd)
    };
    let closed = free_port().to_string();
    let cases: [(&[&str], &str); 5] = [
        (
            &["record", "--host", "127.0.0.1", "--port", &closed, prog],
            "cannot connect to 127.0.0.1:",
        ),
        (
            &["record", "--host", "127.0.0.1", "--port", "0", prog],
            "invalid port number: 0",
        ),
        (
            &["record", "--host", "127.0.0.1", "--port", "65536", prog],
            "invalid port number: 65536",
        ),
        (&["recv", "--port", "http"], "invalid port number: http"),
        (&["live", "--host", "127.0.0.1", prog], "--host"),
    ];
    for (args, text) in cases {
        let out = utrace(args);
        assert_eq!(out.status.code(), Some(1), "{out}");
        assert!(
            out.stderr.contains(text) && out.stderr.lines().count() == 2,
            "{out}"
        );
        assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 0, "{out}");
    }
    let server = Server::start(false, &tmp.path().join("recv"), &[]);
    // A program that cannot be recorded: refused before the server hears of it.
    let port = server.port.to_string();
    let out = utrace(&[
        "record",
        "--host",
        "127.0.0.1",
        "--port",
        &port,
        "/bin/true",
    ]);
    assert_eq!(out.status.code(), Some(1), "{out}");
    assert!(out.stderr.contains("Can't find 'mcount' symbol"), "{out}");
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(std::fs::read_dir(&server.root).unwrap().count(), 0);
    let out = utrace(&["recv", "-d", "other", "--port", &server.port.to_string()]);
    assert_eq!(out.status.code(), Some(1), "{out}");
    assert!(out.stderr.contains("cannot listen on port"), "{out}");

    let help = utrace(&["--help"]).stdout;
    for opt in ["--host=HOST", "--port=PORT", "--run-cmd=CMD"] {
        assert!(help.contains(opt), "{opt} not in --help");
    }
    assert!(utrace(&["--usage"]).stdout.contains("\n   recv  "));
}
