//! Programs that do not end by returning from `main`: `exit()` from inside traced functions
//! (with and without other threads running), fatal signals (SIGSEGV, SIGABRT) and SIGKILL,
//! which no handler or destructor sees.
//!
//! Each is recorded in every mode and compared with uftrace like the record matrix
//! ([`record_and_compare`]); on top of that, utrace's data must replay (with `uftrace replay`
//! and `utrace replay`) to the trace written here: every function entered before the end,
//! the unfinished ones listed as remaining functions the way uftrace lists them, and the
//! recorder must exit with uftrace's status (spec/cli.md §1.7: 2 and a `child terminated by
//! signal` warning after a signal) and leave nothing in `/dev/shm`.

use crate::record_matrix::{check_program, normalized, remaining, Case, Norm, Recorded, Reference};
use crate::util::Mode;

/// A program, its arguments and what utrace must have recorded.
struct Survival {
    case: Case,
    /// The recorder's exit status.
    status: i32,
    /// The warning the recorder prints on stderr, if any.
    warning: Option<&'static str>,
    /// [`view`] of the replay of utrace's data.
    trace: &'static str,
}

const fn case(
    prog: &'static str,
    args: &'static [&'static str],
    reference: Reference,
    norm: Norm,
) -> Case {
    Case {
        prog,
        args,
        reference,
        norm,
    }
}

const SEGV: &str = "WARN: child terminated by signal: 11: Segmentation fault\n";
const ABORT: &str = "WARN: child terminated by signal: 6: Aborted\n";
const KILLED: &str = "WARN: child terminated by signal: 9: Killed\n";

const SURVIVAL: &[Survival] = &[
    Survival {
        // uftrace writes its last records before exit() only from its PLT hook of exit.
        case: case("exit", &[], Reference::Libcalls, Norm::Exact),
        status: 0,
        warning: None,
        trace: "\
main() {
  outer() {
    inner() {
      finish() {
--- remaining
task 0: [3] finish, [2] inner, [1] outer, [0] main
",
    },
    Survival {
        // uftrace's SIGSEGV/SIGABRT handler flushes its buffers: its data is complete.
        case: case("crash", &["segv"], Reference::NoLibcall, Norm::Exact),
        status: 2,
        warning: Some(SEGV),
        trace: "\
main() {
  done();
  level1() {
    level2() {
      level3() {
        done();
--- remaining
task 0: [3] level3, [2] level2, [1] level1, [0] main
",
    },
    Survival {
        case: case("crash", &["abort"], Reference::NoLibcall, Norm::Exact),
        status: 2,
        warning: Some(ABORT),
        trace: "\
main() {
  done();
  level1() {
    level2() {
      level3() {
--- remaining
task 0: [3] level3, [2] level2, [1] level1, [0] main
",
    },
    Survival {
        case: case("kill", &[], Reference::Prefix, Norm::Exact),
        status: 2,
        warning: Some(KILLED),
        trace: "\
main() {
  prepare();
  outer() {
    inner() {
--- remaining
task 0: [2] inner, [1] outer, [0] main
",
    },
    Survival {
        case: case("thread_exit", &[], Reference::Libcalls, Norm::FoldLeaves),
        status: 0,
        warning: None,
        trace: "\
main() {
  wait_started();
  wait_started();
  leave() {
worker() {
  wait_forever() {
    ready();
worker() {
  wait_forever() {
    ready();
--- remaining
task 0: [1] leave, [0] main
task 1: [1] wait_forever, [0] worker
task 2: [1] wait_forever, [0] worker
",
    },
    Survival {
        case: case("thread_kill", &[], Reference::Prefix, Norm::FoldLeaves),
        status: 2,
        warning: Some(KILLED),
        trace: "\
main() {
  wait_for_worker() {
worker() {
  before_kill();
  kill_self() {
--- remaining
task 0: [1] wait_for_worker, [0] main
task 1: [1] kill_self, [0] worker
",
    },
];

/// The trace of each task (from `main`), then the remaining functions.
fn view(output: &str, norm: Norm) -> String {
    format!(
        "{}--- remaining\n{}",
        normalized(output, norm),
        remaining(output)
    )
}

/// The checks of this module, added to the failures of `recorded`.
fn check_survival(case: &Case, mode: Mode, recorded: &mut Recorded) {
    let what = case.describe(mode);
    let expect = SURVIVAL
        .iter()
        .find(|s| s.case.prog == case.prog && s.case.args == case.args)
        .expect("a survival case");
    let record = &recorded.record;
    if record.status.code() != Some(expect.status) {
        recorded.failures.push(format!(
            "{what}: utrace record exited with {}, expected {}:\n{record}",
            record.status, expect.status
        ));
    }
    // The expected warning is uftrace's own.
    let theirs = &recorded.reference;
    if expect.warning.is_some_and(|w| !theirs.stderr.contains(w)) {
        recorded.failures.push(format!(
            "{what}: uftrace does not warn `{}`:\n{theirs}",
            expect.warning.unwrap_or_default().trim_end()
        ));
    }
    match expect.warning {
        Some(warning) if !record.stderr.contains(warning) => recorded.failures.push(format!(
            "{what}: no `{}` on stderr:\n{record}",
            warning.trim_end()
        )),
        None if record.stderr.contains("WARN: child terminated") => recorded
            .failures
            .push(format!("{what}: unexpected warning:\n{record}")),
        _ => {}
    }
    for (who, out) in [
        ("uftrace", &recorded.by_uftrace),
        ("utrace", &recorded.by_utrace),
    ] {
        let got = view(&out.stdout, case.norm);
        if got != expect.trace {
            recorded.failures.push(format!(
                "{what}: `{who} replay` of utrace's data (- expected, + actual):\n{}\n{out}",
                crate::normalize::diff(expect.trace, &got)
            ));
        }
    }
}

/// Whether a test of this module records the program `name`.
pub fn covers(name: &str) -> bool {
    SURVIVAL.iter().any(|s| s.case.prog == name) && SURVIVAL_TESTS.contains(&name)
}

macro_rules! survival {
    ($($test:ident: $prog:literal;)*) => {$(
        #[test]
        fn $test() {
            let cases: Vec<Case> = SURVIVAL.iter().map(|s| s.case).collect();
            check_program(&cases, $prog, check_survival);
        }
    )*
        /// The programs the tests of this module record.
        const SURVIVAL_TESTS: &[&str] = &[$($prog),*];
    };
}

survival! {
    exit_from_deep_inside: "exit";
    crash: "crash";
    kill: "kill";
    exit_with_threads_running: "thread_exit";
    thread_sigkill: "thread_kill";
}
