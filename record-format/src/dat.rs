//! Per-thread data files `<tid>.dat`: a plain concatenation of 16-byte records, each optionally
//! followed by a payload. The file is memory-mapped and read in place, so memory stays flat
//! however large the trace.

use crate::error::Result;
use crate::file::{map_regular, Mapped};
use crate::raw::{event_payload_size, RawRecord, RECORD_SIZE};
use std::path::{Path, PathBuf};

/// One thread's records, mapped read-only.
#[derive(Debug)]
pub struct DatFile {
    pub tid: u32,
    pub path: PathBuf,
    map: Mapped,
}

impl DatFile {
    /// Opens `<tid>.dat`; a missing or empty file reads as no records. Anything but a regular
    /// file is refused ([`crate::file`]).
    pub fn open(path: &Path, tid: u32) -> Result<DatFile> {
        let map = match map_regular(path) {
            Ok(map) => map,
            Err(e) if e.is_not_found() => Mapped::default(),
            Err(e) => return Err(e),
        };
        Ok(DatFile::from_map(path, tid, map))
    }

    /// A thread without records (its file missing or left out).
    pub fn empty(path: &Path, tid: u32) -> DatFile {
        DatFile::from_map(path, tid, Mapped::default())
    }

    fn from_map(path: &Path, tid: u32, map: Mapped) -> DatFile {
        DatFile {
            tid,
            path: path.to_path_buf(),
            map,
        }
    }

    pub fn bytes(&self) -> &[u8] {
        &self.map
    }

    /// Lets the kernel drop the pages before `upto` from this process (they are re-read from
    /// the file if touched again), so memory stays flat while a large file is walked.
    pub fn release(&self, upto: usize) {
        self.map.release(upto);
    }

    pub fn is_empty(&self) -> bool {
        self.bytes().is_empty()
    }
}

/// Why a record could not be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BadRecord {
    /// The magic bits were wrong.
    Magic,
    /// The file ends inside a record or payload.
    Truncated,
}

/// Reads the record header at `pos`; `None` at the end of the data.
pub fn read_header(bytes: &[u8], pos: usize) -> Option<Result<RawRecord, BadRecord>> {
    let rest = bytes.get(pos..)?;
    if rest.is_empty() {
        return None;
    }
    let Some(head) = rest.get(..RECORD_SIZE) else {
        return Some(Err(BadRecord::Truncated));
    };
    let head: &[u8; RECORD_SIZE] = head.try_into().ok()?;
    Some(RawRecord::decode(head).ok_or(BadRecord::Magic))
}

/// Length of the EVENT payload starting at `pos` (`u16 len`, padded to 8).
pub fn event_payload_len(bytes: &[u8], pos: usize) -> Result<usize, BadRecord> {
    let b = bytes.get(pos..pos + 2).ok_or(BadRecord::Truncated)?;
    let len = event_payload_size(u16::from_le_bytes([b[0], b[1]]) as usize);
    if pos + len > bytes.len() {
        return Err(BadRecord::Truncated);
    }
    Ok(len)
}
