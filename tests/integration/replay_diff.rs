//! Differential tests: record each test program once with uftrace, then replay the same data
//! with `uftrace replay` and `utrace replay` under many option sets and compare the outputs the
//! way uftrace's test suite does (see `normalize.rs`).
//!
//! One test per program × option family (`basic`, `filters`, `triggers`, `fields`); each test
//! runs all its cases and reports every mismatch with a diff, then fails once at the end.
//! These tests need uftrace and are skipped without it (unless `UTRACE_REQUIRE_UFTRACE=1`).

use std::path::Path;

use crate::normalize::{self, Anchor};
use crate::util::{self, Mode, Output};

/// Function names a program offers to the filter and trigger options.
struct Funcs {
    /// Called from main; its subtree holds `mid`.
    outer: &'static str,
    /// A function with callees (the `-F`/`-N`/`-H` target).
    mid: &'static str,
    /// A function deep in the tree (the `-C` target).
    leaf: &'static str,
    /// A `--match=glob` pattern matching a few functions.
    glob: &'static str,
}

/// What is recorded: one program, built one way, run with some record options and arguments.
struct Scenario {
    prog: &'static str,
    mode: Mode,
    record: &'static [&'static str],
    args: &'static [&'static str],
    funcs: Funcs,
}

/// How two replay outputs are compared.
#[derive(Clone, Copy, Debug)]
enum How {
    /// uftrace's test-suite comparison: function column, grouped per task.
    Task(Anchor),
    /// Every line in order (function column), including the remaining-functions block.
    Whole,
    /// `--flat` output with times masked.
    Flat,
    /// Whole, and whether there is a header line or an empty output (the header shows once a
    /// record inside `-r` was read, whatever hid it).
    Header,
}

/// One replay invocation to compare.
struct Case {
    opts: Vec<String>,
    how: How,
}

fn case(opts: &[&str], how: How) -> Case {
    Case {
        opts: opts.iter().map(|s| s.to_string()).collect(),
        how,
    }
}

const MAIN: How = How::Task(Anchor::Main);
const START: How = How::Task(Anchor::Start);

/// The option sets of one family. `last_tid` is the last task to appear in the plain replay
/// (a thread or forked child when there is one).
fn family(name: &str, f: &Funcs, last_tid: &str) -> Vec<Case> {
    let fmt = |pattern: &str, func: &str| pattern.replace("{}", func);
    match name {
        "basic" => vec![
            case(&[], MAIN),
            case(&[], How::Whole),
            case(&["-D", "1"], MAIN),
            case(&["-D", "2"], MAIN),
            case(&["-D", "3"], MAIN),
            case(&["--no-libcall"], MAIN),
            case(&["--no-comment"], MAIN),
            case(&["--no-merge"], MAIN),
            case(&["-t", "1us"], MAIN),
            case(&["-F", "main", "-D", "1"], MAIN),
            case(&["--libname"], MAIN),
        ],
        "filters" => vec![
            case(&["-F", f.mid], START),
            case(&["-F", f.mid], How::Whole),
            case(&["-F", f.mid, "-D", "1"], START),
            case(&["-N", f.mid], MAIN),
            case(&["-H", f.mid], MAIN),
            case(&["-H", f.outer], MAIN),
            case(&["-C", f.leaf], MAIN),
            case(&["-C", f.leaf], How::Whole),
            case(&["-F", f.outer, "-N", f.leaf], START),
            case(&["--match=glob", "-F", f.glob], START),
            case(&["--match=glob", "-N", f.glob], MAIN),
            case(&["-F", &fmt("^{}$", f.mid)], START),
            case(&["-F", "no_such_function"], How::Whole),
            case(&["--no-libcall", "-D", "2", "-F", f.mid], START),
            // Everything hidden: the header only (an empty line with nothing in -r).
            case(&["-C", "no_such_function"], How::Header),
            case(&["-t", "100s"], How::Header),
            case(&["--tid", "1"], How::Header),
            case(&["-r", "1~2"], How::Header),
            // A pattern on library calls (PLT entries) only.
            case(&["-F", "get.?id@plt"], START),
            // A depth given to -F as an action.
            case(&["-F", "main", "-F", &fmt("{}@depth=1", f.mid)], START),
            case(&["-F", &fmt("{}@depth=2", f.outer)], START),
            // -Z: functions smaller than 30 bytes hidden, callees in their place; a size=
            // trigger sets another limit below its function.
            case(&["-Z", "30"], MAIN),
            case(&["-Z", "30", "-T", &fmt("{}@size=10", f.mid)], MAIN),
            case(&["-Z", "40", "-D", "2"], MAIN),
        ],
        "triggers" => vec![
            case(&["-T", &fmt("{}@depth=1", f.mid)], MAIN),
            case(
                &[
                    "-T",
                    &fmt("{}@trace_off", f.outer),
                    "-T",
                    &fmt("{}@trace_on", f.leaf),
                ],
                MAIN,
            ),
            case(&["-T", &fmt("{}@backtrace", f.mid)], MAIN),
            // `finish` acts while recording only.
            case(&["-T", &fmt("{}@finish", f.mid)], How::Whole),
            case(&["-T", &fmt("{}@backtrace", f.leaf)], MAIN),
            case(&["-T", &fmt("{}@filter,backtrace,depth=2", f.mid)], START),
            case(&["-T", &fmt("{}@notrace", f.leaf)], MAIN),
            case(&["-T", &fmt("{}@hide", f.mid)], MAIN),
            case(&["-T", &fmt("{}@caller", f.leaf)], MAIN),
            // `--disable`: nothing before a trace_on trigger, which keeps the real depth;
            // the other spellings of the actions; the header even when nothing shows.
            case(&["--disable", "-T", &fmt("{}@trace_on", f.mid)], START),
            case(&["--disable", "-T", &fmt("{}@trace-on", f.mid)], START),
            case(
                &[
                    "--disable",
                    "-T",
                    &fmt("{}@traceon", f.outer),
                    "-T",
                    &fmt("{}@traceoff", f.mid),
                ],
                START,
            ),
            case(&["--disable"], How::Whole),
            case(&["-F", f.mid, "-N", f.mid], How::Whole),
        ],
        "fields" => vec![
            case(&["-f", "none"], MAIN),
            case(&["-f", "none"], How::Whole),
            case(&["-f", "+addr,time,delta,elapsed,task,module"], MAIN),
            case(&["-f", "tid,duration"], MAIN),
            case(&["--flat"], How::Flat),
            case(&["--tid", last_tid], START),
            case(&["--tid", last_tid], How::Whole),
            case(&["--task-newline"], MAIN),
            case(&["--column-view"], MAIN),
            case(&["--demangle=full"], MAIN),
            case(&["--demangle=no"], MAIN),
            case(&["--no-args"], MAIN),
        ],
        other => panic!("unknown family {other}"),
    }
}

type Replay = fn(&Path, &[&str]) -> Output;

/// Records `scenario` with uftrace and compares `replay` (utrace normally) with `uftrace replay`
/// on every case; returns the failure reports and the number of cases.
fn compare(scenario: &Scenario, families: &[&str], replay: Replay) -> (Vec<String>, usize) {
    let prog = util::testprog(scenario.prog, scenario.mode);
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = tmp.path().join("data");
    util::uftrace_record(&data, scenario.record, &prog, scenario.args);

    let plain = util::uftrace_replay(&data, &[]);
    let tids = normalize::tids(&plain.stdout);
    let last_tid = tids.last().cloned().unwrap_or_else(|| "0".to_string());

    let cases: Vec<Case> = families
        .iter()
        .flat_map(|name| family(name, &scenario.funcs, &last_tid))
        .collect();
    let mut failures = Vec::new();
    for case in &cases {
        let opts: Vec<&str> = case.opts.iter().map(String::as_str).collect();
        let expected = util::uftrace_replay(&data, &opts);
        let actual = replay(&data, &opts);
        if let Some(report) = mismatch(scenario.prog, case, &expected, &actual) {
            failures.push(report);
        }
    }
    if !failures.is_empty() {
        keep_on_failure(tmp);
    }
    (failures, cases.len())
}

/// With `UTRACE_KEEP_DATA=1`, a failing test leaves its recorded data behind for debugging.
fn keep_on_failure(tmp: tempfile::TempDir) {
    if std::env::var("UTRACE_KEEP_DATA").as_deref() == Ok("1") {
        eprintln!("keeping {}", tmp.keep().display());
    }
}

fn normalized(output: &str, how: How) -> String {
    match how {
        How::Task(anchor) => normalize::by_task(output, anchor),
        How::Whole => normalize::whole(output),
        How::Flat => normalize::flat(output),
        How::Header => {
            let header = output.lines().any(|l| l.starts_with('#'));
            format!("header: {header}\n{}", normalize::whole(output))
        }
    }
}

/// Differences the replay implementation chose not to reproduce (uftrace bugs): program, the
/// replay options joined by spaces, and why. Such cases are reported on stderr but do not fail.
const KNOWN_DIFFERENCES: &[(&str, &str, &str)] = &[
    // uftrace 0.13 applies -Z at analysis time by dropping the small functions' records before
    // its call stack sees them: a fork child then shows `} /* main */` for its inherited
    // frames, and a longjmp over a dropped frame gives `_setjmp` a duration of 15 hours.
    // utrace hides them as -H does, their time counted as their caller's own.
    ("fork", "-Z 30", "uftrace drops -Z records before pairing"),
    (
        "fork",
        "-Z 30 -T child_work@size=10",
        "uftrace drops -Z records before pairing",
    ),
    (
        "fork",
        "-Z 40 -D 2",
        "uftrace drops -Z records before pairing",
    ),
    (
        "longjmp",
        "-Z 30 -T middle@size=10",
        "uftrace drops -Z records before pairing (a 15 h _setjmp)",
    ),
    // --libname where a library both defines a function and imports it through its own PLT
    // (libstdc++'s `std::runtime_error::runtime_error`): which of the two uftrace 0.13's lookup
    // finds, and so whether it names the library, could not be derived for every name (see
    // `Symbolizer::library_of`); `record_libcalls::library_names_match_uftrace` checks a
    // library of our own.
    (
        "cxx",
        "--libname",
        "uftrace's choice between a definition and an import of one name",
    ),
    // uftrace 0.13 runs C names through the C++ demangler, which reads one-letter names as
    // builtin type codes (`b` -> `bool`, `c` -> `char`); utrace leaves unmangled names alone.
    (
        "abc",
        "--demangle=full",
        "uftrace demangles C names as type codes",
    ),
    // Full demangling comes from the cpp_demangle crate, whose text differs from libiberty's
    // in corner cases (a template constructor's first parameter, the return type of the
    // function enclosing a local class). Simple mode, uftrace's default, is identical.
    (
        "cxx",
        "--demangle=full",
        "cpp_demangle and libiberty differ in corner cases",
    ),
    (
        "cxx",
        "--demangle=full -F main -D 2",
        "cpp_demangle and libiberty differ in corner cases",
    ),
    // -C across a longjmp: uftrace stops showing the path at the jump; utrace keeps the
    // functions that were entered before it.
    ("longjmp", "-C thrower", "caller filter across longjmp"),
    (
        "longjmp",
        "-T thrower@caller",
        "caller filter across longjmp",
    ),
];

fn mismatch(prog: &str, case: &Case, expected: &Output, actual: &Output) -> Option<String> {
    let how = case.how;
    let label = format!("{prog}: replay {} ({how:?})", case.opts.join(" "));
    let mut problems = Vec::new();
    if actual.stderr.contains("panicked") {
        problems.push(format!("utrace panicked:\n{}", actual.stderr));
    }
    if expected.status.code() != actual.status.code() {
        problems.push(format!(
            "exit status: uftrace {}, utrace {}",
            expected.status, actual.status
        ));
    }
    let want = normalized(&expected.stdout, how);
    let got = normalized(&actual.stdout, how);
    if want != got {
        problems.push(format!(
            "output differs (- uftrace, + utrace):\n{}",
            normalize::diff(&want, &got)
        ));
    }
    if problems.is_empty() {
        return None;
    }
    let opts = case.opts.join(" ");
    if let Some((_, _, why)) = KNOWN_DIFFERENCES
        .iter()
        .find(|(p, o, _)| *p == prog && *o == opts)
    {
        eprintln!("known difference, ignored ({why}): {label}");
        return None;
    }
    Some(format!(
        "=== {label}\n$ {}\n{}\n--- utrace stderr:\n{}",
        actual.command,
        problems.join("\n"),
        actual.stderr
    ))
}

fn check(test: &str, scenario: &Scenario, families: &[&str]) {
    if !util::need_uftrace(test) {
        return;
    }
    let (failures, total) = compare(scenario, families, util::utrace_replay);
    assert!(
        failures.is_empty(),
        "{test}: {} of {total} replay cases differ from uftrace\n\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// Builds `mod NAME { #[test] fn FAMILY() ... }` for each scenario.
macro_rules! scenarios {
    ($($name:ident: $scenario:expr => [$($family:ident),* $(,)?];)*) => {$(
        mod $name {
            use super::*;
            $(
                #[test]
                fn $family() {
                    check(
                        concat!(stringify!($name), "::", stringify!($family)),
                        &$scenario,
                        &[stringify!($family)],
                    );
                }
            )*
        }
    )*};
}

const ALL: &[&str] = &["basic", "filters", "triggers", "fields"];

const ABC: Funcs = Funcs {
    outer: "a",
    mid: "b",
    leaf: "c",
    glob: "?",
};
const FIB: Funcs = Funcs {
    outer: "fib",
    mid: "fib",
    leaf: "fib",
    glob: "f*",
};

const fn pg(prog: &'static str, funcs: Funcs) -> Scenario {
    Scenario {
        prog,
        mode: Mode::Pg,
        record: &[],
        args: &[],
        funcs,
    }
}

scenarios! {
    abc: pg("abc", ABC) => [basic, filters, triggers, fields];
    abc_fentry: Scenario { mode: Mode::Fentry, ..pg("abc", ABC) } => [basic, filters, triggers, fields];
    abc_cyg: Scenario { mode: Mode::Cyg, ..pg("abc", ABC) } => [basic, filters, triggers, fields];
    fib: pg("fib", FIB) => [basic, filters, triggers, fields];
    fib_fentry: Scenario { mode: Mode::Fentry, ..pg("fib", FIB) } => [basic, filters, triggers, fields];
    fib_cyg: Scenario { mode: Mode::Cyg, ..pg("fib", FIB) } => [basic, filters, triggers, fields];
    fib_args: Scenario {
        record: &["-A", "fib@arg1", "-R", "fib@retval"],
        args: &["6"],
        ..pg("fib", FIB)
    } => [basic, filters, triggers, fields];
    args: pg("args", ARGS) => [basic, filters, triggers, fields];
    args_specs: Scenario { record: ARG_SPECS, ..pg("args", ARGS) } => [basic, filters, fields];
    args_auto: Scenario { record: &["-a"], ..pg("args", ARGS) } => [basic, fields];
    thread: pg("thread", Funcs { outer: "worker", mid: "step", leaf: "tiny", glob: "pthread_*" })
        => [basic, filters, triggers, fields];
    fork: pg("fork", Funcs { outer: "child_work", mid: "child_work", leaf: "leaf", glob: "*work" })
        => [basic, filters, triggers, fields];
    exec: pg("exec", Funcs { outer: "before_exec", mid: "after_exec", leaf: "strcmp", glob: "*_exec" })
        => [basic, filters, triggers, fields];
    longjmp: pg("longjmp", Funcs { outer: "outer", mid: "middle", leaf: "thrower", glob: "*jmp" })
        => [basic, filters, triggers, fields];
    signal: pg("signal", Funcs { outer: "work", mid: "on_signal", leaf: "leaf", glob: "handler*" })
        => [basic, filters, triggers, fields];
    libcall: pg("libcall", Funcs { outer: "copy_and_print", mid: "copy_and_print", leaf: "printf", glob: "str*" })
        => [basic, filters, triggers, fields];
    exit: pg("exit", Funcs { outer: "outer", mid: "inner", leaf: "finish", glob: "*er" })
        => [basic, filters, triggers, fields];
    sleep: pg("sleep", SLEEP) => [basic, filters, triggers, fields];
    sleep_record_time_filter: Scenario { record: &["-t", "1ms"], ..pg("sleep", SLEEP) } => [basic];
    cxx: pg("cxx", CXX) => [basic, filters, triggers, fields];
}

const ARGS: Funcs = Funcs {
    outer: "mixed",
    mid: "mixed",
    leaf: "strlen",
    glob: "s*",
};
const SLEEP: Funcs = Funcs {
    outer: "slow",
    mid: "slow",
    leaf: "usleep",
    glob: "q*",
};
const CXX: Funcs = Funcs {
    outer: "risky",
    mid: "deeper",
    leaf: "shapes::Square::area",
    glob: "shapes::*",
};

/// One explicit `-A`/`-R` spec per argument kind in args.c.
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

/// Program-specific cases beyond the families.
mod extra {
    use super::*;

    fn check_cases(test: &str, scenario: &Scenario, cases: Vec<Case>) {
        if !util::need_uftrace(test) {
            return;
        }
        let prog = util::testprog(scenario.prog, scenario.mode);
        let tmp = tempfile::tempdir().expect("tempdir");
        let data = tmp.path().join("data");
        util::uftrace_record(&data, scenario.record, &prog, scenario.args);
        let total = cases.len();
        let failures: Vec<String> = cases
            .iter()
            .filter_map(|case| {
                let opts: Vec<&str> = case.opts.iter().map(String::as_str).collect();
                mismatch(
                    scenario.prog,
                    case,
                    &util::uftrace_replay(&data, &opts),
                    &util::utrace_replay(&data, &opts),
                )
            })
            .collect();
        if !failures.is_empty() {
            keep_on_failure(tmp);
        }
        assert!(
            failures.is_empty(),
            "{test}: {} of {total} replay cases differ from uftrace\n\n{}",
            failures.len(),
            failures.join("\n")
        );
    }

    #[test]
    fn sleep_time_filters() {
        check_cases(
            "extra::sleep_time_filters",
            &pg("sleep", SLEEP),
            vec![
                case(&["-t", "1ms"], MAIN),
                case(&["-t", "1ms"], How::Whole),
                case(&["-t", "500us", "--no-libcall"], MAIN),
                case(&["-T", "main@time=1ms"], MAIN),
                case(&["-t", "1ms", "-T", "quick@trace"], MAIN),
            ],
        );
    }

    #[test]
    fn cxx_names() {
        check_cases(
            "extra::cxx_names",
            &pg("cxx", CXX),
            vec![
                case(&["-H", "^std::"], MAIN),
                case(&["-N", "^std::"], MAIN),
                case(&["-F", "shapes::Square::area"], START),
                case(&["--demangle=full", "-F", "main", "-D", "2"], MAIN),
                case(&["--demangle=no", "-N", "^_ZNSt"], MAIN),
                case(&["--match=glob", "-N", "std::*"], MAIN),
                case(&["-T", "deeper@backtrace"], MAIN),
                case(&["-C", "shapes::twice"], MAIN),
            ],
        );
    }

    #[test]
    fn fib_args_filters() {
        check_cases(
            "extra::fib_args_filters",
            &Scenario {
                record: &["-A", "fib@arg1", "-R", "fib@retval"],
                args: &["6"],
                ..pg("fib", FIB)
            },
            vec![
                case(&["-F", "fib", "-D", "2"], START),
                case(&["--no-args", "-D", "3"], MAIN),
                case(&["-N", "fib", "-f", "none"], MAIN),
            ],
        );
    }
}

/// The harness checked against itself: uftrace replay compared with uftrace replay must never
/// differ, and the comparison must see real trace lines (not two empty outputs).
#[test]
fn harness_self_test() {
    if !util::need_uftrace("replay_diff::harness_self_test") {
        return;
    }
    for scenario in [
        pg("abc", ABC),
        pg(
            "fork",
            Funcs {
                outer: "child_work",
                mid: "child_work",
                leaf: "leaf",
                glob: "*work",
            },
        ),
        pg(
            "thread",
            Funcs {
                outer: "worker",
                mid: "step",
                leaf: "tiny",
                glob: "pthread_*",
            },
        ),
    ] {
        let (failures, total) = compare(&scenario, ALL, util::uftrace_replay);
        assert!(total > 40, "{}: only {total} cases", scenario.prog);
        assert!(
            failures.is_empty(),
            "uftrace differs from itself:\n{}",
            failures.join("\n")
        );
    }

    // The normalised plain replay of abc is the exact call tree.
    let prog = util::testprog("abc", Mode::Pg);
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = tmp.path().join("data");
    util::uftrace_record(&data, &[], &prog, &[]);
    let out = util::uftrace_replay(&data, &[]);
    assert_eq!(
        normalize::by_task(&out.stdout, Anchor::Main),
        "main() {\n  a() {\n    b() {\n      c() {\n        getpid();\n      } /* c */\n    } /* b */\n  } /* a */\n} /* main */\n"
    );
}
