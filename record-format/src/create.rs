//! Creating the files of a data directory safely.
//!
//! A recording is often made as root in a directory other users can see, so nothing planted
//! in it may redirect a write: the directory is created with mode 0755 and its files 0644
//! whatever the umask (as uftrace does), every file is opened without following a symbolic
//! link and must be a regular file of this user with no other name, and a file that is
//! replaced is written under a new name first and renamed over the old one.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

/// Mode of a data directory.
pub const DIR_MODE: u32 = 0o755;
/// Mode of every file in it.
pub const FILE_MODE: u32 = 0o644;

/// Creates the data directory `dir` (its parent must exist; `dir` must not) with [`DIR_MODE`].
pub fn create_data_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new().mode(DIR_MODE).create(dir)?;
    // The umask may have taken bits away; the directory is ours and new, and a symbolic link
    // put in its place since is not followed: the mode is set through a descriptor of it.
    let fd = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW)
        .open(dir)?;
    fd.set_permissions(std::fs::Permissions::from_mode(DIR_MODE))
}

/// Opens `path` for writing, creating it if needed (with `exclusive`: it must not exist),
/// without following a link or blocking; refuses anything but a regular file of this user
/// with one name, and gives it [`FILE_MODE`].
fn open_checked(
    path: &Path,
    create: bool,
    exclusive: bool,
    truncate: bool,
) -> std::io::Result<File> {
    let mut opts = OpenOptions::new();
    opts.write(true)
        .mode(FILE_MODE)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC);
    if exclusive {
        opts.create_new(true);
    } else {
        opts.create(create).truncate(truncate);
    }
    let file = opts.open(path)?;
    let meta = file.metadata()?;
    // SAFETY: geteuid has no preconditions and cannot fail.
    let euid = unsafe { libc::geteuid() };
    if !meta.is_file() || meta.uid() != euid || meta.nlink() != 1 {
        return Err(std::io::Error::new(
            std::io::ErrorKind::PermissionDenied,
            format!("{} is not a regular file of this user", path.display()),
        ));
    }
    if meta.mode() & 0o7777 != FILE_MODE {
        file.set_permissions(std::fs::Permissions::from_mode(FILE_MODE))?;
    }
    Ok(file)
}

/// Opens the data file `path` for writing at offsets, creating it if needed.
pub fn open_data_file(path: &Path) -> std::io::Result<File> {
    open_checked(path, true, false, false)
}

/// Opens the existing file `path` for writing (its length is kept).
pub fn open_existing(path: &Path) -> std::io::Result<File> {
    open_checked(path, false, false, false)
}

/// Creates `path`, which must not exist, and writes `bytes` into it.
pub fn write_new(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut f = open_checked(path, true, true, false)?;
    f.write_all(bytes)
}

/// Writes `bytes` as the whole content of `path`: into a new file next to it, renamed over
/// `path` once complete, so that a failure (a full disk) leaves the old content in place.
pub fn replace(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut tmp = path.as_os_str().to_os_string();
    tmp.push(".new");
    let tmp = std::path::PathBuf::from(tmp);
    let _ = std::fs::remove_file(&tmp);
    let written = write_new(&tmp, bytes).and_then(|()| std::fs::rename(&tmp, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mode(p: &Path) -> u32 {
        std::fs::symlink_metadata(p).unwrap().mode() & 0o7777
    }

    #[test]
    fn modes_do_not_depend_on_the_umask() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("d");
        // SAFETY: umask only changes this process's file creation mask.
        let old = unsafe { libc::umask(0) };
        let made = create_data_dir(&dir).and_then(|()| write_new(&dir.join("a"), b"x"));
        // SAFETY: as above.
        unsafe { libc::umask(0o077) };
        let made = made.and_then(|()| replace(&dir.join("b"), b"y"));
        // SAFETY: as above.
        unsafe { libc::umask(old) };
        made.unwrap();
        assert_eq!(mode(&dir), DIR_MODE);
        assert_eq!(mode(&dir.join("a")), FILE_MODE);
        assert_eq!(mode(&dir.join("b")), FILE_MODE);
        assert!(
            create_data_dir(&dir).is_err(),
            "an existing directory is refused"
        );
    }

    #[test]
    fn links_and_special_files_are_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let victim = tmp.path().join("victim");
        std::fs::write(&victim, b"keep").unwrap();
        let link = tmp.path().join("1.dat");
        std::os::unix::fs::symlink(&victim, &link).unwrap();
        assert!(open_data_file(&link).is_err());
        assert!(
            replace(&link, b"x").is_ok(),
            "replace renames over the link itself"
        );
        assert_eq!(std::fs::read(&victim).unwrap(), b"keep");
        let hard = tmp.path().join("2.dat");
        std::fs::hard_link(&victim, &hard).unwrap();
        assert!(open_data_file(&hard).is_err(), "a second name is refused");
        let fifo = tmp.path().join("3.dat");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: `c` is a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        assert!(
            open_data_file(&fifo).is_err(),
            "a FIFO is refused without blocking"
        );
        assert!(write_new(&tmp.path().join("victim"), b"x").is_err());
        assert_eq!(std::fs::read(&victim).unwrap(), b"keep");
        open_data_file(&tmp.path().join("4.dat")).unwrap();
    }
}
