//! Scheduling events recorded by `utrace record` (`perf-cpu*.dat`, data-format §10), against
//! uftrace 0.13's own recordings of the same program.
//!
//! `sleep.c` sleeps 2 ms in `usleep()`: a voluntary context switch inside it, every run. Both
//! tools record it with their scheduling events on; `uftrace replay --no-sched-preempt` of
//! either data directory must show the same function column, `/* linux:schedule */` line
//! included (pre-emptions depend on the machine's load and are left out; a sleep that takes
//! several switches shows as one line). utrace's report shows the `linux:schedule` row as
//! uftrace's report of the same data does; `--no-sched` records task events only,
//! `--no-event` none (both as uftrace 0.13). The program's threads and forked children are
//! seen (the events are inherited), and so is a `--keep-pid` program.

use std::path::Path;
use std::process::Command;

use crate::normalize::{self, Anchor};
use crate::util::{self, Mode, Output};

const SCHEDULE: &str = "/* linux:schedule */";

/// `TOOL record OPTS -d DIR PROG` with scheduling events on.
fn record(uftrace: bool, dir: &Path, opts: &[&str], prog: &Path) -> Output {
    let bin = if uftrace {
        util::uftrace_bin()
    } else {
        util::utrace_bin()
    };
    let mut cmd = Command::new(bin);
    cmd.arg("record").args(opts).arg("-d").arg(dir).arg(prog);
    let out = util::run(cmd);
    out.assert_success();
    out
}

/// uftrace's replay of `dir` without pre-emptions, by task, runs of schedule lines folded.
fn voluntary(dir: &Path) -> String {
    let out = util::uftrace_replay(dir, &["--no-sched-preempt"]);
    out.assert_success();
    let text = normalize::by_task(&out.stdout, Anchor::Main);
    let mut folded = String::new();
    let mut last = "";
    for line in text.lines() {
        if !(line.trim() == SCHEDULE && last.trim() == SCHEDULE) {
            folded.push_str(line);
            folded.push('\n');
        }
        last = line;
    }
    folded
}

/// The `[event]` names of `uftrace dump` of `dir` (the perf events, decoded by uftrace).
fn dumped_events(dir: &Path) -> Vec<String> {
    let mut cmd = Command::new(util::uftrace_bin());
    cmd.args(["dump", "--no-pager", "-d"]).arg(dir);
    let out = util::run(cmd);
    out.assert_success();
    out.stdout
        .lines()
        .filter(|l| l.contains("[event] linux:"))
        .filter_map(|l| l.split("[event] ").nth(1))
        .map(|e| e.to_string())
        .collect()
}

fn perf_files(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("perf-cpu") && n.ends_with(".dat"))
        .collect();
    names.sort();
    names
}

#[test]
fn sched_events_replay_as_uftrace_records_them() {
    if !util::need_uftrace("sched_events_replay_as_uftrace_records_them") {
        return;
    }
    let exe = util::testprog("sleep", Mode::Pg);
    let tmp = tempfile::tempdir().unwrap();
    let (ours, theirs) = (tmp.path().join("ours"), tmp.path().join("theirs"));
    record(false, &ours, &[], &exe);
    record(true, &theirs, &[], &exe);
    assert_eq!(perf_files(&ours), perf_files(&theirs));
    let (got, want) = (voluntary(&ours), voluntary(&theirs));
    assert!(
        want.contains(&format!("    {SCHEDULE}\n")),
        "uftrace saw no switch in usleep:\n{want}"
    );
    assert_eq!(got, want, "{}", normalize::diff(&want, &got));
}

#[test]
fn report_shows_the_schedule_row() {
    if !util::need_uftrace("report_shows_the_schedule_row") {
        return;
    }
    let exe = util::testprog("sleep", Mode::Pg);
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("data");
    record(false, &dir, &[], &exe);
    let rows = |bin: &Path| {
        let mut cmd = Command::new(bin);
        cmd.args(["report", "--no-pager", "-s", "func", "-d"])
            .arg(&dir);
        let out = util::run(cmd);
        out.assert_success();
        out.stdout
            .lines()
            .filter_map(|l| l.split("  ").last().map(|f| f.trim().to_string()))
            .filter(|f| f.starts_with("linux:schedule"))
            .collect::<Vec<_>>()
    };
    let ours = rows(&util::utrace_bin());
    assert!(ours.contains(&"linux:schedule".to_string()), "{ours:?}");
    assert_eq!(ours, rows(&util::uftrace_bin()));
}

#[test]
fn no_sched_and_no_event() {
    if !util::need_uftrace("no_sched_and_no_event") {
        return;
    }
    let exe = util::testprog("sleep", Mode::Pg);
    let tmp = tempfile::tempdir().unwrap();
    // --no-sched: the files, with task names and exits only (as uftrace 0.13 writes them).
    let dir = tmp.path().join("no-sched");
    record(false, &dir, &["--no-sched"], &exe);
    assert!(!perf_files(&dir).is_empty());
    let events = dumped_events(&dir);
    assert!(
        events.iter().any(|e| e.starts_with("linux:task-exit")),
        "{events:?}"
    );
    assert!(
        !events.iter().any(|e| e.starts_with("linux:sched")),
        "{events:?}"
    );
    assert!(!voluntary(&dir).contains("linux:schedule"));
    // --no-event: nothing at all, and no PERF_EVENT feature.
    let dir = tmp.path().join("no-event");
    record(false, &dir, &["--no-event"], &exe);
    assert!(perf_files(&dir).is_empty());
    assert!(dumped_events(&dir).is_empty());
}

/// The events follow the program's threads and forked children: each task of `task.txt`
/// exits in the perf data, as in uftrace's.
#[test]
fn threads_and_children_are_followed() {
    if !util::need_uftrace("threads_and_children_are_followed") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    for prog in ["thread", "fork"] {
        let exe = util::testprog(prog, Mode::Pg);
        let mut counts = Vec::new();
        for uftrace in [false, true] {
            let dir = tmp.path().join(format!("{prog}-{uftrace}"));
            record(uftrace, &dir, &[], &exe);
            let events = dumped_events(&dir);
            // `info --task` times each task from its first scheduling event when that comes
            // before its TASK line, as uftrace does.
            let info = |bin: &Path, opts: &[&str]| {
                let mut cmd = Command::new(bin);
                cmd.args(["info", "--task"]).args(opts).arg("-d").arg(&dir);
                util::run(cmd).stdout
            };
            let (ours, theirs) = (
                info(&util::utrace_bin(), &["--tid-width=6"]),
                info(&util::uftrace_bin(), &[]),
            );
            assert_eq!(ours, theirs, "{prog}: info --task");
            let count = |name: &str| events.iter().filter(|e| e.starts_with(name)).count();
            counts.push((
                count("linux:task-name"),
                count("linux:task-new"),
                count("linux:task-exit"),
            ));
        }
        assert_eq!(counts[0], counts[1], "{prog}: (utrace, uftrace)");
        assert!(counts[0].2 >= 2, "{prog}: {counts:?}");
    }
}

#[test]
fn keep_pid_records_sched_events() {
    if !util::need_uftrace("keep_pid_records_sched_events") {
        return;
    }
    let exe = util::testprog("sleep", Mode::Pg);
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("kept");
    record(false, &dir, &["--keep-pid"], &exe);
    let text = voluntary(&dir);
    assert!(text.contains(&format!("    {SCHEDULE}\n")), "{text}");
}

/// `utrace replay` shows the context switches as `uftrace replay` does on the same data,
/// uftrace's and ours, pre-emptions and split `sched-out`/`sched-in` pairs included: the whole
/// function column, and the `linux:schedule` durations (`--no-sched` and `--no-sched-preempt`
/// too). Programs: a sleep and threads. (Not fork: given perf data, uftrace 0.13 gives a
/// forked child's inherited calls stale durations; see `graph_sched`'s KNOWN_DIFFERENCES.)
#[test]
fn replay_shows_context_switches_as_uftrace() {
    if !util::need_uftrace("replay_shows_context_switches_as_uftrace") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let mut failures = Vec::new();
    for prog in ["sleep", "thread"] {
        let exe = util::testprog(prog, Mode::Pg);
        for uftrace in [true, false] {
            let dir = tmp.path().join(format!("{prog}-{uftrace}"));
            record(uftrace, &dir, &[], &exe);
            for opts in [&[][..], &["--no-sched"], &["--no-sched-preempt"]] {
                // The time column too: the schedule lines carry their durations.
                let strip = |text: &str| -> String {
                    text.lines()
                        .skip_while(|l| l.starts_with('#'))
                        .map(|l| {
                            let (head, func) = l.split_once(" | ").unwrap_or(("", l));
                            let dur = head.split('[').next().unwrap_or("").trim();
                            format!("{dur} | {func}\n")
                        })
                        .collect()
                };
                let want = strip(&util::uftrace_replay(&dir, opts).stdout);
                let got = strip(&util::utrace_replay(&dir, opts).stdout);
                if want != got {
                    failures.push(format!(
                        "{prog} (recorded by {}) replay {}:\n{}",
                        if uftrace { "uftrace" } else { "utrace" },
                        opts.join(" "),
                        normalize::diff(&want, &got)
                    ));
                }
            }
        }
    }
    util::assert_no_failures(&failures);
}
