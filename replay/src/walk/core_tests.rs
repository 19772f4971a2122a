//! The walk on crafted data directories: LOST in the middle, longjmp over three frames,
//! exec, unfinished calls, filters with depth, and replay's look-ahead — what each policy
//! hands over (the call stack alone is tested in `callstack_tests.rs`).

use crate::config::Config;
use crate::walk::core::{Core, Step};
use crate::walk::policy::Policy;
use record_format::info::{feat, Info, InfoHeader};
use record_format::maps::MapEntry;
use record_format::sym::Symbol;
use record_format::task::TaskLine;
use record_format::{RawRecord, RecordKind, TraceDir, TraceWriter};

const E: RecordKind = RecordKind::Entry;
const X: RecordKind = RecordKind::Exit;
const L: RecordKind = RecordKind::Lost;
const BASE: u64 = 0x5555_5555_4000;
const FUNCS: &[&str] = &["main", "a", "b", "c", "setjmp", "longjmp", "execl", "d"];

/// (kind, time, depth, function index into FUNCS); a LOST record's time is its count.
type Rec = (RecordKind, u64, u16, usize);

/// A one-task data directory of `/x/prog` holding `records`.
fn trace(records: &[Rec]) -> (tempfile::TempDir, TraceDir) {
    trace_tasks(&[(7, 7, records)])
}

/// A data directory of `/x/prog` with the tasks (tid, pid, records).
fn trace_tasks(tasks: &[(u32, u32, &[Rec])]) -> (tempfile::TempDir, TraceDir) {
    trace_execs(tasks, &[])
}

/// [`trace_tasks`], the first task's process starting a new session (an exec of the same
/// program) at each of `execs` (record times).
fn trace_execs(tasks: &[(u32, u32, &[Rec])], execs: &[u64]) -> (tempfile::TempDir, TraceDir) {
    let tmp = tempfile::tempdir().expect("tempdir");
    let path = tmp.path().join("t.data");
    let exe = "/x/prog";
    let mut w = TraceWriter::create(&path).expect("create");
    let sess = TaskLine::Sess {
        time: 1,
        pid: tasks[0].1,
        sid: "s1".into(),
        exename: exe.into(),
    };
    w.task_line(&sess).expect("sess");
    for &(tid, pid, _) in tasks {
        w.task_line(&TaskLine::Task { time: 1, tid, pid })
            .expect("task");
    }
    let map = MapEntry {
        start: BASE,
        end: BASE + 0x5000,
        perms: "r-xp".into(),
        path: exe.into(),
        build_id: None,
    };
    w.session_map("s1", std::slice::from_ref(&map))
        .expect("map");
    for (i, &at) in execs.iter().enumerate() {
        let sid = format!("s{}", i + 2);
        let sess = TaskLine::Sess {
            time: 1000 + at,
            pid: tasks[0].1,
            sid: sid.clone(),
            exename: exe.into(),
        };
        w.task_line(&sess).expect("sess");
        w.session_map(&sid, std::slice::from_ref(&map))
            .expect("map");
    }
    let syms: Vec<Symbol> = FUNCS
        .iter()
        .enumerate()
        .map(|(i, name)| Symbol {
            addr: 0x1000 + 0x40 * i as u64,
            size: 0x40,
            kind: 'T',
            name: (*name).into(),
        })
        .collect();
    w.sym_file("prog.sym", exe, None, &syms).expect("sym");
    for &(tid, _, records) in tasks {
        for &(kind, time, depth, f) in records {
            if kind == L {
                w.lost_record(tid, time).expect("lost");
                continue;
            }
            let rec = RawRecord {
                time: 1000 + time,
                kind,
                more: false,
                depth,
                addr: BASE + 0x1000 + 0x40 * f as u64 + 8,
            };
            w.func_record(tid, rec, &[], &[]).expect("record");
        }
    }
    let info = Info {
        header: InfoHeader {
            feat_mask: feat::TASK_SESSION | feat::SYM_REL_ADDR | feat::MAX_STACK,
            ..InfoHeader::default()
        },
        exename: Some(exe.into()),
        tids: tasks.iter().map(|t| t.0).collect(),
        ..Info::default()
    };
    w.finish(&info).expect("finish");
    let dir = TraceDir::open(&path).expect("open");
    (tmp, dir)
}

/// The walk as text: `+name@slot` for a reported entry, `-name@slot=total/child` for a
/// reported exit, `LOST`, then `~name@slot=total` for each call closed at the end.
fn walk(dir: &TraceDir, cfg: &Config, policy: Policy) -> Vec<String> {
    let mut core = Core::new(dir, cfg, policy);
    let mut out = Vec::new();
    while let Some(step) = core.next_step() {
        match step {
            Step::Entry(e) if e.reported => {
                out.push(format!(
                    "+{}@{}",
                    core.merge.sym.func(e.head.func).name,
                    e.slot
                ));
            }
            Step::Exit(x) if x.reported => out.push(format!(
                "-{}@{}={}/{}",
                core.merge.sym.func(x.head.func).name,
                x.slot,
                x.closed.total,
                x.closed.child
            )),
            Step::Lost { .. } => out.push("LOST".into()),
            _ => {}
        }
    }
    while let Some(u) = core.close_next(0) {
        let session = core.merge.session_of(0);
        let f = core.merge.sym.resolve(session, u.time, u.closed.addr);
        let name = &core.merge.sym.func(f).name;
        out.push(format!("~{name}@{}={}", u.slot, u.closed.total));
    }
    out
}

#[test]
fn lost_in_the_middle_resynchronises_from_the_next_record() {
    let recs = [
        (E, 0, 0, 0),
        (E, 1, 1, 1),
        (E, 2, 2, 2),
        (L, 5, 0, 0),
        // b's and a's exits are lost; c is main's child.
        (E, 10, 1, 3),
        (X, 14, 1, 3),
        (X, 20, 0, 0),
    ];
    let (_tmp, dir) = trace(&recs);
    let got = walk(&dir, &Config::default(), Policy::ANALYSIS);
    // main's start moved to just before the first record after LOST.
    let want = [
        "+main@0",
        "+a@1",
        "+b@2",
        "LOST",
        "+c@1",
        "-c@1=4/0",
        "-main@0=11/4",
    ];
    assert_eq!(got, want);
}

#[test]
fn longjmp_over_three_frames_returns_to_the_setjmp_level() {
    let recs = [
        (E, 0, 0, 0),
        (E, 1, 1, 4), // setjmp
        (X, 2, 1, 4),
        (E, 3, 1, 1),
        (E, 4, 2, 2),
        (E, 5, 3, 3),
        (E, 6, 4, 5), // longjmp: a, b and c never return
        (X, 7, 1, 4), // setjmp returns again
        (X, 9, 0, 0),
    ];
    let (_tmp, dir) = trace(&recs);
    for policy in [Policy::ANALYSIS, Policy::DUMP, Policy::REPLAY] {
        let got = walk(&dir, &Config::default(), policy);
        let tail: Vec<&str> = got.iter().rev().take(2).map(String::as_str).collect();
        // The second return of setjmp closes slot 1, which a's entry (time 3) reused; a, b,
        // c and longjmp are gone. main's child time: setjmp's first call and this one.
        assert_eq!(
            tail,
            ["-main@0=9/5", "-setjmp@1=4/0"],
            "{policy:?}: {got:?}"
        );
    }
}

#[test]
fn exec_empties_the_stack() {
    let recs = [
        (E, 0, 0, 0),
        (E, 1, 1, 1),
        (E, 2, 2, 6), // execl: the new program starts at depth 0
        (E, 10, 0, 0),
        (E, 11, 1, 7),
        (X, 12, 1, 7),
        (X, 15, 0, 0),
    ];
    let (_tmp, dir) = trace(&recs);
    let got = walk(&dir, &Config::default(), Policy::ANALYSIS);
    assert_eq!(
        got[3..],
        ["+main@0", "+d@1", "-d@1=1/0", "-main@0=5/1"],
        "{got:?}"
    );
    // With -D 2, exec is the third level and hidden: uftrace's report reader leaves the
    // stack as it is, its dump empties it (and forgets the depth counted so far).
    let cfg = Config {
        depth: Some(2),
        ..Config::default()
    };
    let analysis = walk(&dir, &cfg, Policy::ANALYSIS);
    // The new program's calls stay above the hidden exec, below -D: nothing more shows,
    // and the three calls are still open at the end.
    assert_eq!(
        analysis,
        ["+main@0", "+a@1", "~execl@2=13", "~a@1=14", "~main@0=15"]
    );
    let dump = walk(&dir, &cfg, Policy::DUMP);
    assert_eq!(
        dump,
        [
            "+main@0",
            "+a@1",
            "+main@0",
            "+d@1",
            "-d@1=1/0",
            "-main@0=5/1"
        ]
    );
}

/// A thread execs: the new image runs in the leader's tid, and the calls the leader had
/// open (here `main` and `a`, blocked in a join) are gone with the old image.
#[test]
fn exec_in_a_thread_empties_the_leaders_stack() {
    let leader: &[Rec] = &[
        (E, 0, 0, 0),
        (E, 1, 1, 1),
        // the thread execs at 5; the new image:
        (E, 10, 0, 0),
        (E, 11, 1, 7),
        (X, 12, 1, 7),
        (X, 15, 0, 0),
    ];
    let thread: &[Rec] = &[(E, 3, 0, 2), (E, 5, 1, 6)];
    let (_tmp, dir) = trace_tasks(&[(7, 7, leader), (8, 7, thread)]);
    let got = walk(&dir, &Config::default(), Policy::ANALYSIS);
    assert_eq!(
        got,
        [
            "+main@0",
            "+a@1",
            "+b@0",
            "+execl@1",
            "+main@0",
            "+d@1",
            "-d@1=1/0",
            "-main@0=5/1"
        ]
    );
    // The leader returns from `a` and enters `c` after the thread's exec entry: they are
    // the old image's, which ends where the new image's session starts (9).
    let late: &[Rec] = &[
        (E, 0, 0, 0),
        (E, 1, 1, 1),
        (X, 6, 1, 1),
        (E, 7, 1, 3),
        (E, 10, 0, 0),
        (E, 11, 1, 7),
        (X, 12, 1, 7),
        (X, 15, 0, 0),
    ];
    let (_tmp, dir) = trace_execs(&[(7, 7, late), (8, 7, thread)], &[9]);
    let got = walk(&dir, &Config::default(), Policy::ANALYSIS);
    assert_eq!(
        got,
        [
            "+main@0",
            "+a@1",
            "+b@0",
            "+execl@1",
            "-a@1=5/0",
            "+c@1",
            "+main@0",
            "+d@1",
            "-d@1=1/0",
            "-main@0=5/1"
        ]
    );
    // Another process's tasks keep their calls.
    let (_tmp, dir) = trace_tasks(&[(7, 7, &leader[..2]), (8, 8, thread)]);
    let got = walk(&dir, &Config::default(), Policy::ANALYSIS);
    assert_eq!(got[4..], ["~a@1=0", "~main@0=1"], "{got:?}");
}

#[test]
fn unfinished_calls_are_closed_innermost_first() {
    let recs = [(E, 0, 0, 0), (E, 2, 1, 1), (E, 3, 2, 2), (X, 5, 2, 2)];
    let (_tmp, dir) = trace(&recs);
    let got = walk(&dir, &Config::default(), Policy::ANALYSIS);
    assert_eq!(got[3..], ["-b@2=2/0", "~a@1=3", "~main@0=5"]);
    // The task report closes them at the last exit: the same here.
    let task = walk(&dir, &Config::default(), Policy::TASK_REPORT);
    assert_eq!(task, ["-b@2=2/0", "~a@1=3", "~main@0=5"]);
    // Replay lists them instead.
    let replay = walk(&dir, &Config::default(), Policy::REPLAY);
    assert_eq!(replay.len(), 4);
}

#[test]
fn depth_and_filters_decide_what_is_reported() {
    let recs = [
        (E, 0, 0, 0),
        (E, 1, 1, 1),
        (E, 2, 2, 2),
        (E, 3, 3, 3),
        (X, 4, 3, 3),
        (X, 5, 2, 2),
        (X, 6, 1, 1),
        (X, 7, 0, 0),
    ];
    let (_tmp, dir) = trace(&recs);
    let depth = Config {
        depth: Some(2),
        ..Config::default()
    };
    for policy in [Policy::ANALYSIS, Policy::DUMP, Policy::REPLAY] {
        let got = walk(&dir, &depth, policy);
        // Hidden calls still count in their parent's child time.
        assert_eq!(
            got,
            ["+main@0", "+a@1", "-a@1=5/3", "-main@0=7/5"],
            "{policy:?}"
        );
    }
    let filter = Config {
        filters: vec!["b".into()],
        depth: Some(1),
        ..Config::default()
    };
    let got = walk(&dir, &filter, Policy::ANALYSIS);
    assert_eq!(got, ["+b@2", "-b@2=3/1"]);
}

#[test]
fn replay_look_ahead_merges_an_entry_with_its_exit_over_hidden_calls() {
    let recs = [
        (E, 0, 0, 0),
        (E, 1, 1, 1),
        (E, 2, 2, 2),
        (X, 3, 2, 2),
        (X, 4, 1, 1),
        (E, 5, 1, 3),
        (E, 6, 2, 2),
        (X, 7, 2, 2),
        (X, 8, 1, 3),
        (X, 9, 0, 0),
    ];
    let (_tmp, dir) = trace(&recs);
    let cfg = Config {
        notrace: vec!["b".into()],
        ..Config::default()
    };
    let mut core = Core::new(&dir, &cfg, Policy::REPLAY);
    let mut leaves = Vec::new();
    let mut skipped = 0;
    while let Some(step) = core.next_step() {
        let Step::Entry(e) = step else { continue };
        if !e.reported {
            continue;
        }
        if let Some(exit) = core.leaf(&e, false, &mut |_| skipped += 1) {
            leaves.push(core.merge.sym.func(exit.func).name.clone());
        }
    }
    // a and c are leaves once b (hidden by -N) is consumed: two records each.
    assert_eq!(leaves, ["a", "c"]);
    assert_eq!(skipped, 4);
    // main's exit was not merged: other lines came in between.
    assert_eq!(core.tasks[0].stack.open_calls(), 0);
}
