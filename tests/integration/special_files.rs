//! Special files in place of each file of a data directory: a symlink to `/dev/zero` or to
//! `/dev/urandom`, a FIFO, a directory. Every analysis command (`replay`, `report`, `graph`,
//! `info`, `dump`) must finish at once (a FIFO must not block it in `open()`), stay small (no
//! endless read of `/dev/zero`), never panic, and name the file:
//!
//! * `info`, `task.txt`, `sid-*.map` are needed: a fatal `ERROR: <file>: not a regular file`,
//!   status 1;
//! * the others are optional, as for uftrace: a `<tid>.dat` is left out with `WARN: <file>: …`
//!   and the other threads are shown (with none left: `No data available`, status 255);
//!   a `.sym`, `.dbg`, `default.opts`, `extern.dat` or kernel file is ignored with a `WARN:`
//!   line naming it, by the commands that read it.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::bounded::{self, Bounded};
use crate::util;

/// The analysis commands, with the options that make them read everything.
pub const COMMANDS: &[&[&str]] = &[&["replay"], &["report"], &["graph"], &["info"], &["dump"]];

/// A run that takes longer than this hung (they take milliseconds).
pub const TIME_LIMIT: Duration = Duration::from_secs(5);
/// The address space each run gets: reading `/dev/zero` hits it within a second.
pub const AS_LIMIT: u64 = 1 << 30;
/// The peak resident set no run may exceed (utrace needs a few MiB on these directories).
const MAX_RSS_KIB: u64 = 128 * 1024;

/// What a file is replaced with.
#[derive(Debug, Clone, Copy)]
pub enum Special {
    Zero,
    Urandom,
    Fifo,
    Dir,
}

pub const SPECIALS: [Special; 4] = [Special::Zero, Special::Urandom, Special::Fifo, Special::Dir];

/// Replaces `path` (if present) with `special`.
pub fn make_special(path: &Path, special: Special) {
    if path.is_dir() {
        std::fs::remove_dir_all(path).expect("remove dir");
    } else if path.symlink_metadata().is_ok() {
        std::fs::remove_file(path).expect("remove file");
    }
    match special {
        Special::Zero => std::os::unix::fs::symlink("/dev/zero", path).expect("symlink"),
        Special::Urandom => std::os::unix::fs::symlink("/dev/urandom", path).expect("symlink"),
        Special::Dir => std::fs::create_dir(path).expect("mkdir"),
        Special::Fifo => {
            let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).expect("path");
            // SAFETY: `c` is a NUL-terminated path that outlives the call.
            let r = unsafe { libc::mkfifo(c.as_ptr(), 0o600) };
            assert_eq!(r, 0, "mkfifo: {}", std::io::Error::last_os_error());
        }
    }
}

/// A private copy of `tests/fixtures/<name>` in `tmp`.
pub fn copy_fixture(tmp: &Path, name: &str) -> PathBuf {
    let dir = tmp.join(name);
    std::fs::create_dir(&dir).expect("create data dir");
    let src = util::tests_dir().join("fixtures").join(name);
    for entry in std::fs::read_dir(&src).expect("read fixture dir") {
        let entry = entry.expect("dir entry");
        std::fs::copy(entry.path(), dir.join(entry.file_name())).expect("copy fixture file");
    }
    dir
}

/// `utrace CMD -d DIR --no-pager`, bounded in time and memory.
pub fn run_utrace(cmd: &[&str], dir: &Path) -> Bounded {
    let mut c = Command::new(util::utrace_bin());
    c.args(cmd).arg("-d").arg(dir).arg("--no-pager");
    bounded::run(c, TIME_LIMIT, AS_LIMIT)
}

/// What every run must satisfy, whatever it was given; returns the failures.
fn check_sane(out: &Bounded) -> Vec<String> {
    let mut bad = Vec::new();
    if out.hung() {
        bad.push("hung".to_string());
    }
    if out.panicked() {
        bad.push("panicked".to_string());
    }
    if let Some(sig) = out.signal() {
        bad.push(format!("killed by signal {sig}"));
    }
    if out.out_of_memory() {
        bad.push("ran out of memory".to_string());
    }
    if out.max_rss_kib > MAX_RSS_KIB {
        bad.push(format!("peak RSS {} KiB", out.max_rss_kib));
    }
    bad
}

/// How a command must react to the replaced file.
#[derive(Debug, Clone, Copy)]
enum Want {
    /// `ERROR: <file>: …` (one ERROR line, naming it), status 1.
    Fatal,
    /// `WARN: <file>: …`, status 0.
    Warn,
    /// Nothing to say (the command does not read the file), status 0.
    Quiet,
    /// `WARN: <file>: …`, then `WARN: cannot open record data: …`, status 255.
    NoData,
}

fn check_want(out: &Bounded, file: &str, want: Want) -> Vec<String> {
    let mut bad = check_sane(out);
    let naming = |prefix: &str| {
        out.stderr
            .lines()
            .filter(|l| l.trim_start().starts_with(prefix) && l.contains(file))
            .count()
    };
    let errors = out.stderr.lines().filter(|l| l.contains("ERROR:")).count();
    let (code, ok) = match want {
        Want::Fatal => (1, errors == 1 && naming("ERROR:") == 1),
        Want::Warn => (0, errors == 0 && naming("WARN:") == 1),
        Want::Quiet => (0, errors == 0 && naming("WARN:") == 0),
        Want::NoData => (
            255,
            errors == 0 && naming("WARN:") == 1 && out.stderr.contains("No data available"),
        ),
    };
    if out.code() != Some(code) {
        bad.push(format!("status {:?}, not {code}", out.code()));
    }
    if !ok {
        bad.push(format!("stderr is not a {want:?} message naming {file}"));
    }
    bad
}

/// Replaces `file` of fixture `fixture` (prepared by `prepare`) by each special file and runs
/// each command; `want` says what each command must do.
fn replace_and_run(
    fixture: &str,
    prepare: fn(&Path),
    file: &str,
    want: impl Fn(&str) -> Want,
) -> Vec<(Bounded, Vec<String>)> {
    let tmp = tempfile::tempdir().expect("tempdir");
    let base = copy_fixture(tmp.path(), fixture);
    prepare(&base);
    let mut runs = Vec::new();
    for special in SPECIALS {
        make_special(&base.join(file), special);
        for cmd in COMMANDS {
            let out = run_utrace(cmd, &base);
            let bad = check_want(&out, file, want(cmd[0]));
            runs.push((out, bad));
        }
    }
    runs
}

fn assert_all(runs: Vec<(Bounded, Vec<String>)>) {
    let failures: Vec<String> = runs
        .into_iter()
        .filter(|(_, bad)| !bad.is_empty())
        .map(|(out, bad)| format!("{}\n{out}", bad.join(", ")))
        .collect();
    assert!(
        failures.is_empty(),
        "{} failures:\n\n{}",
        failures.len(),
        failures.join("\n\n")
    );
}

fn nothing(_: &Path) {}

/// The only `*.map` of the abc fixture.
const ABC_MAP: &str = "sid-0c12780f44d93648.map";

#[test]
fn info() {
    assert_all(replace_and_run("abc", nothing, "info", |_| Want::Fatal));
}

#[test]
fn task_txt() {
    assert_all(replace_and_run("abc", nothing, "task.txt", |_| Want::Fatal));
}

#[test]
fn map() {
    assert_all(replace_and_run("abc", nothing, ABC_MAP, |_| Want::Fatal));
}

/// Symbols are read by the commands that name functions (`info` does not, without
/// `--symbols`): those warn and show addresses (or the ELF file's symbols).
#[test]
fn sym() {
    let want = |cmd: &str| {
        if cmd == "info" {
            Want::Quiet
        } else {
            Want::Warn
        }
    };
    assert_all(replace_and_run("abc", nothing, "abc.sym", want));
}

/// `.dbg` files give the recorded argument formats: read by the commands that show arguments.
#[test]
fn dbg() {
    let want = |cmd: &str| {
        if cmd == "info" {
            Want::Quiet
        } else {
            Want::Warn
        }
    };
    assert_all(replace_and_run("fib-args", nothing, "fib.dbg", want));
}

#[test]
fn default_opts() {
    assert_all(replace_and_run("abc", nothing, "default.opts", |_| {
        Want::Warn
    }));
}

#[test]
fn extern_dat() {
    assert_all(replace_and_run("abc", nothing, "extern.dat", |_| {
        Want::Warn
    }));
}

/// One thread of three left out: the others are shown.
#[test]
fn dat_of_one_thread() {
    let mut runs = replace_and_run("thread", nothing, "20261.dat", |_| Want::Warn);
    for (out, bad) in &mut runs {
        if out.command.contains(" replay ") && !out.stdout.contains("20262") {
            bad.push("thread 20262 not replayed".to_string());
        }
    }
    assert_all(runs);
}

/// The only thread left out: nothing to show, as uftrace says.
#[test]
fn dat_of_the_only_thread() {
    assert_all(replace_and_run("abc", nothing, "20182.dat", |_| {
        Want::NoData
    }));
}

fn add_kernel(dir: &Path) {
    crate::kernel_replay::add_kernel_data(dir, 20182);
}

#[test]
fn kernel_files() {
    for file in [
        "kernel_header",
        "kernel-cpu0.dat",
        "kernel-cpu1.dat",
        "kallsyms",
    ] {
        assert_all(replace_and_run("abc", add_kernel, file, |_| Want::Warn));
    }
}

/// A symlink to a regular file is read as that file.
#[test]
fn symlinks_to_regular_files_are_read() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let plain = copy_fixture(tmp.path(), "abc");
    let linked = tmp.path().join("linked");
    std::fs::create_dir(&linked).expect("mkdir");
    for entry in std::fs::read_dir(&plain).expect("read dir") {
        let entry = entry.expect("entry");
        std::os::unix::fs::symlink(entry.path(), linked.join(entry.file_name())).expect("link");
    }
    for cmd in COMMANDS {
        let want = run_utrace(cmd, &plain);
        let got = run_utrace(cmd, &linked);
        let bad = check_sane(&got);
        assert!(bad.is_empty(), "{}\n{got}", bad.join(", "));
        assert_eq!(got.code(), Some(0), "{got}");
        assert!(got.stderr.is_empty(), "{got}");
        assert_eq!(
            got.stdout.replace(&*linked.to_string_lossy(), "DIR"),
            want.stdout.replace(&*plain.to_string_lossy(), "DIR"),
            "{got}"
        );
    }
}
