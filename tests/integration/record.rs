//! `utrace record` and `utrace live`: the recorder's checks, messages and exit statuses, and
//! data that replays like uftrace's own recording.
//!
//! The end-to-end tests record a test program with utrace and with uftrace, then compare, per
//! task and by function column, `uftrace replay` and `utrace replay` of utrace's data with
//! `uftrace replay` of uftrace's data. Library calls are not hooked yet, so every recording and
//! replay uses `--no-libcall`.

use std::path::Path;
use std::process::Command;

use crate::normalize::{self, Anchor};
use crate::util::{self, Mode, Output};

/// `utrace ARGS` run in `cwd`.
fn utrace_in(cwd: &Path, args: &[&str]) -> Output {
    let mut cmd = Command::new(util::utrace_bin());
    cmd.current_dir(cwd).args(args);
    util::run(cmd)
}

fn assert_status(out: &Output, code: i32) {
    assert_eq!(out.status.code(), Some(code), "unexpected status:\n{out}");
}

#[test]
fn nonexistent_program() {
    let tmp = tempfile::tempdir().unwrap();
    for sub in [&["record"][..], &["live"], &[]] {
        let mut args = sub.to_vec();
        args.push("./nonexist");
        let out = utrace_in(tmp.path(), &args);
        assert_status(&out, 1);
        assert!(
            out.stderr
                .contains("\n ERROR: Cannot trace './nonexist': No such executable file.\n"),
            "{out}"
        );
        assert!(out.stdout.is_empty(), "{out}");
    }
    assert!(!tmp.path().join("uftrace.data").exists());
}

#[test]
fn uninstrumented_binary() {
    let tmp = tempfile::tempdir().unwrap();
    let out = utrace_in(tmp.path(), &["record", "/bin/true"]);
    assert_status(&out, 1);
    assert!(
        out.stderr.contains(
            " ERROR: Can't find 'mcount' symbol in the '/bin/true'.\n\
             \tIt seems not to be compiled with -pg or -finstrument-functions flag.\n"
        ),
        "{out}"
    );
    // Looked up in $PATH like uftrace: the error names the file found.
    let out = utrace_in(tmp.path(), &["record", "true"]);
    assert_status(&out, 1);
    assert!(
        out.stderr.contains("Can't find 'mcount' symbol in the '/"),
        "{out}"
    );
    assert!(!tmp.path().join("uftrace.data").exists());
}

#[test]
fn scripts_and_non_elf_files() {
    let tmp = tempfile::tempdir().unwrap();
    let script = tmp.path().join("t.sh");
    std::fs::write(&script, "#!/bin/sh\nexit 0\n").unwrap();
    let text = tmp.path().join("text");
    std::fs::write(&text, "hello\n").unwrap();
    for f in [&script, &text] {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(f, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let out = utrace_in(tmp.path(), &["record", "./t.sh"]);
    assert_status(&out, 1);
    assert!(
        out.stderr
            .contains(" ERROR: Cannot trace script file: ./t.sh\n\tTo trace binaries"),
        "{out}"
    );
    let out = utrace_in(tmp.path(), &["record", "./text"]);
    assert_status(&out, 1);
    assert!(
        out.stderr
            .contains(" ERROR: Cannot trace './text': Invalid file\n\t"),
        "{out}"
    );
}

#[test]
fn missing_data_dir_parent() {
    let prog = util::testprog("abc", Mode::Pg);
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("missing").join("data");
    let out = utrace_in(
        tmp.path(),
        &[
            "record",
            "-d",
            dir.to_str().unwrap(),
            prog.to_str().unwrap(),
        ],
    );
    assert_status(&out, 1);
    assert!(
        out.stderr.contains(" ERROR: creating directory failed: "),
        "{out}"
    );
    assert!(out.stderr.contains("No such file or directory"), "{out}");
    assert!(!tmp.path().join("missing").exists());
}

#[test]
fn missing_libmcount() {
    let prog = util::testprog("abc", Mode::Pg);
    let tmp = tempfile::tempdir().unwrap();
    let empty = tempfile::tempdir().unwrap();
    let opt = format!("--libmcount-path={}", empty.path().display());
    let out = utrace_in(tmp.path(), &["record", &opt, prog.to_str().unwrap()]);
    assert_status(&out, 1);
    assert!(
        out.stderr
            .contains(" ERROR: utrace could not find libmcount.so for record-tracing\n"),
        "{out}"
    );
    assert!(!tmp.path().join("uftrace.data").exists());
}

#[test]
fn record_without_program_prints_the_banner() {
    let tmp = tempfile::tempdir().unwrap();
    let out = utrace_in(tmp.path(), &["record"]);
    assert_status(&out, 1);
    assert!(out.stdout.contains("usage: utrace"), "{out}");
}

/// The directory is created fresh each time, the previous one kept as `.old`; the files the
/// recorder owns are there whatever libmcount recorded.
#[test]
fn data_directory_lifecycle() {
    let prog = util::testprog("abc", Mode::Pg);
    let tmp = tempfile::tempdir().unwrap();
    let prog = prog.to_str().unwrap();
    let out = utrace_in(tmp.path(), &["record", "--no-libcall", "-t", "1us", prog]);
    assert_status(&out, 0);
    let data = tmp.path().join("uftrace.data");
    assert_eq!(
        std::fs::read_to_string(data.join("default.opts")).unwrap(),
        "-t 1us\n"
    );
    assert!(data.join("task.txt").is_file());
    let info = std::fs::read(data.join("info")).unwrap();
    assert!(info.starts_with(b"Ftrace!\0"));
    let text = String::from_utf8_lossy(&info);
    assert!(text.contains("\nexit_status:0\n"), "{text}");
    assert!(text.contains("\npattern_type:regex\n"), "{text}");
    assert!(text.contains(" record --no-libcall -t 1us "), "{text}");

    std::fs::write(data.join("marker"), "").unwrap();
    let out = utrace_in(tmp.path(), &["record", "--no-libcall", prog]);
    assert_status(&out, 0);
    assert!(tmp.path().join("uftrace.data.old/marker").is_file());
    assert!(!data.join("marker").exists());
    assert_eq!(std::fs::read(data.join("default.opts")).unwrap(), b"");
}

/// uftrace's statuses (cli.md §1.7): a non-zero exit gives 1 silently, a signal gives 2 and a
/// warning. `--force` lets an uninstrumented shell stand in for such programs.
#[test]
fn exit_statuses() {
    let tmp = tempfile::tempdir().unwrap();
    let run = |script: &str| {
        utrace_in(
            tmp.path(),
            &["record", "--force", "--no-libcall", "/bin/sh", "-c", script],
        )
    };
    let out = run("exit 0");
    assert_status(&out, 0);
    assert!(out.stderr.is_empty(), "{out}");
    let out = run("echo hello; exit 3");
    assert_status(&out, 1);
    assert_eq!(out.stdout, "hello\n");
    assert!(out.stderr.is_empty(), "{out}");
    let info = std::fs::read(tmp.path().join("uftrace.data/info")).unwrap();
    assert!(String::from_utf8_lossy(&info).contains("\nexit_status:768\n"));
    let out = run("kill -USR1 $$");
    assert_status(&out, 2);
    assert!(
        out.stderr
            .contains("WARN: child terminated by signal: 10: User defined signal 1\n"),
        "{out}"
    );
}

/// Forked children that outlive the program are waited for (the recorder is a subreaper).
#[test]
fn orphaned_descendants_are_waited_for() {
    let tmp = tempfile::tempdir().unwrap();
    let marker = tmp.path().join("late");
    let script = format!("(sleep 0.3; touch {}) & exit 0", marker.display());
    let out = utrace_in(
        tmp.path(),
        &[
            "record",
            "--force",
            "--no-libcall",
            "/bin/sh",
            "-c",
            &script,
        ],
    );
    assert_status(&out, 0);
    assert!(marker.exists(), "utrace returned before the orphan ended");
}

/// Records `prog` with both tools and compares the three replays per task.
fn compare_recordings(prog_name: &str, mode: Mode, args: &[&str]) {
    if !util::need_uftrace(prog_name) {
        return;
    }
    let prog = util::testprog(prog_name, mode);
    let tmp = tempfile::tempdir().unwrap();
    let theirs = tmp.path().join("uftrace.data");
    let ours = tmp.path().join("utrace.data");
    util::uftrace_record(&theirs, &["--no-libcall"], &prog, args);
    // Without scheduling events, as the reference is recorded.
    let mut rec = vec![
        "record",
        "--no-event",
        "--no-libcall",
        "-d",
        ours.to_str().unwrap(),
    ];
    rec.push(prog.to_str().unwrap());
    rec.extend_from_slice(args);
    utrace_in(tmp.path(), &rec).assert_success();

    // Two recordings: a leaf line depends on the other tasks' interleaving (`fold_leaves`).
    let by_task = |out: &str| normalize::fold_leaves(&normalize::by_task(out, Anchor::Main));
    let want = by_task(&util::uftrace_replay(&theirs, &[]).stdout);
    assert!(!want.is_empty(), "uftrace recorded nothing for {prog_name}");
    let by_uftrace = util::uftrace_replay(&ours, &[]);
    let by_utrace = util::utrace_replay(&ours, &[]);
    for (who, out) in [("uftrace", &by_uftrace), ("utrace", &by_utrace)] {
        let got = by_task(&out.stdout);
        assert!(
            want == got,
            "{prog_name}: `{who} replay` of utrace's data differs (- uftrace's data, + utrace's):\n{}\n{out}",
            normalize::diff(&want, &got)
        );
    }

    // live: the same trace, after the program's output.
    let mut live = vec![
        "live",
        "--no-event",
        "--no-libcall",
        "--no-pager",
        prog.to_str().unwrap(),
    ];
    live.extend_from_slice(args);
    let out = utrace_in(tmp.path(), &live);
    out.assert_success();
    let got = by_task(&out.stdout);
    assert!(
        want == got,
        "{prog_name}: `utrace live` differs:\n{}",
        normalize::diff(&want, &got)
    );
}

macro_rules! same_as_uftrace {
    ($($test:ident: $prog:literal, $mode:expr, $args:expr;)*) => {$(
        #[test]
        fn $test() {
            compare_recordings($prog, $mode, $args);
        }
    )*};
}

same_as_uftrace! {
    record_abc: "abc", Mode::Pg, &[];
    record_abc_fentry: "abc", Mode::Fentry, &[];
    record_abc_cyg: "abc", Mode::Cyg, &[];
    record_fib: "fib", Mode::Pg, &["7"];
    record_thread: "thread", Mode::Pg, &[];
    record_fork: "fork", Mode::Pg, &[];
    record_exec: "exec", Mode::Pg, &[];
    record_signal: "signal", Mode::Pg, &[];
    record_sleep: "sleep", Mode::Pg, &[];
    record_cxx: "cxx", Mode::Pg, &[];
}

/// cli.md §10: a non-zero exit gives the trace and status 1; a signal gives the warning first,
/// the trace with its remaining functions, and status 2.
#[test]
fn live_exit_statuses() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("ret.c");
    std::fs::write(
        &src,
        "#include <signal.h>\n#include <stdlib.h>\n\
         int f(void) { return 3; }\n\
         void die(int sig) { raise(sig); }\n\
         int main(int argc, char **argv) { if (argc > 1) die(atoi(argv[1])); return f(); }\n",
    )
    .unwrap();
    let prog = tmp.path().join("ret");
    let mut cc = Command::new("gcc");
    cc.args(["-pg", "-O0", "-fno-inline", "-o"])
        .arg(&prog)
        .arg(&src);
    util::run(cc).assert_success();
    let prog = prog.to_str().unwrap();

    // Without scheduling events: a pre-emption would add a line to the exact trace below.
    let out = utrace_in(
        tmp.path(),
        &["--no-pager", "--no-libcall", "--no-event", prog],
    );
    assert_status(&out, 1);
    assert!(out.stderr.is_empty(), "{out}");
    assert_eq!(
        normalize::by_task(&out.stdout, Anchor::Main),
        "main() {\n  f();\n} /* main */\n",
        "{out}"
    );

    let out = utrace_in(tmp.path(), &["--no-pager", "--no-libcall", prog, "10"]);
    assert_status(&out, 2);
    assert!(
        out.stderr
            .contains("WARN: child terminated by signal: 10: User defined signal 1\n"),
        "{out}"
    );
    assert!(out.stdout.contains("  die() {\n"), "{out}");
    assert!(
        out.stdout.contains("\n[1] die\n[0] main\n"),
        "remaining functions missing:\n{out}"
    );
}

/// `live` with record-time filters prints what uftrace's `live` prints.
#[test]
fn live_filters_like_uftrace() {
    if !util::need_uftrace("live_filters_like_uftrace") {
        return;
    }
    let prog = util::testprog("abc", Mode::Pg);
    let prog = prog.to_str().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let cases: &[&[&str]] = &[
        &["-F", "b"],
        &["-N", "b"],
        &["-D", "2"],
        &["-H", "b"],
        &["-C", "c"],
        &["-T", "b@depth=1"],
        &["-F", "a", "-N", "c"],
    ];
    let mut failures = Vec::new();
    for opts in cases {
        let mut args = vec!["--no-pager", "--no-libcall"];
        args.extend_from_slice(opts);
        args.push(prog);
        let mut cmd = Command::new(util::uftrace_bin());
        cmd.current_dir(tmp.path()).arg("--no-event").args(&args);
        let expected = util::run(cmd);
        // Without scheduling events, as uftrace is run.
        let actual = utrace_in(tmp.path(), &[&["--no-event"][..], &args].concat());
        let want = normalize::by_task(&expected.stdout, Anchor::Start);
        let got = normalize::by_task(&actual.stdout, Anchor::Start);
        if want != got || expected.status.code() != actual.status.code() {
            failures.push(format!(
                "live {}: (- uftrace, + utrace)\n{}\n{actual}",
                opts.join(" "),
                normalize::diff(&want, &got)
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A bare name is the file in the current directory when there is one (cli.md §3), even if
/// `$PATH` has a program of that name.
#[test]
fn bare_name_in_current_directory() {
    let tmp = tempfile::tempdir().unwrap();
    // By `cp`: a write descriptor of this process could leak into other tests' children and
    // make running the copy fail with ETXTBSY.
    let copied = Command::new("cp")
        .arg(util::testprog("abc", Mode::Pg))
        .arg(tmp.path().join("true"))
        .status()
        .unwrap();
    assert!(copied.success());
    let out = utrace_in(tmp.path(), &["--no-pager", "--no-libcall", "true"]);
    assert_status(&out, 0);
    assert!(out.stdout.contains("| main() {"), "{out}");
}

/// `--time` prints the times after the program's output; `--no-randomize-addr` loads the
/// program at the same address every time; `live --record` keeps its data in the data directory.
#[test]
fn other_record_options() {
    let prog = util::testprog("abc", Mode::Pg);
    let prog = prog.to_str().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let out = utrace_in(tmp.path(), &["record", "--time", "--no-libcall", prog]);
    assert_status(&out, 0);
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(lines.len(), 3, "{out}");
    assert!(
        lines[0].starts_with("elapsed time: ") && lines[0].ends_with(" sec"),
        "{out}"
    );
    assert_eq!(lines[0].len(), "elapsed time: ".len() + 20, "{out}");
    assert!(lines[1].starts_with(" system time: "), "{out}");
    assert!(lines[2].starts_with("   user time: "), "{out}");

    let first_map = |dir: &str| {
        let dir = tmp.path().join(dir);
        let map = std::fs::read_dir(&dir)
            .unwrap()
            .filter_map(|e| e.ok())
            .find(|e| e.file_name().to_string_lossy().starts_with("sid-"))
            .expect("a session map");
        let text = std::fs::read_to_string(map.path()).unwrap();
        text.lines().next().unwrap_or_default().to_string()
    };
    for dir in ["n1", "n2"] {
        let args = [
            "record",
            "--no-randomize-addr",
            "--no-libcall",
            "-d",
            dir,
            prog,
        ];
        assert_status(&utrace_in(tmp.path(), &args), 0);
    }
    assert_eq!(first_map("n1"), first_map("n2"));

    let out = utrace_in(
        tmp.path(),
        &[
            "live",
            "--record",
            "-d",
            "kept",
            "--no-pager",
            "--no-libcall",
            prog,
        ],
    );
    assert_status(&out, 0);
    assert!(out.stdout.contains("| main() {"), "{out}");
    assert!(tmp.path().join("kept/info").is_file());

    // --nop runs the program only.
    let nop = tempfile::tempdir().unwrap();
    let out = utrace_in(nop.path(), &["--nop", "--no-pager", prog]);
    assert_status(&out, 0);
    assert!(out.stdout.is_empty(), "{out}");
    assert!(std::fs::read_dir(nop.path()).unwrap().next().is_none());
}

/// `-v` prints the recorder's and the runtime's steps (`DOMAIN: message`, uftrace's domains);
/// `--logfile` sends them, and the warnings, to a file instead of stderr; `--debug-domain`
/// keeps the domains listed.
#[test]
fn verbose_steps_and_logfile() {
    let exe = util::testprog("abc", Mode::Pg);
    let exe = exe.to_str().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let steps = [
        "uftrace: running utrace v",
        "uftrace: checking binary ",
        "uftrace: using ",
        "mcount: initializing mcount library",
        "mcount: mcount setup done",
        "mcount: new session started: ",
        "mcount: mcount trace finished",
        "uftrace: child terminated with exit code: 0",
    ];
    let out = utrace_in(tmp.path(), &["record", "-v", "-d", "v.data", exe]);
    assert_status(&out, 0);
    for s in steps {
        assert!(out.stderr.contains(s), "no `{s}`:\n{out}");
    }
    let quiet = utrace_in(tmp.path(), &["record", "-d", "q.data", exe]);
    assert!(quiet.stderr.is_empty(), "{quiet}");

    let log = tmp.path().join("log.txt");
    let logfile = format!("--logfile={}", log.display());
    let out = utrace_in(tmp.path(), &["record", "-v", &logfile, "-d", "l.data", exe]);
    assert_status(&out, 0);
    assert!(out.stderr.is_empty(), "{out}");
    let text = std::fs::read_to_string(&log).unwrap();
    for s in steps {
        assert!(text.contains(s), "no `{s}` in the log file:\n{text}");
    }

    let out = utrace_in(
        tmp.path(),
        &["record", "--debug-domain=mcount", "-d", "m.data", exe],
    );
    assert!(out.stderr.contains("mcount: mcount setup done"), "{out}");
    assert!(!out.stderr.contains("uftrace: "), "{out}");

    // A warning of an analysis command goes to the log file too.
    let out = utrace_in(tmp.path(), &["replay", "-d", "none.data", &logfile]);
    assert_status(&out, 255);
    assert!(out.stderr.is_empty(), "{out}");
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(
        text.starts_with("WARN: cannot open record data: none.data"),
        "{text}"
    );

    let out = utrace_in(tmp.path(), &["record", "--debug-domain=bogus", exe]);
    assert_status(&out, 1);
    assert!(out.stderr.contains("unknown debug domain: bogus"), "{out}");
}

/// uftrace options utrace does not implement yet are refused with one line naming what is
/// missing, never silently ignored, and are not listed by `--help`.
#[test]
fn unsupported_options_are_refused() {
    let exe = util::testprog("abc", Mode::Pg);
    let exe = exe.to_str().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let help = utrace_in(tmp.path(), &["--help"]);
    for (opt, listed) in [
        (&["-e"][..], "--estimate-return"),
        (&["--format=html"], "--format"),
    ] {
        let mut args = vec!["record", "-d", "x.data"];
        args.extend_from_slice(opt);
        args.push(exe);
        let out = utrace_in(tmp.path(), &args);
        assert_status(&out, 1);
        assert!(
            out.stderr.starts_with("utrace: record\n ERROR: ")
                && out.stderr.contains(" is not supported yet: ")
                && out.stderr.lines().count() == 2,
            "{out}"
        );
        assert!(!tmp.path().join("x.data").exists(), "{out}");
        if !listed.is_empty() {
            assert!(!help.stdout.contains(listed), "{listed} in --help");
        }
    }
}

/// `live --list-event` lists the program's SDT events without running it, and `live --report`
/// prints the report, then the replay, each under uftrace's title, as uftrace's `live` does.
#[test]
fn live_report_and_list_event_like_uftrace() {
    if !util::need_uftrace("live_report_and_list_event_like_uftrace") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let sdt = util::testprog("sdt", Mode::Pg);
    let sdt = sdt.to_str().unwrap();
    let mut cmd = Command::new(util::uftrace_bin());
    cmd.current_dir(tmp.path())
        .args(["live", "--list-event", sdt]);
    let theirs = util::run(cmd);
    let ours = utrace_in(tmp.path(), &["live", "--list-event", sdt]);
    assert_status(&ours, 0);
    assert!(ours.stdout.contains("[SDT event] "), "{ours}");
    assert_eq!(ours.stdout, theirs.stdout, "{ours}");

    let prog = util::testprog("abc", Mode::Pg);
    let prog = prog.to_str().unwrap();
    let args = ["live", "--report", "--no-event", "--no-pager", prog];
    let mut cmd = Command::new(util::uftrace_bin());
    cmd.current_dir(tmp.path()).args(args);
    let theirs = util::run(cmd);
    let ours = utrace_in(tmp.path(), &args);
    assert_status(&ours, 0);
    // The titles, the report's function names, then the trace.
    let shape = |out: &str| {
        let (report, replay) = out
            .split_once("\n#\n# uftrace replay\n#\n")
            .unwrap_or_else(|| panic!("no replay title:\n{out}"));
        let report = report
            .strip_prefix("#\n# uftrace report\n#\n")
            .unwrap_or_else(|| panic!("no report title:\n{out}"));
        let mut names: Vec<String> = report
            .lines()
            .skip(2)
            .filter_map(|l| l.split_whitespace().last().map(str::to_string))
            .collect();
        names.sort();
        (names, normalize::by_task(replay, Anchor::Main))
    };
    assert_eq!(shape(&ours.stdout), shape(&theirs.stdout), "{ours}");
}
