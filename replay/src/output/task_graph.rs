//! `graph --task`: the tree of processes and threads with their run times (cli.md §6.3),
//! drawn like the call graph (`graph.rs`): threads hang off their process with ` +-`, forked
//! processes off their parent with ` +----` after a separator line.

use crate::timeval::push_duration;
use crate::walk::{Call, Entry, View, Visitor, Walker};
use crate::{Config, Result};
use record_format::task::TaskLine;
use record_format::TraceDir;
use std::fmt::Write as _;
use std::io::Write;

/// `graph --task` columns, in the order they are printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskField {
    Total,
    SelfTime,
    Tid,
}

impl TaskField {
    pub const ALL: [TaskField; 3] = [TaskField::Total, TaskField::SelfTime, TaskField::Tid];

    /// The `-f` names (the first is the one listed in the error message).
    pub fn names(self) -> &'static [&'static str] {
        match self {
            TaskField::Total => &["total-time", "total"],
            TaskField::SelfTime => &["self-time", "self"],
            TaskField::Tid => &["tid"],
        }
    }

    pub fn from_name(s: &str) -> Option<TaskField> {
        TaskField::ALL.into_iter().find(|f| f.names().contains(&s))
    }
}

/// First and last times of the records of each task that pass the filters, and the time
/// each was switched out inside its calls (its self time is the rest, as in uftrace).
/// (`--no-sched`, `--no-event` and `--no-sched-preempt` leave the switches they hide in).
struct TaskSpan(Vec<(u64, u64)>, Vec<u64>, [bool; 2]);

impl TaskSpan {
    fn see(&mut self, task: usize, time: u64) {
        let t = &mut self.0[task];
        if t.0 == 0 {
            t.0 = time;
        }
        t.1 = time;
    }
}

impl Visitor for TaskSpan {
    fn entry(&mut self, _view: &View<'_, '_>, e: &Entry) {
        self.see(e.task, e.time);
    }

    fn exit(&mut self, _view: &View<'_, '_>, call: &Call) {
        if !call.unfinished {
            self.see(call.task, call.time);
        }
    }

    fn sched(&mut self, _view: &View<'_, '_>, task: usize, total: u64, preempted: bool) {
        if self.2[usize::from(preempted)] {
            self.1[task] += total;
        }
    }
}

/// One task of the tree.
struct TaskNode {
    tid: u32,
    pid: u32,
    comm: String,
    run: u64,
    /// Switched out inside its calls.
    sched: u64,
    children: Vec<usize>,
}

/// `graph --task`: the tree of processes and threads with their run times (cli.md §6.3).
/// Threads hang off their process, forked processes off their parent.
pub fn task_graph(
    dir: &TraceDir,
    cfg: &Config,
    fields: &[TaskField],
    tid_width: usize,
    out: &mut dyn Write,
) -> Result<Vec<String>> {
    let mut walker = Walker::new(dir, cfg)?.with_sched();
    for n in walker.notices() {
        writeln!(out, "Usage: {n}")?;
    }
    let mut span = TaskSpan(
        vec![(0, 0); dir.data.len()],
        vec![0; dir.data.len()],
        cfg.sched_shown(),
    );
    let warnings = walker.run(&mut span)?;
    let mut nodes: Vec<TaskNode> = super::info::task_comms(dir)
        .into_iter()
        .map(|(tid, pid, _, comm)| {
            let i = dir.data.iter().position(|d| d.tid == tid);
            let run = i.map_or(0, |i| span.0[i].1.saturating_sub(span.0[i].0));
            let sched = i.map_or(0, |i| span.1[i]);
            TaskNode {
                tid,
                pid,
                comm,
                run,
                sched,
                children: Vec::new(),
            }
        })
        .collect();
    // Parents: a thread's process leader, a forked process's parent.
    for i in 0..nodes.len() {
        let (tid, pid) = (nodes[i].tid, nodes[i].pid);
        let parent_pid = if tid != pid {
            Some(pid)
        } else {
            dir.tasks.iter().find_map(|t| match t {
                TaskLine::Fork { pid: p, ppid, .. } if *p == pid => Some(*ppid),
                _ => None,
            })
        };
        if let Some(pp) = parent_pid {
            if let Some(p) = nodes.iter().position(|n| n.tid == pp) {
                if p != i {
                    nodes[p].children.push(i);
                }
            }
        }
    }
    let mut s = String::from("========== TASK GRAPH ==========\n");
    if !fields.is_empty() {
        let tid_head = if tid_width == 6 {
            "   TID  "
        } else {
            "   TID   "
        };
        let heads: Vec<&str> = fields
            .iter()
            .map(|f| match f {
                TaskField::Total => "TOTAL TIME",
                TaskField::SelfTime => " SELF TIME",
                TaskField::Tid => tid_head,
            })
            .collect();
        let _ = writeln!(s, "# {}   TASK NAME", heads.join("  "));
    }
    if !nodes.is_empty() {
        let mut p = TaskPrinter {
            nodes: &nodes,
            fields,
            tid_width,
            mask: vec![false; nodes.len() + 2],
            s: &mut s,
        };
        p.node(0, None, 0);
    }
    s.push('\n');
    out.write_all(s.as_bytes())?;
    Ok(warnings)
}

struct TaskPrinter<'a> {
    nodes: &'a [TaskNode],
    fields: &'a [TaskField],
    tid_width: usize,
    mask: Vec<bool>,
    s: &'a mut String,
}

impl TaskPrinter<'_> {
    fn fields(&mut self, node: Option<&TaskNode>) {
        for f in self.fields {
            self.s.push_str("  ");
            match (f, node) {
                (TaskField::Tid, Some(n)) => {
                    let _ = write!(self.s, "[{:>w$}]", n.tid, w = self.tid_width);
                }
                (TaskField::Tid, None) => {
                    let _ = write!(self.s, "{:w$}", "", w = self.tid_width + 2);
                }
                (TaskField::SelfTime, Some(n)) => {
                    push_duration(self.s, n.run.saturating_sub(n.sched), false)
                }
                (_, Some(n)) => push_duration(self.s, n.run, false),
                (_, None) => self.s.push_str("          "),
            }
        }
        if !self.fields.is_empty() {
            self.s.push_str(" : ");
        }
    }

    fn indent(&mut self, indent: usize, line: bool) {
        if self.mask.len() < indent + 1 {
            self.mask.resize(indent + 1, false);
        }
        let last = if line {
            (0..indent).rev().find(|&i| self.mask[i])
        } else {
            None
        };
        for i in 0..indent {
            let open = self.mask[i];
            let piece = match last {
                Some(l) if i >= l => {
                    if i == l {
                        " +-"
                    } else {
                        "---"
                    }
                }
                None if line => "---",
                _ if open => " | ",
                _ => "   ",
            };
            self.s.push_str(piece);
        }
    }

    /// Prints task `i` and its subtree; returns whether a forked child was printed last
    /// (the caller then separates the next sibling with a blank line).
    fn node(&mut self, i: usize, parent: Option<usize>, indent: usize) -> bool {
        let n = &self.nodes[i];
        self.fields(Some(n));
        self.indent(indent, true);
        self.s.push_str(&n.comm);
        self.s.push('\n');
        if n.children.is_empty() {
            return false;
        }
        if let Some(p) = parent {
            let pn = &self.nodes[p];
            if pn.children.last() == Some(&i) {
                let mut pi = indent as isize - 1;
                if n.pid != pn.pid {
                    pi -= 1;
                }
                if pi >= 0 {
                    self.mask[pi as usize] = false;
                }
            }
        }
        let children = n.children.clone();
        let pid = n.pid;
        let mut blank = false;
        for (k, &c) in children.iter().enumerate() {
            let mut ind = indent;
            if self.mask.len() < ind + 3 {
                self.mask.resize(ind + 3, false);
            }
            self.mask[ind] = true;
            ind += 1;
            let forked = self.nodes[c].pid != pid;
            if forked {
                blank = true;
                ind += 1;
            }
            if blank {
                self.fields(None);
                self.indent(ind, false);
                self.s.push('\n');
                blank = false;
            }
            blank |= self.node(c, Some(i), ind);
            if k + 1 != children.len() && forked {
                blank = true;
            }
        }
        self.mask[indent] = false;
        blank
    }
}
