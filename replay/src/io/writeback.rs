//! Writeback on behalf of the traced tasks: a flusher thread (kworker) writing out the pages
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

use super::request::{FsKind, FsOp, UserPath};

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
