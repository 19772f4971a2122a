//! Per-thread data files `<tid>.dat`: a plain concatenation of 16-byte records, each optionally
//! followed by a payload. The file is memory-mapped and read in place, so memory stays flat
//! however large the trace.

use crate::error::{FormatError, Result};
use crate::raw::{event_payload_size, RawRecord, RECORD_SIZE};
use memmap2::Mmap;
use std::fs::File;
use std::path::{Path, PathBuf};

/// One thread's records, mapped read-only.
#[derive(Debug)]
pub struct DatFile {
    pub tid: u32,
    pub path: PathBuf,
    map: Option<Mmap>,
}

impl DatFile {
    /// Opens `<tid>.dat`; a missing or empty file reads as no records.
    pub fn open(path: &Path, tid: u32) -> Result<DatFile> {
        let file = match File::open(path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok(DatFile {
                    tid,
                    path: path.to_path_buf(),
                    map: None,
                })
            }
            Err(e) => return Err(FormatError::io(path, e)),
        };
        let len = file.metadata().map_err(|e| FormatError::io(path, e))?.len();
        let map = if len == 0 {
            None
        } else {
            // SAFETY: the mapping is read-only and private to this process. The data directory is
            // not written while it is analysed; should another process truncate the file anyway,
            // reads could fault, which is the documented limit of mmap-based readers.
            let map = unsafe { Mmap::map(&file) }.map_err(|e| FormatError::io(path, e))?;
            // Advice only tunes read-ahead; failing to give it changes nothing else.
            let _ = map.advise(memmap2::Advice::Sequential);
            Some(map)
        };
        Ok(DatFile {
            tid,
            path: path.to_path_buf(),
            map,
        })
    }

    pub fn bytes(&self) -> &[u8] {
        self.map.as_deref().unwrap_or(&[])
    }

    /// Lets the kernel drop the pages before `upto` from this process (they are re-read from
    /// the file if touched again), so memory stays flat while a large file is walked.
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
