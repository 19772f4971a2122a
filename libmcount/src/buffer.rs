//! Where records go: each thread appends to a staging ring ([`record_format::ring`], runtime
//! spec §9.2 writer "R") and writes it to `<dir>/<tid>.dat` with one `pwrite` when it is full
//! and when the thread ends.
//!
//! [`Buffer`] is the hot path: `(cursor, limit)` over the ring's record space, plus the ring
//! header's `cursor` word, which is advanced after every record so that the recorder can
//! salvage what a killed process did not flush. [`DatWriter`] owns the ring; its cold
//! [`DatWriter::refill`] flushes it. The ring lives in `/dev/shm/<prefix>-<tid>` when the
//! recorder named a prefix (`UTRACE_RING`), else in private memory.

use crate::sys;
use core::ffi::CStr;
use record_format::raw::RECORD_SIZE;
use record_format::ring::{RingHeader, HEADER_SIZE, MAGIC};

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

/// Longest ring path: `/dev/shm/` + prefix + `-` + tid + NUL.
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
    /// `/dev/shm/<prefix>-<tid>\0`, or empty for a private ring.
    ring_path: [u8; PATH_MAX],
    /// The ring mapping: header page, then `cap` bytes of records.
    map: *mut u8,
    cap: usize,
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
    /// A writer for `<tid>.dat` in `dirfd` with a ring of `cap` bytes (rounded to whole pages,
    /// at least one); `prefix` names a shared ring (`None`: private memory).
    pub fn new(dirfd: i32, tid: i32, cap: usize, prefix: Option<&CStr>) -> DatWriter {
        let cap = cap.max(sys::PAGE_SIZE).next_multiple_of(sys::PAGE_SIZE);
        let mut w = DatWriter {
            buf: Buffer::empty(),
            state: State::Unopened,
            dirfd,
            name: [0; 24],
            ring_path: [0; PATH_MAX],
            map: core::ptr::null_mut(),
            cap,
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
            push_bytes(&mut self.ring_path, &mut i, b"-");
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
        HEADER_SIZE + self.cap
    }

    /// Appends one record; drops it if the ring cannot be flushed.
    #[inline]
    pub fn record(&mut self, time: u64, word: u64) {
        if !self.buf.push(time, word) && self.refill() {
            self.buf.push(time, word);
        }
    }

    /// Makes room for one record before the caller takes its timestamp, so that the cost of a
    /// flush is not counted in a function's duration.
    #[inline]
    pub fn prepare(&mut self) {
        if !self.buf.has_room() {
            self.refill();
        }
    }

    /// Sets up or flushes the ring. `false` if the writer is closed or a system call failed
    /// (the writer is then closed and the error logged once).
    #[cold]
    #[inline(never)]
    pub fn refill(&mut self) -> bool {
        let result = match self.state {
            State::Closed => return false,
            State::Unopened => self.open(),
            State::Open => self.flush(),
        };
        match result {
            Ok(()) => true,
            Err(errno) => {
                crate::log_error(b"cannot write the thread's data file", errno);
                self.state = State::Closed;
                self.buf = Buffer::empty();
                false
            }
        }
    }

    /// Size of the data file now (0 if it does not exist).
    fn data_file_size(&self) -> sys::SysResult<u64> {
        match sys::openat(
            self.dirfd,
            self.file_name(),
            libc::O_RDONLY | libc::O_CLOEXEC,
            0,
        ) {
            Ok(fd) => {
                let size = sys::file_size(fd);
                sys::close(fd);
                size
            }
            Err(libc::ENOENT) => Ok(0),
            Err(e) => Err(e),
        }
    }

    /// Writes `data` into the data file at `off`.
    fn write_data(&self, data: &[u8], off: u64) -> sys::SysResult<()> {
        let fd = sys::openat(
            self.dirfd,
            self.file_name(),
            libc::O_WRONLY | libc::O_CREAT | libc::O_CLOEXEC,
            0o644,
        )?;
        // Reserve the file's blocks ahead, in steps that grow with the file (1 to 32 MiB):
        // ext4 then does less work per page written. The recorder cuts what is left unused.
        let end = off + data.len() as u64;
        let step = end.next_power_of_two().clamp(1 << 20, 32 << 20);
        if off == 0 || off / step != end / step {
            let _ = sys::fallocate_keep_size(fd, end / step * step, step);
        }
        let r = sys::pwrite_all(fd, data, off);
        sys::close(fd);
        r
    }

    /// Flushes the records of a ring left by an earlier image of this thread (before exec) or
    /// an earlier thread with this tid; returns the file offset after them.
    fn take_over(&self, fd: i32, size: u64) -> sys::SysResult<Option<u64>> {
        if size < HEADER_SIZE as u64 {
            return Ok(None);
        }
        let map = sys::mmap(size as usize, libc::PROT_READ, libc::MAP_SHARED, fd, 0)?;
        // SAFETY: `map` is a fresh read-only mapping of `size` bytes, at least a header.
        let bytes = unsafe { core::slice::from_raw_parts(map, size as usize) };
        let header = RingHeader::read(bytes);
        let mut result = Ok(None);
        if let Some(h) = header {
            if let Some(len) = h.pending() {
                let data = bytes.get(HEADER_SIZE..HEADER_SIZE + len as usize);
                result = match data {
                    Some(d) if !d.is_empty() => self.write_data(d, h.file_off),
                    _ => Ok(()),
                }
                .map(|()| Some(h.file_off + len));
            }
        }
        // SAFETY: `bytes` is not used after this point.
        unsafe { sys::munmap(map, size as usize) };
        result
    }

    /// Maps the ring and starts it after the data already in the file.
    fn open(&mut self) -> sys::SysResult<()> {
        let len = self.map_len();
        let mut file_off = None;
        let map = match self.shared_ring() {
            Some(path) => {
                let fd = sys::openat(
                    libc::AT_FDCWD,
                    path,
                    libc::O_RDWR | libc::O_CREAT | libc::O_CLOEXEC,
                    0o600,
                )?;
                let mapped = sys::file_size(fd)
                    .and_then(|size| {
                        file_off = self.take_over(fd, size)?;
                        if size != len as u64 {
                            sys::ftruncate(fd, len as u64)?;
                        }
                        Ok(())
                    })
                    .and_then(|()| {
                        sys::mmap(
                            len,
                            libc::PROT_READ | libc::PROT_WRITE,
                            libc::MAP_SHARED,
                            fd,
                            0,
                        )
                    });
                sys::close(fd);
                mapped?
            }
            None => sys::mmap(
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )?,
        };
        let file_off = match file_off {
            Some(off) => off,
            None => match self.data_file_size() {
                Ok(size) => size,
                Err(e) => {
                    // SAFETY: nothing refers to the mapping yet.
                    unsafe { sys::munmap(map, len) };
                    return Err(e);
                }
            },
        };
        self.map = map;
        // SAFETY: the header page starts the fresh mapping.
        let base = unsafe { map.add(HEADER_SIZE) };
        let hdr = self.header();
        // SAFETY: `hdr` points at the writable, page-aligned header page of the ring. The
        // magic goes last: a salvage never trusts a half-written header.
        unsafe {
            (*hdr).magic = [0; 8];
            (*hdr).tid = 0;
            (*hdr).file_off = file_off;
            (*hdr).base = base as u64;
            (*hdr).cursor = base as u64;
            (*hdr).cap = self.cap as u64;
            (*hdr).tid = tid_of(&self.name);
            (*hdr).magic = MAGIC;
        }
        // SAFETY: the record space [base, base+cap) belongs to this writer; the header's cursor
        // word is writable for as long as the mapping lives.
        self.buf = unsafe { Buffer::new(base, self.cap, &raw mut (*hdr).cursor) };
        self.state = State::Open;
        Ok(())
    }

    /// Writes the ring's records to the data file and empties it (update order: module docs of
    /// `record_format::ring`).
    fn flush(&mut self) -> sys::SysResult<()> {
        let hdr = self.header();
        // SAFETY: the writer is open, so `hdr` is its mapped header.
        let (base, file_off) = unsafe { ((*hdr).base as *mut u8, (*hdr).file_off) };
        let len = self.buf.cursor as usize - base as usize;
        if len > 0 {
            // SAFETY: [base, cursor) holds the records written since the last flush.
            let data = unsafe { core::slice::from_raw_parts(base, len) };
            self.write_data(data, file_off)?;
        }
        // SAFETY: as above; cursor first, then the offset (see the ring protocol).
        unsafe {
            (&raw mut (*hdr).cursor).write_volatile(base as u64);
            (&raw mut (*hdr).file_off).write_volatile(file_off + len as u64);
        }
        self.buf.cursor = base;
        Ok(())
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

    /// Flushes and removes the ring; later records are dropped.
    pub fn close(&mut self) {
        if self.state == State::Open {
            match self.flush() {
                Ok(()) => {
                    if let Some(path) = self.shared_ring() {
                        let _ = sys::unlink(path);
                    }
                }
                // The ring stays for the recorder's salvage.
                Err(e) => crate::log_error(b"cannot write the thread's data file", e),
            }
        }
        self.unmap();
        self.state = State::Closed;
    }

    /// In a fork child: drop the parent's ring without touching it, and write to
    /// `<tid>.dat` through a ring of its own from the next record on.
    pub fn abandon(&mut self, tid: i32, prefix: Option<&CStr>) {
        self.unmap();
        self.set_tid(tid, prefix);
        if self.state != State::Closed {
            self.state = State::Unopened;
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

#[cfg(test)]
mod tests {
    use super::*;
    use record_format::raw::{header_word, RawRecord, RecordKind};
    use std::ffi::CString;
    use std::os::fd::AsRawFd;

    fn word(depth: u16) -> u64 {
        header_word(RecordKind::Entry, false, depth, 0x1234)
    }

    #[test]
    fn buffer_fills_exactly_and_publishes_its_cursor() {
        let mut store = vec![0u8; 40];
        let mut commit = 0u64;
        // SAFETY: `store` and `commit` are writable, outlive `b` and are not touched while `b`
        // is used.
        let mut b = unsafe { Buffer::new(store.as_mut_ptr(), store.len(), &mut commit) };
        assert!(b.push(1, word(0)));
        assert!(b.push(2, word(1)));
        assert!(!b.push(3, word(2)));
        assert_eq!(commit, store.as_ptr() as u64 + 32);
        let r = RawRecord::decode(store[16..32].try_into().unwrap()).unwrap();
        assert_eq!((r.time, r.depth, r.addr), (2, 1, 0x1234));
        assert_eq!(&store[32..], &[0; 8]);
        assert!(!Buffer::empty().push(1, 2));
    }

    fn records(path: &std::path::Path) -> Vec<RawRecord> {
        let data = std::fs::read(path).unwrap();
        assert_eq!(data.len() % 16, 0);
        data.chunks(16)
            .map(|c| RawRecord::decode(c.try_into().unwrap()).expect("valid record"))
            .collect()
    }

    #[test]
    fn private_ring_flushes_when_full_and_appends() {
        let dir = tempfile::tempdir().unwrap();
        let d = std::fs::File::open(dir.path()).unwrap();
        let path = dir.path().join("42.dat");
        // A one-page ring holds 256 records: 1000 need three flushes and a final one.
        let mut w = DatWriter::new(d.as_raw_fd(), 42, 1, None);
        for i in 0..1000u64 {
            w.record(i + 1, word((i % 1000) as u16));
        }
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 3 * 4096);
        w.close();
        w.record(5000, word(0)); // dropped
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 16000);
        // A later writer of the same tid appends.
        let mut w = DatWriter::new(d.as_raw_fd(), 42, 1, None);
        w.record(6000, word(3));
        w.close();
        let recs = records(&path);
        assert_eq!(recs.len(), 1001);
        assert!(recs.windows(2).all(|p| p[0].time < p[1].time));
        assert_eq!((recs[1000].time, recs[1000].depth), (6000, 3));
    }

    #[test]
    fn shared_ring_is_salvaged_or_taken_over() {
        let dir = tempfile::tempdir().unwrap();
        let d = std::fs::File::open(dir.path()).unwrap();
        let prefix = format!("utrace-unit-{}", std::process::id());
        let cprefix = CString::new(prefix.clone()).unwrap();
        let tid = 77;
        let path = dir.path().join("77.dat");
        // An image writes 300 records (one flush) and "dies" without closing.
        let mut w = DatWriter::new(d.as_raw_fd(), tid, 1, Some(&cprefix));
        for i in 0..300u64 {
            w.record(i + 1, word(1));
        }
        assert_eq!(records(&path).len(), 256);
        // The image "dies" here (DatWriter has no Drop: the ring stays as a killed image
        // leaves it). The next image of the thread (exec) flushes the old ring before its own records.
        let mut w = DatWriter::new(d.as_raw_fd(), tid, 1, Some(&cprefix));
        w.record(1000, word(2));
        assert_eq!(records(&path).len(), 300);
        w.record(1001, word(2));
        // Killed again: the recorder salvages.
        let done = record_format::ring::salvage(&prefix, dir.path()).unwrap();
        assert_eq!((done.rings, done.bytes), (1, 32));
        let recs = records(&path);
        assert_eq!(recs.len(), 302);
        assert!(recs.windows(2).all(|p| p[0].time < p[1].time));
        assert!(!record_format::ring::ring_path(&prefix, tid as u32).exists());
    }

    #[test]
    fn closed_shared_ring_is_removed() {
        let dir = tempfile::tempdir().unwrap();
        let d = std::fs::File::open(dir.path()).unwrap();
        let prefix = format!("utrace-unit2-{}", std::process::id());
        let cprefix = CString::new(prefix.clone()).unwrap();
        let mut w = DatWriter::new(d.as_raw_fd(), 5, 1, Some(&cprefix));
        w.record(1, word(0));
        assert!(record_format::ring::ring_path(&prefix, 5).exists());
        w.close();
        assert!(!record_format::ring::ring_path(&prefix, 5).exists());
        assert_eq!(records(&dir.path().join("5.dat")).len(), 1);
    }

    #[test]
    fn abandoned_writer_leaves_file_alone() {
        let dir = tempfile::tempdir().unwrap();
        let d = std::fs::File::open(dir.path()).unwrap();
        let mut w = DatWriter::new(d.as_raw_fd(), 7, 1, None);
        w.record(1, word(0));
        w.abandon(8, None);
        w.record(2, word(1));
        w.close();
        assert!(!dir.path().join("7.dat").exists());
        assert_eq!(records(&dir.path().join("8.dat"))[0].time, 2);
    }
}
