//! Context switches (`perf-cpu*.dat`) in the analysis commands, against uftrace 0.13 on the
//! same data directory: `sleep.c` (a voluntary switch inside `usleep()`, every run) and
//! `thread.c` recorded once by each tool with scheduling events on, then every command of
//! [`CASES`] run by both tools on each directory, whole outputs compared (utrace with
//! `--tid-width=6`, uftrace's width). Pre-emptions differ between runs, not between the two
//! tools reading one directory.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::normalize;
use crate::util::{self, Mode};

/// (programs, command and options): `-d DIR` is added; `LAST` stands for the last task's
/// tid (a thread of `thread.c`).
const CASES: &[(&[&str], &[&str])] = &[
    // 1. --flat numbers the switches with the other records.
    (&["sleep", "thread"], &["replay", "--flat"]),
    (&["thread"], &["replay", "--flat", "--no-sched-preempt"]),
    (&["thread"], &["replay", "--flat", "--no-sched"]),
    // 2. Elapsed times count from the first switch-in when it is earlier than every function
    // record; an elapsed -r stop too, an elapsed start from the first function record.
    (
        &["sleep", "thread"],
        &["replay", "-f", "time,delta,elapsed,duration"],
    ),
    (&["sleep"], &["replay", "-f", "elapsed", "--no-sched"]),
    // (Ranges whose ends fall among the records depend on the run's pre-emptions.)
    (&["sleep", "thread"], &["replay", "-r", "~1s"]),
    (&["sleep"], &["replay", "-r", "1us~"]),
    (&["sleep"], &["replay", "-r", "1s~"]),
    (&["sleep"], &["report", "-r", "~1s"]),
    // 3. A switch the filters hide does not break a leaf...
    (&["sleep"], &["replay", "-N", "usleep"]),
    (&["sleep", "thread"], &["replay", "-D", "2"]),
    (&["sleep", "thread"], &["replay", "-F", "main", "-D", "2"]),
    (&["thread"], &["replay", "-N", "pthread_join"]),
    // 4. ... one --no-event or --no-sched hides does.
    (&["sleep", "thread"], &["replay", "--no-event"]),
    (&["sleep"], &["replay", "-f", "elapsed", "--no-event"]),
    (&["sleep", "thread"], &["replay", "--no-sched"]),
    // 5. dump: the perf events of the tasks --tid keeps, inside -r; --debug's hex lines.
    (&["thread"], &["dump", "--tid", "LAST"]),
    (&["sleep"], &["dump", "-r", "1us~"]),
    (&["sleep", "thread"], &["dump", "--debug"]),
    // 6. -Z: no switch line outside every shown call; a switch-out and its switch-in with
    // nothing shown between are one line.
    (&["sleep", "thread"], &["replay", "-Z", "60"]),
    // 7. --no-merge splits them; the address and module columns; colours.
    (&["sleep", "thread"], &["replay", "--no-merge"]),
    (
        &["sleep", "thread"],
        &["replay", "-f", "duration,tid,addr,module"],
    ),
    (&["sleep", "thread"], &["replay", "--color=yes"]),
    (
        &["thread"],
        &["replay", "--color=yes", "--no-merge", "-f", "addr,module"],
    ),
];

/// Runs `bin CMD OPTS -d DIR` and returns its stdout and stderr.
fn output(bin: &Path, args: &[&str], dir: &Path) -> String {
    let mut cmd = Command::new(bin);
    cmd.arg(args[0]).arg("--no-pager");
    if bin == util::utrace_bin() {
        cmd.arg("--tid-width=6");
    }
    cmd.args(&args[1..]).arg("-d").arg(dir);
    let out = util::run(cmd);
    if args.contains(&"--debug") {
        // The debug messages on stderr differ.
        return out.stdout;
    }
    format!("{}{}", out.stdout, out.stderr)
}

/// `prog` recorded by both tools with scheduling events on: (which, directory).
fn recordings(tmp: &Path, prog: &str) -> Vec<(&'static str, PathBuf)> {
    let exe = util::testprog(prog, Mode::Pg);
    [
        ("uftrace", util::uftrace_bin()),
        ("utrace", util::utrace_bin()),
    ]
    .into_iter()
    .map(|(who, bin)| {
        let dir = tmp.join(format!("{prog}-{who}"));
        let mut cmd = Command::new(bin);
        cmd.arg("record").arg("-d").arg(&dir).arg(&exe);
        util::run(cmd).assert_success();
        (who, dir)
    })
    .collect()
}

/// The tid of the last `TASK` line of `dir`'s `task.txt`.
fn last_tid(dir: &Path) -> String {
    let text = std::fs::read_to_string(dir.join("task.txt")).unwrap();
    text.lines()
        .filter(|l| l.starts_with("TASK"))
        .filter_map(|l| l.split("tid=").nth(1))
        .next_back()
        .map(|t| t.split_whitespace().next().unwrap_or("").to_string())
        .expect("a TASK line in task.txt")
}

#[test]
fn sched_events_in_every_command_as_uftrace() {
    if !util::need_uftrace("sched_events_in_every_command_as_uftrace") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let mut failures = Vec::new();
    for prog in ["sleep", "thread"] {
        let dirs = recordings(tmp.path(), prog);
        for (progs, args) in CASES.iter().filter(|c| c.0.contains(&prog)) {
            for (who, dir) in &dirs {
                let last = last_tid(dir);
                let args: Vec<&str> = args
                    .iter()
                    .map(|a| if *a == "LAST" { last.as_str() } else { a })
                    .collect();
                let args = &args[..];
                let want = output(&util::uftrace_bin(), args, dir);
                let got = output(&util::utrace_bin(), args, dir);
                if want != got {
                    failures.push(format!(
                        "{prog} ({who}'s data, of {progs:?}) {}:\n{}",
                        args.join(" "),
                        normalize::diff(&want, &got)
                    ));
                }
            }
        }
    }
    util::assert_no_failures(&failures);
}
