//! Helpers shared by the integration tests: building `testprogs/` with gcc, finding the real
//! `utrace` binary, running it (and uftrace, the reference) with a timeout and a guard that
//! kills the child if a test panics.
//!
//! The output normalisation used to compare traces lives in `normalize.rs`.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// How long any spawned command may run. The test programs finish in milliseconds; the
/// generous limit only matters when the machine is busy compiling.
const TIMEOUT: Duration = Duration::from_secs(60);

/// The workspace root (`tests/..`).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ has a parent")
        .to_path_buf()
}

/// `testprogs/` in the workspace.
pub fn testprogs_src() -> PathBuf {
    workspace_root().join("testprogs")
}

/// `tests/` (this package's directory).
pub fn tests_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The directory holding the test executable's profile: `target/<profile>/deps/integration-…`
/// lives in `target/<profile>/deps`, so this is `target/<profile>`.
fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    let deps = exe.parent().expect("test executable has a parent");
    let dir = if deps.file_name() == Some(OsStr::new("deps")) {
        deps.parent().expect("deps has a parent")
    } else {
        deps
    };
    dir.to_path_buf()
}

/// The real `utrace` binary: `$UTRACE_BIN`, else `target/<profile>/utrace` next to the `deps/`
/// directory of this test executable.
pub fn utrace_bin() -> PathBuf {
    if let Some(path) = std::env::var_os("UTRACE_BIN") {
        return PathBuf::from(path);
    }
    let path = profile_dir().join("utrace");
    assert!(
        path.is_file(),
        "{} does not exist: build it first, e.g. `cargo build --release && cargo test --release \
         --workspace` (or point UTRACE_BIN at a utrace binary)",
        path.display()
    );
    path
}

/// The uftrace binary used as the reference: `$UFTRACE_BIN`, else `uftrace` from `$PATH`.
pub fn uftrace_bin() -> PathBuf {
    std::env::var_os("UFTRACE_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("uftrace"))
}

/// `UTRACE_BLESS=1`: the one way to regenerate the golden files. Every golden check
/// (`fixtures`, `analysis_golden`, `analysis_dump`) then rewrites its files from the installed
/// uftrace, never from utrace, instead of comparing.
pub fn bless() -> bool {
    let on = std::env::var("UTRACE_BLESS").as_deref() == Ok("1");
    assert!(
        !on || uftrace_available(),
        "UTRACE_BLESS=1 rewrites the goldens from uftrace, which is not installed"
    );
    on
}

/// Whether a working uftrace is installed (checked once per process).
pub fn uftrace_available() -> bool {
    static AVAILABLE: OnceLock<bool> = OnceLock::new();
    *AVAILABLE.get_or_init(|| {
        Command::new(uftrace_bin())
            .arg("--version")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .output()
            .map(|out| out.status.success() && out.stdout.starts_with(b"uftrace"))
            .unwrap_or(false)
    })
}

/// Returns `true` when a test that needs uftrace may go on. Without uftrace it prints a line
/// and returns `false` (the caller returns early), unless `UTRACE_REQUIRE_UFTRACE=1` (set in
/// CI), where a missing uftrace is a failure.
pub fn need_uftrace(test: &str) -> bool {
    if uftrace_available() {
        return true;
    }
    if std::env::var("UTRACE_REQUIRE_UFTRACE").as_deref() == Ok("1") {
        panic!("{test}: uftrace is not installed but UTRACE_REQUIRE_UFTRACE=1");
    }
    eprintln!("skipping {test}: uftrace is not installed (set UTRACE_REQUIRE_UFTRACE=1 to fail)");
    false
}

/// How a test program is compiled: the three ways gcc adds entry hooks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Mode {
    /// `-pg`: a call to `mcount` after the prologue.
    Pg,
    /// `-pg -mfentry`: a call to `__fentry__` before the prologue.
    Fentry,
    /// `-finstrument-functions`: `__cyg_profile_func_enter`/`_exit` calls.
    Cyg,
}

impl Mode {
    /// The name of the build subdirectory.
    pub fn dir_name(self) -> &'static str {
        match self {
            Mode::Pg => "pg",
            Mode::Fentry => "fentry",
            Mode::Cyg => "cyg",
        }
    }

    fn flags(self) -> &'static [&'static str] {
        match self {
            Mode::Pg => &["-pg"],
            Mode::Fentry => &["-pg", "-mfentry"],
            Mode::Cyg => &["-finstrument-functions"],
        }
    }
}

/// Flags every test program is built with, whatever the mode: no optimisation or inlining so
/// each C function is a traced call, and no builtins so `strlen` & co. stay library calls.
const COMMON_FLAGS: &[&str] = &[
    "-O0",
    "-g",
    "-fno-inline",
    "-fno-omit-frame-pointer",
    "-fno-builtin",
];

type BuildSlot = Arc<OnceLock<Result<PathBuf, String>>>;

/// Builds `testprogs/<name>.c` (or `.cc`) in `mode` into `target/testprogs/<mode>/<name>` and
/// returns its path. Each binary is compiled once per test process; concurrent tests asking for
/// the same binary wait for the first build. The compiler writes a uniquely named temporary file
/// that is then renamed, so several test processes never see a half-written binary.
pub fn testprog(name: &str, mode: Mode) -> PathBuf {
    testprog_with(name, mode, &[])
}

/// [`testprog`] linked with `link` options too (e.g. `-Wl,-z,now`), built as
/// `NAME.<options>` so that the variants do not overwrite each other.
pub fn testprog_with(name: &str, mode: Mode, link: &[&str]) -> PathBuf {
    static BUILDS: OnceLock<Mutex<HashMap<(String, Mode), BuildSlot>>> = OnceLock::new();
    let key = std::iter::once(name)
        .chain(link.iter().copied())
        .collect::<Vec<_>>()
        .join(" ");
    let slot = {
        let mut builds = BUILDS.get_or_init(Default::default).lock().unwrap();
        builds.entry((key, mode)).or_default().clone()
    };
    match slot.get_or_init(|| build(name, mode, link)) {
        Ok(path) => path.clone(),
        Err(err) => panic!("{err}"),
    }
}

fn build(name: &str, mode: Mode, link: &[&str]) -> Result<PathBuf, String> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);

    let src_dir = testprogs_src();
    let (src, compiler) = if src_dir.join(format!("{name}.cc")).is_file() {
        (src_dir.join(format!("{name}.cc")), "g++")
    } else {
        (src_dir.join(format!("{name}.c")), "gcc")
    };
    if !src.is_file() {
        return Err(format!(
            "no test program {name}.c or {name}.cc in {}",
            src_dir.display()
        ));
    }
    let out_dir = profile_dir()
        .parent()
        .expect("profile dir has a parent")
        .join("testprogs")
        .join(mode.dir_name());
    std::fs::create_dir_all(&out_dir)
        .map_err(|e| format!("cannot create {}: {e}", out_dir.display()))?;
    let out = if link.is_empty() {
        out_dir.join(name)
    } else {
        let tag: String = link
            .concat()
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
            .collect();
        out_dir.join(format!("{name}.{tag}"))
    };
    let tmp = out_dir.join(format!(
        ".{name}.tmp.{}.{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ));

    // `NAME_lib.c` (or `.cc`) is the shared library NAME loads: `libNAME_lib.so` beside it,
    // same mode, built first (with the options after `utrace-test: lib-link` in its first
    // line). A program whose source says `utrace-test: linked` is linked with it (found
    // through its run path); the others `dlopen` it.
    let mut link: Vec<String> = link.iter().map(|s| s.to_string()).collect();
    let lib_src = [".c", ".cc"]
        .iter()
        .map(|ext| src_dir.join(format!("{name}_lib{ext}")))
        .find(|p| p.is_file());
    if let Some(lib_src) = lib_src {
        let lib = out_dir.join(format!("lib{name}_lib.so"));
        let lib_compiler = if lib_src.extension().is_some_and(|e| e == "cc") {
            "g++"
        } else {
            "gcc"
        };
        let lib_text = std::fs::read_to_string(&lib_src).unwrap_or_default();
        let lib_link: Vec<&str> = lib_text
            .lines()
            .next()
            .and_then(|l| l.split_once("utrace-test: lib-link "))
            .map(|(_, rest)| {
                rest.split(')')
                    .next()
                    .unwrap_or("")
                    .split_whitespace()
                    .collect()
            })
            .unwrap_or_default();
        let result = Command::new(lib_compiler)
            .args(mode.flags())
            .args(COMMON_FLAGS)
            .args(["-shared", "-fPIC", "-o"])
            .arg(&tmp)
            .arg(&lib_src)
            .args(&lib_link)
            .output()
            .map_err(|e| format!("cannot run {lib_compiler}: {e}"))?;
        if !result.status.success() {
            return Err(format!(
                "{lib_compiler} failed on {}:\n{}",
                lib_src.display(),
                String::from_utf8_lossy(&result.stderr)
            ));
        }
        std::fs::rename(&tmp, &lib)
            .map_err(|e| format!("cannot rename {} to {}: {e}", tmp.display(), lib.display()))?;
        let source = std::fs::read_to_string(&src).unwrap_or_default();
        if source.contains("utrace-test: linked") {
            link.push(format!("-L{}", out_dir.display()));
            link.push(format!("-l{name}_lib"));
            link.push(format!("-Wl,-rpath,{}", out_dir.display()));
        }
    }

    let result = Command::new(compiler)
        .args(mode.flags())
        .args(COMMON_FLAGS)
        .arg("-o")
        .arg(&tmp)
        .arg(&src)
        .args(&link)
        .arg("-lpthread")
        .output()
        .map_err(|e| format!("cannot run {compiler}: {e}"))?;
    if !result.status.success() {
        let _ = std::fs::remove_file(&tmp);
        return Err(format!(
            "{compiler} failed on {}:\n{}",
            src.display(),
            String::from_utf8_lossy(&result.stderr)
        ));
    }
    std::fs::rename(&tmp, &out)
        .map_err(|e| format!("cannot rename {} to {}: {e}", tmp.display(), out.display()))?;
    Ok(out)
}

/// Kills and reaps the child when dropped, so a failing (panicking) test never leaves a traced
/// program or a hung tracer behind.
pub struct ChildGuard(Option<Child>);

impl ChildGuard {
    pub fn new(child: Child) -> Self {
        Self(Some(child))
    }

    pub fn child_mut(&mut self) -> &mut Child {
        self.0.as_mut().expect("child present until drop")
    }
}

impl Drop for ChildGuard {
    fn drop(&mut self) {
        if let Some(mut child) = self.0.take() {
            if let Ok(None) = child.try_wait() {
                let _ = child.kill();
            }
            let _ = child.wait();
        }
    }
}

/// The result of one finished command.
#[derive(Debug)]
pub struct Output {
    /// The command line, for messages.
    pub command: String,
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

impl Output {
    /// Panics with the full output unless the command exited with status 0.
    pub fn assert_success(&self) -> &Self {
        assert!(
            self.status.success(),
            "command failed ({}):\n{self}",
            self.status
        );
        self
    }
}

impl std::fmt::Display for Output {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "$ {}", self.command)?;
        writeln!(f, "--- status: {}", self.status)?;
        writeln!(f, "--- stdout:\n{}", self.stdout)?;
        write!(f, "--- stderr:\n{}", self.stderr)
    }
}

/// `uftrace record --no-event OPTS -d DIR PROG ARGS` (the reference) or `utrace record --no-event OPTS -d
/// DIR PROG ARGS`, whatever the exit status.
pub fn record_with(uftrace: bool, dir: &Path, prog: &Path, args: &[&str], opts: &[&str]) -> Output {
    let mut cmd = if uftrace {
        let mut cmd = Command::new(uftrace_bin());
        cmd.args(["record", "--no-event"]);
        cmd
    } else {
        let mut cmd = Command::new(utrace_bin());
        cmd.args(["record", "--no-event"]);
        cmd
    };
    cmd.args(opts).arg("-d").arg(dir).arg(prog).args(args);
    run(cmd)
}

/// Held by a test while it records with `-k`: tracefs is one per machine, and two sessions at
/// once would undo each other's settings.
pub fn tracefs_lock() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// Runs `cmd` with stdin closed, capturing stdout and stderr, killing it after [`TIMEOUT`].
pub fn run(cmd: Command) -> Output {
    run_for(cmd, TIMEOUT)
}

/// [`run`] with another time limit.
pub fn run_for(mut cmd: Command, limit: Duration) -> Output {
    let command = describe(&cmd);
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let child = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run `{command}`: {e}"));
    let mut guard = ChildGuard::new(child);

    // Drain both pipes on their own threads so a chatty child never blocks on a full pipe.
    let child = guard.child_mut();
    let stdout = drain(child.stdout.take().expect("piped stdout"));
    let stderr = drain(child.stderr.take().expect("piped stderr"));

    let start = Instant::now();
    let status = loop {
        if let Some(status) = guard.child_mut().try_wait().expect("try_wait") {
            break status;
        }
        if start.elapsed() > limit {
            drop(guard);
            panic!("`{command}` did not finish within {limit:?}; killed");
        }
        std::thread::sleep(Duration::from_millis(2));
    };
    Output {
        command,
        status,
        stdout: stdout.join().expect("stdout reader"),
        stderr: stderr.join().expect("stderr reader"),
    }
}

fn drain(mut pipe: impl Read + Send + 'static) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = pipe.read_to_end(&mut bytes);
        String::from_utf8_lossy(&bytes).into_owned()
    })
}

fn describe(cmd: &Command) -> String {
    let mut words = vec![cmd.get_program().to_string_lossy().into_owned()];
    words.extend(cmd.get_args().map(|a| a.to_string_lossy().into_owned()));
    words.join(" ")
}

/// `uftrace record --no-event -d DIR RECORD_OPTS PROG ARGS`; panics if recording fails.
pub fn uftrace_record(dir: &Path, record_opts: &[&str], prog: &Path, args: &[&str]) -> Output {
    let mut cmd = Command::new(uftrace_bin());
    cmd.arg("record")
        .arg("--no-event")
        .arg("-d")
        .arg(dir)
        .args(record_opts)
        .arg(prog)
        .args(args);
    let out = run(cmd);
    out.assert_success();
    out
}

/// `uftrace replay --no-pager -d DIR OPTS`.
pub fn uftrace_replay(dir: &Path, opts: &[&str]) -> Output {
    let mut cmd = Command::new(uftrace_bin());
    cmd.arg("replay")
        .arg("--no-pager")
        .arg("-d")
        .arg(dir)
        .args(opts);
    run(cmd)
}

/// `utrace replay -d DIR --no-pager OPTS`.
pub fn utrace_replay(dir: &Path, opts: &[&str]) -> Output {
    let mut cmd = Command::new(utrace_bin());
    cmd.arg("replay")
        .arg("-d")
        .arg(dir)
        .arg("--no-pager")
        .args(opts);
    run(cmd)
}

/// Compares `uftrace replay` and `utrace replay` of utrace's data directory `ours`, both
/// reduced by `reduce`, with `want` (uftrace's replay of its own recording, reduced alike);
/// returns one message per difference, headed by `what`.
pub fn compare_replays(
    what: &str,
    want: &str,
    ours: &Path,
    reduce: impl Fn(&str) -> String,
) -> Vec<String> {
    let mut failures = Vec::new();
    for (who, out) in [
        ("uftrace", uftrace_replay(ours, &[])),
        ("utrace", utrace_replay(ours, &[])),
    ] {
        let got = reduce(&out.stdout);
        if want != got {
            failures.push(format!(
                "{what}: `{who} replay` of utrace's data differs (- uftrace's data, + utrace's):\n{}\n{out}",
                crate::normalize::diff(want, &got)
            ));
        }
    }
    failures
}

/// Replaces hexadecimal numbers of six digits or more (addresses) with `0xADDR`.
pub fn mask_addresses(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find("0x") {
        out.push_str(&rest[..i]);
        let digits = rest[i + 2..]
            .bytes()
            .take_while(u8::is_ascii_hexdigit)
            .count();
        if digits >= 6 {
            out.push_str("0xADDR");
        } else {
            out.push_str(&rest[i..i + 2 + digits]);
        }
        rest = &rest[i + 2 + digits..];
    }
    out.push_str(rest);
    out
}

/// Fails with every mismatch collected by a differential test, counted.
pub fn assert_no_failures(failures: &[String]) {
    assert!(
        failures.is_empty(),
        "{} mismatch(es):\n\n{}",
        failures.len(),
        failures.join("\n\n")
    );
}

/// Where tracefs is mounted (`record -k` mounts it there when it is not).
pub const TRACEFS: &str = "/sys/kernel/tracing";

/// Whether the tests run as root.
pub fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// Whether `record -k` can record the tracepoint `event` (`raw_syscalls/sys_enter`) here: root,
/// and tracefs (mounted here as `record -k` would) has it.
pub fn kernel_event_possible(event: &str) -> bool {
    if !is_root() {
        return false;
    }
    if !Path::new(TRACEFS).join("trace").exists() {
        let _ = Command::new("mount")
            .args(["-t", "tracefs", "nodev", TRACEFS])
            .status();
    }
    Path::new(TRACEFS)
        .join("events")
        .join(event)
        .join("format")
        .exists()
}
