//! The flight recorder (`record --flight-recorder=SIZE`): each thread's ring
//! ([`crate::ring`]) keeps only its newest records, and they are written to `<tid>.dat` when a
//! dump is asked for.
//!
//! In a flight ring ([`flag::FLIGHT`]) a chunk's `file_off` is its position in the thread's
//! unbounded *stream* of records, not in the data file. The pump does not write sealed chunks;
//! the thread, coming back to a sealed chunk, drops it. The header's `dumped` word is the stream
//! position up to which records are in the data file already, so no record is written twice.
//!
//! A dump writes, for every ring, the records after `dumped`, oldest first, appended to the data
//! file after what earlier dumps wrote; records dropped in between become one LOST record (its
//! count is the bytes lost / 16: records with payloads count for more than one). The analysis
//! then shows what follows a LOST record as it shows functions entered before tracing started.
//!
//! Dumps are asked for through the control page `/dev/shm/<prefix>/flight`, which the recorder
//! creates when it records in flight mode (its presence is what tells libmcount): a requester
//! increments `req` and waits (bounded) until the pump, having claimed every ring's records, sets
//! `ack` to at least that value. The pump claims a sealed chunk by moving it to `WRITING` (the
//! thread waits for it as it does in normal recording) and copies the filling chunk's records up
//! to the published cursor, checking afterwards that the thread did not reuse the chunk meanwhile.
//! A thread that ends marks its ring [`flag::ENDED`]: the pump writes what it holds and removes it,
//! so memory stays SIZE × live threads. At the end of the run the salvage writes what was not
//! dumped yet.

use crate::raw::{RawRecord, RecordKind, RECORD_SIZE};
use crate::ring::{
    chunk_slot, flag, state, RingHeader, CHUNKS, DUMPED_OFF, FLAGS_OFF, HEADER_SIZE,
};
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};

/// Name of the control page in the ring directory (never a tid: rings ignore it).
pub const CONTROL_NAME: &str = "flight";
/// First bytes of the control page.
pub const CONTROL_MAGIC: [u8; 8] = *b"utrfly01";
/// Size of the control page.
pub const CONTROL_SIZE: usize = 4096;
/// Offset of the request counter (u64) in the control page.
pub const REQ_OFF: usize = 8;
/// Offset of the acknowledged counter (u64) in the control page.
pub const ACK_OFF: usize = 16;

/// The control page of `prefix`.
pub fn control_path(prefix: &str) -> PathBuf {
    crate::ring::ring_dir(prefix).join(CONTROL_NAME)
}

/// Creates the control page of `prefix` (the ring directory exists): the rings of this prefix
/// are flight rings.
pub fn create_control(prefix: &str) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(control_path(prefix))?;
    file.set_len(CONTROL_SIZE as u64)?;
    file.write_all_at(&CONTROL_MAGIC, 0)
}

/// The recorder's view of the control page.
pub struct Control {
    map: memmap2::MmapRaw,
}

impl Control {
    /// Maps the control page of `prefix`, if there is one (flight mode).
    pub fn open(prefix: &str) -> Option<Control> {
        use std::os::unix::fs::OpenOptionsExt;
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
            .open(control_path(prefix))
            .ok()?;
        let meta = file.metadata().ok()?;
        if !meta.is_file() || meta.len() != CONTROL_SIZE as u64 {
            return None;
        }
        let map = memmap2::MmapOptions::new().map_raw(&file).ok()?;
        Some(Control { map })
    }

    fn word(&self, off: usize) -> &AtomicU64 {
        // SAFETY: `off` + 8 lies in the mapped page, 8-aligned; the word is only accessed
        // atomically (by libmcount's requesters and the pump) while the mapping lives.
        unsafe { AtomicU64::from_ptr(self.map.as_mut_ptr().add(off) as *mut u64) }
    }

    /// Dumps asked for so far (pairs with the requesters' `fetch_add`).
    pub fn requested(&self) -> u64 {
        self.word(REQ_OFF).load(Ordering::Acquire)
    }

    /// Tells the requesters up to `n` that their records are claimed, and wakes them.
    pub fn acknowledge(&self, n: u64) {
        let ack = self.word(ACK_OFF);
        ack.fetch_max(n, Ordering::Release);
        // Requesters sleep on the word's low half (x86_64: at the word's address).
        futex(ack, libc::FUTEX_WAKE, i32::MAX as u32, None);
    }

    /// Sleeps until a request after `acked` comes (a requester wakes the request word), at
    /// most `timeout`.
    pub fn wait_request(&self, acked: u64, timeout: std::time::Duration) {
        let req = self.word(REQ_OFF);
        if req.load(Ordering::Acquire) == acked {
            // Returns at once if a request came since the load (the low half changed).
            futex(req, libc::FUTEX_WAIT, acked as u32, Some(timeout));
        }
    }
}

/// `futex(low half of word, op, val, timeout)` on the shared control page (not private: the
/// requesters are other processes). Errors (a wait cut short, a value that changed) only mean
/// that the caller looks again.
fn futex(word: &AtomicU64, op: i32, val: u32, timeout: Option<std::time::Duration>) {
    let ts = timeout.map(|t| libc::timespec {
        tv_sec: t.as_secs() as libc::time_t,
        tv_nsec: t.subsec_nanos() as libc::c_long,
    });
    let ts_ptr = ts
        .as_ref()
        .map_or(std::ptr::null(), |t| t as *const libc::timespec);
    // SAFETY: the word lies in the mapped page (the kernel only reads it, as a u32: its low
    // half on little-endian x86_64); `ts_ptr` is null or a valid timespec during the call.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr() as *const u32,
            op,
            val,
            ts_ptr,
        )
    };
}

/// One step of writing a ring's undumped records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// A LOST record for this many records.
    Lost(u64),
    /// `len` bytes of piece `piece`, from byte `skip` of it.
    Bytes {
        piece: usize,
        skip: usize,
        len: usize,
    },
}

/// What to write after stream position `dumped`, given the pieces still held (`(stream
/// position, length)`, sorted by position): the parts after `dumped`, with a LOST step for
/// every gap. Returns the steps and the new `dumped`.
pub fn plan(dumped: u64, pieces: &[(u64, usize)]) -> (Vec<Step>, u64) {
    let mut at = dumped;
    let mut steps = Vec::new();
    for (i, &(pos, len)) in pieces.iter().enumerate() {
        let end = pos + len as u64;
        if end <= at {
            continue;
        }
        if pos > at {
            steps.push(Step::Lost(((pos - at) / RECORD_SIZE as u64).max(1)));
            at = pos;
        }
        let skip = (at - pos) as usize;
        steps.push(Step::Bytes {
            piece: i,
            skip,
            len: len - skip,
        });
        at = end;
    }
    (steps, at)
}

/// The LOST record of `n` records (time 0, as uftrace writes it).
pub fn lost_record(n: u64) -> [u8; RECORD_SIZE] {
    RawRecord {
        time: 0,
        kind: RecordKind::Lost,
        more: false,
        depth: 0,
        addr: n,
    }
    .encode()
}

/// Where a dump is appended: a data file (a fake one in tests).
pub trait Sink {
    /// The current length.
    fn size(&self) -> std::io::Result<u64>;
    /// Writes all of `buf` at `off`.
    fn put_at(&self, buf: &[u8], off: u64) -> std::io::Result<()>;
    /// Truncates (or extends) to `len` bytes.
    fn cut_to(&self, len: u64) -> std::io::Result<()>;
}

impl Sink for std::fs::File {
    fn size(&self) -> std::io::Result<u64> {
        Ok(self.metadata()?.len())
    }

    fn put_at(&self, buf: &[u8], off: u64) -> std::io::Result<()> {
        FileExt::write_all_at(self, buf, off)
    }

    fn cut_to(&self, len: u64) -> std::io::Result<()> {
        std::fs::File::set_len(self, len)
    }
}

/// Appends the steps of `plan` over `pieces` (their bytes) to the end of `file`; returns the
/// bytes written. On an error the file is cut back to its old length, so that what the next
/// dump appends follows whole records (the records of this one are lost, not half written).
fn append(file: &impl Sink, steps: &[Step], pieces: &[&[u8]]) -> std::io::Result<u64> {
    let start = file.size()?;
    let mut off = start;
    let mut written = || -> std::io::Result<()> {
        for s in steps {
            match *s {
                Step::Lost(n) => {
                    file.put_at(&lost_record(n), off)?;
                    off += RECORD_SIZE as u64;
                }
                Step::Bytes { piece, skip, len } => {
                    if let Some(data) = pieces.get(piece).and_then(|p| p.get(skip..skip + len)) {
                        file.put_at(data, off)?;
                        off += data.len() as u64;
                    }
                }
            }
        }
        Ok(())
    };
    match written() {
        Ok(()) => Ok(off - start),
        Err(e) => {
            // Best effort: the error that matters is the write's.
            let _ = file.cut_to(start);
            Err(e)
        }
    }
}

/// Salvage of a flight ring (its owner is gone): appends the records after `h.dumped` to
/// `file`; returns the bytes written.
pub fn salvage_ring(h: &RingHeader, bytes: &[u8], file: &impl Sink) -> std::io::Result<u64> {
    let pending = h.pending();
    let spans: Vec<(u64, usize)> = pending.iter().map(|p| (p.file_off, p.len)).collect();
    let data: Vec<&[u8]> = pending
        .iter()
        .map(|p| bytes.get(p.ring_off..p.ring_off + p.len).unwrap_or(&[]))
        .collect();
    let (steps, _) = plan(h.dumped, &spans);
    append(file, &steps, &data)
}

/// Where a claimed piece's bytes are.
enum Source {
    /// A chunk moved to `WRITING`: `len` bytes at `off` in the ring mapping.
    Chunk { index: usize, off: usize },
    /// The records of the filling chunk, copied.
    Copy(Vec<u8>),
}

/// The records of one live ring claimed for a dump, not written yet.
pub struct Claim {
    pieces: Vec<(u64, usize, Source)>,
    dumped: u64,
}

/// A live flight ring mapped by the pump.
pub struct LiveRing<'a> {
    pub map: &'a memmap2::MmapRaw,
}

impl LiveRing<'_> {
    fn state(&self, i: usize) -> &AtomicU32 {
        // SAFETY: the slot lies in the mapped header page, is 4-byte aligned and is only
        // accessed atomically by the pump and the owning thread while the mapping lives.
        unsafe { AtomicU32::from_ptr(self.map.as_mut_ptr().add(chunk_slot(i)) as *mut u32) }
    }

    fn flags_word(&self) -> &AtomicU32 {
        // SAFETY: as for `state`: the flags word is in the header page, aligned, atomic.
        unsafe { AtomicU32::from_ptr(self.map.as_mut_ptr().add(FLAGS_OFF) as *mut u32) }
    }

    fn dumped_word(&self) -> &AtomicU64 {
        // SAFETY: as for `state`: the word is in the header page, 8-aligned; only the pump
        // (and the salvage, after the owner is gone) writes it.
        unsafe { AtomicU64::from_ptr(self.map.as_mut_ptr().add(DUMPED_OFF) as *mut u64) }
    }

    /// The header as it is now: each word read with an atomic load of its own size (the
    /// owner stores them concurrently), then an Acquire fence, so that what is read after
    /// (a chunk's records) is not read before the header words that describe it.
    fn header(&self) -> Option<RingHeader> {
        let mut head = [0u8; std::mem::size_of::<RingHeader>()];
        // The 8-byte units that hold two u32 fields: tid and padding, each chunk's state and
        // padding, the flags and padding; the others are one u64.
        let halves =
            |off: usize| off == 8 || off == FLAGS_OFF || (0..CHUNKS).any(|i| chunk_slot(i) == off);
        for (unit, out) in head.chunks_exact_mut(8).enumerate() {
            let off = unit * 8;
            let base = self.map.as_mut_ptr();
            if halves(off) {
                for (k, half) in out.chunks_exact_mut(4).enumerate() {
                    // SAFETY: the u32 lies in the mapped header page, 4-aligned; the owner
                    // accesses it atomically or not at all while the pump runs.
                    let w = unsafe { AtomicU32::from_ptr(base.add(off + 4 * k) as *mut u32) };
                    half.copy_from_slice(&w.load(Ordering::Relaxed).to_ne_bytes());
                }
            } else {
                // SAFETY: as above, for an 8-aligned u64 in the header page.
                let w = unsafe { AtomicU64::from_ptr(base.add(off) as *mut u64) };
                out.copy_from_slice(&w.load(Ordering::Relaxed).to_ne_bytes());
            }
        }
        // Pairs with the owner's Release stores of a chunk's state and of the cursor.
        fence(Ordering::Acquire);
        RingHeader::read(&head).filter(|h| h.file_len() <= self.map.len())
    }

    /// Whether the ring is a flight ring whose thread has ended.
    pub fn ended(&self) -> bool {
        self.flags_word().load(Ordering::Acquire) & flag::ENDED != 0
    }

    /// Claims the records not dumped yet: sealed chunks move to `WRITING` (the thread waits
    /// for them), the filling chunk's records are copied.
    pub fn claim(&self) -> Claim {
        let mut claimed = [false; CHUNKS];
        self.claim_sealed(&mut claimed);
        self.claim_rest(claimed)
    }

    /// Moves every sealed chunk not claimed yet to `WRITING`, marking it in `claimed`.
    fn claim_sealed(&self, claimed: &mut [bool; CHUNKS]) {
        for (i, c) in claimed.iter_mut().enumerate() {
            if !*c && crate::ring::take_sealed(self.state(i)) {
                *c = true;
            }
        }
    }

    /// The rest of [`claim`](Self::claim) after a first pass over the sealed chunks: copies
    /// the filling chunk and claims what the thread sealed meanwhile.
    fn claim_rest(&self, mut claimed: [bool; CHUNKS]) -> Claim {
        let mut filling = None;
        let mut h = None;
        // A thread that seals its filling chunk while it is copied makes it a sealed one to
        // claim on the next pass.
        for _ in 0..4 {
            let Some(head) = self.header() else {
                break;
            };
            filling = self.copy_filling(&head);
            h = Some(head);
            let unclaimed_sealed =
                (0..CHUNKS).any(|i| !claimed[i] && head.chunks[i].state == state::SEALED);
            if filling.is_some() || !unclaimed_sealed {
                break;
            }
            self.claim_sealed(&mut claimed);
        }
        // The thread may have sealed a chunk after the last pass and before the header above
        // was read (and started the chunk that was copied): claimed now, or its records would
        // be a gap in the stream.
        self.claim_sealed(&mut claimed);
        // The slots of the chunks claimed last, read after their claim.
        let h = self.header().or(h);
        let mut pieces = Vec::new();
        let Some(h) = h else {
            self.release_claims(&claimed);
            return Claim { pieces, dumped: 0 };
        };
        let size = h.chunk_size as usize;
        for (i, _) in claimed.iter().enumerate().filter(|(_, c)| **c) {
            let c = h.chunks[i];
            if c.len as usize <= size && c.len.is_multiple_of(8) && c.len > 0 {
                let off = HEADER_SIZE + i * size;
                pieces.push((c.file_off, c.len as usize, Source::Chunk { index: i, off }));
            } else {
                self.state(i).store(state::FREE, Ordering::Release);
            }
        }
        if let Some((pos, data)) = filling {
            pieces.push((pos, data.len(), Source::Copy(data)));
        }
        pieces.sort_by_key(|p| p.0);
        Claim {
            pieces,
            dumped: self.dumped_word().load(Ordering::Relaxed),
        }
    }

    /// The stream position and a copy of the filling chunk's records, if they stayed put
    /// while they were copied.
    fn copy_filling(&self, h: &RingHeader) -> Option<(u64, Vec<u8>)> {
        let size = h.chunk_size;
        let i = (0..CHUNKS).find(|&i| {
            let start = h.base.wrapping_add(i as u64 * size);
            h.chunks[i].state == state::FILLING && (start..=start + size).contains(&h.cursor)
        })?;
        let len = (h.cursor - h.base.wrapping_add(i as u64 * size)) as usize;
        if len == 0 || !len.is_multiple_of(8) {
            return None;
        }
        let off = HEADER_SIZE + i * size as usize;
        let mut data = vec![0u8; len];
        // SAFETY: [off, off+len) lies in the mapping (checked by `header`); the owner only
        // appends past `cursor` to this chunk, and its reuse of the chunk is detected below.
        unsafe {
            std::ptr::copy_nonoverlapping(self.map.as_ptr().add(off), data.as_mut_ptr(), len)
        };
        // The copy's loads come before the re-check (pairs with the owner's Release store of
        // FILLING after it set the new `file_off`).
        fence(Ordering::Acquire);
        let now = self.state(i).load(Ordering::Acquire);
        let again = self.header()?;
        let same = again.chunks[i].file_off == h.chunks[i].file_off;
        (same && (now == state::FILLING || now == state::SEALED || now == state::WRITING))
            .then_some((h.chunks[i].file_off, data))
    }

    fn release_claims(&self, claimed: &[bool; CHUNKS]) {
        for (i, _) in claimed.iter().enumerate().filter(|(_, c)| **c) {
            self.state(i).store(state::FREE, Ordering::Release);
        }
    }

    /// Appends the claimed records to `file`, records how far the stream is written and frees
    /// the claimed chunks; returns the bytes written.
    pub fn write(&self, claim: Claim, file: &impl Sink) -> std::io::Result<u64> {
        let spans: Vec<(u64, usize)> = claim.pieces.iter().map(|p| (p.0, p.1)).collect();
        let (steps, dumped) = plan(claim.dumped, &spans);
        let data: Vec<&[u8]> = claim
            .pieces
            .iter()
            .map(|(_, len, src)| match src {
                // SAFETY: the chunk is WRITING, claimed by this pump: the owner does not touch
                // it; [off, off+len) was checked against the mapping's length.
                Source::Chunk { off, .. } => unsafe {
                    std::slice::from_raw_parts(self.map.as_ptr().add(*off), *len)
                },
                Source::Copy(v) => v.as_slice(),
            })
            .collect();
        let result = append(file, &steps, &data);
        if result.is_ok() {
            self.dumped_word().store(dumped, Ordering::Relaxed);
        }
        // Written or not (an error is reported), the chunks go back to the thread.
        for (_, _, src) in &claim.pieces {
            if let Source::Chunk { index, .. } = src {
                self.state(*index).store(state::FREE, Ordering::Release);
            }
        }
        result
    }
}

#[cfg(test)]
mod tests;
