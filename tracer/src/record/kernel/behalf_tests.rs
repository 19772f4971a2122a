//! The rules of [`Behalf`] on crafted records: a window whose end was lost, a journal
//! commit left open, inodes the traced task writes out itself, the device in the key, and
//! the bound on the inodes remembered.

use super::*;

/// A traced task, a flusher and a journal thread.
const A: u32 = 5_000_001;
const C: u32 = 5_000_003;
const D: u32 = 5_000_004;

const DIRTY: u16 = 70;
const START: u16 = 71;
const END: u16 = 72;
const PAGES: u16 = 73;
const SYNC_ENTER: u16 = 80;
const SYNC_EXIT: u16 = 81;
const COMMIT: u16 = 82;
const LOGGING: u16 = 83;
const COMMIT_END: u16 = 84;

/// Every event with the fields it has: device at 8, inode at 16, transaction at 24 (the
/// generic writeback events have no device).
fn behalf() -> Behalf {
    let common = "\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\
        \tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n";
    let dev = "\tfield:dev_t dev;\toffset:8;\tsize:4;\tsigned:0;\n";
    let ino = "\tfield:ino_t ino;\toffset:16;\tsize:8;\tsigned:0;\n";
    let tr = "\tfield:int transaction;\toffset:24;\tsize:4;\tsigned:1;\n";
    let events = [
        ("ext4:ext4_da_write_begin", DIRTY, format!("{dev}{ino}")),
        (WRITEBACK_START, START, ino.to_string()),
        (WRITEBACK_END, END, ino.to_string()),
        (WRITEPAGES, PAGES, format!("{dev}{ino}")),
        (
            "ext4:ext4_sync_file_enter",
            SYNC_ENTER,
            format!("{dev}{ino}"),
        ),
        ("ext4:ext4_sync_file_exit", SYNC_EXIT, dev.to_string()),
        (COMMIT_START, COMMIT, format!("{dev}{tr}")),
        (COMMIT_LOGGING, LOGGING, format!("{dev}{tr}")),
        (super::COMMIT_END, COMMIT_END, format!("{dev}{tr}")),
    ];
    let formats: Vec<EventFormat> = events
        .iter()
        .map(|(ev, id, fields)| {
            let (sys, name) = ev.split_once(':').unwrap();
            let text =
                format!("name: {name}\nID: {id}\nformat:\n{common}\n{fields}\nprint fmt: \"\"\n");
            EventFormat::parse(sys, &text).unwrap()
        })
        .collect();
    let kept: Vec<String> = events.iter().map(|e| e.0.to_string()).collect();
    Behalf::of(&formats, &kept)
}

/// A record of type `ty` of task `pid` on device `dev`, of inode or transaction `n`.
fn rec(ty: u16, pid: u32, dev: u32, n: u64) -> Vec<u8> {
    let mut p = vec![0u8; 32];
    p[0..2].copy_from_slice(&ty.to_le_bytes());
    p[4..8].copy_from_slice(&pid.to_le_bytes());
    p[8..12].copy_from_slice(&dev.to_le_bytes());
    p[16..24].copy_from_slice(&n.to_le_bytes());
    p[24..28].copy_from_slice(&(n as u32).to_le_bytes());
    p
}

/// The answer for record `p` of the block instance (only `A` is traced).
fn owner(b: &Behalf, w: &mut Workers, p: Vec<u8>) -> Option<u32> {
    let ty = u16::from_le_bytes([p[0], p[1]]);
    let pid = u32::from_le_bytes([p[4], p[5], p[6], p[7]]);
    b.owner((ty, pid, &p), w, |pid| pid == A)
}

fn note(b: &Behalf, w: &mut Workers, p: Vec<u8>) {
    let ty = u16::from_le_bytes([p[0], p[1]]);
    b.note(ty, A, &p, w);
}

/// A flusher's window whose end was lost ends at its next writeback's beginning, of an inode
/// no traced task dirtied: its later bios are not the traced task's.
#[test]
fn a_lost_window_end_does_not_outlive_the_next_start() {
    let (b, mut w) = (behalf(), Workers::default());
    note(&b, &mut w, rec(DIRTY, A, 1, 7));
    assert_eq!(owner(&b, &mut w, rec(START, C, 0, 7)), Some(A));
    assert_eq!(w.working_for(C), Some(A));
    assert_eq!(owner(&b, &mut w, rec(START, C, 0, 8)), None);
    assert_eq!(w.working_for(C), None);
}

/// A journal commit whose end was lost does not make the thread's next commit the task's
/// once its fsync returned; a commit's second beginning (logging) keeps its owner.
#[test]
fn a_stale_commit_is_decided_anew() {
    let (b, mut w) = (behalf(), Workers::default());
    note(&b, &mut w, rec(SYNC_ENTER, A, 1, 7));
    assert_eq!(owner(&b, &mut w, rec(COMMIT, D, 1, 40)), Some(A));
    note(&b, &mut w, rec(SYNC_EXIT, A, 1, 7));
    assert_eq!(owner(&b, &mut w, rec(LOGGING, D, 1, 40)), Some(A));
    assert_eq!(owner(&b, &mut w, rec(COMMIT, D, 1, 41)), None);
    assert_eq!(w.working_for(D), None);
    assert_eq!(owner(&b, &mut w, rec(COMMIT_END, D, 1, 41)), None);
}

/// An inode the traced task writes out itself (its own writepages, its fsync) is forgotten;
/// the device is part of the key.
#[test]
fn inodes_written_out_by_the_task_are_forgotten() {
    let (b, mut w) = (behalf(), Workers::default());
    note(&b, &mut w, rec(DIRTY, A, 1, 7));
    note(&b, &mut w, rec(DIRTY, A, 1, 9));
    // The same inode number on another device: not this one.
    assert_eq!(owner(&b, &mut w, rec(PAGES, A, 2, 7)), None);
    assert_eq!(owner(&b, &mut w, rec(START, C, 0, 7)), Some(A));
    assert_eq!(owner(&b, &mut w, rec(END, C, 0, 7)), Some(A));
    note(&b, &mut w, rec(DIRTY, A, 1, 7));
    assert_eq!(owner(&b, &mut w, rec(PAGES, A, 1, 7)), None);
    assert_eq!(owner(&b, &mut w, rec(START, C, 0, 7)), None);
    note(&b, &mut w, rec(SYNC_ENTER, A, 1, 9));
    assert_eq!(owner(&b, &mut w, rec(START, C, 0, 9)), None);
    assert!(w.dirtied.is_empty());
}

/// The inodes remembered are bounded: past the bound the oldest are forgotten.
#[test]
fn the_inodes_remembered_are_bounded() {
    let (b, mut w) = (behalf(), Workers::default());
    for ino in 0..=MAX_DIRTIED as u64 {
        note(&b, &mut w, rec(DIRTY, A, 1, ino));
    }
    assert!(w.dirtied.len() <= MAX_DIRTIED);
    assert_eq!(owner(&b, &mut w, rec(START, C, 0, 0)), None);
    assert_eq!(
        owner(&b, &mut w, rec(START, C, 0, MAX_DIRTIED as u64)),
        Some(A)
    );
}
