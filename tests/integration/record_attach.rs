//! `utrace record -p PID` / `utrace live -p PID`: attaching to programs that are already
//! running and were built without instrumentation (`-O2`, no `-pg`): their library calls are
//! traced through libmcount's PLT hooks while attached. The programs print a checksum of their
//! work every 100 ms: a run that was attached to and detached from must print the same lines
//! as an untraced one, exit with status 0 and write nothing to stderr (no stray signal), and
//! the trace must replay with the calls and their durations. Also a multi-threaded program
//! (threads existing at attach time and created while attached), one process attached twice
//! in a row, `live -p`, signals sent while the process is stopped, and the refusals (no such
//! process, a statically linked program).

use crate::util;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The test programs of this file (built here, `-O2` without `-pg`).
const PROGS: [&str; 7] = [
    "attach_work",
    "attach_throw",
    "attach_threads",
    "attach_signals",
    "attach_rate",
    "attach_timer",
    "attach_malloc",
];

/// Whether `prog` is one of this file's programs (they are not `-pg` programs: the record
/// matrix and the slow-path test leave them out).
pub fn covers(prog: &str) -> bool {
    PROGS.contains(&prog)
}

/// Builds `testprogs/NAME.c` with `gcc -O2 EXTRA` (`NAME.cc` with `g++`) into `dir`.
pub(crate) fn build(name: &str, dir: &Path, extra: &[&str]) -> PathBuf {
    let out = dir.join(name);
    let cc = util::testprogs_src().join(format!("{name}.cc"));
    let (compiler, src) = match cc.is_file() {
        true => ("g++", cc),
        false => ("gcc", util::testprogs_src().join(format!("{name}.c"))),
    };
    let status = Command::new(compiler)
        .arg("-O2")
        .args(extra)
        .arg("-o")
        .arg(&out)
        .arg(src)
        .arg("-fno-builtin")
        .arg("-pthread")
        .status()
        .expect("gcc");
    assert!(status.success(), "gcc failed for {name}");
    out
}

/// A running test program whose stdout and stderr go to files; killed if the test fails.
pub(crate) struct Running {
    child: Option<Child>,
    out: PathBuf,
    err: PathBuf,
}

impl Running {
    pub(crate) fn start(prog: &Path, args: &[&str], dir: &Path, tag: &str) -> Running {
        Running::start_after(prog, args, dir, tag, "tick 2 ")
    }

    /// Starts `prog` and waits until its output holds `seen`.
    pub(crate) fn start_after(
        prog: &Path,
        args: &[&str],
        dir: &Path,
        tag: &str,
        seen: &str,
    ) -> Running {
        let out = dir.join(format!("{tag}.out"));
        let err = dir.join(format!("{tag}.err"));
        let child = Command::new(prog)
            .args(args)
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&out).unwrap())
            .stderr(std::fs::File::create(&err).unwrap())
            .spawn()
            .expect("start the test program");
        let r = Running {
            child: Some(child),
            out,
            err,
        };
        // Running its loop (libraries loaded, first lines printed).
        let start = Instant::now();
        while !r.stdout().contains(seen) {
            assert!(start.elapsed() < Duration::from_secs(10), "no ticks");
            std::thread::sleep(Duration::from_millis(10));
        }
        r
    }

    pub(crate) fn pid(&self) -> String {
        self.child.as_ref().unwrap().id().to_string()
    }

    pub(crate) fn stdout(&self) -> String {
        std::fs::read_to_string(&self.out).unwrap_or_default()
    }

    /// Waits for the end; returns the exit status, stdout and stderr.
    pub(crate) fn finish(mut self) -> (std::process::ExitStatus, String, String) {
        let status = self.child.take().unwrap().wait().unwrap();
        let err = std::fs::read_to_string(&self.err).unwrap();
        (status, self.stdout(), err)
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// `utrace SUB -p PID OPTS` (a minute at most).
pub(crate) fn utrace_pid(sub: &str, pid: &str, opts: &[&str]) -> util::Output {
    let mut cmd = Command::new(util::utrace_bin());
    cmd.arg(sub).args(opts).args(["-p", pid]);
    util::run_for(cmd, Duration::from_secs(60))
}

/// Asserts that the traced run printed what an untraced one prints, ended well and quietly.
pub(crate) fn assert_unharmed(traced: (std::process::ExitStatus, String, String), clean: &str) {
    let (status, out, err) = traced;
    assert!(status.success(), "the program ended with {status}");
    assert_eq!(err, "", "the program's stderr");
    assert_eq!(out, clean, "the program's output changed");
}

/// The `replay` lines of `dir`, checked to show `calls` with durations.
pub(crate) fn assert_replays(dir: &Path, calls: &[&str]) -> String {
    let out = util::utrace_replay(dir, &[]);
    out.assert_success();
    for call in calls {
        let line = out
            .stdout
            .lines()
            .find(|l| l.contains(&format!("| {call}()")))
            .unwrap_or_else(|| panic!("no {call}() in the replay:\n{}", out.stdout));
        // A duration: `12.3 us [ tid] | call();` (or `call() {`, whose `}` line has it).
        let mut words = line.split_whitespace();
        let (value, unit) = (words.next().unwrap(), words.next().unwrap());
        let timed = value.parse::<f64>().is_ok() && ["ns", "us", "ms", "s"].contains(&unit);
        assert!(timed || line.ends_with('{'), "{line}");
    }
    out.stdout
}

/// In every task of `dir`'s raw records (`utrace dump`), each exit closes an entry before it.
fn assert_entries_first(dir: &Path) {
    let mut cmd = Command::new(util::utrace_bin());
    cmd.args(["dump", "-d", dir.to_str().unwrap()]);
    let dump = util::run(cmd);
    dump.assert_success();
    let mut open: std::collections::HashMap<String, i64> = Default::default();
    for line in dump.stdout.lines() {
        let Some(tid) = line.split_whitespace().nth(1) else {
            continue;
        };
        let step = match () {
            _ if line.contains("[entry]") => 1,
            _ if line.contains("[exit ]") => -1,
            _ => continue,
        };
        let depth = open.entry(tid.to_string()).or_default();
        *depth += step;
        assert!(
            *depth >= 0,
            "an exit without its entry: {line}\n{}",
            dump.stdout
        );
    }
    assert!(!open.is_empty(), "no records:\n{}", dump.stdout);
}

/// The untraced output of `prog ARGS`.
pub(crate) fn clean_run(prog: &Path, args: &[&str]) -> std::thread::JoinHandle<String> {
    let (prog, args) = (
        prog.to_path_buf(),
        args.iter().map(|a| a.to_string()).collect::<Vec<_>>(),
    );
    std::thread::spawn(move || {
        let out = Command::new(prog).args(args).output().unwrap();
        assert!(out.status.success());
        String::from_utf8(out.stdout).unwrap()
    })
}

#[test]
fn attach_for_a_second_and_detach() {
    let tmp = tempfile::tempdir().unwrap();
    let prog = build("attach_work", tmp.path(), &[]);
    let clean = clean_run(&prog, &["30"]);
    let run = Running::start(&prog, &["30"], tmp.path(), "work");
    let data = tmp.path().join("data");
    let rec = utrace_pid(
        "record",
        &run.pid(),
        &["--duration=1s", "-d", data.to_str().unwrap()],
    );
    rec.assert_success();
    assert_eq!(rec.stderr, "", "{rec}");
    assert_unharmed(run.finish(), &clean.join().unwrap());
    let replay = assert_replays(&data, &["snprintf", "strlen", "nanosleep", "printf"]);
    // About ten ticks of 16 snprintf calls each were recorded.
    let n = replay
        .lines()
        .filter(|l| l.ends_with("snprintf();"))
        .count();
    assert!((5 * 16..=15 * 16).contains(&n), "{n} snprintf calls");
    let info = util::run({
        let mut c = Command::new(util::utrace_bin());
        c.args(["info", "-d", data.to_str().unwrap()]);
        c
    });
    assert!(info.stdout.contains("attach_work"), "{info}");
}

#[test]
fn attach_to_threads_existing_and_new() {
    let tmp = tempfile::tempdir().unwrap();
    let prog = build("attach_threads", tmp.path(), &[]);
    let clean = clean_run(&prog, &[]);
    let run = Running::start(&prog, &[], tmp.path(), "threads");
    let data = tmp.path().join("data");
    // From tick 2-3 to about tick 25: two workers are created at tick 15.
    let rec = utrace_pid(
        "record",
        &run.pid(),
        &["--duration=2s", "-d", data.to_str().unwrap()],
    );
    rec.assert_success();
    assert_unharmed(run.finish(), &clean.join().unwrap());
    let tasks = std::fs::read_to_string(data.join("task.txt")).unwrap();
    let tids = tasks.lines().filter(|l| l.starts_with("TASK ")).count();
    assert_eq!(tids, 5, "main and four workers:\n{tasks}");
    let replay = assert_replays(&data, &["snprintf", "strlen", "pthread_create"]);
    let mut with_calls: Vec<&str> = replay
        .lines()
        .filter(|l| l.ends_with("| snprintf();"))
        .filter_map(|l| l.split('[').nth(1)?.split(']').next())
        .collect();
    with_calls.sort_unstable();
    with_calls.dedup();
    assert_eq!(with_calls.len(), 5, "tasks with calls: {with_calls:?}");
}

#[test]
fn attach_twice_in_a_row_and_live() {
    let tmp = tempfile::tempdir().unwrap();
    let prog = build("attach_work", tmp.path(), &[]);
    let clean = clean_run(&prog, &["40"]);
    let run = Running::start(&prog, &["40"], tmp.path(), "twice");
    let (d1, d2) = (tmp.path().join("d1"), tmp.path().join("d2"));
    for d in [&d1, &d2] {
        let rec = utrace_pid(
            "record",
            &run.pid(),
            &["--duration=600ms", "-d", d.to_str().unwrap()],
        );
        rec.assert_success();
        // No pause: the thread is still in the `nanosleep` entered in the previous session.
        std::thread::sleep(Duration::from_millis(1));
    }
    let live = utrace_pid("live", &run.pid(), &["--duration=500ms"]);
    live.assert_success();
    assert!(live.stdout.contains("| snprintf();"), "{live}");
    assert_unharmed(run.finish(), &clean.join().unwrap());
    for d in [&d1, &d2] {
        let replay = assert_replays(d, &["snprintf", "qsort"]);
        // Each session its own: one SESS line, and no exit of a call entered in an earlier
        // session (the thread was in `nanosleep` when a session started).
        let tasks = std::fs::read_to_string(d.join("task.txt")).unwrap();
        assert_eq!(tasks.lines().filter(|l| l.starts_with("SESS ")).count(), 1);
        assert!(replay.lines().count() > 20, "{replay}");
        assert_entries_first(d);
    }
}

#[test]
fn stop_by_sigint_or_by_the_process_end() {
    let tmp = tempfile::tempdir().unwrap();
    let prog = build("attach_work", tmp.path(), &[]);
    let clean = clean_run(&prog, &["25"]);
    let run = Running::start(&prog, &["25"], tmp.path(), "sigint");
    // Ctrl-C to utrace: it detaches; the program goes on.
    let d1 = tmp.path().join("d1");
    let mut rec = Command::new(util::utrace_bin())
        .args(["record", "-d", d1.to_str().unwrap(), "-p", &run.pid()])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_attached(&run.pid());
    // Two ticks printed while attached: calls were recorded.
    let ticks = run.stdout().lines().count();
    let start = Instant::now();
    while run.stdout().lines().count() < ticks + 2 {
        assert!(start.elapsed() < Duration::from_secs(20), "no ticks");
        std::thread::sleep(Duration::from_millis(5));
    }
    // SAFETY: kill takes no pointers; the pid is our child's.
    unsafe { libc::kill(rec.id() as i32, libc::SIGINT) };
    let status = rec.wait().unwrap();
    assert!(status.success(), "utrace after SIGINT: {status}");
    assert_replays(&d1, &["snprintf", "nanosleep"]);
    // No duration: utrace ends when the program does, and the data replays.
    let d2 = tmp.path().join("d2");
    let rec = utrace_pid("record", &run.pid(), &["-d", d2.to_str().unwrap()]);
    rec.assert_success();
    assert!(
        !Path::new(&format!("/proc/{}/maps", run.pid())).exists() || {
            // The program has ended (a zombie until reaped below).
            let stat = std::fs::read_to_string(format!("/proc/{}/stat", run.pid())).unwrap();
            stat.contains(") Z ")
        }
    );
    assert_unharmed(run.finish(), &clean.join().unwrap());
    let replay = assert_replays(&d2, &["snprintf", "fflush"]);
    assert!(replay.lines().count() > 50, "{replay}");
}

/// A process whose main thread has called `pthread_exit` (a zombie, its `/proc/PID` entries
/// empty) while a worker runs on: attached through the worker's `/proc/PID/task/TID`.
#[test]
fn attach_after_the_main_thread_exited() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("pexit.c");
    std::fs::write(
        &src,
        r#"#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
static void *w(void *a)
{
	(void)a;
	for (int i = 0; i < 25; i++) {
		char b[32];
		snprintf(b, sizeof(b), "round %d", i);
		printf("tick %d %zu\n", i, strlen(b));
		fflush(stdout);
		usleep(100000);
	}
	return NULL;
}
int main(void)
{
	pthread_t t;
	pthread_create(&t, NULL, w, NULL);
	pthread_exit(NULL);
}
"#,
    )
    .unwrap();
    let exe = tmp.path().join("pexit");
    let built = Command::new("gcc")
        .args(["-O2", "-pthread", "-fno-builtin", "-o"])
        .arg(&exe)
        .arg(&src)
        .status()
        .unwrap();
    assert!(built.success());
    let run = Running::start(&exe, &[], tmp.path(), "pexit");
    let d = tmp.path().join("d");
    let rec = utrace_pid(
        "record",
        &run.pid(),
        &["--duration=500ms", "-d", d.to_str().unwrap()],
    );
    rec.assert_success();
    let (status, out, err) = run.finish();
    assert!(status.success(), "{status}");
    assert_eq!(err, "");
    assert_eq!(out.lines().count(), 25, "{out}");
    assert_replays(&d, &["snprintf", "usleep"]);
}

/// Attaches to `run` `n` times for 300 ms, recording into `dir`/d0, d1...
fn attach_times(run: &Running, dir: &Path, n: usize) {
    for i in 0..n {
        let d = dir.join(format!("d{i}"));
        let rec = utrace_pid(
            "record",
            &run.pid(),
            &["--duration=300ms", "-d", d.to_str().unwrap()],
        );
        rec.assert_success();
    }
}

/// Signals that arrive while the process is stopped (4000 queued real-time signals, one every
/// 0.5 ms, over three attaches) are all delivered.
#[test]
fn signals_sent_meanwhile_are_delivered() {
    let tmp = tempfile::tempdir().unwrap();
    let prog = build("attach_signals", tmp.path(), &[]);
    let run = Running::start(&prog, &[], tmp.path(), "signals");
    attach_times(&run, tmp.path(), 3);
    let (status, out, err) = run.finish();
    assert!(status.success(), "{status}");
    assert_eq!(err, "");
    assert_eq!(out.lines().last(), Some("signals 4000"), "{out}");
    let ticks = out.lines().filter(|l| l.starts_with("tick ")).count();
    for (t, line) in out.lines().filter(|l| l.starts_with("tick ")).enumerate() {
        assert_eq!(
            line,
            format!("tick {t} sum {}", format!("tick {t} len").len())
        );
    }
    assert!(ticks >= 5, "{out}");
    assert_replays(&tmp.path().join("d0"), &["kill", "getpid"]);
}

/// Signals from outside the process (a 1 ms interval timer) arriving while utrace makes its
/// calls in it: two of them during one call once spun utrace forever with the process frozen.
/// Now the record ends in time, and the program ends well with its handler run. (4 s of
/// ticks: both records attach to it running, also on a loaded machine.)
#[test]
fn timer_signals_during_the_calls() {
    let tmp = tempfile::tempdir().unwrap();
    let prog = build("attach_timer", tmp.path(), &[]);
    let run = Running::start(&prog, &["40"], tmp.path(), "timer");
    attach_times(&run, tmp.path(), 2);
    let (status, out, err) = run.finish();
    assert!(status.success(), "{status}");
    assert_eq!(err, "");
    assert_eq!(out.lines().last(), Some("alarms ok"), "{out}");
    assert_eq!(out.lines().count(), 41, "{out}");
    assert_replays(&tmp.path().join("d0"), &["snprintf", "nanosleep"]);
}

/// A main thread that loops on malloc/free is stopped inside malloc nearly every time: the
/// injected dlopen must not run there (it would wait for the arena lock its own thread
/// holds). Three attaches in a row end in time, and the program is unharmed. (4 s of ticks:
/// three records take 1.5 s and more on a loaded machine, and all attach to it running.)
#[test]
fn attach_to_a_thread_looping_on_malloc() {
    let tmp = tempfile::tempdir().unwrap();
    let prog = build("attach_malloc", tmp.path(), &[]);
    let clean = clean_run(&prog, &["40"]);
    let run = Running::start(&prog, &["40"], tmp.path(), "malloc");
    for i in 0..3 {
        let d = tmp.path().join(format!("d{i}"));
        let mut cmd = Command::new(util::utrace_bin());
        cmd.args(["record", "--duration=200ms", "-d", d.to_str().unwrap()])
            .args(["-p", &run.pid()]);
        util::run_for(cmd, Duration::from_secs(20)).assert_success();
    }
    assert_unharmed(run.finish(), &clean.join().unwrap());
    assert_replays(&tmp.path().join("d0"), &["malloc", "free"]);
}

/// The bytes of `prog`'s GOT (`.got` and `.got.plt`) in running process `pid` (a PIE whose
/// first mapping is at its load address).
fn got_bytes(pid: &str, prog: &Path) -> Vec<u8> {
    use std::io::{Read, Seek, SeekFrom};
    let sections = Command::new("readelf")
        .arg("-SW")
        .arg(prog)
        .output()
        .unwrap();
    let sections = String::from_utf8(sections.stdout).unwrap();
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap();
    let exe = std::fs::read_link(format!("/proc/{pid}/exe")).unwrap();
    let first = maps
        .lines()
        .find(|l| l.ends_with(exe.to_str().unwrap()))
        .unwrap();
    let base = u64::from_str_radix(first.split('-').next().unwrap(), 16).unwrap();
    let mut mem = std::fs::File::open(format!("/proc/{pid}/mem")).unwrap();
    let mut bytes = Vec::new();
    for name in [".got ", ".got.plt "] {
        let line = sections.lines().find(|l| l.contains(name)).unwrap();
        let rest = &line[line.find(name).unwrap() + name.len()..];
        let f: Vec<&str> = rest.split_whitespace().collect();
        let (addr, size) = (
            u64::from_str_radix(f[1], 16).unwrap(),
            usize::from_str_radix(f[3], 16).unwrap(),
        );
        let mut got = vec![0; size];
        mem.seek(SeekFrom::Start(base + addr)).unwrap();
        mem.read_exact(&mut got).unwrap();
        bytes.extend(got);
    }
    bytes
}

/// Whether utrace's attach to `pid` is done: libmcount is mapped and no tracer holds it.
fn attached(pid: &str) -> bool {
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap_or_default();
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    maps.contains("libmcount") && status.lines().any(|l| l == "TracerPid:\t0")
}

/// Polls until utrace's attach to `pid` is done (see [`attached`]), at most 20 s.
fn wait_attached(pid: &str) {
    let start = Instant::now();
    while !attached(pid) {
        assert!(start.elapsed() < Duration::from_secs(20), "no attach");
        std::thread::sleep(Duration::from_millis(5));
    }
    // The session started in the call made before the threads were let go.
}

/// After the detach, library calls no longer pass through libmcount: the program's GOT slots
/// hold, byte for byte, what they held before the attach (while attached they differ: its
/// calls lead to libmcount's PLT hooks).
#[test]
fn library_calls_are_unhooked_after_the_detach() {
    let tmp = tempfile::tempdir().unwrap();
    let prog = build("attach_rate", tmp.path(), &[]);
    let run = Running::start_after(&prog, &[], tmp.path(), "rate", "round 4:");
    let before = got_bytes(&run.pid(), &prog);
    let d = tmp.path().join("d");
    let mut rec = Command::new(util::utrace_bin())
        .args(["record", "--duration=1s", "-d", d.to_str().unwrap()])
        .args(["-p", &run.pid()])
        .spawn()
        .unwrap();
    wait_attached(&run.pid());
    let during = got_bytes(&run.pid(), &prog);
    assert!(rec.wait().unwrap().success());
    let after = got_bytes(&run.pid(), &prog);
    assert_ne!(during, before, "the attach did not hook the GOT");
    assert_eq!(after, before, "the GOT is not as it was after the detach");
    let (status, out, _) = run.finish();
    assert!(status.success());
    assert_eq!(out.lines().count(), 20, "{out}");
    assert_replays(&d, &["strlen"]);
}

#[test]
fn refusals_are_one_line() {
    let tmp = tempfile::tempdir().unwrap();
    // A pid that was just freed.
    let mut gone = Command::new("true").spawn().unwrap();
    let pid = gone.id().to_string();
    gone.wait().unwrap();
    let out = utrace_pid(
        "record",
        &pid,
        &["-d", tmp.path().join("x").to_str().unwrap()],
    );
    assert!(!out.status.success());
    assert!(
        out.stderr
            .contains(&format!("ERROR: no such process: {pid}")),
        "{out}"
    );
    assert_eq!(out.stderr.matches("ERROR").count(), 1, "{out}");
    assert!(!out.stderr.contains("panicked"), "{out}");

    let out = utrace_pid("record", "0", &[]);
    assert!(!out.status.success());
    assert!(out.stderr.contains("invalid pid: 0"), "{out}");

    // Options that cannot go with -p are refused, not ignored.
    let me = std::process::id().to_string();
    for opts in [&["-k"][..], &["--keep-pid"], &["-E", "x:y"], &["--nop"]] {
        let out = utrace_pid("record", &me, opts);
        assert!(!out.status.success(), "{out}");
        assert!(out.stderr.contains("cannot go with it"), "{out}");
    }
    // --list-event once panicked with -p (no program named); --nop said "no program to run".
    for sub in ["record", "live"] {
        for opt in ["--list-event", "--nop"] {
            let out = utrace_pid(sub, &me, &[opt]);
            assert!(!out.status.success(), "{out}");
            assert!(
                out.stderr.contains(&format!("{opt} cannot go with it")),
                "{out}"
            );
            assert_eq!(out.stderr.matches("ERROR").count(), 1, "{out}");
            assert!(!out.stderr.contains("panicked"), "{out}");
        }
    }
    // A bad --duration is an error, not a warning and 0; --duration without -p is refused.
    let out = utrace_pid("record", &me, &["--duration=xyz"]);
    assert!(!out.status.success(), "{out}");
    assert!(out.stderr.contains("invalid --duration: xyz"), "{out}");
    assert_eq!(out.stderr.matches("ERROR").count(), 1, "{out}");
    let out = util::run_for(
        {
            let mut c = Command::new(util::utrace_bin());
            c.args(["record", "--duration=1s", "true"]);
            c
        },
        Duration::from_secs(60),
    );
    assert!(!out.status.success(), "{out}");
    assert!(
        out.stderr.contains("--duration goes with -p/--pid only"),
        "{out}"
    );

    // A process that another tracer holds (a utrace attached to it meanwhile).
    let prog = build("attach_work", tmp.path(), &[]);
    let run = Running::start(&prog, &["30"], tmp.path(), "busy");
    let mut first = Command::new(util::utrace_bin())
        .args(["record", "--duration=3s", "-d"])
        .arg(tmp.path().join("first"))
        .args(["-p", &run.pid()])
        .spawn()
        .unwrap();
    wait_attached(&run.pid());
    let out = utrace_pid(
        "record",
        &run.pid(),
        &["-d", tmp.path().join("second").to_str().unwrap()],
    );
    assert!(!out.status.success(), "{out}");
    assert!(
        out.stderr
            .contains("is being traced by another utrace already"),
        "{out}"
    );
    assert!(first.wait().unwrap().success());
    drop(run);

    // A statically linked program: nothing can load libmcount into it.
    let src = tmp.path().join("static.c");
    std::fs::write(
        &src,
        "#include <unistd.h>\nint main(void){for(;;)pause();}\n",
    )
    .unwrap();
    let exe = tmp.path().join("static");
    let built = Command::new("gcc")
        .args(["-static", "-O2", "-o"])
        .arg(&exe)
        .arg(&src)
        .status()
        .unwrap();
    // Without a static C library the check cannot run: said, not silently skipped.
    if !built.success() {
        eprintln!(
            "refusals_are_one_line: gcc -static failed (no static libc?): static check skipped"
        );
        return;
    }
    let mut child = Command::new(&exe).spawn().unwrap();
    let out = utrace_pid("record", &child.id().to_string(), &[]);
    let _ = child.kill();
    let _ = child.wait();
    assert!(!out.status.success());
    assert!(out.stderr.contains("statically linked"), "{out}");
}
