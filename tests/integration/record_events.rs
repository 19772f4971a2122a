//! Events and the program's identity at record time: `-W cpu` (watch:cpu events), `-E
//! PROVIDER:NAME` (user SDT probes of testprogs/sdt.c), `--keep-pid` (testprogs/pid.c).
//!
//! `-W` and `-E` are recorded by `utrace record` and `uftrace record --no-event` with the same
//! options, in every build mode; `uftrace replay` and `utrace replay` of utrace's data must
//! print, per task and by function column from the first line, what `uftrace replay` of
//! uftrace's data prints, and so must `utrace replay` of uftrace's data; `uftrace dump` of
//! both tools' data must hold the same events. The recording runs pinned to one CPU (the
//! affinity of the test's thread, inherited by both recorders and the program), so exactly
//! one `watch:cpu` event is expected per task, except where testprogs/migrate.c moves itself;
//! the CPU number itself is masked.

use std::process::Command;

use crate::normalize::{self, Anchor};
use crate::record_matrix::MODES;
use crate::util::{self, Mode};

/// Whether a test here records `prog` (see `record_matrix::every_testprog_is_recorded`).
pub fn covers(prog: &str) -> bool {
    matches!(prog, "sdt" | "pid" | "migrate")
}

/// Pins the calling thread (and so what it spawns) to its current CPU.
fn pin_to_one_cpu() {
    // SAFETY: sched_getcpu takes no arguments; the cpu_set_t is plain data, zeroed then set.
    unsafe {
        let cpu = libc::sched_getcpu().max(0) as usize;
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), &set);
    }
}

/// `cpu=N` written as `cpu=?`.
fn mask_cpus(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(i) = rest.find("cpu=") {
        out.push_str(&rest[..i + 4]);
        rest = rest[i + 4..].trim_start_matches(|c: char| c.is_ascii_digit());
        out.push('?');
    }
    out.push_str(rest);
    out
}

/// The event lines of a raw dump, without times, tids and addresses: `[event] NAME(ID)` and
/// the values uftrace prints under them.
fn dump_events(dump: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut lines = dump.lines().peekable();
    while let Some(l) = lines.next() {
        let Some(at) = l.find("[event] ") else {
            continue;
        };
        out.push(l[at..].to_string());
        while let Some(next) = lines.peek().filter(|n| n.starts_with("  ")) {
            out.push(mask_cpus(next.trim()));
            lines.next();
        }
    }
    out
}

fn dump(uftrace: bool, dir: &std::path::Path) -> util::Output {
    let bin = if uftrace {
        util::uftrace_bin()
    } else {
        util::utrace_bin()
    };
    let mut cmd = Command::new(bin);
    cmd.arg("dump").arg("-d").arg(dir);
    util::run(cmd)
}

/// Records `prog` with `opts` by both tools and compares replays and dumps.
fn compare(prog: &str, mode: Mode, opts: &[&str]) -> Vec<String> {
    let what = format!("{prog} [{}] record {}", mode.dir_name(), opts.join(" "));
    let exe = util::testprog(prog, mode);
    let tmp = tempfile::tempdir().unwrap();
    let theirs = tmp.path().join("uftrace.data");
    let ours = tmp.path().join("utrace.data");
    let reference = util::record_with(true, &theirs, &exe, &[], opts);
    let recorded = util::record_with(false, &ours, &exe, &[], opts);
    let mut failures = Vec::new();
    // The program's last line (`pid` prints its pid, which differs; uftrace may warn first).
    let same_output =
        prog == "pid" || recorded.stdout.lines().last() == reference.stdout.lines().last();
    if recorded.status.code() != reference.status.code() || !same_output {
        failures.push(format!(
            "{what}: utrace's recording differs from uftrace's:\n{recorded}\n{reference}"
        ));
    }
    let reduce = |out: &str| mask_cpus(&normalize::by_task(out, Anchor::Start));
    let want = reduce(&util::uftrace_replay(&theirs, &[]).stdout);
    // Not a comparison of nothing: the events asked for are there.
    let watched = !opts.contains(&"-W") || want.contains("/* watch:cpu (cpu=?) */");
    let probed = !opts.contains(&"-E") || opts.contains(&"myapp:*") || want.contains("/* myapp:");
    if !watched || !probed {
        failures.push(format!("{what}: uftrace recorded no events:\n{want}"));
    }
    failures.extend(util::compare_replays(&what, &want, &ours, reduce));
    let replayed = util::utrace_replay(&theirs, &[]);
    let got = reduce(&replayed.stdout);
    if want != got {
        failures.push(format!(
            "{what}: `utrace replay` of uftrace's data differs (- uftrace, + utrace):\n{}\n{replayed}",
            normalize::diff(&want, &got)
        ));
    }
    let want = dump_events(&dump(true, &theirs).stdout);
    for (who, data) in [("uftrace", &ours), ("utrace", &ours), ("utrace", &theirs)] {
        let out = dump(who == "uftrace", data);
        let got = dump_events(&out.stdout);
        if got != want {
            failures.push(format!(
                "{what}: events of `{who} dump` of {} differ:\n{want:#?}\n{got:#?}\n{out}",
                data.display()
            ));
        }
    }
    failures
}

fn check(cases: &[(&str, &[&str])]) {
    pin_to_one_cpu();
    let mut failures = Vec::new();
    for (prog, opts) in cases {
        for mode in MODES {
            failures.extend(compare(prog, mode, opts));
        }
    }
    util::assert_no_failures(&failures);
}

fn have_sdt_header() -> bool {
    let found = [
        "/usr/include/x86_64-linux-gnu/sys/sdt.h",
        "/usr/include/sys/sdt.h",
    ]
    .iter()
    .any(|p| std::path::Path::new(p).exists());
    if !found {
        eprintln!("skipping: <sys/sdt.h> is missing (tests/setup.sh installs systemtap-sdt-dev)");
    }
    found
}

#[test]
fn watch_cpu_matches_uftrace() {
    if !util::need_uftrace("watch_cpu_matches_uftrace") || !have_sdt_header() {
        return;
    }
    check(&[
        ("pid", &["-W", "cpu"]),
        // Changes of CPU, seen at the exits of sched_setaffinity().
        ("migrate", &["-W", "cpu"]),
        ("sdt", &["-W", "cpu", "-E", "myapp:work_start"]),
    ]);
}

/// The probes guarded by a semaphore are left out: uftrace 0.13 does not increment
/// semaphores, utrace does (see `sdt_probes_keep_the_program_as_it_is`).
#[test]
fn sdt_events_match_uftrace() {
    if !util::need_uftrace("sdt_events_match_uftrace") || !have_sdt_header() {
        return;
    }
    check(&[
        ("sdt", &["-E", "myapp:work_start", "-E", "myapp:work_end"]),
        ("sdt", &["-E", "myapp:work_.*"]),
        ("sdt", &["-E", "yap.:work_end"]),
        // Matches nothing as a regex (uftrace 0.13 alike).
        ("sdt", &["-E", "myapp:*"]),
        ("sdt", &["--match=glob", "-E", "myapp:work_*"]),
        (
            "sdt",
            &[
                "-E",
                "myapp:work_start",
                "-A",
                "work@arg1",
                "-R",
                "work@retval",
            ],
        ),
    ]);
}

/// The program sees what it sees untraced: its own SIGTRAP handler (installed with
/// `sigaction`, read back, installed again by `signal`) gets its `raise`s and its `int3`, never a
/// probe's; only a probe
/// guarded by a semaphore runs its code when it is enabled, as under any tracer.
#[test]
fn sdt_probes_keep_the_program_as_it_is() {
    if !have_sdt_header() {
        return;
    }
    let exe = util::testprog("sdt", Mode::Pg);
    let plain = util::run(Command::new(&exe));
    plain.assert_success();
    assert_eq!(plain.stdout, "traps=3 own_handler=1 guarded=0\n", "{plain}");
    let tmp = tempfile::tempdir().unwrap();
    for (events, guarded) in [("myapp:work_.*", 0), ("myapp:.*", 2)] {
        let dir = tmp.path().join(format!("g{guarded}.data"));
        let out = util::record_with(false, &dir, &exe, &[], &["-E", events]);
        out.assert_success();
        assert_eq!(
            out.stdout,
            format!("traps=3 own_handler=1 guarded={guarded}\n"),
            "{out}"
        );
        let replay = util::utrace_replay(&dir, &[]);
        let text = normalize::by_task(&replay.stdout, Anchor::Main);
        assert_eq!(
            text.matches("/* myapp:work_start */").count(),
            2,
            "{replay}"
        );
        assert_eq!(
            text.matches("/* myapp:guarded */").count(),
            guarded,
            "{replay}"
        );
        assert_eq!(text.matches("on_trap();").count(), 3, "{replay}");
        let events = std::fs::read_to_string(dir.join("events.txt")).unwrap();
        assert!(
            events.starts_with("EVENT: 1000000 myapp:work_start\n"),
            "{events}"
        );
    }
}

/// `--keep-pid`: the program runs as the process that was started (its pid printed by the
/// program is the recorder command's), its exit status is the command's, and the data
/// directory is complete when the command has returned.
#[test]
fn keep_pid_keeps_the_pid_and_the_status() {
    let exe = util::testprog("pid", Mode::Pg);
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("kept.data");
    let mut cmd = Command::new(util::utrace_bin());
    cmd.args(["record", "--keep-pid", "-d"])
        .arg(&dir)
        .arg(&exe)
        .arg("3")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped());
    let child = cmd.spawn().unwrap();
    let pid = child.id();
    let mut guard = util::ChildGuard::new(child);
    let child = guard.child_mut();
    let mut stdout = child.stdout.take().unwrap();
    let status = child.wait().unwrap();
    // The data is complete now, before the recorder's output pipe is even read to its end.
    // (Without scheduling lines: a pre-emption would differ from uftrace's reading below.)
    let info = util::utrace_replay(&dir, &["--no-sched"]);
    let mut printed = String::new();
    std::io::Read::read_to_string(&mut stdout, &mut printed).unwrap();
    assert_eq!(printed, format!("pid={pid}\n"));
    assert_eq!(status.code(), Some(3));
    info.assert_success();
    let text = normalize::by_task(&info.stdout, Anchor::Main);
    assert!(
        text.contains("show_pid() {") && text.contains("status_of() {"),
        "{info}"
    );
    let mut cmd = Command::new(util::utrace_bin());
    cmd.arg("info").arg("-d").arg(&dir);
    let info = util::run(cmd);
    assert!(
        info.stdout
            .contains("exit status         : exited with code: 3")
            && info
                .stdout
                .contains(&format!("task list           : {pid}(pid)")),
        "{info}"
    );
    if util::uftrace_available() {
        let replay = util::uftrace_replay(&dir, &["--no-sched"]);
        assert_eq!(
            normalize::by_task(&replay.stdout, Anchor::Main),
            text,
            "{replay}"
        );
    }

    // `live`: the recorder prints the replay before the program's exit completes.
    let mut cmd = Command::new(util::utrace_bin());
    cmd.args(["live", "--keep-pid"]).arg(&exe).arg("4");
    let live = util::run(cmd);
    assert_eq!(live.status.code(), Some(4), "{live}");
    assert!(
        live.stdout.starts_with("pid=") && live.stdout.contains("show_pid() {"),
        "{live}"
    );
}
