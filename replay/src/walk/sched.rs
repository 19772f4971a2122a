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
                    let preempt = e.id == perf::SCHED_OUT_PREEMPT;
                    t.sched_out = Some((e.time, preempt));
                    if preempt {
                        continue;
                    }
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
