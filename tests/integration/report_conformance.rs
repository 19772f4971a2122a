//! `utrace report` against uftrace 0.13's on the same data, whole outputs compared: the
//! `--avg-*` columns, every `-s` key, `--task` with every `-f` set, and `--diff` with every
//! `--diff-policy`, `-f` list and `--sort-column`. Each program is recorded twice by uftrace
//! (with its scheduling events, `perf-cpu*.dat`) and twice by utrace; both tools then read
//! the same directories. Needs gcc and uftrace (skipped without them unless
//! `UTRACE_REQUIRE_UFTRACE=1`).
//!
//! Same data gives the same numbers, so times are compared as printed. What is normalised
//! is what utrace chose to do differently (see [`normalize_diff`] and [`mask_task_self`]):
//! the sign of time differences, uftrace 0.13's `--diff` rows of context switches, and the
//! `--task` self time of a task pre-empted inside a call.

use std::path::Path;
use std::process::Command;

use crate::analysis_diff::{mismatch, uftrace, utrace};
use crate::util::{self, Mode, Output};

/// Option sets of the function report.
const PLAIN: &[&[&str]] = &[
    &[],
    &["--avg-total"],
    &["--avg-self"],
    &["--avg-total", "-s", "min"],
    &["--avg-total", "-s", "max,func"],
    &["--avg-self", "-s", "avg"],
    &["--avg-self", "-s", "stdv"],
    &["--avg-total", "-f", "total,call"],
    &["--avg-total", "--avg-self"],
    &["-f", "all"],
    &["-f", "none"],
    &["-f", "+size"],
    &["-f", "self-avg,total-max,call"],
    &["-s", "total"],
    &["-s", "self"],
    &["-s", "call"],
    &["-s", "func"],
    &["-s", "size"],
    &["-s", "total-avg"],
    &["-s", "total-min"],
    &["-s", "total-max"],
    &["-s", "self-avg"],
    &["-s", "self-min"],
    &["-s", "self-max"],
    &["-s", "total_avg"],
    &["-s", "call,func"],
    &["-s", "call,self"],
    &["-s", "self-min,total-max"],
    &["-s", "min"],
    &["--no-sched"],
    &["--no-event"],
    &["--no-sched-preempt"],
    &["--avg-self", "--no-sched-preempt"],
    &["--event-full"],
    &["--event-full", "-s", "call"],
];

/// Option sets of `--task`.
const TASK: &[&[&str]] = &[
    &["--task"],
    &["--task", "-f", "tid,func"],
    &["--task", "-f", "func"],
    &["--task", "-f", "tid"],
    &["--task", "-f", "total"],
    &["--task", "-f", "self"],
    &["--task", "-f", "total,tid"],
    &["--task", "-f", "self,total"],
    &["--task", "-f", "func,tid,total"],
    &["--task", "-f", "none"],
    &["--task", "-f", "all"],
    &["--task", "-f", "bogus"],
    &["--task", "-s", "tid"],
    &["--task", "-s", "func"],
    &["--task", "-s", "name,tid"],
    &["--task", "-s", "self"],
    &["--task", "--no-sched"],
    &["--task", "--no-event"],
    &["--task", "--no-sched-preempt"],
];

/// Option sets of `--diff DIR2` (added after them).
const DIFF: &[&[&str]] = &[
    &[],
    &["--diff-policy", "abs"],
    &["--diff-policy", "no-abs"],
    &["--diff-policy", "percent"],
    &["--diff-policy", "no-percent"],
    &["--diff-policy", "compact"],
    &["--diff-policy", "full"],
    &["--diff-policy", "full,percent"],
    &["--diff-policy", "full,no-abs"],
    &["--diff-policy", "percent,no-abs"],
    &["--diff-policy", "full,percent,no-abs"],
    &["--diff-policy", "abs,no-abs,full,compact"],
    &["--diff-policy", "bogus,percent"],
    &["--diff-policy", "full", "--sort-column", "0"],
    &["--diff-policy", "full", "--sort-column", "1"],
    &["--diff-policy", "full,percent", "--sort-column", "2"],
    &["--diff-policy", "full", "--sort-column", "7"],
    &["--sort-column", "1"],
    &["-f", "total,call"],
    &["-f", "self-avg,total-max"],
    &["-f", "all"],
    &["-f", "all", "--diff-policy", "full"],
    &["-f", "all", "--diff-policy", "percent"],
    &["-f", "all", "--diff-policy", "full,percent"],
    &["-f", "none"],
    &["-f", "call,size", "--diff-policy", "full"],
    &["--avg-total"],
    &["--avg-self", "-s", "min"],
    &["--avg-total", "--diff-policy", "full,percent"],
    &["-s", "call"],
    &["-s", "self"],
    &["-s", "func"],
    &["-s", "total,self"],
    &["-s", "call", "--diff-policy", "full,percent"],
    &["-s", "func", "--diff-policy", "full,percent"],
    &["-s", "bogus"],
];

/// Records `prog args` into `dir`: uftrace keeps its scheduling events (no `--no-event`).
fn record(uftrace: bool, dir: &Path, prog: &Path, args: &[&str]) {
    let bin = if uftrace {
        util::uftrace_bin()
    } else {
        util::utrace_bin()
    };
    let mut cmd = Command::new(bin);
    cmd.arg("record").arg("-d").arg(dir).arg(prog).args(args);
    util::run(cmd).assert_success();
}

/// Flips the sign of a time difference (`+1.234 us`, `-5.000 ms`): uftrace 0.13 prints
/// them inverted without colors, utrace with the sign of new minus base.
fn flip_time_signs(line: &str) -> String {
    let b = line.as_bytes();
    let mut out = String::with_capacity(line.len());
    for (i, c) in line.char_indices() {
        let sign = c == '+' || c == '-';
        let starts_time = sign && (i == 0 || b[i - 1] == b' ') && {
            let rest = &line[i + 1..];
            let num = rest.find(' ').map_or(rest, |e| &rest[..e]);
            let after = rest[num.len()..].trim_start();
            num.contains('.')
                && num.bytes().all(|d| d.is_ascii_digit() || d == b'.')
                && ["us", "ms", "s", "m", "h"]
                    .iter()
                    .any(|u| after.split(' ').next() == Some(u))
        };
        out.push(match (starts_time, c) {
            (true, '+') => '-',
            (true, '-') => '+',
            _ => c,
        });
    }
    out
}

/// `--diff` outputs as compared: context-switch rows dropped (uftrace 0.13's diff reads the
/// second recording's perf data apart from the filters and the other rows, and shows rows
/// no plain report of either side has), uftrace's time signs flipped, and the rows after
/// the header sorted: rows with equal differences (common for 10 ns functions) come in an
/// order uftrace's output does not explain; the order of the others is checked by
/// [`diff_order_agrees`].
fn normalize_diff(out: &Output, from_uftrace: bool) -> Output {
    let mut lines: Vec<String> = out
        .stdout
        .lines()
        .filter(|l| !l.ends_with("linux:schedule") && !l.ends_with("linux:schedule (pre-empted)"))
        .map(|l| {
            if from_uftrace && !l.starts_with('#') {
                flip_time_signs(l)
            } else {
                l.to_string()
            }
        })
        .collect();
    let head = |l: &String| {
        l.starts_with('#') || l.trim_start().starts_with('=') || l.ends_with("   Function")
    };
    let body = lines.iter().rposition(head).map_or(0, |i| i + 1);
    lines[body..].sort();
    let stdout = lines.into_iter().map(|l| l + "\n").collect();
    Output {
        stdout,
        command: out.command.clone(),
        status: out.status,
        stderr: out.stderr.clone(),
    }
}

/// Whether two `--diff` outputs (sorted by the first column, absolute) list the rows whose
/// first value no other row shares in the same order. `None` when they agree.
fn diff_order_agrees(want: &str, got: &str) -> Option<String> {
    let unique = |text: &str| -> Vec<String> {
        let rows: Vec<(String, String)> = text
            .lines()
            .skip_while(|l| !l.trim_start().starts_with('='))
            .skip(1)
            .filter(|l| !l.contains("linux:schedule"))
            .map(|l| {
                let words: Vec<&str> = l.split_whitespace().collect();
                // The first value, with its unit when it is a time.
                let unit = words
                    .get(1)
                    .filter(|w| w.starts_with(|c: char| c.is_alphabetic()));
                let key =
                    words[0].trim_start_matches(['+', '-']).to_string() + unit.map_or("", |u| u);
                (key, words[words.len() - 1].to_string())
            })
            .collect();
        // N/A sorts as 0%: both are ties of whatever is near 0.
        let zero = |k: &str| k == "N/A" || k.trim_start_matches(['0', '.']).starts_with(['%', 'u']);
        rows.iter()
            .filter(|(k, _)| !zero(k))
            .filter(|(k, _)| rows.iter().filter(|(o, _)| o == k).count() == 1)
            .map(|(_, name)| name.clone())
            .collect()
    };
    let (w, g) = (unique(want), unique(got));
    (w != g).then(|| format!("row order differs:\n  uftrace {w:?}\n  utrace  {g:?}"))
}

/// The `Self time` column of `--task` masked: uftrace 0.13 takes less than the time a task
/// spent pre-empted inside a call off its self time (utrace takes that time off), in a way
/// its output does not explain.
fn mask_task_self(out: &Output) -> Output {
    let mut col = None;
    let stdout = out
        .stdout
        .lines()
        .map(|l| {
            if let Some(at) = l.find("Self time") {
                col = Some(at + "Self time".len());
            }
            match col {
                Some(end) if l.len() >= end && !l.starts_with("  =") && end >= 10 => {
                    format!("{}{}{}\n", &l[..end - 10], "#".repeat(10), &l[end..])
                }
                _ => format!("{l}\n"),
            }
        })
        .collect();
    Output {
        stdout,
        command: out.command.clone(),
        status: out.status,
        stderr: out.stderr.clone(),
    }
}

/// Runs every option set on the data of `prog` (recorded by uftrace, then by utrace) and
/// fails with all the differences found.
fn check(test: &str, prog: &str, mode: Mode, args: [&[&str]; 2]) {
    if !util::need_uftrace(test) {
        return;
    }
    let exe = util::testprog(prog, mode);
    let tmp = tempfile::tempdir().expect("tempdir");
    let mut failures = Vec::new();
    let mut cases = 0;
    for (by, from_uftrace) in [("uftrace", true), ("utrace", false)] {
        let a = tmp.path().join(format!("{by}-a"));
        let b = tmp.path().join(format!("{by}-b"));
        record(from_uftrace, &a, &exe, args[0]);
        record(from_uftrace, &b, &exe, args[1]);
        let preempted = uftrace("report", &a, &[])
            .stdout
            .contains("linux:schedule (pre-empted)");
        let b_arg = b.to_string_lossy().into_owned();
        let mut run = |opts: Vec<&str>, kind: &str| {
            cases += 1;
            let label = format!("{prog} ({by} data): report {}", opts.join(" "));
            let mut want = uftrace("report", &a, &opts);
            let mut got = utrace("report", &a, &opts);
            if kind == "diff" {
                want = normalize_diff(&want, true);
                got = normalize_diff(&got, false);
            } else if kind == "task" && preempted {
                want = mask_task_self(&want);
                got = mask_task_self(&got);
            }
            if let Some(report) = mismatch(&label, &want, &got) {
                failures.push(report);
            }
            // The default key (total) and the first column, by absolute difference.
            let plain_order = ["abs", "percent", "compact", "no-percent"];
            if kind == "diff"
                && opts.len() <= 4
                && opts[2..]
                    .iter()
                    .all(|o| *o == "--diff-policy" || plain_order.contains(o))
            {
                let want = uftrace("report", &a, &opts);
                let got = utrace("report", &a, &opts);
                let flipped: String = want
                    .stdout
                    .lines()
                    .map(|l| flip_time_signs(l) + "\n")
                    .collect();
                if let Some(why) = diff_order_agrees(&flipped, &got.stdout) {
                    failures.push(format!("=== {label}\n{why}"));
                }
            }
        };
        for opts in PLAIN {
            run(opts.to_vec(), "plain");
        }
        for opts in TASK {
            run(opts.to_vec(), "task");
        }
        for opts in DIFF {
            let mut all = vec!["--diff", b_arg.as_str()];
            all.extend_from_slice(opts);
            run(all, "diff");
        }
    }
    if !failures.is_empty() && std::env::var("UTRACE_KEEP_DATA").as_deref() == Ok("1") {
        eprintln!("keeping {}", tmp.keep().display());
    }
    assert!(
        failures.is_empty(),
        "{test}: {} of {cases} cases differ from uftrace\n\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn fib() {
    check(
        "report_conformance::fib",
        "fib",
        Mode::Pg,
        [&["10"], &["12"]],
    );
}

#[test]
fn thread() {
    check("report_conformance::thread", "thread", Mode::Pg, [&[], &[]]);
}

#[test]
fn cxx() {
    check("report_conformance::cxx", "cxx", Mode::Pg, [&[], &[]]);
}

#[test]
fn libcall() {
    check(
        "report_conformance::libcall",
        "libcall",
        Mode::Pg,
        [&[], &[]],
    );
}

#[test]
fn sign_flip_touches_time_differences_only() {
    assert_eq!(
        flip_time_signs("    -48.963 us     +0.100 us            +1   linux:x-y"),
        "    +48.963 us     -0.100 us            +1   linux:x-y"
    );
    assert_eq!(
        flip_time_signs("     9.444 us   31.927 us   -1.157 ms   +238.07%   +0   a-b"),
        "     9.444 us   31.927 us   +1.157 ms   +238.07%   +0   a-b"
    );
}
