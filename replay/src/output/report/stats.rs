//! Per-name statistics of a walk: the rows of `report` and of both sides of `--diff`.

use super::{ReportField, SortKey};
use crate::symbols::FuncId;
use crate::timeval::push_duration;
use crate::walk::{Call, View, Visitor, Walker};
use crate::{Config, Result};
use record_format::TraceDir;
use std::collections::HashMap;
use std::fmt::Write as _;

/// The row names of the context switches uftrace's report shows (`linux:schedule`, and the
/// pre-emptions apart).
pub const SCHED_NAMES: [&str; 2] = ["linux:schedule", "linux:schedule (pre-empted)"];

/// Statistics of one function (or one name).
#[derive(Debug, Clone, Copy)]
pub struct Stats {
    /// Sum of the durations of the outermost (non-recursive) calls.
    pub total: u64,
    /// Sum of the durations of all calls (for the averages).
    pub total_all: u64,
    pub total_min: u64,
    pub total_max: u64,
    pub total_sq: u128,
    pub self_sum: u64,
    pub self_min: u64,
    pub self_max: u64,
    pub self_sq: u128,
    pub calls: u64,
    pub size: u64,
}

impl Default for Stats {
    fn default() -> Self {
        Stats {
            total: 0,
            total_all: 0,
            total_min: u64::MAX,
            total_max: 0,
            total_sq: 0,
            self_sum: 0,
            self_min: u64::MAX,
            self_max: 0,
            self_sq: 0,
            calls: 0,
            size: 0,
        }
    }
}

impl Stats {
    /// Adds one call, without the sums of squares.
    #[inline]
    pub fn add_plain(&mut self, call: &Call) {
        let (total, selft) = (call.total, call.self_time());
        if !call.recursive {
            self.total += total;
        }
        self.total_all += total;
        self.total_min = self.total_min.min(total);
        self.total_max = self.total_max.max(total);
        self.self_sum += selft;
        self.self_min = self.self_min.min(selft);
        self.self_max = self.self_max.max(selft);
        self.calls += 1;
    }

    /// Adds one call.
    pub fn add(&mut self, call: &Call) {
        self.add_plain(call);
        let (total, selft) = (call.total, call.self_time());
        self.total_sq += u128::from(total) * u128::from(total);
        self.self_sq += u128::from(selft) * u128::from(selft);
    }

    pub(super) fn merge(&mut self, o: &Stats) {
        self.total += o.total;
        self.total_all += o.total_all;
        self.total_min = self.total_min.min(o.total_min);
        self.total_max = self.total_max.max(o.total_max);
        self.total_sq += o.total_sq;
        self.self_sum += o.self_sum;
        self.self_min = self.self_min.min(o.self_min);
        self.self_max = self.self_max.max(o.self_max);
        self.self_sq += o.self_sq;
        self.calls += o.calls;
    }

    fn avg(sum: u64, n: u64) -> u64 {
        sum.checked_div(n).unwrap_or(0)
    }

    /// Relative standard deviation in percent, as uftrace 0.16+ computes it.
    fn stdv(sum: u64, sq: u128, n: u64) -> f64 {
        let sq = sq as f64;
        if n == 0 || sum == 0 {
            return 0.0;
        }
        let n = n as f64;
        let avg = sum as f64 / n;
        let var = (sq / n - avg * avg).max(0.0);
        (var / n).sqrt() * 100.0 / avg
    }

    /// The value of a numeric column (stdv in hundredths of a percent, for sorting).
    pub fn value(&self, f: ReportField) -> u64 {
        let min = |m: u64| if m == u64::MAX { 0 } else { m };
        match f {
            ReportField::Total => self.total,
            ReportField::TotalAvg => Self::avg(self.total_all, self.calls),
            ReportField::TotalMin => min(self.total_min),
            ReportField::TotalMax => self.total_max,
            ReportField::SelfTime => self.self_sum,
            ReportField::SelfAvg => Self::avg(self.self_sum, self.calls),
            ReportField::SelfMin => min(self.self_min),
            ReportField::SelfMax => self.self_max,
            ReportField::Call => self.calls,
            ReportField::Size => self.size,
            ReportField::TotalStdv => {
                (Self::stdv(self.total_all, self.total_sq, self.calls) * 100.0) as u64
            }
            ReportField::SelfStdv => {
                (Self::stdv(self.self_sum, self.self_sq, self.calls) * 100.0) as u64
            }
        }
    }

    pub(super) fn push_field(&self, out: &mut String, f: ReportField) {
        out.push_str("  ");
        match f {
            ReportField::Call | ReportField::Size => {
                let _ = write!(out, "{:>10}", self.value(f));
            }
            ReportField::TotalStdv => {
                let v = Self::stdv(self.total_all, self.total_sq, self.calls);
                let _ = write!(out, "{v:9.2}%");
            }
            ReportField::SelfStdv => {
                let v = Self::stdv(self.self_sum, self.self_sq, self.calls);
                let _ = write!(out, "{v:9.2}%");
            }
            _ => push_duration(out, self.value(f), false),
        }
    }
}

/// Collects per-function statistics during a walk.
#[derive(Debug, Default)]
pub struct Aggregate {
    by_func: Vec<Stats>,
    /// Size of each function seen, and the number of the call that last saw it (a name
    /// shared by several functions shows the size of the one called last, as in uftrace).
    sizes: Vec<(u64, u64)>,
    calls: u64,
    /// Sums of squares are kept (for the stdv columns).
    pub stdv: bool,
    /// The context switches: `linux:schedule`, then the pre-emptions.
    sched: [Stats; 2],
    /// Which of the two are rows (`--no-sched`, `--no-event` hide both).
    pub show_sched: [bool; 2],
    /// Per task: the function of its last exit, for the size of a switch row.
    last_exit: Vec<Option<FuncId>>,
}

impl Visitor for Aggregate {
    fn wants_entries(&self) -> bool {
        false
    }

    fn exit(&mut self, view: &View<'_, '_>, call: &Call) {
        let i = call.func as usize;
        if self.by_func.len() <= i {
            self.by_func.resize(i + 1, Stats::default());
            self.sizes.resize(i + 1, (0, 0));
        }
        if self.stdv {
            self.by_func[i].add(call);
        } else {
            self.by_func[i].add_plain(call);
        }
        self.calls += 1;
        self.sizes[i].1 = self.calls;
        if self.last_exit.len() <= call.task {
            self.last_exit.resize(call.task + 1, None);
        }
        self.last_exit[call.task] = Some(call.func);
        let _ = view;
    }

    fn sched(&mut self, view: &View<'_, '_>, task: usize, total: u64, preempted: bool) {
        // A switch-in without its switch-out (a thread's first, with `--event-full`) is not
        // a stay off the CPU.
        if total == 0 {
            return;
        }
        let call = Call {
            task: 0,
            func: 0,
            addr: 0,
            exit_addr: 0,
            total,
            child: 0,
            time: 0,
            depth: 0,
            recursive: false,
            unfinished: false,
        };
        let row = &mut self.sched[usize::from(preempted)];
        row.add(&call);
        // uftrace shows the size of the task's last function to return before the switch
        // (measured: not the call switched out in), 0 before the first return.
        let exited = self.last_exit.get(task).copied().flatten();
        row.size = exited.map_or(0, |func| view.func(func).size);
    }
}

impl Aggregate {
    /// Rows by name (functions of several sessions with the same name are one row).
    pub fn rows(&self, walker: &Walker<'_>) -> Vec<(String, Stats)> {
        let mut by_name: HashMap<&str, (Stats, u64)> = HashMap::new();
        for (i, s) in self.by_func.iter().enumerate() {
            if s.calls == 0 {
                continue;
            }
            let name = walker.symbols().func(i as FuncId).name.as_str();
            let (_, seq) = self.sizes[i];
            let size = walker.symbols().func(i as FuncId).size;
            let e = by_name.entry(name).or_insert((Stats::default(), 0));
            e.0.merge(s);
            if seq > e.1 {
                e.0.size = size;
                e.1 = seq;
            }
        }
        for (i, s) in self.sched.iter().enumerate() {
            if s.calls > 0 && self.show_sched[i] {
                let e = by_name.entry(SCHED_NAMES[i]).or_default();
                e.0.merge(s);
                e.0.size = s.size;
            }
        }
        by_name
            .into_iter()
            .map(|(n, (s, _))| (n.to_string(), s))
            .collect()
    }
}

impl Aggregate {
    /// Source locations by row name (`--srcline`): that of the function of the name called
    /// last, as for the size (a library call and the library's function of the same name
    /// are one row, shown with the location of the one that returned last).
    pub fn srclines(&self, walker: &Walker<'_>) -> HashMap<String, String> {
        let mut last: HashMap<&str, (u64, FuncId)> = HashMap::new();
        for (i, s) in self.by_func.iter().enumerate() {
            if s.calls == 0 {
                continue;
            }
            let name = walker.symbols().func(i as FuncId).name.as_str();
            let seq = self.sizes[i].1;
            let e = last.entry(name).or_insert((seq, i as FuncId));
            if seq > e.0 {
                *e = (seq, i as FuncId);
            }
        }
        last.into_iter()
            .filter_map(|(name, (_, func))| {
                let loc = walker.symbols().srcline(func)?;
                Some((name.to_string(), loc.text().to_string()))
            })
            .collect()
    }
}

/// Sorts rows by `keys` (numbers descending, names ascending), then by name.
pub fn sort_rows(rows: &mut [(String, Stats)], keys: &[SortKey]) {
    rows.sort_by(|a, b| {
        for k in keys {
            let o = match k {
                SortKey::Func => a.0.as_bytes().cmp(b.0.as_bytes()),
                SortKey::Field(f) => b.1.value(*f).cmp(&a.1.value(*f)),
            };
            if o.is_ne() {
                return o;
            }
        }
        a.0.as_bytes().cmp(b.0.as_bytes())
    });
}

/// What [`collect`] found.
pub struct Collected {
    /// One row per name, unsorted.
    pub rows: Vec<(String, Stats)>,
    /// `Usage:` complaints about the filters.
    pub notices: Vec<String>,
    /// Problems met while reading.
    pub warnings: Vec<String>,
    /// `--srcline`: the location of each row name that has one.
    pub srclines: HashMap<String, String>,
}

/// Walks `dir` and returns the rows (unsorted), the `Usage:` notices and the warnings.
pub fn collect(dir: &TraceDir, cfg: &Config, stdv: bool) -> Result<Collected> {
    // Per-function sums do not depend on how the tasks' records interleave.
    let mut walker = Walker::new(dir, cfg)?
        .with_sched()
        .with_event_full(cfg.event_full)
        .with_open_kernel_calls()
        .task_order();
    let mut agg = Aggregate {
        stdv,
        show_sched: cfg.sched_shown(),
        ..Aggregate::default()
    };
    let warnings = walker.run(&mut agg)?;
    let rows = agg.rows(&walker);
    let srclines = match cfg.srcline {
        true => agg.srclines(&walker),
        false => HashMap::new(),
    };
    Ok(Collected {
        rows,
        srclines,
        notices: walker.notices().to_vec(),
        warnings,
    })
}
