//! `report`: one row per function name with total, self and call statistics (cli.md §5),
//! the task summary (`--task`) and the comparison of two recordings (`--diff`).

use crate::symbols::FuncId;
use crate::timeval::push_duration;
use crate::walk::{Call, View, Visitor, Walker};
use crate::{Config, Result};
use record_format::TraceDir;
use std::collections::HashMap;
use std::fmt::Write as _;
use std::io::Write;

/// Report columns (`-f`), in the order they are printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReportField {
    Total,
    TotalAvg,
    TotalMin,
    TotalMax,
    SelfTime,
    SelfAvg,
    SelfMin,
    SelfMax,
    Call,
    Size,
    TotalStdv,
    SelfStdv,
}

impl ReportField {
    pub const ALL: [ReportField; 12] = [
        ReportField::Total,
        ReportField::TotalAvg,
        ReportField::TotalMin,
        ReportField::TotalMax,
        ReportField::SelfTime,
        ReportField::SelfAvg,
        ReportField::SelfMin,
        ReportField::SelfMax,
        ReportField::Call,
        ReportField::Size,
        ReportField::TotalStdv,
        ReportField::SelfStdv,
    ];

    /// The `-f` name (also the `-s` key).
    pub fn name(self) -> &'static str {
        match self {
            ReportField::Total => "total",
            ReportField::TotalAvg => "total-avg",
            ReportField::TotalMin => "total-min",
            ReportField::TotalMax => "total-max",
            ReportField::SelfTime => "self",
            ReportField::SelfAvg => "self-avg",
            ReportField::SelfMin => "self-min",
            ReportField::SelfMax => "self-max",
            ReportField::Call => "call",
            ReportField::Size => "size",
            ReportField::TotalStdv => "total-stdv",
            ReportField::SelfStdv => "self-stdv",
        }
    }

    pub fn from_name(s: &str) -> Option<ReportField> {
        let s = s.replace('_', "-");
        ReportField::ALL.into_iter().find(|f| f.name() == s)
    }

    fn header(self) -> &'static str {
        match self {
            ReportField::Total => "Total time",
            ReportField::TotalAvg => "Total avg",
            ReportField::TotalMin => "Total min",
            ReportField::TotalMax => "Total max",
            ReportField::SelfTime => "Self time",
            ReportField::SelfAvg => "Self avg",
            ReportField::SelfMin => "Self min",
            ReportField::SelfMax => "Self max",
            ReportField::Call => "Calls",
            ReportField::Size => "Size",
            ReportField::TotalStdv => "Total stdv",
            ReportField::SelfStdv => "Self stdv",
        }
    }

    /// `total,self,call`.
    pub const DEFAULT: [ReportField; 3] =
        [ReportField::Total, ReportField::SelfTime, ReportField::Call];
    /// `--avg-total`.
    pub const AVG_TOTAL: [ReportField; 4] = [
        ReportField::TotalAvg,
        ReportField::TotalMin,
        ReportField::TotalMax,
        ReportField::TotalStdv,
    ];
    /// `--avg-self`.
    pub const AVG_SELF: [ReportField; 4] = [
        ReportField::SelfAvg,
        ReportField::SelfMin,
        ReportField::SelfMax,
        ReportField::SelfStdv,
    ];
}

/// A `-s` key: a column or the function name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SortKey {
    Field(ReportField),
    Func,
}

/// Parses the `-s` lists; `avg` selects `--avg-total` (`Some(true)`) or `--avg-self`
/// (`Some(false)`) for the short keys `avg min max stdv`. `Err(key)` for an unknown key.
pub fn parse_sort_keys(lists: &[String], avg: Option<bool>) -> Result<Vec<SortKey>, String> {
    let mut keys = Vec::new();
    // Repeated -s options are joined with ';' and split at ',' only (as uftrace does, so
    // `-s self -s call` is the unknown key `self;call`).
    let joined = lists.join(";");
    for key in joined.split(',') {
        if key.is_empty() {
            continue;
        }
        let norm = key.replace('_', "-");
        let short = match (avg, norm.as_str()) {
            (Some(t), "avg" | "min" | "max" | "stdv") => {
                Some(format!("{}-{norm}", if t { "total" } else { "self" }))
            }
            _ => None,
        };
        let name = short.as_deref().unwrap_or(&norm);
        if name == "func" {
            keys.push(SortKey::Func);
        } else if let Some(f) = ReportField::from_name(name) {
            keys.push(SortKey::Field(f));
        } else {
            return Err(key.to_string());
        }
    }
    Ok(keys)
}

/// How `report` prints.
#[derive(Debug, Clone)]
pub struct ReportOptions {
    /// Columns; empty for `-f none`.
    pub fields: Vec<ReportField>,
    /// Sort keys (the default was filled in by the caller).
    pub sort: Vec<SortKey>,
    /// TID column width of `--task` (7, or 6 for the 0.13 layout).
    pub tid_width: usize,
}

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
        let (total, selft) = (call.total, call.self_time());
        if !call.recursive {
            self.total += total;
        }
        self.total_all += total;
        self.total_min = self.total_min.min(total);
        self.total_max = self.total_max.max(total);
        self.total_sq += u128::from(total) * u128::from(total);
        self.self_sum += selft;
        self.self_min = self.self_min.min(selft);
        self.self_max = self.self_max.max(selft);
        self.self_sq += u128::from(selft) * u128::from(selft);
        self.calls += 1;
    }

    fn merge(&mut self, o: &Stats) {
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

    fn push_field(&self, out: &mut String, f: ReportField) {
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
        let _ = view;
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
        by_name
            .into_iter()
            .map(|(n, (s, _))| (n.to_string(), s))
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
}

/// Walks `dir` and returns the rows (unsorted), the `Usage:` notices and the warnings.
pub fn collect(dir: &TraceDir, cfg: &Config, stdv: bool) -> Result<Collected> {
    // Per-function sums do not depend on how the tasks' records interleave.
    let mut walker = Walker::new(dir, cfg)?.task_order();
    let mut agg = Aggregate {
        stdv,
        ..Aggregate::default()
    };
    let warnings = walker.run(&mut agg)?;
    let rows = agg.rows(&walker);
    Ok(Collected {
        rows,
        notices: walker.notices().to_vec(),
        warnings,
    })
}

/// Whether a stdv column is shown or sorted on.
fn needs_stdv(opts: &ReportOptions) -> bool {
    let stdv = |f: &ReportField| matches!(f, ReportField::TotalStdv | ReportField::SelfStdv);
    opts.fields.iter().any(stdv)
        || opts
            .sort
            .iter()
            .any(|k| matches!(k, SortKey::Field(f) if stdv(f)))
}

/// Prints the report of `dir`. `Usage:` notices go to `out` first; warnings are returned.
pub fn report(
    dir: &TraceDir,
    cfg: &Config,
    opts: &ReportOptions,
    out: &mut dyn Write,
) -> Result<Vec<String>> {
    let Collected {
        mut rows,
        notices,
        warnings,
    } = collect(dir, cfg, needs_stdv(opts))?;
    for n in &notices {
        writeln!(out, "Usage: {n}")?;
    }
    sort_rows(&mut rows, &opts.sort);
    let mut s = String::new();
    if !opts.fields.is_empty() {
        for f in &opts.fields {
            let _ = write!(s, "  {:>10}", f.header());
        }
        s.push_str("  Function\n");
        for _ in &opts.fields {
            s.push_str("  ==========");
        }
        s.push_str("  ====================\n");
    }
    for (name, st) in &rows {
        for f in &opts.fields {
            st.push_field(&mut s, *f);
        }
        s.push_str("  ");
        s.push_str(name);
        s.push('\n');
        if s.len() > 1 << 16 {
            out.write_all(s.as_bytes())?;
            s.clear();
        }
    }
    out.write_all(s.as_bytes())?;
    Ok(warnings)
}

/// `report --task`: columns of the task summary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskField {
    Total,
    SelfTime,
    Tid,
    Func,
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

/// Prints `report --task`.
pub fn report_tasks(
    dir: &TraceDir,
    cfg: &Config,
    keys: &[TaskKey],
    tid_width: usize,
    out: &mut dyn Write,
) -> Result<Vec<String>> {
    let mut walker = Walker::new(dir, cfg)?.exits_only().task_order();
    for n in walker.notices() {
        writeln!(out, "Usage: {n}")?;
    }
    // A task's run time is the sum of the self times of its calls (uftrace's task report).
    let mut per_task = TaskTimes(vec![(0, 0); dir.data.len()]);
    let warnings = walker.run(&mut per_task)?;
    let mut rows: Vec<(u64, u32, u64, String)> = walker
        .task_summary()
        .iter()
        .enumerate()
        .filter(|(_, t)| t.allowed && t.first != 0)
        .filter(|(i, _)| per_task.0[*i].1 > 0)
        .map(|(i, t)| {
            let (time, calls) = per_task.0[i];
            (time, t.tid, calls, walker.comm(i).to_string())
        })
        .collect();
    rows.sort_by(|a, b| {
        for k in keys {
            let o = match k {
                TaskKey::Total | TaskKey::SelfTime => b.0.cmp(&a.0),
                TaskKey::Tid => a.1.cmp(&b.1),
                TaskKey::Func => b.2.cmp(&a.2),
                TaskKey::Name => a.3.cmp(&b.3),
            };
            if o.is_ne() {
                return o;
            }
        }
        a.1.cmp(&b.1)
    });
    let mut s = String::new();
    let _ = writeln!(
        s,
        "  Total time   Self time  {:>w$}   Num funcs  Task name",
        "TID",
        w = tid_width
    );
    let _ = writeln!(
        s,
        "  ==========  ==========  {}  ==========  ====================",
        "=".repeat(tid_width)
    );
    for (total, tid, funcs, comm) in &rows {
        s.push_str("  ");
        push_duration(&mut s, *total, false);
        s.push_str("  ");
        push_duration(&mut s, *total, false);
        let _ = writeln!(s, "  {tid:>w$}  {funcs:>10}  {comm:<16}", w = tid_width);
    }
    out.write_all(s.as_bytes())?;
    Ok(warnings)
}

/// Per task: the sum of the self times of its calls, and the number of calls.
struct TaskTimes(Vec<(u64, u64)>);

impl Visitor for TaskTimes {
    fn wants_entries(&self) -> bool {
        false
    }

    fn exit(&mut self, _view: &View<'_, '_>, call: &Call) {
        let t = &mut self.0[call.task];
        t.0 += call.self_time();
        t.1 += 1;
    }
}

/// One side of `--diff`: where the data is and how it was recorded.
pub struct DiffSide<'a> {
    pub dir: &'a TraceDir,
    /// The directory as given on the command line.
    pub label: &'a str,
}

/// A signed time difference in a column of `width` (`+1.234 us`, `0 us` when equal).
fn push_signed(out: &mut String, diff: i64, width: usize) {
    if diff == 0 {
        let _ = write!(out, "{:>width$}", "0 us");
        return;
    }
    let mut t = String::new();
    push_duration(&mut t, diff.unsigned_abs(), false);
    let t = t.trim_start();
    let sign = if diff > 0 { '+' } else { '-' };
    let _ = write!(out, "{:>width$}", format!("{sign}{t}"));
}

/// Prints `report --diff` in the default (compact, absolute-sorted) policy.
pub fn report_diff(
    base: DiffSide<'_>,
    new: DiffSide<'_>,
    cfg: &Config,
    sort: &[SortKey],
    out: &mut dyn Write,
) -> Result<Vec<String>> {
    let Collected {
        rows: rows0,
        notices,
        mut warnings,
    } = collect(base.dir, cfg, false)?;
    let other = collect(new.dir, cfg, false)?;
    let rows1 = other.rows;
    warnings.extend(other.warnings);
    for n in &notices {
        writeln!(out, "Usage: {n}")?;
    }
    let mut map: HashMap<String, (Stats, Stats)> = HashMap::new();
    for (n, s) in rows0 {
        map.entry(n)
            .or_insert_with(|| (Stats::default(), Stats::default()))
            .0 = s;
    }
    for (n, s) in rows1 {
        map.entry(n)
            .or_insert_with(|| (Stats::default(), Stats::default()))
            .1 = s;
    }
    let val = |s: &Stats, f: ReportField| -> i64 {
        if s.calls == 0 {
            0
        } else {
            s.value(f) as i64
        }
    };
    let mut rows: Vec<(String, [i64; 3])> = map
        .into_iter()
        .map(|(n, (a, b))| {
            let d = [
                val(&b, ReportField::Total) - val(&a, ReportField::Total),
                val(&b, ReportField::SelfTime) - val(&a, ReportField::SelfTime),
                b.calls as i64 - a.calls as i64,
            ];
            (n, d)
        })
        .collect();
    rows.sort_by(|a, b| {
        for k in sort {
            let o = match k {
                SortKey::Func => a.0.cmp(&b.0),
                SortKey::Field(ReportField::SelfTime) => {
                    b.1[1].unsigned_abs().cmp(&a.1[1].unsigned_abs())
                }
                SortKey::Field(ReportField::Call) => {
                    b.1[2].unsigned_abs().cmp(&a.1[2].unsigned_abs())
                }
                SortKey::Field(_) => b.1[0].unsigned_abs().cmp(&a.1[0].unsigned_abs()),
            };
            if o.is_ne() {
                return o;
            }
        }
        a.0.cmp(&b.0)
    });
    let cmd = |d: &TraceDir| d.info.cmdline.clone().unwrap_or_default();
    let mut s = String::new();
    s.push_str("#\n# uftrace diff\n");
    let _ = writeln!(s, "#  [0] base: {}\t(from {})", base.label, cmd(base.dir));
    let _ = writeln!(s, "#  [1] diff: {}\t(from {})", new.label, cmd(new.dir));
    s.push_str("#\n");
    s.push_str("    Total time     Self time         Calls   Function\n");
    s.push_str("   ===========   ===========   ===========   ====================\n");
    for (name, d) in &rows {
        s.push_str("   ");
        push_signed(&mut s, d[0], 11);
        s.push_str("   ");
        push_signed(&mut s, d[1], 11);
        let _ = writeln!(s, "     {:>+9}   {name}", d[2]);
    }
    out.write_all(s.as_bytes())?;
    Ok(warnings)
}
