//! The `perf-cpu<N>.dat` files (data-format §10): per-CPU perf ring-buffer records of context
//! switches, task names, forks and exits, turned into the `linux:*` events 200001..200007.
//!
//! The raw dump lists them per file; the walk (replay, report, graph, the time-ordered dump
//! formats) merges the traced tasks' events into their records by time and shows a task's
//! scheduling inside its functions as `linux:schedule` calls. The files are mapped and their
//! records decoded as they are read ([`Events`]).

use record_format::file::Mapped;
use record_format::TraceDir;
use std::collections::HashMap;

pub const SCHED_IN: u64 = 200001;
pub const SCHED_OUT: u64 = 200002;
pub const TASK_NEW: u64 = 200004;
pub const TASK_EXIT: u64 = 200005;
pub const TASK_NAME: u64 = 200006;
pub const SCHED_OUT_PREEMPT: u64 = 200007;

/// A context switch (hidden by `--no-sched`).
pub fn is_sched(id: u64) -> bool {
    matches!(id, SCHED_IN | SCHED_OUT | SCHED_OUT_PREEMPT)
}

use record_format::info::feat::PERF_EVENT as FEAT_PERF_EVENT;
use record_format::perf::{
    file_cpu, MISC_SWITCH_OUT, MISC_SWITCH_OUT_PREEMPT, RECORD_COMM as PERF_RECORD_COMM,
    RECORD_EXIT as PERF_RECORD_EXIT, RECORD_FORK as PERF_RECORD_FORK,
    RECORD_SWITCH as PERF_RECORD_SWITCH,
};

/// One perf record as an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PerfEvent {
    pub time: u64,
    pub tid: u32,
    /// 200001..200007.
    pub id: u64,
}

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

/// The event of the record at the start of `rec` (its header says `size` bytes), if it is one
/// of the kinds the analysis uses.
fn decode(rec: &[u8], ty: u32, misc: u16) -> Option<PerfEvent> {
    // Every record ends with the sample_id trailer: u32 pid, u32 tid, u64 time.
    let trailer = rec.len().saturating_sub(16);
    let (sample_tid, time) = (u32_at(rec, trailer + 4)?, u64_at(rec, trailer + 8)?);
    let (id, tid, time) = match ty {
        PERF_RECORD_SWITCH if misc & MISC_SWITCH_OUT == 0 => (SCHED_IN, sample_tid, time),
        PERF_RECORD_SWITCH if misc & MISC_SWITCH_OUT_PREEMPT != 0 => {
            (SCHED_OUT_PREEMPT, sample_tid, time)
        }
        PERF_RECORD_SWITCH => (SCHED_OUT, sample_tid, time),
        PERF_RECORD_COMM => (TASK_NAME, u32_at(rec, 12).unwrap_or(sample_tid), time),
        // Forks and exits carry their own time: u32 pid, ppid, tid, ptid, u64 time.
        PERF_RECORD_FORK | PERF_RECORD_EXIT => {
            let id = if ty == PERF_RECORD_FORK {
                TASK_NEW
            } else {
                TASK_EXIT
            };
            let tid = u32_at(rec, 16).unwrap_or(sample_tid);
            (id, tid, u64_at(rec, 24).unwrap_or(time))
        }
        _ => return None,
    };
    Some(PerfEvent { time, tid, id })
}

/// The events of one file's bytes, in file order, decoded as they are asked for. A truncated
/// or malformed record ends them.
pub struct Events<B> {
    bytes: B,
    pos: usize,
}

impl<B: std::ops::Deref<Target = [u8]>> Events<B> {
    pub fn new(bytes: B) -> Events<B> {
        Events { bytes, pos: 0 }
    }
}

impl<B: std::ops::Deref<Target = [u8]>> Iterator for Events<B> {
    type Item = PerfEvent;

    fn next(&mut self) -> Option<PerfEvent> {
        let bytes = &*self.bytes;
        loop {
            let pos = self.pos;
            let (ty, misc, size) = (
                u32_at(bytes, pos)?,
                u16_at(bytes, pos + 4)?,
                u16_at(bytes, pos + 6)? as usize,
            );
            let Some(rec) = bytes.get(pos..pos + size).filter(|_| size >= 8) else {
                self.pos = bytes.len();
                return None;
            };
            self.pos += size;
            if let Some(e) = decode(rec, ty, misc) {
                return Some(e);
            }
        }
    }
}

/// The events of one file, in file order (see [`Events`]).
pub fn parse(bytes: &[u8]) -> Vec<PerfEvent> {
    Events::new(bytes).collect()
}

/// The non-empty perf files of `dir` as (cpu, its events read from the mapped file), by cpu
/// number; none unless the recording has feature PERF_EVENT. A file that cannot be read is
/// left out with a warning.
pub fn cpu_files(dir: &TraceDir) -> Vec<(u32, Events<Mapped>)> {
    if dir.info.header.feat_mask & FEAT_PERF_EVENT == 0 {
        return Vec::new();
    }
    let Ok(entries) = std::fs::read_dir(&dir.path) else {
        return Vec::new();
    };
    let mut files: Vec<(u32, std::path::PathBuf)> = entries
        .flatten()
        .filter_map(|e| {
            let name = e.file_name();
            let cpu = file_cpu(name.to_str()?)?;
            Some((cpu, e.path()))
        })
        .collect();
    files.sort();
    files
        .into_iter()
        .filter_map(|(cpu, path)| {
            let bytes = match record_format::file::map_regular(&path) {
                Ok(b) => b,
                Err(e) => {
                    dir.warn(format!("{e}; ignoring it"));
                    return None;
                }
            };
            (!bytes.is_empty()).then(|| (cpu, Events::new(bytes)))
        })
        .collect()
}

/// The events of the recorded tasks, with the task index (into `TraceDir::data`), in time
/// order (ties keep the order of the files). The files are merged as they are read (each
/// CPU's records come in time order), so only the events kept are held: the scheduling of
/// the traced tasks, a few records per context switch.
pub fn events_by_time(dir: &TraceDir) -> Vec<(usize, PerfEvent)> {
    let index: HashMap<u32, usize> = dir
        .data
        .iter()
        .enumerate()
        .map(|(i, d)| (d.tid, i))
        .collect();
    let mut files: Vec<std::iter::Peekable<_>> = cpu_files(dir)
        .into_iter()
        .map(|(_, events)| {
            events
                .filter_map(|e| Some((*index.get(&e.tid)?, e)))
                .peekable()
        })
        .collect();
    let mut all = Vec::new();
    loop {
        // The earliest head, the first file's on ties.
        let mut best: Option<(usize, u64)> = None;
        for (i, f) in files.iter_mut().enumerate() {
            if let Some(&(_, e)) = f.peek() {
                if best.is_none_or(|(_, t)| e.time < t) {
                    best = Some((i, e.time));
                }
            }
        }
        let Some((i, _)) = best else { break };
        all.extend(files[i].next());
    }
    // A file out of time order (not seen from the kernel) is put in order all the same; the
    // merged events are already sorted, which the sort checks in one pass.
    all.sort_by_key(|(_, e)| e.time);
    all
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(ty: u32, misc: u16, body: &[u8], pid: u32, tid: u32, time: u64) -> Vec<u8> {
        let size = 8 + body.len() + 16;
        let mut r = Vec::new();
        r.extend_from_slice(&ty.to_le_bytes());
        r.extend_from_slice(&misc.to_le_bytes());
        r.extend_from_slice(&(size as u16).to_le_bytes());
        r.extend_from_slice(body);
        r.extend_from_slice(&pid.to_le_bytes());
        r.extend_from_slice(&tid.to_le_bytes());
        r.extend_from_slice(&time.to_le_bytes());
        r
    }

    #[test]
    fn switches_comm_fork_exit() {
        let mut b = record(PERF_RECORD_SWITCH, MISC_SWITCH_OUT, &[], 7, 8, 100);
        b.extend(record(
            PERF_RECORD_SWITCH,
            MISC_SWITCH_OUT | MISC_SWITCH_OUT_PREEMPT,
            &[],
            7,
            8,
            150,
        ));
        b.extend(record(PERF_RECORD_SWITCH, 0, &[], 7, 8, 200));
        let mut comm = Vec::new();
        comm.extend_from_slice(&7u32.to_le_bytes());
        comm.extend_from_slice(&8u32.to_le_bytes());
        comm.extend_from_slice(b"prog\0\0\0\0");
        b.extend(record(PERF_RECORD_COMM, 0, &comm, 7, 8, 250));
        let mut fork = Vec::new();
        for v in [7u32, 1, 9, 8] {
            fork.extend_from_slice(&v.to_le_bytes());
        }
        fork.extend_from_slice(&299u64.to_le_bytes());
        b.extend(record(PERF_RECORD_FORK, 0, &fork, 7, 8, 300));
        b.extend(record(99, 0, &[1, 2, 3, 4], 7, 8, 350));
        b.extend_from_slice(&[1, 2, 3]); // truncated tail
        let ids: Vec<(u64, u32, u64)> = parse(&b).iter().map(|e| (e.time, e.tid, e.id)).collect();
        assert_eq!(
            ids,
            vec![
                (100, 8, SCHED_OUT),
                (150, 8, SCHED_OUT_PREEMPT),
                (200, 8, SCHED_IN),
                (250, 8, TASK_NAME),
                (299, 9, TASK_NEW),
            ]
        );
    }
}
