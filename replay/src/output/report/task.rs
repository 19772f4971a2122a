//! `report --task`: one row per task with its run time, its number of calls and its name
//! (cli.md §5.4), in the columns `-f` chooses.

use crate::timeval::push_duration;
use crate::walk::{Call, View, Visitor, Walker};
use crate::{Config, Result};
use record_format::TraceDir;
use std::fmt::Write as _;
use std::io::Write;

/// `report --task`: columns of the task summary, in the order they are printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskField {
    Total,
    SelfTime,
    Tid,
    Func,
}

impl TaskField {
    /// Every field, in table order (also the default).
    pub const ALL: [TaskField; 4] = [
        TaskField::Total,
        TaskField::SelfTime,
        TaskField::Tid,
        TaskField::Func,
    ];

    /// The `-f` name.
    pub fn name(self) -> &'static str {
        match self {
            TaskField::Total => "total",
            TaskField::SelfTime => "self",
            TaskField::Tid => "tid",
            TaskField::Func => "func",
        }
    }

    pub fn from_name(s: &str) -> Option<TaskField> {
        TaskField::ALL.into_iter().find(|f| f.name() == s)
    }
}

/// `report --task` sort keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskKey {
    Total,
    SelfTime,
    Tid,
    Func,
    Name,
}

impl TaskKey {
    pub fn from_name(s: &str) -> Option<TaskKey> {
        Some(match s {
            "total" => TaskKey::Total,
            "self" => TaskKey::SelfTime,
            "tid" => TaskKey::Tid,
            "func" => TaskKey::Func,
            "name" => TaskKey::Name,
            _ => return None,
        })
    }
}

/// One task's row.
struct TaskRow {
    /// Sum of the self times of its calls (context switches included).
    total: u64,
    /// The same without the time switched out.
    self_time: u64,
    tid: u32,
    calls: u64,
    comm: String,
}

/// Prints `report --task` with the columns `fields` (table order; empty for `-f none`).
pub fn report_tasks(
    dir: &TraceDir,
    cfg: &Config,
    fields: &[TaskField],
    keys: &[TaskKey],
    tid_width: usize,
    out: &mut dyn Write,
) -> Result<Vec<String>> {
    let mut walker = Walker::new(dir, cfg)?
        .exits_only()
        .with_sched()
        .task_order();
    for n in walker.notices() {
        writeln!(out, "Usage: {n}")?;
    }
    let mut per_task = TaskTimes {
        tasks: vec![TaskTime::default(); dir.data.len()],
        show_sched: cfg.sched_shown(),
    };
    let warnings = walker.run(&mut per_task)?;
    let mut rows: Vec<TaskRow> = walker
        .task_summary()
        .iter()
        .enumerate()
        .filter(|(_, t)| t.allowed && t.first != 0)
        .filter(|(i, _)| per_task.tasks[*i].calls > 0)
        .map(|(i, t)| {
            let tt = per_task.tasks[i];
            TaskRow {
                total: tt.total,
                self_time: tt.total.saturating_sub(tt.sched),
                tid: t.tid,
                calls: tt.calls,
                comm: walker.comm(i).to_string(),
            }
        })
        .collect();
    rows.sort_by(|a, b| {
        for k in keys {
            let o = match k {
                TaskKey::Total => b.total.cmp(&a.total),
                TaskKey::SelfTime => b.self_time.cmp(&a.self_time),
                TaskKey::Tid => a.tid.cmp(&b.tid),
                TaskKey::Func => b.calls.cmp(&a.calls),
                TaskKey::Name => a.comm.cmp(&b.comm),
            };
            if o.is_ne() {
                return o;
            }
        }
        a.tid.cmp(&b.tid)
    });
    let mut s = String::new();
    if !fields.is_empty() {
        let mut rule = String::new();
        for f in fields {
            let (head, width) = match f {
                TaskField::Total => ("Total time", 10),
                TaskField::SelfTime => ("Self time", 10),
                TaskField::Tid => ("TID", tid_width),
                TaskField::Func => ("Num funcs", 10),
            };
            let _ = write!(s, "  {head:>width$}");
            let _ = write!(rule, "  {}", "=".repeat(width));
        }
        let _ = writeln!(s, "  Task name");
        let _ = writeln!(s, "{rule}  ====================");
    }
    for r in &rows {
        for f in fields {
            s.push_str("  ");
            match f {
                TaskField::Total => push_duration(&mut s, r.total, false),
                TaskField::SelfTime => push_duration(&mut s, r.self_time, false),
                TaskField::Tid => {
                    let _ = write!(s, "{:>w$}", r.tid, w = tid_width);
                }
                TaskField::Func => {
                    let _ = write!(s, "{:>10}", r.calls);
                }
            }
        }
        let _ = writeln!(s, "  {:<16}", r.comm);
    }
    out.write_all(s.as_bytes())?;
    Ok(warnings)
}

/// What the task report sums per task.
#[derive(Debug, Clone, Copy, Default)]
struct TaskTime {
    /// Self times of its calls, context switches included.
    total: u64,
    /// Time switched out.
    sched: u64,
    /// Calls, context switches included.
    calls: u64,
}

/// Per task: the sums of [`TaskTime`].
struct TaskTimes {
    tasks: Vec<TaskTime>,
    /// Context switches counted: other ones, pre-emptions (`--no-sched`, `--no-event`,
    /// `--no-sched-preempt`).
    show_sched: [bool; 2],
}

impl Visitor for TaskTimes {
    fn wants_entries(&self) -> bool {
        false
    }

    fn exit(&mut self, _view: &View<'_, '_>, call: &Call) {
        let t = &mut self.tasks[call.task];
        t.total += call.self_time();
        t.calls += 1;
    }

    fn sched(&mut self, _view: &View<'_, '_>, task: usize, total: u64, preempted: bool) {
        if !self.show_sched[usize::from(preempted)] {
            return;
        }
        let t = &mut self.tasks[task];
        t.total += total;
        t.sched += total;
        t.calls += 1;
    }
}
