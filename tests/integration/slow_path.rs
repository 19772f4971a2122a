//! libmcount's two paths give the same trace: every program in `testprogs/`, in every build
//! mode, recorded by `utrace record` (library calls hooked) once as it is and once with
//! `UTRACE_SLOW_PATH=1`, which sends every hook through the Rust handlers instead of the
//! trampolines' fast paths. `utrace replay` of both must show the same functions per task
//! (uftrace's function-column comparison, as in `record_matrix`).
//!
//! Needs gcc only: both recordings are utrace's.

use std::path::Path;
use std::process::Command;

use crate::normalize;
use crate::record_matrix::{self, Norm, MODES};
use crate::util::{self, Mode, Output};

/// How the two replays of one program are reduced before comparing.
#[derive(Clone, Copy, Debug)]
enum Reduce {
    /// As `record_matrix` reduces a trace ([`record_matrix::normalized`]).
    Matrix(Norm),
    /// Per task, the distinct lines in order of first appearance: the program loops for a
    /// time, not a number of calls.
    Distinct,
    /// [`record_matrix::tasks_of`]: per task from its first line (killed programs, whose
    /// `main` may not be the first task shown).
    Tasks(Norm),
}

/// One program: its arguments, extra `record` and `replay` options and how its replays are
/// compared.
struct Prog {
    name: &'static str,
    args: &'static [&'static str],
    record: &'static [&'static str],
    replay: &'static [&'static str],
    reduce: Reduce,
}

const fn prog(name: &'static str, args: &'static [&'static str], reduce: Reduce) -> Prog {
    Prog {
        name,
        args,
        record: &[],
        replay: &[],
        reduce,
    }
}

/// A program of several tasks that wait for each other: which library calls (`waitpid`,
/// `pthread_cond_wait`…) are entered, and whether a call of one task is a leaf in the merged
/// stream, depends on scheduling, so only the program's own functions are compared.
const fn tasks(name: &'static str, reduce: Reduce) -> Prog {
    Prog {
        name,
        args: &[],
        record: &[],
        replay: &["--no-libcall"],
        reduce,
    }
}

const EXACT: Reduce = Reduce::Matrix(Norm::Exact);
const FOLD: Reduce = Reduce::Matrix(Norm::FoldLeaves);

/// Every program of `testprogs/` (checked by [`every_testprog_runs_on_both_paths`]).
const PROGS: &[Prog] = &[
    prog("abc", &[], EXACT),
    prog("agent_phases", &["-", "6"], EXACT),
    prog("args", &[], EXACT),
    prog("backtrace", &[], EXACT),
    // Arguments and return values: the fast path records them from its plan cache.
    Prog {
        name: "args",
        args: &[],
        record: &["-a"],
        replay: &[],
        reduce: EXACT,
    },
    prog("closefrom", &[], EXACT),
    prog("crash", &[], Reduce::Tasks(Norm::Exact)),
    prog("cxx", &[], EXACT),
    prog("cxxlib", &[], EXACT),
    prog("cxxnames", &[], EXACT),
    prog("dlopen_cxx", &[], EXACT),
    prog("deep", &["2000"], EXACT),
    prog("deep_throw", &[], EXACT),
    prog("dlopen", &[], EXACT),
    // A dlopened library's calls with their values (hooked late, argument table of their own).
    Prog {
        name: "dlopen_malloc",
        args: &[],
        record: &["-l", "-a"],
        replay: &[],
        reduce: EXACT,
    },
    prog("dtypes", &[], EXACT),
    prog("exception", &[], EXACT),
    prog("exec", &[], EXACT),
    // Reads its return addresses: the trampoline's, the same on both paths.
    prog("retaddr", &[], EXACT),
    prog("exit", &[], EXACT),
    prog("fib", &["7"], EXACT),
    Prog {
        name: "fib",
        args: &["5"],
        record: &["-A", "fib@arg1", "-R", "fib@retval"],
        replay: &[],
        reduce: EXACT,
    },
    prog("flight", &["marker", "100"], EXACT),
    tasks("fork", FOLD),
    // Source locations (the library's too) and a record-time location filter.
    Prog {
        name: "srcline",
        args: &[],
        record: &["--srcline"],
        replay: &["--srcline"],
        reduce: EXACT,
    },
    Prog {
        name: "srcline",
        args: &[],
        record: &["-L", "window.c@hide"],
        replay: &[],
        reduce: EXACT,
    },
    prog("kill", &[], Reduce::Tasks(Norm::Exact)),
    prog("ksys", &[], EXACT),
    prog("libcall", &["hello"], EXACT),
    // Arguments at explicit locations and a long double return value (Rust handlers only).
    Prog {
        name: "locs",
        args: &[],
        record: &[
            "-A",
            "many@arg1%RDI,arg8%stack+2",
            "-A",
            "ldmul@fparg1/80,fparg2/80%stack3",
            "-R",
            "ldmul@retval/f80",
            "-A",
            "ld_sum@arg1/t16:ld%RDI+XMM0",
        ],
        replay: &[],
        reduce: EXACT,
    },
    // Its worker thread's records may fall inside `pthread_join`.
    prog("libc_calls", &[], FOLD),
    prog("longjmp", &[], EXACT),
    prog("sigaltstack", &[], EXACT),
    prog("sigjmp", &[], EXACT),
    prog("signal", &[], EXACT),
    prog("sigtrigger", &[], EXACT),
    prog("sleep", &[], EXACT),
    prog("spin", &["100"], Reduce::Distinct),
    tasks("rearm_threads", FOLD),
    tasks("thread", FOLD),
    tasks("thread_exit", FOLD),
    tasks("thread_kill", Reduce::Tasks(Norm::FoldLeaves)),
    tasks("thread_quit", FOLD),
    tasks("vfork", FOLD),
    tasks("vfork_work", FOLD),
    tasks("thread_exec", FOLD),
    tasks("fork_alloc", FOLD),
    prog("longjmp_loop", &[], EXACT),
    tasks("pthread_exit", FOLD),
    tasks("daemon", FOLD),
    tasks("spawn", FOLD),
    prog("backtrace", &[], EXACT),
    Prog {
        name: "sigtrigger",
        args: &[],
        record: &["--signal", "SIGUSR1@finish"],
        replay: &[],
        reduce: EXACT,
    },
    prog("pid", &[], EXACT),
    prog("migrate", &[], EXACT),
    prog("sdt", &[], EXACT),
    Prog {
        name: "sdt",
        args: &[],
        record: &["-E", "myapp:.*"],
        replay: &[],
        reduce: EXACT,
    },
];

/// `utrace record OPTS -d DIR PROG ARGS`, on the slow path when `slow` (any exit status).
fn record(dir: &Path, slow: bool, p: &Prog, bin: &Path) -> Output {
    let mut cmd = Command::new(util::utrace_bin());
    // Without context switches: pre-emptions differ from run to run.
    cmd.arg("record")
        .arg("--no-sched")
        .args(p.record)
        .arg("-d")
        .arg(dir);
    cmd.arg(bin).args(p.args);
    if slow {
        cmd.env(record_format::env::SLOW_PATH, "1");
    } else {
        cmd.env_remove(record_format::env::SLOW_PATH);
    }
    util::run(cmd)
}

/// The replay reduced as `how` says, addresses (stack pointers differ between runs) masked.
fn reduce(text: &str, how: Reduce) -> String {
    let text = &util::mask_addresses(text);
    match how {
        Reduce::Matrix(norm) => record_matrix::normalized(text, norm),
        Reduce::Tasks(norm) => record_matrix::tasks_of(text, norm).join("--\n"),
        Reduce::Distinct => record_matrix::tasks_of(text, Norm::Exact)
            .iter()
            .map(|task| {
                let mut seen = std::collections::HashSet::new();
                task.lines()
                    .filter(|line| seen.insert(*line))
                    .map(|line| format!("{line}\n"))
                    .collect::<String>()
            })
            .collect::<Vec<_>>()
            .join("--\n"),
    }
}

/// Records `p` in `mode` on both paths; one message per difference.
fn compare(p: &Prog, mode: Mode) -> Vec<String> {
    let what = format!(
        "{} {} {} [{}]",
        p.record.join(" "),
        p.name,
        p.args.join(" "),
        mode.dir_name()
    );
    let bin = util::testprog(p.name, mode);
    let tmp = tempfile::tempdir().unwrap();
    let mut replays = Vec::new();
    let mut failures = Vec::new();
    for slow in [false, true] {
        let dir = tmp
            .path()
            .join(if slow { "slow.data" } else { "fast.data" });
        let rec = record(&dir, slow, p, &bin);
        let out = util::utrace_replay(&dir, p.replay);
        if !out.status.success() {
            failures.push(format!("{what}: replay failed:\n{rec}\n{out}"));
        }
        replays.push((rec, out));
    }
    let [(fast_rec, fast), (slow_rec, slow)] = &replays[..] else {
        unreachable!()
    };
    if fast_rec.status.code() != slow_rec.status.code() {
        failures.push(format!(
            "{what}: record exited with {} on the fast path, {} on the slow one",
            fast_rec.status, slow_rec.status
        ));
    }
    let want = reduce(&fast.stdout, p.reduce);
    let got = reduce(&slow.stdout, p.reduce);
    if want.trim().is_empty() {
        failures.push(format!("{what}: nothing recorded:\n{fast_rec}\n{fast}"));
    }
    if want != got {
        failures.push(format!(
            "{what}: the slow path's trace differs (- fast, + slow):\n{}",
            normalize::diff(&want, &got)
        ));
    }
    failures
}

#[test]
fn fast_and_slow_paths_record_the_same() {
    let mut failures = Vec::new();
    for p in PROGS {
        for mode in MODES {
            failures.extend(compare(p, mode));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// Each program in `testprogs/` has an entry in [`PROGS`].
#[test]
fn every_testprog_runs_on_both_paths() {
    let mut missing = Vec::new();
    for entry in std::fs::read_dir(util::testprogs_src()).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_stem().unwrap().to_string_lossy().into_owned();
        let is_source = matches!(path.extension().and_then(|e| e.to_str()), Some("c" | "cc"));
        // Programs built without -pg (dynamic patching, attach) have their own tests.
        // The I/O programs need libaio / liburing and root: kernel_io.rs runs them.
        let elsewhere = crate::record_patch::covers(&name)
            || crate::record_attach::covers(&name)
            || crate::kernel_io::covers(&name);
        if is_source
            && !name.ends_with("_lib")
            && !elsewhere
            && !PROGS.iter().any(|p| p.name == name)
        {
            missing.push(name);
        }
    }
    assert!(
        missing.is_empty(),
        "testprogs missing from slow_path.rs: {missing:?}"
    );
}
