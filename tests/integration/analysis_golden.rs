//! `utrace report`, `graph` and `info` on the committed fixtures (`tests/fixtures/`) against
//! uftrace's output on the same data, kept in `tests/golden/<fixture>.<variant>.<command>`.
//! Needs neither gcc nor uftrace. `UTRACE_BLESS=1` rewrites the golden files from the installed
//! uftrace (never from utrace). Outputs are compared whole after
//! [`analysis_diff::normalize`](crate::analysis_diff::normalize).

use std::path::PathBuf;

use crate::analysis_diff::{mismatch, normalize, uftrace, utrace};
use crate::util;

/// One command on one fixture.
struct Golden {
    fixture: &'static str,
    variant: &'static str,
    sub: &'static str,
    opts: &'static [&'static str],
}

const fn g(
    fixture: &'static str,
    sub: &'static str,
    variant: &'static str,
    opts: &'static [&'static str],
) -> Golden {
    Golden {
        fixture,
        variant,
        sub,
        opts,
    }
}

const GOLDENS: &[Golden] = &[
    g("abc", "report", "plain", &[]),
    g("abc", "report", "N-b", &["-N", "b"]),
    g("abc", "report", "D2", &["-D", "2"]),
    g("abc", "report", "s-call-func", &["-s", "call,func"]),
    g("abc", "report", "f-all", &["-f", "all"]),
    g("abc", "graph", "plain", &[]),
    g("abc", "graph", "b", &["b"]),
    g("abc", "graph", "fields", &["-f", "total,self,addr"]),
    g("abc", "info", "plain", &[]),
    g("abc", "info", "task", &["--task"]),
    g("fib-args", "report", "plain", &[]),
    g("fib-args", "report", "avg-total", &["--avg-total"]),
    g("fib-args", "report", "avg-self", &["--avg-self"]),
    g("fib-args", "graph", "plain", &[]),
    g("fib-args", "graph", "fib", &["fib"]),
    g("fib-args", "info", "plain", &[]),
    g("thread", "report", "plain", &[]),
    g("thread", "report", "task", &["--task"]),
    g("thread", "report", "tid", &["--tid", "20261"]),
    g("thread", "graph", "plain", &[]),
    g("thread", "graph", "tiny", &["tiny"]),
    g("thread", "graph", "task", &["--task"]),
    g("thread", "info", "plain", &[]),
    g("thread", "info", "task", &["--task"]),
    g("fork", "report", "plain", &[]),
    g("fork", "report", "no-libcall", &["--no-libcall"]),
    g("fork", "graph", "plain", &[]),
    g("fork", "graph", "no-libcall", &["--no-libcall"]),
    g("fork", "graph", "getpid", &["getpid"]),
    g("fork", "graph", "task", &["--task"]),
    g("fork", "graph", "task-f-none", &["--task", "-f", "none"]),
    g("fork", "info", "task", &["--task"]),
    g("exec", "report", "plain", &[]),
    g("exec", "report", "D1", &["-D", "1"]),
    g("exec", "report", "no-libcall", &["--no-libcall"]),
    g("exec", "graph", "plain", &[]),
    g("exec", "graph", "main", &["main"]),
    g("longjmp", "report", "plain", &[]),
    g("longjmp", "report", "no-libcall", &["--no-libcall"]),
    g("longjmp", "graph", "plain", &[]),
    g("longjmp", "graph", "D2", &["-D", "2"]),
    g("exit", "report", "plain", &[]),
    g("exit", "graph", "plain", &[]),
    g("exit", "graph", "D2", &["-D", "2"]),
    g("exit", "graph", "outer", &["outer"]),
    g("signal", "report", "plain", &[]),
    g("signal", "graph", "plain", &[]),
    g("cxx", "report", "plain", &[]),
    g("cxx", "graph", "plain", &[]),
];

fn fixture_dir(name: &str) -> PathBuf {
    util::tests_dir().join("fixtures").join(name)
}

fn golden_path(gold: &Golden) -> PathBuf {
    util::tests_dir()
        .join("golden")
        .join(format!("{}.{}.{}", gold.fixture, gold.variant, gold.sub))
}

fn check(sub: &str) {
    let goldens: Vec<&Golden> = GOLDENS.iter().filter(|g| g.sub == sub).collect();
    let mut failures = Vec::new();
    for gold in &goldens {
        let dir = fixture_dir(gold.fixture);
        let path = golden_path(gold);
        if util::bless() {
            let out = uftrace(sub, &dir, gold.opts);
            out.assert_success();
            std::fs::write(&path, normalize(&out.stdout, false)).expect("write golden");
            continue;
        }
        let want = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
        let actual = utrace(sub, &dir, gold.opts);
        let expected = util::Output {
            command: format!("golden {}", path.display()),
            status: std::process::ExitStatus::default(),
            stdout: want,
            stderr: String::new(),
        };
        let label = format!("{} {sub} {}", gold.fixture, gold.opts.join(" "));
        if let Some(f) = mismatch(&label, &expected, &actual) {
            failures.push(f);
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} {sub} goldens differ\n\n{}",
        failures.len(),
        goldens.len(),
        failures.join("\n")
    );
}

#[test]
fn report() {
    check("report");
}

#[test]
fn graph() {
    check("graph");
}

#[test]
fn info() {
    check("info");
}

/// The goldens are real: a wrong total or call count in utrace's output would be seen.
#[test]
fn goldens_are_not_trivial() {
    if util::bless() {
        return;
    }
    let read = |f: &str| {
        std::fs::read_to_string(util::tests_dir().join("golden").join(f))
            .unwrap_or_else(|e| panic!("{f}: {e}"))
    };
    let fib = read("fib-args.plain.report");
    assert!(fib.contains("           9  fib"), "{fib}");
    let graph = read("fork.plain.graph");
    assert!(graph.contains(" +-(1) child_work"), "{graph}");
    let mut broken = fib.replace("           9  fib", "          10  fib");
    broken.push('\n');
    let expected = util::Output {
        command: "golden".into(),
        status: std::process::ExitStatus::default(),
        stdout: broken,
        stderr: String::new(),
    };
    let actual = utrace("report", &fixture_dir("fib-args"), &[]);
    assert!(mismatch("fib-args report", &expected, &actual).is_some());
}
