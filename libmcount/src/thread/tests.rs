//! Unit tests of [`super::ThreadState`]: records written for nesting, tail calls, `longjmp`,
//! exceptions, depth limits and `-finstrument-functions` overflow.

use super::*;
use record_format::raw::{RawRecord, RecordKind};
use std::os::fd::AsRawFd;

const TRAMP: usize = 0xdead;

fn run(t: impl FnOnce(&mut ThreadState)) -> Vec<RawRecord> {
    let dir = tempfile::tempdir().unwrap();
    let d = std::fs::File::open(dir.path()).unwrap();
    // Four frames, and the sentinel below them.
    let mut frames = vec![Frame::SENTINEL; 5];
    // SAFETY: `frames` outlives the state.
    let rs = unsafe { ShadowStack::from_raw(frames.as_mut_ptr(), frames.len() - 1) };
    let mut td = ThreadState::new(rs, DatWriter::new(d.as_raw_fd(), 1, 0, None), 1);
    t(&mut td);
    td.writer.close();
    let data = std::fs::read(dir.path().join("1.dat")).unwrap_or_default();
    data.chunks(16)
        .map(|c| RawRecord::decode(c.try_into().unwrap()).unwrap())
        .collect()
}

fn shape(recs: &[RawRecord]) -> Vec<(RecordKind, u16, u64)> {
    recs.iter().map(|r| (r.kind, r.depth, r.addr)).collect()
}

#[test]
fn nesting_tail_calls_and_longjmp() {
    use RecordKind::{Entry as N, Exit as X};
    let recs = run(|td| {
        assert_eq!(td.enter(0x1000, 0x10, 1, TRAMP), Hook::Hijack); // main
        assert_eq!(td.enter(0x0f00, 0x11, 2, TRAMP), Hook::Hijack); // f
        assert_eq!(td.enter(0x0f00, TRAMP, 3, TRAMP), Hook::Alias); // g, tail-called
        assert_eq!(td.exit(0x0f00), Some(TRAMP)); // g returns to the trampoline again
        assert_eq!(td.exit(0x0f00), Some(0x11)); // f
        td.enter(0x0f00, 0x12, 4, TRAMP); // h
        td.enter(0x0e00, 0x13, 5, TRAMP); // i, skipped by a longjmp out of i
        assert_eq!(td.exit(0x0f00), Some(0x12)); // h returns: i is closed too
        assert_eq!(td.exit(0x0123), None);
        assert_eq!(td.exit(0x1000), Some(0x10));
    });
    assert_eq!(
        shape(&recs),
        [
            (N, 0, 1),
            (N, 1, 2),
            (N, 2, 3),
            (X, 2, 3),
            (X, 1, 2),
            (N, 1, 4),
            (N, 2, 5),
            (X, 2, 5),
            (X, 1, 4),
            (X, 0, 1)
        ]
    );
    assert!(recs.windows(2).all(|w| w[0].time <= w[1].time));
}

#[test]
fn exception_restores_prunes_and_rehijacks() {
    use RecordKind::{Entry as N, Exit as X};
    // A fake stack: slot i is the return-address word at &stack[i] (higher i = outer).
    let mut stack = [0usize; 8];
    let base = stack.as_mut_ptr() as usize;
    let slot = |i: usize| base + i * 8;
    // The runtime writes these words through raw pointers: access them the same way so the
    // optimiser cannot assume they are unchanged.
    // SAFETY: `i` < 8, so the pointer is a word of `stack`.
    let get = |i: usize| unsafe { std::ptr::read_volatile((base + i * 8) as *const usize) };
    // SAFETY: as above.
    let set =
        |i: usize, v: usize| unsafe { std::ptr::write_volatile((base + i * 8) as *mut usize, v) };
    let recs = run(|td| {
        for (i, ip) in [(7, 70), (5, 50), (3, 30)] {
            set(i, ip);
            td.enter(slot(i), ip, i, TRAMP);
            set(i, TRAMP);
        }
        // tail call from the innermost frame: same slot, saved address = trampoline
        td.enter(slot(3), TRAMP, 9, TRAMP);
        // SAFETY: all slots are words of `stack`.
        unsafe { td.restore_slots(TRAMP) };
        assert_eq!((get(7), get(5), get(3)), (70, 50, 30));
        // caught in the frame whose callee used slot 5: frames at slots <= 5 are gone
        assert_eq!(td.prune(|s| s <= slot(5)), 1);
        // SAFETY: as above.
        unsafe { td.rehijack_slots(TRAMP) };
        assert_eq!((stack[7], stack[5], stack[3]), (TRAMP, 50, 30));
    });
    assert_eq!(
        shape(&recs),
        [
            (N, 0, 7),
            (N, 1, 5),
            (N, 2, 3),
            (N, 3, 9),
            (X, 3, 9),
            (X, 2, 3),
            (X, 1, 5)
        ]
    );
}

#[test]
fn depth_limit() {
    let recs = run(|td| {
        td.set_depth_limit(2);
        assert_eq!(td.enter(0x1000, 7, 1, TRAMP), Hook::Hijack);
        assert_eq!(td.enter(0x0f00, 7, 2, TRAMP), Hook::Hijack);
        assert_eq!(td.enter(0x0e00, 7, 3, TRAMP), Hook::None);
        td.cyg_enter(4, 0);
        td.cyg_enter(5, 0);
        td.cyg_exit(5);
        td.cyg_exit(4);
        assert_eq!(td.rstack.depth(), 2);
    });
    assert_eq!(recs.len(), 2);
}

#[test]
fn full_stack_is_not_hooked() {
    let recs = run(|td| {
        for i in 0..4 {
            assert_eq!(td.enter(0x1000 - i * 16, 7, i, TRAMP), Hook::Hijack);
        }
        assert_eq!(td.enter(0x100, 7, 9, TRAMP), Hook::None);
        assert_eq!(td.rstack.len(), 4);
    });
    assert_eq!(recs.len(), 4);
}

#[test]
fn cyg_profile_pairs_and_overflow() {
    use RecordKind::{Entry as N, Exit as X};
    let recs = run(|td| {
        for f in 1..=6 {
            td.cyg_enter(f, 0);
        }
        assert_eq!(td.rstack.depth(), 6);
        for f in (1..=6).rev() {
            td.cyg_exit(f);
        }
        td.cyg_exit(1); // unbalanced: ignored
        td.cyg_enter(7, 0);
        td.cyg_enter(8, 0); // skipped by longjmp
        td.cyg_exit(7);
        assert!(td.rstack.is_empty());
    });
    let want: Vec<_> = (1..=4)
        .map(|f| (N, f as u16 - 1, f))
        .chain((1..=4).rev().map(|f| (X, f as u16 - 1, f)))
        .chain([(N, 0, 7), (N, 1, 8), (X, 1, 8), (X, 0, 7)])
        .collect();
    assert_eq!(shape(&recs), want);
}
