//! The flight recorder (`record --flight-recorder=SIZE`, issue 22): only the newest SIZE of
//! records per thread are kept, and written when a dump is asked for: by a signal
//! (`--signal USR1@dump`), a trigger (`-T marker@dump`), a call longer than a threshold
//! (`-T slow@time=5ms,dump`), a crash, and at exit.
//!
//! testprogs/flight.c runs phase A (N calls of `a_leaf(i)`), then the dump point, then phase B
//! (N calls of `b_leaf(i)`). The leaves' argument is recorded (`-A`), so a test sees which calls
//! a dump kept: the newest ones, consecutive up to the last (`N - 1`), the oldest gone behind a
//! `LOST` line. Every data directory is replayed and reported by utrace, and replayed by
//! uftrace. Dumps taken while other threads write keep every thread's records whole, in order
//! and written once; threads that end are written whole.

use crate::normalize::{self, Anchor};
use crate::util::{self, Mode};
use std::path::Path;

/// Per-thread size in the tests: 256 KiB hold about 6500 leaf calls (40 bytes each).
const SIZE: u64 = 256 << 10;
/// Leaf calls per phase: 8 MB of records, far more than [`SIZE`].
const N: u64 = 200_000;

/// A flight recording of `flight MODE N` with `opts`; the recorder's output.
fn record(dir: &Path, mode: &str, opts: &[&str]) -> util::Output {
    let prog = util::testprog("flight", Mode::Pg);
    let size = format!("--flight-recorder={SIZE}");
    let mut all = vec![
        "--no-sched",
        size.as_str(),
        "-A",
        "a_leaf@arg1",
        "-A",
        "b_leaf@arg1",
    ];
    all.extend_from_slice(opts);
    util::record_with(false, dir, &prog, &[mode, &N.to_string()], &all)
}

/// What a replay shows of one flight recording.
struct Shown {
    text: String,
    /// The arguments of the `a_leaf` and `b_leaf` calls shown, in order.
    a: Vec<u64>,
    b: Vec<u64>,
    lost: usize,
}

/// Replays `dir` with utrace (and reports it, and replays it with uftrace when installed:
/// both must succeed).
fn replay(dir: &Path) -> Shown {
    let out = util::utrace_replay(dir, &[]);
    out.assert_success();
    let report = util::run({
        let mut cmd = std::process::Command::new(util::utrace_bin());
        cmd.args(["report", "--no-pager", "-d"]).arg(dir);
        cmd
    });
    report.assert_success();
    assert!(report.stdout.contains("_leaf"), "{report}");
    if util::uftrace_available() {
        let theirs = util::uftrace_replay(dir, &[]);
        theirs.assert_success();
        assert!(theirs.stdout.contains("_leaf("), "{theirs}");
        // The same lines. LOST lines are left out: uftrace 0.13 hides some in the middle of
        // the data by a rule not known yet (utrace hides only the one that opens the data).
        let lines = |text: &str| -> String {
            normalize::by_task(text, Anchor::Start)
                .lines()
                .filter(|l| !l.contains("/* LOST "))
                .map(|l| format!("{l}\n"))
                .collect()
        };
        let (want, got) = (lines(&theirs.stdout), lines(&out.stdout));
        assert!(want == got, "{}", normalize::diff(&want, &got));
    }
    let args = |name: &str| -> Vec<u64> {
        out.stdout
            .lines()
            .filter_map(|l| l.split_once(&format!("{name}(")))
            .filter_map(|(_, rest)| number(rest.split_once(')')?.0))
            .collect()
    };
    Shown {
        a: args("a_leaf"),
        b: args("b_leaf"),
        lost: out.stdout.matches("/* LOST ").count(),
        text: out.stdout,
    }
}

/// An argument as replay prints it: decimal, or hex from 100000 on.
fn number(text: &str) -> Option<u64> {
    match text.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => text.parse().ok(),
    }
}

/// `calls` are the newest calls of a phase, complete: consecutive and up to the last one,
/// and bounded by the ring (the oldest are gone).
fn assert_newest(calls: &[u64], what: &str, text: &str) {
    assert!(
        calls.len() > 1000,
        "{what}: too few calls kept ({})\n{text}",
        calls.len()
    );
    assert_eq!(
        calls.last(),
        Some(&(N - 1)),
        "{what}: the newest call is missing"
    );
    assert!(
        calls.windows(2).all(|w| w[1] == w[0] + 1),
        "{what}: the calls kept are not consecutive"
    );
    assert!(
        (calls.len() as u64) < SIZE / 32,
        "{what}: more calls than {SIZE} bytes hold: {}",
        calls.len()
    );
}

/// The positions of `needle`'s lines in `text`, in order.
fn line_of(text: &str, needle: &str) -> Option<usize> {
    text.lines().position(|l| l.contains(needle))
}

fn dat_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.path().extension().is_some_and(|x| x == "dat"))
        .map(|e| e.metadata().unwrap().len())
        .sum()
}

/// A dump in the middle (`point` is the dump point's line) and one at exit: phase A's newest
/// calls then `LOST` then phase B's newest.
fn assert_two_dumps(dir: &Path, point: &str) {
    let shown = replay(dir);
    let text = &shown.text;
    assert_newest(&shown.a, "phase A", text);
    assert_newest(&shown.b, "phase B", text);
    // The LOST record that opens the data shows no line (as in uftrace 0.13).
    assert_eq!(
        shown.lost, 1,
        "one LOST line before the second dump's records\n{text}"
    );
    // The newest calls before the dump point are complete and in order.
    let a_last = line_of(text, "a_last();").expect("a_last() shown");
    let end_a = line_of(text, "} /* phase_a */").expect("phase_a's exit shown");
    let point = line_of(text, point).unwrap_or_else(|| panic!("{point} shown\n{text}"));
    let b_first = line_of(text, "b_leaf(").unwrap();
    assert!(a_last < end_a && end_a < point && point < b_first, "{text}");
    assert!(text.contains("b_last();") && text.contains("} /* phase_b */"));
    // Two dumps, each of at most SIZE (and a LOST record).
    assert!(dat_bytes(dir) <= 2 * (SIZE + 16), "{}", dat_bytes(dir));
}

#[test]
fn flight_signal_dumps_the_newest_records() {
    let dir = tempfile::tempdir().unwrap();
    record(dir.path(), "signal", &["--signal", "USR1@dump"]).assert_success();
    assert_two_dumps(dir.path(), "raise() {");
}

#[test]
fn flight_trigger_dumps_at_the_function_entry() {
    let dir = tempfile::tempdir().unwrap();
    record(dir.path(), "marker", &["-T", "marker@dump"]).assert_success();
    assert_two_dumps(dir.path(), "marker() {");
}

#[test]
fn flight_time_threshold_dumps_after_a_long_call() {
    let dir = tempfile::tempdir().unwrap();
    record(dir.path(), "slow", &["-T", "slow@time=5ms,dump"]).assert_success();
    assert_two_dumps(dir.path(), "} /* slow */");
    let shown = replay(dir.path());
    // The slow call (10 ms) is whole, after the ten fast ones.
    let slow = line_of(&shown.text, "slow() {").unwrap();
    assert!(shown
        .text
        .lines()
        .nth(slow - 1)
        .unwrap()
        .contains("fast();"));
    assert!(shown.text.contains("nanosleep();"));

    // A library call (through the PLT hooks) dumps alike.
    let dir = tempfile::tempdir().unwrap();
    record(dir.path(), "slow", &["-T", "nanosleep@time=5ms,dump"]).assert_success();
    assert_two_dumps(dir.path(), "nanosleep();");

    // A threshold the call does not reach: no dump then, only phase B's newest at exit.
    let dir = tempfile::tempdir().unwrap();
    record(dir.path(), "slow", &["-T", "slow@time=50ms,dump"]).assert_success();
    let shown = replay(dir.path());
    assert!(
        shown.a.is_empty() && !shown.text.contains("slow() {"),
        "{}",
        shown.text
    );
    assert_newest(&shown.b, "phase B", &shown.text);
}

#[test]
fn flight_crash_dumps_the_calls_before_it() {
    let dir = tempfile::tempdir().unwrap();
    let out = record(dir.path(), "crash", &[]);
    assert!(!out.status.success(), "the program crashes\n{out}");
    let shown = replay(dir.path());
    assert_newest(&shown.a, "phase A", &shown.text);
    assert!(shown.b.is_empty());
    let end_a = line_of(&shown.text, "} /* phase_a */").unwrap();
    let crash = line_of(&shown.text, "crash_here() {").expect("the crashing call shown");
    assert!(end_a < crash);
    assert!(dat_bytes(dir.path()) <= SIZE + 16);
}

#[test]
fn flight_exit_keeps_only_the_newest_records() {
    let dir = tempfile::tempdir().unwrap();
    record(dir.path(), "exit", &[]).assert_success();
    let shown = replay(dir.path());
    // Phase A is far older than SIZE: all of it is gone.
    assert!(shown.a.is_empty(), "{}", shown.text);
    assert_newest(&shown.b, "phase B", &shown.text);
    // The one LOST record opens the data: no line.
    assert_eq!(shown.lost, 0);
    assert!(shown.text.contains("} /* main */"));
    let bytes = dat_bytes(dir.path());
    assert!(bytes <= SIZE + 16 && bytes > SIZE / 2, "{bytes}");
}

/// The records of one `.dat` file: `Err(count)` for LOST, `Ok(time)` else; panics on a record
/// that does not decode. The only payload is the one integer argument of the functions
/// recorded with `-A` (8 bytes after their ENTRY).
fn raw_records(path: &Path) -> Vec<Result<u64, u64>> {
    use record_format::raw::{RawRecord, RecordKind, RECORD_SIZE};
    let bytes = std::fs::read(path).unwrap();
    let mut records = Vec::new();
    let mut pos = 0;
    while pos < bytes.len() {
        let head = bytes
            .get(pos..pos + RECORD_SIZE)
            .unwrap_or_else(|| panic!("{}: truncated at {pos}", path.display()));
        let r = RawRecord::decode(head.try_into().unwrap())
            .unwrap_or_else(|| panic!("{}: record at {pos} does not decode", path.display()));
        pos += RECORD_SIZE;
        records.push(match r.kind {
            RecordKind::Lost => Err(r.addr),
            RecordKind::Entry if r.more => {
                pos += 8;
                Ok(r.time)
            }
            _ => {
                assert!(!r.more, "{}: payload at {pos}", path.display());
                Ok(r.time)
            }
        });
    }
    assert_eq!(pos, bytes.len(), "{}", path.display());
    records
}

#[test]
fn flight_dumps_while_threads_write_are_consistent() {
    // Up to 40 signal dumps while two threads write (the filling chunk of a running thread is
    // copied and checked): every record decodes, each thread's records are in time order across
    // the dumps, none is written twice, and each dump holds at most SIZE per thread.
    let prog = util::testprog("flight", Mode::Pg);
    let dir = tempfile::tempdir().unwrap();
    let size = format!("--flight-recorder={SIZE}");
    let opts = [
        "--no-sched",
        size.as_str(),
        "--signal",
        "USR1@dump",
        "-A",
        "t_leaf@arg1",
    ];
    util::record_with(false, dir.path(), &prog, &["threads", "100000"], &opts).assert_success();
    let mut workers = 0;
    for entry in std::fs::read_dir(dir.path()).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if !name.ends_with(".dat") || name.starts_with("perf") {
            continue;
        }
        let recs = raw_records(&path);
        let times: Vec<u64> = recs.iter().filter_map(|r| r.ok()).collect();
        // (Two records may share a nanosecond; a record written twice would go back in time.)
        let back = times.windows(2).position(|w| w[0] > w[1]);
        assert_eq!(back, None, "{name}: records out of order or written twice");
        let lost = recs.iter().filter(|r| r.is_err()).count() as u64;
        let len = std::fs::metadata(&path).unwrap().len();
        assert!(len <= 41 * (SIZE + 16), "{name}: {len} bytes");
        // A worker (2 million calls) dropped records between dumps.
        if times.len() > 10_000 {
            workers += 1;
            assert!(lost >= 1, "{name}: nothing dropped");
        }
    }
    assert_eq!(workers, 2);
    let shown = util::utrace_replay(dir.path(), &[]);
    shown.assert_success();
    let calls = leaf_calls_per_task(&shown.stdout);
    assert_eq!(calls.len(), 2, "{}", shown.stdout);
    for (tid, calls) in calls {
        assert!(calls.len() > 10_000, "task {tid}: {} calls", calls.len());
        // Each worker calls t_leaf(0) .. t_leaf(999999); the exit dump has the last.
        assert_eq!(calls.last().map(|c| c.0), Some(999_999), "task {tid}");
        // No call goes missing without a LOST line, and a LOST line counts what is missing:
        // each call is an ENTRY with its argument (24 bytes) and an EXIT (16).
        for w in calls.windows(2) {
            let ((prev, _), (next, lost)) = (w[0], w[1]);
            match lost {
                None => assert_eq!(next, prev + 1, "task {tid}: calls lost without a LOST line"),
                Some(n) => {
                    let missing = next.saturating_sub(prev + 1) * 40;
                    assert!(
                        next > prev + 1 && (n * 16).abs_diff(missing) <= 40,
                        "task {tid}: LOST {n} records between t_leaf({prev}) and t_leaf({next})"
                    );
                }
            }
        }
    }
    if util::uftrace_available() {
        util::uftrace_replay(dir.path(), &[]).assert_success();
    }
}

/// The `t_leaf` calls a replay shows, per task: each call's argument and, if a LOST line comes
/// between it and the task's previous call, the records that line counts.
fn leaf_calls_per_task(text: &str) -> std::collections::BTreeMap<u32, Vec<(u64, Option<u64>)>> {
    let mut tasks = std::collections::BTreeMap::new();
    let mut lost_since = std::collections::HashMap::new();
    for line in text.lines() {
        let Some(tid) = line
            .split_once('[')
            .and_then(|(_, rest)| rest.split_once(']'))
            .and_then(|(tid, _)| tid.trim().parse::<u32>().ok())
        else {
            continue;
        };
        if let Some((_, rest)) = line.split_once("/* LOST ") {
            let n: u64 = rest.split_whitespace().next().unwrap().parse().unwrap();
            *lost_since.entry(tid).or_insert(0) += n;
        } else if let Some((_, rest)) = line.split_once("t_leaf(") {
            let arg = number(rest.split_once(')').unwrap().0).unwrap();
            let calls: &mut Vec<_> = tasks.entry(tid).or_default();
            calls.push((arg, lost_since.remove(&tid)));
        }
    }
    tasks
}

#[test]
fn flight_threads_and_exec_images_are_all_written() {
    // Threads that end hand their ring to the recorder, and so does an image replaced by exec
    // (same tid): every task's calls are there, as in a normal recording (the programs are
    // small: nothing is dropped).
    let funcs = |dir: &Path| -> Vec<String> {
        let out = util::utrace_replay(dir, &["--no-merge"]);
        out.assert_success();
        let mut f: Vec<String> = out
            .stdout
            .lines()
            .filter_map(|l| Some(l.split_once("| ")?.1.trim().to_string()))
            .collect();
        // thread_exec: whether main gets out of pthread_create() and into pthread_join()
        // before the thread's exec ends it is the scheduler's choice, in either recording.
        f.retain(|l| l != "pthread_join() {" && l != "} /* pthread_create */");
        f.sort();
        f
    };
    for name in ["thread", "exec", "thread_exec"] {
        let prog = util::testprog(name, Mode::Pg);
        let flight = tempfile::tempdir().unwrap();
        let opts = ["--no-sched", "--flight-recorder=64k"];
        util::record_with(false, flight.path(), &prog, &[], &opts).assert_success();
        let normal = tempfile::tempdir().unwrap();
        util::record_with(false, normal.path(), &prog, &[], &["--no-sched"]).assert_success();
        assert_eq!(funcs(flight.path()), funcs(normal.path()), "{name}");
    }
}

#[test]
fn dump_needs_the_flight_recorder() {
    let prog = util::testprog("flight", Mode::Pg);
    let dir = tempfile::tempdir().unwrap();
    // Each case: its options and the start of its one error line.
    let cases: [(&[&str], &str); 7] = [
        (
            &["-T", "marker@dump"],
            "the dump action needs --flight-recorder=SIZE",
        ),
        (
            &["--signal", "USR1@dump"],
            "the dump action needs --flight-recorder=SIZE",
        ),
        (
            &["--flight-recorder=lots"],
            "invalid --flight-recorder size: lots (e.g. 16M, 512k or bytes)",
        ),
        (
            &["--flight-recorder=0"],
            "invalid --flight-recorder size: 0 (e.g. 16M, 512k or bytes)",
        ),
        (
            &["--flight-recorder=1T"],
            "invalid --flight-recorder size: 1T (e.g. 16M, 512k or bytes)",
        ),
        (
            &["--flight-recorder=100000G"],
            "flight recorder size 100000G is too large: each thread keeps that much, ",
        ),
        (
            &["--flight-recorder=1M", "--buffer=64k"],
            "--flight-recorder and --buffer cannot be used together (SIZE sets the buffers)",
        ),
    ];
    for (opts, expected) in cases {
        let out = util::record_with(false, dir.path(), &prog, &["exit", "10"], opts);
        assert!(!out.status.success(), "{opts:?}: {out}");
        let errors: Vec<&str> = out
            .stderr
            .lines()
            .filter(|l| l.contains("ERROR"))
            .map(str::trim)
            .collect();
        assert_eq!(errors.len(), 1, "{opts:?}: {out}");
        assert!(
            errors[0].starts_with(&format!("ERROR: {expected}")),
            "{opts:?}: {out}"
        );
        assert!(!out.stderr.contains("panic"), "{opts:?}: {out}");
    }
}

/// For `record_matrix::every_testprog_is_recorded`.
pub fn covers(prog: &str) -> bool {
    prog == "flight"
}
