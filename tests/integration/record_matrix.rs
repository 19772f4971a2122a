//! The record matrix: every program in `testprogs/`, in every build mode, recorded by
//! `utrace record --no-libcall` and by `uftrace record --no-libcall` with the same arguments.
//!
//! For each recording, per task and by function column (uftrace's test-suite comparison,
//! spec/cli.md §12):
//!
//! (a) `uftrace replay` of utrace's data must print what `uftrace replay` of uftrace's data
//!     prints, and (b) so must `utrace replay` of utrace's data;
//! (c) both recorders exit with the same status, and utrace leaves no ring of the recorded
//!     tasks in `/dev/shm`.
//!
//! Where the two traces legitimately differ the case names a documented [`Norm`] or
//! [`Reference`]; nothing is skipped. The programs that crash, are killed or exit with threads
//! running are in `survival.rs`, which adds its own checks on top of [`record_and_compare`];
//! [`every_testprog_is_recorded`] makes sure no program is left out of both tables.
//!
//! One test per program (all modes and argument sets inside it): every mismatch is reported
//! with its diff before the test fails.

use std::path::Path;
use std::process::Command;

use crate::normalize::{self, Anchor};
use crate::util::{self, Mode, Output};

/// Every build mode, in the order the matrix runs them.
pub const MODES: [Mode; 3] = [Mode::Pg, Mode::Fentry, Mode::Cyg];

/// What utrace's trace is compared with.
#[derive(Clone, Copy, Debug)]
pub enum Reference {
    /// `uftrace record --no-libcall` of the same program and arguments.
    NoLibcall,
    /// `uftrace record` with library calls hooked, replayed with `--no-libcall`. uftrace 0.13
    /// writes its buffered records out before `exit()` only from its PLT hook of `exit`, so with
    /// `--no-libcall` a program that calls `exit()` loses the main thread's last records (all of
    /// them for `exit.c`: "No data available"). utrace loses nothing; the hooked recording is
    /// what uftrace shows when it loses nothing either.
    Libcalls,
    /// [`Reference::NoLibcall`], except that in `-pg -mfentry` mode the reference is uftrace's
    /// recording of the `-pg` build. When a destructor runs in a cleanup landing pad while an
    /// exception passes, uftrace 0.13's `-mfentry` recording nests it (and its callees) inside
    /// the function that threw, whose frame is already gone: it finds the unwound frames through
    /// saved frame pointers, and `__fentry__` runs before the prologue saves one. Its `-pg` and
    /// `-finstrument-functions` recordings, and utrace's in every mode, show the destructor in
    /// the frame that owns the object, after the thrower's exit.
    PgForFentry,
    /// uftrace's own data lacks the records that were still in its shared buffers when the
    /// process was killed (SIGKILL: no handler or destructor runs), utrace's does not: each task
    /// of uftrace's trace must be the beginning of the task of utrace's trace that starts with
    /// the same line. `survival.rs` checks utrace's full trace.
    Prefix,
}

/// How both traces are reduced before comparing, on top of [`normalize::by_task`].
#[derive(Clone, Copy, Debug)]
pub enum Norm {
    /// Nothing more.
    Exact,
    /// `f() {` directly followed by `} /* f */` in the same task is folded into `f();`. Replay
    /// prints a leaf as `f();` only when no record of another task falls between its entry and
    /// exit in the merged, time-ordered stream, so in programs with several tasks running at
    /// once the choice depends on scheduling, not on the data.
    FoldLeaves,
    /// Only the entry lines are kept (`}` lines dropped). After `longjmp` (or `siglongjmp` out of
    /// a signal handler) the jumped-over frames have no exits: uftrace (without its
    /// setjmp/longjmp PLT hooks) leaves them open and, in `-finstrument-functions` mode, pops one
    /// per later exit, while utrace closes them when the frame the jump landed in returns (exact
    /// return-slot matching, spec/runtime.md §4.3).
    /// Where the closing lines fall is therefore tool-specific; which functions were entered,
    /// in which order and at which depth is not.
    Entries,
}

/// One recording: a program, its arguments and how it is compared.
#[derive(Clone, Copy, Debug)]
pub struct Case {
    pub prog: &'static str,
    pub args: &'static [&'static str],
    pub reference: Reference,
    pub norm: Norm,
}

impl Case {
    pub const fn new(prog: &'static str, args: &'static [&'static str]) -> Self {
        Self {
            prog,
            args,
            reference: Reference::NoLibcall,
            norm: Norm::Exact,
        }
    }

    pub const fn reference(mut self, reference: Reference) -> Self {
        self.reference = reference;
        self
    }

    pub const fn norm(mut self, norm: Norm) -> Self {
        self.norm = norm;
        self
    }

    /// `prog args... [mode]`, for messages.
    pub fn describe(&self, mode: Mode) -> String {
        let mut words = vec![self.prog];
        words.extend_from_slice(self.args);
        format!("{} [{}]", words.join(" "), mode.dir_name())
    }
}

/// The programs that end normally. Arguments keep the traces small.
const MATRIX: &[Case] = &[
    Case::new("abc", &[]),
    Case::new("args", &[]),
    // glibc's backtrace() through hijacked return addresses (stack_walks.rs checks the frames).
    Case::new("backtrace", &["glibc-only"]),
    Case::new("cxx", &[]),
    // 10,000 levels, far past the 1024 entries of the default shadow stack: deeper calls are
    // not recorded, and `exit()` from below the limit leaves 1024 functions open.
    Case::new("deep", &[]),
    Case::new("dtypes", &[]),
    Case::new("deep", &["2000", "exit"]),
    // A -pg library loaded with dlopen: its constructor and functions, named through DLOP.
    Case::new("dlopen", &[]),
    Case::new("exception", &[]).reference(Reference::PgForFentry),
    Case::new("exec", &[]),
    Case::new("fib", &["7"]),
    Case::new("fork", &[]),
    Case::new("ksys", &[]),
    Case::new("libcall", &["hello"]),
    Case::new("locs", &[]),
    Case::new("longjmp", &[]).norm(Norm::Entries),
    Case::new("signal", &[]),
    Case::new("sigtrigger", &[]),
    Case::new("sigaltstack", &[]),
    // A signal handler that siglongjmps out: like longjmp.
    Case::new("sigjmp", &[]).norm(Norm::Entries),
    Case::new("sleep", &[]),
    // Time-bound: no time at all keeps the trace deterministic (the fault tests spin longer).
    Case::new("spin", &["0"]),
    Case::new("thread", &[]).norm(Norm::FoldLeaves),
    Case::new("thread_quit", &[]),
    Case::new("vfork", &[]),
];

/// Applies `norm` to [`normalize::by_task`] output.
pub fn normalized(output: &str, norm: Norm) -> String {
    let text = normalize::by_task(output, Anchor::Main);
    match norm {
        Norm::Exact => text,
        Norm::FoldLeaves => normalize::fold_leaves(&text),
        Norm::Entries => text
            .lines()
            .filter(|line| !line.trim_start().starts_with('}'))
            .map(|line| format!("{line}\n"))
            .collect(),
    }
}

/// The trace of each task (lines grouped by the TID inside `[...]`, first-appearance order),
/// from its first line, reduced like [`normalized`]. Used for [`Reference::Prefix`], where
/// uftrace may have lost the records of a whole task, `main`'s included.
pub fn tasks_of(output: &str, norm: Norm) -> Vec<String> {
    let mut groups: Vec<(String, String)> = Vec::new();
    for line in output.lines() {
        let Some(fields) = line.split(" | ").next().filter(|_| line.contains(" | ")) else {
            continue;
        };
        let Some(tid) = fields
            .split_once('[')
            .and_then(|(_, rest)| rest.split_once(']'))
            .map(|(tid, _)| tid.trim().to_string())
        else {
            continue;
        };
        let index = match groups.iter().position(|(t, _)| *t == tid) {
            Some(index) => index,
            None => {
                groups.push((tid, String::new()));
                groups.len() - 1
            }
        };
        groups[index].1.push_str(line);
        groups[index].1.push('\n');
    }
    groups
        .into_iter()
        .map(|(_, lines)| {
            let text = normalize::by_task(&lines, Anchor::Start);
            match norm {
                Norm::FoldLeaves => normalize::fold_leaves(&text),
                _ => text,
            }
        })
        .collect()
}

/// The remaining-functions block of replay output as `task K: [d] name, ...` lines, K being
/// the task's position among the TIDs of the trace (the TIDs differ between recordings), in
/// that order. Blank lines inside the block are ignored.
pub fn remaining(output: &str) -> String {
    let tids = normalize::tids(output);
    let mut lines = output.lines();
    if !lines.any(|l| l == "uftrace stopped tracing with remaining functions") {
        return String::new();
    }
    let mut tasks: Vec<(usize, Vec<String>)> = Vec::new();
    for line in lines {
        if let Some(tid) = line.strip_prefix("task: ") {
            let index = tids
                .iter()
                .position(|t| t == tid.trim())
                .unwrap_or(usize::MAX);
            tasks.push((index, Vec::new()));
        } else if line.starts_with('[') {
            if let Some((_, frames)) = tasks.last_mut() {
                frames.push(line.to_string());
            }
        }
    }
    tasks.sort_by_key(|(index, _)| *index);
    tasks
        .iter()
        .map(|(index, frames)| format!("task {index}: {}\n", frames.join(", ")))
        .collect()
}

/// Everything one recording of a [`Case`] produced.
pub struct Recorded {
    /// Holds both data directories until dropped.
    pub tmp: tempfile::TempDir,
    /// `utrace record`.
    pub record: Output,
    /// `uftrace record`.
    pub reference: Output,
    /// `uftrace replay` of utrace's data.
    pub by_uftrace: Output,
    /// `utrace replay` of utrace's data.
    pub by_utrace: Output,
    /// One message (with a diff) per failed check.
    pub failures: Vec<String>,
}

impl Recorded {
    /// With `UTRACE_KEEP_DATA=1`, keeps the data directories of a failed recording.
    pub fn keep_on_failure(self) {
        if !self.failures.is_empty() && std::env::var("UTRACE_KEEP_DATA").as_deref() == Ok("1") {
            eprintln!("keeping {}", self.tmp.keep().display());
        }
    }
}

/// `utrace record --no-event --no-libcall -d DIR PROG ARGS` (any exit status).
fn utrace_record(dir: &Path, prog: &Path, args: &[&str]) -> Output {
    let mut cmd = Command::new(util::utrace_bin());
    cmd.args(["record", "--no-event", "--no-libcall", "-d"])
        .arg(dir)
        .arg(prog)
        .args(args);
    util::run(cmd)
}

/// `uftrace record --no-event [--no-libcall] -d DIR PROG ARGS` (any exit status).
fn uftrace_record(dir: &Path, no_libcall: bool, prog: &Path, args: &[&str]) -> Output {
    let mut cmd = Command::new(util::uftrace_bin());
    cmd.args(["record", "--no-event"]);
    if no_libcall {
        cmd.arg("--no-libcall");
    }
    cmd.arg("-d").arg(dir).arg(prog).args(args);
    util::run(cmd)
}

/// The TIDs listed in a data directory's `task.txt`.
pub fn recorded_tids(dir: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(dir.join("task.txt")).unwrap_or_default();
    text.lines()
        .filter(|line| line.starts_with("TASK "))
        .filter_map(|line| {
            line.split(' ')
                .find_map(|word| word.strip_prefix("tid="))
                .map(str::to_string)
        })
        .collect()
}

/// Rings (`/dev/shm/utrace-<recorder>-<salt>/<tid>`) left behind for the tasks of `dir`.
pub fn shm_leftovers(dir: &Path) -> Vec<String> {
    let tids = recorded_tids(dir);
    let Ok(entries) = std::fs::read_dir("/dev/shm") else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with("utrace-"))
        .flat_map(|e| std::fs::read_dir(e.path()).into_iter().flatten())
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| {
            let name = p.file_name().unwrap_or_default().to_string_lossy();
            tids.iter().any(|tid| name == tid.as_str())
        })
        .map(|p| p.display().to_string())
        .collect()
}

/// Records `case` in `mode` with both tools and runs checks (a), (b) and (c) of the module
/// documentation. Failures are collected in [`Recorded::failures`], not raised.
pub fn record_and_compare(case: &Case, mode: Mode) -> Recorded {
    let what = case.describe(mode);
    let prog = util::testprog(case.prog, mode);
    let tmp = tempfile::tempdir().unwrap();
    let theirs = tmp.path().join("uftrace.data");
    let ours = tmp.path().join("utrace.data");

    let hooked = matches!(case.reference, Reference::Libcalls);
    let reference = match (case.reference, mode) {
        (Reference::PgForFentry, Mode::Fentry) => {
            let pg = util::testprog(case.prog, Mode::Pg);
            uftrace_record(&theirs, true, &pg, case.args)
        }
        _ => uftrace_record(&theirs, !hooked, &prog, case.args),
    };
    let record = utrace_record(&ours, &prog, case.args);
    let replay_opts: &[&str] = if hooked { &["--no-libcall"] } else { &[] };
    let theirs_by_uftrace = util::uftrace_replay(&theirs, replay_opts);
    let by_uftrace = util::uftrace_replay(&ours, &[]);
    let by_utrace = util::utrace_replay(&ours, &[]);

    let mut failures = Vec::new();
    if record.status.code() != reference.status.code() {
        failures.push(format!(
            "{what}: utrace record exited with {}, uftrace record with {}:\n{record}",
            record.status, reference.status
        ));
    }
    let leftovers = shm_leftovers(&ours);
    if !leftovers.is_empty() {
        failures.push(format!("{what}: left in /dev/shm: {leftovers:?}"));
    }

    let want = normalized(&theirs_by_uftrace.stdout, case.norm);
    if want.is_empty() && !matches!(case.reference, Reference::Prefix) {
        failures.push(format!(
            "{what}: uftrace recorded nothing:\n{reference}\n{theirs_by_uftrace}"
        ));
    }
    for (who, out) in [("uftrace", &by_uftrace), ("utrace", &by_utrace)] {
        if !out.status.success() {
            failures.push(format!(
                "{what}: `{who} replay` of utrace's data failed:\n{out}"
            ));
            continue;
        }
        match case.reference {
            Reference::NoLibcall | Reference::Libcalls | Reference::PgForFentry => {
                let got = normalized(&out.stdout, case.norm);
                if want != got {
                    failures.push(format!(
                        "{what}: `{who} replay` of utrace's data differs \
                         (- uftrace's data, + utrace's):\n{}\n{out}",
                        normalize::diff(&want, &got)
                    ));
                }
                // Where both keep every record, the open functions must match too (except
                // after longjmp, for the reason given at `Norm::Entries`).
                if matches!(
                    case.reference,
                    Reference::NoLibcall | Reference::PgForFentry
                ) && !matches!(case.norm, Norm::Entries)
                {
                    let want = remaining(&theirs_by_uftrace.stdout);
                    let got = remaining(&out.stdout);
                    if want != got {
                        failures.push(format!(
                            "{what}: `{who} replay` lists other remaining functions \
                             (- uftrace's data, + utrace's):\n{}\n{out}",
                            normalize::diff(&want, &got)
                        ));
                    }
                }
            }
            Reference::Prefix => {
                let ours = tasks_of(&out.stdout, case.norm);
                for task in tasks_of(&theirs_by_uftrace.stdout, case.norm) {
                    let first = task.lines().next().unwrap_or_default();
                    let matched = ours
                        .iter()
                        .any(|o| o.lines().next() == Some(first) && o.starts_with(task.as_str()));
                    if !matched {
                        failures.push(format!(
                            "{what}: a task of uftrace's trace is not the beginning of one of \
                             `{who} replay`'s:\n{task}\n{out}"
                        ));
                    }
                }
            }
        }
    }

    Recorded {
        tmp,
        record,
        reference,
        by_uftrace,
        by_utrace,
        failures,
    }
}

/// Runs every case of `table` named `prog` in every mode; fails with all mismatches at once.
pub fn check_program(table: &[Case], prog: &str, extra: impl Fn(&Case, Mode, &mut Recorded)) {
    if !util::need_uftrace(prog) {
        return;
    }
    let cases: Vec<&Case> = table.iter().filter(|c| c.prog == prog).collect();
    assert!(!cases.is_empty(), "no case for {prog}");
    let mut failures = Vec::new();
    for case in cases {
        for mode in MODES {
            let mut recorded = record_and_compare(case, mode);
            extra(case, mode, &mut recorded);
            failures.extend(recorded.failures.iter().cloned());
            recorded.keep_on_failure();
        }
    }
    util::assert_no_failures(&failures);
}

macro_rules! matrix {
    ($($test:ident: $prog:literal;)*) => {$(
        #[test]
        fn $test() {
            check_program(MATRIX, $prog, |_, _, _| {});
        }
    )*
        /// The programs the tests of this module record.
        const MATRIX_TESTS: &[&str] = &[$($prog),*];
    };
}

matrix! {
    abc: "abc";
    args: "args";
    backtrace: "backtrace";
    cxx: "cxx";
    exception: "exception";
    exec: "exec";
    deep: "deep";
    dtypes: "dtypes";
    dlopen: "dlopen";
    fib: "fib";
    fork: "fork";
    ksys: "ksys";
    libcall: "libcall";
    locs: "locs";
    longjmp: "longjmp";
    signal: "signal";
    sigtrigger: "sigtrigger";
    sigaltstack: "sigaltstack";
    sigjmp: "sigjmp";
    sleep: "sleep";
    spin: "spin";
    thread: "thread";
    thread_quit: "thread_quit";
    vfork: "vfork";
}

/// Each program in `testprogs/` has a case here, in `survival.rs`, `record_processes.rs` or
/// `record_events.rs`, and a test runs it.
#[test]
fn every_testprog_is_recorded() {
    let mut missing = Vec::new();
    for entry in std::fs::read_dir(util::testprogs_src()).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_stem().unwrap().to_string_lossy().into_owned();
        let is_source = matches!(path.extension().and_then(|e| e.to_str()), Some("c" | "cc"));
        // `*_lib.c` are shared libraries loaded by a program, not programs.
        if !is_source || name.ends_with("_lib") {
            continue;
        }
        let in_matrix = MATRIX.iter().any(|c| c.prog == name) && MATRIX_TESTS.contains(&&*name);
        let in_survival = crate::survival::covers(&name);
        let elsewhere = crate::record_processes::covers(&name)
            || crate::record_events::covers(&name)
            || crate::record_libcalls::covers(&name)
            || crate::record_autoargs::covers(&name)
            || crate::record_autoargs_dlopen::covers(&name)
            || crate::cxx_names::covers(&name)
            || crate::srcline::covers(&name)
            || crate::record_patch::covers(&name)
            || crate::record_attach::covers(&name)
            || crate::record_flight::covers(&name)
            || crate::kernel_io::covers(&name)
            || crate::record_agent::covers(&name)
            || crate::stack_walks::covers(&name)
            || crate::record_sessions::covers(&name)
            || crate::record_runtime::covers(&name);
        if !in_matrix && !in_survival && !elsewhere {
            missing.push(name);
        }
    }
    assert!(
        missing.is_empty(),
        "testprogs without a record test (add a case and a test to \
         tests/integration/record_matrix.rs or survival.rs): {missing:?}"
    );
}

#[cfg(test)]
mod self_test {
    use super::*;

    #[test]
    fn fold_leaves_only_folds_direct_pairs() {
        let text = "main() {\n  a() {\n  } /* a */\n  b() {\n    c();\n  } /* b */\n} /* main */\n";
        assert_eq!(
            normalize::fold_leaves(text),
            "main() {\n  a();\n  b() {\n    c();\n  } /* b */\n} /* main */\n"
        );
        let args = "  f(1, \"x\") {\n  } = 2; /* f */\n  g(&h) {\n  } /* g */\n";
        assert_eq!(
            normalize::fold_leaves(args),
            "  f(1, \"x\") = 2;\n  g(&h);\n"
        );
    }

    #[test]
    fn remaining_blocks_by_task_position() {
        let out = "\
# DURATION     TID     FUNCTION
            [  7022] | main() {
            [  7024] | worker() {

uftrace stopped tracing with remaining functions
================================================
task: 7024
[0] worker

task: 7022
[1] leave
[0] main
";
        assert_eq!(
            remaining(out),
            "task 0: [1] leave, [0] main\ntask 1: [0] worker\n"
        );
        assert_eq!(remaining("main() {\n} /* main */\n"), "");
    }
}
