//! `report`: one row per function name with total, self and call statistics (cli.md §5),
//! the task summary (`--task`, [`task`]) and the comparison of two recordings (`--diff`,
//! [`diff`]).
//!
//! The rows come from one walk per data directory ([`stats::collect`]): finished calls are
//! summed per function, then per name; the perf context switches of a uftrace recording
//! are rows of their own (`linux:schedule`, `linux:schedule (pre-empted)`) and count as
//! callee time of the call they interrupt, as in uftrace 0.13.

use crate::{Config, Result};
use record_format::TraceDir;
use std::fmt::Write as _;
use std::io::Write;

pub mod diff;
pub mod stats;
pub mod task;

pub use diff::{report_diff, DiffOptions, DiffPolicy, DiffSide};
pub use stats::{collect, sort_rows, Aggregate, Collected, Stats};
pub use task::{report_tasks, TaskField, TaskKey};

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

    pub fn header(self) -> &'static str {
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

    /// `-f all`: uftrace 0.13's fields (the stdv fields of 0.16+ are named on their own).
    pub const ALL_013: [ReportField; 10] = [
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
    ];
    /// `total,self,call`.
    pub const DEFAULT: [ReportField; 3] =
        [ReportField::Total, ReportField::SelfTime, ReportField::Call];
    /// `--avg-total` (uftrace 0.13's columns: no stdv).
    pub const AVG_TOTAL: [ReportField; 3] = [
        ReportField::TotalAvg,
        ReportField::TotalMin,
        ReportField::TotalMax,
    ];
    /// `--avg-self`.
    pub const AVG_SELF: [ReportField; 3] = [
        ReportField::SelfAvg,
        ReportField::SelfMin,
        ReportField::SelfMax,
    ];

    /// Time columns (durations; the others are counts, sizes and percentages).
    pub fn is_time(self) -> bool {
        !matches!(
            self,
            ReportField::Call | ReportField::Size | ReportField::TotalStdv | ReportField::SelfStdv
        )
    }
}

/// A `-s` key: a column or the function name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SortKey {
    Field(ReportField),
    Func,
}

/// Parses the `-s` lists; `avg` selects `--avg-total` (`Some(true)`) or `--avg-self`
/// (`Some(false)`) for the short keys `avg min max`. `Err(key)` for an unknown key.
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
            (Some(t), "avg" | "min" | "max") => {
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
    /// Colors (`--srcline` locations are gray).
    pub color: bool,
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
        srclines,
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
        s.push_str("  Function");
        s.push_str(match (cfg.srcline, opts.color) {
            (false, _) => "",
            (true, false) => " [Source]",
            (true, true) => "\x1b[90m [Source]\x1b[0m",
        });
        s.push('\n');
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
        if let Some(loc) = srclines.get(name) {
            match opts.color {
                true => {
                    let _ = write!(s, "\x1b[90m [{loc}]\x1b[0m");
                }
                false => {
                    let _ = write!(s, " [{loc}]");
                }
            }
        }
        s.push('\n');
        if s.len() > 1 << 16 {
            out.write_all(s.as_bytes())?;
            s.clear();
        }
    }
    out.write_all(s.as_bytes())?;
    Ok(warnings)
}
