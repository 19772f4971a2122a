//! The data directory: made fresh for `record` (an old one kept as `.old`), its files
//! written safely, and whether its file system has room left.

use anyhow::Context;
use std::path::{Path, PathBuf};

/// Where the data goes.
#[derive(Debug, Clone, Copy)]
pub enum Target<'a> {
    /// `record`: a fresh directory; an existing one is renamed to `<dir>.old`.
    Fresh(&'a Path),
    /// `live`: an empty directory that already exists (a private temporary one).
    Existing(&'a Path),
    /// `record --host`: like `Existing`, a private staging directory; the pump also gives every
    /// chunk it writes to the observer, which sends it on. Also `live -S`'s temporary
    /// directory, observed by the script's runner.
    Staging(&'a Path, &'a ChunkObserver),
    /// `record -S`: like `Fresh`; the pump also gives every chunk it writes to the observer
    /// (the script's runner).
    FreshObserved(&'a Path, &'a ChunkObserver),
}

/// What the pump tells of the chunks it writes ([`record_format::ring::Observer`]).
#[derive(Clone)]
pub struct ChunkObserver(pub record_format::ring::Observer);

impl std::fmt::Debug for ChunkObserver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ChunkObserver")
    }
}

impl Target<'_> {
    /// A private directory removed when the recording is cut short.
    pub fn is_temporary(&self) -> bool {
        !matches!(self, Target::Fresh(_) | Target::FreshObserved(..))
    }

    /// The observer of the chunks written, if any.
    pub fn observer(&self) -> Option<record_format::ring::Observer> {
        match self {
            Target::Staging(_, o) | Target::FreshObserved(_, o) => {
                Some(std::sync::Arc::clone(&o.0))
            }
            _ => None,
        }
    }
}

/// Whether `path` is a directory `record` may replace or delete: empty, or holding one of the
/// files every data directory starts with. Anything else (`-d ~` by mistake) is left alone.
fn is_data_dir(path: &Path) -> bool {
    let Ok(mut entries) = std::fs::read_dir(path) else {
        return false;
    };
    entries.next().is_none()
        || ["info", "task.txt", "default.opts"]
            .iter()
            .any(|f| path.join(f).is_file())
}

/// Creates `dir` as `record` does (cli.md §1.4): an existing `dir` becomes `dir.old` (an
/// existing `dir.old` is removed first); parents are not created. Directories that are not
/// data directories are never renamed or removed.
pub fn prepare_dir(dir: &Path) -> anyhow::Result<()> {
    if dir.symlink_metadata().is_ok() {
        if !is_data_dir(dir) {
            anyhow::bail!("{} exists and is not a data directory", dir.display());
        }
        let mut old = dir.as_os_str().to_os_string();
        old.push(".old");
        let old = PathBuf::from(old);
        if old.symlink_metadata().is_ok() {
            if !is_data_dir(&old) {
                anyhow::bail!("{} exists and is not a data directory", old.display());
            }
            std::fs::remove_dir_all(&old)
                .with_context(|| format!("cannot remove {}", old.display()))?;
        }
        std::fs::rename(dir, &old)
            .with_context(|| format!("cannot rename {} to {}", dir.display(), old.display()))?;
    }
    record_format::create::create_data_dir(dir)
        .with_context(|| format!("creating directory failed: {}", dir.display()))
}

/// The data directory of `target`, made ready ([`prepare_dir`] for a fresh one), as an
/// absolute path with an empty `task.txt`.
pub fn open_target(target: Target<'_>) -> anyhow::Result<PathBuf> {
    let dir = match target {
        Target::Fresh(dir) | Target::FreshObserved(dir, _) => {
            prepare_dir(dir)?;
            dir
        }
        Target::Existing(dir) | Target::Staging(dir, _) => dir,
    };
    let dir = std::fs::canonicalize(dir)
        .with_context(|| format!("cannot find the data directory {}", dir.display()))?;
    write_file(&dir, "task.txt", b"")?;
    Ok(dir)
}

/// Writes the file `name` of the data directory `dir` (modes and links as
/// `record_format::create` says; an old content is replaced whole or not at all).
pub(crate) fn write_file(dir: &Path, name: &str, bytes: &[u8]) -> anyhow::Result<()> {
    let path = dir.join(name);
    record_format::create::replace(&path, bytes)
        .with_context(|| format!("cannot write {}", path.display()))
}

/// Whether the file system of `dir` has no room left for this user.
pub(super) fn no_room_left(dir: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let Ok(path) = std::ffi::CString::new(dir.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: statvfs is plain data; all-zero is valid.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `path` is NUL-terminated and `st` a valid out-pointer.
    unsafe { libc::statvfs(path.as_ptr(), &mut st) == 0 && st.f_bavail == 0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_dir_is_renamed_to_old() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("uftrace.data");
        prepare_dir(&dir).unwrap();
        std::fs::write(dir.join("info"), "1").unwrap();
        prepare_dir(&dir).unwrap();
        assert!(tmp.path().join("uftrace.data.old/info").is_file());
        std::fs::write(dir.join("info"), "2").unwrap();
        prepare_dir(&dir).unwrap();
        assert_eq!(
            std::fs::read_to_string(tmp.path().join("uftrace.data.old/info")).unwrap(),
            "2"
        );
        assert!(std::fs::read_dir(&dir).unwrap().next().is_none());
        // Other directories are left alone.
        let other = tmp.path().join("home");
        std::fs::create_dir(&other).unwrap();
        std::fs::write(other.join("notes"), "x").unwrap();
        let err = prepare_dir(&other).unwrap_err();
        assert!(err
            .to_string()
            .ends_with("home exists and is not a data directory"));
        assert!(other.join("notes").is_file());
        std::fs::rename(&other, tmp.path().join("d.old")).unwrap();
        std::fs::create_dir(tmp.path().join("d")).unwrap();
        assert!(prepare_dir(&tmp.path().join("d")).is_err());
        assert!(tmp.path().join("d.old/notes").is_file());

        let err = prepare_dir(&tmp.path().join("missing/parent")).unwrap_err();
        assert!(format!("{err:#}").contains("No such file or directory"));
    }
}
