//! One binary to install: `utrace` copied alone into an empty directory records and replays
//! with the libmcount.so built into it, written out to the user's cache directory on first
//! use (`tracer/src/record/embedded.rs`); what was planted at the cache path is replaced, not
//! followed; `--libmcount-path` still wins.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::util::{self, Mode, Output};

/// A `utrace` alone in `bin/`, with `HOME`, `XDG_CACHE_HOME` and `TMPDIR` of its own.
struct Alone {
    tmp: tempfile::TempDir,
    utrace: PathBuf,
}

impl Alone {
    fn new() -> Alone {
        let tmp = tempfile::tempdir().unwrap();
        for d in ["bin", "home", "cache", "tmp"] {
            std::fs::create_dir(tmp.path().join(d)).unwrap();
        }
        let utrace = tmp.path().join("bin/utrace");
        // Copied by `cp`, not by this process: a descriptor open for writing here would be
        // inherited by the children other tests fork meanwhile, and running the copy would
        // fail with ETXTBSY until they exec.
        let copied = Command::new("cp")
            .arg(util::utrace_bin())
            .arg(&utrace)
            .status()
            .unwrap();
        assert!(copied.success(), "cp of utrace failed");
        Alone { tmp, utrace }
    }

    fn path(&self, p: &str) -> PathBuf {
        self.tmp.path().join(p)
    }

    /// `utrace ARGS` in the temporary directory.
    fn run(&self, args: &[&str]) -> Output {
        let mut cmd = Command::new(&self.utrace);
        cmd.current_dir(self.tmp.path())
            .env("HOME", self.path("home"))
            .env("XDG_CACHE_HOME", self.path("cache"))
            .env("TMPDIR", self.path("tmp"))
            .args(args);
        util::run(cmd)
    }

    /// Records `abc` into `NAME.data` with `opts`, then checks its replay.
    fn record_and_replay(&self, name: &str, opts: &[&str]) {
        let prog = util::testprog("abc", Mode::Pg);
        let data = format!("{name}.data");
        let mut args = vec!["record", "--no-libcall", "-d", &data];
        args.extend(opts);
        args.push(prog.to_str().unwrap());
        self.run(&args).assert_success();
        let out = self.run(&["replay", "--no-pager", "-d", &data]);
        out.assert_success();
        for line in ["| main() {", "|   a() {", "|     b() {", "|       c();"] {
            assert!(out.stdout.contains(line), "{line} missing:\n{out}");
        }
    }

    /// The libmcount files in the cache directory `dir`.
    fn libs(&self, dir: &str) -> Vec<PathBuf> {
        let Ok(entries) = std::fs::read_dir(self.path(dir)) else {
            return Vec::new();
        };
        entries.map(|e| e.unwrap().path()).collect()
    }
}

fn mode(p: &Path) -> u32 {
    std::fs::symlink_metadata(p).unwrap().mode() & 0o7777
}

#[test]
fn utrace_alone_records_and_replays() {
    let alone = Alone::new();
    alone.record_and_replay("first", &[]);
    let libs = alone.libs("cache/utrace");
    assert_eq!(libs.len(), 1, "{libs:?}");
    let lib = &libs[0];
    let name = lib.file_name().unwrap().to_str().unwrap();
    assert!(
        name.starts_with("libmcount-") && name.ends_with(".so"),
        "{name}"
    );
    assert_eq!(mode(&alone.path("cache/utrace")), 0o700);
    assert_eq!(mode(lib), 0o644);
    assert!(std::fs::read(lib).unwrap().starts_with(b"\x7fELF"));
    let ino = std::fs::metadata(lib).unwrap().ino();

    // The second recording uses the same copy.
    alone.record_and_replay("second", &[]);
    assert_eq!(alone.libs("cache/utrace"), libs);
    assert_eq!(std::fs::metadata(lib).unwrap().ino(), ino);
    assert!(alone.libs("home/.cache/utrace").is_empty());
}

#[test]
fn planted_files_are_replaced_not_followed() {
    let alone = Alone::new();
    alone.record_and_replay("first", &[]);
    let lib = alone.libs("cache/utrace").remove(0);
    let good = std::fs::read(&lib).unwrap();

    // A symbolic link to another file: replaced by a file, its target untouched.
    let victim = alone.path("victim");
    std::fs::write(&victim, b"keep").unwrap();
    std::fs::remove_file(&lib).unwrap();
    std::os::unix::fs::symlink(&victim, &lib).unwrap();
    alone.record_and_replay("link", &[]);
    assert!(std::fs::symlink_metadata(&lib).unwrap().is_file());
    assert_eq!(std::fs::read(&victim).unwrap(), b"keep");
    assert_eq!(std::fs::read(&lib).unwrap(), good);

    // Other bytes under the name: replaced.
    std::fs::write(&lib, b"\x7fELF planted").unwrap();
    alone.record_and_replay("changed", &[]);
    assert_eq!(std::fs::read(&lib).unwrap(), good);

    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return;
    }
    // A file of another user holding the right bytes: replaced by one of ours.
    std::os::unix::fs::chown(&lib, Some(65534), Some(65534)).unwrap();
    alone.record_and_replay("foreign-file", &[]);
    assert_eq!(std::fs::metadata(&lib).unwrap().uid(), 0);

    // A cache directory of another user: not used; the next one ($HOME/.cache) is.
    let cache = alone.path("cache/utrace");
    std::os::unix::fs::chown(&cache, Some(65534), Some(65534)).unwrap();
    std::fs::remove_file(&lib).unwrap();
    alone.record_and_replay("foreign-dir", &[]);
    assert!(alone.libs("cache/utrace").is_empty());
    assert_eq!(alone.libs("home/.cache/utrace").len(), 1);
}

#[test]
fn unsafe_cache_directories_are_passed_over() {
    // SAFETY: geteuid has no preconditions.
    let uid = unsafe { libc::geteuid() };
    if uid == 0 {
        // Root's next directory is /var/cache/utrace, which a test must not touch; the unit
        // tests of `embedded` cover the checks.
        eprintln!("skipping unsafe_cache_directories_are_passed_over: run as root");
        return;
    }
    let alone = Alone::new();
    // XDG_CACHE_HOME writable by everyone, $HOME/.cache a link: the private temporary
    // directory is used.
    std::fs::set_permissions(alone.path("cache"), std::fs::Permissions::from_mode(0o777)).unwrap();
    std::os::unix::fs::symlink(alone.path("cache"), alone.path("home/.cache")).unwrap();
    alone.record_and_replay("tmp", &[]);
    assert!(alone.libs("cache/utrace").is_empty());
    let tmp_dir = format!("tmp/utrace-{uid}");
    assert_eq!(alone.libs(&tmp_dir).len(), 1);
    assert_eq!(mode(&alone.path(&tmp_dir)), 0o700);
}

#[test]
fn libmcount_path_still_wins() {
    let alone = Alone::new();
    let built = util::utrace_bin().parent().unwrap().to_path_buf();
    let opt = format!("--libmcount-path={}", built.display());
    alone.record_and_replay("given", &[&opt]);
    assert!(alone.libs("cache/utrace").is_empty(), "nothing written out");

    // Given but missing: an error, not the embedded copy.
    let empty = alone.path("home");
    let prog = util::testprog("abc", Mode::Pg);
    let opt = format!("--libmcount-path={}", empty.display());
    let out = alone.run(&["record", &opt, prog.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{out}");
    assert!(
        out.stderr
            .ends_with(" ERROR: utrace could not find libmcount.so for record-tracing\n"),
        "{out}"
    );
    assert!(alone.libs("cache/utrace").is_empty());
}
