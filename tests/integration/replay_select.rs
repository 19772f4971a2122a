//! Replay-time argument selection (beyond uftrace, which ignores `-A`/`-R` at replay):
//! `utrace replay -A fib@arg1/x` shows only the named recorded items, in the formats asked
//! for, and says on stderr which named items were never recorded and how to record them.

use std::path::Path;
use std::process::Command;

use crate::util::{self, Mode};

/// `utrace record -d DIR OPTS EXE ARGS`, which must succeed.
fn record(dir: &Path, opts: &[&str], exe: &Path, args: &[&str]) {
    let mut cmd = Command::new(util::utrace_bin());
    // Without context switches: pre-emptions differ between the two recordings.
    cmd.args(["record", "--no-sched", "-d"])
        .arg(dir)
        .args(opts)
        .arg(exe)
        .args(args);
    util::run(cmd).assert_success();
}

/// What testprogs/args.c is recorded with: every function with arguments and a return value.
const RECORDED: &[&str] = &[
    "-A",
    "add_int@arg1,arg2",
    "-R",
    "add_int@retval",
    "-A",
    "twice_unsigned@arg1/u",
    "-R",
    "twice_unsigned@retval/u",
    "-A",
    "to_upper@arg1/c",
    "-R",
    "to_upper@retval/c",
    "-A",
    "pick@arg1/s,arg2/x",
    "-R",
    "pick@retval/s",
    "-A",
    "half@fparg1",
    "-R",
    "half@retval/f",
    "-A",
    "scale@fparg1/32,arg1/i32,fparg2/32",
    "-R",
    "scale@retval/f32",
    "-A",
    "sides@arg1/i32",
    "-R",
    "sides@retval/i32",
    "-A",
    "mixed@arg1/c,arg2/i32,fparg1,arg3/s,arg4/u",
    "-R",
    "mixed@retval/x",
    "-A",
    "sum8@arg1,arg7,arg8/i32",
    "-R",
    "sum8@retval/i16",
    "-A",
    "strlen@arg1/s",
    "-R",
    "strlen@retval/u",
    "-A",
    "six@arg2/i32,arg6,arg5/u,arg1/i8",
    "-R",
    "six@retval/i32",
];

/// A selection of every function of `RECORDED`: some items left out, some reordered, some in
/// another format or narrower, integers shown as enums and chars, regex patterns.
const SELECTED: &[&str] = &[
    "-A",
    "add_int@arg2/x",
    "-R",
    "add_int@retval/x",
    "-A",
    "twice_unsigned@arg1/x",
    "-R",
    "twice_unsigned@retval/x",
    "-A",
    "to_upper@arg1/c",
    "-R",
    "to_upper@retval/c",
    "-A",
    "pick@arg2/u",
    "-R",
    "pick@retval/s",
    "-A",
    "half@fparg1",
    "-R",
    "half@retval/f",
    "-A",
    "scale@fparg2/32",
    "-R",
    "scale@retval/f32",
    "-A",
    "sides@arg1/e:shape",
    "-R",
    "sides@retval/x8",
    "-A",
    "mixed@arg3/s,arg1/c,arg4/x",
    "-R",
    "mixed@retval/x",
    "-A",
    "^sum8$@arg8/i16,arg1",
    "-R",
    "sum8@retval/x16",
    "-A",
    "strlen@arg1/s",
    "-R",
    "strlen@retval/x",
    "-A",
    "six@arg6,arg1/i8",
    "-R",
    "six@retval/i32",
];

/// Replaying with a selection shows what recording with that selection shows, in every
/// build mode that records arguments.
#[test]
fn selection_shows_what_recording_it_shows() {
    for mode in [Mode::Pg, Mode::Fentry] {
        let exe = util::testprog("args", mode);
        let tmp = tempfile::tempdir().unwrap();
        let (all, some) = (tmp.path().join("all"), tmp.path().join("some"));
        record(&all, RECORDED, &exe, &[]);
        record(&some, SELECTED, &exe, &[]);
        let mut opts = vec!["-f", "none"];
        let want = util::utrace_replay(&some, &opts);
        want.assert_success();
        opts.extend(SELECTED);
        let got = util::utrace_replay(&all, &opts);
        got.assert_success();
        let (want_text, got_text) = (
            util::mask_addresses(&want.stdout),
            util::mask_addresses(&got.stdout),
        );
        assert!(want_text.contains("sides(TRIANGLE) = 0x3;"), "{want}");
        assert_eq!(
            want_text,
            got_text,
            "{mode:?}: replay -A of the full recording differs from the recording of the selection (- recorded, + selected):\n{}\n{got}",
            crate::normalize::diff(&want_text, &got_text)
        );
        assert!(
            got.stderr.trim().is_empty(),
            "every selected item was recorded:\n{got}"
        );
    }
}

/// Items never recorded, or recorded in a form that cannot be shown as asked, are named on
/// stderr with the record option that captures them; what was recorded still shows.
#[test]
fn unrecorded_items_are_reported() {
    let exe = util::testprog("fib", Mode::Pg);
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("data");
    record(&dir, &["-A", "fib@arg1"], &exe, &["5"]);
    let out = util::utrace_replay(
        &dir,
        &[
            "-A",
            "fib@arg2,arg1/x",
            "-R",
            "fib@retval",
            "-A",
            "main@arg1/s",
            "-A",
            "nosuch@arg1",
        ],
    );
    out.assert_success();
    assert!(out.stdout.contains("  fib(0x5) {\n"), "{out}");
    assert!(!out.stdout.contains(" = "), "{out}");
    for hint in [
        "arg2 of fib was not recorded: record with -A fib@arg2 to see it",
        "the return value of fib was not recorded: record with -R fib@retval to see it",
        "arg1 of main was not recorded: record with -A main@arg1/s to see it",
        "-A nosuch@arg1: no function matches nosuch",
    ] {
        assert!(out.stderr.contains(hint), "no `{hint}`:\n{out}");
    }
    // A format the recorded bytes cannot take.
    let out = util::utrace_replay(&dir, &["-A", "fib@arg1/s"]);
    out.assert_success();
    assert!(
        out.stderr.contains(
            "arg1 of fib was recorded as arg1, which cannot be shown as arg1/s: \
             record with -A fib@arg1/s to see it so"
        ),
        "{out}"
    );
    assert!(out.stdout.contains("  fib() {\n"), "{out}");
    // Other analysis commands that show arguments take the selection too.
    let mut cmd = Command::new(util::utrace_bin());
    cmd.args(["dump", "--chrome", "-A", "fib@arg1/x", "-d"])
        .arg(&dir);
    let out = util::run(cmd);
    out.assert_success();
    assert!(
        out.stdout.contains(r#""args":{"arguments":"(0x5)"}"#),
        "{out}"
    );
}

/// uftrace's own data takes a replay-time selection as well.
#[test]
fn selection_on_uftrace_data() {
    if !util::need_uftrace("selection_on_uftrace_data") {
        return;
    }
    let exe = util::testprog("fib", Mode::Pg);
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("uftrace.data");
    util::uftrace_record(&dir, &["-A", "fib@arg1", "-R", "fib@retval"], &exe, &["5"]);
    let out = util::utrace_replay(&dir, &["-A", "fib@arg1/x", "-R", "fib@retval/x"]);
    out.assert_success();
    assert!(out.stdout.contains("  fib(0x5) {\n"), "{out}");
    assert!(out.stdout.contains("} = 0x5; /* fib */"), "{out}");
    assert!(out.stderr.trim().is_empty(), "{out}");
}
