//! Unit tests of the flight recorder's dump planning, claims and writes.

use super::*;
use std::cell::{Cell, RefCell};

/// A data file in memory whose `fail_at`-th write (from 0) fails.
struct Flaky {
    data: RefCell<Vec<u8>>,
    writes: Cell<usize>,
    fail_at: usize,
}

impl Sink for Flaky {
    fn size(&self) -> std::io::Result<u64> {
        Ok(self.data.borrow().len() as u64)
    }

    fn put_at(&self, buf: &[u8], off: u64) -> std::io::Result<()> {
        let n = self.writes.replace(self.writes.get() + 1);
        if n == self.fail_at {
            return Err(std::io::Error::from_raw_os_error(libc::ENOSPC));
        }
        let mut d = self.data.borrow_mut();
        let end = off as usize + buf.len();
        if d.len() < end {
            d.resize(end, 0);
        }
        d[off as usize..end].copy_from_slice(buf);
        Ok(())
    }

    fn cut_to(&self, len: u64) -> std::io::Result<()> {
        self.data.borrow_mut().resize(len as usize, 0);
        Ok(())
    }
}

#[test]
fn a_dump_that_fails_part_way_leaves_the_file_as_it_was() {
    // Chunk 0 sealed (stream 0..4096), chunk 1 filling with 16 bytes; 32 bytes of an
    // earlier dump in the file.
    let map = mapped(&ring_bytes(
        6,
        Some((1, 16)),
        &[
            (0, chunk(state::SEALED, 0, 4096)),
            (1, chunk(state::FILLING, 4096, 0)),
        ],
    ));
    let live = LiveRing { map: &map };
    let file = Flaky {
        data: RefCell::new(vec![7; 32]),
        writes: Cell::new(0),
        fail_at: 1,
    };
    // Chunk 0 is written, the filling chunk's copy is not.
    assert!(live.write(live.claim(), &file).is_err());
    assert_eq!(file.data.borrow().len(), 32);
    assert!(file.data.borrow().iter().all(|&b| b == 7));
    assert_eq!(live.dumped_word().load(Ordering::Relaxed), 0);
    // Chunk 0 went back to its thread: the next dump says its records are lost.
    assert_eq!(live.state(0).load(Ordering::Relaxed), state::FREE);
    assert_eq!(live.write(live.claim(), &file).unwrap(), 32);
    let data = file.data.borrow();
    assert_eq!(data.len(), 32 + 32);
    assert!(data[..32].iter().all(|&b| b == 7));
    assert_eq!(data[32..48], lost_record(4096 / 16));
    assert!(data[48..].iter().all(|&b| b == 2));
    assert_eq!(live.dumped_word().load(Ordering::Relaxed), 4096 + 16);
}
use crate::ring::tests::{chunk, ring_bytes};
use crate::ring::Chunk;

/// A writable mapping holding `bytes` (a ring image).
fn mapped(bytes: &[u8]) -> memmap2::MmapRaw {
    let mut m = memmap2::MmapMut::map_anon(bytes.len()).unwrap();
    m.copy_from_slice(bytes);
    memmap2::MmapRaw::from(m)
}

/// Stores `c` in chunk slot `i` of the ring mapped at `map`, as its thread would.
fn set_slot(map: &memmap2::MmapRaw, i: usize, c: Chunk) {
    let o = chunk_slot(i);
    let mut b = [0u8; 24];
    b[8..16].copy_from_slice(&c.file_off.to_ne_bytes());
    b[16..24].copy_from_slice(&c.len.to_ne_bytes());
    // SAFETY: the slot lies in the mapped header page; the test is the only user.
    unsafe { std::ptr::copy_nonoverlapping(b[8..].as_ptr(), map.as_mut_ptr().add(o + 8), 16) };
    LiveRing { map }.state(i).store(c.state, Ordering::Release);
}

/// Stores the cursor (`base` + `at`) of the ring mapped at `map`.
fn set_cursor(map: &memmap2::MmapRaw, at: u64) {
    let h = LiveRing { map }.header().unwrap();
    // SAFETY: the cursor word (offset 16) lies in the mapped header page, 8-aligned.
    let cursor = unsafe { AtomicU64::from_ptr(map.as_mut_ptr().add(16) as *mut u64) };
    cursor.store(h.base + at, Ordering::Release);
}

#[test]
fn a_chunk_sealed_between_the_claim_pass_and_the_copy_is_claimed() {
    // Chunk 0 sealed (stream 0..4096), chunk 1 filling with 64 bytes.
    let map = mapped(&ring_bytes(
        5,
        Some((1, 64)),
        &[
            (0, chunk(state::SEALED, 0, 4096)),
            (1, chunk(state::FILLING, 4096, 0)),
        ],
    ));
    let live = LiveRing { map: &map };
    let mut claimed = [false; CHUNKS];
    live.claim_sealed(&mut claimed);
    assert_eq!(claimed[..2], [true, false]);
    // Meanwhile the thread seals chunk 1 and fills 32 bytes of chunk 2.
    set_slot(&map, 2, chunk(state::FILLING, 8192, 0));
    set_slot(&map, 1, chunk(state::SEALED, 4096, 4096));
    set_cursor(&map, 2 * 4096 + 32);
    let claim = live.claim_rest(claimed);
    let dir = tempfile::tempdir().unwrap();
    let file = std::fs::File::create_new(dir.path().join("5.dat")).unwrap();
    assert_eq!(live.write(claim, &file).unwrap(), 8192 + 32);
    // Every record once, in order, no LOST record.
    let data = std::fs::read(dir.path().join("5.dat")).unwrap();
    assert_eq!(data.len(), 8192 + 32);
    assert!(data[..4096].iter().all(|&b| b == 1));
    assert!(data[4096..8192].iter().all(|&b| b == 2));
    assert!(data[8192..].iter().all(|&b| b == 3));
    assert_eq!(live.dumped_word().load(Ordering::Relaxed), 8192 + 32);
    // The claimed chunks went back to the thread.
    assert_eq!(live.state(0).load(Ordering::Relaxed), state::FREE);
    assert_eq!(live.state(1).load(Ordering::Relaxed), state::FREE);
}

#[test]
fn plan_skips_what_was_dumped_and_marks_gaps() {
    // Nothing dumped yet, everything held from position 0: written as is.
    assert_eq!(
        plan(0, &[(0, 64), (64, 32)]),
        (
            vec![
                Step::Bytes {
                    piece: 0,
                    skip: 0,
                    len: 64
                },
                Step::Bytes {
                    piece: 1,
                    skip: 0,
                    len: 32
                }
            ],
            96
        )
    );
    // 160 bytes (10 records) were dropped after the last dump; the next piece was half
    // dumped already (a filling chunk of the previous dump).
    assert_eq!(
        plan(48, &[(208, 32), (240, 64)]).0,
        [
            Step::Lost(10),
            Step::Bytes {
                piece: 0,
                skip: 0,
                len: 32
            },
            Step::Bytes {
                piece: 1,
                skip: 0,
                len: 64
            }
        ]
    );
    assert_eq!(
        plan(100 * 16, &[(96 * 16, 64), (1600, 16)]),
        (
            vec![Step::Bytes {
                piece: 1,
                skip: 0,
                len: 16
            }],
            1616
        )
    );
    assert_eq!(
        plan(32, &[(0, 64)]),
        (
            vec![Step::Bytes {
                piece: 0,
                skip: 32,
                len: 32
            }],
            64
        )
    );
    // All dumped: nothing to do.
    assert_eq!(plan(96, &[(0, 64), (64, 32)]), (vec![], 96));
    let r = RawRecord::decode(&lost_record(7)).unwrap();
    assert_eq!((r.kind, r.addr, r.time), (RecordKind::Lost, 7, 0));
}
