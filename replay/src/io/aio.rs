//! libaio requests by iocb, from libmcount's markers (`utrace:aio_marker`, written after an
//! `io_submit` or an `io_getevents` returned; `record_format::aio`).
//!
//! The iocbs of an `io_submit` go to the requests started in it in order, each iocb taking
//! requests until its length is covered (a large iocb makes several requests; a request
//! whose size spans the next iocb too, two iocbs merged in the plug before any event showed
//! them apart, takes both) and only requests of its direction; when a request's direct I/O
//! range is known (`iomap_dio_rw_begin` gives the iocb's file range) an iocb whose range
//! differs made no request there and is passed over. A bio request merged into another
//! hands its iocbs to that one. A request is then reaped by the call whose returned events
//! name its (first) iocb: exactly, whatever the completion order or the thread, over what
//! the completion-order rule said. Events seen before their iocb's submission marker (another
//! thread reaped between the `io_submit`'s return and its marker) wait for it.

use std::collections::HashMap;
use std::rc::Rc;

use super::{Linker, PathNow};
use crate::io::request::{FsKind, FsOp, IoEvent, Iocb, Layer, UserPath};

/// A reaping call: its task, system call, return time and user functions.
type ReapBy = (u32, Rc<str>, u64, Rc<UserPath>);

/// A task's last `io_submit`, waiting for its iocbs.
#[derive(Debug)]
pub(super) struct Submitted {
    /// The requests it started: index, size when started, whether it reads.
    reqs: Vec<(usize, u64, bool)>,
    /// The next request to give an iocb, and the bytes of it not covered yet (0: none).
    next: usize,
    left: u64,
    /// Iocbs taken so far (the next marker's `first`).
    seen: u64,
}

impl Submitted {
    pub(super) fn new(reqs: Vec<(usize, u64, bool)>) -> Submitted {
        Submitted {
            reqs,
            next: 0,
            left: 0,
            seen: 0,
        }
    }
}

/// What the markers told so far.
#[derive(Debug, Default)]
pub(super) struct AioState {
    submitted: HashMap<u32, Submitted>,
    /// (ctx, iocb) → the requests it made, until reaped (programs reuse their iocbs).
    by_iocb: HashMap<(u64, u64), Vec<usize>>,
    /// Iocbs reaped before their submission marker.
    early: HashMap<(u64, u64), ReapBy>,
    /// Each task's last `io_getevents` that returned.
    last: HashMap<u32, (Rc<str>, u64, Rc<UserPath>)>,
    /// Bio requests merged into another: j → i.
    merged: HashMap<usize, usize>,
}

impl AioState {
    pub(super) fn submitted(&mut self, tid: u32, s: Submitted) {
        self.submitted.insert(tid, s);
    }

    pub(super) fn reaped_by(&mut self, tid: u32, call: (Rc<str>, u64, Rc<UserPath>)) {
        self.last.insert(tid, call);
    }
}

impl Linker {
    /// The iocbs `first..` of the last `io_submit` of `tid`, on context `ctx`.
    pub(super) fn aio_iocbs(&mut self, tid: u32, ctx: u64, first: u64, iocbs: Vec<Iocb>) {
        let Some(mut sub) = self.aio.submitted.remove(&tid) else {
            return;
        };
        if first != sub.seen {
            // A marker was lost: the order says no more.
            return;
        }
        sub.seen += iocbs.len() as u64;
        for cb in iocbs {
            self.aio.by_iocb.insert((ctx, cb.ptr), Vec::new());
            if let Some(dir) = cb.reads() {
                self.give(&mut sub, ctx, &cb, dir);
            }
            if let Some(by) = self.aio.early.remove(&(ctx, cb.ptr)) {
                self.reap_iocb(ctx, cb.ptr, by);
            }
        }
        self.aio.submitted.insert(tid, sub);
    }

    /// Gives iocb `cb` (reading when `dir`) the requests of `sub` it made.
    fn give(&mut self, sub: &mut Submitted, ctx: u64, cb: &Iocb, dir: bool) {
        let mut need = cb.length();
        while let Some(&(i, bytes, read)) = sub.reqs.get(sub.next) {
            if read != dir {
                break;
            }
            if sub.left == 0 {
                // A direct I/O's range is its iocb's.
                let dio = match self.requests[i].fs {
                    Some(FsOp {
                        kind: FsKind::Dio,
                        range: Some(range),
                        ..
                    }) => Some(range),
                    _ => None,
                };
                if dio.is_some_and(|r| r != (cb.offset as u64, cb.nbytes)) {
                    break;
                }
                sub.left = bytes.max(1);
            }
            self.attach(i, ctx, cb);
            match need {
                Some(n) => {
                    let c = n.min(sub.left);
                    sub.left -= c;
                    if sub.left == 0 {
                        sub.next += 1;
                    }
                    need = Some(n - c);
                    if n == c {
                        break;
                    }
                }
                // A vectored iocb (its length not known here): one request.
                None => {
                    sub.left = 0;
                    sub.next += 1;
                    break;
                }
            }
        }
    }

    fn attach(&mut self, i: usize, ctx: u64, cb: &Iocb) {
        self.requests[i].iocbs.push(*cb);
        if let Some(&m) = self.aio.merged.get(&i) {
            self.requests[m].iocbs.push(*cb);
        }
        self.aio.by_iocb.entry((ctx, cb.ptr)).or_default().push(i);
    }

    /// Bio request `j` was merged into request `i`: its iocbs are `i`'s too.
    pub(super) fn aio_merged(&mut self, j: usize, i: usize) {
        if j == i {
            return;
        }
        self.aio.merged.insert(j, i);
        let cbs = self.requests[j].iocbs.clone();
        for cb in cbs {
            if !self.requests[i].iocbs.contains(&cb) {
                self.requests[i].iocbs.push(cb);
            }
        }
    }

    /// The events an `io_getevents` of `tid` on `ctx` returned (marker at `time`).
    pub(super) fn aio_events(
        &mut self,
        time: u64,
        tid: u32,
        ctx: u64,
        events: &[IoEvent],
        now: PathNow<'_>,
    ) {
        let (call, at, path) = match self.aio.last.remove(&tid) {
            Some(last) => last,
            // Its system call was not seen (libaio found the events in the ring).
            None => (Rc::from("io_getevents"), time, Rc::new(now())),
        };
        for e in events {
            let by = (tid, call.clone(), at, path.clone());
            match self.aio.by_iocb.contains_key(&(ctx, e.obj)) {
                true => self.reap_iocb(ctx, e.obj, by),
                false => {
                    self.aio.early.insert((ctx, e.obj), by);
                }
            }
        }
    }

    /// The requests iocb `ptr` of `ctx` made first are reaped by `by`.
    fn reap_iocb(&mut self, ctx: u64, ptr: u64, (tid, call, time, path): ReapBy) {
        let Some(reqs) = self.aio.by_iocb.remove(&(ctx, ptr)) else {
            return;
        };
        for i in reqs {
            let r = &mut self.requests[i];
            if r.iocbs.first().is_none_or(|cb| cb.ptr != ptr) {
                continue;
            }
            // Over the completion-order rule's guess.
            r.points.retain(|p| p.layer != Layer::Reap);
            r.reaper = None;
            self.reap(i, tid, time, &call, path.clone());
            if let Some(&m) = self.aio.merged.get(&i) {
                let r = &mut self.requests[m];
                if r.iocbs.first().is_some_and(|cb| cb.ptr == ptr) {
                    r.points.retain(|p| p.layer != Layer::Reap);
                    r.reaper = None;
                    self.reap(m, tid, time, &call, path.clone());
                }
            }
        }
    }
}
