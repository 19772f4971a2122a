//! `utrace graph` with scheduling events (`perf-cpu*.dat`, data-format §10) against
//! `uftrace graph` of the same data directory, uftrace's recording and utrace's.
//!
//! A context switch inside a function is a `linux:schedule` (or `linux:schedule
//! (pre-empted)`) child node of it, with the time switched out as its time and as callee
//! time of the function; `--no-sched`, `--no-sched-preempt` and `--no-event` hide the nodes
//! (the time stays callee time), `-t` drops switches shorter than the threshold like short
//! calls, and `graph --task`'s self time leaves out the shown switches. Both tools read the
//! same files, so the whole output is compared, times included, except what
//! [`KNOWN_DIFFERENCES`] lists.
//!
//! Programs: `sleep` (a voluntary switch inside `usleep`, every run), `thread` (threads
//! created and joined: switches in `pthread_create`/`pthread_join`) and `fork` (a forked
//! child inside its parent's calls).

use std::path::Path;
use std::process::Command;

use crate::util::{self, Mode, Output};

/// uftrace behaviours utrace does not reproduce: (program, why). The graphs of such a
/// program are compared without their time columns and backtraces (function column and call
/// counts only).
const KNOWN_DIFFERENCES: &[(&str, &str)] = &[
    // Measured with uftrace 0.13 on fork.c and variants (a child returning through one or two
    // inherited calls, with and without calls in between): when the data has perf events,
    // uftrace does not set up the calls a forked child inherits (open in its parent at the
    // fork). They are missing from the child's backtraces in `graph FUNC` (`[0] child_work`
    // where the data without perf events gives `[0] <0> (0)`, `[1] child_work`), and their
    // exits get stale durations: the duration of the child's last returned call one level
    // deeper (`main` = `child_work`'s 12.689 us, `mid` = `b`'s 2.774 us) or, when none
    // returned, an unrelated value (`fork` and `mid` 46.138 us). Without perf events
    // (`record --no-event`) uftrace times them from the child's first record, which utrace
    // does in both cases (stale values are not worth reproducing). The nodes of those calls
    // and the root add them up, so their times differ.
    (
        "fork",
        "uftrace 0.13 leaves a child's inherited calls out, with stale durations, given perf data",
    ),
];

/// `TOOL record -d DIR PROG` with scheduling events on (the default).
fn record(uftrace: bool, dir: &Path, prog: &Path) {
    let bin = if uftrace {
        util::uftrace_bin()
    } else {
        util::utrace_bin()
    };
    let mut cmd = Command::new(bin);
    cmd.arg("record").arg("-d").arg(dir).arg(prog);
    util::run(cmd).assert_success();
}

fn graph(uftrace: bool, dir: &Path, opts: &[&str]) -> Output {
    let bin = if uftrace {
        util::uftrace_bin()
    } else {
        util::utrace_bin()
    };
    let mut cmd = Command::new(bin);
    cmd.args(["graph", "--no-pager", "-d"]).arg(dir).args(opts);
    let out = util::run(cmd);
    out.assert_success();
    out
}

/// The graph's lines, the tool's name in messages and the width of the TID column (utrace's
/// default is 7 digits, uftrace 0.13's here 5) made the same; with `exact` false, the field
/// columns (everything up to ` : `) blanked and the backtraces left out.
fn normalized(text: &str, exact: bool) -> String {
    let mut backtrace = false;
    text.lines()
        .filter(|l| {
            if l.starts_with("=============== BACKTRACE") {
                backtrace = true;
            } else if l.starts_with("==========") {
                backtrace = false;
            }
            exact || !backtrace
        })
        .map(|l| {
            let mut l = l
                .strip_prefix("uftrace: ")
                .map_or(l.to_string(), |rest| format!("utrace: {rest}"));
            if l.starts_with('#') && l.contains(" TID ") {
                l = l.split_whitespace().collect::<Vec<_>>().join(" ");
            }
            while l.contains("[ ") {
                l = l.replace("[ ", "[");
            }
            match l.split_once(" : ") {
                Some((_, tree)) if !exact => format!("- : {tree}\n"),
                _ => format!("{l}\n"),
            }
        })
        .collect()
}

/// The option sets of a program: the common ones, then `graph FUNC` of its functions.
fn option_sets(funcs: &[&'static str]) -> Vec<Vec<&'static str>> {
    let mut sets: Vec<Vec<&str>> = vec![
        vec![],
        vec!["-f", "total,self"],
        vec!["--no-sched"],
        vec!["--no-sched-preempt"],
        vec!["--no-event"],
        vec!["-f", "self", "--no-sched"],
        vec!["-t", "1ms"],
        vec!["-D", "2"],
        vec!["--task"],
        vec!["--task", "-f", "self,tid", "--no-sched-preempt"],
        vec!["--task", "--no-sched"],
    ];
    sets.extend(funcs.iter().map(|f| vec![*f]));
    sets
}

#[test]
fn graph_shows_context_switches_as_uftrace() {
    if !util::need_uftrace("graph_shows_context_switches_as_uftrace") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let mut failures = Vec::new();
    let mut cases = 0;
    for (prog, funcs) in [
        ("sleep", &["usleep", "slow", "main"][..]),
        ("thread", &["pthread_join", "main"]),
        ("fork", &["main", "fork", "leaf"]),
    ] {
        let exe = util::testprog(prog, Mode::Pg);
        for uftrace in [true, false] {
            let by = if uftrace { "uftrace" } else { "utrace" };
            let dir = tmp.path().join(format!("{prog}-{by}"));
            record(uftrace, &dir, &exe);
            let whole = graph(true, &dir, &[]);
            if prog == "sleep" {
                assert!(
                    whole.stdout.contains("(1) linux:schedule\n"),
                    "uftrace's graph of {prog} ({by}'s data) has no switch:\n{}",
                    whole.stdout
                );
            }
            for opts in option_sets(funcs) {
                cases += 1;
                let label = opts.join(" ");
                let known = KNOWN_DIFFERENCES.iter().find(|(p, _)| *p == prog);
                let (theirs, ours) = (graph(true, &dir, &opts), graph(false, &dir, &opts));
                let (mut want, mut got) = (
                    normalized(&theirs.stdout, true),
                    normalized(&ours.stdout, true),
                );
                if let (true, Some((_, why))) = (want != got, known) {
                    eprintln!("known difference, times not compared ({why}): {prog}: {label}");
                    want = normalized(&theirs.stdout, false);
                    got = normalized(&ours.stdout, false);
                }
                if want != got {
                    failures.push(format!(
                        "{prog} (recorded by {by}) graph {label}:\n{}",
                        crate::normalize::diff(&want, &got)
                    ));
                }
            }
        }
    }
    assert!(cases > 0);
    util::assert_no_failures(&failures);
}
