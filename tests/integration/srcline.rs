//! Source locations against uftrace 0.13: `--srcline` and `-L LOC[@hide]`.
//!
//! `testprogs/srcline.c` has functions in several files and directories (`#line`), a library
//! call, and calls into its shared library `srcline_lib.c` (built with `-g`, named by its
//! absolute path). It is recorded with `--srcline` by uftrace and by utrace:
//!
//! * the `.dbg` files (`F:`/`L:` lines) of the program and the library are the same;
//! * `uftrace replay --srcline` of uftrace's data is what `utrace replay --srcline` prints of
//!   both recordings and `uftrace replay --srcline` of utrace's (per task, function column with
//!   the `/* file:line */` locations), in every build mode, and for the program built without
//!   `-g` (only the library's functions have locations then);
//! * `report --srcline`, `graph --srcline` (whole graph and `graph FUNC`), and both with `-L`,
//!   print what uftrace prints on the same data, whole outputs;
//! * `dump --chrome --srcline` is uftrace 0.13's output plus `"srcline":"file:line"` first in
//!   the `args` of each entry with a location (as uftrace 0.14+ writes it; 0.13 writes none);
//! * `-L` at replay (regex, directory words, `@hide`, a pattern that matches nothing) prints
//!   what uftrace prints on the same data, and `-L` at record records what uftrace records.

use crate::normalize::{by_task, diff, Anchor};
use crate::record_matrix::MODES;
use crate::util::{self, Mode};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Whether a test here records `prog` (see `record_matrix::every_testprog_is_recorded`).
pub fn covers(prog: &str) -> bool {
    prog == "srcline"
}

/// The library's `.dbg` file name.
const LIB_DBG: &str = "libsrcline_lib.so.dbg";

/// Location patterns at replay time: a regex on the file, directory words, `@hide`, one that
/// matches nothing (uftrace's `Usage:` notice, nothing filtered).
const REPLAY_LOCS: &[&[&str]] = &[
    &["srcline.c$"],
    &["srcline_lib.c$"],
    &["net"],
    &["proto/"],
    &["/net"],
    &["c"],
    &["srcline"],
    &["ui;"],
    &["window.c@hide"],
    &["net@hide"],
    &["net", "ui/window.c"],
    &["tcp.c@hide", "net"],
    // A caller of functions hidden by `@hide` (or, with `-F`, by no match) is no leaf.
    &["net@hide", "ui"],
    &["ui", "socket.c@hide"],
    &["socket.c@hide"],
    &["ui", "-F", "ui_draw"],
    &["ui", "-N", "tcp_send"],
    &["net", "tcp.c@hide"],
    &["nomatch.c"],
    &["nomatch.c", "-F", "main"],
];

/// Location patterns at record time.
const RECORD_LOCS: &[&str] = &[
    "srcline.c$",
    "net",
    "window.c@hide",
    "socket.c@hide",
    "srcline_lib.c$",
    "srcline",
    "nomatch.c",
];

/// uftrace's and utrace's recordings of `exe` with `opts`, in a fresh temporary directory.
struct Both {
    _tmp: tempfile::TempDir,
    theirs: PathBuf,
    ours: PathBuf,
}

fn record_both(exe: &Path, opts: &[&str]) -> Both {
    let tmp = tempfile::tempdir().unwrap();
    let theirs = tmp.path().join("theirs");
    let ours = tmp.path().join("ours");
    util::record_with(true, &theirs, exe, &[], opts).assert_success();
    util::record_with(false, &ours, exe, &[], opts).assert_success();
    Both {
        _tmp: tmp,
        theirs,
        ours,
    }
}

fn command(uftrace: bool, args: &[&str], dir: &Path) -> util::Output {
    let mut cmd = Command::new(if uftrace {
        util::uftrace_bin()
    } else {
        util::utrace_bin()
    });
    cmd.args(args).arg("-d").arg(dir).arg("--no-pager");
    util::run(cmd)
}

/// The `F:` and `L:` lines of a `.dbg` file (none when it is missing).
fn dbg_lines(path: &Path) -> String {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter(|l| l.starts_with("F: ") || l.starts_with("L: "))
        .map(|l| format!("{l}\n"))
        .collect()
}

/// Compares the replays (`opts` added) of both recordings by both tools with uftrace's
/// replay of its own; one message per difference.
fn compare_replays(what: &str, both: &Both, opts: &[&str], anchor: Anchor) -> Vec<String> {
    let mut args = vec!["replay"];
    args.extend_from_slice(opts);
    let want = command(true, &args, &both.theirs);
    let want_text = by_task(&want.stdout, anchor);
    let mut failures = Vec::new();
    if opts == ["--srcline"] && !want_text.contains("srcline_lib.c:") {
        failures.push(format!("{what}: uftrace shows no location:\n{want}"));
    }
    for (who, uftrace, dir) in [
        ("utrace replay of uftrace's data", false, &both.theirs),
        ("utrace replay of utrace's data", false, &both.ours),
        ("uftrace replay of utrace's data", true, &both.ours),
    ] {
        let out = command(uftrace, &args, dir);
        let got = by_task(&out.stdout, anchor);
        if got != want_text {
            failures.push(format!(
                "{what}: {who} differs from uftrace's replay of its own (-want +got):\n{}\n{out}",
                diff(&want_text, &got)
            ));
        }
    }
    failures
}

#[test]
fn dbg_files_match_uftrace() {
    if !util::need_uftrace("dbg_files_match_uftrace") {
        return;
    }
    let mut failures = Vec::new();
    for (exe, prog_has_lines) in [
        (util::testprog("srcline", Mode::Pg), true),
        (util::testprog_with("srcline", Mode::Pg, &["-g0"]), false),
    ] {
        let both = record_both(&exe, &["--srcline"]);
        let name = exe.file_name().unwrap().to_str().unwrap();
        for file in [format!("{name}.dbg"), LIB_DBG.to_string()] {
            let want = dbg_lines(&both.theirs.join(&file));
            let got = dbg_lines(&both.ours.join(&file));
            let expected_lines = prog_has_lines || file == LIB_DBG;
            if want.contains("L: ") != expected_lines {
                failures.push(format!("{file}: uftrace wrote unexpected lines:\n{want}"));
            }
            if want != got {
                failures.push(format!("{file} (-uftrace +utrace):\n{}", diff(&want, &got)));
            }
        }
    }
    util::assert_no_failures(&failures);
}

#[test]
fn replay_srcline_matches_uftrace() {
    if !util::need_uftrace("replay_srcline_matches_uftrace") {
        return;
    }
    let mut failures = Vec::new();
    for mode in MODES {
        let exe = util::testprog("srcline", mode);
        let both = record_both(&exe, &["--srcline"]);
        let what = format!("srcline ({})", mode.dir_name());
        failures.extend(compare_replays(&what, &both, &["--srcline"], Anchor::Main));
        failures.extend(compare_replays(
            &what,
            &both,
            &["--srcline", "--no-comment"],
            Anchor::Main,
        ));
    }
    // Built without -g: only the library's functions have a location.
    let exe = util::testprog_with("srcline", Mode::Pg, &["-g0"]);
    let both = record_both(&exe, &["--srcline"]);
    failures.extend(compare_replays(
        "srcline -g0",
        &both,
        &["--srcline"],
        Anchor::Main,
    ));
    util::assert_no_failures(&failures);
}

#[test]
fn report_graph_and_chrome_srcline_match_uftrace() {
    if !util::need_uftrace("report_graph_and_chrome_srcline_match_uftrace") {
        return;
    }
    let exe = util::testprog("srcline", Mode::Pg);
    let both = record_both(&exe, &["--srcline"]);
    let mut failures = Vec::new();
    for (who, dir) in [
        ("uftrace's data", &both.theirs),
        ("utrace's data", &both.ours),
    ] {
        for args in [
            &["report", "--srcline"][..],
            &["report", "--srcline", "-s", "call,func"],
            &["graph", "--srcline"],
            &["graph", "--srcline", "ui_draw"],
            &["report", "-L", "net@hide"],
            &["report", "--srcline", "-L", "ui"],
            &["graph", "-L", "socket.c@hide", "main"],
        ] {
            let want = command(true, args, dir);
            let got = command(false, args, dir);
            if !want.stdout.contains("[srcline.c:40]")
                && args[..2] == ["report", "--srcline"]
                && args.len() == 2
            {
                failures.push(format!(
                    "{args:?} on {who}: no location in uftrace's:\n{want}"
                ));
            }
            if want.stdout != got.stdout {
                failures.push(format!(
                    "{args:?} on {who} (-uftrace +utrace):\n{}\n{got}",
                    diff(&want.stdout, &got.stdout)
                ));
            }
        }
    }
    // Chrome: uftrace 0.13's JSON, with each entry's location first in its `args`.
    let want = command(true, &["dump", "--chrome", "--srcline"], &both.theirs);
    let got = command(false, &["dump", "--chrome", "--srcline"], &both.theirs);
    let without_version = |s: &str| -> String {
        s.lines()
            .filter(|l| !l.starts_with("\"version\":"))
            .map(|l| format!("{l}\n"))
            .collect()
    };
    let mut located = 0;
    let stripped: String = got
        .stdout
        .lines()
        .map(|l| {
            let Some(at) = l.find(",\"args\":{\"srcline\":\"") else {
                return format!("{l}\n");
            };
            located += 1;
            let rest = &l[at + 20..];
            let end = rest.find('"').unwrap_or(rest.len());
            let loc = &rest[..end];
            let after = &rest[end + 1..];
            if l.contains("\"name\":\"main\"") && loc != "srcline.c:40" {
                failures.push(format!("main's chrome location: {l}"));
            }
            match after.strip_prefix(',') {
                Some(more) => format!("{},\"args\":{{{more}\n", &l[..at]),
                None => format!("{}{}\n", &l[..at], &after[1..]),
            }
        })
        .collect();
    if located < 6 {
        failures.push(format!("{located} chrome entries with a location:\n{got}"));
    }
    if without_version(&want.stdout) != without_version(&stripped) {
        failures.push(format!(
            "dump --chrome --srcline without the locations (-uftrace +utrace):\n{}",
            diff(&without_version(&want.stdout), &without_version(&stripped))
        ));
    }
    util::assert_no_failures(&failures);
}

#[test]
fn loc_filters_at_replay_match_uftrace() {
    if !util::need_uftrace("loc_filters_at_replay_match_uftrace") {
        return;
    }
    let exe = util::testprog("srcline", Mode::Pg);
    let both = record_both(&exe, &["--srcline"]);
    let mut failures = Vec::new();
    for locs in REPLAY_LOCS {
        let mut opts = Vec::new();
        let mut rest = locs.iter();
        while let Some(&l) = rest.next() {
            if l.starts_with('-') {
                opts.push(l);
                opts.extend(rest.next());
            } else {
                opts.extend(["-L", l]);
            }
        }
        let what = format!("replay {}", opts.join(" "));
        failures.extend(compare_replays(&what, &both, &opts, Anchor::Start));
        opts.push("--srcline");
        failures.extend(compare_replays(&what, &both, &opts, Anchor::Start));
    }
    util::assert_no_failures(&failures);
}

#[test]
fn loc_filters_at_record_match_uftrace() {
    if !util::need_uftrace("loc_filters_at_record_match_uftrace") {
        return;
    }
    let exe = util::testprog("srcline", Mode::Pg);
    let mut failures = Vec::new();
    for loc in RECORD_LOCS {
        let both = record_both(&exe, &["-L", loc]);
        let what = format!("record -L {loc}");
        // -L implies --srcline: both recordings have the locations.
        failures.extend(compare_replays(&what, &both, &[], Anchor::Start));
        failures.extend(compare_replays(
            &what,
            &both,
            &["--srcline", "-D", "9"],
            Anchor::Start,
        ));
    }
    util::assert_no_failures(&failures);
}
