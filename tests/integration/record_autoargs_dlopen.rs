//! `-a` on the library calls of a `dlopen`ed library, against uftrace where it is comparable.
//!
//! `testprogs/dlopen_malloc.c` allocates once itself, then loads `libdlopen_malloc_lib.so`,
//! whose `lib_alloc(40)` calls `malloc(40)`, `memset`, `free`, `malloc(120)` and `free`
//! through the library's own PLT. What uftrace 0.13 does with it:
//!
//! * its recorder hooks only the PLTs of the modules loaded at start-up, `--nest-libcall` or
//!   not: in its data `lib_alloc();` is a leaf (and bare: neither tool reads the `dlopen`ed
//!   module's DWARF);
//! * its reader binds the `-a` specs only to the functions of the session map's modules: on
//!   utrace's `-l -a` data it prints the calls up to the library's first call with values,
//!   then stops with "record missing argument info for malloc" (exit status 1).
//!
//! So, in each build mode and for each option set (with triggers and a time filter too):
//! without `-l`, both replays of utrace's data must print what `uftrace replay` of uftrace's
//! data prints (reduced as in `record_autoargs`); with `-l`, `utrace replay` of utrace's data
//! must print the same once the calls inside `lib_alloc` are dropped, those calls must be the
//! expected ones with their values, and `uftrace replay` of utrace's data must print the same
//! up to `lib_alloc`, then stop with its error.

use crate::normalize;
use crate::record_autoargs::reduce;
use crate::record_matrix::MODES;
use crate::util::{self, Mode};

/// Whether a test here records `prog` (see `record_matrix::every_testprog_is_recorded`).
pub fn covers(prog: &str) -> bool {
    prog == "dlopen_malloc"
}

/// The calls `lib_alloc` makes, as `utrace replay` shows them (addresses masked).
const ALL: &[&str] = &[
    "malloc(40) = 0xADDR;",
    "memset(0xADDR, 1, 40);",
    "free(0xADDR);",
    "malloc(120) = 0xADDR;",
    "free(0xADDR);",
];

/// Options, and the calls inside `lib_alloc` utrace's replay must show (`None`: no `-l`, so
/// no calls there, and the whole replays compared).
const CASES: &[(&[&str], Option<&[&str]>)] = &[
    (&["-a"], None),
    (&["-a", "-T", "main@depth=3"], None),
    (&["-l", "-a"], Some(ALL)),
    (&["-l", "-a", "-T", "main@depth=3"], Some(ALL)),
    // The library's calls are below the depth limit: nothing there for uftrace to trip on.
    (&["-l", "-a", "-T", "main@depth=2"], Some(&[])),
    (&["-l", "-a", "-t", "1ns"], Some(ALL)),
    (
        &["-l", "-a", "-N", "memset"],
        Some(&[ALL[0], ALL[2], ALL[3], ALL[4]]),
    ),
];

/// `text` (reduced) without the lines inside `lib_alloc() { … }`, folded into a leaf, and
/// those lines, their indentation removed.
fn split_library_calls(text: &str) -> (String, Vec<String>) {
    let mut outside = String::new();
    let mut inside = Vec::new();
    let mut within = false;
    for line in text.lines() {
        let body = line.trim_start();
        if within && body.starts_with('}') && body.ends_with("/* lib_alloc */") {
            within = false;
        } else if within {
            inside.push(body.to_string());
            continue;
        } else if body.starts_with("lib_alloc(") && body.ends_with('{') {
            within = true;
        }
        outside.push_str(line);
        outside.push('\n');
    }
    (normalize::fold_leaves(&outside), inside)
}

fn compare(mode: Mode, opts: &[&str], inside: Option<&[&str]>) -> Vec<String> {
    let what = format!("dlopen_malloc {} [{}]", opts.join(" "), mode.dir_name());
    let exe = util::testprog("dlopen_malloc", mode);
    let tmp = tempfile::tempdir().unwrap();
    let theirs = tmp.path().join("uftrace.data");
    let ours = tmp.path().join("utrace.data");
    let reference = util::record_with(true, &theirs, &exe, &[], opts);
    let recorded = util::record_with(false, &ours, &exe, &[], opts);
    if !recorded.status.success() || !reference.status.success() {
        return vec![format!(
            "{what}: recording failed:\n{reference}\n{recorded}"
        )];
    }
    let want = reduce(&util::uftrace_replay(&theirs, &[]).stdout);
    if !want.contains("  lib_alloc();") {
        return vec![format!("{what}: uftrace's replay lacks lib_alloc:\n{want}")];
    }
    let Some(calls) = inside.filter(|c| !c.is_empty()) else {
        return util::compare_replays(&what, &want, &ours, reduce);
    };
    let mut failures = Vec::new();
    let r = util::utrace_replay(&ours, &[]);
    let (got, lib) = split_library_calls(&reduce(&r.stdout));
    if got != want {
        failures.push(format!(
            "{what}: `utrace replay` of utrace's data differs outside lib_alloc:\n{}\n{r}",
            normalize::diff(&want, &got)
        ));
    }
    if lib != calls {
        failures.push(format!(
            "{what}: lib_alloc's calls: {lib:?}, not {calls:?}\n{r}"
        ));
    }
    // uftrace's reader: the same lines up to the first of the library's calls, then its
    // error.
    let u = util::uftrace_replay(&ours, &[]);
    let head: String = want
        .lines()
        .take_while(|l| !l.trim_start().starts_with("lib_alloc("))
        .map(|l| format!("{l}\n"))
        .collect();
    let stopped = u.stderr.contains("record missing argument info for malloc");
    if reduce(&u.stdout) != head || !stopped {
        failures.push(format!(
            "{what}: `uftrace replay` of utrace's data: not the lines up to lib_alloc and \
             its error:\n{}\n{u}",
            normalize::diff(&head, &reduce(&u.stdout))
        ));
    }
    failures
}

#[test]
fn dlopened_library_values_match_uftrace() {
    if !util::need_uftrace("dlopened_library_values_match_uftrace") {
        return;
    }
    let mut failures = Vec::new();
    for mode in MODES {
        for (opts, inside) in CASES {
            failures.extend(compare(mode, opts, *inside));
        }
    }
    util::assert_no_failures(&failures);
}

/// Filters name the functions of a `dlopen`ed library and, with `-l`, its library calls
/// (beyond uftrace 0.13, which ignores patterns that name nothing loaded at start-up): options
/// and `utrace replay`'s whole reduced output.
const FILTER_CASES: &[(&[&str], &str)] = &[
    (
        &["-l", "-a", "-F", "lib_alloc"],
        "lib_alloc() {\n  malloc(40) = 0xADDR;\n  memset(0xADDR, 1, 40);\n  free(0xADDR);\n  \
         malloc(120) = 0xADDR;\n  free(0xADDR);\n} /* lib_alloc */\n",
    ),
    (
        &["-l", "-a", "-F", "lib_alloc", "-N", "^free$"],
        "lib_alloc() {\n  malloc(40) = 0xADDR;\n  memset(0xADDR, 1, 40);\n  \
         malloc(120) = 0xADDR;\n} /* lib_alloc */\n",
    ),
    (
        &["-l", "-a", "-F", "lib_alloc", "-T", "lib_alloc@depth=1"],
        "lib_alloc();\n",
    ),
    // Without `-l` the filters are built again after the real `dlopen` returns too.
    (&["-a", "-F", "lib_alloc"], "lib_alloc();\n"),
    (&["-F", "lib_alloc"], "lib_alloc();\n"),
];

#[test]
fn filters_name_the_dlopened_library() {
    let mut failures = Vec::new();
    for mode in MODES {
        let exe = util::testprog("dlopen_malloc", mode);
        for (opts, want) in FILTER_CASES {
            let tmp = tempfile::tempdir().unwrap();
            let dir = tmp.path().join("data");
            let out = util::record_with(false, &dir, &exe, &[], opts);
            let r = util::utrace_replay(&dir, &[]);
            let got = reduce(&r.stdout);
            if !out.status.success() || got != *want {
                failures.push(format!(
                    "{mode:?} {opts:?}:\n{}\n{out}\n{r}",
                    normalize::diff(want, &got)
                ));
            }
        }
    }
    util::assert_no_failures(&failures);
}

/// `utrace record OPTS -d DIR dlopen_malloc ARGS` with `LD_LIBRARY_PATH` set to the program's
/// directory (for `bare`).
fn record_found(
    dir: &std::path::Path,
    exe: &std::path::Path,
    args: &[&str],
    opts: &[&str],
) -> util::Output {
    let mut cmd = std::process::Command::new(util::utrace_bin());
    cmd.args(["record", "--no-event"])
        .args(opts)
        .arg("-d")
        .arg(dir)
        .arg(exe)
        .args(args)
        .env("LD_LIBRARY_PATH", exe.parent().unwrap());
    util::run(cmd)
}

/// A library `dlopen`ed by its bare name (not wrapped: glibc must see the program as the
/// caller) is in the filters once the program looks its function up with `dlsym`.
#[test]
fn filters_name_a_library_dlopened_by_name() {
    let mut failures = Vec::new();
    for mode in MODES {
        let exe = util::testprog("dlopen_malloc", mode);
        for opts in [&["-F", "lib_alloc"][..], &["-a", "-F", "lib_alloc"]] {
            let tmp = tempfile::tempdir().unwrap();
            let dir = tmp.path().join("data");
            let out = record_found(&dir, &exe, &["bare"], opts);
            let r = util::utrace_replay(&dir, &[]);
            let got = reduce(&r.stdout);
            if !out.status.success() || got != "lib_alloc();\n" {
                failures.push(format!("{mode:?} bare {opts:?}:\n{got}\n{out}\n{r}"));
            }
        }
    }
    util::assert_no_failures(&failures);
}

/// The filters are built again over the objects the dynamic linker reports only: a 2 GiB
/// (sparse) data file the program maps before its `dlopen` is not read (the program's peak
/// resident size stays small).
#[test]
fn filters_rebuilt_without_reading_mapped_data() {
    let exe = util::testprog("dlopen_malloc", Mode::Pg);
    let tmp = tempfile::tempdir().unwrap();
    let big = tmp.path().join("big.dat");
    let big = big.to_str().unwrap();
    for (i, opts) in [&["-F", "lib_alloc"][..], &["-Z", "1"]].iter().enumerate() {
        let dir = tmp.path().join(format!("data{i}"));
        let out = util::record_with(false, &dir, &exe, &["big", big], opts);
        let peak = out
            .stdout
            .lines()
            .find_map(|l| l.strip_prefix("peak "))
            .and_then(|kb| kb.trim().parse::<u64>().ok());
        assert!(
            out.status.success() && peak.is_some_and(|kb| kb < 256 * 1024),
            "{opts:?}: peak resident size {peak:?} kB\n{out}"
        );
    }
    let r = util::utrace_replay(&tmp.path().join("data0"), &[]);
    assert_eq!(reduce(&r.stdout), "lib_alloc();\n", "{r}");
}

#[test]
fn library_calls_split_out() {
    let text =
        "main() {\n  lib_alloc() {\n    malloc(40) = 0xADDR;\n  } /* lib_alloc */\n} /* main */\n";
    let (outside, inside) = split_library_calls(text);
    assert_eq!(outside, "main() {\n  lib_alloc();\n} /* main */\n");
    assert_eq!(inside, ["malloc(40) = 0xADDR;"]);
}
