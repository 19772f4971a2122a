//! The libmcount.so built into `utrace` (tracer/build.rs), written out on first use so that
//! the `utrace` binary alone is a working tracer (`cargo install --path tracer`). The Python
//! script engine (`script::python`) is written out the same way, by [`install_library`].
//!
//! The copy goes to a per-user cache directory, the first of these that is usable:
//! `$XDG_CACHE_HOME/utrace`, `$HOME/.cache/utrace`, for root `/var/cache/utrace`, and last a
//! private `$TMPDIR/utrace-<uid>` (for a `$HOME` that is missing or read-only). The file is
//! `libmcount-<hash>.so`, named by a hash of its bytes, so that versions of utrace do not
//! overwrite each other's copy.
//!
//! The recorder often runs as root and the library it preloads runs inside every traced
//! process, so nothing another user could have planted is used:
//! - every directory on the way must belong to root or to this user and be writable by no one
//!   else (unless sticky, as `/tmp` is), checked before anything is created in it; the cache
//!   directory itself must belong to this user and is made 0700 (0755 for `/var/cache/utrace`,
//!   so that a program that drops its privileges and then execs can still load it);
//! - the file is opened without following a symbolic link and used only when it is a regular
//!   file of this user with one name, writable by no one else, and holds exactly the embedded
//!   bytes (compared in full on every run); anything else is replaced: the bytes are written
//!   to a new file (`O_CREAT|O_EXCL|O_NOFOLLOW`) and renamed over the name (a rename replaces
//!   a planted link itself, never its target), then checked again;
//! - a directory on a `noexec` mount, or whose path would be split in `LD_PRELOAD` (a space
//!   or a colon), is passed over for the next one.

use anyhow::bail;
use std::ffi::OsString;
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// The bytes of libmcount.so, built with this `utrace`.
pub static LIBMCOUNT_SO: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/libmcount.so"));

/// Mode of the file written.
const FILE_MODE: u32 = 0o644;

/// FNV-1a, 64 bits: names the file after its content (a name only: the content is compared
/// in full before use).
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// A cache directory to try: `dir`, made with `mode`, when `base` (a directory above it) exists:
/// utrace makes no home directory.
#[derive(Debug, PartialEq)]
struct Candidate {
    dir: PathBuf,
    mode: u32,
    base: PathBuf,
}

/// The cache directories to try, in order.
fn candidates(
    euid: u32,
    xdg: Option<OsString>,
    home: Option<OsString>,
    tmp: PathBuf,
) -> Vec<Candidate> {
    let absolute = |v: Option<OsString>| v.map(PathBuf::from).filter(|p| p.is_absolute());
    let mut dirs = Vec::new();
    if let Some(xdg) = absolute(xdg) {
        // $XDG_CACHE_HOME itself is made when missing (as the XDG rules say), not above it.
        let base = xdg.parent().unwrap_or(&xdg).to_path_buf();
        let dir = xdg.join("utrace");
        dirs.push(Candidate {
            dir,
            mode: 0o700,
            base,
        });
    }
    if let Some(home) = absolute(home) {
        let dir = home.join(".cache/utrace");
        dirs.push(Candidate {
            dir,
            mode: 0o700,
            base: home,
        });
    }
    if euid == 0 {
        let dir = PathBuf::from("/var/cache/utrace");
        let base = PathBuf::from("/var/cache");
        dirs.push(Candidate {
            dir,
            mode: 0o755,
            base,
        });
    }
    let dir = tmp.join(format!("utrace-{euid}"));
    dirs.push(Candidate {
        dir,
        mode: 0o700,
        base: tmp,
    });
    dirs
}

/// Writes the embedded libmcount.so out (or finds the copy written before) and returns its
/// path.
pub fn install() -> anyhow::Result<PathBuf> {
    install_library("libmcount", LIBMCOUNT_SO)
}

/// Writes the embedded library `bytes` out as `<stem>-<hash>.so` (or finds the copy written
/// before) and returns its path.
pub fn install_library(stem: &str, bytes: &[u8]) -> anyhow::Result<PathBuf> {
    let dirs = candidates(
        euid(),
        std::env::var_os("XDG_CACHE_HOME"),
        std::env::var_os("HOME"),
        std::env::temp_dir(),
    );
    let mut errors = Vec::new();
    for c in &dirs {
        let installed = if c.base.is_dir() {
            install_in(&c.dir, c.mode, stem, bytes)
        } else {
            Err(err(format!("{} is not a directory", c.base.display())))
        };
        match installed {
            Ok(path) => return Ok(path),
            Err(e) => errors.push(format!("{}: {e}", c.dir.display())),
        }
    }
    bail!(
        "utrace could not write out its {stem}.so: {}",
        errors.join("; ")
    )
}

fn err(msg: String) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::PermissionDenied, msg)
}

/// Checks that `dir` (which exists) and every directory above it belong to root or to this
/// user and that no one else may write in them (a sticky directory excepted); returns the
/// canonical path.
fn check_ancestors(dir: &Path, euid: u32) -> std::io::Result<PathBuf> {
    let canonical = std::fs::canonicalize(dir)?;
    for a in canonical.ancestors() {
        let meta = std::fs::symlink_metadata(a)?;
        if meta.uid() != 0 && meta.uid() != euid {
            return Err(err(format!(
                "{} belongs to another user (uid {})",
                a.display(),
                meta.uid()
            )));
        }
        if meta.mode() & 0o022 != 0 && meta.mode() & 0o1000 == 0 {
            return Err(err(format!("{} is writable by other users", a.display())));
        }
    }
    Ok(canonical)
}

/// Makes the cache directory `dir` (and the missing directories above it, 0700) after checking
/// what exists above it; returns its canonical path once it is a private directory of this
/// user.
fn make_dir(dir: &Path, mode: u32) -> std::io::Result<PathBuf> {
    let euid = euid();
    let existing = dir
        .ancestors()
        .find(|a| std::fs::symlink_metadata(a).is_ok())
        .unwrap_or(Path::new("/"));
    check_ancestors(existing, euid)?;
    if let Some(parent) = dir.parent() {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(parent)?;
    }
    match std::fs::DirBuilder::new().create(dir) {
        Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => return Err(e),
        _ => {}
    }
    let fd = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(dir)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ELOOP) | Some(libc::ENOTDIR) => err("not a directory".to_string()),
            _ => e,
        })?;
    let meta = fd.metadata()?;
    if meta.uid() != euid {
        return Err(err(format!("belongs to another user (uid {})", meta.uid())));
    }
    if meta.mode() & 0o7777 != mode {
        fd.set_permissions(std::fs::Permissions::from_mode(mode))?;
    }
    // SAFETY: statvfs is plain data; all-zero is a valid value to be overwritten.
    let mut vfs: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: the descriptor is open for the duration of the call and `vfs` is writable.
    if unsafe { libc::fstatvfs(std::os::fd::AsRawFd::as_raw_fd(&fd), &mut vfs) } == 0
        && vfs.f_flag & libc::ST_NOEXEC != 0
    {
        return Err(err("on a noexec mount".to_string()));
    }
    let canonical = check_ancestors(dir, euid)?;
    let s = canonical.to_string_lossy();
    if s.contains([' ', ':']) || s.contains(char::REPLACEMENT_CHARACTER) {
        return Err(err("the path cannot be put in LD_PRELOAD".to_string()));
    }
    Ok(canonical)
}

/// Whether `path` is a regular file of this user, with one name, writable by no one else,
/// holding exactly `bytes`. Never follows a link nor blocks.
fn holds(path: &Path, bytes: &[u8]) -> bool {
    let Ok(file) = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
    else {
        return false;
    };
    let Ok(meta) = file.metadata() else {
        return false;
    };
    if !meta.is_file()
        || meta.uid() != euid()
        || meta.nlink() != 1
        || meta.mode() & 0o022 != 0
        || meta.len() != bytes.len() as u64
    {
        return false;
    }
    let mut content = Vec::with_capacity(bytes.len());
    file.take(bytes.len() as u64 + 1)
        .read_to_end(&mut content)
        .is_ok()
        && content == bytes
}

/// Installs `bytes` in the cache directory `dir`; returns the file's path.
fn install_in(dir: &Path, mode: u32, stem: &str, bytes: &[u8]) -> std::io::Result<PathBuf> {
    let dir = make_dir(dir, mode)?;
    let name = format!("{stem}-{:016x}.so", fnv1a64(bytes));
    let path = dir.join(&name);
    if holds(&path, bytes) {
        return Ok(path);
    }
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let tmp = dir.join(format!(".{name}.{}.{nanos}.tmp", std::process::id()));
    let written = write_new(&tmp, bytes).and_then(|()| std::fs::rename(&tmp, &path));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written?;
    if !holds(&path, bytes) {
        return Err(err(format!("{name} changed after it was written")));
    }
    Ok(path)
}

/// Creates `path` (which must not exist, and is not followed if a link) with `bytes`.
fn write_new(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut file: File = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(FILE_MODE)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)?;
    file.set_permissions(std::fs::Permissions::from_mode(FILE_MODE))?;
    file.write_all(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_embedded_library_is_an_elf_shared_object() {
        assert!(LIBMCOUNT_SO.starts_with(b"\x7fELF"));
        assert_eq!(LIBMCOUNT_SO[16], 3, "ET_DYN");
    }

    #[test]
    fn candidate_order() {
        let tmp = PathBuf::from("/t");
        let dirs = candidates(1000, Some("/x".into()), Some("/h".into()), tmp.clone());
        let paths: Vec<_> = dirs
            .iter()
            .map(|c| (c.dir.to_str().unwrap(), c.base.to_str().unwrap()))
            .collect();
        assert_eq!(
            paths,
            [
                ("/x/utrace", "/"),
                ("/h/.cache/utrace", "/h"),
                ("/t/utrace-1000", "/t")
            ]
        );
        let dirs = candidates(0, Some("rel".into()), None, tmp);
        let paths: Vec<_> = dirs
            .iter()
            .map(|c| (c.dir.to_str().unwrap(), c.mode))
            .collect();
        assert_eq!(
            paths,
            [("/var/cache/utrace", 0o755), ("/t/utrace-0", 0o700)]
        );
    }

    #[test]
    fn written_once_then_reused_and_planted_files_replaced() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("cache/utrace");
        let bytes = b"not really a library";
        let path = install_in(&dir, 0o700, "libmcount", bytes).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), bytes);
        let mode = |p: &Path| std::fs::symlink_metadata(p).unwrap().mode() & 0o7777;
        assert_eq!(mode(&dir), 0o700);
        assert_eq!(mode(&path), FILE_MODE);
        let ino = std::fs::metadata(&path).unwrap().ino();
        assert_eq!(install_in(&dir, 0o700, "libmcount", bytes).unwrap(), path);
        assert_eq!(std::fs::metadata(&path).unwrap().ino(), ino, "reused");

        // A link to a file that holds the same bytes is replaced, its target untouched.
        let victim = tmp.path().join("victim");
        std::fs::write(&victim, bytes).unwrap();
        std::fs::remove_file(&path).unwrap();
        std::os::unix::fs::symlink(&victim, &path).unwrap();
        assert_eq!(install_in(&dir, 0o700, "libmcount", bytes).unwrap(), path);
        assert!(std::fs::symlink_metadata(&path).unwrap().is_file());
        assert_eq!(std::fs::read(&victim).unwrap(), bytes);

        // Changed content, another name, or a writable mode: replaced.
        std::fs::write(&path, b"changed").unwrap();
        install_in(&dir, 0o700, "libmcount", bytes).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), bytes);
        std::fs::hard_link(&path, tmp.path().join("second")).unwrap();
        install_in(&dir, 0o700, "libmcount", bytes).unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().nlink(), 1);
        let leftovers = std::fs::read_dir(&dir).unwrap().count();
        assert_eq!(leftovers, 1, "no temporary file is left");
    }

    #[test]
    fn unsafe_directories_are_refused() {
        let tmp = tempfile::tempdir().unwrap();
        // The cache directory is a link.
        let real = tmp.path().join("real");
        std::fs::create_dir(&real).unwrap();
        let link = tmp.path().join("link");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        let e = install_in(&link, 0o700, "libmcount", b"x").unwrap_err();
        assert_eq!(e.to_string(), "not a directory");
        assert_eq!(std::fs::read_dir(&real).unwrap().count(), 0);
        // A directory above it is writable by others.
        let open = tmp.path().join("open");
        std::fs::create_dir(&open).unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
        let e = install_in(&open.join("a/utrace"), 0o700, "libmcount", b"x").unwrap_err();
        assert!(e.to_string().ends_with("is writable by other users"), "{e}");
        assert!(!open.join("a").exists(), "nothing is created under it");
        // A path LD_PRELOAD would split.
        let e = install_in(&tmp.path().join("a b"), 0o700, "libmcount", b"x").unwrap_err();
        assert_eq!(e.to_string(), "the path cannot be put in LD_PRELOAD");
    }
}
