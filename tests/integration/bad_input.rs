//! Broken data directories: `utrace replay` must fail the way uftrace 0.13 does (same exit
//! status, a one-line reason on stderr) and must never panic or die of a signal.
//!
//! Each test copies the committed `abc` fixture into a temporary directory and breaks one thing.
//! uftrace's behaviour, observed on 0.13, is quoted above each test.

use std::path::{Path, PathBuf};

use crate::normalize;
use crate::util::{self, Output};

/// A private copy of `tests/fixtures/abc`.
struct Copy {
    _tmp: tempfile::TempDir,
    dir: PathBuf,
}

fn copy_abc() -> Copy {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("data");
    std::fs::create_dir(&dir).expect("create data dir");
    let src = util::tests_dir().join("fixtures").join("abc");
    for entry in std::fs::read_dir(&src).expect("read fixture dir") {
        let entry = entry.expect("dir entry");
        std::fs::copy(entry.path(), dir.join(entry.file_name())).expect("copy fixture file");
    }
    Copy { _tmp: tmp, dir }
}

/// The only file in `dir` whose name ends with `suffix`.
fn file_ending(dir: &Path, suffix: &str) -> PathBuf {
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("read dir")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.to_string_lossy().ends_with(suffix))
        .collect();
    assert_eq!(
        found.len(),
        1,
        "expected one *{suffix} in {}",
        dir.display()
    );
    found.pop().unwrap()
}

/// Deterministic junk (a linear congruential generator), so failures are reproducible.
fn junk(len: usize, seed: u64) -> Vec<u8> {
    let mut state = seed;
    (0..len)
        .map(|_| {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (state >> 56) as u8
        })
        .collect()
}

/// Checks what every bad input must satisfy and returns the output for further checks.
fn replay_fails(dir: &Path, want_status: i32, want_stderr: &str) -> Output {
    let out = util::utrace_replay(dir, &[]);
    assert!(!out.stderr.contains("panicked"), "utrace panicked:\n{out}");
    assert_eq!(
        out.status.code(),
        Some(want_status),
        "wrong exit status:\n{out}"
    );
    assert!(
        out.stderr.contains(want_stderr),
        "stderr should mention `{want_stderr}`:\n{out}"
    );
    out
}

/// `WARN: cannot open record data: /nonexistent: No such file or directory`, exit 255.
#[test]
fn missing_dir() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let out = replay_fails(
        &tmp.path().join("nonexistent"),
        255,
        "cannot open record data",
    );
    assert_eq!(out.stderr.lines().count(), 1, "one line on stderr:\n{out}");
    assert!(out.stdout.is_empty(), "nothing on stdout:\n{out}");
}

/// `WARN: cannot open record data: DIR: Invalid argument`, exit 255.
#[test]
fn empty_dir() {
    let tmp = tempfile::tempdir().expect("tempdir");
    replay_fails(tmp.path(), 255, "cannot open record data");
}

/// `WARN: cannot open record data: DIR: No data available`, exit 255.
#[test]
fn missing_task_txt() {
    let copy = copy_abc();
    std::fs::remove_file(copy.dir.join("task.txt")).unwrap();
    replay_fails(&copy.dir, 255, "cannot open record data");
}

/// `WARN: cannot open record data: DIR: No data available`, exit 255.
#[test]
fn missing_dat() {
    let copy = copy_abc();
    std::fs::remove_file(file_ending(&copy.dir, ".dat")).unwrap();
    replay_fails(&copy.dir, 255, "cannot open record data");
}

/// A zero-length `<tid>.dat`: as if there were none (exit 255).
#[test]
fn empty_dat() {
    let copy = copy_abc();
    std::fs::write(file_ending(&copy.dir, ".dat"), b"").unwrap();
    replay_fails(&copy.dir, 255, "cannot open record data");
}

/// `ERROR: cannot open maps file: DIR/sid-….map: No such file or directory`, exit 1.
#[test]
fn missing_map() {
    let copy = copy_abc();
    std::fs::remove_file(file_ending(&copy.dir, ".map")).unwrap();
    replay_fails(&copy.dir, 1, "ERROR:");
}

/// `ERROR: invalid magic string found!`, exit 1.
#[test]
fn corrupted_info() {
    let copy = copy_abc();
    std::fs::write(copy.dir.join("info"), junk(900, 1)).unwrap();
    replay_fails(&copy.dir, 1, "ERROR:");
}

/// `ERROR: cannot read header data`, exit 1.
#[test]
fn truncated_info() {
    let copy = copy_abc();
    let info = std::fs::read(copy.dir.join("info")).unwrap();
    std::fs::write(copy.dir.join("info"), &info[..20]).unwrap();
    replay_fails(&copy.dir, 1, "ERROR:");
}

/// A `.dat` cut in the middle of a record: uftrace replays the complete records, reports the
/// open functions as remaining and exits 0.
#[test]
fn truncated_dat() {
    let copy = copy_abc();
    let dat = file_ending(&copy.dir, ".dat");
    let tid = dat.file_stem().unwrap().to_string_lossy().into_owned();
    // 6 whole records (16 bytes each) and 4 bytes of the 7th: __monstartup, __cxa_atexit,
    // main and a entries.
    let bytes = std::fs::read(&dat).unwrap();
    std::fs::write(&dat, &bytes[..100]).unwrap();

    let out = replay_fails(&copy.dir, 0, "");
    let expected = format!(
        "__monstartup();\n__cxa_atexit();\nmain() {{\n  a() {{\n\n\
         uftrace stopped tracing with remaining functions\n\
         ================================================\ntask: {tid}\n[1] a\n[0] main\n\n"
    );
    assert_eq!(normalize::whole(&out.stdout), expected, "{out}");
}

/// A `.dat` of random bytes: uftrace prints `WARN: invalid rstack read` and exits 0. utrace
/// may decide otherwise, but it must exit normally.
#[test]
fn garbage_dat() {
    let copy = copy_abc();
    let dat = file_ending(&copy.dir, ".dat");
    let len = std::fs::metadata(&dat).unwrap().len() as usize;
    for seed in 1..=4 {
        std::fs::write(&dat, junk(len, seed)).unwrap();
        let out = util::utrace_replay(&copy.dir, &[]);
        assert!(
            !out.stderr.contains("panicked"),
            "utrace panicked (seed {seed}):\n{out}"
        );
        assert!(
            out.status.code().is_some(),
            "killed by a signal (seed {seed}):\n{out}"
        );
    }
}

/// Garbage `.sym` and map files must not crash the symbol loader.
#[test]
fn garbage_symbols() {
    let copy = copy_abc();
    std::fs::write(file_ending(&copy.dir, "abc.sym"), junk(700, 7)).unwrap();
    std::fs::write(file_ending(&copy.dir, ".map"), junk(2000, 8)).unwrap();
    let out = util::utrace_replay(&copy.dir, &[]);
    assert!(!out.stderr.contains("panicked"), "utrace panicked:\n{out}");
    assert!(out.status.code().is_some(), "killed by a signal:\n{out}");
}

/// A function pattern that does not compile is an error naming the option, before anything
/// is read or run (uftrace 0.13 warns, drops the filter and prints the whole trace).
#[test]
fn invalid_patterns_are_errors() {
    let data = copy_abc();
    for (cmd, opts) in [
        ("replay", &["-F", "("][..]),
        ("report", &["-N", "a["]),
        ("graph", &["-T", "b(@depth=1"]),
        ("dump", &["-C", "c)"]),
        ("replay", &["-A", "x(@arg1"]),
    ] {
        let mut c = std::process::Command::new(util::utrace_bin());
        c.arg(cmd).arg("-d").arg(&data.dir).args(opts);
        let out = util::run(c);
        assert_eq!(out.status.code(), Some(1), "{out}");
        assert!(out.stdout.is_empty(), "{out}");
        assert!(
            out.stderr
                .contains(&format!("invalid pattern in {}", opts[0])),
            "{out}"
        );
    }
    let mut c = std::process::Command::new(util::utrace_bin());
    let tmp = tempfile::tempdir().unwrap();
    c.arg("record")
        .arg("-d")
        .arg(tmp.path().join("d"))
        .args(["-F", "("])
        .arg("/bin/true");
    let out = util::run(c);
    assert_eq!(out.status.code(), Some(1), "{out}");
    assert!(!tmp.path().join("d").exists(), "{out}");
}
