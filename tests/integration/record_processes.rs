//! Processes and control flow (issue 17): `vfork` children that work and exec, `fork` with
//! allocations in both processes, `longjmp` from several depths and in a loop (with the values
//! `setjmp` returns, under a return value spec), `pthread_exit`
//! and `daemon`, `posix_spawn`, recorded with library calls by `utrace record` and `uftrace record
//! --no-event`, in every build mode, lazily bound and with `-z now`.
//! `uftrace replay` and `utrace replay` of utrace's data (with the case's replay options) must
//! print, per task and by function column from the first line, what `uftrace replay` of
//! uftrace's data prints.

use crate::normalize::fold_leaves;
use crate::normalize::{self, Anchor};
use crate::record_matrix::MODES;
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
    // posix_spawn of the program itself, twice: each spawned program is traced (its own
    // `main() { a() { b() { c() { getpid(); ...`), the parent's `posix_spawn()` and
    // `waitpid()` around them.
    Case {
        fold: true,
        ..case("spawn")
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
    util::assert_no_failures(&failures);
}

#[test]
fn processes_and_control_flow_match_uftrace() {
    if !util::need_uftrace("processes_and_control_flow_match_uftrace") {
        return;
    }
    check(CASES);
}

/// The leader's lines of the old image in a replay: those of the first task that come
/// before the other thread's `execl() {` (the replay is in time order).
fn old_image_of_leader(replay: &str) -> (String, String) {
    let tid = |l: &str| {
        l.split_once('[')
            .and_then(|(_, r)| r.split_once(']'))
            .map(|(t, _)| t.trim().to_string())
    };
    let leader = replay.lines().find_map(tid);
    let exec = replay
        .lines()
        .position(|l| l.contains("execl() {"))
        .unwrap_or(0);
    let (mut old, mut rest) = (String::new(), String::new());
    for (i, l) in replay.lines().enumerate() {
        let out = if i < exec && tid(l).is_some() && tid(l) == leader {
            &mut old
        } else {
            &mut rest
        };
        out.push_str(l);
        out.push('\n');
    }
    (old, rest)
}

/// A thread (not the leader) execs: the new image runs in the leader's tid, and every thread
/// of the old image is gone, so its `main()` starts at depth 0 of that task, not under the
/// leader's `main() { pthread_create() {` (or `pthread_join() {`) left open by the exec.
/// What uftrace 0.13 keeps of the leader's old image depends on timing and build mode (it
/// writes an ENTRY only once the function calls another or returns, and the leader's unwritten
/// records die with it), and its reader nests the new image under whatever it kept (depth 0,
/// 1 or 2 from run to run). So the leader's old-image lines are left out, the rest is
/// compared by function without the indentation, utrace's data must hold the old image
/// (`main() {` at least), and utrace's replay must show the new `main() {` at depth 0.
#[test]
fn thread_exec_matches_uftrace() {
    if !util::need_uftrace("thread_exec_matches_uftrace") {
        return;
    }
    let mut failures = Vec::new();
    for mode in MODES {
        let exe = util::testprog("thread_exec", mode);
        let tmp = tempfile::tempdir().unwrap();
        let theirs = tmp.path().join("uftrace.data");
        let ours = tmp.path().join("utrace.data");
        util::record_with(true, &theirs, &exe, &[], &[]);
        util::record_with(false, &ours, &exe, &[], &[]);
        // The leader's new image only: what uftrace 0.13 keeps of the exec'ing thread's
        // records depends on timing too.
        let new_image = |out: &str| {
            let (_, rest) = old_image_of_leader(out);
            let task = normalize::by_task(&rest, Anchor::Start);
            let start = task.find("__monstartup").or_else(|| task.find("main() {"));
            start.map_or(String::new(), |at| task[at..].to_string())
        };
        let flat = |text: &str| -> String {
            text.lines()
                .map(|l| format!("{}\n", l.trim_start()))
                .collect()
        };
        let want = new_image(&util::uftrace_replay(&theirs, &[]).stdout);
        for (who, out) in [
            ("uftrace", util::uftrace_replay(&ours, &[])),
            ("utrace", util::utrace_replay(&ours, &[])),
        ] {
            let (got, want) = (flat(&new_image(&out.stdout)), flat(&want));
            if want != got {
                failures.push(format!(
                    "thread_exec [{}]: `{who} replay` of utrace's data differs:\n{}\n{out}",
                    mode.dir_name(),
                    normalize::diff(&want, &got)
                ));
            }
        }
        let ours_replay = util::utrace_replay(&ours, &[]).stdout;
        let (old, rest) = old_image_of_leader(&ours_replay);
        if !rest.lines().any(|l| l.ends_with("| main() {")) {
            failures.push(format!(
                "thread_exec [{}]: the new image's main() is not at depth 0:\n{ours_replay}",
                mode.dir_name()
            ));
        }
        if !old.contains("main() {") {
            failures.push(format!(
                "thread_exec [{}]: the leader's old image is missing:\n{ours_replay}",
                mode.dir_name()
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// `thread_exec late`: main gets out of pthread_create(), waits until the thread is about to
/// exec and (most of the time) returns and enters pthread_join() after the thread's execl()
/// entry. Those calls belong to the old image (nested in main), and the new image's main()
/// starts at depth 0 of the leader where its session starts, with nothing of the old image
/// left open.
#[test]
fn thread_exec_late_leader_calls_stay_in_the_old_image() {
    let mut failures = Vec::new();
    for mode in MODES {
        let exe = util::testprog("thread_exec", mode);
        let tmp = tempfile::tempdir().unwrap();
        util::record_with(false, tmp.path(), &exe, &["late"], &[]).assert_success();
        let out = util::utrace_replay(tmp.path(), &[]);
        out.assert_success();
        let text = &out.stdout;
        let (_, rest) = old_image_of_leader(text);
        // Whether main is out of wait_exec() before the exec ends it stays the scheduler's
        // choice on a busy machine: what it did shows nested in the old main() if at all.
        let at_0 = |f: &str| text.lines().any(|l| l.ends_with(&format!("| {f}")));
        let ok = !at_0("} /* pthread_create */")
            && !at_0("} /* wait_exec */")
            && !at_0("pthread_join() {")
            && rest.lines().any(|l| l.ends_with("| main() {"))
            && rest.lines().any(|l| l.ends_with("|   after_exec();"))
            && !text.contains("remaining functions");
        if !ok {
            failures.push(format!("thread_exec late [{}]:\n{text}", mode.dir_name()));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
