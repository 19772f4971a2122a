//! libaio requests by iocb, from libmcount's markers (`utrace:aio_marker`, written after an
//! `io_submit` or an `io_getevents` returned; `record_format::aio`).
//!
//! An iocb takes the requests whose direct I/O range (`iomap_dio_rw_begin` gives the
//! iocb's file range) is its, whatever their order (only the offset is compared for a
//! vectored iocb, whose `nbytes` counts its iovecs). The other requests of an `io_submit` go
//! to its iocbs in order, each iocb taking requests until its length is covered (a large
//! iocb makes several requests; a request whose size spans the next iocbs too, iocbs
//! adjacent in the file merged in the plug before any event showed them apart, takes them)
//! and only requests of its direction, when the lengths agree exactly: an iocb served by the
//! page cache makes no request, and the next one's would otherwise be taken. Readahead
//! (buffered I/O: which iocb missed the cache is not known) and zero-byte requests go to no
//! iocb. A bio request merged into another hands its iocbs to that one. A request is then
//! reaped by the call whose returned events name its (first) iocb: exactly, whatever the
//! completion order or the thread; once a context has markers, the completion-order rule
//! no longer guesses for it. Events seen before their iocb's submission marker (another
//! thread reaped between the `io_submit`'s return and its marker) wait for it, and count
//! only if reaped after that `io_submit`'s entry (else they were an earlier use's, whose
//! marker was lost).

use std::collections::{HashMap, HashSet};
use std::rc::Rc;

use super::{Linker, PathNow};
use crate::io::request::{FsKind, FsOp, IoEvent, Iocb, Layer, UserPath};

/// A reaping call: its task, system call, return time and user functions.
type ReapBy = (u32, Rc<str>, u64, Rc<UserPath>);

/// A task's last `io_submit`, waiting for its iocbs.
#[derive(Debug)]
pub(super) struct Submitted {
    /// Its entry: a reap seen before its marker counts only if it returned after it.
    time: u64,
    /// The requests it started: index, size when started, whether it reads.
    reqs: Vec<(usize, u64, bool)>,
    /// The requests given to an iocb by their direct I/O range (out of order).
    taken: Vec<bool>,
    /// The next request to give an iocb by order, and the bytes of it not covered yet (0:
    /// none).
    next: usize,
    left: u64,
    /// Iocbs taken so far (the next marker's `first`).
    seen: u64,
}

impl Submitted {
    pub(super) fn new(time: u64, reqs: Vec<(usize, u64, bool)>) -> Submitted {
        Submitted {
            time,
            taken: vec![false; reqs.len()],
            reqs,
            next: 0,
            left: 0,
            seen: 0,
        }
    }
}

/// At most this many reaps wait for their submission marker (the oldest half goes beyond).
const EARLY_MAX: usize = 4096;

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
    /// The contexts markers were seen for: their reaps are the markers' alone.
    marked: HashSet<u64>,
}

impl AioState {
    pub(super) fn submitted(&mut self, tid: u32, s: Submitted) {
        self.submitted.insert(tid, s);
    }

    pub(super) fn reaped_by(&mut self, tid: u32, call: (Rc<str>, u64, Rc<UserPath>)) {
        self.last.insert(tid, call);
    }

    /// Drops the older half of the reaps waiting for their submission marker (a marker
    /// comes right after its `io_submit` returned: those waited too long to be legit).
    fn prune_early(&mut self) {
        let mut times: Vec<u64> = self.early.values().map(|by| by.2).collect();
        let mid = times.len() / 2;
        let (_, &mut t, _) = times.select_nth_unstable(mid);
        self.early.retain(|_, by| by.2 >= t);
    }

    /// Whether markers were seen for context `ctx`.
    pub(super) fn marked(&self, ctx: u64) -> bool {
        self.marked.contains(&ctx)
    }
}

/// Whether a direct I/O's range is that of iocb `cb` (only its offset when the iocb's length
/// is not known: a vectored iocb's `nbytes` counts its iovecs).
fn dio_is(range: (u64, u64), cb: &Iocb) -> bool {
    range.0 == cb.offset as u64 && cb.length().is_none_or(|n| n == range.1)
}

impl Linker {
    /// The iocbs `first..` of the last `io_submit` of `tid`, on context `ctx`.
    pub(super) fn aio_iocbs(&mut self, tid: u32, ctx: u64, first: u64, iocbs: Vec<Iocb>) {
        self.aio.marked.insert(ctx);
        let Some(mut sub) = self.aio.submitted.remove(&tid) else {
            return;
        };
        if first != sub.seen {
            // A marker was lost: the order says no more.
            return;
        }
        sub.seen += iocbs.len() as u64;
        for (k, cb) in iocbs.iter().enumerate() {
            self.aio.by_iocb.insert((ctx, cb.ptr), Vec::new());
            if let Some(dir) = cb.reads() {
                self.give(&mut sub, ctx, cb, &iocbs[k + 1..], dir);
            }
            match self.aio.early.remove(&(ctx, cb.ptr)) {
                // Reaped after this submission's entry: its own.
                Some(by) if by.2 >= sub.time => self.reap_iocb(ctx, cb.ptr, by),
                // An earlier use's, whose submission marker was lost.
                _ => {}
            }
        }
        self.aio.submitted.insert(tid, sub);
    }

    /// The file range of request `i`'s direct I/O, when known.
    fn dio_range(&self, i: usize) -> Option<(u64, u64)> {
        match self.requests[i].fs {
            Some(FsOp {
                kind: FsKind::Dio,
                range: Some(range),
                ..
            }) => Some(range),
            _ => None,
        }
    }

    /// Gives iocb `cb` (reading when `dir`; `rest` the iocbs after it in its marker) the
    /// requests of `sub` it made.
    fn give(&mut self, sub: &mut Submitted, ctx: u64, cb: &Iocb, rest: &[Iocb], dir: bool) {
        let mut need = cb.length();
        if need == Some(0) {
            return;
        }
        if self.give_dio(sub, ctx, cb, dir) {
            return;
        }
        // By order, when nothing says otherwise.
        while let Some(&(i, bytes, read)) = sub.reqs.get(sub.next) {
            if sub.left == 0 {
                let readahead = self.requests[i].rq.rwbs.contains('A');
                let passed = sub.taken[sub.next] || self.dio_range(i).is_some();
                if passed || bytes == 0 || readahead {
                    // Another iocb's by its range, a flush, or buffered I/O's readahead
                    // (for whichever iocb missed the page cache): none of this one's.
                    sub.next += 1;
                    continue;
                }
                if read != dir || !self.fits(sub, cb, rest) {
                    break;
                }
                sub.left = bytes;
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

    /// Gives iocb `cb` the requests of `sub` whose direct I/O range is its, whatever their
    /// order, up to its length; whether there were any.
    fn give_dio(&mut self, sub: &mut Submitted, ctx: u64, cb: &Iocb, dir: bool) -> bool {
        let mut need = None;
        for k in 0..sub.reqs.len() {
            let (i, bytes, read) = sub.reqs[k];
            if sub.taken[k] || read != dir {
                continue;
            }
            let Some(range) = self.dio_range(i).filter(|&r| dio_is(r, cb)) else {
                continue;
            };
            let n: &mut u64 = need.get_or_insert(cb.length().unwrap_or(range.1));
            sub.taken[k] = true;
            self.attach(i, ctx, cb);
            *n = n.saturating_sub(bytes);
            if *n == 0 {
                break;
            }
        }
        need.is_some()
    }

    /// Whether the request at `sub.next` (not a direct I/O of known range) is made exactly
    /// by iocb `cb`: its length, several requests' that cover it exactly, or the iocbs
    /// `cb` and after it (`rest`), adjacent in the file, merged exactly into it. Anything else
    /// (an iocb served by the page cache, whose next one's request would be taken) gives
    /// none.
    fn fits(&self, sub: &Submitted, cb: &Iocb, rest: &[Iocb]) -> bool {
        let Some(n) = cb.length() else {
            // A vectored iocb: its length is not known.
            return true;
        };
        let (_, bytes, read) = sub.reqs[sub.next];
        if bytes <= n {
            let mut sum = 0;
            for (k, &(i, b, r)) in sub.reqs.iter().enumerate().skip(sub.next) {
                let plain = !sub.taken[k] && self.dio_range(i).is_none();
                if r != read || b == 0 || !plain || self.requests[i].rq.rwbs.contains('A') {
                    return false;
                }
                sum += b;
                if sum >= n {
                    break;
                }
            }
            return sum == n;
        }
        let (mut sum, mut end) = (n, (cb.offset as u64).saturating_add(n));
        for c in rest {
            let len = c
                .length()
                .filter(|_| c.reads() == cb.reads() && c.fd == cb.fd);
            match len {
                Some(len) if c.offset as u64 == end && sum < bytes => {
                    sum = sum.saturating_add(len);
                    end = end.saturating_add(len);
                }
                _ => break,
            }
        }
        sum == bytes
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
        self.aio.marked.insert(ctx);
        let (call, at, path) = match self.aio.last.remove(&tid) {
            Some(last) => last,
            // Its system call's return was not seen (lost, or not traced): the marker's
            // time and functions.
            None => (Rc::from("io_getevents"), time, Rc::new(now())),
        };
        for e in events {
            let by = (tid, call.clone(), at, path.clone());
            if self.aio.by_iocb.contains_key(&(ctx, e.obj)) {
                self.reap_iocb(ctx, e.obj, by);
            } else {
                if self.aio.early.len() >= EARLY_MAX {
                    self.aio.prune_early();
                }
                self.aio.early.insert((ctx, e.obj), by);
            }
        }
    }

    /// The requests iocb `ptr` of `ctx` made first are reaped by `by`.
    fn reap_iocb(&mut self, ctx: u64, ptr: u64, (tid, call, time, path): ReapBy) {
        let Some(reqs) = self.aio.by_iocb.remove(&(ctx, ptr)) else {
            return;
        };
        for i in reqs {
            if self.requests[i]
                .iocbs
                .first()
                .is_none_or(|cb| cb.ptr != ptr)
            {
                continue;
            }
            // Over the completion-order rule's guess: the request, and the one it was merged
            // into when `ptr` is that one's first iocb too.
            for k in std::iter::once(i).chain(self.aio.merged.get(&i).copied()) {
                let r = &mut self.requests[k];
                if r.iocbs.first().is_some_and(|cb| cb.ptr == ptr) {
                    r.points.retain(|p| p.layer != Layer::Reap);
                    r.reaper = None;
                    self.reap(k, tid, time, &call, path.clone());
                }
            }
        }
    }
}
