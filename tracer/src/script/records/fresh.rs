//! Whether the snapshot of the directory knows what a record needs. libmcount writes the
//! lines a record needs into `task.txt` (and a session's map and symbols before its `SESS`
//! line) before the record, so a snapshot taken when `task.txt` was as it is now knows all
//! it can: an address it does not know is named by its address, as replay names it, and a
//! snapshot that could not be opened is not tried again until `task.txt` grows (never in a
//! loop). A task that exec'd has a new `SESS` line: its records are not named by the old
//! program's session.
//!
//! New threads of known processes only add `TASK` lines: those are read alone, without a
//! new snapshot (a program of many short threads would take one per thread).

use super::{Names, Threads};
use record_format::task::{parse_task_txt, TaskLine};
use record_format::TraceDir;
use std::os::unix::fs::FileExt;

/// Most new `task.txt` bytes read alone; more take a new snapshot.
const JOIN_MAX: u64 = 64 << 10;

impl Threads {
    /// The size of `task.txt` now.
    fn task_len(&self) -> u64 {
        std::fs::metadata(self.dir.join("task.txt")).map_or(0, |m| m.len())
    }

    /// A snapshot is about to be taken (it may fail to open).
    pub fn snapshot_taken(&mut self) {
        self.snapshot = Some(self.task_len());
        self.fresh_upto = self.arrivals;
        self.joined.clear();
    }

    /// Whether a record of `tid` of arrival `arrived` may need a fresher snapshot than
    /// `names`: one taken for threads `tid` was not among, or before `task.txt` grew. One
    /// `stat` per arrival at most.
    pub(super) fn stale(&mut self, names: &Option<Names<'_>>, tid: u32, arrived: u64) -> bool {
        if let Some(n) = names {
            if !n.tids.contains(&tid) && !self.joined.contains_key(&tid) {
                return true;
            }
        }
        let Some(len) = self.snapshot else {
            return true;
        };
        if arrived <= self.fresh_upto {
            return false;
        }
        let now = self.task_len();
        if now > len && !self.only_new_threads(names, len, now) {
            return true;
        }
        self.fresh_upto = self.arrivals;
        false
    }

    /// Whether `task.txt` from `from` to `to` adds only threads of processes the snapshot
    /// knows (then taken into `joined`). A line being written is left for later.
    fn only_new_threads(&mut self, names: &Option<Names<'_>>, from: u64, to: u64) -> bool {
        let Some(n) = names else {
            return false;
        };
        if to - from > JOIN_MAX {
            return false;
        }
        let path = self.dir.join("task.txt");
        let mut buf = vec![0; (to - from) as usize];
        let read = std::fs::File::open(&path).and_then(|f| f.read_exact_at(&mut buf, from));
        if read.is_err() {
            return false;
        }
        let Some(end) = buf.iter().rposition(|&b| b == b'\n') else {
            return true;
        };
        let Ok(lines) = parse_task_txt(&String::from_utf8_lossy(&buf[..=end]), &path) else {
            return false;
        };
        let mut joined = Vec::new();
        for line in lines {
            match line {
                TaskLine::Task { time, tid, pid } if n.sym.session_at(pid, time).is_some() => {
                    joined.push((tid, pid));
                }
                _ => return false,
            }
        }
        self.joined.extend(joined);
        self.snapshot = Some(from + end as u64 + 1);
        true
    }
}

/// A snapshot that knows the sessions of every task of `task.txt`, also of those not met
/// yet (a thread whose records did not come yet may be the process of threads started later).
pub fn with_all_tasks(mut dir: TraceDir) -> TraceDir {
    let tasks = dir.tasks.iter().filter_map(|t| match t {
        TaskLine::Task { tid, .. } => Some(*tid),
        TaskLine::Fork { pid, .. } => Some(*pid),
        _ => None,
    });
    let mut tids: Vec<u32> = dir.info.tids.iter().copied().chain(tasks).collect();
    tids.sort_unstable();
    tids.dedup();
    dir.info.tids = tids;
    dir
}
