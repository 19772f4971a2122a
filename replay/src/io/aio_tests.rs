//! libaio requests by iocb, on crafted event streams with libmcount's markers: iocbs given
//! to the requests of their io_submit in order and by length (two bios merged into one
//! request take both iocbs), and each request reaped by the call whose events name its iocb,
//! in whichever thread and against the completion order.

use super::model_tests::{enter, ev, exit, layers, link, path};
use super::request::*;
use record_format::aio::{CMD_PREADV, CMD_PWRITE};

const A: u32 = 100;
const B: u32 = 101;
const CTX: u64 = 7;

fn block(time: u64, stage: Stage, sector: u64, nr_sector: u32) -> Event {
    block_rwbs(time, stage, sector, nr_sector, "RS")
}

fn block_rwbs(time: u64, stage: Stage, sector: u64, nr_sector: u32, rwbs: &str) -> Event {
    let rq = BlockRq {
        dev: 254 << 20,
        sector,
        nr_sector,
        bytes: u64::from(nr_sector) * 512,
        rwbs: rwbs.to_string(),
        error: 0,
    };
    ev(time, A, What::Block { stage, rq })
}

fn iocb(ptr: u64, offset: i64, nbytes: u64, data: u64) -> Iocb {
    Iocb {
        ptr,
        data,
        opcode: record_format::aio::CMD_PREAD,
        fd: 3,
        buf: 0x9000,
        nbytes,
        offset,
    }
}

/// The `sys_enter_io_submit` event of context [`CTX`] (iocb array at 0x7ff0).
fn submit(time: u64, tid: u32) -> Event {
    ev(
        time,
        tid,
        What::AioSubmit {
            ctx: CTX,
            iocbs: 0x7ff0,
        },
    )
}

/// libmcount's submit marker of context [`CTX`]: `iocbs` from the first.
fn marked(time: u64, tid: u32, iocbs: Vec<Iocb>) -> Event {
    ev(
        time,
        tid,
        What::AioIocbs {
            ctx: CTX,
            first: 0,
            iocbs,
        },
    )
}

fn reaped(time: u64, tid: u32, obj: u64) -> Event {
    let events = vec![IoEvent {
        obj,
        res: 512,
        ..IoEvent::default()
    }];
    ev(time, tid, What::AioReaped { ctx: CTX, events })
}

#[test]
fn aio_requests_get_their_iocbs_and_the_call_that_returned_them() {
    let sub = path(&["main", "submit_reads", "io_submit"], Some(1));
    let reap_a = path(&["main", "reap_a", "io_getevents"], Some(1));
    let reap_b = path(&["main", "reap_b", "io_getevents"], Some(1));
    let (x, y, z) = (0x5000, 0x5040, 0x5080);
    let getevents = What::AioGetEvents { ctx: CTX };
    let reqs = link(vec![
        enter(100, A, "io_submit", &sub),
        submit(101, A),
        // x and y are adjacent: their bios merge into one request of 1024 bytes.
        block(110, Stage::BioQueue, 800, 1),
        block(111, Stage::BioQueue, 801, 1),
        block(112, Stage::BioQueue, 900, 2),
        block(120, Stage::Insert, 800, 2),
        block(121, Stage::Issue, 800, 2),
        block(122, Stage::Insert, 900, 2),
        block(123, Stage::Issue, 900, 2),
        exit(130, A),
        // The marker, written in a `write` after io_submit returned.
        enter(131, A, "write", &sub),
        marked(
            132,
            A,
            vec![
                iocb(x, 0, 512, 1),
                iocb(y, 512, 512, 2),
                iocb(z, 4096, 1024, 3),
            ],
        ),
        exit(133, A),
        block(200, Stage::Complete, 900, 2),
        block(210, Stage::Complete, 800, 2),
        // B reaps first, and gets x (the completion order says z).
        enter(300, B, "io_getevents", &reap_b),
        ev(301, B, getevents.clone()),
        exit(310, B),
        ev(311, B, What::AioGotEvents { ret: 1 }),
        enter(312, B, "write", &reap_b),
        reaped(313, B, x),
        exit(314, B),
        enter(400, A, "io_getevents", &reap_a),
        ev(401, A, getevents),
        exit(410, A),
        ev(411, A, What::AioGotEvents { ret: 1 }),
        enter(412, A, "write", &reap_a),
        reaped(413, A, z),
        exit(414, A),
    ]);
    assert_eq!(reqs.len(), 2, "{reqs:#?}");
    let ptrs = |r: &Request| r.iocbs.iter().map(|c| c.ptr).collect::<Vec<_>>();
    assert_eq!(ptrs(&reqs[0]), [x, y]);
    assert_eq!(ptrs(&reqs[1]), [z]);
    assert_eq!((reqs[1].iocbs[0].offset, reqs[1].iocbs[0].data), (4096, 3));
    let reaper = |r: &Request| {
        let rp = r.reaper.as_ref().unwrap();
        (rp.tid, rp.time, rp.path.function().to_string())
    };
    assert_eq!(reaper(&reqs[0]), (B, 310, "reap_b".to_string()));
    assert_eq!(reaper(&reqs[1]), (A, 410, "reap_a".to_string()));
    for r in &reqs {
        let reaps = layers(r).iter().filter(|&&l| l == Layer::Reap).count();
        assert_eq!(reaps, 1, "{r:?}");
        assert_eq!(r.at(Layer::Reap), Some(r.reaper.as_ref().unwrap().time));
    }
}

/// Another thread reaps an iocb between the io_submit's return and its marker: the reap
/// waits for the marker. An iocb that made no request (an fsync) takes none.
#[test]
fn aio_events_seen_before_their_submission_marker_wait_for_it() {
    let sub = path(&["main", "submit", "io_submit"], Some(1));
    let reap_b = path(&["main", "reaper", "io_getevents"], Some(1));
    let (f, x) = (0x6000, 0x6040);
    let mut sync = iocb(f, 0, 0, 9);
    sync.opcode = record_format::aio::CMD_FSYNC;
    let reqs = link(vec![
        enter(100, A, "io_submit", &sub),
        block(110, Stage::Issue, 800, 1),
        block(120, Stage::Complete, 800, 1),
        exit(130, A),
        enter(140, B, "io_getevents", &reap_b),
        ev(141, B, What::AioGetEvents { ctx: CTX }),
        exit(150, B),
        ev(151, B, What::AioGotEvents { ret: 1 }),
        reaped(152, B, x),
        marked(160, A, vec![sync, iocb(x, 0, 512, 1)]),
    ]);
    assert_eq!(reqs.len(), 1);
    assert_eq!(reqs[0].iocbs.len(), 1);
    assert_eq!(reqs[0].iocbs[0].ptr, x);
    let rp = reqs[0].reaper.as_ref().unwrap();
    assert_eq!((rp.tid, rp.time, rp.path.function()), (B, 150, "reaper"));
}

fn dio(pos: u64, count: u64) -> FsOp {
    FsOp {
        kind: FsKind::Dio,
        dev: 254 << 20,
        ino: 5,
        range: Some((pos, count)),
    }
}

fn ptrs(r: &Request) -> Vec<u64> {
    r.iocbs.iter().map(|c| c.ptr).collect()
}

/// A reap whose submission marker was lost (or written while tracing was off) does not go
/// to a later submission of the same iocb, which it precedes.
#[test]
fn a_stale_early_reap_is_not_a_later_submissions() {
    let sub = path(&["main", "submit", "io_submit"], Some(1));
    let reap_b = path(&["main", "reaper", "io_getevents"], Some(1));
    let x = 0x6040;
    let reqs = link(vec![
        // An earlier use of x: its io_submit marker lost; its reap seen.
        enter(40, B, "io_getevents", &reap_b),
        ev(41, B, What::AioGetEvents { ctx: CTX }),
        exit(50, B),
        ev(51, B, What::AioGotEvents { ret: 1 }),
        reaped(52, B, x),
        // x submitted again later, never reaped in the trace.
        enter(100, A, "io_submit", &sub),
        block(110, Stage::Issue, 800, 1),
        block(120, Stage::Complete, 800, 1),
        exit(130, A),
        marked(160, A, vec![iocb(x, 0, 512, 1)]),
    ]);
    assert_eq!(reqs.len(), 1);
    assert_eq!(ptrs(&reqs[0]), [x]);
    assert!(reqs[0].reaper.is_none(), "{:?}", reqs[0].reaper);
}

/// A vectored iocb under iomap direct I/O (nbytes = iovec count) matches its request by
/// offset, and the iocbs after it still get theirs, by range whatever the order.
#[test]
fn a_vectored_dio_iocb_matches_by_offset() {
    let sub = path(&["main", "submit", "io_submit"], Some(1));
    let mut v = iocb(0x7000, 0, 2, 1);
    v.opcode = CMD_PREADV;
    let fs = |time, edge, op| ev(time, A, What::Fs { edge, op });
    let reqs = link(vec![
        enter(100, A, "io_submit", &sub),
        fs(101, FsEdge::Begin, dio(0, 8192)),
        block(110, Stage::Insert, 800, 16),
        block(111, Stage::Issue, 800, 16),
        fs(112, FsEdge::End, dio(0, 8192)),
        fs(113, FsEdge::Begin, dio(65536, 4096)),
        block(114, Stage::Insert, 900, 8),
        block(115, Stage::Issue, 900, 8),
        fs(116, FsEdge::End, dio(65536, 4096)),
        exit(130, A),
        ev(
            160,
            A,
            What::AioIocbs {
                ctx: CTX,
                first: 0,
                // The second iocb's request came first: the ranges say.
                iocbs: vec![iocb(0x7040, 65536, 4096, 2), v],
            },
        ),
    ]);
    assert_eq!(reqs.len(), 2);
    assert_eq!(ptrs(&reqs[0]), [0x7000], "{reqs:#?}");
    assert_eq!(ptrs(&reqs[1]), [0x7040], "{reqs:#?}");
}

/// Buffered aio: an iocb served by the page cache makes no request, and does not take the
/// next iocb's; readahead goes to no iocb.
#[test]
fn a_cached_iocb_does_not_take_the_next_ones_request() {
    let sub = path(&["main", "submit", "io_submit"], Some(1));
    let marker = |time, iocbs| {
        ev(
            time,
            A,
            What::AioIocbs {
                ctx: CTX,
                first: 0,
                iocbs,
            },
        )
    };
    let cached = iocb(0x8000, 0, 4096, 1);
    let missed = iocb(0x8040, 1 << 20, 8192, 2);
    let reqs = link(vec![
        enter(100, A, "io_submit", &sub),
        block(110, Stage::Issue, 800, 16),
        exit(130, A),
        marker(131, vec![cached, missed]),
        // The same lengths, read ahead: which iocb missed is not known.
        enter(200, A, "io_submit", &sub),
        block_rwbs(210, Stage::Issue, 900, 8, "RA"),
        exit(230, A),
        marker(231, vec![cached, iocb(0x8040, 1 << 20, 4096, 2)]),
    ]);
    assert_eq!(reqs.len(), 2);
    assert_eq!(ptrs(&reqs[0]), [0x8040], "{reqs:#?}");
    assert!(reqs[1].iocbs.is_empty(), "{reqs:#?}");
}

/// A zero-byte request (a flush) takes no byte of an iocb, and an iocb of no bytes takes
/// no request.
#[test]
fn zero_bytes_give_and_take_nothing() {
    let sub = path(&["main", "submit", "io_submit"], Some(1));
    let write = |ptr, nbytes| Iocb {
        opcode: CMD_PWRITE,
        ..iocb(ptr, 0, nbytes, 0)
    };
    let reqs = link(vec![
        enter(100, A, "io_submit", &sub),
        block_rwbs(110, Stage::Issue, 0, 0, "FWS"),
        block_rwbs(111, Stage::Issue, 800, 1, "WS"),
        block_rwbs(112, Stage::Issue, 900, 1, "WS"),
        exit(130, A),
        marked(
            131,
            A,
            vec![write(0xa000, 0), write(0xa040, 512), write(0xa080, 512)],
        ),
    ]);
    assert_eq!(reqs.len(), 3);
    assert!(reqs[0].iocbs.is_empty(), "{reqs:#?}");
    assert_eq!(ptrs(&reqs[1]), [0xa040]);
    assert_eq!(ptrs(&reqs[2]), [0xa080]);
}

/// Once a context has markers, the completion-order rule does not guess: a request whose
/// reap is not in the trace has no reaper, not the one of a call that reaped another.
#[test]
fn markers_replace_the_completion_order_guess() {
    let sub = path(&["main", "submit", "io_submit"], Some(1));
    let reap_b = path(&["main", "reaper", "io_getevents"], Some(1));
    let (x, z) = (0x5000, 0x5080);
    let reqs = link(vec![
        enter(100, A, "io_submit", &sub),
        submit(101, A),
        block(110, Stage::Issue, 800, 1),
        block(111, Stage::Issue, 900, 1),
        exit(130, A),
        marked(131, A, vec![iocb(x, 0, 512, 1), iocb(z, 4096, 512, 2)]),
        block(200, Stage::Complete, 800, 1),
        block(210, Stage::Complete, 900, 1),
        // B reaps z (the completion order says x); x's reap is not in the trace.
        enter(300, B, "io_getevents", &reap_b),
        ev(301, B, What::AioGetEvents { ctx: CTX }),
        exit(310, B),
        ev(311, B, What::AioGotEvents { ret: 1 }),
        reaped(313, B, z),
    ]);
    assert_eq!(reqs.len(), 2);
    assert!(reqs[0].reaper.is_none(), "{:?}", reqs[0].reaper);
    let rp = reqs[1].reaper.as_ref().unwrap();
    assert_eq!((rp.tid, rp.time), (B, 310));
}
