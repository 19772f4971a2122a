//! Record-time filters, depth limits and time filters (`-F -N -D -t -C -T --max-stack` given to
//! `record`): libmcount applies them while the program runs, so what is filtered out is never
//! written (spec/cli.md §3.1, §3.4; runtime.md §12).
//!
//! Each case is recorded by `utrace record --no-libcall OPTS` and `uftrace record --no-libcall
//! OPTS` in every build mode. Then
//!
//! * the records themselves must match: the `[entry]`/`[exit ]` lines of `uftrace dump` (name
//!   and depth) of both data directories, so a filter applied only at replay time (through
//!   `default.opts`) does not pass;
//! * `uftrace replay` and `utrace replay` of utrace's data must print, per task and by function
//!   column, what `uftrace replay` of uftrace's data prints (from the first line: `-F b` hides
//!   `main`).

use std::path::Path;
use std::process::Command;

use crate::normalize::{self, Anchor};
use crate::record_matrix::MODES;
use crate::util::{self, Mode, Output};

/// The program, its arguments and the record options.
const CASES: &[(&str, &[&str], &[&str])] = &[
    ("abc", &[], &["-D", "2"]),
    ("fib", &["5"], &["-D", "3"]),
    ("deep", &["20"], &["--max-stack=5"]),
    ("abc", &[], &["-F", "b"]),
    ("abc", &[], &["-N", "b"]),
    ("abc", &[], &["-F", "a", "-N", "c"]),
    ("abc", &[], &["-F", "b", "-D", "1"]),
    ("abc", &[], &["-F", "^[ab]$"]),
    ("fib", &["6"], &["-F", "main", "-D", "2"]),
    // Thresholds far from these functions' durations even when the machine is loaded (a
    // preempted getpid() can take over a millisecond): sleep's slow() sleeps 2 ms, quick()
    // takes microseconds.
    ("abc", &[], &["-t", "100ms"]),
    ("sleep", &[], &["-t", "1500us"]),
    // `-t` alone is applied by the trampolines' fast paths; with `-D` too (the depth that
    // `FilterState::recorded` counts) and on a deeper program whose calls are all dropped.
    ("sleep", &[], &["-t", "1500us", "-D", "2"]),
    ("fib", &["8"], &["-t", "100ms"]),
    // A function shown although shorter than the time filter: `trace`, or its own `time=0`.
    ("sleep", &[], &["-t", "1500us", "-T", "quick@trace"]),
    ("sleep", &[], &["-t", "1500us", "-T", "quick@time=0"]),
    ("abc", &[], &["-T", "b@recover"]),
    ("abc", &[], &["-Z", "30"]),
    // A size= trigger: another limit below its function (its own included).
    ("abc", &[], &["-Z", "30", "-T", "b@size=10"]),
    ("cxx", &[], &["-Z", "1000", "-T", "main@size=30"]),
    ("abc", &[], &["-C", "c"]),
    ("abc", &[], &["-C", "b"]),
    ("abc", &[], &["-F", "a", "-C", "c"]),
    ("fib", &["5"], &["-C", "fib", "-D", "3"]),
    ("abc", &[], &["-T", "b@depth=1"]),
    ("abc", &[], &["-T", "b@filter"]),
    ("abc", &[], &["-T", "a@notrace"]),
    ("abc", &[], &["-T", "b@time=100ms"]),
    ("abc", &[], &["-T", "b@trace_off"]),
    ("abc", &[], &["-T", "a@trace_off", "-T", "c@trace_on"]),
    ("abc", &[], &["--disable", "-T", "b@trace_on"]),
    ("abc", &[], &["-T", "b@finish"]),
    // A filter (`-F`) with trace_off/trace_on triggers, inside and outside the filtered
    // function (outside it they switch nothing), a `--disable`d recording turned on inside
    // it, and a trace_off below a `-N` function (nothing either).
    ("abc", &[], &["-F", "a", "-T", "b@trace_off"]),
    (
        "abc",
        &[],
        &["-F", "a", "-T", "b@trace_off", "-T", "c@trace_on"],
    ),
    ("abc", &[], &["-F", "b", "-T", "a@trace_off"]),
    (
        "abc",
        &[],
        &["-F", "b", "-T", "a@trace_off", "-T", "c@trace_on"],
    ),
    ("abc", &[], &["-F", "b", "-T", "c@trace_off"]),
    ("abc", &[], &["--disable", "-F", "a", "-T", "b@trace_on"]),
    ("fib", &["5"], &["-F", "fib", "-T", "fib@trace_off"]),
    ("abc", &[], &["-N", "b", "-T", "c@trace_off"]),
    ("abc", &[], &["-F", "a", "-N", "b", "-T", "c@trace_off"]),
    ("fib", &["6"], &["-T", "fib@depth=2", "-D", "4"]),
];

/// Options uftrace 0.13 accepts at record time but applies only when replaying (`-H`, `hide`):
/// utrace applies them while recording, as cli.md documents, so `replay` of utrace's data must
/// show what `uftrace replay OPTS` shows of uftrace's unfiltered data.
const REPLAY_EQUIVALENT: &[(&str, &[&str], &[&str])] = &[
    ("abc", &[], &["-H", "b"]),
    ("abc", &[], &["-T", "b@hide"]),
    ("fib", &["5"], &["-H", "fib", "-F", "main"]),
];

/// The `WARN:` lines (and their continuation lines) a recording printed on stderr.
fn warnings(out: &Output) -> Vec<&str> {
    out.stderr
        .lines()
        .filter(|l| l.starts_with("WARN:") || l.starts_with("      ("))
        .collect()
}

/// `TOOL record --no-libcall --no-event OPTS -d DIR PROG ARGS`.
fn record(uftrace: bool, dir: &Path, opts: &[&str], prog: &Path, args: &[&str]) -> Output {
    let mut cmd = if uftrace {
        let mut cmd = Command::new(util::uftrace_bin());
        cmd.args(["record", "--no-event"]);
        cmd
    } else {
        let mut cmd = Command::new(util::utrace_bin());
        cmd.args(["record", "--no-event"]);
        cmd
    };
    cmd.arg("--no-libcall")
        .args(opts)
        .arg("-d")
        .arg(dir)
        .arg(prog)
        .args(args);
    util::run(cmd)
}

/// `[entry] NAME depth: N` / `[exit ] NAME depth: N` of each record in `uftrace dump`, the TID
/// first (TIDs replaced by their order of appearance), without times and addresses.
fn records(dir: &Path) -> String {
    let mut cmd = Command::new(util::uftrace_bin());
    cmd.args(["dump", "--no-pager", "-d"]).arg(dir);
    let out = util::run(cmd);
    let mut tids: Vec<String> = Vec::new();
    let mut text = String::new();
    for line in out.stdout.lines() {
        let Some(at) = line.find(": [") else { continue };
        let kind = &line[at + 2..];
        if !(kind.starts_with("[entry]") || kind.starts_with("[exit ]")) {
            continue;
        }
        let tid = line[..at]
            .rsplit(' ')
            .next()
            .unwrap_or_default()
            .to_string();
        let task = tids.iter().position(|t| *t == tid).unwrap_or_else(|| {
            tids.push(tid);
            tids.len() - 1
        });
        // `[entry] main(55d0c0a4f202) depth: 0` -> `[entry] main depth: 0`
        let name_end = kind.find('(').unwrap_or(kind.len());
        let depth = kind.rfind(" depth:").map_or("", |d| &kind[d..]);
        text.push_str(&format!("{task}: {}{depth}\n", &kind[..name_end]));
    }
    text
}

fn compare(prog: &str, args: &[&str], opts: &[&str], mode: Mode) -> Vec<String> {
    let what = format!("record {} {prog} [{}]", opts.join(" "), mode.dir_name());
    let exe = util::testprog(prog, mode);
    let tmp = tempfile::tempdir().unwrap();
    let theirs = tmp.path().join("uftrace.data");
    let ours = tmp.path().join("utrace.data");
    let reference = record(true, &theirs, opts, &exe, args);
    let recorded = record(false, &ours, opts, &exe, args);
    let mut failures = Vec::new();
    if recorded.status.code() != reference.status.code() {
        failures.push(format!(
            "{what}: utrace exited with {}, uftrace with {}:\n{recorded}",
            recorded.status, reference.status
        ));
    }

    if warnings(&recorded) != warnings(&reference) {
        failures.push(format!(
            "{what}: other warnings (uftrace: {:?}, utrace: {:?})",
            warnings(&reference),
            warnings(&recorded)
        ));
    }

    let want = records(&theirs);
    let got = records(&ours);
    if want != got {
        failures.push(format!(
            "{what}: other records written (- uftrace's, + utrace's):\n{}",
            normalize::diff(&want, &got)
        ));
    }

    let want = normalize::by_task(&util::uftrace_replay(&theirs, &[]).stdout, Anchor::Start);
    for (who, out) in [
        ("uftrace", util::uftrace_replay(&ours, &[])),
        ("utrace", util::utrace_replay(&ours, &[])),
    ] {
        let got = normalize::by_task(&out.stdout, Anchor::Start);
        if want != got {
            failures.push(format!(
                "{what}: `{who} replay` of utrace's data differs (- uftrace's data, + utrace's):\n{}\n{out}",
                normalize::diff(&want, &got)
            ));
        }
    }
    if !failures.is_empty() && std::env::var("UTRACE_KEEP_DATA").as_deref() == Ok("1") {
        eprintln!("keeping {}", tmp.keep().display());
    }
    failures
}

/// A [`REPLAY_EQUIVALENT`] case: `uftrace record` without OPTS then `uftrace replay OPTS`,
/// against `utrace record OPTS` then `uftrace replay` and `utrace replay`.
fn compare_with_replay(prog: &str, args: &[&str], opts: &[&str], mode: Mode) -> Vec<String> {
    let what = format!("record {} {prog} [{}]", opts.join(" "), mode.dir_name());
    let exe = util::testprog(prog, mode);
    let tmp = tempfile::tempdir().unwrap();
    let theirs = tmp.path().join("uftrace.data");
    let ours = tmp.path().join("utrace.data");
    record(true, &theirs, &[], &exe, args).assert_success();
    record(false, &ours, opts, &exe, args).assert_success();
    let want = normalize::by_task(&util::uftrace_replay(&theirs, opts).stdout, Anchor::Start);
    let mut failures = Vec::new();
    for (who, out) in [
        ("uftrace", util::uftrace_replay(&ours, &[])),
        ("utrace", util::utrace_replay(&ours, &[])),
    ] {
        let got = normalize::by_task(&out.stdout, Anchor::Start);
        if want != got {
            failures.push(format!(
                "{what}: `{who} replay` of utrace's data differs from `uftrace replay {}` of uftrace's (- uftrace, + utrace):\n{}\n{out}",
                opts.join(" "),
                normalize::diff(&want, &got)
            ));
        }
    }
    failures
}

#[test]
fn record_time_filters() {
    if !util::need_uftrace("record_time_filters") {
        return;
    }
    let mut failures = Vec::new();
    for (prog, args, opts) in REPLAY_EQUIVALENT {
        for mode in MODES {
            failures.extend(compare_with_replay(prog, args, opts, mode));
        }
    }
    for (prog, args, opts) in CASES {
        for mode in MODES {
            failures.extend(compare(prog, args, opts, mode));
        }
    }
    util::assert_no_failures(&failures);
}

/// The counters' values with their digits masked (they differ from run to run).
fn mask_counters(text: &str) -> String {
    text.lines()
        .map(|l| match l.find("/* ") {
            Some(at) => {
                let (head, tail) = l.split_at(at);
                // Each run of digits becomes one `N`.
                let mut masked = String::new();
                for c in tail.chars() {
                    if !c.is_ascii_digit() {
                        masked.push(c);
                    } else if !masked.ends_with('N') {
                        masked.push('N');
                    }
                }
                let tail = masked;
                format!("{head}{tail}\n")
            }
            None => format!("{l}\n"),
        })
        .collect()
}

/// `-T FUNC@read=proc/statm` and `read=page-fault`: the counters at FUNC's entry and their
/// differences before its exit, as events inside the call; uftrace 0.13 and utrace show
/// utrace's recording as uftrace's own (values masked).
#[test]
fn read_triggers_record_counters() {
    if !util::need_uftrace("read_triggers_record_counters") {
        return;
    }
    let opts = ["-T", "b@read=proc/statm", "-T", "c@read=page-fault"];
    for mode in MODES {
        let exe = util::testprog("abc", mode);
        let tmp = tempfile::tempdir().unwrap();
        let (theirs, ours) = (
            tmp.path().join("uftrace.data"),
            tmp.path().join("utrace.data"),
        );
        record(true, &theirs, &opts, &exe, &[]).assert_success();
        record(false, &ours, &opts, &exe, &[]).assert_success();
        let reduce = |out: &str| mask_counters(&normalize::by_task(out, Anchor::Start));
        let want = reduce(&util::uftrace_replay(&theirs, &[]).stdout);
        assert!(
            want.contains("/* read:proc/statm (vmsize=NKB vmrss=NKB shared=NKB) */")
                && want.contains("/* diff:page-fault (major=+N minor=+N) */"),
            "{want}"
        );
        let failures = util::compare_replays(&format!("{mode:?}"), &want, &ours, reduce);
        assert!(failures.is_empty(), "{}", failures.join("\n\n"));
        // uftrace's data as utrace reads it: a `diff:` event holds the differences.
        let theirs_by_us = reduce(&util::utrace_replay(&theirs, &[]).stdout);
        assert_eq!(
            theirs_by_us, want,
            "{mode:?}: utrace replay of uftrace's data"
        );
        // The raw dump of the events: `[data ] length = 24` and the values, as uftrace's.
        let dump = |bin: std::path::PathBuf| {
            let mut cmd = Command::new(bin);
            cmd.args(["dump", "--no-pager", "-d"]).arg(&theirs);
            let out = util::run(cmd);
            out.assert_success();
            out.stdout.split_whitespace().collect::<Vec<_>>().join(" ")
        };
        assert_eq!(
            dump(util::utrace_bin()),
            dump(util::uftrace_bin()),
            "{mode:?}: dump of uftrace's data"
        );
    }
}

/// `-T FUNC@read=pmu-cycle`, `pmu-cache`, `pmu-branch` on a machine without a PMU (a VM): the
/// program runs, the calls are recorded as uftrace records them (without counters), and
/// utrace prints uftrace's warning naming the first event of the kind. uftrace 0.13 prints it
/// at every read that retries the open (FUNC's entry and exit, each call: twice here, eight
/// times for `tiny` of `thread`); utrace once per kind and process, which says the same
/// without flooding stderr (libmcount/src/counters.rs).
#[test]
fn pmu_read_triggers_without_a_pmu() {
    if !util::need_uftrace("pmu_read_triggers_without_a_pmu") {
        return;
    }
    if Path::new("/sys/bus/event_source/devices/cpu/events/cpu-cycles").exists() {
        eprintln!("skipping pmu_read_triggers_without_a_pmu: this machine has a PMU");
        return;
    }
    let mut failures = Vec::new();
    let cases: [(&str, &[&str]); 4] = [
        ("abc", &["-T", "b@read=pmu-cycle"]),
        ("abc", &["-T", "b@read=pmu-cache"]),
        ("abc", &["-T", "b@read=pmu-branch"]),
        (
            "thread",
            &["-T", "tiny@read=pmu-cycle", "-T", "step@read=pmu-branch"],
        ),
    ];
    for (prog, opts) in cases {
        let what = format!("record {} {prog}", opts.join(" "));
        let exe = util::testprog(prog, Mode::Pg);
        let tmp = tempfile::tempdir().unwrap();
        let (theirs, ours) = (
            tmp.path().join("uftrace.data"),
            tmp.path().join("utrace.data"),
        );
        let reference = record(true, &theirs, opts, &exe, &[]);
        reference.assert_success();
        let recorded = record(false, &ours, opts, &exe, &[]);
        recorded.assert_success();
        let mut distinct = warnings(&reference);
        distinct.sort_unstable();
        distinct.dedup();
        assert!(!distinct.is_empty(), "{reference}");
        let mut got = warnings(&recorded);
        got.sort_unstable();
        if got != distinct {
            failures.push(format!(
                "{what}: warnings (uftrace's, each once: {distinct:?}):\n{recorded}"
            ));
        }
        let reduce = |out: &str| normalize::fold_leaves(&normalize::by_task(out, Anchor::Start));
        let want = reduce(&util::uftrace_replay(&theirs, &[]).stdout);
        failures.extend(util::compare_replays(&what, &want, &ours, reduce));
    }
    util::assert_no_failures(&failures);
}
