//! `-a` on library calls (record_format::autoargs: the built-in prototypes).
//!
//! `testprogs/libc_calls.c` calls a broad sample of C library functions with fixed arguments;
//! it is recorded with `-a` by `utrace record` and `uftrace record --no-event`, in every build
//! mode, and `uftrace replay` and `utrace replay` of utrace's data must print, per task and by
//! function column, what `uftrace replay` of uftrace's data prints: each argument and return
//! value shown alike. Masked before comparing: addresses (`util::mask_addresses`), descriptor
//! numbers (uftrace keeps one more descriptor open in the traced process than utrace),
//! `prctl`'s words beyond its fifth (uftrace's nine-word prototype reads leftover registers
//! and stack), the return values of `dlopen` and `dlsym` (utrace records them as calls of no
//! duration: they look at their caller, whose return address utrace leaves alone), and the
//! values of the functions utrace shows beyond uftrace (`autoargs::BEYOND_UFTRACE`).
//!
//! Library calls of a library loaded by `dlopen` (hooked with `--nest-libcall`, beyond
//! uftrace 0.13, which hooks only the libraries loaded at start-up) get the same specs: their
//! values are checked directly in `utrace replay`, with auto-args, `-A`/`-R` patterns, a
//! trigger and a time filter. (uftrace 0.13's reader binds specs only to the functions of the
//! modules of the session map, never to those of a `dlopen`ed one: its replay of such a
//! recording stops at the first of those calls with values.)

use crate::record_matrix::{tasks_of, Norm, MODES};
use crate::util::{self, Mode};
use record_format::autoargs::BEYOND_UFTRACE;

/// Whether a test here records `prog` (see `record_matrix::every_testprog_is_recorded`).
pub fn covers(prog: &str) -> bool {
    prog == "libc_calls"
}

/// Functions with descriptors among their values: 1-based argument positions, and whether
/// the return value is one.
const FD_FUNCS: &[(&str, &[usize], bool)] = &[
    ("open", &[], true),
    ("socket", &[], true),
    ("isatty", &[1], false),
    ("epoll_create1", &[], true),
    ("close", &[1], false),
    ("read", &[1], false),
    ("write", &[1], false),
    ("pread", &[1], false),
    ("lseek", &[1], false),
    ("fcntl", &[1], false),
    ("fstat", &[1], false),
    ("epoll_ctl", &[1, 3], false),
    ("epoll_wait", &[1], false),
];

/// A call's function text split as `NAME(ARGS)REST` (`REST`: ` = V;`, ` {`, `;`…).
fn split_call(text: &str) -> Option<(&str, Vec<&str>, &str)> {
    let open = text.find('(')?;
    let close = open + text[open..].find(')')?;
    let args = &text[open + 1..close];
    let args = if args.is_empty() {
        Vec::new()
    } else {
        args.split(", ").collect()
    };
    Some((&text[..open], args, &text[close + 1..]))
}

/// The return value in `rest` (` = V;` or ` = V; /* f */`) replaced with `with`.
fn replace_ret(rest: &str, with: &str) -> String {
    match rest.strip_prefix(" = ").and_then(|r| r.split_once(';')) {
        Some((_, tail)) => format!(" = {with};{tail}"),
        None => rest.to_string(),
    }
}

/// One line's function text with the masks of the module documentation applied.
fn mask_call(text: &str) -> String {
    let Some((name, mut args, rest)) = split_call(text) else {
        return text.to_string();
    };
    let mut rest = rest.to_string();
    if let Some((_, positions, ret)) = FD_FUNCS.iter().find(|(n, ..)| *n == name) {
        for &p in *positions {
            if let Some(a) = args.get_mut(p - 1) {
                *a = "FD";
            }
        }
        if *ret && !rest.starts_with(" = -") {
            rest = replace_ret(&rest, "FD");
        }
    }
    match name {
        "prctl" => args.iter_mut().skip(5).for_each(|a| *a = "?"),
        "dlopen" | "dlsym" => rest = ";".to_string(),
        n if BEYOND_UFTRACE.contains(&n) => {
            args.clear();
            rest = replace_ret(&rest, "?").replace(" = ?;", ";");
        }
        _ => {}
    }
    format!("{name}({}){rest}", args.join(", "))
}

/// The replay reduced for comparing: addresses and the values above masked, per task, leaves
/// folded (the worker thread's records may fall inside `pthread_join`), the tasks after the
/// first in order.
pub(crate) fn reduce(out: &str) -> String {
    let masked: String = util::mask_addresses(out)
        .lines()
        .map(|line| match line.split_once(" | ") {
            Some((fields, text)) => {
                let body = text.trim_start();
                let indent = &text[..text.len() - body.len()];
                format!("{fields} | {indent}{}\n", mask_call(body))
            }
            None => format!("{line}\n"),
        })
        .collect();
    let mut tasks = tasks_of(&masked, Norm::FoldLeaves);
    if let Some(rest) = tasks.get_mut(1..) {
        rest.sort();
    }
    tasks.concat()
}

fn compare(mode: Mode) -> Vec<String> {
    compare_with(mode, &["-a"], None)
}

/// The function a reduced line is about: `NAME(…` or `} … /* NAME */`.
fn line_name(line: &str) -> &str {
    let text = line.trim_start();
    if text.starts_with('}') {
        text.rsplit_once("/* ")
            .and_then(|(_, n)| n.strip_suffix(" */"))
            .unwrap_or(text)
    } else {
        text.split('(').next().unwrap_or(text)
    }
}

/// `libc_calls` recorded with `opts` by both tools, compared as in [`compare`]; with `only`,
/// just the lines of those functions (the others may or may not pass a time filter).
fn compare_with(mode: Mode, opts: &[&str], only: Option<&[&str]>) -> Vec<String> {
    let what = format!("libc_calls {} [{}]", opts.join(" "), mode.dir_name());
    let exe = util::testprog("libc_calls", mode);
    let tmp = tempfile::tempdir().unwrap();
    let work = tmp.path().join("work");
    std::fs::create_dir(&work).unwrap();
    let work = work.to_str().unwrap();
    let theirs = tmp.path().join("uftrace.data");
    let ours = tmp.path().join("utrace.data");
    let reference = util::record_with(true, &theirs, &exe, &[work], opts);
    let recorded = util::record_with(false, &ours, &exe, &[work], opts);
    let mut failures = Vec::new();
    if !recorded.status.success() || !reference.status.success() {
        failures.push(format!(
            "{what}: recording failed:\n{reference}\n{recorded}"
        ));
        return failures;
    }
    let keep = |out: &str| -> String {
        let text = reduce(out);
        match only {
            Some(names) => text
                .lines()
                .filter(|l| names.contains(&line_name(l)))
                .map(|l| format!("{l}\n"))
                .collect(),
            None => text,
        }
    };
    let want = keep(&util::uftrace_replay(&theirs, &[]).stdout);
    if only.is_none() && opts == ["-a"] {
        // The comparison means something only if uftrace showed the values.
        for line in [
            "open(\"data.txt\", O_TRUNC|O_CREAT|O_RDWR) = FD;",
            "chmod(\"data.txt\", mod_600)",
        ] {
            if !want.contains(line) {
                failures.push(format!("{what}: uftrace's replay lacks {line}:\n{want}"));
            }
        }
    }
    failures.extend(util::compare_replays(&what, &want, &ours, keep));
    failures
}

/// `-a` with triggers and filters, and the functions compared (all without a list).
const FILTER_CASES: &[(&[&str], Option<&[&str]>)] = &[
    (&["-a", "-T", "strcmp@trace_off"], None),
    (&["-a", "--disable", "-T", "strcmp@trace_on"], None),
    (&["-a", "-T", "main@depth=2"], None),
    (&["-a", "-N", "strlen"], None),
    // Library calls first made while not traced (lazily bound then) are traced later.
    (&["-a", "-F", "strings"], None),
    (&["-a", "--disable", "-T", "strings@trace_on"], None),
    (&["-a", "-T", "usleep@time=0"], None),
    // usleep(100) and its callers take 1 us at least; the other calls may or may not.
    (&["-a", "-t", "1us"], Some(&["main", "processes", "usleep"])),
];

/// `-a` with triggers (`trace_off`, `trace_on`, `depth`, `time`), `-N`, `-F` and a time
/// filter: the calls kept show the values uftrace shows.
#[test]
fn library_call_values_with_filters_match_uftrace() {
    if !util::need_uftrace("library_call_values_with_filters_match_uftrace") {
        return;
    }
    let mut failures = Vec::new();
    for mode in MODES {
        for (opts, only) in FILTER_CASES {
            failures.extend(compare_with(mode, opts, *only));
        }
    }
    util::assert_no_failures(&failures);
}

#[test]
fn library_call_values_match_uftrace() {
    if !util::need_uftrace("library_call_values_match_uftrace") {
        return;
    }
    let mut failures = Vec::new();
    for mode in MODES {
        failures.extend(compare(mode));
    }
    util::assert_no_failures(&failures);
}

/// The functions utrace shows beyond uftrace keep their values (masked above).
#[test]
fn values_beyond_uftrace() {
    let exe = util::testprog("libc_calls", Mode::Pg);
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("data");
    let out = util::record_with(false, &dir, &exe, &[tmp.path().to_str().unwrap()], &["-a"]);
    out.assert_success();
    let r = util::utrace_replay(&dir, &["-f", "none"]);
    for want in ["pread(", ", 2, 1) = 2;", "nanosleep(0x"] {
        assert!(r.stdout.contains(want), "{want}:\n{r}");
    }
}

/// Options of the dlopen cases, and the lines each replay must show (`-f none`: function
/// text only).
const DLOPEN_CASES: &[(&[&str], &[&str])] = &[
    (
        &["-l", "-a"],
        &["snprintf(0xADDR, 16, \"%d\") = 1;", "atoi(\"6\") = 6;"],
    ),
    // No library call of the executable matches: the late table is the only one.
    (
        &[
            "-l",
            "-A",
            "atoi@arg1/s",
            "-R",
            "atoi@retval/d32",
            "-A",
            "snp.*@arg2/u",
        ],
        &["snprintf(16);", "atoi(\"6\") = 6;"],
    ),
    (
        &["-l", "-a", "-T", "main@filter,depth=3"],
        &["snprintf(0xADDR, 16, \"%d\") = 1;", "atoi(\"6\") = 6;"],
    ),
    (
        &[
            "-l",
            "-A",
            "atoi@arg1/s",
            "-R",
            "atoi@retval/d32",
            "-t",
            "1ns",
        ],
        &["atoi(\"6\") = 6;"],
    ),
    (
        &["-l", "-a", "-t", "1ns"],
        &["snprintf(0xADDR, 16, \"%d\") = 1;", "atoi(\"6\") = 6;"],
    ),
];

/// With `--nest-libcall`, the calls of a library loaded by `dlopen` are hooked when `dlopen`
/// returns: they get the specs the session's calls get, and the replay shows their values.
#[test]
fn dlopened_library_calls_have_values() {
    let mut failures = Vec::new();
    for mode in [Mode::Pg, Mode::Fentry] {
        let exe = util::testprog("dlopen", mode);
        for (opts, lines) in DLOPEN_CASES {
            let tmp = tempfile::tempdir().unwrap();
            let dir = tmp.path().join("data");
            let out = util::record_with(false, &dir, &exe, &[], opts);
            if !out.status.success() {
                failures.push(format!("{mode:?} {opts:?}: {out}"));
                continue;
            }
            let r = util::utrace_replay(&dir, &["-f", "none"]);
            let text = util::mask_addresses(&r.stdout);
            for line in *lines {
                if !r.status.success() || !text.contains(line) {
                    failures.push(format!("{mode:?} {opts:?}: no {line}:\n{r}"));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn masks() {
    assert_eq!(
        mask_call("open(\"data.txt\", O_RDWR) = 4;"),
        "open(\"data.txt\", O_RDWR) = FD;"
    );
    assert_eq!(
        mask_call("epoll_ctl(4, EPOLL_CTL_ADD, 5, 0xADDR) = 0;"),
        "epoll_ctl(FD, EPOLL_CTL_ADD, FD, 0xADDR) = 0;"
    );
    assert_eq!(
        mask_call("prctl(PR_GET_NAME, 0xADDR, 0, 0, 0, 0, 0xADDR, 1, 1) = 0;"),
        "prctl(PR_GET_NAME, 0xADDR, 0, 0, 0, ?, ?, ?, ?) = 0;"
    );
    assert_eq!(
        mask_call("dlopen(\"libm.so.6\", RTLD_NOW) = 0xADDR;"),
        "dlopen(\"libm.so.6\", RTLD_NOW);"
    );
    assert_eq!(mask_call("pread(3, 0xADDR, 2, 1) = 2;"), "pread();");
    assert_eq!(mask_call("nanosleep();"), "nanosleep();");
}
