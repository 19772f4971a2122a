//! Flows of `dump --perfetto`: the arrows Perfetto draws from one slice or instant to the
//! next one carrying the same flow id (`TrackEvent.flow_ids`), a chain ended by
//! `terminating_flow_ids`.
//!
//! The writer asks a [`FlowHook`] about every slice it begins or ends and every instant it
//! writes, as the walk reaches them: the hook names the flow ids to attach ([`FlowIds`]); ids
//! given at a slice's end attach to that slice (a call that reaps a completion is known by its
//! return value). Since the
//! output is streamed, a hook must derive ids from what it has seen so far (a request's key,
//! a counter handed over through a queue), never from what comes later. A module that links
//! the records of one I/O request (submission, device issue, completion, reaping) is such a
//! hook; [`Spawns`], the one shipped, links each call that creates a thread or a process to
//! the first slice of the task it created. [`Hooks`] chains several.

use crate::symbols::FuncId;
use record_format::task::TaskLine;
use record_format::TraceDir;
use std::collections::{HashMap, VecDeque};

/// Where a flow can attach: the slice a shown entry begins or an exit ends, or an instant (an
/// event).
#[derive(Debug, Clone, Copy)]
pub enum Anchor<'a> {
    Slice {
        task: usize,
        tid: u32,
        time: u64,
        /// The function (`None` for a slice that is not a function's).
        func: Option<FuncId>,
        /// The function's name.
        name: &'a str,
        /// Its arguments as replay shows them, `(1, "a")` (recorded with `-A`).
        args: Option<&'a str>,
        /// A kernel function (`-k`).
        kernel: bool,
    },
    /// The end of a slice begun at an earlier [`Anchor::Slice`] of the same task.
    SliceEnd {
        task: usize,
        tid: u32,
        time: u64,
        func: Option<FuncId>,
        name: &'a str,
        /// Its return value as replay shows it (recorded with `-R`).
        retval: Option<&'a str>,
        kernel: bool,
    },
    Instant {
        task: usize,
        tid: u32,
        time: u64,
        /// The event's text as replay shows it, `name (fields)`.
        text: &'a str,
        /// A kernel tracepoint (`-k`).
        kernel: bool,
    },
}

/// The flow ids a hook attaches to one anchor.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct FlowIds {
    /// Flows that go on from here (begun here, or passing through).
    pub flows: Vec<u64>,
    /// Flows that end here.
    pub terminating: Vec<u64>,
}

impl FlowIds {
    /// Attaches flow `id`: it begins here, or goes on from here if an earlier anchor has it.
    pub fn flow(&mut self, id: u64) {
        self.flows.push(id);
    }

    /// Ends flow `id` here (after this, the id may be used for a new flow).
    pub fn terminate(&mut self, id: u64) {
        self.terminating.push(id);
    }

    pub fn is_empty(&self) -> bool {
        self.flows.is_empty() && self.terminating.is_empty()
    }

    pub fn clear(&mut self) {
        self.flows.clear();
        self.terminating.clear();
    }
}

/// Names the flows of each slice and instant, in time order.
pub trait FlowHook {
    fn flows(&mut self, at: &Anchor<'_>, ids: &mut FlowIds);
}

/// No flows.
#[derive(Debug, Default)]
pub struct NoFlows;

impl FlowHook for NoFlows {
    fn flows(&mut self, _: &Anchor<'_>, _: &mut FlowIds) {}
}

/// Several hooks, each asked in turn.
#[derive(Default)]
pub struct Hooks<'h>(pub Vec<&'h mut dyn FlowHook>);

impl FlowHook for Hooks<'_> {
    fn flows(&mut self, at: &Anchor<'_>, ids: &mut FlowIds) {
        for h in &mut self.0 {
            h.flows(at, ids);
        }
    }
}

/// The user-level calls that create a task.
const SPAWN_CALLS: [&str; 7] = [
    "pthread_create",
    "fork",
    "vfork",
    "clone",
    "clone3",
    "posix_spawn",
    "posix_spawnp",
];

/// Flows from each call that creates a thread or process to the first slice of the task it
/// created: a thread is created by its process, a process (a `FORK` line of task.txt) by its
/// parent. The creations of a process are matched with its new tasks in order (ids
/// `base + n`); memory: the creations not matched yet.
#[derive(Debug)]
pub struct Spawns {
    /// Per task: the process that created it (`None` for the first task, or unknown).
    creator: Vec<Option<u32>>,
    /// Per task: its process.
    pid: Vec<u32>,
    /// Per task: a slice of it was seen.
    seen: Vec<bool>,
    /// Per creating process: the flows of its creations not matched yet, oldest first.
    pending: HashMap<u32, VecDeque<u64>>,
    next: u64,
    /// Per function: whether it is one of [`SPAWN_CALLS`], once known.
    spawn: Vec<Option<bool>>,
}

impl Spawns {
    /// Flow ids start at `base` (kept apart from other hooks' ids).
    pub fn new(dir: &TraceDir, base: u64) -> Spawns {
        let mut pid = Vec::with_capacity(dir.data.len());
        let mut creator = Vec::with_capacity(dir.data.len());
        for d in &dir.data {
            let p = crate::walk::timed::task_pid(dir, d.tid);
            pid.push(p);
            let forked = dir.tasks.iter().find_map(|t| match t {
                TaskLine::Fork { pid: c, ppid, .. } if *c == d.tid => Some(*ppid),
                _ => None,
            });
            creator.push(if p != d.tid { Some(p) } else { forked });
        }
        Spawns::with_tasks(pid, creator, base)
    }

    /// Per task: its process and the process that created it.
    fn with_tasks(pid: Vec<u32>, creator: Vec<Option<u32>>, base: u64) -> Spawns {
        Spawns {
            seen: vec![false; pid.len()],
            creator,
            pid,
            pending: HashMap::new(),
            next: base,
            spawn: Vec::new(),
        }
    }
}

impl FlowHook for Spawns {
    fn flows(&mut self, at: &Anchor<'_>, ids: &mut FlowIds) {
        let Anchor::Slice {
            task,
            func,
            name,
            kernel,
            ..
        } = *at
        else {
            return;
        };
        if task >= self.seen.len() {
            return;
        }
        if !self.seen[task] {
            self.seen[task] = true;
            let queue = self.creator[task].and_then(|c| self.pending.get_mut(&c));
            if let Some(id) = queue.and_then(|q| q.pop_front()) {
                ids.terminate(id);
            }
        }
        let spawn = match func {
            Some(f) => {
                let f = f as usize;
                if self.spawn.len() <= f {
                    self.spawn.resize(f + 1, None);
                }
                *self.spawn[f].get_or_insert_with(|| !kernel && SPAWN_CALLS.contains(&name))
            }
            None => !kernel && SPAWN_CALLS.contains(&name),
        };
        if spawn {
            let id = self.next;
            self.next += 1;
            self.pending
                .entry(self.pid[task])
                .or_default()
                .push_back(id);
            ids.flow(id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slice(task: usize, func: FuncId, name: &str, kernel: bool) -> Anchor<'_> {
        Anchor::Slice {
            task,
            tid: 0,
            time: 0,
            func: Some(func),
            name,
            args: None,
            kernel,
        }
    }

    fn flows_of(s: &mut Spawns, at: Anchor<'_>) -> FlowIds {
        let mut ids = FlowIds::default();
        s.flows(&at, &mut ids);
        ids
    }

    #[test]
    fn creations_link_to_the_created_tasks_in_order() {
        // Task 0: process 10; tasks 1 and 2: its threads; task 3: a child process of 10.
        let mut s = Spawns::with_tasks(
            vec![10, 10, 10, 13],
            vec![None, Some(10), Some(10), Some(10)],
            100,
        );
        assert!(flows_of(&mut s, slice(0, 1, "main", false)).is_empty());
        assert_eq!(
            flows_of(&mut s, slice(0, 2, "pthread_create", false)).flows,
            [100]
        );
        // A kernel clone inside it creates nothing more.
        assert!(flows_of(&mut s, slice(0, 3, "clone", true)).is_empty());
        assert_eq!(
            flows_of(&mut s, slice(0, 2, "pthread_create", false)).flows,
            [101]
        );
        assert_eq!(flows_of(&mut s, slice(0, 4, "fork", false)).flows, [102]);
        let first = flows_of(&mut s, slice(2, 5, "worker", false));
        assert_eq!(first.terminating, [100]);
        // Only the first slice of a task ends a flow.
        assert!(flows_of(&mut s, slice(2, 5, "worker", false)).is_empty());
        assert_eq!(
            flows_of(&mut s, slice(1, 5, "worker", false)).terminating,
            [101]
        );
        assert_eq!(
            flows_of(&mut s, slice(3, 6, "child", false)).terminating,
            [102]
        );
        // Ends and instants carry none.
        let end = Anchor::SliceEnd {
            task: 0,
            tid: 0,
            time: 0,
            func: Some(4),
            name: "fork",
            retval: Some("13"),
            kernel: false,
        };
        assert!(flows_of(&mut s, end).is_empty());
        let instant = Anchor::Instant {
            task: 0,
            tid: 0,
            time: 0,
            text: "fork",
            kernel: false,
        };
        assert!(flows_of(&mut s, instant).is_empty());
    }

    #[test]
    fn hooks_are_all_asked() {
        struct Fixed(u64);
        impl FlowHook for Fixed {
            fn flows(&mut self, _: &Anchor<'_>, ids: &mut FlowIds) {
                ids.flow(self.0);
            }
        }
        let (mut a, mut b, mut none) = (Fixed(1), Fixed(2), NoFlows);
        let mut hooks = Hooks(vec![&mut a, &mut b, &mut none]);
        let mut ids = FlowIds::default();
        hooks.flows(&slice(0, 0, "f", false), &mut ids);
        assert_eq!(ids.flows, [1, 2]);
    }
}
