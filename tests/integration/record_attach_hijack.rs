//! `utrace record -p PID` with what hijacks calls in the attached process: `-P .` patching its
//! functions (patched while it is stopped, unpatched at the detach: its text as it was), C++
//! exceptions and stack walks through hijacked frames, a later attach with other settings.
//! Helpers and test programs are [`crate::record_attach`]'s.

use crate::record_attach::{
    assert_replays, assert_unharmed, build, clean_run, utrace_pid, Running,
};
use crate::util;

/// The bytes of `pid`'s executable text (its `r-xp` mapping), read through /proc/PID/mem.
fn exe_text(pid: &str) -> Vec<u8> {
    use std::io::{Read, Seek, SeekFrom};
    let exe = std::fs::read_link(format!("/proc/{pid}/exe")).unwrap();
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap();
    let line = maps
        .lines()
        .find(|l| l.contains(" r-xp ") && l.ends_with(exe.to_str().unwrap()))
        .unwrap_or_else(|| panic!("no text mapping of {}:\n{maps}", exe.display()));
    let (start, end) = line
        .split_whitespace()
        .next()
        .unwrap()
        .split_once('-')
        .unwrap();
    let start = u64::from_str_radix(start, 16).unwrap();
    let end = u64::from_str_radix(end, 16).unwrap();
    let mut mem = std::fs::File::open(format!("/proc/{pid}/mem")).unwrap();
    mem.seek(SeekFrom::Start(start)).unwrap();
    let mut bytes = vec![0; (end - start) as usize];
    mem.read_exact(&mut bytes).unwrap();
    bytes
}

/// `-P .` with `-p`: the functions of a running program built without instrumentation are
/// patched while it is stopped, traced in every thread (those of before the attach and those
/// created during it) with their durations, and unpatched at the detach: its text is byte for
/// byte what it was, and it computes and ends as an untraced run.
#[test]
fn attach_patches_and_unpatches_functions() {
    let tmp = tempfile::tempdir().unwrap();
    let prog = build("attach_threads", tmp.path(), &["-fno-inline"]);
    let clean = clean_run(&prog, &[]);
    let run = Running::start(&prog, &[], tmp.path(), "threads");
    let pid = run.pid();
    let before = exe_text(&pid);
    let data = tmp.path().join("data");
    // From tick 2-3 past tick 15, when two workers are created.
    let rec = utrace_pid(
        "record",
        &pid,
        &["--duration=2s", "-P", ".", "-d", data.to_str().unwrap()],
    );
    rec.assert_success();
    assert_eq!(rec.stderr, "", "{rec}");
    assert_eq!(
        exe_text(&pid),
        before,
        "the text is not as it was after the detach"
    );
    assert_unharmed(run.finish(), &clean.join().unwrap());
    let replay = assert_replays(&data, &["round_sum", "pthread_create"]);
    // round_sum's callees are nested in it, in every task.
    let mut tasks: Vec<&str> = replay
        .lines()
        .filter(|l| l.contains("| round_sum() {") || l.contains("|   round_sum() {"))
        .filter_map(|l| l.split('[').nth(1)?.split(']').next())
        .collect();
    tasks.sort_unstable();
    tasks.dedup();
    assert_eq!(
        tasks.len(),
        5,
        "tasks running round_sum: {tasks:?}\n{replay}"
    );
    assert!(
        replay.contains("|     snprintf();") || replay.contains("|   snprintf();"),
        "{replay}"
    );
    // Workers created during the attach start at worker().
    assert!(replay.contains("| worker() {"), "{replay}");
}

/// A C++ program that throws and catches every tick (through frames with destructors, a
/// rethrow, and a library call that throws) and counts the frames `backtrace` sees: attached
/// with its functions patched (`-P .`, their frames hijacked) and without (only the library
/// calls' frames), it computes and ends as an untraced run, and the throwing functions and
/// `backtrace` (through its PLT hook, then libmcount's walker) are in the trace. (A `dlopen`ed libmcount is
/// not interposed by symbol precedence: the unwinder would meet the exit trampoline and call
/// `std::terminate`.)
#[test]
fn attach_while_exceptions_are_thrown() {
    let tmp = tempfile::tempdir().unwrap();
    let prog = build("attach_throw", tmp.path(), &[]);
    let clean = clean_run(&prog, &["30"]).join().unwrap();
    for (tag, opts, calls) in [
        (
            "patched",
            &["-P", "."][..],
            &[
                "thrower",
                "rethrower",
                "lib_throw",
                "std::__throw_out_of_range_fmt",
                "backtrace",
            ][..],
        ),
        (
            "plt",
            &[][..],
            &["std::__throw_out_of_range_fmt", "backtrace"][..],
        ),
    ] {
        let run = Running::start(&prog, &["30"], tmp.path(), tag);
        let data = tmp.path().join(tag);
        let mut args = vec!["--duration=1s", "-d", data.to_str().unwrap()];
        args.extend_from_slice(opts);
        let rec = utrace_pid("record", &run.pid(), &args);
        rec.assert_success();
        assert_unharmed(run.finish(), &clean);
        let replay = util::utrace_replay(&data, &[]);
        replay.assert_success();
        for call in calls {
            // At any depth, entered (`call() {`) or whole (`call();`).
            let seen = replay.stdout.lines().any(|l| {
                let f = l.split('|').nth(1).unwrap_or("").trim();
                f == format!("{call}() {{") || f == format!("{call}();")
            });
            assert!(seen, "{tag}: no {call}() in the replay:\n{}", replay.stdout);
        }
    }
}

/// A later attach to the same process cannot change what the first one fixed for the
/// process's lifetime (filters, triggers, argument specs, `-P` patterns): it is refused with
/// a one-line reason instead of running with the first one's settings; with the same ones it
/// is traced as the first, and the process is unharmed either way.
#[test]
fn attach_again_with_other_filters_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let prog = build("attach_work", tmp.path(), &["-fno-inline"]);
    let clean = clean_run(&prog, &["40"]);
    let run = Running::start(&prog, &["40"], tmp.path(), "again");
    let (d1, d2, d3) = (
        tmp.path().join("d1"),
        tmp.path().join("d2"),
        tmp.path().join("d3"),
    );
    let filtered = ["--duration=400ms", "-P", ".", "-F", "work"];
    let rec = utrace_pid(
        "record",
        &run.pid(),
        &[&filtered[..], &["-d", d1.to_str().unwrap()]].concat(),
    );
    rec.assert_success();
    let other = utrace_pid(
        "record",
        &run.pid(),
        &["--duration=400ms", "-P", ".", "-d", d2.to_str().unwrap()],
    );
    assert!(!other.status.success(), "{other}");
    assert!(
        other
            .stderr
            .contains("attached to before with other filters"),
        "{other}"
    );
    let same = utrace_pid(
        "record",
        &run.pid(),
        &[&filtered[..], &["-d", d3.to_str().unwrap()]].concat(),
    );
    same.assert_success();
    assert_unharmed(run.finish(), &clean.join().unwrap());
    for d in [&d1, &d3] {
        let replay = util::utrace_replay(d, &[]);
        replay.assert_success();
        // Only work() and what it calls: no main loop's printf.
        assert!(replay.stdout.contains("| work() {"), "{replay}");
        assert!(!replay.stdout.contains("| printf();"), "{replay}");
    }
}
