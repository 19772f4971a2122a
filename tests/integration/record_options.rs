//! `record --clock` and `--no-pltbind` against uftrace 0.13 (`man uftrace-record`):
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

use crate::normalize::{self, Anchor};
use crate::util::{self, Mode};
use std::path::Path;

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
