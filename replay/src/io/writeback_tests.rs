//! Writeback on behalf of the traced tasks, on crafted event streams: a flusher's request
//! linked to the write() that dirtied the pages and reaped by the syncfs that waited for it,
//! bios of several inodes merged into one request, writeback nobody waited for, and pages
//! the task wrote out itself.

use super::model_tests::{self as t, layers, link, path};
use super::request::*;
use std::rc::Rc;

const A: u32 = 100;
const DEV: u32 = 254 << 20;

fn ev(time: u64, what: What) -> Event {
    t::ev(time, A, what)
}

fn enter(time: u64, name: &str, p: &Rc<UserPath>) -> Event {
    t::enter(time, A, name, p)
}

fn exit(time: u64) -> Event {
    t::exit(time, A)
}

fn dirty(time: u64, ino: u64, pos: u64) -> Event {
    ev(
        time,
        What::Dirty {
            ino,
            pos,
            len: 4096,
        },
    )
}

fn window(time: u64, begin: bool, ino: u64) -> Event {
    let edge = if begin { FsEdge::Begin } else { FsEdge::End };
    ev(time, What::Writeback { edge, ino })
}

fn writepages(time: u64, ino: u64) -> Event {
    let op = FsOp {
        kind: FsKind::Writepages,
        dev: DEV,
        ino,
        range: None,
    };
    let edge = FsEdge::Begin;
    ev(time, What::Fs { edge, op })
}

fn block(time: u64, stage: Stage, sector: u64, nr_sector: u32) -> Event {
    let rq = BlockRq {
        dev: DEV,
        sector,
        nr_sector,
        bytes: u64::from(nr_sector) * 512,
        rwbs: "W".to_string(),
        error: 0,
    };
    ev(time, What::Block { stage, rq })
}

#[test]
fn a_flushers_request_is_linked_to_the_write_and_reaped_by_the_syncfs() {
    let fill = path(&["main", "fill_file", "write"], Some(1));
    let flush = path(&["main", "flush_all", "syncfs"], Some(1));
    let reqs = link(vec![
        enter(100, "write", &fill),
        dirty(101, 7, 0),
        exit(102),
        enter(110, "write", &fill),
        dirty(111, 7, 4096),
        exit(112),
        enter(200, "syncfs", &flush),
        window(210, true, 7),
        writepages(211, 7),
        block(212, Stage::BioQueue, 500, 16),
        window(213, false, 7),
        block(214, Stage::Insert, 500, 16),
        block(215, Stage::Issue, 500, 16),
        block(300, Stage::Complete, 500, 16),
        exit(310),
    ]);
    assert_eq!(reqs.len(), 1, "{reqs:#?}");
    let r = &reqs[0];
    assert_eq!(r.via, Via::Writeback);
    assert_eq!(r.syscall.as_deref(), Some("write"));
    assert_eq!(r.path.function(), "fill_file");
    let fs = r.fs.unwrap();
    assert_eq!(
        (fs.kind, fs.ino, fs.range),
        (FsKind::Writeback, 7, Some((0, 8192)))
    );
    use Layer::*;
    assert_eq!(layers(r), [Syscall, Fs, Bio, Insert, Issue, Complete, Reap]);
    assert_eq!(r.at(Syscall), Some(100));
    assert_eq!(r.at(Fs), Some(210));
    let reaper = r.reaper.as_ref().unwrap();
    assert_eq!((reaper.call.as_str(), reaper.time), ("syncfs", 310));
    assert_eq!(reaper.path.function(), "flush_all");
    // The request's total runs from the write to the syncfs' return.
    assert_eq!(r.total(), 210);
}

/// The flusher merges the bios of consecutive inodes: a request whose first bio is of an
/// inode no traced call dirtied takes the submission of the one merged into it, and an issue
/// at an earlier sector (a bio of another task first) takes in the bio in flight.
#[test]
fn merged_bios_of_several_inodes_are_one_request_of_the_writing_call() {
    let fill = path(&["main", "fill_file", "write"], Some(1));
    let reqs = link(vec![
        enter(100, "write", &fill),
        dirty(101, 7, 0),
        exit(102),
        window(200, true, 8),
        block(201, Stage::BioQueue, 400, 8),
        window(202, false, 8),
        window(203, true, 7),
        block(204, Stage::BioQueue, 408, 8),
        window(205, false, 7),
        block(206, Stage::Issue, 400, 16),
        block(250, Stage::Complete, 400, 16),
        // Another request: its first bio is another task's (not kept), issued at 592.
        enter(298, "write", &fill),
        dirty(299, 7, 0),
        exit(300),
        window(301, true, 7),
        block(302, Stage::BioQueue, 600, 8),
        window(303, false, 7),
        block(304, Stage::Issue, 592, 16),
        block(350, Stage::Complete, 592, 16),
    ]);
    assert_eq!(reqs.len(), 2, "{reqs:#?}");
    for r in &reqs {
        assert_eq!(r.via, Via::Writeback);
        assert_eq!(r.path.function(), "fill_file", "{r:#?}");
        assert_eq!(r.fs.unwrap().ino, 7);
        assert!(r.reaper.is_none(), "nobody waited for it");
    }
    assert_eq!((reqs[0].rq.sector, reqs[0].rq.nr_sector), (400, 16));
    assert_eq!(reqs[1].rq.sector, 592);
    assert!(reqs[1].at(Layer::Complete).is_some());
}

/// Pages the task wrote out itself (its own ext4_writepages in an fsync) are no longer the
/// write's: a later writeback of the inode has no submitting call, and requests of the task's
/// own fsync stay `sync`.
#[test]
fn pages_the_task_wrote_out_itself_are_forgotten() {
    let fill = path(&["main", "fill_file", "write"], Some(1));
    let sync = path(&["main", "commit", "fsync"], Some(1));
    let reqs = link(vec![
        enter(100, "write", &fill),
        dirty(101, 7, 0),
        exit(102),
        enter(110, "fsync", &sync),
        writepages(111, 7),
        block(112, Stage::Issue, 800, 8),
        block(120, Stage::Complete, 800, 8),
        exit(130),
        window(200, true, 7),
        block(201, Stage::Issue, 900, 8),
        window(202, false, 7),
        block(250, Stage::Complete, 900, 8),
    ]);
    assert_eq!(reqs.len(), 2, "{reqs:#?}");
    assert_eq!(reqs[0].via, Via::Sync);
    assert_eq!(reqs[0].syscall.as_deref(), Some("fsync"));
    assert_eq!(reqs[1].via, Via::Writeback);
    assert_eq!(reqs[1].syscall, None);
    assert_eq!(layers(&reqs[1])[0], Layer::Fs);
}

fn commit(time: u64, edge: FsEdge, transaction: u64) -> Event {
    let dev = DEV;
    ev(
        time,
        What::Journal {
            edge,
            dev,
            transaction,
        },
    )
}

/// The journal thread's commit of the transaction an fsync waits for: its requests are the
/// fsync's (`jbd2`), their `fs` point the commit's first beginning, reaped at the fsync's
/// return; the fsync's own data write before the commit stays `sync`, and a request after
/// the commit ended is not the journal's.
#[test]
fn the_journal_commit_an_fsync_waits_for_is_the_fsyncs() {
    let sync = path(&["main", "commit_record", "fsync"], Some(1));
    let reqs = link(vec![
        enter(100, "fsync", &sync),
        block(110, Stage::Issue, 800, 8),
        block(120, Stage::Complete, 800, 8),
        commit(130, FsEdge::Begin, 3),
        commit(131, FsEdge::Begin, 3),
        block(140, Stage::BioQueue, 32770, 2),
        block(141, Stage::Issue, 32770, 2),
        block(150, Stage::Complete, 32770, 2),
        commit(160, FsEdge::End, 3),
        block(170, Stage::Issue, 900, 8),
        block(180, Stage::Complete, 900, 8),
        exit(200),
    ]);
    assert_eq!(reqs.len(), 3, "{reqs:#?}");
    assert_eq!(reqs[0].via, Via::Sync);
    assert_eq!(reqs[2].via, Via::Sync);
    let j = &reqs[1];
    assert_eq!(j.via, Via::Journal);
    assert_eq!(j.syscall.as_deref(), Some("fsync"));
    assert_eq!(j.path.function(), "commit_record");
    let fs = j.fs.unwrap();
    assert_eq!((fs.kind, fs.ino), (FsKind::Journal, 3));
    use Layer::*;
    assert_eq!(layers(j), [Syscall, Fs, Bio, Issue, Complete, Reap]);
    assert_eq!(j.at(Fs), Some(130));
    let reaper = j.reaper.as_ref().unwrap();
    assert_eq!((reaper.call.as_str(), reaper.time), ("fsync", 200));
}

/// A writeback request its own task does not wait for is reaped by the waiting call of
/// another task that began first, whatever the tasks' order in the model's maps.
#[test]
fn the_earliest_waiter_reaps_anothers_writeback() {
    let fill = path(&["main", "fill_file", "write"], Some(1));
    let flush = path(&["main", "flush_all", "sync"], Some(1));
    let on = |tid, e: Event| Event { tid, ..e };
    let mut events = vec![enter(100, "write", &fill), dirty(101, 7, 0), exit(102)];
    // Tasks waiting in sync, the latest-started with the lowest and the highest ids.
    for (t, start) in [(1, 150), (300, 140), (2, 145), (900, 149)] {
        events.push(on(t, enter(start, "sync", &flush)));
    }
    events.extend([
        window(200, true, 7),
        block(201, Stage::Issue, 500, 8),
        window(202, false, 7),
        block(250, Stage::Complete, 500, 8),
    ]);
    for (t, end) in [(1, 260), (300, 270), (2, 265), (900, 262)] {
        events.push(on(t, exit(end)));
    }
    let reqs = link(events);
    assert_eq!(reqs.len(), 1, "{reqs:#?}");
    let reaper = reqs[0].reaper.as_ref().unwrap();
    assert_eq!((reaper.tid, reaper.time), (300, 270));
}
