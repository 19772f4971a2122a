//! `utrace record -k` on this machine's kernel, in event mode (system calls from `raw_syscalls`
//! turned into function-graph records): each system call of testprogs/ksys nested under the
//! function that made it, with a duration; tracefs exactly as it was before; uftrace 0.13
//! replays the data as utrace does. Needs root and tracefs: skipped (with a message) without.

use std::path::Path;
use std::process::Command;

use crate::util::{self, Mode};

use util::{is_root, TRACEFS};

/// The tracefs settings `record -k` touches, as text.
fn tracefs_state() -> String {
    [
        "tracing_on",
        "trace_clock",
        "set_event",
        "set_event_pid",
        "options/event-fork",
        "current_tracer",
    ]
    .iter()
    .map(|f| {
        let text = std::fs::read_to_string(Path::new(TRACEFS).join(f)).unwrap_or_default();
        format!("{f}: {}\n", text.trim())
    })
    .chain(std::iter::once(format!(
        "instances: {:?}\n",
        std::fs::read_dir(Path::new(TRACEFS).join("instances"))
            .map(|d| {
                let mut names: Vec<_> = d.flatten().map(|e| e.file_name()).collect();
                names.sort();
                names
            })
            .unwrap_or_default()
    )))
    .collect()
}

/// `text` with the contents of kernel event comments left out: uftrace 0.13's
/// libtraceevent renders some print formats differently (`%ps` as `0x...s`).
fn without_event_texts(text: &str) -> String {
    text.lines()
        .map(|l| match (l.find("/* "), l.rfind(" (")) {
            (Some(a), Some(b)) if b > a && l[a..b].contains(':') && l.ends_with(") */") => {
                format!("{} */\n", &l[..b])
            }
            _ => format!("{l}\n"),
        })
        .collect()
}

fn kernel_tracing_possible() -> bool {
    util::kernel_event_possible("raw_syscalls/sys_enter")
}

#[test]
fn system_calls_nest_under_their_functions() {
    if !kernel_tracing_possible() {
        eprintln!("kernel_record skipped: needs root and tracefs with raw_syscalls events");
        return;
    }
    let exe = util::testprog("ksys", Mode::Pg);
    let _tracefs = util::tracefs_lock();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("data");
    let scratch = tmp.path().join("scratch");
    let before = tracefs_state();
    let mut cmd = Command::new(util::utrace_bin());
    cmd.args(["record", "--no-event", "-k", "-d"])
        .arg(&dir)
        .arg(&exe)
        .arg(&scratch);
    let recorded = util::run(cmd);
    recorded.assert_success();
    assert_eq!(tracefs_state(), before, "tracefs was not restored");
    // Without the function_graph tracer, one line says what -k records instead.
    let graph = std::fs::read_to_string(Path::new(TRACEFS).join("available_tracers"))
        .is_ok_and(|t| t.split_whitespace().any(|t| t == "function_graph"));
    let said = recorded
        .stderr
        .matches("-k records system calls, time off the CPU, page faults and block requests")
        .count();
    assert_eq!(said, usize::from(!graph), "{recorded}");

    let out = util::utrace_replay(&dir, &["-f", "none"]);
    out.assert_success();
    let lines: Vec<&str> = out.stdout.lines().collect();
    // Events (a page fault, a context switch) may come between a call and its system call,
    // and so may time off the CPU taken in user space (`schedule();` before the system call).
    let calls: Vec<&str> = lines
        .iter()
        .copied()
        .filter(|l| {
            let l = l.trim_start();
            !l.starts_with("/*") && l != "schedule();"
        })
        .collect();
    // (a caller's line, the start of the line after it): each system call right inside the
    // library call that made it, itself inside the program's function.
    for (caller, callee) in [
        ("  open_file() {", "    open() {"),
        ("    open() {", "      __x64_sys_openat("),
        ("    write() {", "      __x64_sys_write("),
        ("    fsync() {", "      __x64_sys_fsync("),
        ("  read_back() {", "    pread() {"),
        ("    pread() {", "      __x64_sys_pread64("),
        ("  who() {", "    getpid() {"),
        ("    getpid() {", "      __x64_sys_getpid("),
        ("  close() {", "    __x64_sys_close("),
    ] {
        let at = calls
            .iter()
            .position(|l| *l == caller)
            .unwrap_or_else(|| panic!("no `{caller}`:\n{out}"));
        assert!(
            calls.get(at + 1).is_some_and(|l| l.starts_with(callee)),
            "`{callee}` does not follow `{caller}`:\n{out}"
        );
    }
    // Time off the CPU shows as `schedule` inside the system call that waited (the O_SYNC
    // write waits for the disk).
    let write = lines
        .iter()
        .position(|l| l.starts_with("      __x64_sys_write("))
        .unwrap();
    if lines[write].ends_with('{') {
        let first_call = lines[write + 1..]
            .iter()
            .find(|l| !l.trim_start().starts_with("/*"));
        assert!(
            first_call.is_some_and(|l| l.starts_with("        schedule()")),
            "{out}"
        );
    }
    // The O_SYNC write's block request: issued by the task and completed (in an interrupt of
    // whatever task) inside the write, both shown as events of the task; user page faults
    // as events too.
    let in_write: Vec<&str> = lines[write..]
        .iter()
        .take_while(|l| !l.starts_with("      } /* __x64_sys_write */"))
        .copied()
        .collect();
    for ev in ["block:block_rq_issue (", "block:block_rq_complete ("] {
        assert!(
            in_write.iter().any(|l| l.contains(&format!("/* {ev}"))),
            "no {ev} in the write:\n{out}"
        );
    }
    assert!(
        out.stdout
            .contains("/* exceptions:page_fault_user (address=0x"),
        "{out}"
    );
    // Durations: the kernel's part of write() is shown and fits inside it.
    let timed = util::utrace_replay(&dir, &["-F", "write_sync"]);
    let us = |name: &str| -> f64 {
        let line = timed
            .stdout
            .lines()
            .find(|l| l.ends_with(name))
            .unwrap_or_else(|| panic!("no {name}:\n{timed}"));
        let (num, unit) = {
            let mut w = line.split_whitespace();
            (w.next().unwrap(), w.next().unwrap())
        };
        let v: f64 = num.parse().unwrap();
        match unit {
            "us" => v,
            "ms" => v * 1000.0,
            "s" => v * 1e6,
            _ => panic!("unit {unit} in {line}"),
        }
    };
    let kernel = if timed.stdout.contains("} /* __x64_sys_write */") {
        us("} /* __x64_sys_write */")
    } else {
        us("__x64_sys_write();")
    };
    assert!(kernel > 0.0 && kernel <= us("} /* write */"), "{timed}");
    // Filters name kernel functions (beyond uftrace 0.13, which cannot).
    for pattern in ["__x64_sys_write", "__x64_sys_write@kernel"] {
        let only = util::utrace_replay(&dir, &["-f", "none", "-F", pattern]);
        assert!(only.stdout.starts_with("__x64_sys_write"), "{only}");
        assert!(!only.stdout.contains("main()"), "{only}");
    }

    if !util::uftrace_available() {
        return;
    }
    // Recorded without scheduling events (utrace's replay does not show them yet).
    // uftrace 0.13's kernel reader now and then pairs a `schedule` exit wrongly (its per-CPU
    // look-ahead; kernel.md §1.8): a fresh recording must then replay alike.
    let mut diffs = Vec::new();
    for attempt in 0..3 {
        let dir = tmp.path().join(format!("again{attempt}"));
        if attempt > 0 {
            let _tracefs = util::tracefs_lock();
            let mut cmd = Command::new(util::utrace_bin());
            cmd.args(["record", "--no-event", "-k", "-d"])
                .arg(&dir)
                .arg(&exe)
                .arg(&scratch);
            util::run(cmd).assert_success();
        }
        let dir = if attempt == 0 {
            tmp.path().join("data")
        } else {
            dir
        };
        let theirs = without_event_texts(&util::uftrace_replay(&dir, &[]).stdout);
        let ours = without_event_texts(&util::utrace_replay(&dir, &["--tid-width=6"]).stdout);
        if ours == theirs {
            return;
        }
        diffs.push(crate::normalize::diff(&theirs, &ours));
    }
    panic!(
        "uftrace replays utrace's kernel data differently (3 recordings):\n{}",
        diffs.join("\n\n")
    );
}

/// Without the rights to tracefs, `record -k` stops with one line naming what is missing.
#[test]
fn kernel_tracing_without_root_is_refused() {
    let root = is_root();
    let tracefs_private = std::fs::metadata(TRACEFS)
        .is_ok_and(|m| std::os::unix::fs::PermissionsExt::mode(&m.permissions()) & 0o005 == 0);
    if !root || !tracefs_private || Command::new("su").arg("--help").output().is_err() {
        eprintln!(
            "kernel_tracing_without_root_is_refused skipped: needs root, su and a private tracefs"
        );
        return;
    }
    let exe = util::testprog("ksys", Mode::Pg);
    let tmp = tempfile::tempdir().unwrap();
    std::fs::set_permissions(
        tmp.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o777),
    )
    .unwrap();
    let script = format!(
        "{} record -k -d {}/data {}",
        util::utrace_bin().display(),
        tmp.path().display(),
        exe.display()
    );
    let mut cmd = Command::new("su");
    cmd.args(["nobody", "-s", "/bin/sh", "-c", &script]);
    let out = util::run(cmd);
    assert_eq!(out.status.code(), Some(1), "{out}");
    assert!(
        out.stderr
            .contains("-k needs root: tracefs at /sys/kernel/tracing is not accessible"),
        "{out}"
    );
    assert!(!out.stderr.contains("panicked"), "{out}");
}

/// function_graph mode on a real kernel that has it: tests/vm/run-kernel-test.sh boots Debian's
/// stock kernel under QEMU and checks, inside, that `record -k -K 3` shows `vfs_write` under the
/// program's function and restores tracefs, and that `report --io` of testprogs/aio_read on
/// the VM's virtio disk links its two reads from io_submit to io_getevents. Runs as root (it
/// installs QEMU and downloads the kernel package when missing); `UTRACE_SKIP_VM=1` skips it.
#[test]
fn function_graph_in_a_vm() {
    if !is_root() || std::env::var_os("UTRACE_SKIP_VM").is_some() {
        eprintln!("function_graph_in_a_vm skipped: needs root (UTRACE_SKIP_VM unset)");
        return;
    }
    let script = util::workspace_root().join("tests/vm/run-kernel-test.sh");
    let work = tempfile::tempdir().unwrap();
    let mut cmd = Command::new("bash");
    cmd.arg(&script).env("KTEST_WORK", work.path());
    if let Some(k) = std::env::var_os("KTEST_VMLINUZ") {
        cmd.env("KTEST_VMLINUZ", k);
    }
    let out = util::run_for(cmd, std::time::Duration::from_secs(900));
    assert!(out.status.success(), "{out}");
    assert!(out.stdout.contains("function_graph"), "{out}");
    assert!(out.stdout.contains("vfs_write"), "{out}");
    // Graph mode's I/O requests (report --io) on the VM's virtio disk.
    if std::env::var_os("KTEST_VMLINUZ").is_none() {
        assert!(
            out.stdout
                .contains("VM-IO ok: 2 reads linked io_submit -> device -> io_getevents"),
            "{out}"
        );
    }
}

/// A process's last system call, `exit_group`, enters after `main` returns and never comes
/// back: hidden in replay and graph (outside every user function), but uftrace's report
/// counts it, with the time to the task's last record, and so does ours — on the same data the
/// two reports are the same, line for line.
#[test]
fn report_counts_kernel_calls_that_never_return() {
    if !kernel_tracing_possible() || !util::need_uftrace("report_counts_kernel_calls") {
        eprintln!("kernel_record skipped: needs root, tracefs and uftrace");
        return;
    }
    let exe = util::testprog("abc", Mode::Pg);
    let _tracefs = util::tracefs_lock();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("data");
    let mut cmd = Command::new(util::utrace_bin());
    cmd.args(["record", "--no-event", "-k", "-d"])
        .arg(&dir)
        .arg(&exe);
    util::run(cmd).assert_success();
    let run = |bin, args: &[&str]| {
        let mut cmd = Command::new(bin);
        cmd.args(args).arg("--no-pager").arg("-d").arg(&dir);
        let out = util::run(cmd);
        out.assert_success();
        out.stdout
    };
    let ours = run(util::utrace_bin(), &["report"]);
    assert!(ours.contains("  __x64_sys_exit_group\n"), "{ours}");
    for args in [&["report"][..], &["report", "-s", "call"], &["graph"]] {
        let theirs = run(util::uftrace_bin(), args);
        let ours = run(util::utrace_bin(), args);
        assert_eq!(
            ours,
            theirs,
            "{args:?} differs (- uftrace, + utrace):\n{}",
            crate::normalize::diff(&theirs, &ours)
        );
    }
}
