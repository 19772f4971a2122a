//! Where records go: each thread appends to a staging ring of chunks ([`record_format::ring`],
//! runtime spec §9.2 writer "R"); full chunks are written to `<dir>/<tid>.dat` by the
//! recorder's pump on another CPU, or by the thread itself when it comes back to a chunk the
//! pump has not taken (and for every chunk when there is no recorder).
//!
//! [`Buffer`] is the hot path: `(cursor, limit)` over the chunk being filled, plus the ring
//! header's `cursor` word, which is advanced after every record so that the recorder can
//! salvage what a killed process did not write. [`DatWriter`] owns the ring; its cold
//! [`DatWriter::refill`] seals the chunk and moves to the next. The ring lives in
//! `/dev/shm/<prefix>-<tid>` when the recorder named a prefix (`UTRACE_RING`), else in private
//! memory. A flight-recorder ring ([`crate::flight`]) is never written by its thread: the thread
//! drops a sealed chunk when it comes back to it, and hands the ring to the pump when it ends.

use crate::sys;
use core::ffi::CStr;
use core::sync::atomic::{AtomicU32, Ordering};
use record_format::raw::RECORD_SIZE;
use record_format::ring::{chunk_slot, state, Chunk, RingHeader, CHUNKS, HEADER_SIZE};

/// Cursor and limit of the bytes records are written to. `#[repr(C)]`: the trampolines'
/// fast paths use it.
#[repr(C)]
#[derive(Debug)]
pub struct Buffer {
    pub(crate) cursor: *mut u8,
    pub(crate) limit: *mut u8,
    /// Where the cursor is published after each record (the ring header).
    pub(crate) commit: *mut u64,
}

impl Buffer {
    /// No room at all: every push fails.
    pub const fn empty() -> Buffer {
        Buffer {
            cursor: core::ptr::null_mut(),
            limit: core::ptr::null_mut(),
            commit: core::ptr::null_mut(),
        }
    }

    /// # Safety
    /// `[start, start+len)` must be writable and used by nothing else while records are
    /// pushed into this buffer; `commit` must be a writable word for as long.
    pub unsafe fn new(start: *mut u8, len: usize, commit: *mut u64) -> Buffer {
        Buffer {
            cursor: start,
            // `wrapping_add` keeps this free of UB even for a dangling `start` with len 0.
            limit: start.wrapping_add(len),
            commit,
        }
    }

    /// Whether one more record header fits.
    #[inline]
    pub fn has_room(&self) -> bool {
        !self.cursor.is_null()
            && (self.limit as usize).wrapping_sub(self.cursor as usize) >= RECORD_SIZE
    }

    /// Appends one record header; `false` when it does not fit.
    #[inline]
    pub fn push(&mut self, time: u64, word: u64) -> bool {
        if !self.has_room() {
            return false;
        }
        // SAFETY: at least RECORD_SIZE bytes from `cursor` lie inside the region promised by
        // `new`, and `commit` is writable. Scalar stores: no memcpy call from hook context.
        // The record is stored before the cursor is published (x86 keeps stores in order).
        unsafe {
            (self.cursor as *mut u64).write_unaligned(time.to_le());
            (self.cursor.add(8) as *mut u64).write_unaligned(word.to_le());
            self.cursor = self.cursor.add(RECORD_SIZE);
            self.commit.write_volatile(self.cursor as u64);
        }
        true
    }

    /// Bytes left before the limit.
    #[inline]
    fn room(&self) -> usize {
        if self.cursor.is_null() {
            0
        } else {
            (self.limit as usize).wrapping_sub(self.cursor as usize)
        }
    }

    /// Lets `fill` write a record of at most `max` bytes at the cursor (it returns the bytes
    /// it used, a multiple of 8), then publishes it. `false` when `max` bytes do not fit.
    #[inline]
    pub fn push_with(&mut self, max: usize, fill: impl FnOnce(&mut [u8]) -> usize) -> bool {
        if self.room() < max {
            return false;
        }
        // SAFETY: `max` bytes from `cursor` lie inside the region promised by `new` and
        // nothing else uses them until the cursor is published.
        let out = unsafe { core::slice::from_raw_parts_mut(self.cursor, max) };
        let used = fill(out).min(max);
        // SAFETY: `used` ≤ `max` bytes were written; published after them, as in `push`.
        unsafe {
            self.cursor = self.cursor.add(used);
            self.commit.write_volatile(self.cursor as u64);
        }
        true
    }

    pub fn cursor(&self) -> *mut u8 {
        self.cursor
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// No ring yet: the first record sets it up.
    Unopened,
    Open,
    /// Finished (thread or process end, or a fatal error): records are dropped.
    Closed,
}

/// Longest ring path: `/dev/shm/` + prefix + `/` + tid + NUL.
const PATH_MAX: usize = 128;

/// The writer of one thread's data file. `#[repr(C)]` with the buffer first: the trampolines
/// reach it at a fixed offset.
#[repr(C)]
#[derive(Debug)]
pub struct DatWriter {
    pub(crate) buf: Buffer,
    state: State,
    /// Directory the data file lives in.
    dirfd: i32,
    /// `<tid>.dat\0`.
    name: [u8; 24],
    /// `/dev/shm/<prefix>/<tid>\0`, or empty for a private ring.
    ring_path: [u8; PATH_MAX],
    /// The data file, opened once (with the ring) and kept: a name swapped for a link later
    /// changes nothing. -1 before, or when no descriptor number was free above the program's
    /// range: then each write reopens the name, refusing links and any file but the one
    /// first opened (`file_id`).
    fd: i32,
    /// Device and inode of the data file.
    file_id: (u64, u64),
    /// The ring mapping: header page, then `CHUNKS` chunks of `chunk_size` bytes.
    map: *mut u8,
    chunk_size: usize,
    /// The chunk being filled.
    cur: usize,
    /// A flight-recorder ring ([`crate::flight`]): sealed chunks are dropped, not written.
    flight: bool,
}

/// Formats `v` in decimal into `out` at `*i` (no allocation, no memcpy).
fn push_dec(out: &mut [u8], i: &mut usize, v: u32) {
    let mut digits = [0u8; 10];
    let mut n = 0;
    let mut v = v;
    loop {
        if let Some(d) = digits.get_mut(n) {
            *d = b'0' + (v % 10) as u8;
        }
        n += 1;
        v /= 10;
        if v == 0 || n == digits.len() {
            break;
        }
    }
    while n > 0 {
        n -= 1;
        if let (Some(dst), Some(&src)) = (out.get_mut(*i), digits.get(n)) {
            *dst = src;
        }
        *i += 1;
    }
}

/// Copies `src` into `out` at `*i`, byte by byte.
fn push_bytes(out: &mut [u8], i: &mut usize, src: &[u8]) {
    for &b in src {
        if let Some(dst) = out.get_mut(*i) {
            *dst = b;
        }
        *i += 1;
    }
}

impl DatWriter {
    /// A writer for `<tid>.dat` in `dirfd` whose ring has chunks of `chunk` bytes (rounded to
    /// whole pages, at least one); `prefix` names a shared ring (`None`: private memory).
    pub fn new(dirfd: i32, tid: i32, chunk: usize, prefix: Option<&CStr>) -> DatWriter {
        let chunk_size = chunk.max(sys::PAGE_SIZE).next_multiple_of(sys::PAGE_SIZE);
        let mut w = DatWriter {
            buf: Buffer::empty(),
            state: State::Unopened,
            dirfd,
            name: [0; 24],
            ring_path: [0; PATH_MAX],
            fd: -1,
            file_id: (0, 0),
            map: core::ptr::null_mut(),
            chunk_size,
            cur: 0,
            flight: false,
        };
        w.set_tid(tid, prefix);
        w
    }

    fn set_tid(&mut self, tid: i32, prefix: Option<&CStr>) {
        self.name = [0; 24];
        let mut i = 0;
        push_dec(&mut self.name, &mut i, tid as u32);
        push_bytes(&mut self.name, &mut i, b".dat");
        self.ring_path = [0; PATH_MAX];
        if let Some(p) = prefix.filter(|p| p.to_bytes().len() < PATH_MAX - 24) {
            let mut i = 0;
            push_bytes(&mut self.ring_path, &mut i, b"/dev/shm/");
            push_bytes(&mut self.ring_path, &mut i, p.to_bytes());
            push_bytes(&mut self.ring_path, &mut i, b"/");
            push_dec(&mut self.ring_path, &mut i, tid as u32);
        }
    }

    fn file_name(&self) -> &CStr {
        CStr::from_bytes_until_nul(&self.name).unwrap_or(c"0.dat")
    }

    fn shared_ring(&self) -> Option<&CStr> {
        CStr::from_bytes_until_nul(&self.ring_path)
            .ok()
            .filter(|p| !p.is_empty())
    }

    fn header(&self) -> *mut RingHeader {
        self.map as *mut RingHeader
    }

    fn map_len(&self) -> usize {
        HEADER_SIZE + CHUNKS * self.chunk_size
    }

    /// Slot of chunk `i` in the header (the writer is open).
    fn chunk(&self, i: usize) -> *mut Chunk {
        // SAFETY: the header page is mapped while the writer is open; `chunk_slot` is inside it.
        unsafe { self.map.add(chunk_slot(i % CHUNKS)) as *mut Chunk }
    }

    /// The state word of chunk `i`, shared with the recorder's pump.
    fn chunk_state(&self, i: usize) -> &AtomicU32 {
        // SAFETY: the word lies in the mapped header, is aligned, and is only accessed
        // atomically by this thread and the pump while the mapping lives.
        unsafe { AtomicU32::from_ptr(self.chunk(i) as *mut u32) }
    }

    /// First byte of chunk `i`.
    fn chunk_start(&self, i: usize) -> *mut u8 {
        self.map
            .wrapping_add(HEADER_SIZE + (i % CHUNKS) * self.chunk_size)
    }

    /// Appends one record; drops it if the ring cannot be flushed.
    #[inline]
    pub fn record(&mut self, time: u64, word: u64) {
        if !self.buf.push(time, word) && self.refill() {
            self.buf.push(time, word);
        }
    }

    /// Appends one record written by `fill` (at most `max` bytes: see [`Buffer::push_with`]);
    /// drops it if the ring cannot be flushed.
    #[inline]
    pub fn record_with(&mut self, max: usize, fill: impl FnOnce(&mut [u8]) -> usize) {
        if self.buf.room() < max && !(self.refill() && self.buf.room() >= max) {
            return;
        }
        self.buf.push_with(max, fill);
    }

    /// Makes room for one record before the caller takes its timestamp, so that the cost of a
    /// flush is not counted in a function's duration.
    #[inline]
    pub fn prepare(&mut self) {
        if !self.buf.has_room() {
            self.refill();
        }
    }

    /// Sets up the ring or moves to its next chunk. `false` if the writer is closed or a
    /// system call failed (the writer is then closed and the error logged once).
    #[cold]
    #[inline(never)]
    pub fn refill(&mut self) -> bool {
        let result = match self.state {
            State::Closed => return false,
            State::Open if self.shared_ring().is_some() && crate::config::recorder_gone() => {
                self.close();
                return false;
            }
            State::Unopened => self.open(),
            State::Open => self
                .seal()
                .and_then(|off| self.start_chunk(self.cur + 1, off)),
        };
        match result {
            Ok(()) => true,
            Err(errno) => {
                // A full disk is reported once, by the recorder, when there is one.
                if errno != libc::ENOSPC || self.shared_ring().is_none() {
                    crate::log::error(b"cannot write the thread's data file", errno);
                }
                self.state = State::Closed;
                self.buf = Buffer::empty();
                false
            }
        }
    }

    /// Seals the chunk being filled (if it holds records); returns the file offset after it.
    fn seal(&mut self) -> sys::SysResult<u64> {
        let i = self.cur;
        let c = self.chunk(i);
        let len = self.buf.cursor as usize - self.chunk_start(i) as usize;
        // SAFETY: chunk `i` is FILLING, so its slot is this thread's.
        let off = unsafe {
            (*c).len = len as u64;
            (*c).file_off
        };
        let next = if len > 0 { state::SEALED } else { state::FREE };
        self.chunk_state(i).store(next, Ordering::Release);
        self.buf = Buffer::empty();
        Ok(off + len as u64)
    }

    fn unmap(&mut self) {
        if !self.map.is_null() {
            // SAFETY: `map` is the ring this writer mapped; `buf` is reset right away, so
            // nothing refers to it afterwards.
            unsafe { sys::munmap(self.map, self.map_len()) };
            self.map = core::ptr::null_mut();
        }
        self.buf = Buffer::empty();
    }

    /// Lets go of the ring and data file of a session that has ended (`utrace_detach`; the
    /// recorder salvaged the ring): nothing more is written, later records are dropped.
    pub fn drop_session(&mut self) {
        self.unmap();
        self.release_file();
        self.state = State::Closed;
    }

    /// Lets go of a writer a `vfork` child set up in this (shared) memory, once the child has
    /// exec'd or exited: its ring is unmapped here but stays for the exec'd image (same tid)
    /// or the recorder's salvage; its descriptor, in the child's table, is forgotten, not
    /// closed. Later records are dropped.
    pub fn detach(&mut self) {
        self.unmap();
        if self.fd >= 0 {
            crate::config::forget_fd(self.fd);
            self.fd = -1;
        }
        self.state = State::Closed;
    }

    /// Writes everything and removes the ring; later records are dropped.
    pub fn close(&mut self) {
        if self.state == State::Open && self.flight {
            // The pump writes what the ring holds and removes it.
            let _ = self.seal();
            // SAFETY: the writer is open: `map` is its ring, mapped read-write.
            unsafe { crate::flight::mark_ended(self.map) };
        } else if self.state == State::Open {
            let written = self
                .seal()
                .and_then(|_| (0..CHUNKS).try_for_each(|i| self.reclaim(i)));
            match written {
                Ok(()) => {
                    if let Some(path) = self.shared_ring() {
                        let _ = sys::unlink(path);
                    }
                }
                // The ring stays for the recorder's salvage.
                Err(e) => crate::log::error(b"cannot write the thread's data file", e),
            }
        }
        self.unmap();
        self.release_file();
        self.state = State::Closed;
    }

    /// In a fork child: drop the parent's ring without touching it, and write to
    /// `<tid>.dat` through a ring of its own from the next record on.
    pub fn abandon(&mut self, tid: i32, prefix: Option<&CStr>) {
        self.unmap();
        self.release_file();
        self.set_tid(tid, prefix);
        if self.state != State::Closed {
            self.state = State::Unopened;
        }
    }
}

mod backing;
#[cfg(test)]
mod tests;
