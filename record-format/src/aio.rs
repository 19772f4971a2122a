//! The libaio markers: what libmcount writes into tracefs' `trace_marker_raw` (with `record
//! -k`, [`crate::env::AIO_MARKER`]) at each `io_submit` and each `io_getevents` that returned
//! events, so that the analysis knows each request's iocb and the call that reaped it
//! (tracepoints show only the iocb array's address). The kernel stores each write as an
//! `ftrace:raw_data` event of the writing task (`id` = the first 4 bytes, `buf` = the rest),
//! in time order with the system call and block events of the same buffer.
//!
//! Layout of a write, little-endian (the whole write; `raw_data`'s `buf` starts at byte 4):
//!
//! | bytes | field |
//! |---|---|
//! | 0..4 | magic: [`SUBMIT`] or [`REAPED`] |
//! | 4..8 | `count`: items in this write |
//! | 8..16 | aio context |
//! | 16..24 | index of the first item in the call's array (a call's items may take several writes) |
//! | 24.. | `count` items: an [`Iocb`] ([`IOCB_SIZE`] bytes) or an [`IoEvent`] ([`EVENT_SIZE`]) |
//!
//! A write stays under [`MAX_WRITE`] bytes: older kernels refuse larger raw markers.

/// "UAIS": the iocbs an `io_submit` handed to the kernel (written at its return, of those it
/// accepted).
pub const SUBMIT: u32 = u32::from_le_bytes(*b"UAIS");
/// "UAIR": the events an `io_getevents` / `io_pgetevents` returned (written at its return).
pub const REAPED: u32 = u32::from_le_bytes(*b"UAIR");

/// Bytes before the items.
pub const HEADER_SIZE: usize = 24;
/// Bytes of an [`Iocb`] item.
pub const IOCB_SIZE: usize = 48;
/// Bytes of an [`IoEvent`] item.
pub const EVENT_SIZE: usize = 32;
/// The largest write (Linux before 4.x/5.x refused raw markers over 1 KiB).
pub const MAX_WRITE: usize = 1000;
/// Iocbs per write.
pub const IOCBS_PER_WRITE: usize = (MAX_WRITE - HEADER_SIZE) / IOCB_SIZE;
/// Events per write.
pub const EVENTS_PER_WRITE: usize = (MAX_WRITE - HEADER_SIZE) / EVENT_SIZE;
const _: () = assert!(HEADER_SIZE + IOCBS_PER_WRITE * IOCB_SIZE <= MAX_WRITE);
const _: () = assert!(HEADER_SIZE + EVENTS_PER_WRITE * EVENT_SIZE <= MAX_WRITE);

/// The most items written for one call (a larger batch is left to the analysis's order rule).
pub const MAX_ITEMS: usize = 1024;

/// `struct iocb` (linux/aio_abi.h, the same as libaio's): offsets of the fields copied.
pub const IOCB_DATA: usize = 0;
pub const IOCB_OPCODE: usize = 16;
pub const IOCB_FILDES: usize = 20;
pub const IOCB_BUF: usize = 24;
pub const IOCB_NBYTES: usize = 32;
pub const IOCB_OFFSET: usize = 40;
/// Bytes of `struct iocb` read (up to `aio_offset`'s end).
pub const IOCB_READ: usize = 48;
/// Bytes of `struct io_event`.
pub const IO_EVENT: usize = 32;
// A reap marker's items are the `struct io_event`s as the call returned them (`IoEvent::decode`
// reads both), and a submit item is as long as the `struct iocb` bytes read for it.
const _: () = assert!(IO_EVENT == EVENT_SIZE && IOCB_READ == IOCB_SIZE);

/// `IOCB_CMD_*`.
pub const CMD_PREAD: u16 = 0;
pub const CMD_PWRITE: u16 = 1;
pub const CMD_FSYNC: u16 = 2;
pub const CMD_FDSYNC: u16 = 3;
pub const CMD_POLL: u16 = 5;
pub const CMD_NOOP: u16 = 6;
pub const CMD_PREADV: u16 = 7;
pub const CMD_PWRITEV: u16 = 8;

/// One iocb handed to `io_submit`: its address and the fields of it that identify the I/O.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Iocb {
    /// The iocb's address (what `io_event.obj` gives back).
    pub ptr: u64,
    pub data: u64,
    pub opcode: u16,
    pub fd: u32,
    pub buf: u64,
    /// Bytes (iovecs for the vectored opcodes).
    pub nbytes: u64,
    pub offset: i64,
}

impl Iocb {
    /// The item from the `struct iocb` bytes `raw` (at least [`IOCB_READ`]) at `ptr`.
    pub fn from_struct(ptr: u64, raw: &[u8]) -> Iocb {
        Iocb {
            ptr,
            data: u64_at(raw, IOCB_DATA),
            opcode: u16_at(raw, IOCB_OPCODE),
            fd: u32_at(raw, IOCB_FILDES),
            buf: u64_at(raw, IOCB_BUF),
            nbytes: u64_at(raw, IOCB_NBYTES),
            offset: u64_at(raw, IOCB_OFFSET) as i64,
        }
    }

    /// Writes the item into `out` ([`IOCB_SIZE`] bytes).
    pub fn encode(&self, out: &mut [u8]) {
        put(out, 0, &self.ptr.to_le_bytes());
        put(out, 8, &self.data.to_le_bytes());
        put(out, 16, &self.opcode.to_le_bytes());
        put(out, 20, &self.fd.to_le_bytes());
        put(out, 24, &self.buf.to_le_bytes());
        put(out, 32, &self.nbytes.to_le_bytes());
        put(out, 40, &self.offset.to_le_bytes());
    }

    fn decode(p: &[u8]) -> Iocb {
        Iocb {
            ptr: u64_at(p, 0),
            data: u64_at(p, 8),
            opcode: u16_at(p, 16),
            fd: u32_at(p, 20),
            buf: u64_at(p, 24),
            nbytes: u64_at(p, 32),
            offset: u64_at(p, 40) as i64,
        }
    }

    /// The opcode's name (`pread`, `pwritev`...).
    pub fn op_name(&self) -> &'static str {
        match self.opcode {
            CMD_PREAD => "pread",
            CMD_PWRITE => "pwrite",
            CMD_FSYNC => "fsync",
            CMD_FDSYNC => "fdsync",
            CMD_POLL => "poll",
            CMD_NOOP => "noop",
            CMD_PREADV => "preadv",
            CMD_PWRITEV => "pwritev",
            _ => "op",
        }
    }

    /// Whether it reads (`Some(true)`), writes (`Some(false)`) or moves no data.
    pub fn reads(&self) -> Option<bool> {
        match self.opcode {
            CMD_PREAD | CMD_PREADV => Some(true),
            CMD_PWRITE | CMD_PWRITEV => Some(false),
            _ => None,
        }
    }

    /// Its length in bytes, when the iocb says it (not for the vectored opcodes).
    pub fn length(&self) -> Option<u64> {
        matches!(self.opcode, CMD_PREAD | CMD_PWRITE).then_some(self.nbytes)
    }
}

/// One `struct io_event` an `io_getevents` returned.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IoEvent {
    pub data: u64,
    /// The iocb's address.
    pub obj: u64,
    pub res: i64,
    pub res2: i64,
}

impl IoEvent {
    /// The item of the `struct io_event` bytes `raw` ([`IO_EVENT`]); the same layout.
    pub fn decode(p: &[u8]) -> IoEvent {
        IoEvent {
            data: u64_at(p, 0),
            obj: u64_at(p, 8),
            res: u64_at(p, 16) as i64,
            res2: u64_at(p, 24) as i64,
        }
    }
}

/// The header of a write: `magic`, `count` items, context `ctx`, first item's index `first`.
pub fn encode_header(out: &mut [u8], magic: u32, count: usize, ctx: u64, first: usize) {
    put(out, 0, &magic.to_le_bytes());
    put(out, 4, &(count as u32).to_le_bytes());
    put(out, 8, &ctx.to_le_bytes());
    put(out, 16, &(first as u64).to_le_bytes());
}

/// What a marker says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Marker {
    /// Iocbs of an `io_submit` of `ctx`, from index `first` of its array.
    Submit {
        ctx: u64,
        first: u64,
        iocbs: Vec<Iocb>,
    },
    /// Events an `io_getevents` of `ctx` returned, from index `first`.
    Reaped {
        ctx: u64,
        first: u64,
        events: Vec<IoEvent>,
    },
}

/// The marker of a whole write `p` (magic first); `None` for other writes (another program's
/// `trace_marker_raw` data) or a truncated one.
pub fn decode(p: &[u8]) -> Option<Marker> {
    if p.len() < HEADER_SIZE {
        return None;
    }
    let magic = u32_at(p, 0);
    let count = u32_at(p, 4) as usize;
    let (ctx, first) = (u64_at(p, 8), u64_at(p, 16));
    let items = &p[HEADER_SIZE..];
    let size = match magic {
        SUBMIT => IOCB_SIZE,
        REAPED => EVENT_SIZE,
        _ => return None,
    };
    let items = items.get(..count.checked_mul(size)?)?;
    let mut chunks = items.chunks_exact(size);
    Some(match magic {
        SUBMIT => Marker::Submit {
            ctx,
            first,
            iocbs: chunks.by_ref().map(Iocb::decode).collect(),
        },
        _ => Marker::Reaped {
            ctx,
            first,
            events: chunks.by_ref().map(IoEvent::decode).collect(),
        },
    })
}

fn put(out: &mut [u8], at: usize, bytes: &[u8]) {
    if let Some(d) = out.get_mut(at..at + bytes.len()) {
        d.copy_from_slice(bytes);
    }
}

/// The `N` bytes of `p` at `at` (zeros where `p` is shorter).
fn bytes_at<const N: usize>(p: &[u8], at: usize) -> [u8; N] {
    let mut b = [0u8; N];
    if let Some(s) = p.get(at..at + N) {
        b.copy_from_slice(s);
    }
    b
}

fn u64_at(p: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(bytes_at(p, at))
}

fn u32_at(p: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(bytes_at(p, at))
}

fn u16_at(p: &[u8], at: usize) -> u16 {
    u16::from_le_bytes(bytes_at(p, at))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn submit_and_reaped_round_trip() {
        let cb = Iocb {
            ptr: 0x5555_0000_1000,
            data: 2,
            opcode: CMD_PREAD,
            fd: 3,
            buf: 0x7000,
            nbytes: 512,
            offset: 4096,
        };
        let mut w = [0u8; HEADER_SIZE + IOCB_SIZE];
        encode_header(&mut w, SUBMIT, 1, 0x7f00, 0);
        cb.encode(&mut w[HEADER_SIZE..]);
        let want = Marker::Submit {
            ctx: 0x7f00,
            first: 0,
            iocbs: vec![cb],
        };
        assert_eq!(decode(&w), Some(want));
        let mut w = [0u8; HEADER_SIZE + EVENT_SIZE];
        encode_header(&mut w, REAPED, 1, 0x7f00, 3);
        w[HEADER_SIZE + 8..HEADER_SIZE + 16].copy_from_slice(&cb.ptr.to_le_bytes());
        w[HEADER_SIZE + 16..HEADER_SIZE + 24].copy_from_slice(&512i64.to_le_bytes());
        let Some(Marker::Reaped { first, events, .. }) = decode(&w) else {
            panic!()
        };
        assert_eq!((first, events[0].obj, events[0].res), (3, cb.ptr, 512));
        // Truncated, or another program's marker: not ours.
        assert_eq!(decode(&w[..w.len() - 1]), None);
        assert_eq!(decode(b"abcdefgh"), None);
    }
}
