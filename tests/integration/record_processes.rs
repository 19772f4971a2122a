//! Processes and control flow (issue 17): `vfork` children that work and exec, `fork` with
//! allocations in both processes, `longjmp` from several depths and in a loop (with the values
//! `setjmp` returns, under a return value spec), `pthread_exit`
//! and `daemon`, recorded with library calls by `utrace record` and `uftrace record
//! --no-event`, in every build mode, lazily bound and with `-z now`.
//! `uftrace replay` and `utrace replay` of utrace's data (with the case's replay options) must
//! print, per task and by function column from the first line, what `uftrace replay` of
//! uftrace's data prints.

use crate::normalize::{self, Anchor};
use crate::record_matrix::{fold_leaves, MODES};
use crate::util::{self, Mode};

/// One scenario: program, its arguments, record options, replay options, and whether leaves
/// are folded (tasks running at once: see `record_matrix::Norm::FoldLeaves`).
struct Case {
    prog: &'static str,
    args: &'static [&'static str],
    record: &'static [&'static str],
    replay: &'static [&'static str],
    fold: bool,
}

const fn case(prog: &'static str) -> Case {
    Case {
        prog,
        args: &[],
        record: &[],
        replay: &[],
        fold: false,
    }
}

const CASES: &[Case] = &[
    // The vfork child's own task: `} /* vfork */`, its calls, `execl() {`; the parent's
    // `} /* vfork */` when it resumes. (Folded: whether the parent's `waitpid()` prints as a
    // block depends on when the exec'd child's records land.)
    Case {
        fold: true,
        ..case("vfork")
    },
    Case {
        fold: true,
        ..case("vfork_work")
    },
    // No library call at the top level after main in either process.
    Case {
        replay: &["--no-merge"],
        fold: true,
        ..case("fork_alloc")
    },
    Case {
        fold: true,
        ..case("fork_alloc")
    },
    // Every longjmp closes the frames it abandons (`longjmp() {` then `} /* _setjmp */`),
    // lazily bound slots included (re-armed by the next hook).
    case("longjmp_loop"),
    Case {
        record: &["-a"],
        ..case("longjmp_loop")
    },
    // `_setjmp() = 0;`, `longjmp(1) {` and `} = 1; /* _setjmp */`, with return value specs
    // on the jump point (and `-a` for the program's own functions).
    Case {
        record: &["-a", "-A", "longjmp@arg2", "-R", "_setjmp@retval"],
        ..case("longjmp_loop")
    },
    Case {
        record: &["-A", "longjmp@arg2/d", "-R", "_setjmp@retval/x"],
        ..case("longjmp")
    },
    Case {
        record: &["-A", "siglongjmp@arg2", "-R", "__sigsetjmp@retval"],
        ..case("sigjmp")
    },
    case("longjmp"),
    Case {
        record: &["-a"],
        ..case("longjmp")
    },
    Case {
        fold: true,
        ..case("pthread_exit")
    },
    Case {
        fold: true,
        ..case("daemon")
    },
];

/// How the test programs are linked.
const LINKS: &[&[&str]] = &[&[], &["-Wl,-z,now"]];

fn compare(c: &Case, mode: Mode, link: &[&str]) -> Vec<String> {
    let what = format!(
        "{} [{}] {} record {} replay {}",
        c.prog,
        mode.dir_name(),
        link.join(" "),
        c.record.join(" "),
        c.replay.join(" ")
    );
    let exe = util::testprog_with(c.prog, mode, link);
    let tmp = tempfile::tempdir().unwrap();
    let theirs = tmp.path().join("uftrace.data");
    let ours = tmp.path().join("utrace.data");
    let reference = util::record_with(true, &theirs, &exe, c.args, c.record);
    let recorded = util::record_with(false, &ours, &exe, c.args, c.record);
    let mut failures = Vec::new();
    if recorded.status.code() != reference.status.code() {
        failures.push(format!(
            "{what}: utrace exited with {}, uftrace with {}:\n{recorded}",
            recorded.status, reference.status
        ));
    }
    // `daemon`'s last process outlives the recorders' wait for it: let it finish.
    if c.prog == "daemon" {
        std::thread::sleep(std::time::Duration::from_millis(300));
    }
    let reduce = |out: &str| {
        let text = normalize::by_task(out, Anchor::Start);
        if c.fold {
            fold_leaves(&text)
        } else {
            text
        }
    };
    let want = reduce(&util::uftrace_replay(&theirs, c.replay).stdout);
    for (who, out) in [
        ("uftrace", util::uftrace_replay(&ours, c.replay)),
        ("utrace", util::utrace_replay(&ours, c.replay)),
    ] {
        let got = reduce(&out.stdout);
        if want != got {
            failures.push(format!(
                "{what}: `{who} replay` of utrace's data differs (- uftrace's data, + utrace's):\n{}\n{out}",
                normalize::diff(&want, &got)
            ));
        }
    }
    failures
}

/// Whether a test here records `prog` (see `record_matrix::every_testprog_is_recorded`).
pub fn covers(prog: &str) -> bool {
    CASES.iter().any(|c| c.prog == prog) || prog == "thread_exec"
}

fn check(cases: &[Case]) {
    let mut failures = Vec::new();
    for c in cases {
        for mode in MODES {
            for link in LINKS {
                failures.extend(compare(c, mode, link));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} mismatch(es):\n\n{}",
        failures.len(),
        failures.join("\n\n")
    );
}

#[test]
fn processes_and_control_flow_match_uftrace() {
    if !util::need_uftrace("processes_and_control_flow_match_uftrace") {
        return;
    }
    check(CASES);
}

/// A thread (not the leader) execs: the new image's records go to the leader's tid, after
/// the leader's records of the old image. uftrace 0.13 writes an ENTRY record only once the
/// function calls another or returns (or its own thread flushes at exit or exec): the leader,
/// ended by the other thread's exec inside `pthread_join()`, never writes `pthread_join() {`,
/// so the new image's `main()` shows one level under the old `main() {`. utrace writes every
/// ENTRY at once: `pthread_join() {` is in the data, and the new `main()` shows two levels
/// under it, in both tools' replays (replay is not the cause: the data differ).
#[test]
#[ignore = "uftrace 0.13 drops the unwritten ENTRY of the leader's blocked pthread_join (lazy \
            entry records); utrace records it, so the exec'd image's depth differs by one"]
fn thread_exec_matches_uftrace() {
    if !util::need_uftrace("thread_exec_matches_uftrace") {
        return;
    }
    check(&[case("thread_exec")]);
}
