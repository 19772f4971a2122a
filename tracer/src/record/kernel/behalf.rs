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
use std::collections::HashMap;

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

/// A field's place in an event: its type and the field.
type Ev = Option<(u16, Option<Int>)>;

/// The events that tell which requests untraced tasks start for traced ones, with the fields
/// read from their records.
pub(super) struct Behalf {
    /// The dirtying events' ids (traced tasks' buffer) and their inode field.
    dirty: Vec<(u16, Option<Int>)>,
    /// `writeback_single_inode_start`, `writeback_single_inode`, `ext4_writepages` and their
    /// inode fields.
    start: Option<(u16, Option<Int>)>,
    end: Option<(u16, Option<Int>)>,
    writepages: Option<(u16, Option<Int>)>,
    /// ext4's fsync begins and ends (traced tasks' buffer), with their device field.
    fsync: (Ev, Ev),
    /// The journal commit's beginning (`jbd2_start_commit`, `jbd2_commit_logging`) and end,
    /// with their device field.
    commit: [Ev; 3],
}

/// Which traced task dirtied each inode, and the untraced tasks writing one back.
#[derive(Default)]
pub(super) struct Workers {
    /// Inode → the traced task that dirtied its pages last.
    dirtied: HashMap<u64, u32>,
    /// Untraced task → (the traced task it writes back for, the inode).
    windows: HashMap<u32, (u32, u64)>,
    /// Device → the traced task in ext4's fsync on it.
    syncing: HashMap<u64, u32>,
    /// Journal thread → (the traced task it commits for, the device).
    commits: HashMap<u32, (u32, u64)>,
}

impl Workers {
    /// The traced task an untraced task `pid` is writing pages back for now.
    pub(super) fn working_for(&self, pid: u32) -> Option<u32> {
        let commit = || self.commits.get(&pid).map(|&(owner, _)| owner);
        self.windows
            .get(&pid)
            .map(|&(owner, _)| owner)
            .or_else(commit)
    }
}

impl Behalf {
    /// The events among `formats` that are `kept`.
    pub(super) fn of(formats: &[EventFormat], kept: &[String]) -> Behalf {
        let field = |ev: &str, field: &str| {
            let (sys, name) = ev.split_once(':').unwrap_or(("", ev));
            formats
                .iter()
                .find(|f| f.system == sys && f.name == name)
                .filter(|_| kept.iter().any(|k| k == ev))
                .map(|f| (f.id, Int::of(f, field)))
        };
        let find = |ev: &str| field(ev, "ino");
        let dev = |ev: &str| field(ev, "dev");
        Behalf {
            dirty: DIRTY_EVENTS.iter().filter_map(|e| find(e)).collect(),
            start: find(WRITEBACK_START),
            end: find(WRITEBACK_END),
            writepages: find(WRITEPAGES),
            fsync: (
                dev("ext4:ext4_sync_file_enter"),
                dev("ext4:ext4_sync_file_exit"),
            ),
            commit: [COMMIT_START, COMMIT_LOGGING, COMMIT_END].map(dev),
        }
    }

    /// Notes a record `p` (of type `ty`) of traced task `pid` in its own buffer: the inode a
    /// buffered write dirties.
    pub(super) fn note(&self, ty: u16, pid: u32, p: &[u8], workers: &mut Workers) {
        if let Some(&(_, ino)) = self.dirty.iter().find(|(id, _)| *id == ty) {
            if let Some(ino) = Int::read(ino, p) {
                workers.dirtied.insert(ino, pid);
            }
        }
        if let Some(dev) = read(self.fsync.0, ty, p) {
            workers.syncing.insert(dev, pid);
        }
        if let Some(dev) = read(self.fsync.1, ty, p) {
            if workers.syncing.get(&dev) == Some(&pid) {
                workers.syncing.remove(&dev);
            }
        }
    }

    /// Whether a writeback record `p` (of type `ty`) of the block instance, of task `pid`,
    /// is kept, and as which traced task's: the writeback by an untraced task of an inode a
    /// traced task dirtied. `None` for other records (those of the traced tasks themselves
    /// are in their own buffer).
    pub(super) fn owner(
        &self,
        (ty, pid, p): (u16, u32, &[u8]),
        workers: &mut Workers,
        traced: impl Fn(u32) -> bool,
    ) -> Option<u32> {
        let ino = |ev: Option<(u16, Option<Int>)>| {
            ev.filter(|(id, _)| *id == ty)
                .and_then(|(_, f)| Int::read(f, p))
        };
        if traced(pid) {
            return None;
        }
        if let Some(dev) = read(self.commit[0], ty, p).or(read(self.commit[1], ty, p)) {
            if let Some(&(owner, _)) = workers.commits.get(&pid) {
                return Some(owner);
            }
            let owner = *workers.syncing.get(&dev)?;
            workers.commits.insert(pid, (owner, dev));
            return Some(owner);
        }
        if let Some(dev) = read(self.commit[2], ty, p) {
            let (owner, at) = *workers.commits.get(&pid)?;
            if at == dev {
                workers.commits.remove(&pid);
            }
            return Some(owner);
        }
        if let Some(ino) = ino(self.start) {
            let owner = *workers.dirtied.get(&ino)?;
            workers.windows.insert(pid, (owner, ino));
            return Some(owner);
        }
        if let Some(ino) = ino(self.end) {
            let (owner, at) = *workers.windows.get(&pid)?;
            if at != ino {
                return None;
            }
            workers.windows.remove(&pid);
            // Written out: dirtied again by a later write.
            workers.dirtied.remove(&ino);
            return Some(owner);
        }
        if let Some(ino) = ino(self.writepages) {
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
            .any(|(id, _)| *id == ty)
    }
}

/// Field `(ty, field)` of record `p` when it is of type `ty`.
fn read(ev: Ev, ty: u16, p: &[u8]) -> Option<u64> {
    ev.filter(|(id, _)| *id == ty)
        .and_then(|(_, f)| Int::read(f, p))
}
