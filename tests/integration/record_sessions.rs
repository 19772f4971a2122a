//! Tasks and sessions of programs that exec (issue 17): `exec` execs itself (one task, two
//! sessions), `vfork` has a vfork child that execs (two tasks, the child's FORK then its own
//! session), `spawn` runs itself twice with `posix_spawn` (three tasks, three sessions).
//!
//! Each is recorded by `utrace record` and `uftrace record --no-event` with library calls on,
//! in every build mode. Between uftrace's data and utrace's, with the TIDs replaced by their
//! position in `task.txt` (`T0`, `T1`…) and times, sizes and session ids dropped:
//!
//! - `replay --tid TID`, for each task, prints the same function column (by both tools on
//!   utrace's data, against `uftrace replay` on uftrace's);
//! - `info --task` lists the same tasks with the same flags and names;
//! - `info`'s process lines (number of tasks, task list, exe image, exit status) are the same;
//! - `report --task` lists the same tasks with the same number of functions;
//! - `task.txt` holds the same SESS, TASK and FORK lines.

use std::path::Path;
use std::process::Command;

use crate::normalize::{self, Anchor};
use crate::record_matrix::{recorded_tids, MODES};
use crate::util::{self, Mode, Output};

/// The programs, each run without arguments.
const PROGS: &[&str] = &["exec", "vfork", "spawn"];

/// Whether a test here records `prog` (see `record_matrix::every_testprog_is_recorded`).
pub fn covers(prog: &str) -> bool {
    PROGS.contains(&prog)
}

/// The distinct TIDs of a data directory, in `task.txt` order.
fn tids(dir: &Path) -> Vec<String> {
    let mut tids: Vec<String> = Vec::new();
    for tid in recorded_tids(dir) {
        if !tids.contains(&tid) {
            tids.push(tid);
        }
    }
    tids
}

/// `text` with each of `tids` (a whole number, not part of a longer one) written `T<index>`.
fn mask_tids(text: &str, tids: &[String]) -> String {
    let mut out = String::with_capacity(text.len());
    let mut word = String::new();
    let flush = |word: &mut String, out: &mut String| {
        match tids.iter().position(|t| t == word) {
            Some(i) => out.push_str(&format!("T{i}")),
            None => out.push_str(word),
        }
        word.clear();
    };
    for c in text.chars() {
        if c.is_ascii_digit() {
            word.push(c);
        } else {
            flush(&mut word, &mut out);
            out.push(c);
        }
    }
    flush(&mut word, &mut out);
    out
}

/// `utrace CMD` or `uftrace CMD` on `dir` with `opts`.
fn analyse(uftrace: bool, cmd: &str, dir: &Path, opts: &[&str]) -> Output {
    let mut command = Command::new(if uftrace {
        util::uftrace_bin()
    } else {
        util::utrace_bin()
    });
    command.arg(cmd).arg("-d").arg(dir);
    if cmd != "info" {
        command.arg("--no-pager");
    }
    command.args(opts);
    util::run(command)
}

/// `info --task` rows as `FLAGS TID TASK` (no timestamp, no size).
fn info_tasks(out: &str, tids: &[String]) -> String {
    out.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let words: Vec<&str> = l.split_whitespace().collect();
            // TIMESTAMP FLAGS [ TID] TASK SIZE MB
            let open = words.iter().position(|w| w.starts_with('['))?;
            let flags = words[1..open].join(" ");
            let rest = words[open..].join(" ");
            let (tid, rest) = rest.trim_start_matches('[').split_once(']')?;
            let task = rest.split_whitespace().next().unwrap_or_default();
            Some(format!("{flags} {} {task}\n", tid.trim()))
        })
        .map(|row| mask_tids(&row, tids))
        .collect()
}

/// `info`'s process lines that do not hold times or machine state.
fn info_process(out: &str, tids: &[String]) -> String {
    let keep = ["number of tasks", "task list", "exe image", "exit status"];
    out.lines()
        .filter(|l| keep.iter().any(|k| l.starts_with(&format!("# {k}"))))
        .map(|l| format!("{}\n", mask_tids(l, tids)))
        .collect()
}

/// `report --task` rows as `TID NUM-FUNCS TASK`, sorted by TID position (the rows are in
/// order of total time).
fn report_tasks(out: &str, tids: &[String]) -> String {
    let mut rows: Vec<String> = out
        .lines()
        .filter_map(|l| {
            let words: Vec<&str> = l.split_whitespace().collect();
            // TOTAL UNIT SELF UNIT TID NUM TASK
            if words.len() < 7 || !words[4].bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            Some(mask_tids(
                &format!("{} {} {}", words[4], words[5], words[6..].join(" ")),
                tids,
            ))
        })
        .collect();
    rows.sort();
    rows.iter().map(|r| format!("{r}\n")).collect()
}

/// `task.txt` as `KIND pid=.. tid=.. ppid=.. exename=..` lines, TIDs masked, times and
/// session ids dropped, in the file's order.
fn task_file(dir: &Path, tids: &[String]) -> String {
    let text = std::fs::read_to_string(dir.join("task.txt")).unwrap_or_default();
    text.lines()
        .map(|l| {
            let kept: Vec<&str> = l
                .split(' ')
                .filter(|w| !w.starts_with("timestamp=") && !w.starts_with("sid="))
                .collect();
            format!("{}\n", mask_tids(&kept.join(" "), tids))
        })
        .collect()
}

/// Reduces an analysis command's output, TIDs masked by their position in the list.
type Reduce = fn(&str, &[String]) -> String;

fn compare(prog: &str, mode: Mode) -> Vec<String> {
    let what = format!("{prog} [{}]", mode.dir_name());
    let exe = util::testprog(prog, mode);
    let tmp = tempfile::tempdir().unwrap();
    let theirs = tmp.path().join("uftrace.data");
    let ours = tmp.path().join("utrace.data");
    let reference = util::record_with(true, &theirs, &exe, &[], &[]);
    let recorded = util::record_with(false, &ours, &exe, &[], &[]);
    let mut failures = Vec::new();
    if recorded.status.code() != reference.status.code() {
        failures.push(format!(
            "{what}: utrace exited with {}, uftrace with {}:\n{recorded}",
            recorded.status, reference.status
        ));
    }
    let (their_tids, our_tids) = (tids(&theirs), tids(&ours));
    if their_tids.len() != our_tids.len() {
        failures.push(format!(
            "{what}: {} tasks in utrace's task.txt, {} in uftrace's",
            our_tids.len(),
            their_tids.len()
        ));
        return failures;
    }
    let mut check = |view: &str, want: String, got: String, out: &Output| {
        if want.is_empty() {
            failures.push(format!(
                "{what}: {view}: nothing to compare in uftrace's data"
            ));
        } else if want != got {
            failures.push(format!(
                "{what}: {view} differs (- uftrace's data, + utrace's):\n{}\n{out}",
                normalize::diff(&want, &got)
            ));
        }
    };

    // Whether a leaf prints as `f();` depends on the other tasks' records between its entry
    // and exit (see `record_matrix::Norm::FoldLeaves`).
    let reduce = |out: &str| normalize::fold_leaves(&normalize::by_task(out, Anchor::Start));
    for (theirs_tid, ours_tid) in their_tids.iter().zip(&our_tids) {
        let want = reduce(&util::uftrace_replay(&theirs, &["--tid", theirs_tid]).stdout);
        for uftrace in [true, false] {
            let out = analyse(uftrace, "replay", &ours, &["--tid", ours_tid]);
            let view = format!("replay --tid (task {ours_tid}) by {}", who(uftrace));
            check(&view, want.clone(), reduce(&out.stdout), &out);
        }
    }
    let views: [(&str, &[&str], Reduce); 3] = [
        ("info", &[], info_process),
        ("info", &["--task"], info_tasks),
        ("report", &["--task"], report_tasks),
    ];
    for (cmd, opts, reduce) in views {
        let want = reduce(&analyse(true, cmd, &theirs, opts).stdout, &their_tids);
        for uftrace in [true, false] {
            let out = analyse(uftrace, cmd, &ours, opts);
            let view = format!("{cmd} {} by {}", opts.join(" "), who(uftrace));
            check(&view, want.clone(), reduce(&out.stdout, &our_tids), &out);
        }
    }
    check(
        "task.txt",
        task_file(&theirs, &their_tids),
        task_file(&ours, &our_tids),
        &recorded,
    );
    failures
}

fn who(uftrace: bool) -> &'static str {
    if uftrace {
        "uftrace"
    } else {
        "utrace"
    }
}

#[test]
fn exec_sessions_match_uftrace() {
    if !util::need_uftrace("exec_sessions_match_uftrace") {
        return;
    }
    let mut failures = Vec::new();
    for prog in PROGS {
        for mode in MODES {
            failures.extend(compare(prog, mode));
        }
    }
    util::assert_no_failures(&failures);
}
