//! `utrace dump` in every format against `uftrace dump`.
//!
//! * `diff_*`: uftrace records a test program (`diff_sched_events` with its default perf
//!   events, the others with `--no-event`); `utrace dump` and `uftrace dump` then read the
//!   same data, with several option sets, in every format (needs gcc and uftrace);
//! * `golden_*`: `utrace dump` on the committed fixtures (`tests/fixtures/`) against uftrace's
//!   output in `tests/golden/<fixture>.<variant>.dump` (needs neither). `UTRACE_BLESS=1`
//!   rewrites those files from the installed uftrace;
//! * structure checks (chrome JSON, SVG), broken data and refused options are in
//!   `analysis_dump_formats`.
//!
//! What is compared (see [`Format::normalize`]): the raw dump byte for byte (with
//! `--tid-width=6`, uftrace 0.13's layout); the chrome JSON line by line except the two
//! metadata lines naming the program version and the time of the recording; the folded stacks
//! byte for byte; the graphviz graph except its version line; the mermaid flowchart lines (the
//! page around them is utrace's own).

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::crafted::{self, Program, Rec, PROG};
use crate::util::{self, Mode};
use record_format::RecordKind;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Format {
    Raw,
    Chrome,
    Flame,
    Graphviz,
    Mermaid,
}

pub(crate) const ALL: [Format; 5] = [
    Format::Raw,
    Format::Chrome,
    Format::Flame,
    Format::Graphviz,
    Format::Mermaid,
];

impl Format {
    fn name(self) -> &'static str {
        match self {
            Format::Raw => "raw",
            Format::Chrome => "chrome",
            Format::Flame => "flame",
            Format::Graphviz => "graphviz",
            Format::Mermaid => "mermaid",
        }
    }

    /// The option selecting the format (and, for raw, uftrace 0.13's TID width on utrace).
    fn options(self, utrace: bool) -> Vec<&'static str> {
        match self {
            Format::Raw if utrace => vec!["--tid-width=6"],
            Format::Raw => vec![],
            Format::Chrome => vec!["--chrome"],
            Format::Flame => vec!["--flame-graph"],
            Format::Graphviz => vec!["--graphviz"],
            Format::Mermaid => vec!["--mermaid"],
        }
    }

    /// The part of the output both tools must print identically.
    fn normalize(self, out: &str) -> String {
        match self {
            Format::Raw => mask_payload_padding(out),
            Format::Flame => out.to_string(),
            // uftrace writes a lone `,` line for each LOST record (invalid JSON); utrace
            // writes nothing.
            Format::Chrome => out
                .lines()
                .filter(|l| {
                    !l.starts_with("\"version\":")
                        && !l.starts_with("\"recorded_time\":")
                        && *l != ","
                })
                .map(|l| format!("{l}\n"))
                .collect(),
            Format::Graphviz => out
                .lines()
                .filter(|l| !l.starts_with("# version"))
                .map(|l| format!("{l}\n"))
                .collect(),
            Format::Mermaid => {
                let mut keep = false;
                let mut s = String::new();
                for l in out.lines() {
                    if l == "flowchart TB" {
                        keep = true;
                    }
                    if keep {
                        s.push_str(l);
                        s.push('\n');
                    }
                    if keep && l == "</div>" {
                        break;
                    }
                }
                s
            }
        }
    }
}

/// In `--debug` hex dumps of argument payloads, the bytes past the payload's length (up to the
/// next multiple of 8) are whatever uftrace's heap buffer held (they differ from run to run):
/// they are masked as `xx`.
fn mask_payload_padding(out: &str) -> String {
    let mut s = String::with_capacity(out.len());
    let mut payload: Option<(usize, usize)> = None;
    for line in out.lines() {
        if let Some((_, n)) = line.split_once("] length = ") {
            payload = n.trim().parse().ok().map(|n| (n, 0));
        } else if !line.starts_with(' ') {
            payload = None;
        }
        match (payload.as_mut(), line.split_once(">:")) {
            (Some((len, pos)), Some((head, bytes))) if line.starts_with(" <") => {
                s.push_str(head);
                s.push_str(">:");
                for (i, word) in bytes.split(' ').enumerate() {
                    if i > 0 {
                        s.push(' ');
                    }
                    if word.is_empty() {
                        continue;
                    }
                    s.push_str(if *pos >= *len { "xx" } else { word });
                    *pos += 1;
                }
            }
            _ => s.push_str(line),
        }
        s.push('\n');
    }
    s
}

fn dump(bin: &Path, dir: &Path, format: Format, utrace: bool, opts: &[&str]) -> util::Output {
    let mut cmd = Command::new(bin);
    cmd.arg("dump")
        .arg("--no-pager")
        .arg("-d")
        .arg(dir)
        .args(format.options(utrace))
        .args(opts);
    util::run(cmd)
}

pub(crate) fn utrace_dump(dir: &Path, format: Format, opts: &[&str]) -> util::Output {
    dump(&util::utrace_bin(), dir, format, true, opts)
}

fn uftrace_dump(dir: &Path, format: Format, opts: &[&str]) -> util::Output {
    dump(&util::uftrace_bin(), dir, format, false, opts)
}

/// Line diff for messages: `-` expected, `+` utrace, only the differing lines (at most 40).
fn diff(want: &str, got: &str) -> String {
    let (w, g): (Vec<&str>, Vec<&str>) = (want.lines().collect(), got.lines().collect());
    let mut out = Vec::new();
    for i in 0..w.len().max(g.len()) {
        let (a, b) = (w.get(i), g.get(i));
        if a != b {
            if let Some(a) = a {
                out.push(format!("{i:4} - {a}"));
            }
            if let Some(b) = b {
                out.push(format!("{i:4} + {b}"));
            }
        }
        if out.len() >= 40 {
            out.push("...".to_string());
            break;
        }
    }
    out.join("\n")
}

/// Compares utrace with `want` (uftrace's output) in `format`; a problem description if they
/// differ.
fn check_one(dir: &Path, format: Format, opts: &[&str], want: &str) -> Option<String> {
    let out = utrace_dump(dir, format, opts);
    let mut problems = Vec::new();
    if out.stderr.contains("panicked") || !out.status.success() {
        problems.push(format!("utrace failed ({})", out.status));
    }
    let (w, g) = (format.normalize(want), format.normalize(&out.stdout));
    if w != g {
        problems.push(format!(
            "output differs (- uftrace, + utrace):\n{}",
            diff(&w, &g)
        ));
    }
    if problems.is_empty() {
        return None;
    }
    Some(format!(
        "=== {} {opts:?}\n$ {}\n{}\n--- utrace stderr:\n{}",
        format.name(),
        out.command,
        problems.join("\n"),
        out.stderr
    ))
}

// ---------------------------------------------------------------------------------------
// Differential tests on freshly recorded data.

/// Records `prog` with uftrace (`--no-event`) and compares every format for every option set.
fn differential(test: &str, prog: &str, record: &[&str], args: &[&str], option_sets: &[&[&str]]) {
    if !util::need_uftrace(test) {
        return;
    }
    let exe = util::testprog(prog, Mode::Pg);
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = tmp.path().join("data");
    util::uftrace_record(&data, record, &exe, args);
    compare_all(test, &data, option_sets);
}

/// Like [`differential`], but recorded with uftrace's default events: the perf files
/// (context switches, task names, exits).
fn differential_with_events(test: &str, prog: &str, option_sets: &[&[&str]]) {
    if !util::need_uftrace(test) {
        return;
    }
    let exe = util::testprog(prog, Mode::Pg);
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = tmp.path().join("data");
    let mut cmd = Command::new(util::uftrace_bin());
    cmd.arg("record").arg("-d").arg(&data).arg(&exe);
    util::run(cmd).assert_success();
    compare_all(test, &data, option_sets);
}

fn compare_all(test: &str, data: &Path, option_sets: &[&[&str]]) {
    let mut failures = Vec::new();
    let mut total = 0;
    for opts in option_sets {
        for format in ALL {
            total += 1;
            let want = uftrace_dump(data, format, opts);
            want.assert_success();
            if let Some(f) = check_one(data, format, opts, &want.stdout) {
                failures.push(f);
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{test}: {} of {total} dumps differ from uftrace\n\n{}",
        failures.len(),
        failures.join("\n\n")
    );
}

#[test]
fn diff_abc() {
    differential(
        "diff_abc",
        "abc",
        &[],
        &[],
        &[
            &[],
            &["-F", "b"],
            &["-N", "b"],
            &["-D", "2"],
            &["--no-libcall"],
            &["-H", "b"],
        ],
    );
}

#[test]
fn diff_fib_args() {
    differential(
        "diff_fib_args",
        "fib",
        &["-A", "fib@arg1", "-R", "fib@retval"],
        &["6"],
        &[
            &[],
            &["-F", "fib", "-D", "2"],
            &["--no-args"],
            &["--sample-time=100ns"],
        ],
    );
}

/// One `-A`/`-R` spec per argument kind of args.c (as in `replay_diff`).
#[rustfmt::skip]
const ARG_SPECS: &[&str] = &[
    "-A", "add_int@arg1,arg2", "-R", "add_int@retval",
    "-A", "mul_long@arg1,arg2", "-R", "mul_long@retval",
    "-A", "twice_unsigned@arg1/u", "-R", "twice_unsigned@retval/u",
    "-A", "to_upper@arg1/c", "-R", "to_upper@retval/c",
    "-A", "pick@arg1/s,arg2/x", "-R", "pick@retval/s",
    "-A", "half@fparg1", "-R", "half@retval/f",
    "-A", "scale@fparg1/32,arg1/i32,fparg2/32", "-R", "scale@retval/f32",
    "-A", "same_ptr@arg1/x", "-R", "same_ptr@retval/p",
    "-A", "sides@arg1/e:shape", "-R", "sides@retval/i32",
    "-A", "mixed@arg1/c,arg2/i32,fparg1,arg3/s,arg4/u", "-R", "mixed@retval/x",
];

#[test]
fn diff_args_specs() {
    differential("diff_args_specs", "args", ARG_SPECS, &[], &[&[], &["-v"]]);
}

/// Structs by value (uftrace's `struct NAME:` and the bytes by 16 a line), an empty one, a
/// struct returned, a function pointer named (`562b0181b349 (&cb)`) and a plain pointer.
#[test]
fn diff_struct_and_pointer_args() {
    differential(
        "diff_struct_and_pointer_args",
        "dtypes",
        &[
            "-A",
            "^take_(point|big|empty|klass)$",
            "-R",
            "^make_point$",
            "-A",
            "take_fn@arg1/p,arg2",
            "-A",
            "take_ptr@arg1/p",
        ],
        &[],
        &[&[]],
    );
}

#[test]
fn diff_thread() {
    differential(
        "diff_thread",
        "thread",
        &[],
        &[],
        &[&[], &["-F", "worker"], &["--no-libcall"]],
    );
}

#[test]
fn diff_fork() {
    differential("diff_fork", "fork", &[], &[], &[&[], &["-D", "1"]]);
}

#[test]
fn diff_exec_longjmp_exit() {
    differential("diff_exec", "exec", &[], &[], &[&[]]);
    differential("diff_longjmp", "longjmp", &[], &[], &[&[]]);
    differential("diff_exit", "exit", &[], &[], &[&[], &["-D", "2"]]);
}

/// A sleep inside a function shows as `linux:schedule` (sched-out/in from the perf files);
/// the raw dump lists the perf files after the task files.
#[test]
fn diff_sched_events() {
    differential_with_events(
        "diff_sched_events",
        "sleep",
        &[&[], &["--no-event"], &["--no-sched"], &["-D", "2"]],
    );
    differential_with_events("diff_sched_events_thread", "thread", &[&[]]);
}

#[test]
fn diff_cxx() {
    differential(
        "diff_cxx",
        "cxx",
        &[],
        &[],
        &[&[], &["--demangle=no"], &["-N", "^std::"]],
    );
}

// ---------------------------------------------------------------------------------------
// Goldens on the committed fixtures.

/// A golden: fixture, variant name, format, options.
struct Golden {
    fixture: &'static str,
    variant: &'static str,
    format: Format,
    opts: &'static [&'static str],
}

const fn g(
    fixture: &'static str,
    variant: &'static str,
    format: Format,
    opts: &'static [&'static str],
) -> Golden {
    Golden {
        fixture,
        variant,
        format,
        opts,
    }
}

const GOLDENS: &[Golden] = &[
    g("abc", "raw", Format::Raw, &[]),
    g("abc", "raw-debug", Format::Raw, &["--debug"]),
    g("abc", "raw-F-b", Format::Raw, &["-F", "b"]),
    g("abc", "raw-N-b", Format::Raw, &["-N", "b"]),
    g("abc", "chrome", Format::Chrome, &[]),
    g("abc", "flame", Format::Flame, &[]),
    g("abc", "graphviz", Format::Graphviz, &[]),
    g("abc", "mermaid", Format::Mermaid, &[]),
    g("fib-args", "raw", Format::Raw, &[]),
    g("fib-args", "raw-debug", Format::Raw, &["--debug"]),
    g("fib-args", "chrome", Format::Chrome, &[]),
    g("fib-args", "chrome-no-args", Format::Chrome, &["--no-args"]),
    g("fib-args", "flame", Format::Flame, &[]),
    g(
        "fib-args",
        "flame-100ns",
        Format::Flame,
        &["--sample-time=100ns"],
    ),
    g("thread", "raw", Format::Raw, &[]),
    g("thread", "chrome", Format::Chrome, &[]),
    g("thread", "flame", Format::Flame, &[]),
    g("thread", "graphviz", Format::Graphviz, &[]),
    g("thread", "mermaid", Format::Mermaid, &[]),
    g("fork", "raw", Format::Raw, &[]),
    g("fork", "chrome", Format::Chrome, &[]),
    g("fork", "flame", Format::Flame, &[]),
    g("fork", "graphviz", Format::Graphviz, &[]),
    g("fork", "mermaid", Format::Mermaid, &[]),
    g("exec", "chrome", Format::Chrome, &[]),
    g("exec", "flame", Format::Flame, &[]),
    g("longjmp", "chrome", Format::Chrome, &[]),
    g("longjmp", "flame", Format::Flame, &[]),
    g("exit", "chrome", Format::Chrome, &[]),
    g("exit", "flame", Format::Flame, &[]),
    g("cxx", "raw", Format::Raw, &[]),
    g("cxx", "chrome", Format::Chrome, &[]),
    g("cxx", "graphviz", Format::Graphviz, &[]),
    g("signal", "chrome", Format::Chrome, &[]),
];

pub(crate) fn fixture_dir(name: &str) -> PathBuf {
    util::tests_dir().join("fixtures").join(name)
}

fn golden_path(gold: &Golden) -> PathBuf {
    util::tests_dir()
        .join("golden")
        .join(format!("{}.{}.dump", gold.fixture, gold.variant))
}

/// Checks (or, with `UTRACE_BLESS=1`, rewrites from uftrace) the goldens of `fixture`.
fn check_goldens(fixture: &str) {
    let dir = fixture_dir(fixture);
    let mut failures = Vec::new();
    let goldens: Vec<&Golden> = GOLDENS.iter().filter(|g| g.fixture == fixture).collect();
    for gold in &goldens {
        let path = golden_path(gold);
        if util::bless() {
            let out = uftrace_dump(&dir, gold.format, gold.opts);
            out.assert_success();
            // Only the compared part is kept (uftrace's mermaid page is not ours to copy).
            std::fs::write(&path, gold.format.normalize(&out.stdout)).expect("write golden");
            continue;
        }
        let want = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
        if let Some(f) = check_one(&dir, gold.format, gold.opts, &want) {
            failures.push(format!("{}: {f}", path.display()));
        }
    }
    assert!(
        failures.is_empty(),
        "fixture {fixture}: {} of {} dumps differ from the goldens\n\n{}",
        failures.len(),
        goldens.len(),
        failures.join("\n\n")
    );
}

#[test]
fn golden_abc() {
    check_goldens("abc");
}

#[test]
fn golden_fib_args() {
    check_goldens("fib-args");
}

#[test]
fn golden_thread() {
    check_goldens("thread");
}

#[test]
fn golden_fork() {
    check_goldens("fork");
}

#[test]
fn golden_exec_longjmp_exit_signal() {
    for f in ["exec", "longjmp", "exit", "signal"] {
        check_goldens(f);
    }
}

#[test]
fn golden_cxx() {
    check_goldens("cxx");
}

// ---------------------------------------------------------------------------------------
// Crafted data (record-format's writer): lost records and calls that never return.

/// The crafted directory of `/nonexistent/prog` (functions main/a/b/c) with the records
/// (kind, time in µs, depth, function index); a LOST record carries its count as time.
fn write_crafted(dir: &Path, records: &[Rec]) {
    let records: Vec<Rec> = records
        .iter()
        .map(|&(kind, time, depth, f)| match kind {
            RecordKind::Lost => (kind, time, depth, f),
            _ => (kind, time * 1000, depth, f),
        })
        .collect();
    crafted::write_dir(dir, &Program { tid: 4343, ..PROG }, &records);
}

/// LOST records (the stack resynchronised from the next record's depth) and calls that never
/// return (closed at the task's last timestamp): every format against uftrace on the same
/// directory; the chrome dump warns about the lost records.
#[test]
fn diff_crafted_lost_and_unfinished() {
    use RecordKind::{Entry as E, Exit as X, Lost as L};
    if !util::need_uftrace("diff_crafted_lost_and_unfinished") {
        return;
    }
    let tmp = tempfile::tempdir().expect("tempdir");
    let lost = tmp.path().join("lost");
    write_crafted(
        &lost,
        &[
            (E, 10, 0, 0),
            (E, 20, 1, 1),
            (E, 30, 2, 2),
            (L, 5, 0, 0),
            (E, 60, 2, 3),
            (X, 70, 2, 3),
            (X, 80, 1, 1),
            (X, 90, 0, 0),
        ],
    );
    compare_all("crafted_lost", &lost, &[&[], &["-D", "2"]]);
    let out = utrace_dump(&lost, Format::Chrome, &[]);
    assert!(
        out.stderr
            .contains("WARN: Some of function trace records are lost. (1 times shown)"),
        "{out}"
    );
    let unfinished = tmp.path().join("unfinished");
    write_crafted(
        &unfinished,
        &[
            (E, 10, 0, 0),
            (E, 20, 1, 1),
            (E, 30, 2, 2),
            (X, 40, 2, 2),
            (E, 50, 2, 3),
        ],
    );
    compare_all("crafted_unfinished", &unfinished, &[&[], &["-F", "a"]]);
}
