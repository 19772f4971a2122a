//! The request model's linking, on crafted event streams: libaio (two reads in one
//! io_submit, reaped one per io_getevents in completion order), io_uring (SQEs matched to
//! block requests, a punted request issued by a worker, CQEs posted in io_uring_enter), a
//! synchronous write waited for in its call and writeback that outlives it.

use super::model::Linker;
use super::request::*;
use std::rc::Rc;

const A: u32 = 100;
const WORKER: u32 = 101;

// The builders `writeback_tests` shares.

/// The user functions open at a system call; `function` indexes the submitting one.
pub(super) fn path(frames: &[&str], function: Option<usize>) -> Rc<UserPath> {
    Rc::new(UserPath {
        frames: frames.iter().map(|s| s.to_string()).collect(),
        function,
    })
}

pub(super) fn ev(time: u64, tid: u32, what: What) -> Event {
    Event { time, tid, what }
}

pub(super) fn enter(time: u64, tid: u32, name: &str, p: &Rc<UserPath>) -> Event {
    let what = What::SyscallEnter {
        name: name.into(),
        path: Some(p.clone()),
    };
    ev(time, tid, what)
}

pub(super) fn exit(time: u64, tid: u32) -> Event {
    ev(time, tid, What::SyscallExit)
}

/// The requests `events` make, linked.
pub(super) fn link(events: Vec<Event>) -> Vec<Request> {
    let mut l = Linker::new();
    for e in events {
        l.push(e);
    }
    l.finish()
}

pub(super) fn layers(r: &Request) -> Vec<Layer> {
    r.points.iter().map(|p| p.layer).collect()
}

fn block(time: u64, tid: u32, stage: Stage, sector: u64, rwbs: &str) -> Event {
    let rq = BlockRq {
        dev: 254 << 20,
        sector,
        nr_sector: 8,
        bytes: 512,
        rwbs: rwbs.to_string(),
        error: 0,
    };
    ev(time, tid, What::Block { stage, rq })
}

#[test]
fn aio_reads_are_reaped_in_completion_order_by_the_calls_that_returned_them() {
    let sub = path(&["main", "submit_reads", "io_submit"], Some(1));
    let reap = path(&["main", "reap_reads", "io_getevents"], Some(1));
    let aio = |ctx| What::AioSubmit { ctx, iocbs: 0x7ff0 };
    let reqs = link(vec![
        enter(100, A, "io_submit", &sub),
        ev(101, A, aio(7)),
        block(110, A, Stage::Insert, 800, "RS"),
        block(120, A, Stage::Insert, 808, "RS"),
        block(130, A, Stage::Issue, 800, "RS"),
        block(131, A, Stage::Issue, 808, "RS"),
        exit(140, A),
        enter(150, A, "io_getevents", &reap),
        ev(151, A, What::AioGetEvents { ctx: 7 }),
        // The second read completes first (another CPU, rewritten as A's).
        block(200, A, Stage::Complete, 808, "RS"),
        ev(210, A, What::AioGotEvents { ret: 1 }),
        exit(211, A),
        block(300, A, Stage::Complete, 800, "RS"),
        enter(400, A, "io_getevents", &reap),
        ev(401, A, What::AioGetEvents { ctx: 7 }),
        // As recorded: the typed exit event comes after the raw exit; the call's return
        // is the reap time.
        exit(402, A),
        ev(403, A, What::AioGotEvents { ret: 1 }),
    ]);
    assert_eq!(reqs.len(), 2);
    let (r0, r1) = (&reqs[0], &reqs[1]);
    assert_eq!((r0.rq.sector, r1.rq.sector), (800, 808));
    for r in &reqs {
        assert_eq!(r.via, Via::Aio);
        assert_eq!(r.kind(), "read");
        assert_eq!(r.syscall.as_deref(), Some("io_submit"));
        assert_eq!(r.path.function(), "submit_reads");
        assert_eq!(r.aio, Some((7, 0x7ff0)));
        assert_eq!(r.reaper.as_ref().unwrap().call, "io_getevents");
        assert_eq!(
            layers(r),
            [
                Layer::Syscall,
                Layer::Insert,
                Layer::Issue,
                Layer::Complete,
                Layer::Reap
            ]
        );
        assert_eq!(r.reaper.as_ref().unwrap().path.function(), "reap_reads");
    }
    // 808 completed first: the first io_getevents returned it.
    assert_eq!(r1.reaper.as_ref().unwrap().time, 210);
    assert_eq!(r0.reaper.as_ref().unwrap().time, 402);
    assert_eq!(r0.layers(), [Some(10), Some(20), Some(170), Some(102)]);
    assert_eq!(r1.layers(), [Some(20), Some(11), Some(69), Some(10)]);
    assert_eq!(r0.total(), 402 - 100);
}

/// Graph mode: the `syscalls` events of io_submit and io_getevents come before the
/// function_graph entry of their system call, and still belong to it.
#[test]
fn aio_arguments_seen_before_their_call_belong_to_it() {
    let sub = path(&["main", "submit_reads", "io_submit"], Some(1));
    let reap = path(&["main", "reap_reads", "io_getevents"], Some(1));
    let aio = What::AioSubmit {
        ctx: 7,
        iocbs: 0x7ff0,
    };
    let reqs = link(vec![
        // Arguments of a call that is not an aio one are not carried over.
        ev(90, A, What::AioGetEvents { ctx: 9 }),
        enter(91, A, "write", &sub),
        exit(92, A),
        ev(99, A, aio),
        enter(100, A, "io_submit", &sub),
        block(130, A, Stage::Issue, 800, "RS"),
        exit(140, A),
        block(200, A, Stage::Complete, 800, "RS"),
        ev(399, A, What::AioGetEvents { ctx: 7 }),
        enter(400, A, "io_getevents", &reap),
        exit(402, A),
        ev(403, A, What::AioGotEvents { ret: 1 }),
    ]);
    assert_eq!(reqs.len(), 1);
    assert_eq!(reqs[0].aio, Some((7, 0x7ff0)));
    let reaper = reqs[0].reaper.as_ref().unwrap();
    assert_eq!((reaper.call.as_str(), reaper.time), ("io_getevents", 402));
}

#[test]
fn uring_sqes_link_to_their_requests_and_cqes_are_reaped_at_the_call_return() {
    let sub = path(&["main", "submit_reads", "io_uring_submit"], Some(1));
    let wait = path(&["main", "reap_reads", "io_uring_wait_cqe"], Some(1));
    let submit = |req, user_data| What::UringSubmit { req, user_data };
    let reqs = link(vec![
        enter(100, A, "io_uring_enter", &sub),
        ev(101, A, submit(0xa, 1)),
        block(102, A, Stage::Issue, 800, "RS"),
        ev(103, A, submit(0xb, 2)),
        ev(104, A, What::UringAsync { req: 0xb }),
        exit(105, A),
        // The punted read is issued by an io-wq worker, outside any system call.
        block(150, WORKER, Stage::Issue, 808, "RS"),
        enter(160, A, "io_uring_enter", &wait),
        block(170, A, Stage::Complete, 800, "RS"),
        block(171, A, Stage::Complete, 808, "RS"),
        ev(
            180,
            A,
            What::UringComplete {
                req: 0xa,
                res: 512,
                path: Rc::default(),
            },
        ),
        ev(
            181,
            A,
            What::UringComplete {
                req: 0xb,
                res: 512,
                path: Rc::default(),
            },
        ),
        exit(190, A),
    ]);
    assert_eq!(reqs.len(), 2);
    for (r, ud) in reqs.iter().zip([1, 2]) {
        assert_eq!(r.via, Via::Uring);
        assert_eq!(r.user_data, Some(ud));
        assert_eq!(r.cqe_res, Some(512));
        assert_eq!(r.path.function(), "submit_reads");
        let reaper = r.reaper.as_ref().unwrap();
        assert_eq!((reaper.time, reaper.call.as_str()), (190, "io_uring_enter"));
        assert_eq!(reaper.path.function(), "reap_reads");
        assert!(r.points.windows(2).all(|w| w[0].time <= w[1].time));
    }
    assert_eq!(reqs[1].tid, WORKER);
    assert_eq!(
        layers(&reqs[1]),
        [
            Layer::Syscall,
            Layer::Sqe,
            Layer::Issue,
            Layer::Complete,
            Layer::Cqe,
            Layer::Reap
        ]
    );
    // No insertion: nothing queued; the call's part runs to the issue.
    assert_eq!(reqs[0].layers(), [Some(2), Some(0), Some(68), Some(20)]);
    assert_eq!(reqs[1].total(), 190 - 100);
}

#[test]
fn sync_writes_are_reaped_by_their_call_and_writeback_after_it_is_not() {
    let w = path(&["main", "write_block", "pwrite64"], Some(1));
    let reqs = link(vec![
        enter(100, A, "pwrite64", &w),
        block(110, A, Stage::BioQueue, 64, "WS"),
        block(111, A, Stage::Insert, 64, "WS"),
        block(112, A, Stage::Issue, 64, "WS"),
        // Another request of the call that completes only after it returned.
        block(113, A, Stage::Issue, 72, "W"),
        // A bio merged into the request at 64 (sector 65): no request of its own, and gone
        // with that request's completion (64 + 8 sectors).
        block(114, A, Stage::BioQueue, 65, "WS"),
        block(150, A, Stage::Complete, 64, "WS"),
        exit(160, A),
        block(170, A, Stage::Complete, 72, "W"),
        // A completion of a request never started by a traced task is ignored.
        block(180, A, Stage::Complete, 999, "W"),
        // A flush outside any call is its own request, without a call or a reaper.
        block(190, A, Stage::Issue, 0, "FF"),
        block(195, A, Stage::Complete, 0, "FF"),
        // A later request at sector 65 is a new one.
        block(200, A, Stage::Issue, 65, "W"),
        block(210, A, Stage::Complete, 65, "W"),
    ]);
    assert_eq!(reqs.len(), 4, "{reqs:#?}");
    assert_eq!(layers(&reqs[3]), [Layer::Issue, Layer::Complete]);
    let (a, b, f) = (&reqs[0], &reqs[1], &reqs[2]);
    assert_eq!((a.via, a.kind(), a.rq.sector), (Via::Sync, "write", 64));
    assert_eq!(a.reaper.as_ref().map(|r| r.time), Some(160));
    assert_eq!(
        layers(a),
        [
            Layer::Syscall,
            Layer::Bio,
            Layer::Insert,
            Layer::Issue,
            Layer::Complete,
            Layer::Reap
        ]
    );
    assert_eq!(a.layers(), [Some(11), Some(1), Some(38), Some(10)]);
    assert!(b.reaper.is_none());
    assert_eq!(b.layers(), [Some(13), Some(0), Some(57), None]);
    assert_eq!(b.total(), 70);
    assert_eq!((f.kind(), f.syscall.as_deref()), ("flush", None));
    assert_eq!(f.layers(), [None, Some(0), Some(5), None]);
}

/// What `io::flows` hands a flow output: a request's points in time order, each in the task
/// where it happened (the submitter, then the worker that issued the punted SQE).
#[test]
fn points_are_in_time_order_with_their_tasks() {
    let sub = path(&["main"], Some(0));
    let reqs = link(vec![
        enter(100, A, "io_uring_enter", &sub),
        ev(
            101,
            A,
            What::UringSubmit {
                req: 0xc,
                user_data: 9,
            },
        ),
        ev(102, A, What::UringAsync { req: 0xc }),
        exit(103, A),
        block(150, WORKER, Stage::Issue, 40, "R"),
        block(160, A, Stage::Complete, 40, "R"),
        ev(
            170,
            A,
            What::UringComplete {
                req: 0xc,
                res: 0,
                path: path(&["main", "reap"], Some(1)),
            },
        ),
    ]);
    let p = &reqs[0].points;
    let got: Vec<(u32, u64, Layer)> = p.iter().map(|p| (p.tid, p.time, p.layer)).collect();
    assert_eq!(
        got,
        [
            (A, 100, Layer::Syscall),
            (A, 101, Layer::Sqe),
            (WORKER, 150, Layer::Issue),
            (A, 160, Layer::Complete),
            (A, 170, Layer::Cqe),
            // Posted outside a system call: seen at once.
            (A, 170, Layer::Reap),
        ]
    );
    // ... by the user functions open when it was posted.
    let reaper = reqs[0].reaper.as_ref().unwrap();
    assert_eq!(reaper.call, "task_work");
    assert_eq!(reaper.path.frames, ["main", "reap"]);
}

fn fs(time: u64, tid: u32, edge: FsEdge, kind: FsKind, range: Option<(u64, u64)>) -> Event {
    let op = FsOp {
        kind,
        dev: 254 << 20,
        ino: 12,
        range,
    };
    ev(time, tid, What::Fs { edge, op })
}

#[test]
fn aio_direct_reads_carry_their_iomap_dio_begin_and_its_file_range() {
    let sub = path(&["main", "submit_reads", "io_submit"], Some(1));
    let reqs = link(vec![
        enter(100, A, "io_submit", &sub),
        fs(102, A, FsEdge::Begin, FsKind::Dio, Some((0, 512))),
        block(105, A, Stage::BioQueue, 800, "RS"),
        block(106, A, Stage::Insert, 800, "RS"),
        fs(108, A, FsEdge::Begin, FsKind::Dio, Some((4096, 512))),
        block(110, A, Stage::BioQueue, 808, "RS"),
        block(111, A, Stage::Insert, 808, "RS"),
        block(112, A, Stage::Issue, 800, "RS"),
        block(113, A, Stage::Issue, 808, "RS"),
        exit(120, A),
        // A request of a later call, with no filesystem operation of its own: none.
        enter(200, A, "pwrite64", &sub),
        block(210, A, Stage::Issue, 900, "WS"),
        exit(220, A),
    ]);
    assert_eq!(reqs.len(), 3);
    for (r, (at, offset)) in reqs.iter().zip([(102, 0), (108, 4096)]) {
        assert_eq!(
            layers(r),
            [
                Layer::Syscall,
                Layer::Fs,
                Layer::Bio,
                Layer::Insert,
                Layer::Issue
            ]
        );
        assert_eq!(r.at(Layer::Fs), Some(at));
        let op = r.fs.unwrap();
        assert_eq!(
            (op.kind, op.ino, op.range),
            (FsKind::Dio, 12, Some((offset, 512)))
        );
    }
    assert_eq!(reqs[2].fs, None);
    assert_eq!(layers(&reqs[2]), [Layer::Syscall, Layer::Issue]);
}

#[test]
fn fsync_requests_carry_the_sync_and_not_its_nested_writepages() {
    let p = path(&["main", "sync_file", "fsync"], Some(1));
    let reqs = link(vec![
        enter(100, A, "fsync", &p),
        fs(101, A, FsEdge::Begin, FsKind::Fsync, None),
        fs(103, A, FsEdge::Begin, FsKind::Writepages, Some((0, 8192))),
        block(105, A, Stage::Issue, 800, "WS"),
        block(106, A, Stage::Issue, 808, "WS"),
        block(130, A, Stage::Complete, 800, "WS"),
        block(131, A, Stage::Complete, 808, "WS"),
        fs(132, A, FsEdge::End, FsKind::Fsync, None),
        // After the fsync's end, in the same call: not its.
        block(133, A, Stage::Issue, 0, "FF"),
        exit(140, A),
        // Writepages on its own (no fsync under way) is the operation.
        enter(200, A, "write", &p),
        fs(201, A, FsEdge::Begin, FsKind::Writepages, Some((0, 4096))),
        block(205, A, Stage::Issue, 900, "W"),
        exit(210, A),
        // The system call's return ended it.
        enter(300, A, "write", &p),
        block(305, A, Stage::Issue, 1000, "W"),
        exit(310, A),
    ]);
    assert_eq!(reqs.len(), 5);
    for r in &reqs[..2] {
        assert_eq!(r.at(Layer::Fs), Some(101));
        assert_eq!(r.fs.map(|o| (o.kind, o.range)), Some((FsKind::Fsync, None)));
        assert_eq!(r.reaper.as_ref().map(|rp| rp.time), Some(140));
    }
    assert_eq!(reqs[2].fs, None);
    assert_eq!(reqs[3].at(Layer::Fs), Some(201));
    assert_eq!(
        reqs[3].fs.map(|o| (o.kind, o.range)),
        Some((FsKind::Writepages, Some((0, 4096))))
    );
    assert_eq!(reqs[4].fs, None);
}

/// `push_with` asks for a system call's user functions only when a request needs them, once.
#[test]
fn user_paths_are_asked_for_only_when_a_request_needs_them() {
    let mut l = Linker::new();
    let asked = std::cell::Cell::new(0);
    let mut now = || {
        asked.set(asked.get() + 1);
        UserPath {
            frames: vec!["main".to_string()],
            function: Some(0),
        }
    };
    let lazy = |time, name: &str| {
        let what = What::SyscallEnter {
            name: name.into(),
            path: None,
        };
        Event { time, tid: A, what }
    };
    for e in [lazy(10, "getpid"), exit(11, A), lazy(20, "pwrite64")] {
        l.push_with(e, &mut now);
    }
    assert_eq!(asked.get(), 0);
    for e in [
        block(21, A, Stage::Issue, 8, "WS"),
        block(22, A, Stage::Issue, 16, "WS"),
        block(23, A, Stage::Complete, 8, "WS"),
        exit(24, A),
    ] {
        l.push_with(e, &mut now);
    }
    assert_eq!(asked.get(), 1);
    let reqs = l.finish();
    assert_eq!(reqs.len(), 2);
    assert_eq!(reqs[0].path.function(), "main");
    assert_eq!(
        reqs[0].reaper.as_ref().map(|r| r.path.function()),
        Some("main")
    );
}

/// `report --io -F/-N`: requests selected by the functions open when they were submitted.
#[test]
fn filters_select_requests_by_their_submitting_functions() {
    let prep = path(&["main", "prepare_file", "fsync"], Some(1));
    let sub = path(&["main", "submit_reads", "io_submit"], Some(1));
    let reqs = link(vec![
        enter(100, A, "fsync", &prep),
        block(110, A, Stage::Issue, 800, "WS"),
        block(120, A, Stage::Complete, 800, "WS"),
        exit(130, A),
        enter(200, A, "io_submit", &sub),
        block(210, A, Stage::Issue, 900, "RS"),
        exit(220, A),
    ]);
    let funcs = |cfg: &crate::Config| -> Vec<String> {
        super::select(reqs.clone(), cfg)
            .iter()
            .map(|r| r.path.function().to_string())
            .collect()
    };
    let mut cfg = crate::Config::default();
    assert_eq!(funcs(&cfg), ["prepare_file", "submit_reads"]);
    cfg.filters = vec!["submit_reads".into()];
    assert_eq!(funcs(&cfg), ["submit_reads"]);
    // A library call counts, and -N drops what it names.
    cfg.filters = vec!["io_submit|fsync".into()];
    cfg.notrace = vec!["prepare_file".into()];
    assert_eq!(funcs(&cfg), ["submit_reads"]);
    cfg.filters.clear();
    cfg.notrace = vec!["main".into()];
    assert!(funcs(&cfg).is_empty());
}
