//! Dynamic patching (`-P`/`-U`, `-Z`, issue 19) against uftrace 0.13: testprogs/patch_calc.c
//! with its linked library and a `dlopen`ed one, built
//!
//! - with `-fpatchable-function-entry=5` and `=5,0` (NOP sleds: the ordinary hooks),
//! - with `-pg -mfentry -mnop-mcount` (no PIE; its libraries with patchable sleds, since gcc
//!   refuses `-mnop-mcount` with `-fPIC`),
//! - at plain `-O2` (full dynamic patching, through `patch::reloc`),
//! - with `-pg -mfentry` (`-U`, or `-P` naming some functions, NOPs the other hooks) and `-pg`
//!   (`-P`/`-U` ignored),
//!
//! recorded by both tools with the same options; `uftrace replay` and `utrace replay` of
//! utrace's data must print, per task and by function column, what `uftrace replay` prints of
//! uftrace's data. Also: the analysis on patched functions (`-A`/`-R`, `-F`/`-N`, a trigger,
//! library calls), and that the program's checksums do not change when it is patched.

use crate::normalize::{self, Anchor};
use crate::util;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, OnceLock};

/// The testprogs of this file (covered here rather than by the record matrix: they are not
/// `-pg` programs).
pub fn covers(name: &str) -> bool {
    matches!(
        name,
        "patch_calc" | "patch_unwind" | "patch_jump" | "patch_args" | "patch_overlap"
    )
}

/// How patch_calc and its libraries are built.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Build {
    Patchable,
    Patchable50,
    /// Patchable with `-fcf-protection`: the sites follow an `endbr64` (at F+4, across an
    /// 8-byte word: written with `cmpxchg16b`).
    PatchableCet,
    NopMcount,
    Plain,
    Fentry,
    Pg,
}

impl Build {
    fn name(self) -> &'static str {
        match self {
            Build::Patchable => "patchable",
            Build::Patchable50 => "patchable50",
            Build::PatchableCet => "patchable-cet",
            Build::NopMcount => "nopmcount",
            Build::Plain => "plain",
            Build::Fentry => "fentry",
            Build::Pg => "pg",
        }
    }

    /// Flags of the program, then of its libraries.
    fn flags(self) -> (&'static [&'static str], &'static [&'static str]) {
        const PATCHABLE: &[&str] = &["-fpatchable-function-entry=5"];
        match self {
            Build::Patchable => (PATCHABLE, PATCHABLE),
            Build::Patchable50 => (
                &["-fpatchable-function-entry=5,0"],
                &["-fpatchable-function-entry=5,0"],
            ),
            Build::PatchableCet => (
                &["-fpatchable-function-entry=5", "-fcf-protection"],
                &["-fpatchable-function-entry=5", "-fcf-protection"],
            ),
            Build::NopMcount => (
                &["-pg", "-mfentry", "-mnop-mcount", "-fno-pie", "-no-pie"],
                PATCHABLE,
            ),
            Build::Plain => (&[], &[]),
            Build::Fentry => (&["-pg", "-mfentry"], &["-pg", "-mfentry"]),
            Build::Pg => (&["-pg"], &["-pg"]),
        }
    }
}

/// The program of `build` (its libraries beside it); built once per test process.
fn program(build: Build) -> PathBuf {
    static BUILT: OnceLock<Mutex<Vec<(Build, PathBuf)>>> = OnceLock::new();
    let mut built = BUILT.get_or_init(Default::default).lock().unwrap();
    if let Some((_, p)) = built.iter().find(|(b, _)| *b == build) {
        return p.clone();
    }
    // Beside the other test programs; each file is written under a temporary name, then
    // renamed, so that concurrent test processes never see half a binary.
    let dir = util::utrace_bin()
        .parent()
        .unwrap()
        .join("testprogs")
        .join("patch")
        .join(build.name());
    std::fs::create_dir_all(&dir).unwrap();
    let src = util::testprogs_src();
    let (prog_flags, lib_flags) = build.flags();
    let gcc = |flags: &[&str], args: &[&str], out: &Path, source: &str| {
        let tmp = out.with_extension(format!("tmp{}", std::process::id()));
        let r = Command::new("gcc")
            .args(["-O2", "-g"])
            .args(flags)
            .args(args)
            .arg("-o")
            .arg(&tmp)
            .arg(src.join(source))
            .args(if args.is_empty() {
                vec![
                    format!("-L{}", dir.display()),
                    "-lpatch_calc_lib".to_string(),
                    format!("-Wl,-rpath,{}", dir.display()),
                    "-ldl".to_string(),
                ]
            } else {
                Vec::new()
            })
            .output()
            .expect("gcc");
        assert!(
            r.status.success(),
            "gcc {source}: {}",
            String::from_utf8_lossy(&r.stderr)
        );
        std::fs::rename(&tmp, out).unwrap();
    };
    let shared = ["-shared", "-fPIC"];
    gcc(
        lib_flags,
        &shared,
        &dir.join("libpatch_calc_lib.so"),
        "patch_calc_lib.c",
    );
    gcc(
        lib_flags,
        &shared,
        &dir.join("libpatch_calc_dl_lib.so"),
        "patch_calc_dl_lib.c",
    );
    let prog = dir.join("patch_calc");
    gcc(prog_flags, &[], &prog, "patch_calc.c");
    built.push((build, prog.clone()));
    prog
}

/// patch_calc's arguments: the library to dlopen, and the loop count.
fn args(prog: &Path) -> Vec<String> {
    let dl = prog.with_file_name("libpatch_calc_dl_lib.so");
    vec![dl.display().to_string(), "4".to_string()]
}

/// Every function of the program and both libraries.
const ALL: &[&str] = &[
    "-P",
    ".",
    "-P",
    ".@libpatch_calc_lib.so",
    "-P",
    ".@libpatch_calc_dl_lib",
];

/// The `-P`/`-U` cases of the NOP builds.
const NOP_CASES: &[&[&str]] = &[
    &["-P", "."],
    ALL,
    &["-P", ".", "-U", "mix"],
    &["-U", "mix", "-P", "."],
    &["-P", "^[sm]", "-U", "step"],
    &["-P", "work", "-P", "lib_sq@libpatch_calc_lib.so"],
    &["-P", ".@libpatch_calc_dl_lib.so"],
    &["-U", "."],
    &["-Z", "30", "-P", "."],
    &[
        "--match",
        "glob",
        "-P",
        "*step",
        "-P",
        "*_cube@libpatch_calc_dl*",
    ],
];

/// Records with both tools and compares the replays; returns the mismatches.
fn compare(build: Build, opts: &[&str], replay: &[&str]) -> Vec<String> {
    let prog = program(build);
    let a = args(&prog);
    let a: Vec<&str> = a.iter().map(String::as_str).collect();
    let tmp = tempfile::tempdir().unwrap();
    let (theirs, ours) = (tmp.path().join("uftrace"), tmp.path().join("utrace"));
    let mut record: Vec<&str> = vec!["--no-sched"];
    record.extend_from_slice(opts);
    let u = util::record_with(true, &theirs, &prog, &a, &record);
    u.assert_success();
    let o = util::record_with(false, &ours, &prog, &a, &record);
    o.assert_success();
    assert_eq!(u.stdout, o.stdout, "the program's output changed");
    let want = normalize::by_task(&util::uftrace_replay(&theirs, replay).stdout, Anchor::Start);
    assert!(!want.is_empty(), "uftrace recorded nothing: {u}");
    let what = format!("{} {opts:?} replay {replay:?}", build.name());
    let mut failures = Vec::new();
    for (who, out) in [
        ("uftrace", util::uftrace_replay(&ours, replay)),
        ("utrace", util::utrace_replay(&ours, replay)),
    ] {
        let got = normalize::by_task(&out.stdout, Anchor::Start);
        if want != got {
            failures.push(format!(
                "{what}: `{who} replay` of utrace's data differs (- uftrace's data, + utrace's):\n{}\n{out}\n{o}",
                normalize::diff(&want, &got)
            ));
        }
    }
    failures
}

fn compare_all(build: Build, cases: &[&[&str]]) {
    if !util::need_uftrace("record_patch") {
        return;
    }
    let mut failures = Vec::new();
    for opts in cases {
        failures.extend(compare(build, opts, &[]));
    }
    util::assert_no_failures(&failures);
}

#[test]
fn patchable_sleds_match_uftrace() {
    compare_all(Build::Patchable, NOP_CASES);
}

#[test]
fn patchable_sleds_5_0_match_uftrace() {
    compare_all(
        Build::Patchable50,
        &[&["-P", "."], ALL, &["-P", ".", "-U", "mix"]],
    );
}

/// uftrace 0.13 patches no sled that follows an `endbr64` (here: every function that is not
/// static); utrace does, at F+4: checked alone, the whole call tree and the same checksums.
#[test]
fn patchable_sleds_after_endbr64_are_patched() {
    let prog = program(Build::PatchableCet);
    let a = args(&prog);
    let a: Vec<&str> = a.iter().map(String::as_str).collect();
    let plain = util::run({
        let mut c = Command::new(&prog);
        c.args(&a);
        c
    });
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("data");
    let out = util::record_with(false, &dir, &prog, &a, ALL);
    out.assert_success();
    assert_eq!(out.stdout, plain.stdout, "{out}");
    let replay = util::utrace_replay(&dir, &["-f", "none", "--no-libcall"]);
    let want = "main() {\n  work() {\n    step() {\n      mix();\n    } /* step */\n";
    assert!(replay.stdout.starts_with(want), "{replay}");
    for f in [
        "  tiny();",
        "  lib_sum() {",
        "    lib_sq();",
        "  dl_sum() {",
        "    dl_cube();",
    ] {
        assert!(
            replay.stdout.lines().any(|l| l == f),
            "{f} missing:\n{replay}"
        );
    }
}

#[test]
fn nop_mcount_matches_uftrace() {
    compare_all(Build::NopMcount, NOP_CASES);
}

#[test]
fn fentry_hooks_are_unpatched_as_uftrace_does() {
    compare_all(
        Build::Fentry,
        &[
            &["-U", "mix"],
            &["-P", "work", "-P", "step"],
            &["-P", "work", "-U", "step"],
            &["-U", "step", "-P", "."],
        ],
    );
}

#[test]
fn pg_builds_ignore_patching() {
    compare_all(Build::Pg, &[&["-P", "work"], &["-U", "."]]);
}

/// Plain `-O2` code (full dynamic patching). uftrace 0.13 refuses `fwork` and `scale` (a
/// RIP-relative SSE load in their first bytes), utrace relocates them: they are left out with
/// `-U` in the comparisons.
#[test]
fn full_dynamic_matches_uftrace() {
    if !util::need_uftrace("record_patch") {
        return;
    }
    let mut all_but: Vec<&str> = ALL.to_vec();
    all_but.extend(["-U", "^fwork$", "-U", "^scale"]);
    compare_all(
        Build::Plain,
        &[
            &all_but,
            &["-P", "^[wsm]", "-U", "step", "-U", "^scale"],
            &["-P", ".@libpatch_calc_dl_lib.so"],
            &["-Z", "30", "-P", ".", "-U", "^fwork$", "-U", "^scale"],
            &[
                "-P",
                "^[wsm]",
                "-U",
                "^scale",
                "-A",
                "step@arg1,arg2",
                "-R",
                "step@retval",
            ],
            &[
                "-P",
                ".",
                "-U",
                "^fwork$",
                "-U",
                "^scale",
                "-F",
                "work",
                "-T",
                "mix@depth=1",
            ],
        ],
    );
}

/// Analysis of patched functions as of `-pg` ones: arguments and return values, filters, a
/// trigger, library calls through the PLT hooks (printf, lib_sum, dlopen: in every case).
#[test]
fn analysis_works_on_patched_functions() {
    if !util::need_uftrace("record_patch") {
        return;
    }
    let mut failures = Vec::new();
    let cases: &[&[&str]] = &[
        &[
            "-A",
            "step@arg1,arg2",
            "-R",
            "step@retval",
            "-A",
            "lib_sq@arg1",
        ],
        &[
            "-A",
            "dl_cube@arg1",
            "-R",
            "dl_sum@retval",
            "-R",
            "work@retval",
        ],
        &["-F", "work"],
        &["-N", "mix", "-N", "lib_sum"],
        &["-T", "step@depth=1"],
        &["-D", "2"],
    ];
    for build in [Build::Patchable, Build::NopMcount] {
        for extra in cases {
            let mut opts = ALL.to_vec();
            opts.extend_from_slice(extra);
            failures.extend(compare(build, &opts, &[]));
        }
        let replay: &[&[&str]] = &[&["-F", "work"], &["-N", "mix"], &["-D", "2"]];
        for r in replay {
            failures.extend(compare(build, ALL, r));
        }
    }
    util::assert_no_failures(&failures);
}

/// utrace alone: the program prints the same checksums patched and not (a clobbered register
/// shows there), and `-v` counts the function too small to patch (`tiny`).
#[test]
fn patched_programs_compute_the_same_and_refusals_are_counted() {
    for build in [Build::Patchable, Build::NopMcount, Build::Plain] {
        let prog = program(build);
        let a = args(&prog);
        let plain = util::run({
            let mut c = Command::new(&prog);
            c.args(&a);
            c
        });
        plain.assert_success();
        assert!(plain.stdout.starts_with("checksum "), "{plain}");
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("data");
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        let mut opts = vec!["--debug-domain=dynamic:3"];
        opts.extend_from_slice(ALL);
        let out = util::record_with(false, &dir, &prog, &a, &opts);
        out.assert_success();
        assert_eq!(
            out.stdout,
            plain.stdout,
            "{}: output changed:\n{out}",
            build.name()
        );
        if build == Build::NopMcount {
            continue;
        }
        // `tiny` has 4 bytes (NOP builds: 9, so patched).
        let stats = out
            .stderr
            .lines()
            .find(|l| l.starts_with("dynamic:  skipped:") || l.contains("patched all"))
            .unwrap_or_else(|| panic!("no dynamic patch stats:\n{out}"));
        if build == Build::Plain {
            assert!(
                out.stderr.contains("dynamic patch stats for 'patch_calc'"),
                "{out}"
            );
            assert!(stats.contains("skipped:        1 "), "{stats}\n{out}");
            assert!(
                out.stderr.contains("skip tiny: smaller than 6 bytes"),
                "{out}"
            );
        }
        let replay = util::utrace_replay(&dir, &["-f", "none"]);
        for f in ["work(", "step(", "lib_sq(", "dl_cube("] {
            assert!(
                replay.stdout.lines().any(|l| l.trim_start().starts_with(f)),
                "{}: {f} not recorded:\n{replay}",
                build.name()
            );
        }
    }
}

/// testprogs/patch_unwind.cc built with `flags`.
fn unwind_program(tag: &str, flags: &[&str]) -> PathBuf {
    let dir = util::utrace_bin()
        .parent()
        .unwrap()
        .join("testprogs")
        .join("patch")
        .join(tag);
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join("patch_unwind");
    let tmp = out.with_extension(format!("tmp{}", std::process::id()));
    let r = Command::new("g++")
        .args(["-O2", "-g"])
        .args(flags)
        .arg("-o")
        .arg(&tmp)
        .arg(util::testprogs_src().join("patch_unwind.cc"))
        .output()
        .expect("g++");
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    std::fs::rename(&tmp, &out).unwrap();
    out
}

/// Frames left by an exception and by `longjmp`, and a tail call into the PLT, in patched
/// functions: against uftrace on the patchable build; the full dynamic build (whose frames
/// return through the dynamic exit trampoline) must record the same calls.
#[test]
fn exceptions_longjmp_and_tail_calls_in_patched_functions() {
    let patchable = unwind_program("unwind-patchable", &["-fpatchable-function-entry=5"]);
    let plain = unwind_program("unwind-plain", &[]);
    let tmp = tempfile::tempdir().unwrap();
    let mut failures = Vec::new();
    let record = |uftrace: bool, prog: &Path, name: &str| {
        let dir = tmp.path().join(name);
        let out = util::record_with(uftrace, &dir, prog, &[], &["--no-sched", "-P", "."]);
        out.assert_success();
        assert!(out.stdout.ends_with("checksum 130\n"), "{out}");
        dir
    };
    let ours = record(false, &patchable, "ours");
    let ours_text = normalize::by_task(&util::utrace_replay(&ours, &[]).stdout, Anchor::Start);
    assert!(ours_text.contains("      thrower() {\n"), "{ours_text}");
    if util::need_uftrace("record_patch") {
        let theirs = record(true, &patchable, "theirs");
        let want = normalize::by_task(&util::uftrace_replay(&theirs, &[]).stdout, Anchor::Start);
        failures.extend(util::compare_replays("patch_unwind", &want, &ours, |t| {
            normalize::by_task(t, Anchor::Start)
        }));
    }
    {
        // Every library patched too (libc, libstdc++, libgcc_s, ld.so): the unwinder's own
        // calls are traced then, and must not give the frames it walks their hijacked
        // return addresses back.
        let dir = tmp.path().join("libraries");
        let opts = ["--no-sched", "-P", ".", "-P", ".@lib", "-P", ".@ld-linux"];
        let out = util::record_with(false, &dir, &plain, &[], &opts);
        out.assert_success();
        assert!(out.stdout.ends_with("checksum 130\n"), "{out}");
        let replay = util::utrace_replay(&dir, &["-f", "none"]);
        assert_eq!(
            replay.stdout.matches("  catcher() {").count(),
            5,
            "{replay}"
        );
        assert!(
            replay.stdout.contains("__cxa_allocate_exception() {"),
            "{replay}"
        );
        let dynamic = record(false, &plain, "dynamic");
        let got = normalize::by_task(&util::utrace_replay(&dynamic, &[]).stdout, Anchor::Start);
        if got != ours_text {
            failures.push(format!(
                "full dynamic build (- patchable build):\n{}",
                normalize::diff(&ours_text, &got)
            ));
        }
    }
    util::assert_no_failures(&failures);
}

/// A function whose patched bytes another function jumps into is refused and counted (full
/// dynamic patching; uftrace 0.13 refuses the function that jumps instead, and leaves the
/// other patched).
#[test]
fn functions_jumped_into_are_refused() {
    let prog = util::utrace_bin()
        .parent()
        .unwrap()
        .join("testprogs")
        .join("patch")
        .join("patch_jump");
    let tmp_out = prog.with_extension(format!("tmp{}", std::process::id()));
    let r = Command::new("gcc")
        .args(["-O2", "-o"])
        .arg(&tmp_out)
        .arg(util::testprogs_src().join("patch_jump.c"))
        .output()
        .expect("gcc");
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    std::fs::rename(&tmp_out, &prog).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("data");
    let opts = ["--debug-domain=dynamic:3", "-P", "."];
    let out = util::record_with(false, &dir, &prog, &[], &opts);
    out.assert_success();
    assert_eq!(out.stdout, "checksum 4614\n", "{out}");
    assert!(
        out.stderr
            .contains(">> FAIL: victim (another function jumps into it)"),
        "{out}"
    );
    assert!(
        out.stderr.contains("dynamic:  patched:        3 (75.00%)"),
        "{out}"
    );
    assert!(
        out.stderr.contains("dynamic:   failed:        1 (25.00%)"),
        "{out}"
    );
    let replay = util::utrace_replay(&dir, &["-f", "none"]);
    assert!(replay.stdout.contains("    intruder();"), "{replay}");
    assert!(!replay.stdout.contains("victim"), "{replay}");
}

/// A library `dlopen`ed by a bare name (found through the program's run path, which a
/// `dlopen` made by libmcount would not search: uftrace 0.13's program fails there) is patched
/// before the program calls it, when it asks `dlsym` for its address.
#[test]
fn libraries_dlopened_by_name_are_patched_before_use() {
    for build in [Build::Patchable, Build::Plain] {
        let prog = program(build);
        let args = ["libpatch_calc_dl_lib.so", "4"];
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("data");
        let opts = [
            "-P",
            "dl_sum@libpatch_calc_dl_lib",
            "-P",
            "dl_cube@libpatch_calc_dl",
        ];
        let out = util::record_with(false, &dir, &prog, &args, &opts);
        out.assert_success();
        assert!(out.stdout.starts_with("checksum 835362 "), "{out}");
        let replay = util::utrace_replay(&dir, &["-f", "none"]);
        let want =
            "dl_sum() {\n  dl_cube();\n  dl_cube();\n  dl_cube();\n  dl_cube();\n} /* dl_sum */\n";
        assert!(replay.stdout.contains(want), "{}: {replay}", build.name());
    }
}

/// `-Z SIZE` leaves the smaller functions unpatched (all of them here: 8 in the program), and
/// the program still runs correctly.
#[test]
fn size_limit_skips_small_functions() {
    let prog = program(Build::Patchable);
    let a = args(&prog);
    let a: Vec<&str> = a.iter().map(String::as_str).collect();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("data");
    let out = util::record_with(false, &dir, &prog, &a, &["-v", "-Z", "1000", "-P", "."]);
    out.assert_success();
    assert!(out.stdout.starts_with("checksum "), "{out}");
    assert!(out.stderr.contains("dynamic:  patched:        0 "), "{out}");
    assert!(out.stderr.contains("dynamic:  skipped:        8 "), "{out}");
}

/// With the C library patched too (`-P .@libc`), every thread's first hook may be a libc
/// function, called again by libmcount while it sets the thread up (`__errno_location`):
/// threads started before and during the run are traced, the program's output is unchanged,
/// and every call of the program's own function is seen.
#[test]
fn libc_patched_in_every_thread() {
    let tmp = tempfile::tempdir().unwrap();
    let prog = tmp.path().join("attach_threads");
    let status = Command::new("gcc")
        .args(["-O2", "-fno-inline", "-pthread", "-o"])
        .arg(&prog)
        .arg(util::testprogs_src().join("attach_threads.c"))
        .status()
        .unwrap();
    assert!(status.success());
    let clean = util::run(Command::new(&prog));
    clean.assert_success();
    let dir = tmp.path().join("data");
    let out = util::record_with(
        false,
        &dir,
        &prog,
        &[],
        &["--no-sched", "-P", ".", "-P", ".@libc"],
    );
    out.assert_success();
    assert_eq!(out.stdout, clean.stdout, "{out}");
    let tasks = std::fs::read_to_string(dir.join("task.txt")).unwrap();
    assert_eq!(tasks.lines().filter(|l| l.starts_with("TASK ")).count(), 5);
    let report = util::run({
        let mut c = Command::new(util::utrace_bin());
        c.args(["report", "-d"]).arg(&dir);
        c
    });
    report.assert_success();
    // 40 ticks of main and 4 workers of 60 rounds.
    let calls = |name: &str| {
        report
            .stdout
            .lines()
            .find(|l| l.ends_with(&format!(" {name}")))
            .and_then(|l| l.split_whitespace().nth(4)?.parse::<u32>().ok())
    };
    assert_eq!(calls("round_sum"), Some(280), "{}", report.stdout);
    assert_eq!(calls("worker"), Some(4), "{}", report.stdout);
    // libc's own functions, patched, are in the trace.
    assert!(calls("clock_nanosleep").is_some(), "{}", report.stdout);
}

/// `-a` on functions patched in plain `-O2 -g` code: the DWARF types give the arguments (a
/// struct by value, an int, a string) and the double return value, which the program still
/// computes right (testprogs/patch_args.c; uftrace 0.13 changes the program's result there).
#[test]
fn auto_args_of_patched_functions() {
    let tmp = tempfile::tempdir().unwrap();
    let prog = tmp.path().join("patch_args");
    let status = Command::new("gcc")
        .args(["-O2", "-g", "-o"])
        .arg(&prog)
        .arg(util::testprogs_src().join("patch_args.c"))
        .status()
        .unwrap();
    assert!(status.success());
    let dir = tmp.path().join("data");
    let out = util::record_with(false, &dir, &prog, &[], &["--no-sched", "-a", "-P", "."]);
    out.assert_success();
    assert_eq!(out.stdout, "132.50\n", "{out}");
    let replay = util::utrace_replay(&dir, &[]);
    replay.assert_success();
    let lines = normalize::by_task(&replay.stdout, Anchor::Main);
    assert!(
        lines.contains("addpt(pt{...}, 9, \"hi\") = 132.500000;"),
        "{}",
        replay.stdout
    );
    assert!(lines.contains("} = 0; /* main */"), "{}", replay.stdout);
}

/// A function with a second entry point inside its first bytes (testprogs/patch_overlap.c) is
/// refused by full dynamic patching: writing its call would break the other entry.
#[test]
fn functions_entered_in_their_first_bytes_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let prog = tmp.path().join("patch_overlap");
    let status = Command::new("gcc")
        .args(["-O2", "-o"])
        .arg(&prog)
        .arg(util::testprogs_src().join("patch_overlap.c"))
        .status()
        .unwrap();
    assert!(status.success());
    let dir = tmp.path().join("data");
    let opts = ["--no-sched", "--debug-domain=dynamic:3", "-P", "."];
    let out = util::record_with(false, &dir, &prog, &[], &opts);
    out.assert_success();
    assert_eq!(out.stdout, "fa 111 fb 11\n", "{out}");
    assert!(out.stderr.contains(">> FAIL: fa "), "{out}");
    let replay = util::utrace_replay(&dir, &["-f", "none"]);
    assert!(replay.stdout.contains("main() {"), "{replay}");
    assert!(!replay.stdout.contains("fa("), "{replay}");
}

/// libmcount's own work inside the `dlopen`, `dlsym` and `dlclose` hooks (scanning the loaded
/// objects, patching the new library: `open`, `mmap`, `mprotect` of its own) runs under the
/// thread's recursion guard: with those libc functions patched, the program's `dlopen` and
/// `dlsym` calls have no children in the trace (the dynamic loader calls its
/// own copies of them), while the `dlopen`ed library's functions are patched and traced.
#[test]
fn dlopen_hooks_record_no_calls_of_libmcount() {
    let prog = program(Build::Patchable);
    let a = args(&prog);
    let a: Vec<&str> = a.iter().map(String::as_str).collect();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("data");
    let opts = [
        "--no-sched",
        "-P",
        "mmap@libc",
        "-P",
        "mprotect@libc",
        "-P",
        "open@libc",
        "-P",
        "munmap@libc",
        "-P",
        ".@libpatch_calc_dl_lib",
    ];
    let out = util::record_with(false, &dir, &prog, &a, &opts);
    out.assert_success();
    let replay = util::utrace_replay(&dir, &["-f", "none"]);
    replay.assert_success();
    assert!(replay.stdout.contains("dl_sum() {"), "{replay}");
    let funcs: Vec<&str> = replay.stdout.lines().map(str::trim).collect();
    for name in ["dlopen", "dlsym"] {
        assert!(
            funcs.contains(&format!("{name}();").as_str()),
            "no {name}() in the replay:\n{replay}"
        );
        assert!(
            !funcs.contains(&format!("{name}() {{").as_str()),
            "{name}() has children:\n{replay}"
        );
    }
}
