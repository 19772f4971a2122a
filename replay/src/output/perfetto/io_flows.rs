//! Flows of the I/O requests of a `-k` trace in `dump --perfetto`: one arrow chain per block
//! request, from the system call that submitted it, through its SQE, bios, the I/O scheduler,
//! the driver and the device's completion, to the call that reaped it (the points of
//! [`crate::io::Request`], linked by `replay::io`).
//!
//! The request model is built in a pass of its own before the dump (only for data with kernel
//! records: without them there are no requests and no pass); what is kept is each request's
//! points, keyed by where they are drawn (task and time), so memory grows with the number of
//! I/O requests, not of records.

use super::flows::{Anchor, FlowHook, FlowIds};
use crate::config::Config;
use crate::io::{kernel_syscall_name, Layer, Point};
use crate::Result;
use record_format::TraceDir;
use std::collections::HashMap;

/// The I/O request flows of one data directory.
#[derive(Debug, Default)]
pub struct IoFlows {
    /// Per (tid, time) of a point: the flow ids drawn there, the point's layer, and whether
    /// the flow ends there.
    at: HashMap<(u32, u64), Vec<Drawn>>,
}

/// One point of one flow.
#[derive(Debug, Clone, Copy)]
struct Drawn {
    id: u64,
    layer: Layer,
    last: bool,
}

impl IoFlows {
    /// The flows of `dir`'s requests, with ids from `base` on (kept apart from other hooks').
    pub fn new(dir: &TraceDir, cfg: &Config, base: u64) -> Result<IoFlows> {
        if dir.kernel.is_none() {
            return Ok(IoFlows::default());
        }
        Ok(IoFlows::of(&crate::io::flows(dir, cfg)?, base))
    }

    /// The flows of requests whose points are `requests`.
    fn of(requests: &[Vec<Point>], base: u64) -> IoFlows {
        let mut at: HashMap<(u32, u64), Vec<Drawn>> = HashMap::new();
        for (n, points) in requests.iter().enumerate() {
            // A request seen at one point only has nothing to connect.
            if points.len() < 2 {
                continue;
            }
            let id = base + n as u64;
            let last = points.len() - 1;
            for (i, p) in points.iter().enumerate() {
                at.entry((p.tid, p.time)).or_default().push(Drawn {
                    id,
                    layer: p.layer,
                    last: i == last,
                });
            }
        }
        IoFlows { at }
    }

    /// Whether no point is left to draw.
    #[cfg(test)]
    fn is_empty(&self) -> bool {
        self.at.is_empty()
    }
}

/// Whether a point of `layer` is drawn at `anchor`: a submission at the system call's slice,
/// a reaping at the end of the system call's slice (not at a `schedule` or user slice ending
/// at the same time), the other layers at their kernel event.
fn fits(layer: Layer, anchor: &Anchor<'_>) -> bool {
    match (layer, *anchor) {
        (Layer::Syscall, Anchor::Slice { kernel, name, .. })
        | (Layer::Reap, Anchor::SliceEnd { kernel, name, .. }) => {
            kernel && kernel_syscall_name(name).is_some()
        }
        (Layer::Syscall | Layer::Reap, _) => false,
        (_, Anchor::Instant { kernel, .. }) => kernel,
        _ => false,
    }
}

impl FlowHook for IoFlows {
    fn flows(&mut self, at: &Anchor<'_>, ids: &mut FlowIds) {
        let key = match *at {
            Anchor::Slice { tid, time, .. }
            | Anchor::SliceEnd { tid, time, .. }
            | Anchor::Instant { tid, time, .. } => (tid, time),
        };
        let Some(points) = self.at.get_mut(&key) else {
            return;
        };
        // Each point is drawn once, at the first anchor of its kind at its task and time.
        points.retain(|p| {
            if !fits(p.layer, at) {
                return true;
            }
            match p.last {
                true => ids.terminate(p.id),
                false => ids.flow(p.id),
            }
            false
        });
        if points.is_empty() {
            self.at.remove(&key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(tid: u32, time: u64, layer: Layer) -> Point {
        Point { tid, time, layer }
    }

    #[test]
    fn each_point_of_a_request_carries_its_flow_and_the_last_ends_it() {
        let request = vec![
            point(7, 10, Layer::Syscall),
            point(7, 12, Layer::Issue),
            point(7, 30, Layer::Complete),
            point(7, 40, Layer::Reap),
        ];
        let lone = vec![point(7, 50, Layer::Issue)];
        let mut f = IoFlows::of(&[request, lone], 1 << 48);
        let slice = |time| Anchor::Slice {
            task: 0,
            tid: 7,
            time,
            func: None,
            name: "__x64_sys_io_submit",
            args: None,
            kernel: true,
        };
        let instant = |time| Anchor::Instant {
            task: 0,
            tid: 7,
            time,
            text: "block:block_rq_issue",
            kernel: true,
        };
        let end = |time| Anchor::SliceEnd {
            task: 0,
            tid: 7,
            time,
            func: None,
            name: "__x64_sys_io_getevents",
            retval: None,
            kernel: true,
        };
        let schedule_end = |time| Anchor::SliceEnd {
            task: 0,
            tid: 7,
            time,
            func: None,
            name: "schedule",
            retval: None,
            kernel: true,
        };
        let mut ids = FlowIds::default();
        // A submission is drawn at its system call's slice, not at an event at the same time.
        f.flows(&instant(10), &mut ids);
        assert!(ids.is_empty());
        f.flows(&slice(10), &mut ids);
        assert_eq!(ids.flows, [1 << 48]);
        ids.clear();
        // Drawn once: a second anchor at the same task and time gets nothing.
        f.flows(&slice(10), &mut ids);
        assert!(ids.is_empty());
        f.flows(&instant(12), &mut ids);
        f.flows(&instant(30), &mut ids);
        assert_eq!(ids.flows, [1 << 48, 1 << 48]);
        ids.clear();
        // The reaping is the system call's end, not a `schedule` ending at the same time.
        f.flows(&schedule_end(40), &mut ids);
        assert!(ids.is_empty());
        f.flows(&end(40), &mut ids);
        assert_eq!(ids.terminating, [1 << 48]);
        assert!(ids.flows.is_empty());
        ids.clear();
        // The request seen at one point has no flow.
        f.flows(&instant(50), &mut ids);
        assert!(ids.is_empty());
        assert!(f.is_empty());
    }
}
