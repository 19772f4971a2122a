//! The recorder's side of the rings: a [`Pump`] follows every ring of its prefix (or its share
//! of them) while the traced process tree runs, writes their sealed chunks to the data files,
//! tells an [`Observer`] what it wrote, and in flight mode writes the rings when a dump is
//! asked for.

use super::{
    chunk_slot, flag, open_data, open_ring, ring_files, state, take_sealed, RingHeader, CHUNKS,
    HEADER_SIZE,
};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

/// One ring the pump follows.
pub(super) struct Followed {
    tid: u32,
    path: PathBuf,
    /// Inode of the file mapped (a new exec image replaces the file).
    ino: u64,
    map: memmap2::MmapRaw,
    pub(super) data: std::fs::File,
    /// A flight ring ([`flag::FLIGHT`]).
    flight: bool,
}

impl Followed {
    fn state(&self, i: usize) -> &AtomicU32 {
        // SAFETY: the slot lies in the mapped header page, is 4-byte aligned and is only
        // accessed atomically by the pump and the owning thread while the mapping lives.
        unsafe { AtomicU32::from_ptr(self.map.as_mut_ptr().add(chunk_slot(i)) as *mut u32) }
    }

    fn live(&self) -> crate::flight::LiveRing<'_> {
        crate::flight::LiveRing { map: &self.map }
    }

    /// Writes every sealed chunk; returns the bytes written. A flight ring's chunks wait for
    /// a dump.
    fn pump(&self, observer: Option<&Observer>) -> std::io::Result<u64> {
        use std::os::unix::fs::FileExt;
        if self.flight {
            return Ok(0);
        }
        let mut written = 0;
        for i in 0..CHUNKS {
            if self.state(i).load(Ordering::Acquire) != state::SEALED {
                continue;
            }
            if !take_sealed(self.state(i)) {
                continue;
            }
            // The sealed chunk's slot and data are stable while it is WRITING.
            // SAFETY: the header page is mapped; a copy of it is read.
            let head = unsafe { std::slice::from_raw_parts(self.map.as_ptr(), HEADER_SIZE) };
            let result = match RingHeader::read(head) {
                Some(h) if (h.chunks[i].len as usize) <= h.chunk_size as usize => {
                    let c = h.chunks[i];
                    let off = HEADER_SIZE + i * h.chunk_size as usize;
                    let len = c.len as usize;
                    if off + len <= self.map.len() {
                        // SAFETY: [off, off+len) lies in the mapping; the owner does not
                        // write a chunk while it is WRITING.
                        let data =
                            unsafe { std::slice::from_raw_parts(self.map.as_ptr().add(off), len) };
                        written += len as u64;
                        let result = self.data.write_all_at(data, c.file_off);
                        if let (Ok(()), Some(observe)) = (&result, observer) {
                            observe(Written::Chunk {
                                tid: self.tid,
                                off: c.file_off,
                                bytes: data,
                            });
                        }
                        result
                    } else {
                        Ok(())
                    }
                }
                _ => Ok(()),
            };
            // A chunk that could not be written stays sealed for its thread or the salvage.
            let after = if result.is_ok() {
                state::FREE
            } else {
                state::SEALED
            };
            self.state(i).store(after, Ordering::Release);
            result?;
        }
        Ok(written)
    }
}

/// What a [`Pump`] tells its [`Observer`].
#[derive(Debug, Clone, Copy)]
pub enum Written<'a> {
    /// A chunk written to `<tid>.dat` at `off`. Chunks of one thread may come out of order;
    /// flight dumps, the salvage and the threads' own writes (when their ring was full) are
    /// not told.
    Chunk { tid: u32, off: u64, bytes: &'a [u8] },
    /// The pump that follows the threads whose `tid % count == index` finished a pass over
    /// their rings: a chunk sealed before the pass began has been told of by its end.
    Pass { index: u32, count: u32 },
}

/// Told of what a [`Pump`] writes (`record --host` sends it on).
pub type Observer = std::sync::Arc<dyn Fn(Written<'_>) + Send + Sync>;

/// The recorder's side of the rings: follows every ring of a prefix while the traced process
/// tree runs and writes their sealed chunks to the data files.
pub struct Pump {
    prefix: String,
    dir: PathBuf,
    pub(super) rings: Vec<Followed>,
    /// This pump follows the rings whose `tid % share.1 == share.0` (several pumps split the
    /// threads between them).
    share: (u32, u32),
    /// Flight mode: the control page dumps are asked for through.
    control: Option<crate::flight::Control>,
    /// The last request acknowledged.
    acked: u64,
    observer: Option<Observer>,
}

impl Pump {
    pub fn new(prefix: &str, dir: &Path) -> Pump {
        Pump::shared(prefix, dir, 0, 1)
    }

    /// A pump for the `index`-th of `count` shares of the rings.
    pub fn shared(prefix: &str, dir: &Path, index: u32, count: u32) -> Pump {
        Pump {
            prefix: prefix.to_string(),
            dir: dir.to_path_buf(),
            rings: Vec::new(),
            share: (index, count.max(1)),
            control: crate::flight::Control::open(prefix),
            acked: 0,
            observer: None,
        }
    }

    /// Tells `observer` of every chunk written from now on.
    pub fn observe(&mut self, observer: Observer) {
        self.observer = Some(observer);
    }

    /// Looks for new rings (and rings replaced by a new exec image) and drops rings that are
    /// gone (their threads wrote everything and removed them). A ring whose data file cannot
    /// be opened is left for a later rescan, the others are followed; the first error is
    /// returned.
    pub fn rescan(&mut self) -> std::io::Result<()> {
        use std::os::unix::fs::MetadataExt;
        let (index, count) = self.share;
        let mut files = ring_files(&self.prefix)?;
        files.retain(|(tid, _)| tid % count == index);
        self.rings.retain(|r| {
            files.iter().any(|(tid, _)| *tid == r.tid)
                && std::fs::metadata(&r.path).is_ok_and(|m| m.ino() == r.ino)
        });
        let mut first_err = None;
        for (tid, path) in files {
            if self.rings.iter().any(|r| r.tid == tid) {
                continue;
            }
            let Ok(file) = open_ring(&path, true) else {
                continue;
            };
            let Ok(meta) = file.metadata() else { continue };
            let mut head = [0u8; HEADER_SIZE];
            // A ring whose header is not complete yet is picked up by a later rescan.
            let header = std::os::unix::fs::FileExt::read_exact_at(&file, &mut head, 0)
                .ok()
                .and_then(|()| RingHeader::read(&head))
                .filter(|h| h.tid == tid && meta.len() as usize == h.file_len());
            let Some(header) = header else {
                continue;
            };
            let Ok(map) = memmap2::MmapOptions::new().map_raw(&file) else {
                continue;
            };
            let data = match open_data(&self.dir, tid) {
                Ok(data) => data,
                Err(e) => {
                    first_err.get_or_insert(e);
                    continue;
                }
            };
            self.rings.push(Followed {
                tid,
                ino: meta.ino(),
                path,
                map,
                data,
                flight: header.flags & flag::FLIGHT != 0,
            });
        }
        first_err.map_or(Ok(()), Err)
    }

    /// Writes every sealed chunk of the followed rings; returns the bytes written. In flight
    /// mode, dumps every ring when one was asked for, and writes and removes the rings of
    /// threads that ended.
    pub fn pump(&mut self) -> std::io::Result<u64> {
        let mut written = 0;
        for r in &self.rings {
            written += r.pump(self.observer.as_ref())?;
        }
        if let Some(observe) = &self.observer {
            let (index, count) = self.share;
            observe(Written::Pass { index, count });
        }
        if self.control.is_none() {
            return Ok(written);
        }
        // An error (reported) does not stop the rest: in flight mode nothing else writes the
        // records, and the requesters and ended threads wait for this pump.
        let mut first_err = None;
        match self.dump_asked() {
            Ok(n) => written += n,
            Err(e) => {
                first_err.get_or_insert(e);
            }
        }
        let mut ended = Vec::new();
        for (i, r) in self.rings.iter().enumerate() {
            if r.flight && r.live().ended() {
                let live = r.live();
                // Removed even when the write fails: its records are lost (the error says so),
                // its memory is freed.
                match live.write(live.claim(), &r.data) {
                    Ok(n) => written += n,
                    Err(e) => {
                        first_err.get_or_insert(e);
                    }
                }
                ended.push(i);
            }
        }
        for i in ended.into_iter().rev() {
            use std::os::unix::fs::MetadataExt;
            let r = self.rings.swap_remove(i);
            // Only this ring: a new exec image that gave up waiting has its own at the path.
            if std::fs::symlink_metadata(&r.path).is_ok_and(|m| m.ino() == r.ino) {
                let _ = std::fs::remove_file(&r.path);
            }
        }
        first_err.map_or(Ok(written), Err)
    }

    /// A dump of every flight ring, if one was asked for since the last: claims every ring's
    /// records, tells the requesters, then writes them.
    fn dump_asked(&mut self) -> std::io::Result<u64> {
        let Some(control) = &self.control else {
            return Ok(0);
        };
        let asked = control.requested();
        if asked <= self.acked {
            return Ok(0);
        }
        // Rings that appeared since the last scan have records to dump too. On an error the
        // rings followed are still dumped, and the requesters told (they would wait in vain).
        let rescanned = self.rescan();
        let claims: Vec<_> = self
            .rings
            .iter()
            .filter(|r| r.flight)
            .map(|r| (r, r.live().claim()))
            .collect();
        if let Some(control) = &self.control {
            control.acknowledge(asked);
        }
        self.acked = asked;
        let mut written = 0;
        let mut first_err = rescanned.err();
        for (r, claim) in claims {
            match r.live().write(claim, &r.data) {
                Ok(n) => written += n,
                Err(e) => {
                    first_err.get_or_insert(e);
                }
            }
        }
        match first_err {
            Some(e) => Err(e),
            None => Ok(written),
        }
    }

    /// Rings followed now.
    pub fn followed(&self) -> usize {
        self.rings.len()
    }

    /// Whether this pump records in flight mode (the control page was found).
    pub fn is_flight(&self) -> bool {
        self.control.is_some()
    }

    /// Waits `pause` before the next pass; in flight mode a dump request ends the wait at once.
    pub fn idle(&self, pause: std::time::Duration) {
        match &self.control {
            Some(control) => control.wait_request(self.acked, pause),
            None => std::thread::sleep(pause),
        }
    }
}
