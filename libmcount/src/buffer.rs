//! Where records go: each thread appends to `<dir>/<tid>.dat` through an `mmap`ed window of
//! the file (runtime spec §9.2, writer "D").
//!
//! [`Buffer`] is the hot path: a `(cursor, limit)` pair over some writable bytes. [`DatWriter`]
//! owns the current window; when it is full, the cold [`DatWriter::refill`] unmaps it, grows the
//! file with `ftruncate` and maps the next window. Written pages belong to the page cache, so
//! every record survives a crash or SIGKILL; the file may then end in zero bytes (a record's
//! second word is never zero, so readers trim them).

use crate::sys;
use core::ffi::CStr;
use record_format::raw::RECORD_SIZE;

/// Cursor and limit of the bytes records are written to.
#[derive(Debug)]
pub struct Buffer {
    cursor: *mut u8,
    limit: *mut u8,
}

impl Buffer {
    /// No room at all: every push fails.
    pub const fn empty() -> Buffer {
        Buffer {
            cursor: core::ptr::null_mut(),
            limit: core::ptr::null_mut(),
        }
    }

    /// # Safety
    /// `[start, start+len)` must be writable and used by nothing else while records are
    /// pushed into this buffer.
    pub unsafe fn new(start: *mut u8, len: usize) -> Buffer {
        Buffer {
            cursor: start,
            // `wrapping_add` keeps this free of UB even for a dangling `start` with len 0.
            limit: start.wrapping_add(len),
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
        // `new`. Two scalar stores: no memcpy call from hook context.
        unsafe {
            (self.cursor as *mut u64).write_unaligned(time.to_le());
            (self.cursor.add(8) as *mut u64).write_unaligned(word.to_le());
            self.cursor = self.cursor.add(RECORD_SIZE);
        }
        true
    }

    pub fn cursor(&self) -> *mut u8 {
        self.cursor
    }
}

/// Length of `data` without its trailing run of all-zero 8-byte words (rounded down to 8).
pub fn trimmed_len(data: &[u8]) -> usize {
    let mut end = data.len() & !7;
    while end >= 8 {
        if data
            .get(end - 8..end)
            .is_some_and(|w| w.iter().any(|&b| b != 0))
        {
            break;
        }
        end -= 8;
    }
    end
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// No window yet: the first record opens the file and finds where its data ends.
    Unopened,
    Open,
    /// Finished (thread or process end, or a fatal error): records are dropped.
    Closed,
}

/// The writer of one thread's data file.
#[derive(Debug)]
pub struct DatWriter {
    buf: Buffer,
    state: State,
    /// Directory the file lives in.
    dirfd: i32,
    /// `<tid>.dat\0`.
    name: [u8; 24],
    /// Current window: address, file offset; `window` bytes long.
    map: *mut u8,
    map_off: u64,
    window: usize,
}

impl DatWriter {
    /// A writer for `<tid>.dat` in `dirfd`; the window size is rounded to whole pages (at least
    /// two, so the data end found in a page always leaves room for a record).
    pub fn new(dirfd: i32, tid: i32, window: usize) -> DatWriter {
        let window = window
            .max(2 * sys::PAGE_SIZE)
            .next_multiple_of(sys::PAGE_SIZE);
        let mut w = DatWriter {
            buf: Buffer::empty(),
            state: State::Unopened,
            dirfd,
            name: [0; 24],
            map: core::ptr::null_mut(),
            map_off: 0,
            window,
        };
        w.set_tid(tid);
        w
    }

    fn set_tid(&mut self, tid: i32) {
        // Byte by byte (no LineBuf copy): this runs in hook context, where a call to glibc's
        // memcpy could clobber the upper halves of vector argument registers.
        let mut digits = [0u8; 10];
        let mut n = 0;
        let mut v = tid as u32;
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
        self.name = [0; 24];
        let mut i = 0;
        while n > 0 {
            n -= 1;
            if let (Some(dst), Some(&src)) = (self.name.get_mut(i), digits.get(n)) {
                *dst = src;
            }
            i += 1;
        }
        for b in *b".dat" {
            if let Some(dst) = self.name.get_mut(i) {
                *dst = b;
            }
            i += 1;
        }
    }

    fn file_name(&self) -> &CStr {
        CStr::from_bytes_until_nul(&self.name).unwrap_or(c"0.dat")
    }

    /// Appends one record; drops it if the file cannot be extended.
    #[inline]
    pub fn record(&mut self, time: u64, word: u64) {
        if !self.buf.push(time, word) && self.refill() {
            self.buf.push(time, word);
        }
    }

    /// Makes room for one record before the caller takes its timestamp, so that the cost of
    /// mapping a new window is not counted in a function's duration.
    #[inline]
    pub fn prepare(&mut self) {
        if !self.buf.has_room() {
            self.refill();
        }
    }

    /// Bytes of data in the file so far (valid while open).
    fn data_end(&self) -> u64 {
        self.map_off + (self.buf.cursor() as usize - self.map as usize) as u64
    }

    /// Maps the next window. `false` if the writer is closed or a system call failed (the
    /// writer is then closed and the error logged once).
    #[cold]
    #[inline(never)]
    pub fn refill(&mut self) -> bool {
        if self.state == State::Closed {
            return false;
        }
        match self.map_next() {
            Ok(()) => true,
            Err(errno) => {
                crate::log_error(b"cannot extend the thread's data file", errno);
                self.close();
                false
            }
        }
    }

    fn map_next(&mut self) -> sys::SysResult<()> {
        let fd = sys::openat(
            self.dirfd,
            self.file_name(),
            libc::O_RDWR | libc::O_CREAT | libc::O_CLOEXEC,
            0o644,
        )?;
        let result = self.map_next_in(fd);
        sys::close(fd);
        result
    }

    fn map_next_in(&mut self, fd: i32) -> sys::SysResult<()> {
        let end = match self.state {
            State::Open => self.data_end(),
            // A file left by an earlier image of this thread (before exec) is appended to.
            _ => existing_data_end(fd)?,
        };
        self.unmap();
        let start = end & !(sys::PAGE_SIZE as u64 - 1);
        sys::ftruncate(fd, start + self.window as u64)?;
        let map = sys::mmap(
            self.window,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            fd,
            start,
        )?;
        self.map = map;
        self.map_off = start;
        let skip = (end - start) as usize;
        // SAFETY: the window [map, map+window) was just mapped writable for this writer only;
        // skip < PAGE_SIZE < window.
        self.buf = unsafe { Buffer::new(map.add(skip), self.window - skip) };
        // Take the first page's write fault now rather than inside the next record. The byte
        // lies past the data end, so it is zero already.
        // SAFETY: `map + skip` is inside the window just mapped.
        unsafe { map.add(skip).write_volatile(0) };
        self.state = State::Open;
        Ok(())
    }

    fn unmap(&mut self) {
        if !self.map.is_null() {
            // SAFETY: `map` is the window this writer mapped; `buf` is reset right away, so
            // nothing refers to it afterwards.
            unsafe { sys::munmap(self.map, self.window) };
            self.map = core::ptr::null_mut();
        }
        self.buf = Buffer::empty();
    }

    /// Unmaps the window and cuts the file to its data; later records are dropped.
    pub fn close(&mut self) {
        if self.state == State::Open {
            let end = self.data_end();
            self.unmap();
            if let Ok(fd) = sys::openat(
                self.dirfd,
                self.file_name(),
                libc::O_RDWR | libc::O_CLOEXEC,
                0,
            ) {
                let _ = sys::ftruncate(fd, end);
                sys::close(fd);
            }
        }
        self.unmap();
        self.state = State::Closed;
    }

    /// In a fork child: drop the parent's window without touching the parent's file, and
    /// write to `<tid>.dat` from the next record on.
    pub fn abandon(&mut self, tid: i32) {
        self.unmap();
        self.set_tid(tid);
        if self.state != State::Closed {
            self.state = State::Unopened;
        }
    }
}

/// Where the data of an existing file ends (its size minus a zero tail).
fn existing_data_end(fd: i32) -> sys::SysResult<u64> {
    let size = sys::file_size(fd)? as usize;
    if size == 0 {
        return Ok(0);
    }
    let map = sys::mmap(size, libc::PROT_READ, libc::MAP_SHARED, fd, 0)?;
    // SAFETY: `map` is a fresh read-only mapping of `size` bytes of the file.
    let end = trimmed_len(unsafe { core::slice::from_raw_parts(map, size) });
    // SAFETY: the slice above is no longer used.
    unsafe { sys::munmap(map, size) };
    Ok(end as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use record_format::raw::{header_word, RawRecord, RecordKind};
    use std::os::fd::AsRawFd;

    fn word(depth: u16) -> u64 {
        header_word(RecordKind::Entry, false, depth, 0x1234)
    }

    #[test]
    fn buffer_fills_exactly() {
        let mut store = vec![0u8; 40];
        // SAFETY: `store` is writable, outlives `b` and is not touched while `b` is used.
        let mut b = unsafe { Buffer::new(store.as_mut_ptr(), store.len()) };
        assert!(b.push(1, word(0)));
        assert!(b.push(2, word(1)));
        assert!(!b.push(3, word(2)));
        let r = RawRecord::decode(store[16..32].try_into().unwrap()).unwrap();
        assert_eq!((r.time, r.depth, r.addr), (2, 1, 0x1234));
        assert_eq!(&store[32..], &[0; 8]);
        assert!(!Buffer::empty().push(1, 2));
    }

    #[test]
    fn trims_zero_tail() {
        let mut d = vec![0u8; 64];
        assert_eq!(trimmed_len(&d), 0);
        d[17] = 1;
        assert_eq!(trimmed_len(&d), 24);
        d[63] = 1;
        assert_eq!(trimmed_len(&d), 64);
    }

    fn records(path: &std::path::Path) -> Vec<RawRecord> {
        let data = std::fs::read(path).unwrap();
        data.chunks(16)
            .map(|c| RawRecord::decode(c.try_into().unwrap()).expect("valid record"))
            .collect()
    }

    #[test]
    fn writer_grows_closes_and_appends() {
        let dir = tempfile::tempdir().unwrap();
        let d = std::fs::File::open(dir.path()).unwrap();
        let path = dir.path().join("42.dat");
        // 8 KiB window = 512 records: write 1000 to cross a window boundary.
        let mut w = DatWriter::new(d.as_raw_fd(), 42, 1);
        for i in 0..1000u64 {
            w.record(i + 1, word((i % 1000) as u16));
        }
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 2 * 8192);
        w.close();
        w.record(5000, word(0)); // dropped
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 16000);
        // A second writer (as after exec) appends after a zero tail.
        std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .unwrap()
            .set_len(20000)
            .unwrap();
        let mut w = DatWriter::new(d.as_raw_fd(), 42, 1);
        w.record(6000, word(3));
        w.close();
        let recs = records(&path);
        assert_eq!(recs.len(), 1001);
        assert_eq!(recs[999].time, 1000);
        assert_eq!((recs[1000].time, recs[1000].depth), (6000, 3));
    }

    #[test]
    fn abandoned_writer_leaves_file_alone() {
        let dir = tempfile::tempdir().unwrap();
        let d = std::fs::File::open(dir.path()).unwrap();
        let mut w = DatWriter::new(d.as_raw_fd(), 7, 1);
        w.record(1, word(0));
        w.abandon(8);
        w.record(2, word(1));
        w.close();
        assert_eq!(
            std::fs::metadata(dir.path().join("7.dat")).unwrap().len(),
            8192
        );
        assert_eq!(records(&dir.path().join("8.dat"))[0].time, 2);
    }
}
