//! Writeback on behalf of the traced tasks (the request model's rules for it, and the
//! state they need): a flusher thread (kworker) writing out the pages
//! a traced task dirtied. The recorder keeps such a writeback (from
//! `writeback_single_inode_start` to `writeback_single_inode` of an inode a traced task
//! dirtied, with the `ext4_writepages` and the bios of the worker meanwhile) as the events
//! of the traced task that dirtied the inode last (`record/kernel/behalf.rs`). Here
//! - a buffered write (`ext4_da_write_begin`, `ext4_write_begin`) notes the system call and
//!   user functions under which it dirtied the inode, and the range;
//! - a request started during a writeback window of the task is a writeback request: its
//!   submission is the oldest call that dirtied the inode since it was last written out (its
//!   entry the request's first point, its user functions the request's), its `fs` point the
//!   window's beginning, its `fs` the inode and the range the calls dirtied;
//! - it is reaped by the call that waited for it: a system call of the traced tasks that waits
//!   for writeback ([`WAITERS`]) open when the device completed it, at its return (the
//!   task's own first, else another task's: `sync` and `syncfs` wait for every dirty page);
//! - the end of the window, or a writing out of the inode's pages by the task itself (an
//!   fsync, `ext4_writepages` in its own context), forgets the calls that dirtied it.

use std::collections::HashMap;
use std::rc::Rc;

use super::*;

/// The system calls that wait for the writeback of dirty pages.
pub const WAITERS: &[&str] = &[
    "sync",
    "syncfs",
    "fsync",
    "fdatasync",
    "sync_file_range",
    "msync",
];

/// At most this many calls are kept per inode: the later ones extend the last one's range.
const MAX_DIRTIERS: usize = 64;

/// A system call that dirtied an inode's pages.
#[derive(Debug, Clone)]
pub struct Dirtier {
    pub tid: u32,
    pub call: Rc<str>,
    /// When the call began.
    pub start: u64,
    pub path: Rc<UserPath>,
    /// The bytes it dirtied: [lo, hi).
    pub lo: u64,
    pub hi: u64,
}

/// A writeback window of a traced task: an untraced task writing back an inode for it.
#[derive(Debug, Clone, Copy)]
pub struct Window {
    pub ino: u64,
    pub begin: u64,
    /// The filesystem's writing out of the pages in it (`ext4_writepages`), once seen.
    pub op: Option<FsOp>,
}

/// The inodes the traced tasks dirtied and the writeback windows under way.
#[derive(Debug, Default)]
pub struct Flusher {
    /// Inode → the calls that dirtied it since it was last written out, oldest first.
    dirtied: HashMap<u64, Vec<Dirtier>>,
    /// Traced task → its writeback window under way.
    windows: HashMap<u32, Window>,
    /// Traced task → the journal commit under way for it: (device, transaction, beginning).
    commits: HashMap<u32, (u32, u64, u64)>,
}

impl Flusher {
    /// The call of task `tid` begun at `start` dirtied `len` bytes at `pos` of inode `ino`;
    /// `call` gives its name and user functions (asked only for a call not noted yet).
    pub fn dirty(
        &mut self,
        ino: u64,
        (pos, len): (u64, u64),
        (tid, start): (u32, u64),
        call: impl FnOnce() -> (Rc<str>, Rc<UserPath>),
    ) {
        let hi = pos.saturating_add(len);
        let list = self.dirtied.entry(ino).or_default();
        let full = list.len() >= MAX_DIRTIERS;
        match list.last_mut() {
            Some(last) if full || (last.tid == tid && last.start == start) => {
                last.lo = last.lo.min(pos);
                last.hi = last.hi.max(hi);
            }
            _ => {
                let (call, path) = call();
                list.push(Dirtier {
                    tid,
                    call,
                    start,
                    path,
                    lo: pos,
                    hi,
                });
            }
        }
    }

    /// A writeback window of task `tid` begins (`begin`) or ends, for inode `ino`.
    pub fn window(&mut self, tid: u32, time: u64, begin: bool, ino: u64) {
        if begin {
            let w = Window {
                ino,
                begin: time,
                op: None,
            };
            self.windows.insert(tid, w);
        } else if self.windows.get(&tid).is_some_and(|w| w.ino == ino) {
            self.windows.remove(&tid);
            self.dirtied.remove(&ino);
        }
    }

    /// Takes a filesystem operation begun by task `tid` when it is the writing out of the
    /// pages of its writeback window; otherwise, an operation of the task itself that writes
    /// an inode's pages out forgets the calls that dirtied them, and false is returned.
    pub fn fs_begin(&mut self, tid: u32, op: &FsOp) -> bool {
        if let Some(w) = self.windows.get_mut(&tid).filter(|w| w.ino == op.ino) {
            if op.kind == FsKind::Writepages {
                w.op = Some(FsOp {
                    kind: FsKind::Writeback,
                    ..*op
                });
                return true;
            }
        }
        if matches!(op.kind, FsKind::Writepages | FsKind::Fsync) {
            self.dirtied.remove(&op.ino);
        }
        false
    }

    /// The journal thread begins (`begin`) or ends committing `transaction` of `dev` for task
    /// `tid` (the first of its beginnings counts).
    pub fn commit(&mut self, tid: u32, time: u64, begin: bool, (dev, transaction): (u32, u64)) {
        match begin {
            true => {
                let c = self.commits.entry(tid).or_insert((dev, transaction, time));
                if (c.0, c.1) != (dev, transaction) {
                    *c = (dev, transaction, time);
                }
            }
            false => {
                if self.commits.get(&tid).is_some_and(|c| c.1 == transaction) {
                    self.commits.remove(&tid);
                }
            }
        }
    }

    /// The journal commit under way for task `tid`: (device, transaction, beginning).
    pub fn commit_of(&self, tid: u32) -> Option<(u32, u64, u64)> {
        self.commits.get(&tid).copied()
    }

    /// The writeback window of task `tid` under way, if any.
    pub fn window_of(&self, tid: u32) -> Option<Window> {
        self.windows.get(&tid).copied()
    }

    /// The calls that dirtied inode `ino` since it was last written out, oldest first.
    pub fn dirtiers(&self, ino: u64) -> &[Dirtier] {
        self.dirtied.get(&ino).map_or(&[], Vec::as_slice)
    }
}

/// The rules: a flusher's request linked to the calls that dirtied its pages and to the call
/// that waited for it, the journal thread's to the fsync that waited for its commit, and
/// bios merged into a request started at another sector.
impl Linker {
    /// The request in flight that an insertion or issue at another sector (`rq`) is: the
    /// first not yet inserted nor issued inside its range (a bio merged into a request
    /// started by another), moved to its sector.
    pub(super) fn merged_into(&mut self, stage: Stage, rq: &BlockRq) -> Option<usize> {
        if !matches!(stage, Stage::Insert | Stage::Issue) {
            return None;
        }
        let end = rq.sector.saturating_add(u64::from(rq.nr_sector.max(1)));
        let reqs = &self.requests;
        let (k, i) = self
            .flight
            .range((rq.dev, rq.sector)..(rq.dev, end))
            .find(|(_, &j)| {
                reqs[j].at(Layer::Insert).is_none() && reqs[j].at(Layer::Issue).is_none()
            })
            .map(|(k, &j)| (*k, j))?;
        self.flight.remove(&k);
        self.flight.insert((rq.dev, rq.sector), i);
        Some(i)
    }

    /// Makes `r`, started at `point`, a writeback request when its task has a writeback
    /// window under way: submitted by the oldest call that dirtied the inode (when known),
    /// its `fs` point the window's beginning.
    pub(super) fn writeback(&mut self, r: &mut Request, point: &Point) -> bool {
        let Some(w) = self.wb.window_of(r.tid) else {
            return false;
        };
        r.via = Via::Writeback;
        let dirtiers = self.wb.dirtiers(w.ino);
        let mut op = w.op.unwrap_or(FsOp {
            kind: FsKind::Writeback,
            dev: r.rq.dev,
            ino: w.ino,
            range: None,
        });
        if let Some(d) = dirtiers.first() {
            let lo = dirtiers.iter().map(|d| d.lo).min().unwrap_or(d.lo);
            let hi = dirtiers.iter().map(|d| d.hi).max().unwrap_or(d.hi);
            op.range = Some((lo, hi - lo));
            r.tid = d.tid;
            r.syscall = Some(d.call.to_string());
            r.path = d.path.clone();
            r.points.push(Point {
                tid: d.tid,
                time: d.start,
                layer: Layer::Syscall,
            });
        }
        r.fs = Some(op);
        r.points.push(Point {
            tid: point.tid,
            time: w.begin,
            layer: Layer::Fs,
        });
        r.points.push(*point);
        true
    }

    /// A writeback request `i` whose first bio's writing call is not known takes the
    /// submission of a bio merged into it whose call is (the flusher merges the bios of
    /// consecutive inodes).
    pub(super) fn adopt(&mut self, i: usize) {
        let r = &self.requests[i];
        if r.via != Via::Writeback || r.syscall.is_some() {
            return;
        }
        let end = r.rq.sector.saturating_add(u64::from(r.rq.nr_sector.max(1)));
        let reqs = &self.requests;
        let Some(&j) = self
            .flight
            .range((r.rq.dev, r.rq.sector)..(r.rq.dev, end))
            .map(|(_, j)| j)
            .find(|&&j| j != i && reqs[j].via == Via::Writeback && reqs[j].syscall.is_some())
        else {
            return;
        };
        let (from, call) = (self.requests[j].clone(), self.requests[j].points[0]);
        let r = &mut self.requests[i];
        (r.tid, r.syscall, r.path, r.fs) = (from.tid, from.syscall, from.path, from.fs);
        r.points.insert(0, call);
    }

    /// Makes `r`, started at `point`, a journal request when the journal thread is committing
    /// a transaction for its task: submitted by the task's system call open (its fsync, which
    /// waits for the commit and reaps the request at its return), its `fs` point the commit's
    /// beginning.
    pub(super) fn journal(&mut self, r: &mut Request, point: &Point, now: PathNow<'_>) -> bool {
        let Some((dev, transaction, begin)) = self.wb.commit_of(r.tid) else {
            return false;
        };
        r.via = Via::Journal;
        if let Some(o) = self.open.get_mut(&r.tid).filter(|o| o.start <= begin) {
            r.points.push(Point {
                tid: r.tid,
                time: o.start,
                layer: Layer::Syscall,
            });
            r.syscall = Some(o.name.to_string());
            r.path = o.path(now);
            o.waiting.push(self.requests.len());
        }
        r.fs = Some(FsOp {
            kind: FsKind::Journal,
            dev,
            ino: transaction,
            range: None,
        });
        r.points.push(Point {
            tid: point.tid,
            time: begin,
            layer: Layer::Fs,
        });
        r.points.push(*point);
        true
    }

    /// A writeback request `i` completed: reaped by the call of the tasks waiting for
    /// writeback now ([`WAITERS`]), its task's first, else the one that began first (then
    /// the lowest task id), at its return.
    pub(super) fn wait_for_writeback(&mut self, i: usize) {
        let waits = |o: &Open| WAITERS.contains(&&*o.name);
        let tid = self.requests[i].tid;
        let waiter = match self.open.get(&tid).is_some_and(waits) {
            true => Some(tid),
            false => self
                .open
                .iter()
                .filter(|(_, o)| waits(o))
                .min_by_key(|(&t, o)| (o.start, t))
                .map(|(&t, _)| t),
        };
        if let Some(o) = waiter.and_then(|t| self.open.get_mut(&t)) {
            o.waiting.push(i);
        }
    }
}
