//! Sequence 1 of `dump --perfetto`: the tracks (a `TrackDescriptor` per process and per task,
//! whose thread track the task's own sequence writes its events to) and the thread states:
//! the context switches of `perf-cpu*.dat`, read file by file as the output reaches their
//! time, become `GenericKernelTaskStateEvent`s.
//!
//! Perfetto's trace processor turns these into its `thread_state` table (and `sched` slices
//! on the CPU), which its UI draws as the state strip of each thread track: Running (on CPU
//! N), Runnable (a pre-emption) or Sleeping (a switch-out of its own). That is what it shows
//! for ftrace's `sched_switch` too, but `sched_switch` needs the previous and next task of
//! every switch on a CPU, and the perf files have only the traced tasks' half of each.
//!
//! Each file's records come in time order; the files are merged as they are read (one
//! decoded head per CPU), so memory does not grow with the trace.

use super::packets::Packets;
use super::proto::*;
use crate::perf::{self, Events, PerfEvent};
use crate::walk::timed::TaskInfo;
use record_format::file::Mapped;
use record_format::TraceDir;
use std::collections::HashMap;
use std::io;

/// The sequence of the descriptors and thread states.
const SEQ_GLOBAL: u32 = 1;
/// Track uuids: a task's thread track (+ its index), a process's track (+ its pid).
pub(super) const THREAD_UUID: u64 = 1 << 32;
const PROCESS_UUID: u64 = 2 << 32;

/// One context switch of a traced task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Switch {
    pub time: u64,
    pub task: usize,
    pub cpu: u32,
    /// `proto::TASK_STATE_*`: running (switched in), runnable (pre-empted) or sleeping.
    pub state: i32,
}

/// The switches of the traced tasks in time order (ties in CPU order).
pub struct Switches {
    cpus: Vec<(u32, Events<Mapped>)>,
    heads: Vec<Option<Switch>>,
    task_of: HashMap<u32, usize>,
    /// Per task: whether it is shown (`--tid`).
    allowed: Vec<bool>,
    /// The earliest head: (time, file), recomputed when a head is taken.
    first: Option<(u64, usize)>,
}

impl Switches {
    /// The switches of `dir`'s tasks that `allowed` keeps (none if the recording has no perf
    /// files).
    pub fn new(dir: &TraceDir, allowed: Vec<bool>) -> Switches {
        let task_of = dir
            .data
            .iter()
            .enumerate()
            .map(|(i, d)| (d.tid, i))
            .collect();
        let cpus = perf::cpu_files(dir);
        let mut s = Switches {
            heads: vec![None; cpus.len()],
            cpus,
            task_of,
            allowed,
            first: None,
        };
        for i in 0..s.heads.len() {
            s.heads[i] = s.read(i);
        }
        s.first = s.earliest();
        s
    }

    fn earliest(&self) -> Option<(u64, usize)> {
        self.heads
            .iter()
            .enumerate()
            .filter_map(|(i, h)| h.map(|h| (h.time, i)))
            .min()
    }

    fn state(e: &PerfEvent) -> Option<i32> {
        match e.id {
            perf::SCHED_IN => Some(TASK_STATE_RUNNING),
            perf::SCHED_OUT_PREEMPT => Some(TASK_STATE_RUNNABLE),
            perf::SCHED_OUT => Some(TASK_STATE_INTERRUPTIBLE_SLEEP),
            _ => None,
        }
    }

    /// The next switch of a shown task in file `i`.
    fn read(&mut self, i: usize) -> Option<Switch> {
        let (cpu, events) = &mut self.cpus[i];
        for e in events.by_ref() {
            let Some(state) = Self::state(&e) else {
                continue;
            };
            let Some(&task) = self.task_of.get(&e.tid) else {
                continue;
            };
            if !self.allowed.get(task).copied().unwrap_or(false) {
                continue;
            }
            return Some(Switch {
                time: e.time,
                task,
                cpu: *cpu,
                state,
            });
        }
        None
    }

    /// The time of the next switch, `u64::MAX` after the last.
    pub fn next_time(&self) -> u64 {
        self.first.map_or(u64::MAX, |f| f.0)
    }

    /// The earliest switch at or before `upto`, taken.
    #[inline]
    pub fn next_until(&mut self, upto: u64) -> Option<Switch> {
        let (time, i) = self.first?;
        if time > upto {
            return None;
        }
        let s = self.heads[i].take();
        self.heads[i] = self.read(i);
        self.first = self.earliest();
        s
    }
}

/// A packet of sequence 1 with `data` set by `set`.
fn global(
    out: &mut Packets<'_>,
    time: Option<u64>,
    set: impl FnOnce(&mut TracePacket),
) -> io::Result<()> {
    let mut p = TracePacket {
        timestamp: time,
        trusted_packet_sequence_id: Some(SEQ_GLOBAL),
        ..Default::default()
    };
    set(&mut p);
    out.put(&p)
}

/// The process and thread tracks.
pub(super) fn descriptors(out: &mut Packets<'_>, tasks: &[TaskInfo]) -> io::Result<()> {
    let mut pids: Vec<(u32, &str)> = Vec::new();
    for t in tasks {
        if !pids.iter().any(|p| p.0 == t.pid) {
            let main = tasks.iter().find(|m| m.tid == t.pid).unwrap_or(t);
            pids.push((t.pid, &main.comm));
        }
    }
    for (pid, comm) in pids {
        global(out, None, |p| {
            p.track_descriptor = Some(TrackDescriptor {
                uuid: Some(PROCESS_UUID + u64::from(pid)),
                process: Some(ProcessDescriptor {
                    pid: Some(pid as i32),
                    process_name: Some(comm.to_string()),
                    ..Default::default()
                }),
                ..Default::default()
            })
        })?;
    }
    for (i, t) in tasks.iter().enumerate() {
        global(out, None, |p| {
            p.track_descriptor = Some(TrackDescriptor {
                uuid: Some(THREAD_UUID + i as u64),
                parent_uuid: Some(PROCESS_UUID + u64::from(t.pid)),
                thread: Some(ThreadDescriptor {
                    pid: Some(t.pid as i32),
                    tid: Some(t.tid as i32),
                    thread_name: Some(t.comm.clone()),
                }),
                ..Default::default()
            })
        })?;
    }
    Ok(())
}

/// The thread state of switch `s` of task `tid` named `comm`.
pub(super) fn state(out: &mut Packets<'_>, s: &Switch, comm: String, tid: u32) -> io::Result<()> {
    global(out, Some(s.time), |p| {
        p.generic_kernel_task_state_event = Some(GenericKernelTaskStateEvent {
            cpu: Some(s.cpu as i32),
            comm: Some(comm),
            tid: Some(i64::from(tid)),
            state: Some(s.state),
        })
    })
}
