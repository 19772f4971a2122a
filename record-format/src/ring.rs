//! Per-thread staging rings: how libmcount hands records to `<tid>.dat` (runtime spec §9.2,
//! writer "R", with the recorder writing as uftrace's recorder threads do).
//!
//! Each traced thread appends its records to a ring: a file `/dev/shm/<prefix>/<tid>` mapped
//! `MAP_SHARED`, one [`RingHeader`] page followed by [`CHUNKS`] chunks of `chunk_size` bytes.
//! The thread fills one chunk at a time. A full chunk is *sealed* with the offset in
//! `<tid>.dat` its records belong at, and the thread moves on to the next chunk. The recorder's
//! [`Pump`], on another CPU, writes sealed chunks to the data file and frees them, so the
//! traced thread does not pay for the file system. When the thread comes back to a chunk the
//! pump has not taken yet, it writes the chunk itself; one the pump is writing, it waits for.
//! Without a recorder (a private ring) the thread writes every chunk itself.
//!
//! Chunk states move `FREE → FILLING → SEALED → WRITING → FREE`; whoever moves a chunk from
//! `SEALED` to `WRITING` (a compare-and-swap: the pump or the owning thread) writes it. The
//! owning thread stores its records before it publishes `cursor` (x86 keeps stores in order).
//!
//! The rings live in a directory of their own that the recorder creates ([`create_ring_dir`]:
//! mode 0700, so no other user can plant or swap a ring) and removes after the salvage.
//!
//! Records in a ring that no one wrote (SIGKILL, a crash, `exit()` while other threads run,
//! `_exit`) are still in `/dev/shm`: the recorder [`salvage`]s every ring of its prefix after
//! the process tree has ended: each chunk that is `SEALED` or `WRITING` (`len` bytes) and the
//! `FILLING` chunk holding `cursor` (up to `cursor`), each at its own `file_off`. Writing a
//! chunk twice writes the same bytes at the same place, so a write cut short is simply done
//! again.
//!
//! A new exec image of the same thread (same tid) finds the ring of the old image, writes what
//! it holds, replaces the file by a new ring and continues after the old one's records, so a
//! tid's file stays in time order.
//!
//! Flight-recorder rings ([`flag::FLIGHT`], `record --flight-recorder`) keep only the newest
//! records and are written when a dump is asked for: see [`crate::flight`].

mod pump;
pub use pump::{Observer, Pump, Written};

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

/// First bytes of a ring file.
pub const MAGIC: [u8; 8] = *b"utrring3";
/// Size of the header; the records start at this offset of the ring file.
pub const HEADER_SIZE: usize = 4096;
/// Chunks per ring.
pub const CHUNKS: usize = 32;
/// The environment variable naming the ring prefix (`/dev/shm/<prefix>/<tid>`); without it
/// libmcount keeps its rings in private memory, which a SIGKILL loses.
pub const ENV_PREFIX: &str = "UTRACE_RING";
/// Where rings live.
pub const SHM_DIR: &str = "/dev/shm";

/// [`Chunk::state`] values.
pub mod state {
    pub const FREE: u32 = 0;
    /// The thread is appending to it.
    pub const FILLING: u32 = 1;
    /// Full: `len` bytes wait to be written at `file_off`.
    pub const SEALED: u32 = 2;
    /// Being written (by the pump or the thread).
    pub const WRITING: u32 = 3;
}

/// Takes a `SEALED` chunk for writing (its state word `state`: `SEALED → WRITING`); `false`
/// when it is not sealed or another writer took it first.
pub fn take_sealed(state: &AtomicU32) -> bool {
    state
        .compare_exchange(
            state::SEALED,
            state::WRITING,
            Ordering::Acquire,
            Ordering::Relaxed,
        )
        .is_ok()
}

/// One chunk's slot in the header.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Chunk {
    /// A [`state`] value (accessed atomically).
    pub state: u32,
    pub _pad: u32,
    /// Offset in `<tid>.dat` of the chunk's first record.
    pub file_off: u64,
    /// Bytes of records (set when sealed).
    pub len: u64,
}

/// The header page of a ring file. `cursor` and `base` are addresses in the owning thread's
/// process (only differences matter to anyone else).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RingHeader {
    pub magic: [u8; 8],
    pub tid: u32,
    pub _pad: u32,
    /// Address just past the last complete record of the `FILLING` chunk.
    pub cursor: u64,
    /// Address of the first chunk.
    pub base: u64,
    /// Bytes per chunk (a multiple of the page size).
    pub chunk_size: u64,
    pub chunks: [Chunk; CHUNKS],
    /// [`flag`] bits (accessed atomically).
    pub flags: u32,
    pub _pad2: u32,
    /// Flight recorder: the stream position up to which records have been written to the data
    /// file (set by the recorder only).
    pub dumped: u64,
}

/// Byte offset of chunk `i`'s slot in the header.
pub const fn chunk_slot(i: usize) -> usize {
    40 + i * 24
}

/// Byte offset of [`RingHeader::flags`].
pub const FLAGS_OFF: usize = chunk_slot(CHUNKS);
/// Byte offset of [`RingHeader::dumped`].
pub const DUMPED_OFF: usize = FLAGS_OFF + 8;

/// [`RingHeader::flags`] bits.
pub mod flag {
    /// A flight-recorder ring (`record --flight-recorder`, see [`crate::flight`]): `file_off`
    /// is the chunk's position in the thread's unbounded stream of records, sealed chunks are
    /// written only when a dump is asked for, and the thread drops them when it comes back.
    pub const FLIGHT: u32 = 1;
    /// The owning thread has ended (flight rings only): everything left is to be written and
    /// the ring removed.
    pub const ENDED: u32 = 2;
}

/// A piece of a ring that must go to the data file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pending {
    /// Chunk index.
    pub chunk: usize,
    /// Where in the data file.
    pub file_off: u64,
    /// Where in the ring file.
    pub ring_off: usize,
    pub len: usize,
}

impl RingHeader {
    /// Parses the first bytes of a ring file.
    pub fn read(bytes: &[u8]) -> Option<RingHeader> {
        let u64_at = |o: usize| -> Option<u64> {
            Some(u64::from_ne_bytes(bytes.get(o..o + 8)?.try_into().ok()?))
        };
        let u32_at = |o: usize| -> Option<u32> {
            Some(u32::from_ne_bytes(bytes.get(o..o + 4)?.try_into().ok()?))
        };
        let mut chunks = [Chunk::default(); CHUNKS];
        for (i, c) in chunks.iter_mut().enumerate() {
            let o = chunk_slot(i);
            *c = Chunk {
                state: u32_at(o)?,
                _pad: 0,
                file_off: u64_at(o + 8)?,
                len: u64_at(o + 16)?,
            };
        }
        let h = RingHeader {
            magic: bytes.get(0..8)?.try_into().ok()?,
            tid: u32_at(8)?,
            _pad: 0,
            cursor: u64_at(16)?,
            base: u64_at(24)?,
            chunk_size: u64_at(32)?,
            chunks,
            flags: u32_at(FLAGS_OFF)?,
            _pad2: 0,
            dumped: u64_at(DUMPED_OFF)?,
        };
        (h.magic == MAGIC && h.chunk_size > 0 && h.chunk_size.is_multiple_of(16)).then_some(h)
    }

    /// Length of the ring file this header describes.
    pub fn file_len(&self) -> usize {
        HEADER_SIZE + CHUNKS * self.chunk_size as usize
    }

    /// The data-file offset just past this ring's records (written or not).
    pub fn end(&self) -> u64 {
        let size = self.chunk_size;
        (0..CHUNKS)
            .map(|i| {
                let c = &self.chunks[i];
                let start = self.base.wrapping_add(i as u64 * size);
                let len = match c.state {
                    state::FILLING if (start..=start + size).contains(&self.cursor) => {
                        self.cursor - start
                    }
                    state::FILLING => 0,
                    _ => c.len.min(size),
                };
                c.file_off.saturating_add(len)
            })
            .max()
            .unwrap_or(0)
    }

    /// What must still be written to the data file, in file order: sealed chunks (and chunks
    /// being written) and the filling chunk up to `cursor`. Insane slots are skipped.
    pub fn pending(&self) -> Vec<Pending> {
        let size = self.chunk_size;
        let mut out: Vec<Pending> = (0..CHUNKS)
            .filter_map(|i| {
                let c = &self.chunks[i];
                let start = self.base.checked_add(i as u64 * size)?;
                let len = match c.state {
                    state::SEALED | state::WRITING => c.len,
                    state::FILLING if (start..=start + size).contains(&self.cursor) => {
                        self.cursor - start
                    }
                    _ => return None,
                };
                // Records are 16 bytes, with payloads padded to 8.
                (len > 0 && len <= size && len.is_multiple_of(8)).then_some(Pending {
                    chunk: i,
                    file_off: c.file_off,
                    ring_off: HEADER_SIZE + i * size as usize,
                    len: len as usize,
                })
            })
            .collect();
        out.sort_by_key(|p| p.file_off);
        out
    }
}

/// A file a thread leaves in the ring directory when the file system had too little room for
/// its ring, which it kept in private memory then (its records are written by the thread
/// alone): not a tid, so neither the pump nor [`salvage`] take it for a ring.
pub const SHORT_OF_SPACE: &str = "short-of-space";

/// Whether a thread of `prefix` found its ring's file system short of space.
pub fn short_of_space(prefix: &str) -> bool {
    ring_dir(prefix).join(SHORT_OF_SPACE).exists()
}

/// The directory of the rings of `prefix`.
pub fn ring_dir(prefix: &str) -> PathBuf {
    Path::new(SHM_DIR).join(prefix)
}

/// The ring file of `tid` for `prefix`.
pub fn ring_path(prefix: &str, tid: u32) -> PathBuf {
    ring_dir(prefix).join(tid.to_string())
}

/// Creates the ring directory of `prefix`: new (never one that exists), mode 0700.
pub fn create_ring_dir(prefix: &str) -> std::io::Result<PathBuf> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    let dir = ring_dir(prefix);
    std::fs::DirBuilder::new().mode(0o700).create(&dir)?;
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700))?;
    Ok(dir)
}

/// Removes the ring directory of `prefix` and whatever is left in it.
pub fn remove_ring_dir(prefix: &str) {
    let _ = std::fs::remove_dir_all(ring_dir(prefix));
}

/// The rings of `prefix` now in their directory, in ascending tid order.
fn ring_files(prefix: &str) -> std::io::Result<Vec<(u32, PathBuf)>> {
    let entries = match std::fs::read_dir(ring_dir(prefix)) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut rings: Vec<(u32, PathBuf)> = entries
        .filter_map(|e| {
            let e = e.ok()?;
            let tid = e.file_name().to_str()?.parse().ok()?;
            Some((tid, e.path()))
        })
        .collect();
    rings.sort();
    Ok(rings)
}

/// Opens a ring without following a link and without blocking, if it is a regular file.
fn open_ring(path: &Path, write: bool) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(write)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)?;
    if !file.metadata()?.is_file() {
        return Err(std::io::Error::other(format!(
            "{} is not a regular file",
            path.display()
        )));
    }
    Ok(file)
}

/// Opens `dir/<tid>.dat` for writing, creating it (mode 0644) if needed; a link or anything
/// but a regular file is refused.
fn open_data(dir: &Path, tid: u32) -> std::io::Result<std::fs::File> {
    crate::create::open_data_file(&dir.join(format!("{tid}.dat")))
}

/// What [`salvage`] did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Salvaged {
    /// Rings found (and removed).
    pub rings: usize,
    /// Bytes of records written into data files.
    pub bytes: u64,
}

/// Writes the unwritten records of every ring of `prefix` into `dir/<tid>.dat` and removes the
/// rings. Call it only when no process that owns one of them can still run.
pub fn salvage(prefix: &str, dir: &Path) -> std::io::Result<Salvaged> {
    use std::os::unix::fs::FileExt;
    let mut done = Salvaged::default();
    for (tid, path) in ring_files(prefix)? {
        let bytes = {
            use std::io::Read;
            let mut bytes = Vec::new();
            open_ring(&path, false)?.read_to_end(&mut bytes)?;
            bytes
        };
        let _ = std::fs::remove_file(&path);
        done.rings += 1;
        let Some(h) = RingHeader::read(&bytes).filter(|h| h.tid == tid) else {
            continue;
        };
        let pending = h.pending();
        if pending.is_empty() {
            continue;
        }
        let file = open_data(dir, tid)?;
        if h.flags & flag::FLIGHT != 0 {
            done.bytes += crate::flight::salvage_ring(&h, &bytes, &file)?;
            continue;
        }
        for p in pending {
            if let Some(data) = bytes.get(p.ring_off..p.ring_off + p.len) {
                file.write_all_at(data, p.file_off)?;
                done.bytes += p.len as u64;
            }
        }
    }
    Ok(done)
}

#[cfg(test)]
pub(crate) mod tests;
