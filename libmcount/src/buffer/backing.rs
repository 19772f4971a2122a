//! What a [`DatWriter`] writes through: the thread's data file, kept open and written at an
//! offset, and the ring mapped for it (shared in `/dev/shm` or private), opened after the
//! records the file already holds; its chunks started, and reclaimed from the pump or written
//! by the thread itself.

use super::{Buffer, DatWriter, State, PATH_MAX};
use crate::sys;
use core::ffi::CStr;
use core::sync::atomic::Ordering;
use record_format::ring::{flag, state, RingHeader, CHUNKS, HEADER_SIZE, MAGIC, SHORT_OF_SPACE};

impl DatWriter {
    /// Opens (creating it if needed) the data file and keeps it; returns its size.
    fn pin_data_file(&mut self) -> sys::SysResult<u64> {
        self.release_file();
        let (fd, st) = sys::open_data_file(self.dirfd, self.file_name(), libc::O_CREAT)?;
        self.file_id = (st.st_dev, st.st_ino);
        self.fd = crate::config::keep_fd(fd).unwrap_or(-1);
        Ok(st.st_size as u64)
    }

    /// Closes the kept data file, if any.
    pub(super) fn release_file(&mut self) {
        if self.fd >= 0 {
            crate::config::release_fd(self.fd);
            self.fd = -1;
        }
    }

    /// Writes `data` into the data file at `off`.
    fn write_data(&self, data: &[u8], off: u64) -> sys::SysResult<()> {
        if self.fd >= 0 {
            return self.write_at(self.fd, data, off);
        }
        let (fd, st) = sys::open_data_file(self.dirfd, self.file_name(), 0)?;
        let r = if (st.st_dev, st.st_ino) == self.file_id {
            self.write_at(fd, data, off)
        } else {
            Err(libc::EPERM)
        };
        sys::close(fd);
        r
    }

    fn write_at(&self, fd: i32, data: &[u8], off: u64) -> sys::SysResult<()> {
        // Reserve the file's blocks ahead, in steps that grow with the file (1 to 32 MiB):
        // ext4 then does less work per page written. The recorder cuts what is left unused.
        let end = off + data.len() as u64;
        let step = end.next_power_of_two().clamp(1 << 20, 32 << 20);
        if off == 0 || off / step != end / step {
            let _ = sys::fallocate_keep_size(fd, end / step * step, step);
        }
        sys::pwrite_all(fd, data, off)
    }

    /// Writes what the ring of an earlier image of this thread (before exec) or of an earlier
    /// thread with this tid still holds; returns the file offset after its records.
    fn take_over(&self, fd: i32, size: u64) -> sys::SysResult<Option<u64>> {
        if size < HEADER_SIZE as u64 {
            return Ok(None);
        }
        let map = sys::mmap(size as usize, libc::PROT_READ, libc::MAP_SHARED, fd, 0)?;
        // SAFETY: `map` is a fresh read-only mapping of `size` bytes, at least a header.
        let bytes = unsafe { core::slice::from_raw_parts(map, size as usize) };
        let mut result = Ok(None);
        if let Some(h) = RingHeader::read(bytes).filter(|h| h.file_len() as u64 == size) {
            result = h
                .pending()
                .iter()
                .try_for_each(|p| match bytes.get(p.ring_off..p.ring_off + p.len) {
                    Some(d) => self.write_data(d, p.file_off),
                    None => Ok(()),
                })
                .map(|()| Some(h.end()));
        }
        // SAFETY: `bytes` is not used after this point.
        unsafe { sys::munmap(map, size as usize) };
        result
    }

    /// Maps the ring and starts it after the data already in the file.
    pub(super) fn open(&mut self) -> sys::SysResult<()> {
        let len = self.map_len();
        let size = self.pin_data_file()?;
        let mut file_off = None;
        self.flight = self
            .shared_ring()
            .is_some_and(crate::flight::ring_is_flight);
        let map = match self.shared_ring() {
            Some(path) => {
                if self.flight {
                    // The pump writes what an earlier image's flight ring holds.
                    crate::flight::retire(path);
                } else if let Ok(old) = sys::openat(
                    libc::AT_FDCWD,
                    path,
                    libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
                    0,
                ) {
                    let taken = sys::file_size(old).and_then(|size| self.take_over(old, size));
                    sys::close(old);
                    file_off = taken?;
                    // A new file: the pump may still map the old one.
                    sys::unlink(path)?;
                }
                let fd = sys::openat(
                    libc::AT_FDCWD,
                    path,
                    libc::O_RDWR | libc::O_CREAT | libc::O_EXCL | libc::O_CLOEXEC,
                    0o600,
                )?;
                if !self.flight && !ring_fits(sys::free_space(fd).unwrap_or(u64::MAX), len) {
                    // Touching the sparse ring's pages beyond the file system's room would
                    // raise SIGBUS in a hook: this thread writes its own chunks instead.
                    sys::close(fd);
                    let _ = sys::unlink(path);
                    mark_short(path);
                    None
                } else {
                    let mapped = sys::ftruncate(fd, len as u64).and_then(|()| {
                        sys::mmap(
                            len,
                            libc::PROT_READ | libc::PROT_WRITE,
                            libc::MAP_SHARED,
                            fd,
                            0,
                        )
                    });
                    sys::close(fd);
                    if mapped.is_err() {
                        // No ring file may stay behind (a sparse one as large as asked).
                        let _ = sys::unlink(path);
                    }
                    Some(mapped?)
                }
            }
            None => None,
        };
        let map = match map {
            Some(map) => map,
            None => {
                // A private ring: no recorder sees it.
                self.ring_path[0] = 0;
                sys::mmap(
                    len,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                    -1,
                    0,
                )?
            }
        };
        // A flight ring counts positions in the thread's stream of records.
        let file_off = if self.flight {
            0
        } else {
            file_off.unwrap_or(size)
        };
        self.map = map;
        let hdr = self.header();
        // SAFETY: `hdr` points at the writable, page-aligned header page of the fresh ring
        // (zero-filled, so every chunk is FREE). The magic goes last: neither the pump nor a
        // salvage trusts a header without it.
        unsafe {
            (*hdr).base = self.chunk_start(0) as u64;
            (*hdr).cursor = self.chunk_start(0) as u64;
            (*hdr).chunk_size = self.chunk_size as u64;
            (*hdr).tid = tid_of(&self.name);
            (*hdr).flags = if self.flight { flag::FLIGHT } else { 0 };
            (&raw mut (*hdr).magic).write_volatile(MAGIC);
        }
        self.state = State::Open;
        self.start_chunk(0, file_off)
    }

    /// Makes chunk `i` (modulo `CHUNKS`) the one being filled, its records going to `off`;
    /// writes it first if the pump has not, or waits while the pump writes it.
    pub(super) fn start_chunk(&mut self, i: usize, off: u64) -> sys::SysResult<()> {
        let i = i % CHUNKS;
        self.reclaim(i)?;
        let c = self.chunk(i);
        // SAFETY: chunk `i` is FREE: only this thread touches its slot now.
        unsafe {
            (*c).file_off = off;
            (*c).len = 0;
        }
        self.chunk_state(i).store(state::FILLING, Ordering::Release);
        let start = self.chunk_start(i);
        let hdr = self.header();
        // SAFETY: the header is mapped; the cursor word is published before records follow.
        unsafe { (&raw mut (*hdr).cursor).write_volatile(start as u64) };
        self.cur = i;
        // SAFETY: chunk `i` ([start, start + chunk_size)) belongs to this writer while it is
        // FILLING; the header's cursor word lives as long as the mapping.
        self.buf = unsafe { Buffer::new(start, self.chunk_size, &raw mut (*hdr).cursor) };
        Ok(())
    }

    /// Gets chunk `i` back to FREE: writes it if it is still sealed, waits if the pump is
    /// writing it.
    pub(super) fn reclaim(&self, i: usize) -> sys::SysResult<()> {
        let st = self.chunk_state(i);
        loop {
            match st.load(Ordering::Acquire) {
                // Flight mode: the oldest records make room (the pump claims what it dumps).
                state::SEALED if self.flight => {
                    if st
                        .compare_exchange(
                            state::SEALED,
                            state::FREE,
                            Ordering::Acquire,
                            Ordering::Relaxed,
                        )
                        .is_ok()
                    {
                        return Ok(());
                    }
                }
                state::SEALED => {
                    if record_format::ring::take_sealed(st) {
                        let c = self.chunk(i);
                        // SAFETY: the chunk is WRITING by this thread; its slot and records
                        // are stable.
                        let (off, len) = unsafe { ((*c).file_off, (*c).len as usize) };
                        let len = len.min(self.chunk_size);
                        // SAFETY: [start, start + len) lies inside chunk `i`.
                        let data = unsafe { core::slice::from_raw_parts(self.chunk_start(i), len) };
                        let r = self.write_data(data, off);
                        st.store(state::FREE, Ordering::Release);
                        return r;
                    }
                }
                state::WRITING => {
                    // A recorder killed while writing the chunk leaves it WRITING for ever:
                    // then it is this thread's to write.
                    if crate::config::recorder_gone()
                        && st
                            .compare_exchange(
                                state::WRITING,
                                state::SEALED,
                                Ordering::Acquire,
                                Ordering::Relaxed,
                            )
                            .is_ok()
                    {
                        continue;
                    }
                    // SAFETY: sched_yield has no preconditions.
                    unsafe { libc::sched_yield() };
                }
                _ => return Ok(()),
            }
        }
    }
}

/// Whether a shared ring of `len` bytes may go in a file system with `free` bytes left: with
/// room for a few more (other threads' rings fill it too), else the thread's ring is private.
pub(super) fn ring_fits(free: u64, len: usize) -> bool {
    free / 4 >= len as u64
}

/// Leaves [`SHORT_OF_SPACE`] in the ring directory of `ring` (`<dir>/<tid>`) for the recorder,
/// which then says that some threads wrote their own data.
fn mark_short(ring: &CStr) {
    let bytes = ring.to_bytes();
    let Some(slash) = bytes.iter().rposition(|&b| b == b'/') else {
        return;
    };
    let mut path = [0u8; PATH_MAX];
    let name = SHORT_OF_SPACE.as_bytes();
    if slash + 1 + name.len() >= PATH_MAX {
        return;
    }
    path[..=slash].copy_from_slice(&bytes[..=slash]);
    path[slash + 1..slash + 1 + name.len()].copy_from_slice(name);
    if let Ok(p) = CStr::from_bytes_until_nul(&path) {
        let flags = libc::O_WRONLY | libc::O_CREAT | libc::O_NOFOLLOW | libc::O_CLOEXEC;
        if let Ok(fd) = sys::openat(libc::AT_FDCWD, p, flags, 0o600) {
            sys::close(fd);
        }
    }
}

/// The tid in a `<tid>.dat` name.
fn tid_of(name: &[u8]) -> u32 {
    name.iter()
        .take_while(|b| b.is_ascii_digit())
        .fold(0u32, |v, &b| {
            v.wrapping_mul(10).wrapping_add((b - b'0') as u32)
        })
}
