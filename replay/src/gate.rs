//! Reader-level filters: records that never reach the replay engine, as in uftrace's task
//! reader. Outside the time range (`-r`), shorter than the time filter (`-t`, `time=`
//! triggers), or not on a call path to a `-C` target: such an entry is dropped together with
//! its whole subtree and its exit.

/// Per-task state of the gate.
#[derive(Debug, Default, Clone)]
struct TaskGate {
    /// Depths of dropped entries whose exit has not been seen yet (innermost last).
    dropped: Vec<u16>,
    /// `time=` triggers in effect: (depth of the trigger function, threshold).
    times: Vec<(u16, u64)>,
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

    /// Whether any check applies (so plain replays skip the gate entirely).
    pub fn active(&self) -> bool {
        self.range != (0, u64::MAX)
            || self.time_filter.is_some()
            || self.time_triggers
            || self.caller
    }

    pub fn in_range(&self, time: u64) -> bool {
        self.range.0 <= time && time <= self.range.1
    }

    /// For an entry at `depth`: `Some(true)` when it lies inside a dropped function (drop it),
    /// `None` when it must be decided. Stale marks (left by longjmp or exec) are discarded.
    pub fn entry_inside_dropped(&mut self, ti: usize, depth: u16) -> Option<bool> {
        let t = &mut self.tasks[ti];
        while t.dropped.last().is_some_and(|&d| d >= depth) {
            t.dropped.pop();
        }
        while t.times.last().is_some_and(|&(d, _)| d >= depth) {
            t.times.pop();
        }
        (!t.dropped.is_empty()).then_some(true)
    }

    pub fn inside_dropped(&self, ti: usize) -> bool {
        !self.tasks[ti].dropped.is_empty()
    }

    /// The time threshold in effect for a new entry of task `ti`.
    pub fn threshold(&self, ti: usize) -> Option<u64> {
        self.tasks[ti]
            .times
            .last()
            .map(|&(_, t)| t)
            .or(self.time_filter)
    }

    pub fn drop_entry(&mut self, ti: usize, depth: u16) {
        self.tasks[ti].dropped.push(depth);
    }

    pub fn push_time(&mut self, ti: usize, depth: u16, threshold: u64) {
        self.tasks[ti].times.push((depth, threshold));
    }

    /// For an exit at `depth`: whether it passes.
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
        if t.times.last().is_some_and(|&(d, _)| d == depth) {
            t.times.pop();
        }
        true
    }
}
