//! `utrace record -p PID` when things go wrong around the attach: a thread that never
//! stops (a vfork parent), a refused attach (another user's process, as another user or as
//! root), a process that runs another program mid-session, libmcount.so replaced on disk
//! since an earlier attach. The process must go on unharmed and an earlier recording stay.
//! Helpers and test programs are [`crate::record_attach`]'s.

use crate::record_attach::{
    assert_replays, assert_unharmed, build, clean_run, utrace_pid, Running,
};
use crate::util;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

/// A thread that cannot stop (a vfork parent waits in the kernel until its child ends): the
/// attach gives up within seconds with a one-line error instead of hanging with the process
/// frozen, and the process goes on unharmed afterwards.
#[test]
fn a_thread_that_does_not_stop_gives_the_attach_up() {
    let tmp = tempfile::tempdir().unwrap();
    let exe = build_source(
        tmp.path(),
        "vfork",
        "#include <stdio.h>\n#include <unistd.h>\nint main(void){\n\
         printf(\"tick 2 \\n\"); fflush(stdout);\n\
         if (vfork() == 0) { sleep(12); _exit(0); }\n\
         printf(\"after\\n\"); return 0; }\n",
    );
    let run = Running::start(&exe, &[], tmp.path(), "vfork");
    // In the vfork: its child exists.
    let children = format!("/proc/{0}/task/{0}/children", run.pid());
    let start = Instant::now();
    while std::fs::read_to_string(&children)
        .unwrap_or_default()
        .trim()
        .is_empty()
    {
        assert!(start.elapsed() < Duration::from_secs(10), "no vfork");
        std::thread::sleep(Duration::from_millis(5));
    }
    let started = Instant::now();
    let mut cmd = Command::new(util::utrace_bin());
    cmd.args(["record", "-d", tmp.path().join("d").to_str().unwrap()])
        .args(["-p", &run.pid()]);
    let out = util::run_for(cmd, Duration::from_secs(11));
    assert!(!out.status.success(), "{out}");
    assert!(out.stderr.contains("does not stop"), "{out}");
    assert_eq!(out.stderr.matches("ERROR").count(), 1, "{out}");
    assert!(started.elapsed() < Duration::from_secs(11));
    let (status, stdout, err) = run.finish();
    assert!(status.success(), "{status}");
    assert_eq!(err, "");
    assert_eq!(stdout, "tick 2 \nafter\n");
}

/// A refused attach (another user's process) fails before the data directory is touched:
/// an earlier recording there stays as it was, with no `.old` copy. (Needs root, to run the
/// two sides as two other users.)
#[test]
fn a_refused_attach_leaves_the_data_directory_alone() {
    // SAFETY: getuid has no preconditions.
    if unsafe { libc::getuid() } != 0 {
        eprintln!("a_refused_attach_leaves_the_data_directory_alone: needs root: skipped");
        return;
    }
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().join("d");
    std::fs::create_dir(&d).unwrap();
    std::fs::write(d.join("marker"), "x").unwrap();
    for p in [tmp.path(), &d] {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o777)).unwrap();
    }
    let as_user = |uid: &str| {
        let mut c = Command::new("setpriv");
        c.args([
            &format!("--reuid={uid}"),
            &format!("--regid={uid}"),
            "--clear-groups",
        ]);
        c
    };
    let mut target = as_user("65534").args(["sleep", "30"]).spawn().unwrap();
    let mut cmd = as_user("65533");
    cmd.arg(util::utrace_bin())
        .args(["record", "-d", d.to_str().unwrap()])
        .args(["-p", &target.id().to_string()]);
    let out = util::run_for(cmd, Duration::from_secs(30));
    let _ = target.kill();
    let _ = target.wait();
    assert!(!out.status.success(), "{out}");
    assert!(out.stderr.contains("belongs to another user"), "{out}");
    let names: Vec<_> = std::fs::read_dir(tmp.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["d"], "the data directory was moved");
    let inside: Vec<_> = std::fs::read_dir(&d)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(inside, ["marker"]);
}

/// A process that runs another program (exec) during the session: the recording of what it
/// did before is kept and finished (once lost to "libmcount is not mapped"), with a warning.
#[test]
fn an_exec_during_the_session_ends_its_recording() {
    let tmp = tempfile::tempdir().unwrap();
    let exe = build_source(
        tmp.path(),
        "exec",
        "#include <stdio.h>\n#include <time.h>\n#include <unistd.h>\nint main(void){\n\
         for (int i = 0; i < 12; i++) { struct timespec ts = { 0, 100000000 };\n\
         printf(\"tick %d \\n\", i); fflush(stdout); nanosleep(&ts, 0); }\n\
         execl(\"/bin/sleep\", \"sleep\", \"4\", (char *)0); return 1; }\n",
    );
    let run = Running::start(&exe, &[], tmp.path(), "exec");
    let d = tmp.path().join("d");
    let out = utrace_pid(
        "record",
        &run.pid(),
        &["--duration=2s", "-d", d.to_str().unwrap()],
    );
    out.assert_success();
    assert!(out.stderr.contains("ran another program (exec)"), "{out}");
    assert_replays(&d, &["nanosleep", "printf"]);
    let (status, _, _) = run.finish();
    assert!(status.success());
}

/// libmcount.so replaced on disk since an earlier attach (its mapping says "(deleted)"): the
/// second attach still finds the copy mapped, reads its symbols from it, and records.
#[test]
fn attach_again_after_libmcount_was_replaced() {
    let tmp = tempfile::tempdir().unwrap();
    let lib = tmp.path().join("lib");
    std::fs::create_dir(&lib).unwrap();
    let built = util::utrace_bin().parent().unwrap().join("libmcount.so");
    std::fs::copy(&built, lib.join("libmcount.so")).unwrap();
    let prog = build("attach_work", tmp.path(), &[]);
    let run = Running::start(&prog, &["30"], tmp.path(), "replaced");
    let libpath = format!("--libmcount-path={}", lib.display());
    for i in 0..2 {
        if i == 1 {
            std::fs::copy(&built, lib.join("new.so")).unwrap();
            std::fs::rename(lib.join("new.so"), lib.join("libmcount.so")).unwrap();
            let maps = std::fs::read_to_string(format!("/proc/{}/maps", run.pid())).unwrap();
            assert!(maps.contains("libmcount.so (deleted)"), "{maps}");
        }
        let d = tmp.path().join(format!("d{i}"));
        let rec = utrace_pid(
            "record",
            &run.pid(),
            &[&libpath, "--duration=300ms", "-d", d.to_str().unwrap()],
        );
        rec.assert_success();
        assert_replays(&d, &["snprintf"]);
    }
}

/// Root attaching to another user's process: refused for now with a one-line error, and
/// libmcount writes nothing into the process's own stderr (it once printed "cannot write the
/// session map" there); the process runs on unharmed.
#[test]
fn root_refused_by_another_users_process_leaves_its_stderr_alone() {
    // SAFETY: getuid has no preconditions.
    if unsafe { libc::getuid() } != 0 {
        eprintln!(
            "root_refused_by_another_users_process_leaves_its_stderr_alone: needs root: skipped"
        );
        return;
    }
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempfile::tempdir().unwrap();
    std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let prog = build("attach_work", tmp.path(), &[]);
    let clean = clean_run(&prog, &["12"]);
    let run = Running::start(
        Path::new("setpriv"),
        &[
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            prog.to_str().unwrap(),
            "12",
        ],
        tmp.path(),
        "other",
    );
    let out = utrace_pid(
        "record",
        &run.pid(),
        &[
            "--duration=300ms",
            "-d",
            tmp.path().join("d").to_str().unwrap(),
        ],
    );
    assert!(!out.status.success(), "{out}");
    assert_eq!(out.stderr.matches("ERROR").count(), 1, "{out}");
    assert_unharmed(run.finish(), &clean.join().unwrap());
}

/// `CODE` built with `gcc -O2` as `DIR/NAME`.
fn build_source(dir: &Path, name: &str, code: &str) -> std::path::PathBuf {
    let src = dir.join(format!("{name}.c"));
    std::fs::write(&src, code).unwrap();
    let exe = dir.join(name);
    let built = Command::new("gcc")
        .args(["-O2", "-o"])
        .arg(&exe)
        .arg(&src)
        .status()
        .unwrap();
    assert!(built.success(), "gcc failed for {name}");
    exe
}
