//! Reader-level filters: records that never reach the replay engine, as in uftrace's task
//! reader. Records outside the time range (`-r`) are skipped; with `-C`, functions that lead to
//! no target are dropped with their subtree; with `-t` (and `time=` triggers) entries wait in a
//! per-task buffer until an exit tells whether they were long enough.

use super::Head;
use std::collections::VecDeque;

/// Per-task state of the gate.
#[derive(Debug, Default, Clone)]
struct TaskGate {
    /// Depths of dropped `-C` entries whose exit has not been seen yet (innermost last).
    dropped: Vec<u16>,
    /// `time=` triggers in effect: (depth of the trigger function, threshold).
    times: Vec<(u16, u64)>,
    /// Records read but not yet handed out (`-t`).
    buffer: VecDeque<Head>,
}

/// The reader-level filter settings and state.
#[derive(Debug, Default)]
pub struct Gate {
    pub range: (u64, u64),
    /// `-t` in nanoseconds.
    pub time_filter: Option<u64>,
    /// Some `time=` trigger exists.
    pub time_triggers: bool,
    /// `-C` (or a caller trigger) is in use.
    pub caller: bool,
    tasks: Vec<TaskGate>,
}

impl Gate {
    pub fn new(time_filter: Option<u64>, time_triggers: bool, caller: bool) -> Gate {
        Gate {
            range: (0, u64::MAX),
            time_filter,
            time_triggers,
            caller,
            tasks: Vec::new(),
        }
    }

    pub fn init(&mut self, n: usize) {
        self.tasks = vec![TaskGate::default(); n];
    }

    pub fn in_range(&self, time: u64) -> bool {
        self.range.0 <= time && time <= self.range.1
    }

    /// Whether entries must wait for their exits (`-t`, `time=`).
    pub fn time_active(&self) -> bool {
        self.time_filter.is_some_and(|t| t > 0) || self.time_triggers
    }

    /// For a `-C` entry at `depth`: whether it lies inside a dropped function. Stale marks
    /// (left by longjmp or exec) are discarded.
    pub fn entry_inside_dropped(&mut self, ti: usize, depth: u16) -> bool {
        let t = &mut self.tasks[ti];
        while t.dropped.last().is_some_and(|&d| d >= depth) {
            t.dropped.pop();
        }
        !t.dropped.is_empty()
    }

    pub fn inside_dropped(&self, ti: usize) -> bool {
        !self.tasks[ti].dropped.is_empty()
    }

    pub fn drop_entry(&mut self, ti: usize, depth: u16) {
        self.tasks[ti].dropped.push(depth);
    }

    /// For a `-C` exit at `depth`: whether it passes.
    pub fn exit(&mut self, ti: usize, depth: u16) -> bool {
        let t = &mut self.tasks[ti];
        if let Some(&d) = t.dropped.last() {
            if d == depth {
                t.dropped.pop();
                return false;
            }
            if d < depth {
                return false;
            }
            while t.dropped.last().is_some_and(|&d| d > depth) {
                t.dropped.pop();
            }
        }
        true
    }

    /// The time threshold in effect for task `ti`: the innermost `time=` trigger, else `-t`.
    pub fn threshold(&self, ti: usize) -> Option<u64> {
        self.tasks[ti]
            .times
            .last()
            .map(|&(_, t)| t)
            .or(self.time_filter)
    }

    pub fn push_time(&mut self, ti: usize, depth: u16, threshold: u64) {
        self.tasks[ti].times.push((depth, threshold));
    }

    /// Ends the `time=` trigger of the function exiting at `depth`, if any.
    pub fn pop_time(&mut self, ti: usize, depth: u16) {
        let t = &mut self.tasks[ti];
        if t.times.last().is_some_and(|&(d, _)| d == depth) {
            t.times.pop();
        }
    }

    pub fn buffer_empty(&self, ti: usize) -> bool {
        self.tasks[ti].buffer.is_empty()
    }

    pub fn push_buffer(&mut self, ti: usize, h: Head) {
        self.tasks[ti].buffer.push_back(h);
    }

    pub fn pop_buffer(&mut self, ti: usize) -> Option<Head> {
        self.tasks[ti].buffer.pop_front()
    }

    pub fn last_buffered_time(&self, ti: usize) -> Option<u64> {
        self.tasks[ti].buffer.back().map(|h| h.raw.time)
    }

    pub fn drop_last_buffered(&mut self, ti: usize) {
        self.tasks[ti].buffer.pop_back();
    }
}
