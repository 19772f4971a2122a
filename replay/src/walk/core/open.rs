//! Opening the walk and closing what it leaves open: [`Core::new`] compiles the filters into
//! the merge, sets `-r` and gives every task its [`TaskCore`]; [`Core::close_next`] finishes
//! the calls still open at the end of the data, as the [`Policy`] says.

use super::{Core, TaskCore, Unclosed};
use crate::callstack::TaskStack;
use crate::config::{Config, TimePoint};
use crate::merge::open_merge;
use crate::walk::policy::{Fixups, Libcall, Policy, Unfinished};
use record_format::TraceDir;

/// The process of each thread by its last `TASK` line (a thread without one is its own).
fn pids(dir: &TraceDir) -> std::collections::HashMap<u32, u32> {
    dir.tasks
        .iter()
        .filter_map(|l| match *l {
            record_format::task::TaskLine::Task { tid, pid, .. } => Some((tid, pid)),
            _ => None,
        })
        .collect()
}

fn time_point(p: TimePoint, first: u64) -> u64 {
    match p {
        TimePoint::Elapsed(ns) => first.saturating_add(ns),
        TimePoint::Absolute(ns) => ns,
    }
}

impl<'d> Core<'d> {
    /// Opens the walk of `dir`: the merge with the filters of `cfg` compiled, `-r` set.
    pub fn new(dir: &'d TraceDir, cfg: &Config, policy: Policy) -> Core<'d> {
        let libcall_filter = matches!(policy.libcall, Libcall::Hidden | Libcall::HiddenExitDropped);
        let (mut merge, notices) = if cfg.no_libcall && !libcall_filter {
            // The filters must not hide library calls themselves (see Libcall::NotReported).
            let cfg = Config {
                no_libcall: false,
                ..cfg.clone()
            };
            open_merge(dir, &cfg)
        } else {
            open_merge(dir, cfg)
        };
        let first = merge.first_time();
        let (mut range, mut range_stop) = ((0, u64::MAX), None);
        if let Some(r) = cfg.time_range {
            // As uftrace, an elapsed start counts from the first function record, a stop
            // from the first record of the data (switches included: the perf files are read
            // for it only then).
            let stop_origin = || {
                let events = crate::perf::events_by_time(dir);
                crate::walk::sched::origin(&events, dir, &cfg.tids, (0, u64::MAX), first, false)
            };
            range = (
                r.start.map_or(0, |p| time_point(p, first)),
                r.stop.map_or(u64::MAX, |p| match p {
                    TimePoint::Elapsed(_) => time_point(p, stop_origin()),
                    TimePoint::Absolute(_) => time_point(p, first),
                }),
            );
            // uftrace closes unfinished calls at the stop value as written: an elapsed stop
            // is compared with absolute times, which leaves such calls out.
            range_stop = r.stop.map(|p| match p {
                TimePoint::Elapsed(ns) | TimePoint::Absolute(ns) => ns,
            });
            merge.set_range(range.0, range.1);
            merge.restart();
        }
        let no_filters = (merge.filters.is_empty()
            && !merge.filters.no_libcall
            && !cfg.start_disabled
            && cfg.size_filter.is_none())
            || !policy.filters;
        let plain = no_filters
            && cfg.depth.is_none()
            && (!cfg.no_libcall || policy.libcall == Libcall::Ignored)
            && policy.fixups == Fixups::Shown;
        let pids = pids(dir);
        let tasks = dir
            .data
            .iter()
            .map(|d| TaskCore {
                stack: {
                    let mut s = TaskStack::new(cfg.depth);
                    s.set_size_limit(cfg.size_filter.unwrap_or(0));
                    s
                },
                pid: pids.get(&d.tid).copied().unwrap_or(d.tid),
                allowed: cfg.tids.is_empty() || cfg.tids.contains(&d.tid),
                first_time: 0,
                last_time: 0,
                last_exit: 0,
                exits: 0,
                last_seen: 0,
                setjmp: 0,
                sched_out: None,
                session: None,
                sess_from: 1,
                sess_until: 0,
                exec_reset: false,
            })
            .collect();
        let perf = if policy.sched {
            crate::perf::events_by_time(dir)
        } else {
            Vec::new()
        };
        let perf_until = perf.len();
        Core {
            merge,
            tasks,
            policy,
            enabled: !(cfg.start_disabled && policy.triggers),
            setjmp: 0,
            pending: None,
            deferred_execs: Vec::new(),
            exec_due: u64::MAX,
            exec_reset_any: false,
            fixups: Vec::new(),
            range,
            range_stop,
            no_filters,
            plain,
            no_libcall: cfg.no_libcall,
            perf,
            perf_next: 0,
            perf_until,
            sched_min: cfg.time_filter.unwrap_or(0),
            sched_all: false,
            notices,
        }
    }

    /// Closes the innermost call still open in task `ti` at the end of the data (as
    /// [`Policy::unfinished`] says), innermost first; `None` once none is left. Calls never
    /// entered in the data (or hidden, with [`Policy::unfinished_shown_only`]) are skipped.
    pub fn close_next(&mut self, ti: usize) -> Option<Unclosed> {
        self.apply_pending();
        self.apply_due_execs(u64::MAX);
        let t = &mut self.tasks[ti];
        if !t.allowed {
            return None;
        }
        let last = match self.policy.unfinished {
            Unfinished::Open => return None,
            Unfinished::RangeStopOrLast => self.range_stop.unwrap_or(t.last_time),
            Unfinished::LastExit => self.range_stop.unwrap_or(t.last_exit),
            Unfinished::LastSeenCapped => {
                self.range_stop.map_or(t.last_seen, |s| s.min(t.last_seen))
            }
        };
        loop {
            let closed = t.stack.close_open(last)?;
            let Some(c) = closed else { continue };
            if self.policy.unfinished_shown_only && !t.stack.exit() {
                continue;
            }
            return Some(Unclosed {
                task: ti,
                closed: c,
                slot: t.stack.open_calls(),
                time: last,
            });
        }
    }
}
