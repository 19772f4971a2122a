//! The perf scheduling records (`perf-cpu*.dat`) merged into the walk by time
//! ([`Policy::sched`](super::policy::Policy::sched)).
//!
//! A context switch inside a function is a `linux:schedule` call: the switch-out begins it,
//! the switch-in ends it, and the time switched out counts as callee time of the running
//! call (even when the switches are not shown). As in uftrace 0.13, a pre-empting
//! switch-out begins nothing (its switch-in still ends a call), and a switch-in before the
//! task's first record is ignored.

use super::core::{Core, SchedStep};
use crate::perf;

impl Core<'_> {
    /// The next context switch before `upto`, if any (switches of tasks `--tid` leaves out,
    /// or outside `-r`, are passed over).
    pub(super) fn next_sched(&mut self, upto: u64) -> Option<SchedStep> {
        while let Some(&(ti, e)) = self.perf.get(self.perf_next) {
            if e.time >= upto {
                return None;
            }
            self.perf_next += 1;
            let t = &mut self.tasks[ti];
            if !t.allowed || e.time < self.range.0 || e.time > self.range.1 {
                continue;
            }
            let first = t.last_seen == 0;
            t.last_seen = e.time;
            let mut total = 0;
            let mut preempted = false;
            let exit = match e.id {
                perf::SCHED_OUT | perf::SCHED_OUT_PREEMPT => {
                    // A pre-emption begins nothing for the analysis (its consumers pass it
                    // over); replay may show it as `linux:sched-out (pre-empted)`.
                    let preempt = e.id == perf::SCHED_OUT_PREEMPT;
                    t.sched_out = Some((e.time, preempt));
                    preempted = preempt;
                    false
                }
                perf::SCHED_IN => {
                    if let Some((out, preempt)) = t.sched_out.take() {
                        total = e.time.saturating_sub(out);
                        preempted = preempt;
                    }
                    t.stack.add_child_time(total);
                    if first {
                        continue;
                    }
                    true
                }
                _ => continue,
            };
            let visible = t.stack.event_visible(self.merge.filters.has_filter);
            return Some(SchedStep {
                task: ti,
                time: e.time,
                exit,
                total,
                visible,
                preempted,
            });
        }
        None
    }
}

impl Core<'_> {
    /// The `-r` range in absolute times (everything without one).
    pub fn time_range(&self) -> (u64, u64) {
        self.range
    }

    /// Whether a context switch of task `ti` comes before `time` (replay's leaf look-ahead:
    /// a call with a switch inside is not a leaf, even when `--no-event` or `--no-sched`
    /// hides it, as uftrace).
    pub(super) fn switch_before(&self, ti: usize, time: u64) -> bool {
        self.perf[self.perf_next.min(self.perf.len())..]
            .iter()
            .take_while(|(_, e)| e.time < time)
            .any(|&(t, _)| t == ti)
    }

    /// The look-ahead passes over the switches before `time` when the filters hide them all
    /// (task `ti`'s inside `-N` or below `-D`, other tasks' likewise or before their first
    /// record): as uftrace, they do not break the leaf. Returns whether it did (they are
    /// consumed).
    pub(super) fn pass_hidden_switches(&mut self, ti: usize, time: u64) -> bool {
        let has_filter = self.merge.filters.has_filter;
        let hidden = |t: usize| {
            let s = &self.tasks[t].stack;
            (t != ti && !s.started()) || !s.event_visible(has_filter)
        };
        if !hidden(ti)
            || self.perf[self.perf_next.min(self.perf.len())..]
                .iter()
                .take_while(|(_, e)| e.time < time)
                .any(|&(t, _)| !hidden(t))
        {
            return false;
        }
        while self.next_sched(time).is_some() {}
        true
    }
}

/// The origin of elapsed times shown (`-f elapsed`) and of an elapsed `-r` stop: uftrace's
/// first record of the data, `first` (the first function record) or the first switch-in
/// inside `range` of a task `tids` keeps, when earlier (switch-outs, task names and exits do
/// not count). (An elapsed `-r` start counts from `first`.)
pub fn origin(dir: &record_format::TraceDir, tids: &[u32], range: (u64, u64), first: u64) -> u64 {
    perf::events_by_time(dir)
        .iter()
        .find(|(ti, e)| {
            e.id == perf::SCHED_IN
                && (range.0..=range.1).contains(&e.time)
                && (tids.is_empty() || tids.contains(&dir.data[*ti].tid))
        })
        .map_or(first, |(_, e)| e.time.min(first))
}
