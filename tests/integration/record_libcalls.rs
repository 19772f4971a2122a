//! Library calls (spec/runtime.md §7): `utrace record` without `--no-libcall` hooks the
//! executable's PLT, so calls into shared libraries appear in the trace at their PLT entry.
//!
//! Each case is recorded by `utrace record` and `uftrace record --no-event` with library calls
//! on, in every build mode, linked lazily (the default: slots bound on first call, re-armed by
//! utrace), with `-z now` (slots bound at load time, inside the read-only RELRO segment) and
//! as a non-PIE executable, and compiled with `-fno-plt`; a few also with `--nest-libcall`.
//! `uftrace replay` and `utrace replay` of utrace's data must print, per task and by function
//! column from the first line (`__monstartup();`, `__cxa_atexit();` included), what
//! `uftrace replay` of uftrace's data prints.

use crate::normalize::fold_leaves;
use crate::normalize::{self, Anchor};
use crate::record_matrix::MODES;
use crate::util::{self, Mode};

/// Program, arguments, and whether leaves are folded (several tasks running at once: see
/// `record_matrix::Norm::FoldLeaves`). `fork` is folded because whether the parent's `fork()`
/// or `waitpid()` prints as a block depends on when the child's first record lands between
/// its entry and exit, in uftrace's recordings as in ours.
const CASES: &[(&str, &[&str], bool)] = &[
    ("abc", &[], false),
    ("libcall", &["hello"], false),
    ("cxx", &[], false),
    ("exception", &[], false),
    ("exec", &[], false),
    ("fork", &[], true),
    ("signal", &[], false),
    ("sleep", &[], false),
    ("exit", &[], false),
    ("longjmp", &[], false),
    ("sigjmp", &[], false),
    ("thread", &[], true),
    ("cxxlib", &[], false),
    // A C++ library loaded by dlopen: its functions named from its own symbols.
    ("dlopen_cxx", &[], false),
];

/// Programs that look at their own frames, checked by [`frame_readers_match_uftrace`]:
/// program, arguments, fold.
const FRAMES: &[(&str, &[&str], bool)] = &[
    // glibc's backtrace() under traced functions (`walk_glibc() { backtrace(); printf(); }`).
    // Only whether the walk is long enough is printed: how many frames it finds differs
    // (uftrace 0.13 finds one too many, see `stack_walks.rs`), and the program's calls per
    // frame would differ with it.
    ("backtrace", &["glibc-only"], false),
    // Return addresses read and walked (`stack_walks.rs` checks what the program sees).
    ("retaddr", &[], false),
    // Exceptions through 200 frames, rethrown on the way.
    ("deep_throw", &[], false),
];

/// How the test programs are linked (and `-fno-plt`: library calls through the GOT, no PLT
/// entry: uftrace 0.13 records none of them, nor does utrace).
const LINKS: &[&[&str]] = &[&[], &["-Wl,-z,now"], &["-no-pie"], &["-fno-plt"]];

/// `--nest-libcall` cases (the libraries' own PLT calls, nested): program, arguments, fold.
/// (uftrace 0.13 itself aborts on a C++ exception with `-l`, so `exception` is not among them.)
const NESTED: &[(&str, &[&str], bool)] = &[
    ("libcall", &["hello"], false),
    ("cxx", &[], false),
    ("cxxlib", &[], false),
    ("thread", &[], true),
];

fn compare(
    prog: &str,
    args: &[&str],
    fold: bool,
    mode: Mode,
    link: &[&str],
    opts: &[&str],
) -> Vec<String> {
    let what = format!(
        "{prog} [{}] {} {}",
        mode.dir_name(),
        link.join(" "),
        opts.join(" ")
    );
    let exe = util::testprog_with(prog, mode, link);
    let tmp = tempfile::tempdir().unwrap();
    let theirs = tmp.path().join("uftrace.data");
    let ours = tmp.path().join("utrace.data");
    // uftrace 0.13's -mfentry recording misplaces destructors run during unwinding: its -pg
    // build is the reference there (see `record_matrix::Reference::PgForFentry`).
    let reference_exe = if ["exception", "deep_throw"].contains(&prog) && mode == Mode::Fentry {
        util::testprog_with(prog, Mode::Pg, link)
    } else {
        exe.clone()
    };
    let reference = util::record_with(true, &theirs, &reference_exe, args, opts);
    let recorded = util::record_with(false, &ours, &exe, args, opts);
    let mut failures = Vec::new();
    if recorded.status.code() != reference.status.code() {
        failures.push(format!(
            "{what}: utrace exited with {}, uftrace with {}:\n{recorded}",
            recorded.status, reference.status
        ));
    }
    let reduce = |out: &str| {
        let text = normalize::by_task(out, Anchor::Start);
        if fold {
            fold_leaves(&text)
        } else {
            text
        }
    };
    let want = reduce(&util::uftrace_replay(&theirs, &[]).stdout);
    failures.extend(util::compare_replays(&what, &want, &ours, reduce));
    failures
}

/// `-fno-plt` in a `-pg` or `-mfentry` build: `exit`, `longjmp` and `siglongjmp` are called
/// through the GOT, hooked by neither tool (the mcount call keeps a PLT, whose entries alone
/// are hooked). uftrace 0.13 then loses records: everything after `__cxa_atexit()` of `exit`'s
/// run, and the exits of the frames a longjmp leaves. utrace keeps them
/// ([`unhooked_exit_and_longjmp_keep_their_records`]); these runs are not compared.
fn lost_by_uftrace(prog: &str, mode: Mode, link: &[&str]) -> bool {
    link == ["-fno-plt"] && mode != Mode::Cyg && ["exit", "longjmp", "sigjmp"].contains(&prog)
}

#[test]
fn unhooked_exit_and_longjmp_keep_their_records() {
    for (prog, want) in [
        (
            "exit",
            "main() {\n  outer() {\n    inner() {\n      finish() {",
        ),
        ("longjmp", "after_jump();"),
    ] {
        let exe = util::testprog_with(prog, Mode::Pg, &["-fno-plt"]);
        let tmp = tempfile::tempdir().unwrap();
        let data = tmp.path().join("data");
        let out = util::record_with(false, &data, &exe, &[], &[]);
        assert!(out.status.code().is_some(), "{out}");
        let mut replays = vec![util::utrace_replay(&data, &["-f", "none"])];
        if util::uftrace_available() {
            replays.push(util::uftrace_replay(&data, &["-f", "none"]));
        }
        for r in replays {
            assert!(r.stdout.contains(want), "{prog}: {want:?} missing:\n{r}");
        }
    }
}

/// Record-time filters naming library calls (their PLT entries), as uftrace applies them.
const FILTERED: &[&[&str]] = &[
    &["-F", "strlen"],
    &["-N", "malloc", "-N", "free"],
    &["-C", "strcpy"],
    &["-F", "printf@PLT"],
    &["-T", "strlen@depth=1"],
    &["-F", "main", "-T", "str.*@notrace"],
];

/// Record-time options whose effect reaches library calls or that combine actions with
/// argument specs, spelled as `man uftrace-record` allows: `-Z` drops library calls (their
/// symbol is a 16-byte PLT entry), `@plt` in any case, argument items and `auto-args` among a
/// `-T` value's actions (recorded as `-A`/`-R` entries before those of the command line).
const ACTIONS: &[&[&str]] = &[
    &["-Z", "17"],
    &["-A", "strlen@plt,arg1/s"],
    &["-T", "main@filter,depth=3,arg1"],
    &["-T", "malloc@trace-off", "-T", "printf@trace-on,auto-args"],
    &["-T", "main@arg1/x,retval", "-A", "main@arg1/d"],
];

/// Options of the recorder's own threads, which must not change what is recorded: several
/// writer threads sharing the traced threads, and a real-time priority (a warning where the
/// system refuses it).
const RECORDER_OPTIONS: &[&[&str]] = &[&["--num-thread=3"], &["--rt-prio=5"]];

/// `--signal SIG@finish`: the program raises the signal without a handler of its own; the
/// recording ends after the call the signal interrupted returns, and the program runs on.
const SIGNALLED: &[(&str, &[&str], &[&str])] =
    &[("sigtrigger", &["raise"], &["--signal", "SIGUSR1@finish"])];

#[test]
fn library_calls_match_uftrace() {
    if !util::need_uftrace("library_calls_match_uftrace") {
        return;
    }
    let mut failures = Vec::new();
    for (prog, args, fold) in CASES {
        for mode in MODES {
            for link in LINKS {
                if lost_by_uftrace(prog, mode, link) {
                    continue;
                }
                failures.extend(compare(prog, args, *fold, mode, link, &[]));
            }
        }
    }
    for (prog, args, fold) in NESTED {
        for link in LINKS {
            failures.extend(compare(prog, args, *fold, Mode::Pg, link, &["-l"]));
        }
    }
    for opts in FILTERED.iter().chain(ACTIONS) {
        for mode in MODES {
            failures.extend(compare("libcall", &["hello"], false, mode, &[], opts));
        }
    }
    for opts in RECORDER_OPTIONS {
        failures.extend(compare("thread", &[], true, Mode::Pg, &[], opts));
    }
    for (prog, args, opts) in SIGNALLED {
        for mode in MODES {
            failures.extend(compare(prog, args, false, mode, &[], opts));
        }
    }
    util::assert_no_failures(&failures);
}

/// [`FRAMES`] as [`CASES`]: every mode and link.
#[test]
fn frame_readers_match_uftrace() {
    if !util::need_uftrace("frame_readers_match_uftrace") {
        return;
    }
    let mut failures = Vec::new();
    for (prog, args, fold) in FRAMES {
        for mode in MODES {
            for link in LINKS {
                failures.extend(compare(prog, args, *fold, mode, link, &[]));
            }
        }
    }
    util::assert_no_failures(&failures);
}

/// With `--nest-libcall`, a library loaded by `dlopen` has its PLT hooked when `dlopen`
/// returns (uftrace 0.13 hooks only the libraries loaded at start-up): its calls into libc
/// show under its functions, in utrace's replay and in uftrace's. Without `-l` they do not.
#[test]
fn dlopened_library_calls_are_nested() {
    for mode in [Mode::Pg, Mode::Fentry] {
        let exe = util::testprog("dlopen", mode);
        let tmp = tempfile::tempdir().unwrap();
        let (nested, plain) = (tmp.path().join("nested"), tmp.path().join("plain"));
        let out = util::record_with(false, &nested, &exe, &[], &["-l"]);
        assert!(out.status.success(), "{out}");
        let block =
            "  lib_entry() {\n    snprintf();\n    atoi();\n    lib_helper();\n  } /* lib_entry */";
        let mut replays = vec![util::utrace_replay(&nested, &["-f", "none"])];
        if util::uftrace_available() {
            replays.push(util::uftrace_replay(&nested, &["-f", "none"]));
        }
        for r in replays {
            assert!(r.stdout.contains(block), "{mode:?}: no nested calls:\n{r}");
        }
        let out = util::record_with(false, &plain, &exe, &[], &[]);
        assert!(out.status.success(), "{out}");
        let r = util::utrace_replay(&plain, &["-f", "none"]);
        assert!(
            r.stdout
                .contains("  lib_entry() {\n    lib_helper();\n  } /* lib_entry */"),
            "{mode:?}: {r}"
        );
    }
}

/// Four threads make their first calls of five library functions at once from `cold()`,
/// filtered out (`-F hot`): the lazy binder binds the slots behind the hook's back. Then each
/// calls them again from `hot()`: every one of those calls is recorded (a slot re-armed
/// before its binder wrote, or whose request another thread's overwrote, would skip the hook
/// for good). Several runs per build mode.
#[test]
fn slots_bound_by_untraced_calls_at_once_are_rearmed() {
    let calls = ["getegid", "getppid", "getuid", "getgid", "geteuid"];
    for mode in [Mode::Pg, Mode::Fentry] {
        let exe = util::testprog("rearm_threads", mode);
        for run in 0..4 {
            let tmp = tempfile::tempdir().unwrap();
            let dir = tmp.path().join("utrace.data");
            let out = util::record_with(false, &dir, &exe, &[], &["-F", "hot"]);
            assert!(out.status.success(), "{out}");
            let r = util::utrace_replay(&dir, &["-f", "none"]);
            let lines: Vec<&str> = r.stdout.lines().map(str::trim).collect();
            // A call is `f();`, or `f() {` … `}` when another thread's records come between
            // its entry and exit.
            let count = |f: &str| {
                let (leaf, open) = (format!("{f}();"), format!("{f}() {{"));
                lines.iter().filter(|x| **x == leaf || **x == open).count()
            };
            assert_eq!(count("hot"), 4, "{mode:?} run {run}: {r}");
            for call in calls {
                assert_eq!(count(call), 4, "{mode:?} run {run}: {call}\n{r}");
            }
        }
    }
}

/// Whether a test here records `prog` (see `record_matrix::every_testprog_is_recorded`).
pub fn covers(prog: &str) -> bool {
    CASES
        .iter()
        .chain(NESTED)
        .chain(FRAMES)
        .any(|c| c.0 == prog)
        || prog == "rearm_threads"
}

/// `--libname` names the library that defines a library call's target, as uftrace 0.13 finds
/// it: C++ members and functions in namespaces of a linked C++ library
/// (`AAA::bar@libcxxlib_lib.so`), libc's functions (`getpid@libc.so.6`), and, with
/// `--nest-libcall`, the library's calls through its own PLT. Where the library both defines a
/// name and imports it through its own PLT, uftrace's lookup (a binary search over the
/// library's symbols sorted by name) may land on the import, and then no library is named
/// (`lib_b` here): utrace's lookup lands where uftrace's does. Compared with the module column
/// too (`-f +module`).
#[test]
fn library_names_match_uftrace() {
    if !util::need_uftrace("library_names_match_uftrace") {
        return;
    }
    let mut failures = Vec::new();
    for mode in [Mode::Pg, Mode::Fentry] {
        let exe = util::testprog("cxxlib", mode);
        for record in [&[][..], &["-l"]] {
            let tmp = tempfile::tempdir().unwrap();
            let theirs = tmp.path().join("uftrace.data");
            let ours = tmp.path().join("utrace.data");
            util::record_with(true, &theirs, &exe, &[], record);
            util::record_with(false, &ours, &exe, &[], record);
            for replay in [&["--libname"][..], &["--libname", "-f", "+module"]] {
                let what = format!(
                    "cxxlib [{}] record {} replay {}",
                    mode.dir_name(),
                    record.join(" "),
                    replay.join(" ")
                );
                let reduce = |out: &str| normalize::by_task(out, Anchor::Start);
                let want = reduce(&util::uftrace_replay(&theirs, replay).stdout);
                if !want.contains("AAA::bar@libcxxlib_lib.so") {
                    failures.push(format!(
                        "{what}: uftrace's replay names no library:\n{want}"
                    ));
                }
                for (who, out) in [
                    ("uftrace", util::uftrace_replay(&ours, replay)),
                    ("utrace", util::utrace_replay(&ours, replay)),
                ] {
                    let got = reduce(&out.stdout);
                    if got != want {
                        failures.push(format!(
                            "{what}: `{who} replay` of utrace's data differs:\n{}\n{out}",
                            normalize::diff(&want, &got)
                        ));
                    }
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
