//! The request model's rules for writeback (see [`writeback`](super::super::writeback)):
//! a flusher's request linked to the calls that dirtied its pages and to the call that
//! waited for it, and bios merged into a request started at another sector.

use super::super::writeback::WAITERS;
use super::*;

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
    /// writeback now ([`WAITERS`]), its task's first, at its return.
    pub(super) fn wait_for_writeback(&mut self, i: usize) {
        let waits = |o: &&mut Open| WAITERS.contains(&&*o.name);
        let tid = self.requests[i].tid;
        let mine = self.open.get_mut(&tid).filter(|o| waits(o)).is_some();
        let waiter = match mine {
            true => self.open.get_mut(&tid),
            false => self.open.values_mut().find(|o| waits(o)),
        };
        if let Some(o) = waiter {
            o.waiting.push(i);
        }
    }
}
