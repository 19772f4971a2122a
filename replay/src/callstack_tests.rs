//! The call stack on crafted record sequences.

use super::*;
use crate::filter::Actions;

const ENTRY: RecordKind = RecordKind::Entry;
const EXIT: RecordKind = RecordKind::Exit;

fn rec(kind: RecordKind, time: u64, depth: u16, addr: u64) -> RawRecord {
    RawRecord {
        time,
        kind,
        more: false,
        depth,
        addr,
    }
}

/// Consumes an entry and applies the filters as replay does; returns whether it is shown.
fn enter(s: &mut TaskStack, time: u64, depth: u16, addr: u64, ff: &FuncFilter) -> bool {
    s.consume(&rec(ENTRY, time, depth, addr), addr as FuncId);
    s.enter(ff, false, false, None, None) == Verdict::Shown
}

/// Consumes an exit; returns the closed call and whether it is shown.
fn leave(s: &mut TaskStack, time: u64, depth: u16, addr: u64) -> (Closed, bool) {
    let c = s.consume(&rec(EXIT, time, depth, addr), 0).unwrap();
    (c, s.exit())
}

#[test]
fn child_time_adds_up() {
    let mut s = TaskStack::new(None);
    let ff = FuncFilter::default();
    assert!(enter(&mut s, 10, 0, 1, &ff));
    assert!(enter(&mut s, 12, 1, 2, &ff));
    let (c, shown) = leave(&mut s, 15, 1, 2);
    assert!(shown);
    assert_eq!((c.total, c.child), (3, 0));
    let (m, _) = leave(&mut s, 20, 0, 1);
    assert_eq!((m.addr, m.total, m.child), (1, 10, 3));
    assert_eq!(s.open_calls(), 0);
}

#[test]
fn fork_child_starts_inside_calls() {
    let mut s = TaskStack::new(None);
    let (c, shown) = leave(&mut s, 50, 1, 7);
    assert_eq!(c.total, 0);
    assert!(shown);
    assert_eq!(s.open_calls(), 1);
    // main was never entered in this data: closed without being reported.
    assert_eq!(s.close_open(60), Some(None));
    assert_eq!(s.close_open(60), None);
}

#[test]
fn lost_in_the_middle_resynchronises_from_the_next_record() {
    let mut s = TaskStack::new(None);
    let ff = FuncFilter::default();
    enter(&mut s, 10, 0, 1, &ff);
    enter(&mut s, 11, 1, 2, &ff);
    enter(&mut s, 12, 2, 3, &ff);
    s.consume(&rec(RecordKind::Lost, 13, 0, 99), 0);
    // The records of 3 and 2 are lost; the next one is main's child at depth 1.
    assert!(enter(&mut s, 20, 1, 4, &ff));
    assert_eq!(s.open_calls(), 2);
    // main's start was moved to just before the first record after LOST.
    assert_eq!(s.open()[0].start, 19);
    let (c, _) = leave(&mut s, 25, 1, 4);
    assert_eq!(c.total, 5);
    let (m, _) = leave(&mut s, 30, 0, 1);
    assert_eq!((m.total, m.child), (11, 5));
}

#[test]
fn longjmp_over_three_frames_returns_to_the_setjmp_level() {
    let mut s = TaskStack::new(None);
    let ff = FuncFilter::default();
    enter(&mut s, 1, 0, 1, &ff); // main
    enter(&mut s, 2, 1, 2, &ff); // setjmp
    let level = s.open_calls();
    leave(&mut s, 3, 1, 2);
    enter(&mut s, 4, 1, 3, &ff); // a
    enter(&mut s, 5, 2, 4, &ff); // b
    enter(&mut s, 6, 3, 5, &ff); // c
    s.consume(&rec(ENTRY, 7, 4, 6), 6);
    let v = s.enter(&ff, false, false, Some(StackEffect::Longjmp), None);
    assert_eq!(v, Verdict::Shown);
    let top = s.open_calls() - 1;
    assert!(s.jumps(top));
    assert_eq!(s.take_jump(top), Some(StackEffect::Longjmp));
    assert_eq!(s.take_jump(top), None);
    s.longjmp_to(level);
    // Back at setjmp's level: its second return closes slot 1, which a reused (slots are
    // reused by index, as in uftrace), so the time counts from a's entry.
    assert_eq!(s.open_calls(), 2);
    let (c, _) = leave(&mut s, 8, 1, 2);
    assert_eq!((c.addr, c.total), (3, 4));
    let (m, _) = leave(&mut s, 9, 0, 1);
    assert_eq!(m.addr, 1);
    assert_eq!(s.open_calls(), 0);
}

#[test]
fn exec_empties_the_stack() {
    let mut s = TaskStack::new(None);
    let ff = FuncFilter::default();
    enter(&mut s, 1, 0, 1, &ff);
    s.consume(&rec(ENTRY, 2, 1, 2), 2);
    assert_eq!(
        s.enter(&ff, false, false, Some(StackEffect::Exec), None),
        Verdict::Shown
    );
    assert_eq!(s.take_jump(1), Some(StackEffect::Exec));
    s.exec();
    assert_eq!(s.open_calls(), 0);
    // The new program's main.
    assert!(enter(&mut s, 10, 0, 100, &ff));
    let (c, _) = leave(&mut s, 12, 0, 100);
    assert_eq!((c.addr, c.total), (100, 2));
    assert_eq!(s.close_open(20), None);
}

#[test]
fn unfinished_functions_close_innermost_first_at_the_end() {
    let mut s = TaskStack::new(None);
    let ff = FuncFilter::default();
    enter(&mut s, 10, 0, 1, &ff);
    enter(&mut s, 20, 1, 2, &ff);
    enter(&mut s, 30, 2, 3, &ff);
    leave(&mut s, 35, 2, 3);
    let inner = s.close_open(50).unwrap().unwrap();
    assert_eq!((inner.addr, inner.total, inner.child), (2, 30, 5));
    assert!(s.exit());
    let outer = s.close_open(50).unwrap().unwrap();
    assert_eq!((outer.addr, outer.total, outer.child), (1, 40, 30));
    assert_eq!(s.close_open(50), None);
}

#[test]
fn depth_limit_hides_deeper_calls() {
    let mut s = TaskStack::new(Some(1));
    let ff = FuncFilter::default();
    assert!(enter(&mut s, 1, 0, 1, &ff));
    assert!(!enter(&mut s, 2, 1, 2, &ff));
    assert!(!leave(&mut s, 3, 1, 2).1);
    assert!(leave(&mut s, 4, 0, 1).1);
}

#[test]
fn filter_with_depth_shows_its_own_subtree_to_the_depth() {
    // -F f -D 2: main hidden (outside), f and its child shown, the grandchild hidden.
    let mut s = TaskStack::new(Some(2));
    let plain = FuncFilter::default();
    let f = FuncFilter {
        filter: true,
        ..FuncFilter::default()
    };
    let v = |s: &mut TaskStack, t, d, a, ff: &FuncFilter| {
        s.consume(&rec(ENTRY, t, d, a), a as FuncId);
        s.enter(ff, true, false, None, None)
    };
    assert_eq!(v(&mut s, 1, 0, 1, &plain), Verdict::Outside);
    assert_eq!(v(&mut s, 2, 1, 2, &f), Verdict::Shown);
    assert!(s.inside_filter());
    assert_eq!(v(&mut s, 3, 2, 3, &plain), Verdict::Shown);
    assert_eq!(v(&mut s, 4, 3, 4, &plain), Verdict::Hidden);
    assert!(!s.event_visible(true));
    assert!(!leave(&mut s, 5, 3, 4).1);
    assert!(leave(&mut s, 6, 2, 3).1);
    assert!(leave(&mut s, 7, 1, 2).1);
    assert!(!s.inside_filter());
    assert!(!leave(&mut s, 8, 0, 1).1);
}

#[test]
fn notrace_hides_everything_below_and_triggers_switch_tracing() {
    let mut s = TaskStack::new(None);
    let n = FuncFilter {
        notrace: true,
        ..FuncFilter::default()
    };
    let off = FuncFilter {
        actions: Actions {
            trace_off: true,
            ..Actions::default()
        },
        ..FuncFilter::default()
    };
    assert!(!enter(&mut s, 1, 0, 1, &n));
    assert!(s.inside_notrace());
    assert!(!enter(&mut s, 2, 1, 2, &FuncFilter::default()));
    leave(&mut s, 3, 1, 2);
    assert!(!leave(&mut s, 4, 0, 1).1);
    assert!(!s.inside_notrace());
    let mut enabled = true;
    s.consume(&rec(ENTRY, 5, 0, 3), 3);
    let v = s.enter(&off, false, false, None, Some(&mut enabled));
    assert_eq!(v, Verdict::Disabled);
    assert!(!enabled);
    // Disabled is not marked hidden: the exit decides with the tracing state of its time.
    assert!(!s.hidden(0));
}

#[test]
fn fast_path_pairs_like_consume() {
    let mut a = TaskStack::new(None);
    let mut b = TaskStack::new(None);
    // Both start on main's entry (the fast path needs a started stack).
    a.consume(&rec(ENTRY, 1, 0, 1), 1);
    b.consume(&rec(ENTRY, 1, 0, 1), 1);
    assert!(b.in_sync());
    a.consume(&rec(ENTRY, 2, 1, 2), 2);
    assert_eq!(b.push(&rec(ENTRY, 2, 1, 2), 2), 1);
    let ca = a.consume(&rec(EXIT, 5, 1, 2), 2).unwrap();
    let cb = b.pop(&rec(EXIT, 5, 1, 2));
    assert_eq!(ca, cb);
    let ca = a.consume(&rec(EXIT, 9, 0, 1), 1).unwrap();
    let cb = b.pop(&rec(EXIT, 9, 0, 1));
    assert_eq!((ca, cb.child), (cb, 3));
}

/// `-Z 30`: a 20-byte function is hidden and its time is its caller's own, while its 40-byte
/// callee is shown and counts as the caller's child; a `size=10` trigger lets a 20-byte
/// function through, itself included, until it returns.
#[test]
fn size_limit_hides_small_functions_as_if_not_recorded() {
    let mut s = TaskStack::new(None);
    s.set_size_limit(30);
    let big = FuncFilter {
        size: 40,
        ..FuncFilter::default()
    };
    let small = FuncFilter {
        size: 20,
        ..FuncFilter::default()
    };
    assert!(enter(&mut s, 0, 0, 1, &big));
    assert!(!enter(&mut s, 10, 1, 2, &small));
    assert!(enter(&mut s, 12, 2, 3, &big));
    assert!(leave(&mut s, 15, 2, 3).1);
    let (hidden, shown) = leave(&mut s, 20, 1, 2);
    assert!(!shown);
    assert_eq!((hidden.total, hidden.child), (10, 3));
    let (main, _) = leave(&mut s, 30, 0, 1);
    // Only the shown callee (3) is main's child time: the hidden call's other 7 are main's.
    assert_eq!((main.total, main.child), (30, 3));

    let trigger = FuncFilter {
        size: 20,
        actions: Actions {
            size: Some(10),
            ..Actions::default()
        },
        ..FuncFilter::default()
    };
    assert!(enter(&mut s, 40, 0, 4, &trigger));
    assert!(enter(&mut s, 41, 1, 2, &small));
    assert!(leave(&mut s, 42, 1, 2).1);
    assert!(leave(&mut s, 43, 0, 4).1);
    assert!(!enter(&mut s, 50, 0, 2, &small));
}

/// Where a user event has a call to show in: not at the top level, not inside a call entered
/// before the data starts (the first record is deeper), not only inside calls `-Z` hides.
#[test]
fn events_are_placed_in_calls_entered_in_the_data() {
    let big = FuncFilter {
        size: 40,
        ..FuncFilter::default()
    };
    let small = FuncFilter {
        size: 20,
        ..FuncFilter::default()
    };
    let mut s = TaskStack::new(None);
    assert!(!s.event_placed());
    // The data starts inside two calls: their slots are unknown.
    assert!(enter(&mut s, 10, 2, 3, &big));
    assert!(s.event_placed());
    leave(&mut s, 11, 2, 3);
    assert!(!s.event_placed());
    leave(&mut s, 12, 1, 2);
    leave(&mut s, 13, 0, 1);
    assert!(!s.event_placed());

    let mut s = TaskStack::new(None);
    s.set_size_limit(30);
    assert!(!enter(&mut s, 0, 0, 1, &small));
    assert!(!s.event_placed());
    assert!(enter(&mut s, 1, 1, 2, &big));
    assert!(!enter(&mut s, 2, 2, 3, &small));
    // Inside a hidden small call, within a shown one.
    assert!(s.event_placed());
}
