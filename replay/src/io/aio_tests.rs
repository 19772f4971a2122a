//! libaio requests by iocb, on crafted event streams with libmcount's markers: iocbs given
//! to the requests of their io_submit in order and by length (two bios merged into one
//! request take both iocbs), and each request reaped by the call whose events name its iocb,
//! in whichever thread and against the completion order.

use super::model_tests::{enter, ev, exit, layers, link, path};
use super::request::*;

const A: u32 = 100;
const B: u32 = 101;
const CTX: u64 = 7;

fn block(time: u64, stage: Stage, sector: u64, nr_sector: u32) -> Event {
    let rq = BlockRq {
        dev: 254 << 20,
        sector,
        nr_sector,
        bytes: u64::from(nr_sector) * 512,
        rwbs: "RS".to_string(),
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
        ev(
            101,
            A,
            What::AioSubmit {
                ctx: CTX,
                iocbs: 0x7ff0,
            },
        ),
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
        ev(
            132,
            A,
            What::AioIocbs {
                ctx: CTX,
                first: 0,
                iocbs: vec![
                    iocb(x, 0, 512, 1),
                    iocb(y, 512, 512, 2),
                    iocb(z, 4096, 1024, 3),
                ],
            },
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
        ev(
            160,
            A,
            What::AioIocbs {
                ctx: CTX,
                first: 0,
                iocbs: vec![sync, iocb(x, 0, 512, 1)],
            },
        ),
    ]);
    assert_eq!(reqs.len(), 1);
    assert_eq!(reqs[0].iocbs.len(), 1);
    assert_eq!(reqs[0].iocbs[0].ptr, x);
    let rp = reqs[0].reaper.as_ref().unwrap();
    assert_eq!((rp.tid, rp.time, rp.path.function()), (B, 150, "reaper"));
}
