//! Per-thread staging rings: how libmcount hands records to `<tid>.dat` (runtime spec §9.2,
//! writer "R").
//!
//! Each traced thread appends its records to a ring: a file `/dev/shm/<prefix>-<tid>` mapped
//! `MAP_SHARED`, one [`RingHeader`] page followed by `cap` bytes of records. When the ring is
//! full (and when the thread ends) the thread writes the records to `<dir>/<tid>.dat` with one
//! `pwrite` at the header's `file_off` and starts again at the ring's beginning. The ring's
//! pages are reused, so the hot path never faults; the file system is touched once per ring.
//!
//! Records in a ring that no thread flushed (SIGKILL, a crash, `exit()` while other threads
//! run, `_exit`) are still in `/dev/shm`: the recorder [`salvage`]s every ring of its prefix
//! after the process tree has ended. The update order makes a flush idempotent, so a flush cut
//! short by SIGKILL is simply done again by the salvage:
//!
//! 1. records are stored, then `cursor` is advanced past them (x86 stores are ordered);
//! 2. flush: `pwrite(data[..cursor-base], file_off)`, then `cursor = base`, then
//!    `file_off += len` — a process killed anywhere in between leaves either the old
//!    `(file_off, len)` (rewritten in place) or an empty ring.
//!
//! A new exec image of the same thread (same tid) finds the ring of the old image, flushes it
//! first and continues with its `file_off`, so a tid's file stays in time order.

use std::path::{Path, PathBuf};

/// First bytes of a ring file.
pub const MAGIC: [u8; 8] = *b"utrring1";
/// Size of the header; the records start at this offset of the ring file.
pub const HEADER_SIZE: usize = 4096;
/// The environment variable naming the ring prefix (`/dev/shm/<prefix>-<tid>`); without it
/// libmcount keeps its rings in private memory, which a SIGKILL loses.
pub const ENV_PREFIX: &str = "UTRACE_RING";
/// Where rings live.
pub const SHM_DIR: &str = "/dev/shm";

/// The header page of a ring file. All fields are written by the thread that owns the ring;
/// `cursor` and `base` are addresses in that thread's process (only their difference matters
/// to anyone else).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RingHeader {
    pub magic: [u8; 8],
    pub tid: u32,
    pub _pad: u32,
    /// Offset in `<tid>.dat` of the ring's first record.
    pub file_off: u64,
    /// Address just past the last complete record.
    pub cursor: u64,
    /// Address of the first record.
    pub base: u64,
    /// Bytes of record space after the header.
    pub cap: u64,
}

impl RingHeader {
    /// Byte length of the unflushed records, if the header is sane.
    pub fn pending(&self) -> Option<u64> {
        let len = self.cursor.checked_sub(self.base)?;
        (self.magic == MAGIC && len <= self.cap && len % 16 == 0).then_some(len)
    }

    /// Parses the first bytes of a ring file.
    pub fn read(bytes: &[u8]) -> Option<RingHeader> {
        let u64_at = |o: usize| -> Option<u64> {
            Some(u64::from_ne_bytes(bytes.get(o..o + 8)?.try_into().ok()?))
        };
        let u32_at = |o: usize| -> Option<u32> {
            Some(u32::from_ne_bytes(bytes.get(o..o + 4)?.try_into().ok()?))
        };
        Some(RingHeader {
            magic: bytes.get(0..8)?.try_into().ok()?,
            tid: u32_at(8)?,
            _pad: 0,
            file_off: u64_at(16)?,
            cursor: u64_at(24)?,
            base: u64_at(32)?,
            cap: u64_at(40)?,
        })
    }
}

/// The ring file of `tid` for `prefix`.
pub fn ring_path(prefix: &str, tid: u32) -> PathBuf {
    Path::new(SHM_DIR).join(format!("{prefix}-{tid}"))
}

/// What [`salvage`] did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Salvaged {
    /// Rings found (and removed).
    pub rings: usize,
    /// Bytes of records written into data files.
    pub bytes: u64,
}

/// Writes the unflushed records of every ring of `prefix` into `dir/<tid>.dat` and removes the
/// rings. Call it only when no process that owns one of them can still run. Rings are handled
/// in ascending tid order; each goes to its own offset, so the order does not matter.
pub fn salvage(prefix: &str, dir: &Path) -> std::io::Result<Salvaged> {
    use std::os::unix::fs::FileExt;
    let mut done = Salvaged::default();
    let want = format!("{prefix}-");
    let entries = match std::fs::read_dir(SHM_DIR) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(done),
        Err(e) => return Err(e),
    };
    let mut rings: Vec<(u32, PathBuf)> = entries
        .filter_map(|e| {
            let e = e.ok()?;
            let name = e.file_name();
            let tid = name.to_str()?.strip_prefix(&want)?.parse().ok()?;
            Some((tid, e.path()))
        })
        .collect();
    rings.sort();
    for (tid, path) in rings {
        let bytes = std::fs::read(&path)?;
        let _ = std::fs::remove_file(&path);
        done.rings += 1;
        let Some(h) = RingHeader::read(&bytes).filter(|h| h.tid == tid) else {
            continue;
        };
        let Some(len) = h.pending().filter(|&l| l > 0) else {
            continue;
        };
        let Some(data) = bytes.get(HEADER_SIZE..HEADER_SIZE + len as usize) else {
            continue;
        };
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .open(dir.join(format!("{tid}.dat")))?;
        file.write_all_at(data, h.file_off)?;
        done.bytes += len;
    }
    Ok(done)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header_bytes(h: &RingHeader) -> Vec<u8> {
        let mut b = vec![0u8; HEADER_SIZE];
        b[0..8].copy_from_slice(&h.magic);
        b[8..12].copy_from_slice(&h.tid.to_ne_bytes());
        b[16..24].copy_from_slice(&h.file_off.to_ne_bytes());
        b[24..32].copy_from_slice(&h.cursor.to_ne_bytes());
        b[32..40].copy_from_slice(&h.base.to_ne_bytes());
        b[40..48].copy_from_slice(&h.cap.to_ne_bytes());
        b
    }

    #[test]
    fn layout_matches_the_parser() {
        assert_eq!(std::mem::size_of::<RingHeader>(), 48);
        let h = RingHeader {
            magic: MAGIC,
            tid: 42,
            _pad: 0,
            file_off: 4096,
            cursor: 0x1000 + 64,
            base: 0x1000,
            cap: 8192,
        };
        let b = header_bytes(&h);
        assert_eq!(RingHeader::read(&b), Some(h));
        assert_eq!(h.pending(), Some(64));
        let bad = RingHeader {
            cursor: 0x1000 + 8,
            ..h
        };
        assert_eq!(bad.pending(), None);
        let bad = RingHeader {
            cursor: 0x1000 + 16384,
            ..h
        };
        assert_eq!(bad.pending(), None);
        assert_eq!(RingHeader::read(&b[..20]), None);
    }

    #[test]
    fn salvage_writes_pending_records_at_their_offset() {
        let dir = tempfile::tempdir().unwrap();
        let prefix = format!("utrace-test-{}", std::process::id());
        // tid 7: 32 bytes already in the file, 32 pending; tid 8: nothing pending.
        std::fs::write(dir.path().join("7.dat"), [1u8; 32]).unwrap();
        let mut ring = header_bytes(&RingHeader {
            magic: MAGIC,
            tid: 7,
            _pad: 0,
            file_off: 32,
            cursor: 0x5000 + 32,
            base: 0x5000,
            cap: 4096,
        });
        ring.extend([2u8; 32]);
        ring.extend([9u8; 4064]); // stale bytes past the cursor
        std::fs::write(ring_path(&prefix, 7), &ring).unwrap();
        let mut empty = header_bytes(&RingHeader {
            magic: MAGIC,
            tid: 8,
            _pad: 0,
            file_off: 0,
            cursor: 0x5000,
            base: 0x5000,
            cap: 4096,
        });
        empty.extend([0u8; 4096]);
        std::fs::write(ring_path(&prefix, 8), &empty).unwrap();

        let done = salvage(&prefix, dir.path()).unwrap();
        assert_eq!(
            done,
            Salvaged {
                rings: 2,
                bytes: 32
            }
        );
        let data = std::fs::read(dir.path().join("7.dat")).unwrap();
        assert_eq!(data.len(), 64);
        assert!(data[..32].iter().all(|&b| b == 1) && data[32..].iter().all(|&b| b == 2));
        assert!(!dir.path().join("8.dat").exists());
        assert!(!ring_path(&prefix, 7).exists() && !ring_path(&prefix, 8).exists());
        // Idempotent: nothing left to do.
        assert_eq!(salvage(&prefix, dir.path()).unwrap(), Salvaged::default());
    }
}
