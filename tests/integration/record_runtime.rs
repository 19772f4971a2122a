//! Options that set up the runtime, against uftrace 0.13 (`man uftrace-record`):
//!
//! - `--clock=mono|mono_raw|boot` stamps the records with that clock: the first record of a
//!   recording lies between two readings of the same clock taken by the test around it, the
//!   trace's function column is uftrace's, and an unknown clock gets uftrace's one-line warning
//!   and falls back to `mono`, as uftrace does. (On a machine that never slept `boot` reads as
//!   `mono`, and `mono_raw` differs from it only by the clock's slewing: the window check is
//!   exact for each, the difference between them is not what it can see.)
//! - `--no-pltbind` runs the program with `LD_BIND_NOT` set, so that the dynamic linker never
//!   binds a PLT slot: every library call still reaches the hooks, and the trace (library calls
//!   included, in one thread and in several) is uftrace's.
//! - `-b SIZE`: small buffers lose nothing.
//! - `-F` naming no function: said once (uftrace drops the pattern; see the test).
//! - A program that closes every descriptor from 3 up (`closefrom`, `close_range`) and then
//!   opens hundreds of files keeps libmcount's descriptors out of it: its files stay its own,
//!   and every call after it is recorded (testprogs/closefrom.c).

use crate::normalize::{self, Anchor};
use crate::util::{self, Mode};
use std::path::Path;

/// The testprogs recorded here only (`record_matrix::every_testprog_is_recorded`).
pub fn covers(prog: &str) -> bool {
    prog == "closefrom"
}

/// The function column per task, leaves folded (threads interleave differently each run).
fn columns(out: &str) -> String {
    normalize::fold_leaves(&normalize::by_task(out, Anchor::Start))
}

/// `clock_gettime(id)` in nanoseconds.
fn now(id: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec.
    assert_eq!(unsafe { libc::clock_gettime(id, &mut ts) }, 0);
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The time of the first record `utrace dump` shows, in nanoseconds (`SECONDS.NANOS  TID: ...`).
fn first_record_time(dir: &Path) -> u64 {
    let out = util::run({
        let mut cmd = std::process::Command::new(util::utrace_bin());
        cmd.arg("dump").arg("-d").arg(dir);
        cmd
    });
    out.assert_success();
    let stamp = out
        .stdout
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .find_map(|w| {
            let (s, ns) = w.split_once('.')?;
            Some(s.parse::<u64>().ok()? * 1_000_000_000 + ns.parse::<u64>().ok()?)
        });
    stamp.unwrap_or_else(|| panic!("no record in the dump:\n{out}"))
}

/// The function column per task of `replay` of `dir` by `uftrace` or `utrace`.
fn functions(dir: &Path, by_uftrace: bool) -> String {
    let out = if by_uftrace {
        util::uftrace_replay(dir, &[])
    } else {
        util::utrace_replay(dir, &[])
    };
    out.assert_success();
    normalize::fold_leaves(&normalize::by_task(&out.stdout, Anchor::Main))
}

#[test]
fn clocks_stamp_the_records() {
    if !util::need_uftrace("clocks_stamp_the_records") {
        return;
    }
    let prog = util::testprog("abc", Mode::Pg);
    let mut failures = Vec::new();
    for (name, id) in [
        ("mono", libc::CLOCK_MONOTONIC),
        ("mono_raw", libc::CLOCK_MONOTONIC_RAW),
        ("boot", libc::CLOCK_BOOTTIME),
    ] {
        let tmp = tempfile::tempdir().unwrap();
        let (ours, theirs) = (tmp.path().join("ours"), tmp.path().join("theirs"));
        let clock = format!("--clock={name}");
        let before = now(id);
        util::record_with(false, &ours, &prog, &[], &[&clock, "--no-libcall"]).assert_success();
        let after = now(id);
        let first = first_record_time(&ours);
        if !(before..=after).contains(&first) {
            failures.push(format!(
                "--clock={name}: first record at {first}, not between {before} and {after}"
            ));
        }
        util::uftrace_record(&theirs, &[&clock, "--no-libcall"], &prog, &[]);
        let want = functions(&theirs, true);
        failures.extend(util::compare_replays(&clock, &want, &ours, |out| {
            normalize::fold_leaves(&normalize::by_task(out, Anchor::Main))
        }));
    }
    // An unknown clock: uftrace's warning, then a recording on the default clock.
    let tmp = tempfile::tempdir().unwrap();
    let warning = |out: &util::Output| -> Vec<String> {
        (out.stdout.lines().chain(out.stderr.lines()))
            .filter(|l| l.contains("clock"))
            .map(|l| l.trim().to_string())
            .collect()
    };
    let ours = util::record_with(false, &tmp.path().join("a"), &prog, &[], &["--clock=tai"]);
    let theirs = util::record_with(true, &tmp.path().join("b"), &prog, &[], &["--clock=tai"]);
    ours.assert_success();
    theirs.assert_success();
    if warning(&ours) != warning(&theirs) || warning(&ours).is_empty() {
        failures.push(format!(
            "--clock=tai: utrace says {:?}, uftrace {:?}",
            warning(&ours),
            warning(&theirs)
        ));
    }
    util::assert_no_failures(&failures);
}

#[test]
fn no_pltbind_keeps_every_library_call() {
    if !util::need_uftrace("no_pltbind_keeps_every_library_call") {
        return;
    }
    let mut failures = Vec::new();
    for (name, mode) in [
        ("libcall", Mode::Pg),
        ("libcall", Mode::Cyg),
        ("thread", Mode::Pg),
        ("fork_alloc", Mode::Fentry),
    ] {
        let prog = util::testprog(name, mode);
        let tmp = tempfile::tempdir().unwrap();
        let (ours, theirs) = (tmp.path().join("ours"), tmp.path().join("theirs"));
        util::record_with(false, &ours, &prog, &[], &["--no-pltbind"]).assert_success();
        util::uftrace_record(&theirs, &["--no-pltbind"], &prog, &[]);
        let want = functions(&theirs, true);
        assert!(
            want.contains("() {"),
            "{name}: uftrace traced nothing: {want}"
        );
        failures.extend(util::compare_replays(
            &format!("{name} {mode:?} --no-pltbind"),
            &want,
            &ours,
            |out| normalize::fold_leaves(&normalize::by_task(out, Anchor::Main)),
        ));
    }
    util::assert_no_failures(&failures);
}

/// A `-F` pattern that names no function: uftrace 0.13 drops it and records everything; utrace
/// keeps it (a library `dlopen` loads later may have the function: `record_autoargs_dlopen`)
/// and says so once. Next to a pattern that matches, it changes nothing, as in uftrace.
#[test]
fn filter_matching_nothing_is_said() {
    if !util::need_uftrace("filter_matching_nothing_is_said") {
        return;
    }
    let prog = util::testprog("abc", Mode::Pg);
    let tmp = tempfile::tempdir().unwrap();
    let warning = "WARN: no function matches the -F patterns";
    let ours = util::record_with(false, &tmp.path().join("a"), &prog, &[], &["-F", "no_such"]);
    ours.assert_success();
    assert_eq!(ours.stderr.matches(warning).count(), 1, "{ours}");

    let opts = ["-F", "no_such", "-F", "b"];
    let ours = util::record_with(false, &tmp.path().join("b"), &prog, &[], &opts);
    ours.assert_success();
    assert!(!ours.stderr.contains(warning), "{ours}");
    util::uftrace_record(&tmp.path().join("c"), &opts, &prog, &[]);
    let want = columns(&util::uftrace_replay(&tmp.path().join("c"), &[]).stdout);
    assert!(want.contains("b() {"), "{want}");
    util::assert_no_failures(&util::compare_replays(
        "-F no_such -F b",
        &want,
        &tmp.path().join("b"),
        columns,
    ));
}

/// `-b SIZE`: small buffers (one page: a ring of 32 pages per thread, written out hundreds of
/// times) lose nothing: the trace is uftrace's, also with threads.
#[test]
fn small_buffers_keep_every_record() {
    if !util::need_uftrace("small_buffers_keep_every_record") {
        return;
    }
    let mut failures = Vec::new();
    for (name, args) in [("fib", &["12"][..]), ("thread", &[][..])] {
        let prog = util::testprog(name, Mode::Pg);
        let tmp = tempfile::tempdir().unwrap();
        let (ours, theirs) = (tmp.path().join("ours"), tmp.path().join("theirs"));
        let opts = ["-b", "4K", "--no-libcall"];
        util::record_with(false, &ours, &prog, args, &opts).assert_success();
        util::uftrace_record(&theirs, &opts, &prog, args);
        let want = columns(&util::uftrace_replay(&theirs, &[]).stdout);
        assert!(want.lines().count() > 10, "{name}: {want}");
        failures.extend(util::compare_replays(
            &format!("{name} -b 4K"),
            &want,
            &ours,
            columns,
        ));
    }
    util::assert_no_failures(&failures);
}

/// `closefrom(3)` and `close_range(3, ~0U, 0)` leave libmcount's descriptors (the thread's
/// data file, the data directory, the recorder's pidfd) open: the program's next `open`s do
/// not get their numbers, nothing writes into the program's files, and the calls made after
/// it are all recorded, with small buffers so that the thread writes chunks itself.
#[test]
fn closing_every_descriptor_spares_the_tracers() {
    let exe = util::testprog("closefrom", Mode::Pg);
    let scratch = tempfile::tempdir().unwrap();
    let run = |cmd: std::process::Command| {
        let out = util::run(cmd);
        out.assert_success();
        out.stdout
    };
    let untraced = run({
        let mut cmd = std::process::Command::new(&exe);
        cmd.arg(scratch.path());
        cmd
    });
    assert!(untraced.contains("many files open: yes"), "{untraced}");
    assert!(
        untraced.contains("written by someone else: 0"),
        "{untraced}"
    );
    let dir = scratch.path().join("data");
    let traced = run({
        let mut cmd = std::process::Command::new(util::utrace_bin());
        cmd.args(["record", "-b", "4K", "-d"])
            .arg(&dir)
            .arg(&exe)
            .arg(scratch.path());
        cmd
    });
    assert_eq!(traced, untraced);
    let report = util::run({
        let mut cmd = std::process::Command::new(util::utrace_bin());
        cmd.args(["report", "-d"]).arg(&dir);
        cmd
    });
    report.assert_success();
    let calls = |name: &str| {
        report
            .stdout
            .lines()
            .find(|l| l.split_whitespace().last() == Some(name))
            .and_then(|l| l.split_whitespace().nth(4))
            .map(str::to_string)
    };
    assert_eq!(calls("leaf").as_deref(), Some("50010"), "{report}");
    assert_eq!(calls("work").as_deref(), Some("2"), "{report}");
}
