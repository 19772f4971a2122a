//! A traced program that walks its own stack (`testprogs/backtrace.c`: glibc's `backtrace()` and
//! libgcc's `_Unwind_Backtrace()`, as logging and crash handlers do) must see the stack it sees
//! untraced, although libmcount has hijacked the return addresses of the traced frames.
//!
//! The program prints, per walk, the number of frames found and whether each lies in the
//! executable or a library; its output under `utrace record` must equal its output untraced,
//! in every build mode, lazily bound and with `-z now`, with and without library-call hooks.
//! The trace must show both walks as calls of the functions that made them, with one `where()`
//! per frame printed.
//!
//! uftrace 0.13 is wrong here (measured): its `backtrace()` reports one frame more (in its
//! library), and `_Unwind_Backtrace()` loops through its trampoline until the program's buffer
//! of 64 frames is full. So the comparison is with the untraced program, not with uftrace.

use std::process::Command;

use crate::util::{self, Mode};

/// Records `backtrace` built in `mode` with `link`, with `opts`; returns the program's output
/// and the replay.
fn record(mode: Mode, link: &[&str], opts: &[&str]) -> (String, String, String) {
    let exe = util::testprog_with("backtrace", mode, link);
    let untraced = util::run(Command::new(&exe));
    untraced.assert_success();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("utrace.data");
    let mut cmd = Command::new(util::utrace_bin());
    cmd.arg("record")
        .arg("--no-sched")
        .args(opts)
        .arg("-d")
        .arg(&dir)
        .arg(&exe);
    let traced = util::run(cmd);
    traced.assert_success();
    let mut cmd = Command::new(util::utrace_bin());
    cmd.args(["replay", "--no-pager", "-d"]).arg(&dir);
    let replay = util::run(cmd);
    replay.assert_success();
    (untraced.stdout, traced.stdout, replay.stdout)
}

/// The function column of a replay, indentation kept.
fn functions(replay: &str) -> Vec<&str> {
    replay
        .lines()
        .filter_map(|l| l.split_once(" | ").map(|(_, f)| f))
        .collect()
}

/// How many `where()` calls the replay shows inside the `show()` called by `walker_fn`, in
/// order of the calls of `walker_fn`.
fn where_calls(replay: &str, walker_fn: &str) -> Vec<usize> {
    let mut counts = Vec::new();
    let mut inside = None;
    for f in functions(replay) {
        let depth = f.len() - f.trim_start().len();
        let name = f.trim_start();
        if name.starts_with(&format!("{walker_fn}() {{")) {
            inside = Some(depth);
            counts.push(0);
        } else if let Some(d) = inside {
            if depth <= d {
                inside = None;
            } else if name.starts_with("where()") {
                *counts.last_mut().unwrap() += 1;
            }
        }
    }
    counts
}

/// The frame counts the program printed for `walker` (`backtrace`, `_Unwind_Backtrace`).
fn frames(stdout: &str, walker: &str) -> Vec<usize> {
    stdout
        .lines()
        .filter_map(|l| l.strip_prefix(&format!("{walker}: ")))
        .map(|rest| rest.split(' ').next().unwrap().parse().unwrap())
        .collect()
}

fn check(mode: Mode, link: &[&str], opts: &[&str]) {
    let what = format!(
        "backtrace [{}] {} {}",
        mode.dir_name(),
        link.join(" "),
        opts.join(" ")
    );
    let (untraced, traced, replay) = record(mode, link, opts);
    assert_eq!(
        traced, untraced,
        "{what}: the program saw another stack when traced"
    );
    let glibc = frames(&untraced, "backtrace");
    let libgcc = frames(&untraced, "_Unwind_Backtrace");
    assert_eq!(glibc.len(), 2, "{what}: {untraced}");
    assert!(
        glibc.iter().all(|&n| n >= 5),
        "{what}: walks too short: {untraced}"
    );
    assert_eq!(
        where_calls(&replay, "walk_glibc"),
        glibc,
        "{what}:\n{replay}"
    );
    assert_eq!(
        where_calls(&replay, "walk_libgcc"),
        libgcc,
        "{what}:\n{replay}"
    );
    let calls = functions(&replay);
    if !opts.contains(&"--no-libcall") {
        for walker in ["backtrace();", "_Unwind_Backtrace();"] {
            let n = calls.iter().filter(|f| f.trim_start() == walker).count();
            assert_eq!(n, 2, "{what}: {walker} twice in\n{replay}");
        }
    }
}

#[test]
fn stack_walks_see_the_untraced_stack() {
    for mode in [Mode::Pg, Mode::Fentry, Mode::Cyg] {
        for link in [&[][..], &["-Wl,-z,now"][..]] {
            check(mode, link, &[]);
        }
        check(mode, &[], &["--no-libcall"]);
    }
}
