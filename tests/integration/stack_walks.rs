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
//!
//! Two more programs that depend on their own frames (issue 17) are recorded by utrace and
//! uftrace in every build mode as `record_matrix` records them (function column per task
//! compared, same exit status), and what they print is checked:
//!
//! `deep_throw` throws C++ exceptions through 200 traced frames, with rethrows and a new
//! exception thrown from a handler on the way: its output traced by utrace (with and without
//! library calls) must equal its output untraced. uftrace 0.13's `-mfentry` recording nests the
//! destructors run during unwinding in the thrower (`record_matrix::Reference::PgForFentry`).
//!
//! `retaddr` reads `__builtin_return_address(0)` and `(1)`, and follows its frame-pointer
//! chain (`rbp` → `[rbp]`, return address at `[rbp+8]`) up to main's frame, naming each return
//! address. With `-finstrument-functions` nothing is hijacked: what it prints traced (by either
//! tool) equals what it prints untraced. With `-pg` and `-pg -mfentry` the return address of
//! a traced call points into the tracer's exit trampoline while the call runs; the saved
//! frame pointers are untouched, so both walks still end at main's frame after the same
//! number of frames and the exit status is the same. Measured, identical in both modes:
//!
//! - uftrace 0.13 ([`UFTRACE`]) keeps only the innermost traced call's return address hijacked:
//!   while a traced callee runs, its callers' slots hold their real return addresses again,
//!   and a caller's slot points at the trampoline again once the callee has returned. So the
//!   program sees the trampoline (in `libmcount-fast.so`, a local symbol: `dladdr` names
//!   none) only where a function reads its own return address: `level3`'s
//!   `__builtin_return_address(0)` ("called from level2: no"), and the bottom `rec` frame (4
//!   of the 5 recursive frames recognised). `__builtin_return_address(1)` and the walk made
//!   from a traced callee see the real callers.
//! - utrace ([`UTRACE`]) keeps every traced frame's return address hijacked for the whole
//!   call: the program sees its exit trampoline (`utrace_exit_trampoline` in utrace's
//!   `libmcount.so`, a local symbol: `dladdr` names none) in place of every traced caller, in
//!   `__builtin_return_address(0)` and `(1)` and in each frame of the walk (0 of 5 in `rec`).
//!
//! Either way the frame counts and the exit status are the untraced ones, and nothing crashes
//! or loops: the walks end at main's frame through the saved frame pointers.

use std::process::Command;

use crate::record_matrix::{check_program, Case, Recorded, Reference};
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

const CASES: &[Case] = &[
    Case::new("retaddr", &[]),
    Case::new("deep_throw", &[]).reference(Reference::PgForFentry),
];

/// Whether a test here records `prog` (see `record_matrix::every_testprog_is_recorded`).
pub fn covers(prog: &str) -> bool {
    CASES.iter().any(|c| c.prog == prog)
}

/// What `retaddr` prints under uftrace 0.13 in `-pg` and `-pg -mfentry` builds.
const UFTRACE: &str = "\
level3: returns into lib:libmcount-fast.so:?, then level1+
level3: called from level2: no
walk: frame 0 returns into level3+
walk: frame 1 returns into level2+
walk: frame 2 returns into level1+
walk: frame 3 returns into main+
walk: 4 frames to main
rec: 6 frames to main, 4 return into rec
";

/// What `retaddr` prints under utrace in `-pg` and `-pg -mfentry` builds.
const UTRACE: &str = "\
level3: returns into lib:libmcount.so:?, then lib:libmcount.so:?
level3: called from level2: no
walk: frame 0 returns into lib:libmcount.so:?
walk: frame 1 returns into lib:libmcount.so:?
walk: frame 2 returns into lib:libmcount.so:?
walk: frame 3 returns into lib:libmcount.so:?
walk: 4 frames to main
rec: 6 frames to main, 0 return into rec
";

/// The program's output untraced.
fn untraced(prog: &str, mode: Mode) -> String {
    let out = util::run(Command::new(util::testprog(prog, mode)));
    out.assert_success();
    out.stdout
}

/// The program's output under `utrace record` with library calls hooked (the matrix records
/// without).
fn with_libcalls(prog: &str, mode: Mode) -> util::Output {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("utrace.data");
    util::record_with(false, &dir, &util::testprog(prog, mode), &[], &[])
}

/// Adds a failure to `rec` unless `got` is `want`.
fn expect(rec: &mut Recorded, what: String, want: &str, got: &str) {
    if want != got {
        rec.failures.push(format!(
            "{what} (- expected, + printed):\n{}",
            crate::normalize::diff(want, got)
        ));
    }
}

#[test]
fn deep_throw_matches_uftrace_and_untraced() {
    check_program(CASES, "deep_throw", |case, mode, rec| {
        let want = untraced(case.prog, mode);
        let what = case.describe(mode);
        let stdout = rec.record.stdout.clone();
        expect(rec, format!("{what}: utrace --no-libcall"), &want, &stdout);
        let hooked = with_libcalls(case.prog, mode);
        expect(rec, format!("{what}: utrace"), &want, &hooked.stdout);
        if !hooked.status.success() {
            rec.failures.push(format!("{what}: {hooked}"));
        }
    });
}

#[test]
fn retaddr_matches_uftrace() {
    check_program(CASES, "retaddr", |case, mode, rec| {
        let plain = untraced(case.prog, mode);
        let what = case.describe(mode);
        let (utrace, uftrace) = match mode {
            Mode::Cyg => (plain.as_str(), plain.as_str()),
            Mode::Pg | Mode::Fentry => (UTRACE, UFTRACE),
        };
        let (ours, theirs) = (rec.record.stdout.clone(), rec.reference.stdout.clone());
        expect(rec, format!("{what}: utrace --no-libcall"), utrace, &ours);
        expect(
            rec,
            format!("{what}: uftrace --no-libcall"),
            uftrace,
            &theirs,
        );
        let hooked = with_libcalls(case.prog, mode);
        expect(rec, format!("{what}: utrace"), utrace, &hooked.stdout);
        if !hooked.status.success() {
            rec.failures.push(format!("{what}: {hooked}"));
        }
    });
}
