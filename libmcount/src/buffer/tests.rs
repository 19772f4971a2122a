//! Unit tests of the writer: private and shared rings, the pump, salvage, flight mode.

use super::backing::ring_fits;
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
fn private_ring_writes_chunks_when_it_wraps_and_appends() {
    let dir = tempfile::tempdir().unwrap();
    let d = std::fs::File::open(dir.path()).unwrap();
    let path = dir.path().join("42.dat");
    // One-page chunks hold 256 records; the ring holds CHUNKS of them. Chunk k starts at
    // record 256k and takes ring slot k % CHUNKS back from chunk k - CHUNKS, which it writes
    // first: after `n` records, chunks CHUNKS..=CHUNKS + 3 have started, so chunks 0..=3 are in
    // the file.
    let n = 256 * (CHUNKS as u64 + 4) - 72;
    let mut w = DatWriter::new(d.as_raw_fd(), 42, 1, None);
    for i in 0..n {
        w.record(i + 1, word((i % 1000) as u16));
    }
    assert_eq!(std::fs::metadata(&path).unwrap().len(), 4 * 4096);
    w.close();
    w.record(n + 2000, word(0)); // dropped
    assert_eq!(std::fs::metadata(&path).unwrap().len(), n * 16);
    // A later writer of the same tid appends.
    let mut w = DatWriter::new(d.as_raw_fd(), 42, 1, None);
    w.record(n + 3000, word(3));
    w.close();
    let recs = records(&path);
    assert_eq!(recs.len() as u64, n + 1);
    assert!(recs.windows(2).all(|p| p[0].time < p[1].time));
    let last = recs[n as usize];
    assert_eq!((last.time, last.depth), (n + 3000, 3));
}

#[test]
fn shared_ring_is_salvaged_or_taken_over() {
    let dir = tempfile::tempdir().unwrap();
    let d = std::fs::File::open(dir.path()).unwrap();
    let prefix = format!("utrace-unit-{}", std::process::id());
    let cprefix = CString::new(prefix.clone()).unwrap();
    record_format::ring::create_ring_dir(&prefix).unwrap();
    let tid = 77;
    let path = dir.path().join("77.dat");
    // An image writes 300 records (one sealed chunk, one filling; no pump runs) and "dies"
    // without closing (DatWriter has no Drop: the ring stays as a killed image leaves it).
    let mut w = DatWriter::new(d.as_raw_fd(), tid, 1, Some(&cprefix));
    for i in 0..300u64 {
        w.record(i + 1, word(1));
    }
    // The data file is created (empty) when the ring is, and nothing is written to it yet.
    assert_eq!(std::fs::metadata(&path).unwrap().len(), 0);
    // The next image of the thread (exec) writes the old ring before its own records.
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
    record_format::ring::remove_ring_dir(&prefix);
}

#[test]
fn pump_takes_sealed_chunks_while_the_thread_writes() {
    let dir = tempfile::tempdir().unwrap();
    let d = std::fs::File::open(dir.path()).unwrap();
    let prefix = format!("utrace-unit3-{}", std::process::id());
    let cprefix = CString::new(prefix.clone()).unwrap();
    record_format::ring::create_ring_dir(&prefix).unwrap();
    let path = dir.path().join("78.dat");
    let mut pump = record_format::ring::Pump::new(&prefix, dir.path());
    let mut w = DatWriter::new(d.as_raw_fd(), 78, 1, Some(&cprefix));
    let mut pumped = 0;
    for i in 0..5000u64 {
        w.record(i + 1, word(1));
        if i % 100 == 0 {
            pump.rescan().unwrap();
            pumped += pump.pump().unwrap();
        }
    }
    assert!(pumped > 0);
    w.close();
    let recs = records(&path);
    assert_eq!(recs.len(), 5000);
    assert!(recs.windows(2).all(|p| p[0].time + 1 == p[1].time));
    record_format::ring::remove_ring_dir(&prefix);
}

#[test]
fn closed_shared_ring_is_removed() {
    let dir = tempfile::tempdir().unwrap();
    let d = std::fs::File::open(dir.path()).unwrap();
    let prefix = format!("utrace-unit2-{}", std::process::id());
    let cprefix = CString::new(prefix.clone()).unwrap();
    record_format::ring::create_ring_dir(&prefix).unwrap();
    let mut w = DatWriter::new(d.as_raw_fd(), 5, 1, Some(&cprefix));
    w.record(1, word(0));
    assert!(record_format::ring::ring_path(&prefix, 5).exists());
    w.close();
    assert!(!record_format::ring::ring_path(&prefix, 5).exists());
    assert_eq!(records(&dir.path().join("5.dat")).len(), 1);
    record_format::ring::remove_ring_dir(&prefix);
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
    // The parent's file was opened with the ring, and nothing of the child's went to it.
    assert_eq!(
        std::fs::metadata(dir.path().join("7.dat")).unwrap().len(),
        0
    );
    assert_eq!(records(&dir.path().join("8.dat"))[0].time, 2);
}

#[test]
fn planted_link_is_not_followed() {
    let dir = tempfile::tempdir().unwrap();
    let d = std::fs::File::open(dir.path()).unwrap();
    let victim = dir.path().join("victim");
    std::fs::write(&victim, b"keep").unwrap();
    std::os::unix::fs::symlink(&victim, dir.path().join("9.dat")).unwrap();
    let mut w = DatWriter::new(d.as_raw_fd(), 9, 1, None);
    for i in 0..1000u64 {
        w.record(i, word(0));
    }
    w.close();
    assert_eq!(std::fs::read(&victim).unwrap(), b"keep");

    // A file swapped in after the writer opened its own is not written either.
    let mut w = DatWriter::new(d.as_raw_fd(), 10, 1, None);
    w.record(1, word(0));
    let path = dir.path().join("10.dat");
    assert!(path.is_file());
    std::fs::remove_file(&path).unwrap();
    std::fs::write(&path, b"").unwrap();
    for i in 0..1000u64 {
        w.record(i, word(0));
    }
    w.close();
    assert_eq!(std::fs::metadata(&path).unwrap().len(), 0);
}

/// Records of a flight data file: LOST counts and the times of the others, in order.
fn flight_records(path: &std::path::Path) -> Vec<Result<u64, u64>> {
    records(path)
        .into_iter()
        .map(|r| match r.kind {
            RecordKind::Lost => Err(r.addr),
            _ => Ok(r.time),
        })
        .collect()
}

#[test]
fn flight_ring_keeps_the_newest_records_and_dumps_each_once() {
    let dir = tempfile::tempdir().unwrap();
    let d = std::fs::File::open(dir.path()).unwrap();
    let prefix = format!("utrace-flight-{}", std::process::id());
    let cprefix = CString::new(prefix.clone()).unwrap();
    record_format::ring::create_ring_dir(&prefix).unwrap();
    record_format::flight::create_control(&prefix).unwrap();
    let path = dir.path().join("79.dat");
    let mut pump = record_format::ring::Pump::new(&prefix, dir.path());
    // One-page chunks: 256 records each, CHUNKS of them in the ring. `n` records (11 chunks
    // and 136 records more than the ring holds): the oldest are dropped, nothing is written
    // without a dump.
    let n = 256 * (CHUNKS as u64 + 11) + 136;
    let mut w = DatWriter::new(d.as_raw_fd(), 79, 1, Some(&cprefix));
    for t in 1..=n {
        w.record(t, word(1));
        if t % 100 == 0 {
            pump.rescan().unwrap();
            assert_eq!(pump.pump().unwrap(), 0);
        }
    }
    assert_eq!(std::fs::metadata(&path).unwrap().len(), 0);

    // A dump (as libmcount's request_dump asks it): the ring's records, oldest first, after a
    // LOST record for the ones dropped.
    let control = std::fs::OpenOptions::new()
        .write(true)
        .open(record_format::flight::control_path(&prefix))
        .unwrap();
    use std::os::unix::fs::FileExt;
    control
        .write_all_at(&1u64.to_ne_bytes(), record_format::flight::REQ_OFF as u64)
        .unwrap();
    assert!(pump.pump().unwrap() > 0);
    let first = flight_records(&path);
    let kept = first.len() as u64 - 1;
    // CHUNKS - 1 sealed chunks and the filling one.
    assert_eq!(kept, (CHUNKS as u64 - 1) * 256 + 136);
    assert_eq!(first[0], Err(n - kept));
    assert!(first[1..]
        .iter()
        .zip(n + 1 - kept..)
        .all(|(r, t)| *r == Ok(t)));
    // No new request: nothing more.
    assert_eq!(pump.pump().unwrap(), 0);

    // 100 more records fit without dropping any: the next dump (here the salvage at the end)
    // writes only them, with no LOST record.
    for t in n + 1..=n + 100 {
        w.record(t, word(1));
    }
    record_format::ring::salvage(&prefix, dir.path()).unwrap();
    let all = flight_records(&path);
    assert_eq!(all.len(), first.len() + 100);
    assert!(all[first.len()..]
        .iter()
        .zip(n + 1..)
        .all(|(r, t)| *r == Ok(t)));

    // A thread that ends hands its ring to the pump, which writes it and removes it.
    let mut w = DatWriter::new(d.as_raw_fd(), 80, 1, Some(&cprefix));
    let m = 256 * (CHUNKS as u64 + 4);
    for t in 1..=m {
        w.record(t, word(2));
    }
    w.close();
    let ring = record_format::ring::ring_path(&prefix, 80);
    assert!(ring.exists());
    pump.rescan().unwrap();
    pump.pump().unwrap();
    assert!(!ring.exists());
    let ended = flight_records(&dir.path().join("80.dat"));
    assert_eq!(ended.last(), Some(&Ok(m)));
    assert!(matches!(ended[0], Err(n) if n > 0));
    record_format::ring::remove_ring_dir(&prefix);
}

#[test]
fn a_ring_goes_private_when_its_file_system_is_short_of_space() {
    let len = HEADER_SIZE + CHUNKS * (128 << 10);
    assert!(ring_fits(u64::MAX, len));
    assert!(ring_fits(4 * len as u64, len));
    assert!(!ring_fits(4 * len as u64 - 1, len));
    // Docker's default 64 MB /dev/shm with 52 MB used: not for one more 4 MB ring.
    assert!(!ring_fits(12 << 20, len));
    assert!(ring_fits(1 << 30, len));
}
