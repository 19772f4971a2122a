//! Record options against uftrace 0.13 as `man uftrace-record` describes them: `--keep-pid`,
//! `--no-randomize-addr`, `--libmcount-single` (the function column per task of both tools'
//! recordings), the steps `-vv`, `--debug` and `--debug-domain` print, and the feature words
//! of `--version`.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::normalize::{self, Anchor};
use crate::util::{self, Mode, Output};

/// The function column per task, leaves folded (threads interleave differently each run).
fn columns(out: &str) -> String {
    normalize::fold_leaves(&normalize::by_task(out, Anchor::Start))
}

/// `TOOL record --no-event OPTS -d DIR PROG ARGS` spawned by this process, so that its pid is
/// the one the shell would have seen: (that pid, the status, what the program printed).
fn record_spawned(
    uftrace: bool,
    dir: &Path,
    opts: &[&str],
    prog: &Path,
    args: &[&str],
) -> (u32, Option<i32>, String) {
    let bin = if uftrace {
        util::uftrace_bin()
    } else {
        util::utrace_bin()
    };
    let mut cmd = Command::new(bin);
    cmd.args(["record", "--no-event"])
        .args(opts)
        .arg("-d")
        .arg(dir)
        .arg(prog)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let child = cmd.spawn().unwrap();
    let pid = child.id();
    let mut guard = util::ChildGuard::new(child);
    let child = guard.child_mut();
    let mut stdout = child.stdout.take().unwrap();
    let mut printed = String::new();
    std::io::Read::read_to_string(&mut stdout, &mut printed).unwrap();
    let status = child.wait().unwrap();
    (pid, status.code(), printed)
}

/// `uftrace replay` of `dir` once it succeeds: uftrace's `--keep-pid` recorder is an orphan
/// that still writes the data directory after the program (the command) has exited.
fn replay_when_complete(dir: &Path) -> Output {
    let start = Instant::now();
    loop {
        let out = util::uftrace_replay(dir, &[]);
        if out.status.success() && !out.stdout.is_empty() {
            return out;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "uftrace's data never completed:\n{out}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// `--keep-pid`: with both tools the program's pid is the pid of the command started (the
/// shell's child), its exit status the command's, and utrace's data replays, by both tools,
/// as uftrace's own recording does.
#[test]
fn keep_pid_against_uftrace() {
    if !util::need_uftrace("keep_pid_against_uftrace") {
        return;
    }
    let mut failures = Vec::new();
    for mode in [Mode::Pg, Mode::Fentry, Mode::Cyg] {
        let exe = util::testprog("pid", mode);
        let tmp = tempfile::tempdir().unwrap();
        let (theirs, ours) = (
            tmp.path().join("uftrace.data"),
            tmp.path().join("utrace.data"),
        );
        for (uftrace, dir) in [(true, &theirs), (false, &ours)] {
            let (pid, status, printed) =
                record_spawned(uftrace, dir, &["--keep-pid"], &exe, &["3"]);
            assert_eq!(printed, format!("pid={pid}\n"), "uftrace: {uftrace}");
            assert_eq!(status, Some(3), "uftrace: {uftrace}");
        }
        let want = columns(&replay_when_complete(&theirs).stdout);
        assert!(want.contains("show_pid() {"), "{want}");
        failures.extend(util::compare_replays(
            &format!("record --keep-pid [{}]", mode.dir_name()),
            &want,
            &ours,
            columns,
        ));
    }
    util::assert_no_failures(&failures);
}

/// The executable's first mapping in the session map of the data directory `dir`.
fn exe_mapping(dir: &Path) -> String {
    let map = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .find(|e| e.file_name().to_string_lossy().starts_with("sid-"))
        .expect("a session map");
    let text = std::fs::read_to_string(map.path()).unwrap();
    let first = text.lines().next().unwrap_or_default();
    first
        .split_whitespace()
        .next()
        .unwrap_or_default()
        .to_string()
}

/// `--no-randomize-addr`: two recordings load the program at the same address, with utrace as
/// with uftrace (the same address: both run it without randomization), and record the same
/// calls.
#[test]
fn no_randomize_addr_against_uftrace() {
    if !util::need_uftrace("no_randomize_addr_against_uftrace") {
        return;
    }
    let exe = util::testprog("abc", Mode::Pg);
    let tmp = tempfile::tempdir().unwrap();
    let mut maps = Vec::new();
    for (uftrace, name) in [(true, "u"), (false, "o")] {
        for run in 1..=2 {
            let dir = tmp.path().join(format!("{name}{run}.data"));
            util::record_with(uftrace, &dir, &exe, &[], &["--no-randomize-addr"]).assert_success();
            maps.push(exe_mapping(&dir));
        }
    }
    assert!(maps.iter().all(|m| *m == maps[0]), "{maps:?}");
    let want = columns(&util::uftrace_replay(&tmp.path().join("u1.data"), &[]).stdout);
    let failures = util::compare_replays(
        "record --no-randomize-addr",
        &want,
        &tmp.path().join("o1.data"),
        columns,
    );
    util::assert_no_failures(&failures);
}

/// `--libmcount-single`: the man page's single-thread runtime, "ignored if the target program
/// links with the pthread library". utrace has one runtime, which takes no locks already, so
/// the option changes nothing: a threaded program's tasks are each recorded as uftrace records
/// them without the option. (uftrace 0.13 does not ignore it there: glibc 2.34 moved pthread
/// into libc, so its check finds no libpthread, and its single-thread runtime records every
/// thread's calls as the main thread's, nested in `pthread_create()`: that output is wrong,
/// not a reference.) On a program without threads, both tools record the same with it.
#[test]
fn libmcount_single_against_uftrace() {
    if !util::need_uftrace("libmcount_single_against_uftrace") {
        return;
    }
    let mut failures = Vec::new();
    for (prog, single_reference) in [("thread", false), ("abc", true)] {
        let exe = util::testprog(prog, Mode::Pg);
        let tmp = tempfile::tempdir().unwrap();
        let theirs = tmp.path().join("uftrace.data");
        let reference: &[&str] = if single_reference {
            &["--libmcount-single"]
        } else {
            &[]
        };
        util::record_with(true, &theirs, &exe, &[], reference).assert_success();
        let replay = util::uftrace_replay(&theirs, &[]);
        if prog == "thread" {
            assert_eq!(normalize::tids(&replay.stdout).len(), 3, "{replay}");
        }
        let want = columns(&replay.stdout);
        for opts in [&["--libmcount-single"][..], &[]] {
            let ours = tmp.path().join(format!("utrace{}.data", opts.len()));
            util::record_with(false, &ours, &exe, &[], opts).assert_success();
            failures.extend(util::compare_replays(
                &format!("record {} {prog}", opts.join(" ")),
                &want,
                &ours,
                columns,
            ));
        }
    }
    util::assert_no_failures(&failures);
}

/// The words between the parentheses of a `--version` line, the architecture first.
fn feature_words(line: &str) -> Vec<String> {
    line.split(['(', ')'])
        .nth(1)
        .unwrap_or_default()
        .split_whitespace()
        .map(str::to_string)
        .collect()
}

/// `--version`: the architecture and the feature words, in uftrace 0.13's order; utrace lists
/// every feature uftrace's build here lists (it has them all).
#[test]
fn version_words_as_uftrace() {
    if !util::need_uftrace("version_words_as_uftrace") {
        return;
    }
    let version = |bin| {
        let mut cmd = Command::new(bin);
        cmd.arg("--version");
        let out = util::run(cmd);
        out.assert_success();
        out.stdout.lines().next().unwrap_or_default().to_string()
    };
    let theirs = version(util::uftrace_bin());
    let ours = version(util::utrace_bin());
    assert!(ours.starts_with("utrace v"), "{ours}");
    let (theirs, ours) = (feature_words(&theirs), feature_words(&ours));
    let shared: Vec<&String> = theirs.iter().filter(|w| ours.contains(w)).collect();
    let ours_shared: Vec<&String> = ours.iter().filter(|w| theirs.contains(w)).collect();
    assert_eq!(ours_shared, shared, "same order");
    assert_eq!(
        shared.len(),
        theirs.len(),
        "utrace lacks some: {theirs:?} {ours:?}"
    );
}

/// A record step printed at `-v` (level 1) or only from `-vv` (level 2): a line starting with
/// `DOMAIN: words`, the same with uftrace 0.13 and utrace.
const STEPS: &[(u8, &str)] = &[
    (1, "uftrace: running u"),
    (1, "uftrace: checking binary "),
    (1, "uftrace: using "),
    (1, "uftrace: creating "),
    (1, "mcount: initializing mcount library"),
    (1, "plthook: setup PLT hooking \""),
    (1, "mcount: mcount setup done"),
    (1, "mcount: new session started: "),
    (1, "mcount: mcount trace finished"),
    (1, "mcount: exit from libmcount"),
    (1, "uftrace: child terminated with exit code: 0"),
    (1, "uftrace: reading "),
    (2, "uftrace: all process/thread exited"),
    (2, "symbol: saving symbols to "),
];

/// `TOOL record --no-event OPTS -d DIR thread`'s stderr, colours removed.
fn steps_printed(uftrace: bool, dir: &Path, opts: &[&str]) -> String {
    let exe = util::testprog("thread", Mode::Pg);
    let out = util::record_with(uftrace, dir, &exe, &[], opts);
    out.assert_success();
    let mut text = String::new();
    let mut rest = out.stderr.as_str();
    while let Some(at) = rest.find('\x1b') {
        text.push_str(&rest[..at]);
        let end = rest[at..].find('m').map_or(rest.len(), |m| at + m + 1);
        rest = &rest[end..];
    }
    text.push_str(rest);
    text
}

/// Which of [`STEPS`] `text` prints: whether each has a line starting with it.
fn steps_in(text: &str) -> Vec<(u8, &'static str, bool)> {
    STEPS
        .iter()
        .map(|&(level, step)| (level, step, text.lines().any(|l| l.starts_with(step))))
        .collect()
}

/// `-v`, `-vv`, `--debug` (once and twice) and `--debug-domain`: the record steps printed at
/// each level, in uftrace's domains and words: both tools print the same [`STEPS`], the
/// level-2 ones from `-vv` only. utrace's runtime says `preparing buffers: tid = N` at level 2
/// for each thread (uftrace: `preparing shmem buffers`; utrace's buffers are no shared memory).
#[test]
fn verbose_levels_print_the_record_steps() {
    if !util::need_uftrace("verbose_levels_print_the_record_steps") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("v.data");
    for (opts, level) in [
        (&["-v"][..], 1),
        (&["--debug"], 1),
        (&["-vv"], 2),
        (&["--debug", "--debug"], 2),
    ] {
        let theirs = steps_printed(true, &dir, opts);
        let ours = steps_printed(false, &dir, opts);
        let want: Vec<_> = STEPS
            .iter()
            .map(|&(l, step)| (l, step, l <= level))
            .collect();
        assert_eq!(steps_in(&theirs), want, "uftrace {opts:?}:\n{theirs}");
        assert_eq!(steps_in(&ours), want, "utrace {opts:?}:\n{ours}");
        let buffers = ours
            .lines()
            .filter(|l| l.starts_with("mcount: preparing buffers: tid = "))
            .count();
        assert_eq!(buffers, if level > 1 { 3 } else { 0 }, "{ours}");
    }

    // Some domains only, each at its level: no `uftrace:` line. (utrace has no `plthook`
    // domain of its own: its runtime prints the PLT hooking steps at the `mcount` level, so
    // that step is left out here.)
    let opts = ["-v", "--debug-domain=mcount:2,symbol:2"];
    let theirs = steps_printed(true, &dir, &opts);
    let ours = steps_printed(false, &dir, &opts);
    let want: Vec<_> = STEPS
        .iter()
        .filter(|(_, step)| !step.starts_with("plthook:"))
        .map(|&(_, step)| (step, !step.starts_with("uftrace:")))
        .collect();
    for (who, text) in [("uftrace", &theirs), ("utrace", &ours)] {
        let got: Vec<_> = steps_in(text)
            .into_iter()
            .filter(|(_, s, _)| !s.starts_with("plthook:"))
            .map(|(_, s, p)| (s, p))
            .collect();
        assert_eq!(got, want, "{who} {opts:?}:\n{text}");
    }
    assert!(ours.contains("mcount: preparing buffers: tid = "), "{ours}");
}
