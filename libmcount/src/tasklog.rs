//! `task.txt` lines (data-format §4), formatted without allocation so that a thread's first
//! hook can announce it, and appended with one `write(2)` on an `O_APPEND` descriptor per line
//! (lines from concurrent threads and processes never interleave).

use crate::sys;

/// A fixed-capacity byte line; pushes past the capacity are dropped.
#[derive(Debug)]
pub struct LineBuf<const N: usize> {
    buf: [u8; N],
    len: usize,
}

impl<const N: usize> LineBuf<N> {
    pub const fn new() -> Self {
        LineBuf {
            buf: [0; N],
            len: 0,
        }
    }

    #[inline]
    pub fn push(&mut self, b: u8) {
        if let Some(slot) = self.buf.get_mut(self.len) {
            *slot = b;
            self.len += 1;
        }
    }

    pub fn push_bytes(&mut self, s: &[u8]) {
        for &b in s {
            self.push(b);
        }
    }

    /// Decimal, at least `width` digits (zero padded).
    pub fn push_dec_width(&mut self, mut v: u64, width: usize) {
        let mut digits = [0u8; 20];
        let mut n = 0;
        while (v > 0 || n < width.max(1)) && n < digits.len() {
            if let Some(d) = digits.get_mut(n) {
                *d = b'0' + (v % 10) as u8;
            }
            v /= 10;
            n += 1;
        }
        while n > 0 {
            n -= 1;
            self.push(digits.get(n).copied().unwrap_or(b'0'));
        }
    }

    pub fn push_dec(&mut self, v: u64) {
        self.push_dec_width(v, 1);
    }

    /// Lowercase hex, exactly `width` digits (the low ones).
    pub fn push_hex(&mut self, v: u64, width: usize) {
        for i in (0..width.min(16)).rev() {
            self.push(b"0123456789abcdef"[((v >> (4 * i)) & 0xf) as usize]);
        }
    }

    /// `SEC.NSEC` with 9 fraction digits.
    pub fn push_timestamp(&mut self, ns: u64) {
        self.push_dec(ns / 1_000_000_000);
        self.push(b'.');
        self.push_dec_width(ns % 1_000_000_000, 9);
    }

    pub fn as_bytes(&self) -> &[u8] {
        self.buf.get(..self.len).unwrap_or(&[])
    }
}

impl<const N: usize> Default for LineBuf<N> {
    fn default() -> Self {
        Self::new()
    }
}

/// `TASK timestamp=<ts> tid=<tid> pid=<pid>\n`
pub fn task_line(time: u64, tid: i32, pid: i32) -> LineBuf<96> {
    let mut l = LineBuf::new();
    l.push_bytes(b"TASK timestamp=");
    l.push_timestamp(time);
    l.push_bytes(b" tid=");
    l.push_dec(tid as u32 as u64);
    l.push_bytes(b" pid=");
    l.push_dec(pid as u32 as u64);
    l.push(b'\n');
    l
}

/// `FORK timestamp=<ts> pid=<child> ppid=<parent>\n`
pub fn fork_line(time: u64, pid: i32, ppid: i32) -> LineBuf<96> {
    let mut l = LineBuf::new();
    l.push_bytes(b"FORK timestamp=");
    l.push_timestamp(time);
    l.push_bytes(b" pid=");
    l.push_dec(pid as u32 as u64);
    l.push_bytes(b" ppid=");
    l.push_dec(ppid as u32 as u64);
    l.push(b'\n');
    l
}

/// `SESS timestamp=<ts> pid=<pid> sid=<sid> exename="<path>"\n` (built in the constructor,
/// where allocation is fine).
pub fn sess_line(time: u64, pid: i32, sid: u64, exename: &[u8]) -> Vec<u8> {
    let mut head = LineBuf::<96>::new();
    head.push_bytes(b"SESS timestamp=");
    head.push_timestamp(time);
    head.push_bytes(b" pid=");
    head.push_dec(pid as u32 as u64);
    head.push_bytes(b" sid=");
    head.push_hex(sid, 16);
    head.push_bytes(b" exename=\"");
    let mut line = head.as_bytes().to_vec();
    line.extend_from_slice(exename);
    line.extend_from_slice(b"\"\n");
    line
}

/// `DLOP timestamp=<ts> tid=<tid> sid=<sid> base=<hex> libname="<path>"\n` (not on a hot path:
/// allocation is fine).
pub fn dlop_line(time: u64, tid: i32, sid: u64, base: u64, libname: &[u8]) -> Vec<u8> {
    let mut head = LineBuf::<128>::new();
    head.push_bytes(b"DLOP timestamp=");
    head.push_timestamp(time);
    head.push_bytes(b" tid=");
    head.push_dec(tid as u32 as u64);
    head.push_bytes(b" sid=");
    head.push_hex(sid, 16);
    head.push_bytes(b" base=");
    head.push_hex(
        base,
        (64 - base.leading_zeros() as usize).div_ceil(4).max(1),
    );
    head.push_bytes(b" libname=\"");
    let mut line = head.as_bytes().to_vec();
    line.extend_from_slice(libname);
    line.extend_from_slice(b"\"\n");
    line
}

/// Appends one complete line to `<dir>/task.txt`.
pub fn append(dirfd: i32, line: &[u8]) -> sys::SysResult<()> {
    let (fd, _) = sys::open_data_file(dirfd, c"task.txt", libc::O_APPEND | libc::O_CREAT)?;
    let r = sys::write(fd, line);
    sys::close(fd);
    r.map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;
    use record_format::task::TaskLine;

    fn text<const N: usize>(l: &LineBuf<N>) -> String {
        String::from_utf8(l.as_bytes().to_vec()).unwrap()
    }

    #[test]
    fn lines_match_record_format() {
        let t = 585_025_647_412;
        assert_eq!(
            text(&task_line(t, 20935, 20935)),
            format!(
                "{}\n",
                TaskLine::Task {
                    time: t,
                    tid: 20935,
                    pid: 20935
                }
            )
        );
        assert_eq!(
            text(&fork_line(7, 20939, 1)),
            format!(
                "{}\n",
                TaskLine::Fork {
                    time: 7,
                    pid: 20939,
                    ppid: 1
                }
            )
        );
        let sess = sess_line(t, 12, 0x3b626f034f6db638, b"/home/user/src/mt");
        let want = TaskLine::Sess {
            time: t,
            pid: 12,
            sid: "3b626f034f6db638".into(),
            exename: "/home/user/src/mt".into(),
        };
        assert_eq!(String::from_utf8(sess).unwrap(), format!("{want}\n"));
        let lines = record_format::task::parse_task_txt(
            &text(&task_line(0, 1, 1)),
            std::path::Path::new("task.txt"),
        )
        .unwrap();
        assert_eq!(
            lines[0],
            TaskLine::Task {
                time: 0,
                tid: 1,
                pid: 1
            }
        );
    }

    #[test]
    fn numbers() {
        let mut l = LineBuf::<64>::new();
        l.push_dec(0);
        l.push(b' ');
        l.push_dec(u64::MAX);
        l.push(b' ');
        l.push_hex(0xab, 4);
        assert_eq!(text(&l), "0 18446744073709551615 00ab");
        let mut small = LineBuf::<3>::new();
        small.push_bytes(b"abcdef");
        assert_eq!(text(&small), "abc");
    }
}
