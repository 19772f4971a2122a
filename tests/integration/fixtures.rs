//! `utrace replay` on small data directories recorded by uftrace 0.13 (`tests/fixtures/<name>/`)
//! against the output of `uftrace replay` on the same data (`tests/golden/<name>.<variant>.replay`).
//! These tests need neither gcc nor uftrace.
//!
//! The golden files are uftrace's output, not utrace's: `UTRACE_BLESS=1` (the one way to
//! regenerate the golden files, see [`util::bless`]) rewrites them from the installed uftrace.
//! The fixtures themselves are re-recorded by the ignored test [`rerecord`] (see
//! `tests/fixtures/README.md`).

use std::path::{Path, PathBuf};

use crate::normalize::{self, Anchor};
use crate::util::{self, Mode};

/// How a golden file is compared with utrace's output.
#[derive(Clone, Copy, Debug)]
enum How {
    /// uftrace's test-suite comparison (function column per task).
    Task(Anchor),
    /// Function column of every line, in order, remaining-functions block included.
    Whole,
    /// Byte for byte (outputs without a TID column: `-f none`, `--flat`).
    Exact,
}

/// One replay of a fixture: a name for the golden file and the options.
struct Variant {
    name: &'static str,
    opts: &'static [&'static str],
    how: How,
}

/// A committed data directory: how it was recorded and which replays have golden output.
struct Fixture {
    name: &'static str,
    prog: &'static str,
    record: &'static [&'static str],
    args: &'static [&'static str],
    variants: &'static [Variant],
}

const MAIN: How = How::Task(Anchor::Main);
const START: How = How::Task(Anchor::Start);

/// `{tid}` in options stands for the last task of the plain replay (a thread or child).
const TID: &str = "{tid}";

const fn v(name: &'static str, opts: &'static [&'static str], how: How) -> Variant {
    Variant { name, opts, how }
}

const FIXTURES: &[Fixture] = &[
    Fixture {
        name: "abc",
        prog: "abc",
        record: &[],
        args: &[],
        variants: &[
            v("plain", &[], MAIN),
            v("whole", &[], How::Whole),
            v("D2", &["-D", "2"], MAIN),
            v("F-b", &["-F", "b"], START),
            v("N-b", &["-N", "b"], MAIN),
            v("H-b", &["-H", "b"], MAIN),
            v("C-c", &["-C", "c"], MAIN),
            v("no-libcall", &["--no-libcall"], MAIN),
            v("T-b-backtrace", &["-T", "b@backtrace"], MAIN),
            v(
                "T-trace-off-on",
                &["-T", "a@trace_off", "-T", "c@trace_on"],
                MAIN,
            ),
            v("f-none", &["-f", "none"], How::Exact),
            v("flat", &["--flat"], How::Exact),
            v(
                "fields",
                &["-f", "+addr,time,delta,elapsed,task,module"],
                MAIN,
            ),
        ],
    },
    Fixture {
        name: "fib-args",
        prog: "fib",
        record: &["-A", "fib@arg1", "-R", "fib@retval"],
        args: &["5"],
        variants: &[
            v("plain", &[], MAIN),
            v("D3", &["-D", "3"], MAIN),
            v("F-fib-D2", &["-F", "fib", "-D", "2"], START),
            v("no-args", &["--no-args"], MAIN),
            v("f-none", &["-f", "none"], How::Exact),
        ],
    },
    Fixture {
        name: "thread",
        prog: "thread",
        record: &[],
        args: &[],
        variants: &[
            v("plain", &[], MAIN),
            v("whole", &[], How::Whole),
            v("tid", &["--tid", TID], START),
            v("F-worker", &["-F", "worker"], START),
            v("no-libcall", &["--no-libcall"], MAIN),
        ],
    },
    Fixture {
        name: "fork",
        prog: "fork",
        record: &[],
        args: &[],
        variants: &[
            v("plain", &[], MAIN),
            v("whole", &[], How::Whole),
            v("D1", &["-D", "1"], MAIN),
            v("tid", &["--tid", TID], START),
            v("T-leaf-backtrace", &["-T", "leaf@backtrace"], MAIN),
            v("flat", &["--flat"], How::Exact),
        ],
    },
    Fixture {
        name: "cxx",
        prog: "cxx",
        record: &[],
        args: &[],
        variants: &[
            v("plain", &[], MAIN),
            v("demangle-no", &["--demangle=no"], MAIN),
            v("H-std", &["-H", "^std::"], MAIN),
            v("N-std", &["-N", "^std::"], MAIN),
        ],
    },
    Fixture {
        name: "exit",
        prog: "exit",
        record: &[],
        args: &[],
        variants: &[
            v("whole", &[], How::Whole),
            v("D2", &["-D", "2"], How::Whole),
        ],
    },
    Fixture {
        name: "longjmp",
        prog: "longjmp",
        record: &[],
        args: &[],
        variants: &[v("whole", &[], How::Whole), v("D2", &["-D", "2"], MAIN)],
    },
    Fixture {
        name: "signal",
        prog: "signal",
        record: &[],
        args: &[],
        variants: &[
            v("plain", &[], MAIN),
            v("F-on_signal", &["-F", "on_signal"], START),
        ],
    },
    Fixture {
        name: "exec",
        prog: "exec",
        record: &[],
        args: &[],
        variants: &[
            v("whole", &[], How::Whole),
            v("no-libcall", &["--no-libcall"], MAIN),
        ],
    },
];

fn fixture_dir(name: &str) -> PathBuf {
    util::tests_dir().join("fixtures").join(name)
}

fn golden_path(fixture: &str, variant: &str) -> PathBuf {
    util::tests_dir()
        .join("golden")
        .join(format!("{fixture}.{variant}.replay"))
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

/// The options with `{tid}` replaced by the last TID of the fixture's plain golden output.
fn resolve(fixture: &Fixture, opts: &[&str]) -> Vec<String> {
    let tid = || {
        let plain = read(&golden_path(fixture.name, fixture.variants[0].name));
        normalize::tids(&plain)
            .pop()
            .expect("plain golden output names a task")
    };
    opts.iter()
        .map(|opt| if *opt == TID { tid() } else { opt.to_string() })
        .collect()
}

fn normalized(output: &str, how: How) -> String {
    match how {
        How::Task(anchor) => normalize::by_task(output, anchor),
        How::Whole => normalize::whole(output),
        How::Exact => output.to_string(),
    }
}

fn check(name: &str) {
    let fixture = FIXTURES
        .iter()
        .find(|f| f.name == name)
        .expect("fixture in table");
    let dir = fixture_dir(name);
    if util::bless() {
        bless(fixture);
        return;
    }
    let mut failures = Vec::new();
    for variant in fixture.variants {
        let opts = resolve(fixture, variant.opts);
        let opts: Vec<&str> = opts.iter().map(String::as_str).collect();
        let golden = read(&golden_path(name, variant.name));
        let out = util::utrace_replay(&dir, &opts);
        let mut problems = Vec::new();
        if out.stderr.contains("panicked") {
            problems.push("utrace panicked".to_string());
        }
        if !out.status.success() {
            problems.push(format!("exit status {}", out.status));
        }
        let want = normalized(&golden, variant.how);
        let got = normalized(&out.stdout, variant.how);
        if want != got {
            problems.push(format!(
                "output differs (- golden, + utrace):\n{}",
                normalize::diff(&want, &got)
            ));
        }
        if !problems.is_empty() {
            failures.push(format!(
                "=== {name}.{} ({:?})\n$ {}\n{}\n--- utrace stderr:\n{}",
                variant.name,
                variant.how,
                out.command,
                problems.join("\n"),
                out.stderr
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "fixture {name}: {} of {} variants differ from uftrace's golden output\n\n{}",
        failures.len(),
        fixture.variants.len(),
        failures.join("\n")
    );
}

#[test]
fn abc() {
    check("abc");
}

#[test]
fn fib_args() {
    check("fib-args");
}

#[test]
fn thread() {
    check("thread");
}

#[test]
fn fork() {
    check("fork");
}

#[test]
fn cxx() {
    check("cxx");
}

#[test]
fn exit() {
    check("exit");
}

#[test]
fn longjmp() {
    check("longjmp");
}

#[test]
fn signal() {
    check("signal");
}

#[test]
fn exec() {
    check("exec");
}

/// The goldens come from uftrace 0.13, whose TID column is one narrower than 0.19's (the
/// layout utrace follows, spec/cli.md §13), so the left-of-`|` layout is checked here instead.
#[test]
fn columns_follow_0_19_layout() {
    let out = util::utrace_replay(&fixture_dir("abc"), &[]);
    let mut lines = out.stdout.lines();
    assert_eq!(
        lines.next(),
        Some("# DURATION     TID      FUNCTION"),
        "{out}"
    );
    let main = lines
        .find(|line| line.ends_with("| main() {"))
        .unwrap_or_else(|| panic!("no main line:\n{out}"));
    let tid = normalize::tids(&out.stdout).remove(0);
    assert_eq!(main, format!("            [{tid:>7}] | main() {{"), "{out}");
}

/// Every fixture in the table has its data directory and all its golden files.
#[test]
fn fixtures_are_complete() {
    for fixture in FIXTURES {
        let dir = fixture_dir(fixture.name);
        assert!(
            dir.join("info").is_file(),
            "{}: no info file",
            dir.display()
        );
        for variant in fixture.variants {
            let path = golden_path(fixture.name, variant.name);
            assert!(path.is_file(), "missing golden file {}", path.display());
        }
    }
}

/// Rewrites the replay goldens of `fixture` from `uftrace replay` ([`util::bless`]).
fn bless(fixture: &Fixture) {
    let dir = fixture_dir(fixture.name);
    // The plain variant comes first so `{tid}` can be resolved from its golden file.
    for variant in fixture.variants {
        let opts = resolve(fixture, variant.opts);
        let opts: Vec<&str> = opts.iter().map(String::as_str).collect();
        let out = util::uftrace_replay(&dir, &opts);
        out.assert_success();
        std::fs::write(golden_path(fixture.name, variant.name), &out.stdout)
            .expect("write golden file");
    }
}

/// Re-records every fixture with uftrace from the `-pg` test programs and rewrites their
/// replay goldens, as `UTRACE_BLESS=1` does (required: the goldens change with the data; the
/// report, graph, info and dump goldens are then rewritten by the golden tests run with it).
/// Run it explicitly (see `tests/fixtures/README.md`) and commit the result.
#[test]
#[ignore = "rewrites tests/fixtures and tests/golden with the installed uftrace"]
fn rerecord() {
    assert!(
        util::bless(),
        "re-recording the fixtures rewrites the goldens: run it with UTRACE_BLESS=1"
    );
    for sub in ["fixtures", "golden"] {
        std::fs::create_dir_all(util::tests_dir().join(sub)).expect("create tests subdirectory");
    }
    for fixture in FIXTURES {
        let dir = fixture_dir(fixture.name);
        for old in [dir.clone(), dir.with_extension("old")] {
            if old.exists() {
                std::fs::remove_dir_all(&old).expect("remove old fixture");
            }
        }
        let prog = util::testprog(fixture.prog, Mode::Pg);
        util::uftrace_record(&dir, fixture.record, &prog, fixture.args);
        bless(fixture);
    }
}
