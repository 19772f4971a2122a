//! Per-task call stack of `dump`: the durations uftrace's reader keeps for every record
//! (total and child time of each open call) and its filter counters (`-F -N -H -D`,
//! `--no-libcall`), which decide whether a record is shown.
//!
//! Unlike [`crate::fstack`] this tracks no display depth and merges no leaves: the dump
//! formats show records, not lines of a tree.

use crate::filter::FuncFilter;
use record_format::{RawRecord, RecordKind};

/// Functions that change the stack under the tracer's feet (uftrace's fix-up list).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fixup {
    /// The program is replaced: the stack starts over after the entry.
    Exec,
    /// Marks the level a later longjmp returns to.
    Setjmp,
    /// Returns to the last setjmp's level.
    Longjmp,
}

pub fn fixup(name: &str) -> Option<Fixup> {
    Some(match name {
        "execl" | "execlp" | "execle" | "execv" | "execve" | "execvp" | "execvpe" => Fixup::Exec,
        "setjmp" | "_setjmp" | "sigsetjmp" | "__sigsetjmp" => Fixup::Setjmp,
        "longjmp" | "siglongjmp" | "__longjmp_chk" => Fixup::Longjmp,
        _ => return None,
    })
}

const FILTERED: u8 = 1;
const NOTRACE: u8 = 2;
const NORECORD: u8 = 4;

#[derive(Debug, Clone, Copy, Default)]
struct Frame {
    /// Recorded address of the entry; 0 for a call entered before the data starts.
    addr: u64,
    /// Start time while open.
    start: u64,
    /// Sum of the durations of the calls made from this one.
    child: u64,
    valid: bool,
    flags: u8,
    /// Filter depth to restore at the exit.
    orig_depth: i64,
}

/// A call closed by an exit record (or at the end of the data).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Closed {
    pub addr: u64,
    pub total: u64,
    pub child: u64,
}

/// One task's stack and filter state.
#[derive(Debug)]
pub struct TaskStack {
    frames: Vec<Frame>,
    count: usize,
    started: bool,
    after_lost: bool,
    in_count: i64,
    out_count: i64,
    depth: i64,
    default_depth: i64,
    /// Stack level of the last setjmp.
    setjmp_count: usize,
    /// Time of the last record read for this task (shown or not).
    pub last_time: u64,
}

impl TaskStack {
    /// `depth_limit`: `-D` (none = unlimited).
    pub fn new(depth_limit: Option<u32>) -> TaskStack {
        let default_depth = depth_limit.map_or(i64::from(u16::MAX), i64::from);
        TaskStack {
            frames: Vec::new(),
            count: 0,
            started: false,
            after_lost: false,
            in_count: 0,
            out_count: 0,
            depth: default_depth,
            default_depth,
            setjmp_count: 0,
            last_time: 0,
        }
    }

    fn frame(&mut self, i: usize) -> &mut Frame {
        if self.frames.len() <= i {
            let fresh = Frame {
                orig_depth: self.default_depth,
                ..Frame::default()
            };
            self.frames.resize(i + 1, fresh);
        }
        &mut self.frames[i]
    }

    /// Number of open calls.
    pub fn open_calls(&self) -> usize {
        self.count
    }

    /// Adds time spent switched out to the running call's callee time.
    pub fn add_child_time(&mut self, t: u64) {
        if self.count > 0 {
            let i = self.count - 1;
            let f = self.frame(i);
            f.child = f.child.wrapping_add(t);
        }
    }

    /// Whether an event at this point is shown: inside a call, and not where the filters hide
    /// calls (below `-D`, inside `-N`, outside `-F`).
    pub fn event_visible(&self, has_filter: bool) -> bool {
        self.count > 0
            && self.out_count == 0
            && self.depth > 0
            && (!has_filter || self.in_count > 0)
    }

    /// Time bookkeeping of one record, before any filter. Returns the closed call for an exit.
    pub fn consume(&mut self, r: &RawRecord) -> Option<Closed> {
        match r.kind {
            RecordKind::Event => return None,
            RecordKind::Lost => {
                self.after_lost = true;
                return None;
            }
            _ => {}
        }
        let is_exit = usize::from(r.kind == RecordKind::Exit);
        if !self.started {
            // A fork child starts inside calls it never entered (fork itself, main).
            self.started = true;
            self.count = r.depth as usize + is_exit;
            for i in 0..self.count {
                let f = self.frame(i);
                f.start = r.time;
                f.valid = true;
            }
        }
        if self.after_lost {
            self.after_lost = false;
            self.count = r.depth as usize + is_exit;
            for i in 0..=r.depth as usize {
                self.frame(i).start = r.time.saturating_sub(1);
            }
        }
        if r.kind == RecordKind::Entry {
            let i = self.count;
            let f = self.frame(i);
            f.addr = r.addr;
            f.start = r.time;
            f.child = 0;
            f.valid = true;
            self.count += 1;
            return None;
        }
        self.count = self.count.saturating_sub(1);
        let i = self.count;
        let f = self.frame(i);
        let total = if f.valid {
            r.time.saturating_sub(f.start)
        } else {
            0
        };
        f.valid = false;
        let closed = Closed {
            addr: f.addr,
            total,
            child: f.child,
        };
        if i > 0 {
            let p = &mut self.frames[i - 1];
            p.child = p.child.wrapping_add(total);
        }
        Some(closed)
    }

    /// Filter decision for the entry just consumed (`ff.hide` includes `--no-libcall` on a
    /// library call). `false`: the entry is not shown.
    pub fn enter(&mut self, ff: &FuncFilter, has_filter: bool) -> bool {
        let i = self.count.saturating_sub(1);
        let orig = self.depth;
        let default_depth = self.default_depth;
        let (in_count, out_count) = (self.in_count, self.out_count);
        let f = self.frame(i);
        f.orig_depth = orig;
        f.flags = 0;
        if out_count > 0 {
            f.flags = NORECORD;
            return false;
        }
        if ff.notrace {
            f.flags = NOTRACE | NORECORD;
            self.out_count += 1;
            return false;
        }
        if ff.filter {
            f.flags = FILTERED;
            self.in_count += 1;
            self.depth = default_depth;
        } else if has_filter && in_count == 0 {
            f.flags = NORECORD;
            return false;
        }
        if ff.hide {
            self.frames[i].flags |= NORECORD;
            return false;
        }
        if let Some(d) = ff.actions.depth {
            self.depth = i64::from(d);
        }
        if self.depth <= 0 {
            self.frames[i].flags |= NORECORD;
            return false;
        }
        self.depth -= 1;
        true
    }

    /// Filter decision for the exit just consumed (restores the counters of its entry).
    pub fn exit(&mut self) -> bool {
        let i = self.count;
        let f = *self.frame(i);
        if f.flags & FILTERED != 0 {
            self.in_count -= 1;
        } else if f.flags & NOTRACE != 0 {
            self.out_count -= 1;
        }
        self.frames[i].flags = 0;
        self.depth = f.orig_depth;
        f.flags & NORECORD == 0
    }

    /// After the entry of a function of the fix-up list. Exec: the new program starts with an
    /// empty stack (the calls open before are never closed). Longjmp: the stack goes back to
    /// the level of the last setjmp.
    pub fn fixup(&mut self, f: Fixup) {
        match f {
            Fixup::Exec => {
                self.count = 0;
                self.in_count = 0;
                self.out_count = 0;
                self.depth = self.default_depth;
            }
            Fixup::Setjmp => self.setjmp_count = self.count,
            Fixup::Longjmp => {
                if self.setjmp_count > 0 {
                    self.count = self.setjmp_count;
                }
            }
        }
    }

    /// Closes the innermost open call at `last` (end of data). `None` when nothing is open;
    /// `Some(None)` for a call that is closed without being shown (never entered in the data,
    /// or started after `last`).
    pub fn close_open(&mut self, last: u64) -> Option<Option<Closed>> {
        if self.count == 0 {
            return None;
        }
        self.count -= 1;
        let i = self.count;
        let f = *self.frame(i);
        if f.addr == 0 || f.start > last {
            return Some(None);
        }
        let mut total = last - f.start;
        if f.child > total {
            total = f.child;
        }
        self.frames[i].valid = false;
        if i > 0 {
            let p = &mut self.frames[i - 1];
            p.child = p.child.wrapping_add(total);
        }
        Some(Some(Closed {
            addr: f.addr,
            total,
            child: f.child,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(kind: RecordKind, time: u64, depth: u16, addr: u64) -> RawRecord {
        RawRecord {
            time,
            kind,
            more: false,
            depth,
            addr,
        }
    }

    #[test]
    fn child_time_adds_up() {
        let mut s = TaskStack::new(None);
        assert_eq!(s.consume(&rec(RecordKind::Entry, 10, 0, 1)), None);
        s.consume(&rec(RecordKind::Entry, 12, 1, 2));
        let c = s.consume(&rec(RecordKind::Exit, 15, 1, 2)).unwrap();
        assert_eq!((c.total, c.child), (3, 0));
        let m = s.consume(&rec(RecordKind::Exit, 20, 0, 1)).unwrap();
        assert_eq!((m.addr, m.total, m.child), (1, 10, 3));
        assert_eq!(s.open_calls(), 0);
    }

    #[test]
    fn fork_child_starts_inside_calls() {
        let mut s = TaskStack::new(None);
        let c = s.consume(&rec(RecordKind::Exit, 50, 1, 7)).unwrap();
        assert_eq!(c.total, 0);
        assert!(s.exit());
        assert_eq!(s.open_calls(), 1);
        // main was never entered in this data: closed without being shown.
        assert_eq!(s.close_open(60), Some(None));
        assert_eq!(s.close_open(60), None);
    }

    #[test]
    fn depth_limit_hides_deeper_calls() {
        let mut s = TaskStack::new(Some(1));
        let ff = FuncFilter::default();
        s.consume(&rec(RecordKind::Entry, 1, 0, 1));
        assert!(s.enter(&ff, false));
        s.consume(&rec(RecordKind::Entry, 2, 1, 2));
        assert!(!s.enter(&ff, false));
        s.consume(&rec(RecordKind::Exit, 3, 1, 2));
        assert!(!s.exit());
        s.consume(&rec(RecordKind::Exit, 4, 0, 1));
        assert!(s.exit());
    }
}
