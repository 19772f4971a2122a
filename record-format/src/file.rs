//! Opening a file of a data directory for reading: regular files only, never blocking, never
//! reading more than the format allows.
//!
//! A data directory is input like any other: it may come from another user or another machine,
//! and any name in it may be a symlink to `/dev/zero`, a FIFO or a directory. Read naively, the
//! first makes a reader grow without end, the second blocks it forever in `open()`. So every
//! reader of the analysis side goes through this module:
//!
//! 1. `stat` the path (following symlinks: a symlink to a regular file is fine) and refuse
//!    anything but a regular file before opening it: opening a FIFO blocks, opening a device
//!    can have side effects;
//! 2. open it with `O_NONBLOCK | O_CLOEXEC | O_NOCTTY`, so that a FIFO swapped in after the
//!    `stat` cannot block either, and `fstat` the descriptor: what was opened is what is read;
//! 3. clear `O_NONBLOCK` and read at most the limit of the file's kind ([`limit`]); larger
//!    files are refused. `<tid>.dat` and the other record files are mapped instead
//!    ([`map_regular`]), so their size costs no memory.

use crate::error::{FormatError, Result};
use std::fs::File;
use std::io::Read;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

/// The most that is read of each kind of file, in bytes. Each is far above what a recording
/// writes (the reasons are given per limit) and low enough that reading it cannot exhaust
/// memory. Record files (`<tid>.dat`, `kernel-cpuN.dat`, `perf-cpuN.dat`) and ELF files are
/// mapped, not read, and have no limit.
pub mod limit {
    const MIB: u64 = 1 << 20;

    /// `info`: a few KiB, but its task list holds one tid (up to 8 bytes) per thread ever
    /// created: 64 MiB is 8 million threads.
    pub const INFO: u64 = 64 * MIB;
    /// `task.txt`: one line (about 60 bytes) per thread, fork, exec and dlopen: 256 MiB is
    /// over 4 million of them.
    pub const TASK_TXT: u64 = 256 * MIB;
    /// `sid-<SID>.map`: a copy of `/proc/<pid>/maps`, at most `vm.max_map_count` (65530 by
    /// default) lines of typically 100 bytes: 16 MiB.
    pub const MAP: u64 = 16 * MIB;
    /// `<module>.sym`: about 40 bytes per symbol plus its name; the largest C++ binaries
    /// (browsers) have a few million symbols: 256 MiB.
    pub const SYM: u64 = 256 * MIB;
    /// `<module>.dbg`: a few lines per function, as large as `.sym` at most: 256 MiB.
    pub const DBG: u64 = 256 * MIB;
    /// `default.opts` and `--opt-file`: command-line options, bounded by the kernel's argument
    /// space (`ARG_MAX`, 2 MiB by default): 4 MiB.
    pub const OPTS: u64 = 4 * MIB;
    /// `kernel_header`: the header page and the format of each recorded tracepoint, a few KiB
    /// each: 16 MiB.
    pub const KERNEL_HEADER: u64 = 16 * MIB;
    /// `kallsyms`: a copy of `/proc/kallsyms`, 10 to 30 MiB with every module loaded: 256 MiB.
    pub const KALLSYMS: u64 = 256 * MIB;
    /// Other text files (`extern.dat`, `events.txt`, `note.txt`): 64 MiB.
    pub const TEXT: u64 = 64 * MIB;

    /// The limit of the data-directory file `name`.
    pub fn of(name: &str) -> u64 {
        match name {
            "info" => INFO,
            "task.txt" => TASK_TXT,
            "default.opts" => OPTS,
            "kernel_header" => KERNEL_HEADER,
            "kallsyms" => KALLSYMS,
            _ if name.ends_with(".map") => MAP,
            _ if name.ends_with(".sym") => SYM,
            _ if name.ends_with(".dbg") => DBG,
            _ => TEXT,
        }
    }
}

/// What a file that is not regular is, for the error message.
fn kind_name(ft: std::fs::FileType) -> &'static str {
    if ft.is_dir() {
        "a directory"
    } else if ft.is_fifo() {
        "a FIFO"
    } else if ft.is_char_device() {
        "a character device"
    } else if ft.is_block_device() {
        "a block device"
    } else if ft.is_socket() {
        "a socket"
    } else {
        "of an unknown type"
    }
}

fn check_regular(path: &Path, meta: &std::fs::Metadata) -> Result<()> {
    if meta.is_file() {
        Ok(())
    } else {
        Err(FormatError::NotRegular {
            path: path.to_path_buf(),
            kind: kind_name(meta.file_type()),
        })
    }
}

/// Opens `path` for reading if it is a regular file (after following symlinks), without ever
/// blocking (see the module documentation). A missing file is a [`FormatError::Io`] whose
/// source is `NotFound` ([`FormatError::is_not_found`]).
pub fn open_regular(path: &Path) -> Result<File> {
    let meta = std::fs::metadata(path).map_err(|e| FormatError::io(path, e))?;
    check_regular(path, &meta)?;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| FormatError::io(path, e))?;
    let meta = file.metadata().map_err(|e| FormatError::io(path, e))?;
    check_regular(path, &meta)?;
    clear_nonblock(&file).map_err(|e| FormatError::io(path, e))?;
    Ok(file)
}

/// Clears `O_NONBLOCK` (it means nothing for a regular file, but the descriptor should read
/// like any other).
fn clear_nonblock(file: &File) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    let fd = file.as_raw_fd();
    // SAFETY: F_GETFL on a descriptor this function borrows open; no memory is passed.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    if flags < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: F_SETFL with an integer argument on the same open descriptor.
    if unsafe { libc::fcntl(fd, libc::F_SETFL, flags & !libc::O_NONBLOCK) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Reads the regular file `path` whole, refusing it ([`FormatError::TooLarge`]) when it holds
/// more than `max_len` bytes.
pub fn read_regular(path: &Path, max_len: u64) -> Result<Vec<u8>> {
    let file = open_regular(path)?;
    let size = file.metadata().map_err(|e| FormatError::io(path, e))?.len();
    if size > max_len {
        return Err(FormatError::TooLarge {
            path: path.to_path_buf(),
            limit: max_len,
        });
    }
    let mut bytes = Vec::with_capacity(size as usize);
    // The size may change after the fstat (or lie, as on procfs): read one byte past the limit
    // to tell a file at the limit from a larger one.
    file.take(max_len.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|e| FormatError::io(path, e))?;
    if bytes.len() as u64 > max_len {
        return Err(FormatError::TooLarge {
            path: path.to_path_buf(),
            limit: max_len,
        });
    }
    Ok(bytes)
}

/// [`read_regular`] as text (invalid UTF-8 replaced).
pub fn read_regular_text(path: &Path, max_len: u64) -> Result<String> {
    read_regular(path, max_len).map(into_text)
}

/// `bytes` as text, invalid UTF-8 replaced; valid text is not copied.
pub fn into_text(bytes: Vec<u8>) -> String {
    match String::from_utf8(bytes) {
        Ok(s) => s,
        Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
    }
}

/// A regular file mapped read-only (nothing mapped when it is empty).
#[derive(Debug, Default)]
pub struct Mapped {
    map: Option<memmap2::Mmap>,
}

impl Mapped {
    /// Lets the kernel drop this process's pages before `upto` (they are read from the file
    /// again if touched), so memory stays flat while a large file is walked.
    pub fn release(&self, upto: usize) {
        const PAGE: usize = 4096;
        let Some(map) = &self.map else { return };
        let len = upto.min(map.len()) & !(PAGE - 1);
        if len == 0 {
            return;
        }
        // SAFETY: the mapping is private, read-only and file-backed: MADV_DONTNEED only discards
        // this process's copies of clean pages, and a later access faults the same bytes in
        // again from the file. No reference into the range is invalidated.
        let _ = unsafe { map.unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, 0, len) };
    }
}

impl std::ops::Deref for Mapped {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        self.map.as_deref().unwrap_or(&[])
    }
}

/// Maps the regular file `path` read-only (opened as [`open_regular`] does), for files read
/// in place whatever their size: records and ELF files.
pub fn map_regular(path: &Path) -> Result<Mapped> {
    let file = open_regular(path)?;
    let len = file.metadata().map_err(|e| FormatError::io(path, e))?.len();
    if len == 0 {
        return Ok(Mapped::default());
    }
    // SAFETY: the mapping is read-only and private to this process, of a regular file (checked
    // on the descriptor). The data directory is not written while it is analysed; should another
    // process truncate the file anyway, reads could fault, which is the documented limit of
    // mmap-based readers.
    let map = unsafe { memmap2::Mmap::map(&file) }.map_err(|e| FormatError::io(path, e))?;
    // Advice only tunes read-ahead; failing to give it changes nothing else.
    let _ = map.advise(memmap2::Advice::Sequential);
    Ok(Mapped { map: Some(map) })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fifo(path: &Path) {
        let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: `c` is a NUL-terminated path that outlives the call.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    }

    #[test]
    fn reads_regular_files_and_symlinks_to_them() {
        let tmp = tempfile::tempdir().unwrap();
        let file = tmp.path().join("info");
        std::fs::write(&file, b"12345").unwrap();
        let link = tmp.path().join("link");
        std::os::unix::fs::symlink(&file, &link).unwrap();
        assert_eq!(read_regular(&file, 5).unwrap(), b"12345");
        assert_eq!(read_regular(&link, 5).unwrap(), b"12345");
        assert_eq!(&*map_regular(&link).unwrap(), b"12345");
        assert!(map_regular(&tmp.path().join("missing"))
            .unwrap_err()
            .is_not_found());
    }

    #[test]
    fn refuses_files_over_the_limit() {
        let tmp = tempfile::tempdir().unwrap();
        let file = tmp.path().join("task.txt");
        std::fs::write(&file, b"123456").unwrap();
        let err = read_regular(&file, 5).unwrap_err();
        assert!(
            matches!(err, FormatError::TooLarge { limit: 5, .. }),
            "{err}"
        );
        assert!(err.to_string().contains("task.txt"), "{err}");
    }

    #[test]
    fn refuses_special_files_without_blocking() {
        let tmp = tempfile::tempdir().unwrap();
        let zero = tmp.path().join("zero.sym");
        std::os::unix::fs::symlink("/dev/zero", &zero).unwrap();
        let pipe = tmp.path().join("1234.dat");
        fifo(&pipe);
        let dir = tmp.path().join("default.opts");
        std::fs::create_dir(&dir).unwrap();
        for (path, kind) in [
            (&zero, "a character device"),
            (&pipe, "a FIFO"),
            (&dir, "a directory"),
        ] {
            let err = read_regular(path, 1 << 20).unwrap_err();
            assert!(
                matches!(&err, FormatError::NotRegular { kind: k, .. } if *k == kind),
                "{err}"
            );
            assert!(err.to_string().contains(&*path.to_string_lossy()), "{err}");
            assert!(map_regular(path).is_err());
            assert!(!err.is_not_found());
        }
    }

    #[test]
    fn limits_by_name() {
        assert_eq!(limit::of("info"), limit::INFO);
        assert_eq!(limit::of("sid-0c12780f44d93648.map"), limit::MAP);
        assert_eq!(limit::of("libc.so.6.sym"), limit::SYM);
        assert_eq!(limit::of("fib.dbg"), limit::DBG);
        assert_eq!(limit::of("note.txt"), limit::TEXT);
    }
}
