//! Unit tests of the rings: header layout, salvage, pump (normal and flight mode).

use super::*;

/// A ring file image: `tid`, chunk size 4096, cursor/base and chunk slots as given, chunk
/// `i` filled with byte `i + 1`.
pub(crate) fn ring_bytes(
    tid: u32,
    cursor_in: Option<(usize, u64)>,
    chunks: &[(usize, Chunk)],
) -> Vec<u8> {
    let size = 4096usize;
    let base = 0x10_0000u64;
    let mut b = vec![0u8; HEADER_SIZE + CHUNKS * size];
    b[0..8].copy_from_slice(&MAGIC);
    b[8..12].copy_from_slice(&tid.to_ne_bytes());
    let cursor = cursor_in.map_or(base, |(i, len)| base + (i * size) as u64 + len);
    b[16..24].copy_from_slice(&cursor.to_ne_bytes());
    b[24..32].copy_from_slice(&base.to_ne_bytes());
    b[32..40].copy_from_slice(&(size as u64).to_ne_bytes());
    for &(i, c) in chunks {
        let o = chunk_slot(i);
        b[o..o + 4].copy_from_slice(&c.state.to_ne_bytes());
        b[o + 8..o + 16].copy_from_slice(&c.file_off.to_ne_bytes());
        b[o + 16..o + 24].copy_from_slice(&c.len.to_ne_bytes());
    }
    for i in 0..CHUNKS {
        let o = HEADER_SIZE + i * size;
        b[o..o + size].fill(i as u8 + 1);
    }
    b
}

pub(crate) fn chunk(state: u32, file_off: u64, len: u64) -> Chunk {
    Chunk {
        state,
        _pad: 0,
        file_off,
        len,
    }
}

#[test]
fn layout_matches_the_parser() {
    assert_eq!(std::mem::size_of::<RingHeader>(), DUMPED_OFF + 8);
    assert_eq!(std::mem::offset_of!(RingHeader, chunks), chunk_slot(0));
    assert_eq!(std::mem::offset_of!(RingHeader, flags), FLAGS_OFF);
    assert_eq!(std::mem::offset_of!(RingHeader, dumped), DUMPED_OFF);
    let b = ring_bytes(
        42,
        Some((3, 64)),
        &[
            (1, chunk(state::SEALED, 4096, 4096)),
            (2, chunk(state::WRITING, 8192, 32)),
            (3, chunk(state::FILLING, 8224, 0)),
            (4, chunk(state::SEALED, 99, 12)), // not whole records: skipped
        ],
    );
    let h = RingHeader::read(&b).unwrap();
    assert_eq!(h.tid, 42);
    assert_eq!(h.file_len(), b.len());
    let p = h.pending();
    assert_eq!(
        p.iter()
            .map(|p| (p.chunk, p.file_off, p.len))
            .collect::<Vec<_>>(),
        [(1, 4096, 4096), (2, 8192, 32), (3, 8224, 64)]
    );
    assert_eq!(p[0].ring_off, HEADER_SIZE + 4096);
    assert_eq!(h.end(), 8224 + 64);
    assert_eq!(RingHeader::read(&b[..20]), None);
    let mut bad = b.clone();
    bad[0] = b'x';
    assert_eq!(RingHeader::read(&bad), None);
}

#[test]
fn salvage_writes_pending_chunks_at_their_offsets() {
    let dir = tempfile::tempdir().unwrap();
    let prefix = format!("utrace-test-{}", std::process::id());
    create_ring_dir(&prefix).unwrap();
    // tid 7: 32 bytes already in the file, one sealed chunk (32 bytes) and the filling
    // one (16 bytes); tid 8: nothing pending.
    std::fs::write(dir.path().join("7.dat"), [9u8; 32]).unwrap();
    let ring = ring_bytes(
        7,
        Some((5, 16)),
        &[
            (4, chunk(state::SEALED, 32, 32)),
            (5, chunk(state::FILLING, 64, 0)),
        ],
    );
    std::fs::write(ring_path(&prefix, 7), &ring).unwrap();
    std::fs::write(ring_path(&prefix, 8), ring_bytes(8, None, &[])).unwrap();

    let done = salvage(&prefix, dir.path()).unwrap();
    assert_eq!(
        done,
        Salvaged {
            rings: 2,
            bytes: 48
        }
    );
    let data = std::fs::read(dir.path().join("7.dat")).unwrap();
    assert_eq!(data.len(), 80);
    assert!(data[..32].iter().all(|&b| b == 9));
    assert!(data[32..64].iter().all(|&b| b == 5) && data[64..].iter().all(|&b| b == 6));
    assert!(!dir.path().join("8.dat").exists());
    assert!(!ring_path(&prefix, 7).exists() && !ring_path(&prefix, 8).exists());
    // Idempotent: nothing left to do.
    assert_eq!(salvage(&prefix, dir.path()).unwrap(), Salvaged::default());
    remove_ring_dir(&prefix);
    assert!(!ring_dir(&prefix).exists());
}

#[test]
fn pump_writes_sealed_chunks_and_frees_them() {
    let dir = tempfile::tempdir().unwrap();
    let prefix = format!("utrace-pump-{}", std::process::id());
    create_ring_dir(&prefix).unwrap();
    let path = ring_path(&prefix, 9);
    let ring = ring_bytes(
        9,
        Some((2, 16)),
        &[
            (0, chunk(state::SEALED, 0, 4096)),
            (1, chunk(state::SEALED, 4096, 48)),
            (2, chunk(state::FILLING, 4144, 0)),
        ],
    );
    std::fs::write(&path, &ring).unwrap();
    let mut pump = Pump::new(&prefix, dir.path());
    pump.rescan().unwrap();
    assert_eq!(pump.followed(), 1);
    assert_eq!(pump.pump().unwrap(), 4096 + 48);
    assert_eq!(pump.pump().unwrap(), 0);
    let data = std::fs::read(dir.path().join("9.dat")).unwrap();
    assert_eq!(data.len(), 4144);
    assert!(data[..4096].iter().all(|&b| b == 1) && data[4096..].iter().all(|&b| b == 2));
    // Freed in the ring itself; the filling chunk is left to its thread (or the salvage).
    let h = RingHeader::read(&std::fs::read(&path).unwrap()).unwrap();
    assert_eq!(h.chunks[0].state, state::FREE);
    assert_eq!(h.chunks[1].state, state::FREE);
    assert_eq!(h.chunks[2].state, state::FILLING);
    std::fs::remove_file(&path).unwrap();
    pump.rescan().unwrap();
    assert_eq!(pump.followed(), 0);
    remove_ring_dir(&prefix);
}

#[test]
fn flight_pump_acknowledges_and_frees_ended_rings_despite_errors() {
    use std::os::unix::fs::FileExt;
    let dir = tempfile::tempdir().unwrap();
    let prefix = format!("utrace-flighterr-{}", std::process::id());
    create_ring_dir(&prefix).unwrap();
    crate::flight::create_control(&prefix).unwrap();
    let mut ring = ring_bytes(
        11,
        Some((1, 16)),
        &[
            (0, chunk(state::SEALED, 0, 4096)),
            (1, chunk(state::FILLING, 4096, 0)),
        ],
    );
    ring[FLAGS_OFF..FLAGS_OFF + 4].copy_from_slice(&flag::FLIGHT.to_ne_bytes());
    let path = ring_path(&prefix, 11);
    std::fs::write(&path, &ring).unwrap();
    let mut pump = Pump::new(&prefix, dir.path());
    assert!(pump.is_flight());
    pump.rescan().unwrap();
    assert_eq!(pump.followed(), 1);
    // Writes to 11.dat fail (a read-only descriptor); 12.dat cannot be opened at all.
    pump.rings[0].data = std::fs::File::open(dir.path().join("11.dat")).unwrap();
    std::fs::write(ring_path(&prefix, 12), ring_bytes(12, None, &[])).unwrap();
    std::fs::create_dir(dir.path().join("12.dat")).unwrap();
    let control = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(crate::flight::control_path(&prefix))
        .unwrap();
    control
        .write_all_at(&1u64.to_ne_bytes(), crate::flight::REQ_OFF as u64)
        .unwrap();
    assert!(pump.pump().is_err());
    // The requester is told, the claimed chunk goes back to the thread.
    let mut ack = [0u8; 8];
    control
        .read_exact_at(&mut ack, crate::flight::ACK_OFF as u64)
        .unwrap();
    assert_eq!(u64::from_ne_bytes(ack), 1);
    let h = RingHeader::read(&std::fs::read(&path).unwrap()).unwrap();
    assert_eq!(h.chunks[0].state, state::FREE);
    assert_eq!(h.dumped, 0);
    // The thread ends: its ring is removed although it cannot be written.
    let ended = (flag::FLIGHT | flag::ENDED).to_ne_bytes();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .write_all_at(&ended, FLAGS_OFF as u64)
        .unwrap();
    assert!(pump.pump().is_err());
    assert_eq!(pump.followed(), 0);
    assert!(!path.exists());
    remove_ring_dir(&prefix);
}
