//! The record options turned into settings, checked: the environment variables they become,
//! the sizes they name and the warnings they earn.

use super::specs::trigger_specs;
use super::*;

#[test]
fn patch_options_keep_command_line_order() {
    let argv = [
        "utrace",
        "record",
        "-P",
        "a;b@libx",
        "-U",
        "b",
        "--patch=c",
        "prog",
    ];
    let argv = argv.iter().map(std::ffi::OsString::from).collect();
    let inv = crate::invocation::parse_command_line(argv, &mut Notices::silent()).unwrap();
    assert_eq!(patch_env(&inv).as_deref(), Some("+a;+b@libx;-b;+c"));
    let argv = ["utrace", "record", "prog"]
        .iter()
        .map(std::ffi::OsString::from);
    let inv = crate::invocation::parse_command_line(argv.collect(), &mut Notices::silent());
    assert_eq!(patch_env(&inv.unwrap()), None);
}

#[test]
fn sizes() {
    let mut n = Notices::silent();
    assert_eq!(parse_size("128K", &mut n), Some(128 * 1024));
    assert_eq!(parse_size("0x2000", &mut n), Some(8192));
    assert_eq!(parse_size("1m", &mut n), Some(1 << 20));
    assert_eq!(parse_size("010000", &mut n), Some(4096));
    assert_eq!(parse_size("5000", &mut n), Some(8192));
    assert_eq!(parse_size("x", &mut n), None);
    assert_eq!(
        n.stdout_lines(),
        [
            "Usage: buffer size should be multiple of page size",
            "Usage: invalid size: x"
        ]
    );
}

#[test]
fn trigger_actions_carry_argument_specs() {
    let t = |v: &[&str]| trigger_specs(&v.iter().map(|s| s.to_string()).collect::<Vec<_>>());
    assert_eq!(
        t(&["main@filter,depth=3,arg1"]),
        (vec!["main@arg1".to_string()], vec![])
    );
    assert_eq!(
        t(&["a@arg1/x,fparg2,retval/i32,depth=2;b@trace_on"]),
        (
            vec!["a@arg1/x,fparg2".to_string()],
            vec!["a@retval/i32".to_string()]
        )
    );
    assert_eq!(
        t(&["printf@trace-on,auto-args"]),
        (vec!["printf".to_string()], vec!["printf".to_string()])
    );
    assert_eq!(t(&["main@depth=1", "noat"]), (vec![], vec![]));
}

fn settings_of(words: &[&str]) -> (Settings, Notices) {
    let mut argv = vec![OsString::from("utrace")];
    argv.extend(words.iter().map(OsString::from));
    let mut n = Notices::silent();
    let inv = crate::invocation::parse_command_line(argv, &mut n).unwrap();
    (settings(&inv, &mut n).unwrap(), n)
}

fn var<'a>(s: &'a Settings, name: &str) -> Option<&'a str> {
    s.env
        .iter()
        .find(|(k, _)| k == name)
        .and_then(|(_, v)| v.to_str())
}

#[test]
fn options_become_the_env_contract() {
    let (s, n) = settings_of(&[
        "record",
        "-F",
        "main",
        "-N",
        "b",
        "-T",
        "c@depth=1",
        "-T",
        "d@trace_off",
        "-D",
        "3",
        "-t",
        "1.5us",
        "-b",
        "8k",
        "--max-stack=100",
        "--match=glob",
        "./x",
    ]);
    assert!(n.stdout_lines().is_empty(), "{:?}", n.stdout_lines());
    assert_eq!(
        var(&s, env::TRIGGER),
        Some("main@filter;b@notrace;c@depth=1;d@trace_off")
    );
    assert_eq!(var(&s, env::DEPTH), Some("3"));
    assert_eq!(var(&s, env::THRESHOLD), Some("1500"));
    assert_eq!(var(&s, env::BUFFER), Some("8192"));
    assert_eq!(var(&s, env::MAX_STACK), Some("100"));
    assert_eq!(var(&s, env::PATTERN), Some("glob"));
    assert_eq!(var(&s, env::PLTHOOK), Some("1"));
    assert_eq!(s.max_stack, 100);
    assert_eq!(s.time_filter.as_deref(), Some("1.5us"));

    let (s, _) = settings_of(&["record", "--no-libcall", "./x"]);
    assert_eq!(var(&s, env::PLTHOOK), None);
    assert_eq!(var(&s, env::TRIGGER), None);
    assert_eq!(var(&s, env::MAX_STACK), Some("1024"));
    assert!(!s.plthook);

    let (s, _) = settings_of(&[
        "record",
        "-H",
        "a@libx",
        "-C",
        "c",
        "-Z",
        "30",
        "--trace=off",
        "./x",
    ]);
    assert_eq!(var(&s, env::TRIGGER), Some("a@libx,hide;c@caller"));
    assert_eq!(var(&s, env::SIZE), Some("30"));
    assert_eq!(var(&s, env::TRACE_OFF), Some("1"));

    let (s, n) = settings_of(&["record", "--max-stack=0", "-D", "0", "./x"]);
    assert_eq!(s.max_stack, 1024);
    assert_eq!(var(&s, env::DEPTH), None);
    assert_eq!(
        n.stdout_lines(),
        [
            "Usage: max stack depth should be >0 and <65535",
            "Usage: invalid depth given: 0 (ignoring..)"
        ]
    );
}

#[test]
fn watch_points_and_user_events() {
    let (s, n) = settings_of(&[
        "record",
        "-W",
        "cpu",
        "-W",
        "var:x",
        "-E",
        "app:a,app:b",
        "-E",
        "c:.*",
        "./x",
    ]);
    assert_eq!(var(&s, env::WATCH), Some("cpu"));
    assert_eq!(s.user_events, ["app:a", "app:b", "c:.*"]);
    assert!(s.kernel_events.is_empty());
    assert_eq!(
        n.stderr_lines(),
        ["WARN: unknown watch point: 'var:x' (only 'cpu' is known)"]
    );
}
