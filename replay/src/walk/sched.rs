//! The perf scheduling records (`perf-cpu*.dat`) merged into the walk by time
//! ([`Policy::sched`](super::policy::Policy::sched)).
//!
//! A context switch inside a function is a `linux:schedule` call: the switch-out begins it,
//! the switch-in ends it, and the time switched out counts as callee time of the running
//! call (even when the switches are not shown). As in uftrace 0.13, a pre-empting
//! switch-out begins nothing (its switch-in still ends a call), and a switch-in before the
//! task's first record is ignored. With `-t`, a switch shorter than the threshold is dropped
//! like a short call: not shown, and its time is not callee time.

use super::core::{Core, SchedStep};
use crate::perf;

impl Core<'_> {
    /// The next context switch before `upto`, if any (switches of tasks `--tid` leaves out,
    /// or outside `-r`, are passed over).
    pub(super) fn next_sched(&mut self, upto: u64) -> Option<SchedStep> {
        while let Some(&(ti, e)) = self.perf[..self.perf_until].get(self.perf_next) {
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
            let mut id = e.id;
            let exit = match e.id {
                perf::SCHED_OUT | perf::SCHED_OUT_PREEMPT => {
                    // A pre-emption begins nothing for the analysis (its consumers pass it
                    // over); replay may show it as `linux:sched-out (pre-empted)`.
                    let preempt = e.id == perf::SCHED_OUT_PREEMPT;
                    t.sched_out = Some((e.time, preempt));
                    preempted = preempt;
                    if self.sched_min > 0 && self.switched_out_for(ti) < self.sched_min {
                        continue;
                    }
                    false
                }
                perf::SCHED_IN => {
                    if let Some((out, preempt)) = t.sched_out.take() {
                        total = e.time.saturating_sub(out);
                        preempted = preempt;
                        id = if preempt {
                            perf::SCHED_OUT_PREEMPT
                        } else {
                            perf::SCHED_OUT
                        };
                    }
                    if total < self.sched_min {
                        continue;
                    }
                    t.stack.add_child_time(total);
                    if first && !self.sched_all {
                        continue;
                    }
                    true
                }
                perf::TASK_NAME | perf::TASK_NEW | perf::TASK_EXIT if self.sched_all => false,
                _ => continue,
            };
            let visible = self.sched_visible(ti);
            return Some(SchedStep {
                task: ti,
                time: e.time,
                exit,
                total,
                visible,
                preempted,
                id,
            });
        }
        None
    }
}

impl Core<'_> {
    /// How long task `ti`, switched out by the switch just taken, stays out: until its next
    /// switch-in (`u64::MAX` if none follows).
    fn switched_out_for(&self, ti: usize) -> u64 {
        let out = self.perf[self.perf_next - 1].1.time;
        self.perf[self.perf_next..]
            .iter()
            .find(|&&(t, _)| t == ti)
            .filter(|(_, e)| e.id == perf::SCHED_IN)
            .map_or(u64::MAX, |(_, e)| e.time.saturating_sub(out))
    }

    /// Whether an event of task `ti` shows now: inside a call the filters show, or with
    /// `--event-full` outside every call.
    fn sched_visible(&self, ti: usize) -> bool {
        let (s, has_filter) = (&self.tasks[ti].stack, self.merge.filters.has_filter);
        s.event_visible(has_filter) || (self.sched_all && !has_filter && s.open_calls() == 0)
    }

    /// Whether a context switch of task `ti` comes before `time` (replay's leaf look-ahead:
    /// a call with a switch inside is not a leaf, even when `--no-event` or `--no-sched`
    /// hides it, as uftrace).
    /// With `--event-full`, any task's event shows (`linux:task-new` of a thread created).
    pub(super) fn switch_before(&self, ti: usize, time: u64) -> bool {
        self.perf[self.perf_next.min(self.perf.len())..]
            .iter()
            .take_while(|(_, e)| e.time < time)
            .any(|&(t, _)| t == ti || (self.sched_all && self.sched_visible(t)))
    }

    /// The look-ahead passes over the switches before `time` when the filters hide them all
    /// (task `ti`'s inside `-N` or below `-D`, other tasks' likewise or before their first
    /// record): as uftrace, they do not break the leaf. Returns whether it did (they are
    /// consumed).
    pub(super) fn pass_hidden_switches(&mut self, ti: usize, time: u64) -> bool {
        let hidden = |t: usize| {
            (t != ti && !self.tasks[t].stack.started() && !self.sched_all) || !self.sched_visible(t)
        };
        if self.perf[self.perf_next.min(self.perf.len())..]
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
/// not count, unless `all`: with `--event-full` every event does). (An elapsed `-r` start
/// counts from `first`.) `events`: the trace's perf events by time
/// ([`perf::events_by_time`]).
pub fn origin(
    events: &[(usize, perf::PerfEvent)],
    dir: &record_format::TraceDir,
    tids: &[u32],
    range: (u64, u64),
    first: u64,
    all: bool,
) -> u64 {
    events
        .iter()
        .find(|(ti, e)| {
            (all || e.id == perf::SCHED_IN)
                && (range.0..=range.1).contains(&e.time)
                && (tids.is_empty() || tids.contains(&dir.data[*ti].tid))
        })
        .map_or(first, |(_, e)| e.time.min(first))
}
