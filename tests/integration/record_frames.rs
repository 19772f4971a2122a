//! Programs that depend on their own frames (issue 17), recorded by utrace and uftrace in
//! every build mode as `record_matrix` records (function column per task compared, same exit
//! status), plus what the program itself prints.
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
fn deep_throw() {
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
fn retaddr() {
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
