//! The request model: I/O events of the traced tasks, in time order, linked into requests.
//!
//! A block request starts when a traced task queues, inserts or issues it (`block_bio_queue`,
//! `block_rq_insert`, `block_rq_issue` in its context; the recorder rewrites the task of the
//! later records of the same device and sector, see `record/kernel/convert.rs`). It is
//! linked to
//! - the system call of the task open at that moment (its entry is the request's first
//!   point) and the user functions open under it;
//! - for io_uring, the `io_uring_submit_req` of the same task in the same system call not yet
//!   linked (the submission's `req` and `user_data`), and through `req` to its
//!   `io_uring_complete`;
//! - the filesystem operation of the same task under way when it was queued (an iomap
//!   direct I/O, an ext4 fsync or writepages: its begin is the request's `fs` point, its
//!   file and range the request's `fs`); an operation ends at its end event for the same
//!   inode or when the task's system call returns, and a writepages inside an fsync is part
//!   of the fsync;
//! - a writeback request (one a flusher thread started for pages the task dirtied), to the
//!   call that dirtied them, the writeback, and the call that waited for it (see
//!   [`writeback`]);
//! - its device completion by device and sector (whatever CPU and context it ran in; an
//!   insertion or issue at another sector takes in the bios in flight inside its range: a
//!   bio merged into a request started by another);
//! - for libaio, with libmcount's markers, its iocb (see [`aio`]: the iocbs of the
//!   `io_submit` given to its requests in order, checked by length, direction and direct I/O
//!   range);
//! - the call that reaped it: for libaio, the `io_getevents` (or `io_pgetevents`) whose
//!   returned events name its iocb (the markers), or without markers the one that returned
//!   it by the rule that completions of one aio context are taken in completion order, as
//!   many per call as it returned (the kernel's completion ring is FIFO); for io_uring, the system call
//!   in which the CQE was posted (`io_uring_complete`), at its return (the CQE is read from
//!   shared memory without a system call: the return is the earliest the program can see it);
//!   for a synchronous call (`pwrite`, `fsync`...), the return of the call that issued it,
//!   when the request completed before it.
//!
//! Without markers (raw system calls, libaio not reached through its exported functions) a
//! libaio request's iocb is not known: iocbs live in user memory, which tracepoints do not
//! show (the iocb array's address and count are recorded).

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::rc::Rc;

use super::request::*;
use writeback::Flusher;

#[path = "writeback.rs"]
mod writeback;

#[path = "aio.rs"]
mod aio;
use aio::{AioState, Submitted};

/// A task's open system call.
#[derive(Debug)]
struct Open {
    name: Rc<str>,
    start: u64,
    /// The user functions open under it, once asked for ([`Open::path`]).
    path: Option<Rc<UserPath>>,
    /// aio: the context of its io_submit / io_getevents.
    aio_ctx: Option<(u64, u64)>,
    /// Requests it issued or whose CQE it posted, reaped at its return when complete.
    waiting: Vec<usize>,
    /// io_submit: the requests it started, with their size then and whether they read.
    aio_reqs: Vec<(usize, u64, bool)>,
    /// io_uring submissions made in it not yet linked to a request.
    sqes: VecDeque<Sqe>,
}

/// An io_uring submission not yet linked to a block request.
#[derive(Debug, Clone)]
struct Sqe {
    req: u64,
    user_data: u64,
    time: u64,
    tid: u32,
    /// The system call and user functions it was made in: (name, entry time, path).
    call: (Rc<str>, u64, Rc<UserPath>),
}

/// The user functions open in the task of the event being pushed, now.
pub type PathNow<'a> = &'a mut dyn FnMut() -> UserPath;

impl Open {
    /// The user functions open under the call: given at its entry, or asked of `now` the first
    /// time (a task's user functions do not change while it is in a system call).
    fn path(&mut self, now: PathNow<'_>) -> Rc<UserPath> {
        self.path.get_or_insert_with(|| Rc::new(now())).clone()
    }
}

/// Links the events, given in time order, into requests.
#[derive(Debug, Default)]
pub struct Linker {
    requests: Vec<Request>,
    open: HashMap<u32, Open>,
    /// Each task's last aio call that returned, and when: `sys_exit_io_getevents` comes
    /// after the return of the system call (the raw exit is seen first).
    returned: HashMap<u32, (Open, u64)>,
    /// In flight: (dev, sector) → request (ordered: a completion also ends the bios merged
    /// into its request, at sectors inside its range).
    flight: BTreeMap<(u32, u64), usize>,
    /// io_uring `req` → its requests.
    uring: HashMap<u64, Vec<usize>>,
    /// io_uring submissions handed to a worker thread (`io_uring_queue_async_work`), in
    /// order: a worker's block request, issued outside any system call, is the oldest's.
    punted: VecDeque<Sqe>,
    /// aio context → completed requests not reaped yet, in completion order.
    aio_done: HashMap<u64, VecDeque<usize>>,
    /// Each task's aio arguments seen outside a system call: in graph mode the `syscalls`
    /// events come before the function_graph tracer's entry of the system call's function,
    /// to which they then belong.
    early: HashMap<u32, (u64, u64)>,
    /// libaio requests by iocb, from libmcount's markers.
    aio: AioState,
    /// Each task's filesystem operation under way, and when it began.
    fs: HashMap<u32, (FsOp, u64)>,
    /// The pages the tasks dirtied and the writeback done for them.
    wb: Flusher,
}

impl Linker {
    pub fn new() -> Linker {
        Linker::default()
    }

    /// Takes the next event (events must come in time order); a system call entered without
    /// its path has none.
    pub fn push(&mut self, ev: Event) {
        self.push_with(ev, &mut UserPath::default);
    }

    /// [`Linker::push`], with `now` giving the user functions open in the event's task when a
    /// request needs those of the system call it is in, entered without them: building them
    /// for every system call would cost more than the rest of the walk.
    pub fn push_with(&mut self, ev: Event, now: PathNow<'_>) {
        let (time, tid) = (ev.time, ev.tid);
        match ev.what {
            What::SyscallEnter { name, path } => {
                let early = self.early.remove(&tid).filter(|_| name.starts_with("io_"));
                let mut o = Open {
                    name,
                    start: time,
                    path,
                    aio_ctx: early,
                    waiting: Vec::new(),
                    aio_reqs: Vec::new(),
                    sqes: VecDeque::new(),
                };
                if early.is_some() {
                    // An aio call: its events may be reaped after its return.
                    o.path(now);
                }
                self.open.insert(tid, o);
            }
            What::SyscallExit => {
                self.fs.remove(&tid);
                self.syscall_exit(time, tid, now);
            }
            What::Fs { edge, op } => self.fs_event(time, tid, edge, op),
            What::Block { stage, rq } => self.block(time, tid, stage, rq, now),
            What::UringSubmit { req, user_data } => {
                if let Some(o) = self.open.get_mut(&tid) {
                    let call = (o.name.clone(), o.start, o.path(now));
                    o.sqes.push_back(Sqe {
                        req,
                        user_data,
                        time,
                        tid,
                        call,
                    });
                }
            }
            What::UringAsync { req } => {
                let Some(o) = self.open.get_mut(&tid) else {
                    return;
                };
                if let Some(at) = o.sqes.iter().position(|s| s.req == req) {
                    self.punted.extend(o.sqes.remove(at));
                }
            }
            What::UringComplete { req, res, path } => {
                self.uring_complete(time, tid, (req, res), path, now)
            }
            What::AioSubmit { ctx, iocbs } => self.aio_call(tid, (ctx, iocbs), now),
            What::AioGetEvents { ctx } => self.aio_call(tid, (ctx, 0), now),
            What::AioGotEvents { ret } => self.aio_reaped(time, tid, ret, now),
            What::AioIocbs { ctx, first, iocbs } => self.aio_iocbs(tid, ctx, first, iocbs),
            What::AioReaped { ctx, events } => self.aio_events(time, tid, ctx, &events, now),
            What::Dirty { ino, pos, len } => {
                if let Some(o) = self.open.get_mut(&tid) {
                    let (name, start) = (o.name.clone(), o.start);
                    let call = || (name, o.path(now));
                    self.wb.dirty(ino, (pos, len), (tid, start), call);
                }
            }
            What::Writeback { edge, ino } => {
                self.wb.window(tid, time, edge == FsEdge::Begin, ino);
            }
            What::Journal {
                edge,
                dev,
                transaction,
            } => {
                let begin = edge == FsEdge::Begin;
                self.wb.commit(tid, time, begin, (dev, transaction));
            }
        }
    }

    /// The aio context and iocb array of the system call of `tid` (the one open, or its
    /// next one when none is open).
    fn aio_call(&mut self, tid: u32, aio: (u64, u64), now: PathNow<'_>) {
        match self.open.get_mut(&tid) {
            Some(o) => {
                o.aio_ctx = Some(aio);
                // Its events may be reaped after its return.
                o.path(now);
            }
            None => {
                self.early.insert(tid, aio);
            }
        }
    }

    fn fs_event(&mut self, time: u64, tid: u32, edge: FsEdge, op: FsOp) {
        if edge == FsEdge::Begin && self.wb.fs_begin(tid, &op) {
            return;
        }
        let current = self.fs.get(&tid).map(|(c, _)| *c);
        match edge {
            FsEdge::End => {
                if current.is_some_and(|c| c.ino == op.ino && c.dev == op.dev) {
                    self.fs.remove(&tid);
                }
            }
            // Pages written out for an fsync under way are that fsync's.
            FsEdge::Begin
                if op.kind == FsKind::Writepages
                    && current.is_some_and(|c| c.kind == FsKind::Fsync) => {}
            FsEdge::Begin => {
                self.fs.insert(tid, (op, time));
            }
        }
    }

    fn block(&mut self, time: u64, tid: u32, stage: Stage, rq: BlockRq, now: PathNow<'_>) {
        let key = (rq.dev, rq.sector);
        let layer = match stage {
            Stage::BioQueue => Layer::Bio,
            Stage::Insert => Layer::Insert,
            Stage::Issue => Layer::Issue,
            Stage::Complete => Layer::Complete,
        };
        let point = Point { tid, time, layer };
        let found = match self.flight.get(&key) {
            Some(&i) => Some(i),
            None => self.merged_into(stage, &rq),
        };
        if let Some(i) = found {
            let r = &mut self.requests[i];
            if stage == Stage::Complete {
                self.flight.remove(&key);
                r.rq.error = rq.error;
                r.points.push(point);
                self.completed(i);
                // Bios merged into this request (never a request of their own) end with it.
                let end = rq.sector.saturating_add(u64::from(rq.nr_sector.max(1)));
                let merged: Vec<(u32, u64)> = self
                    .flight
                    .range((rq.dev, rq.sector)..(rq.dev, end))
                    .filter(|(_, &j)| self.requests[j].at(Layer::Issue).is_none())
                    .map(|(k, _)| *k)
                    .collect();
                for k in merged {
                    if let Some(j) = self.flight.remove(&k) {
                        self.aio_merged(j, i);
                    }
                }
            } else if !r.points.iter().any(|p| p.layer == layer) {
                // A bio's request: the request's size and flags are the ones that count.
                if stage != Stage::BioQueue {
                    r.rq = BlockRq { error: 0, ..rq };
                }
                r.points.push(point);
                if stage != Stage::BioQueue {
                    self.adopt(i);
                }
            }
            return;
        }
        if stage == Stage::Complete {
            return;
        }
        let i = self.requests.len();
        let mut r = Request {
            tid,
            rq,
            via: Via::Sync,
            syscall: None,
            path: Rc::default(),
            user_data: None,
            cqe_res: None,
            aio: None,
            iocbs: Vec::new(),
            fs: None,
            reaper: None,
            points: Vec::new(),
        };
        if self.writeback(&mut r, &point) || self.journal(&mut r, &point, now) {
            self.flight.insert(key, i);
            self.requests.push(r);
            return;
        }
        let mut sqe = None;
        match self.open.get_mut(&tid).filter(|o| o.start <= time) {
            Some(o) => {
                r.points.push(Point {
                    tid,
                    time: o.start,
                    layer: Layer::Syscall,
                });
                r.syscall = Some(o.name.to_string());
                r.path = o.path(now);
                if &*o.name == "io_submit" {
                    r.via = Via::Aio;
                    r.aio = o.aio_ctx;
                    o.aio_reqs.push((i, r.rq.bytes, r.kind() == "read"));
                } else if let Some(s) = o.sqes.pop_front() {
                    sqe = Some(s);
                } else if &*o.name != "io_uring_enter" {
                    o.waiting.push(i);
                }
            }
            // Outside a system call: an io_uring worker running a punted submission.
            None => sqe = self.punted.pop_front(),
        }
        if let Some(s) = sqe {
            r.via = Via::Uring;
            r.user_data = Some(s.user_data);
            let (name, start, path) = s.call;
            if r.syscall.is_none() {
                r.points.push(Point {
                    tid: s.tid,
                    time: start,
                    layer: Layer::Syscall,
                });
                r.syscall = Some(name.to_string());
                r.path = path;
            }
            r.points.push(Point {
                tid: s.tid,
                time: s.time,
                layer: Layer::Sqe,
            });
            self.uring.entry(s.req).or_default().push(i);
        }
        if let Some(&(op, at)) = self.fs.get(&tid) {
            if r.points.last().is_none_or(|p| p.time <= at) {
                r.fs = Some(op);
                r.points.push(Point {
                    tid,
                    time: at,
                    layer: Layer::Fs,
                });
            }
        }
        r.points.push(point);
        self.flight.insert(key, i);
        self.requests.push(r);
    }

    /// Request `i` completed on the device.
    fn completed(&mut self, i: usize) {
        let r = &self.requests[i];
        if let (Via::Aio, Some((ctx, _))) = (r.via, r.aio) {
            if !self.aio.marked(ctx) {
                self.aio_done.entry(ctx).or_default().push_back(i);
            }
        }
        if r.via == Via::Writeback {
            self.wait_for_writeback(i);
        }
    }

    fn uring_complete(
        &mut self,
        time: u64,
        tid: u32,
        (req, res): (u64, i64),
        path: Rc<UserPath>,
        now: PathNow<'_>,
    ) {
        let Some(list) = self.uring.remove(&req) else {
            return;
        };
        let open = self.open.get_mut(&tid);
        for &i in &list {
            let r = &mut self.requests[i];
            r.cqe_res = Some(res);
            r.points.push(Point {
                tid,
                time,
                layer: Layer::Cqe,
            });
        }
        match open {
            Some(o) => {
                // Reaped at the call's return, under the user functions open in it.
                o.path(now);
                o.waiting.extend(list);
            }
            // Posted outside a system call (task work on the way back to user space): the
            // program can see it at once.
            None => {
                for i in list {
                    self.reap(i, tid, time, "task_work", path.clone());
                }
            }
        }
    }

    fn aio_reaped(&mut self, time: u64, tid: u32, ret: i64, now: PathNow<'_>) {
        let (o, time) = match self.open.get_mut(&tid) {
            Some(o) => (o, time),
            None => match self.returned.get_mut(&tid) {
                Some((o, at)) => (o, *at),
                None => return,
            },
        };
        let Some((ctx, _)) = o.aio_ctx else {
            return;
        };
        let (name, path) = (o.name.clone(), o.path(now));
        self.returned.remove(&tid);
        self.aio.reaped_by(tid, (name.clone(), time, path.clone()));
        if self.aio.marked(ctx) {
            // The markers name what it reaped: no guess (a wrong one would stay when the
            // request's own reap is not in the trace).
            self.aio_done.remove(&ctx);
            return;
        }
        let Some(done) = self.aio_done.get_mut(&ctx) else {
            return;
        };
        let n = usize::try_from(ret).unwrap_or(0).min(done.len());
        let taken: Vec<usize> = done.drain(..n).collect();
        for i in taken {
            self.reap(i, tid, time, &name, path.clone());
        }
    }

    fn syscall_exit(&mut self, time: u64, tid: u32, now: PathNow<'_>) {
        let Some(mut o) = self.open.remove(&tid) else {
            return;
        };
        for i in std::mem::take(&mut o.waiting) {
            if self.requests[i].at(Layer::Complete).is_some() {
                let path = o.path(now);
                self.reap(i, tid, time, &o.name, path);
            }
        }
        if &*o.name == "io_submit" {
            let reqs = std::mem::take(&mut o.aio_reqs);
            self.aio.submitted(tid, Submitted::new(o.start, reqs));
        }
        if o.aio_ctx.is_some() {
            self.returned.insert(tid, (o, time));
        } else {
            self.returned.remove(&tid);
        }
    }

    fn reap(&mut self, i: usize, tid: u32, time: u64, call: &str, path: Rc<UserPath>) {
        let r = &mut self.requests[i];
        if r.reaper.is_some() {
            return;
        }
        r.points.push(Point {
            tid,
            time,
            layer: Layer::Reap,
        });
        r.reaper = Some(Reaper {
            tid,
            time,
            call: call.to_string(),
            path,
        });
    }

    /// The requests, in the order they started: those that reached the I/O scheduler or the
    /// driver (a bio merged into another request is part of that one).
    pub fn finish(self) -> Vec<Request> {
        let started = |r: &Request| r.at(Layer::Insert).is_some() || r.at(Layer::Issue).is_some();
        self.requests.into_iter().filter(started).collect()
    }
}
