//! Block requests that untraced tasks start on behalf of traced ones: a flusher thread
//! (kworker) writing back the pages a traced task dirtied. The block instance also records,
//! for every task, the generic writeback of one inode (`writeback_single_inode_start` to
//! `writeback_single_inode`) and ext4's writing out of its pages (`ext4_writepages`); the
//! traced tasks' buffered writes (`ext4_da_write_begin`, `ext4_write_begin`, in their own
//! buffer) say which inodes they dirtied. The writeback of such an inode by another task is
//! kept as the events of the traced task that dirtied it last, and so are the bios that task
//! queues during it ([`Block::owner`](super::block::Block::owner)); other tasks' writeback
//! is left out. Likewise the journal thread's (jbd2) commit of a device's transaction
//! (`jbd2_start_commit` or `jbd2_commit_logging` to `jbd2_end_commit`) that begins while a
//! traced task is in ext4's fsync on that device (`ext4_sync_file_enter` to `_exit`, in its
//! own buffer) is kept as that task's, with the bios of the commit.

use record_format::kernel::EventFormat;
use std::collections::{BTreeMap, HashMap};

use super::convert::Int;

/// Recorded in the traced tasks' buffer: a buffered write dirties a file's pages (device,
/// inode, offset and length).
pub(super) const DIRTY_EVENTS: &[&str] = &["ext4:ext4_da_write_begin", "ext4:ext4_write_begin"];

/// Recorded in the block instance for every task: the writeback of one inode (generic, in
/// the flusher threads and in `sync_inode`) and ext4 writing a file's pages out in it.
pub(super) const WRITEBACK_START: &str = "writeback:writeback_single_inode_start";
pub(super) const WRITEBACK_END: &str = "writeback:writeback_single_inode";
pub(super) const WRITEPAGES: &str = "ext4:ext4_writepages";
pub(super) const COMMIT_START: &str = "jbd2:jbd2_start_commit";
pub(super) const COMMIT_LOGGING: &str = "jbd2:jbd2_commit_logging";
pub(super) const COMMIT_END: &str = "jbd2:jbd2_end_commit";
pub(super) const BEHALF_EVENTS: &[&str] = &[
    WRITEBACK_START,
    WRITEBACK_END,
    WRITEPAGES,
    COMMIT_START,
    COMMIT_LOGGING,
    COMMIT_END,
];

/// Most inodes remembered as dirtied by a traced task: past it, the oldest quarter is
/// forgotten (an inode never written back while recording stays otherwise).
const MAX_DIRTIED: usize = 1 << 16;

/// An event's type and the fields read from its records: device, inode, journal
/// transaction.
#[derive(Clone, Copy)]
struct Ev {
    id: u16,
    dev: Option<Int>,
    ino: Option<Int>,
    transaction: Option<Int>,
}

impl Ev {
    /// (device, inode, transaction) of record `p` when it is of this event (0 for a field
    /// the event lacks).
    fn read(ev: Option<Ev>, ty: u16, p: &[u8]) -> Option<(u64, u64, u64)> {
        let e = ev.filter(|e| e.id == ty)?;
        let v = |f| Int::read(f, p).unwrap_or(0);
        Some((v(e.dev), v(e.ino), v(e.transaction)))
    }
}

/// The events that tell which requests untraced tasks start for traced ones, with the fields
/// read from their records.
pub(super) struct Behalf {
    /// The dirtying events (traced tasks' buffer).
    dirty: Vec<Ev>,
    /// `writeback_single_inode_start`, `writeback_single_inode` (no device field) and
    /// `ext4_writepages`.
    start: Option<Ev>,
    end: Option<Ev>,
    writepages: Option<Ev>,
    /// ext4's fsync begins and ends (traced tasks' buffer).
    fsync: (Option<Ev>, Option<Ev>),
    /// The journal commit's beginning (`jbd2_start_commit`, `jbd2_commit_logging`) and end.
    commit: [Option<Ev>; 3],
}

/// Which traced task dirtied each inode, and the untraced tasks writing one back.
#[derive(Default)]
pub(super) struct Workers {
    /// (Inode, device) → the traced task that dirtied its pages last, and when (a count of
    /// the dirtying events: the oldest are forgotten past [`MAX_DIRTIED`]).
    dirtied: BTreeMap<(u64, u64), (u32, u64)>,
    dirty_count: u64,
    /// Untraced task → (the traced task it writes back for, the inode).
    windows: HashMap<u32, (u32, u64)>,
    /// Device → the traced task in ext4's fsync on it.
    syncing: HashMap<u64, u32>,
    /// Journal thread → (the traced task it commits for, the device, the transaction).
    commits: HashMap<u32, (u32, u64, u64)>,
}

impl Workers {
    /// The traced task an untraced task `pid` is writing pages back for now.
    pub(super) fn working_for(&self, pid: u32) -> Option<u32> {
        let commit = || self.commits.get(&pid).map(|&(owner, ..)| owner);
        self.windows
            .get(&pid)
            .map(|&(owner, _)| owner)
            .or_else(commit)
    }

    /// Traced task `pid` dirtied inode `ino` of device `dev`.
    fn dirty(&mut self, (dev, ino): (u64, u64), pid: u32) {
        self.dirty_count += 1;
        self.dirtied.insert((ino, dev), (pid, self.dirty_count));
        if self.dirtied.len() > MAX_DIRTIED {
            let mut ages: Vec<u64> = self.dirtied.values().map(|&(_, at)| at).collect();
            let (_, &mut cut, _) = ages.select_nth_unstable(MAX_DIRTIED / 4);
            self.dirtied.retain(|_, &mut (_, at)| at > cut);
        }
    }

    /// The traced task that last dirtied inode `ino` (of any device: the generic writeback
    /// events name none).
    fn dirtier(&self, ino: u64) -> Option<u32> {
        let on = self.dirtied.range((ino, 0)..=(ino, u64::MAX));
        on.max_by_key(|(_, &(_, at))| at).map(|(_, &(pid, _))| pid)
    }

    /// Inode `ino` written out (of device `dev`, or of any when `None`): dirtied again by a
    /// later write.
    fn written(&mut self, ino: u64, dev: Option<u64>) {
        match dev {
            Some(dev) => {
                self.dirtied.remove(&(ino, dev));
            }
            None => {
                let keys: Vec<_> = self
                    .dirtied
                    .range((ino, 0)..=(ino, u64::MAX))
                    .map(|(k, _)| *k)
                    .collect();
                for k in keys {
                    self.dirtied.remove(&k);
                }
            }
        }
    }
}

impl Behalf {
    /// The events among `formats` that are `kept`.
    pub(super) fn of(formats: &[EventFormat], kept: &[String]) -> Behalf {
        let find = |ev: &str| {
            super::block::kept_format(formats, kept, ev).map(|f| Ev {
                id: f.id,
                dev: Int::of(f, "dev"),
                ino: Int::of(f, "ino"),
                transaction: Int::of(f, "transaction"),
            })
        };
        Behalf {
            dirty: DIRTY_EVENTS.iter().filter_map(|e| find(e)).collect(),
            start: find(WRITEBACK_START),
            end: find(WRITEBACK_END),
            writepages: find(WRITEPAGES),
            fsync: (
                find("ext4:ext4_sync_file_enter"),
                find("ext4:ext4_sync_file_exit"),
            ),
            commit: [COMMIT_START, COMMIT_LOGGING, COMMIT_END].map(find),
        }
    }

    /// Notes a record `p` (of type `ty`) of traced task `pid` in its own buffer: the inode a
    /// buffered write dirties, the fsync that writes one out itself.
    pub(super) fn note(&self, ty: u16, pid: u32, p: &[u8], workers: &mut Workers) {
        let dirty = self.dirty.iter().find_map(|&e| Ev::read(Some(e), ty, p));
        if let Some((dev, ino, _)) = dirty {
            workers.dirty((dev, ino), pid);
        }
        if let Some((dev, ino, _)) = Ev::read(self.fsync.0, ty, p) {
            workers.syncing.insert(dev, pid);
            workers.written(ino, Some(dev));
        }
        if let Some((dev, ..)) = Ev::read(self.fsync.1, ty, p) {
            if workers.syncing.get(&dev) == Some(&pid) {
                workers.syncing.remove(&dev);
            }
        }
    }

    /// Whether a writeback record `p` (of type `ty`) of the block instance, of task `pid`,
    /// is kept, and as which traced task's: the writeback by an untraced task of an inode a
    /// traced task dirtied. `None` for other records (those of the traced tasks themselves
    /// are in their own buffer; their writing out of an inode forgets who dirtied it).
    pub(super) fn owner(
        &self,
        (ty, pid, p): (u16, u32, &[u8]),
        workers: &mut Workers,
        traced: impl Fn(u32) -> bool,
    ) -> Option<u32> {
        if traced(pid) {
            if let Some((dev, ino, _)) = Ev::read(self.writepages, ty, p) {
                workers.written(ino, Some(dev));
            } else if let Some((_, ino, _)) = Ev::read(self.start, ty, p) {
                workers.written(ino, None);
            }
            return None;
        }
        let begun = Ev::read(self.commit[0], ty, p).or(Ev::read(self.commit[1], ty, p));
        if let Some((dev, _, transaction)) = begun {
            // The same commit's second beginning keeps its owner; any other is decided anew.
            match workers.commits.remove(&pid) {
                Some(c) if (c.1, c.2) == (dev, transaction) => {
                    workers.commits.insert(pid, c);
                    return Some(c.0);
                }
                _ => {}
            }
            let owner = *workers.syncing.get(&dev)?;
            workers.commits.insert(pid, (owner, dev, transaction));
            return Some(owner);
        }
        if let Some((dev, ..)) = Ev::read(self.commit[2], ty, p) {
            let (owner, at, _) = *workers.commits.get(&pid)?;
            if at == dev {
                workers.commits.remove(&pid);
            }
            return Some(owner);
        }
        if let Some((_, ino, _)) = Ev::read(self.start, ty, p) {
            // A window whose end was lost ends at the worker's next beginning.
            workers.windows.remove(&pid);
            let owner = workers.dirtier(ino)?;
            workers.windows.insert(pid, (owner, ino));
            return Some(owner);
        }
        if let Some((_, ino, _)) = Ev::read(self.end, ty, p) {
            let (owner, at) = *workers.windows.get(&pid)?;
            if at != ino {
                return None;
            }
            workers.windows.remove(&pid);
            // Written out: dirtied again by a later write.
            workers.written(ino, None);
            return Some(owner);
        }
        if let Some((_, ino, _)) = Ev::read(self.writepages, ty, p) {
            let (owner, at) = *workers.windows.get(&pid)?;
            return (at == ino).then_some(owner);
        }
        None
    }

    /// Whether `ty` is one of the writeback events of the block instance.
    pub(super) fn is_writeback(&self, ty: u16) -> bool {
        [self.start, self.end, self.writepages]
            .iter()
            .chain(&self.commit)
            .flatten()
            .any(|e| e.id == ty)
    }
}

#[cfg(test)]
#[path = "behalf_tests.rs"]
mod tests;
