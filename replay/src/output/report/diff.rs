//! `report --diff DIR2`: the rows of two recordings side by side (cli.md §5.5), with
//! uftrace's `--diff-policy` (`abs`/`no-abs`, `percent`/`no-percent`, `compact`/`full`) and
//! `--sort-column`.
//!
//! Rows are matched by name. They start in uftrace's order (the base recording's names in
//! byte order, then the names only the new one has), and a stable sort by the keys keeps
//! that order among equal keys, as uftrace's does.
//!
//! One deliberate difference: a time difference is printed with its real sign (`+` when
//! the new recording took longer). uftrace 0.13 prints it inverted when not coloring (its
//! percentages and call counts have the right sign).

use super::stats::{collect, Collected, Stats};
use super::{ReportField, SortKey};
use crate::timeval::push_duration;
use crate::{Config, Result};
use record_format::TraceDir;
use std::cmp::Ordering;
use std::collections::HashMap;
use std::fmt::Write as _;
use std::io::Write;

/// `--diff-policy`: how differences are sorted and shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DiffPolicy {
    /// Sorted by the absolute difference (`abs`, default) or the signed one (`no-abs`).
    pub abs: bool,
    /// Time differences as percentages of the base value (`percent`).
    pub percent: bool,
    /// Base, new and difference per field (`full`) instead of the difference (`compact`).
    pub full: bool,
}

impl Default for DiffPolicy {
    fn default() -> Self {
        DiffPolicy {
            abs: true,
            percent: false,
            full: false,
        }
    }
}

impl DiffPolicy {
    /// Parses a comma-separated list over the default; the last word of a pair wins and
    /// unknown words are ignored (as uftrace does).
    pub fn parse(list: &str) -> DiffPolicy {
        let mut p = DiffPolicy::default();
        for word in list.split(',') {
            match word {
                "abs" => p.abs = true,
                "no-abs" => p.abs = false,
                "percent" => p.percent = true,
                "no-percent" => p.percent = false,
                "full" => p.full = true,
                "compact" => p.full = false,
                _ => {}
            }
        }
        p
    }
}

/// How `report --diff` prints.
#[derive(Debug, Clone)]
pub struct DiffOptions {
    /// Columns (table order); empty for `-f none`.
    pub fields: Vec<ReportField>,
    /// Sort keys (the default was filled in by the caller).
    pub sort: Vec<SortKey>,
    pub policy: DiffPolicy,
    /// `--sort-column`: 0 and 1 sort by the base value (uftrace 0.13 reads the base for
    /// both), 2 by the difference.
    pub sort_column: u8,
}

/// One side of `--diff`: where the data is and how it was named.
pub struct DiffSide<'a> {
    pub dir: &'a TraceDir,
    /// The directory as given on the command line.
    pub label: &'a str,
}

/// One name in either recording.
#[derive(Debug, Clone)]
pub struct DiffRow {
    pub name: String,
    pub base: Option<Stats>,
    pub new: Option<Stats>,
}

fn value(s: &Option<Stats>, f: ReportField) -> u64 {
    s.as_ref().map_or(0, |s| s.value(f))
}

impl DiffRow {
    /// New minus base.
    pub fn diff(&self, f: ReportField) -> i64 {
        value(&self.new, f) as i64 - value(&self.base, f) as i64
    }

    /// The change in percent of the base value; `None` (N/A) when either value is 0.
    pub fn percent(&self, f: ReportField) -> Option<f64> {
        let (a, b) = (value(&self.base, f), value(&self.new, f));
        (a != 0 && b != 0).then(|| (b as f64 - a as f64) * 100.0 / a as f64)
    }

    /// The numbers a field key sorts on (descending): with `abs` the absolute value, then
    /// the signed one (an increase before a decrease of the same size, as uftrace orders
    /// them).
    fn key(&self, f: ReportField, opts: &DiffOptions) -> (f64, f64) {
        let v = if opts.sort_column < 2 {
            value(&self.base, f) as f64
        } else if opts.policy.percent {
            self.percent(f).unwrap_or(0.0)
        } else {
            self.diff(f) as f64
        };
        if opts.policy.abs {
            (v.abs(), v)
        } else {
            (v, v)
        }
    }
}

/// Pairs the rows of both sides by name: the base's names in byte order, then the new
/// ones.
pub fn pair_rows(base: Vec<(String, Stats)>, new: Vec<(String, Stats)>) -> Vec<DiffRow> {
    let mut new: HashMap<String, Stats> = new.into_iter().collect();
    let mut rows: Vec<DiffRow> = base
        .into_iter()
        .map(|(name, s)| {
            let other = new.remove(&name);
            DiffRow {
                name,
                base: Some(s),
                new: other,
            }
        })
        .collect();
    rows.sort_by(|a, b| a.name.cmp(&b.name));
    let mut only_new: Vec<DiffRow> = new
        .into_iter()
        .map(|(name, s)| DiffRow {
            name,
            base: None,
            new: Some(s),
        })
        .collect();
    only_new.sort_by(|a, b| a.name.cmp(&b.name));
    rows.extend(only_new);
    rows
}

/// Sorts paired rows by the keys (numbers descending, names ascending); equal rows keep
/// their order.
pub fn sort_diff_rows(rows: &mut [DiffRow], opts: &DiffOptions) {
    rows.sort_by(|a, b| {
        for k in &opts.sort {
            let o = match k {
                SortKey::Func => a.name.cmp(&b.name),
                SortKey::Field(f) => b
                    .key(*f, opts)
                    .partial_cmp(&a.key(*f, opts))
                    .unwrap_or(Ordering::Equal),
            };
            if o.is_ne() {
                return o;
            }
        }
        Ordering::Equal
    });
}

/// Width of a field's column (without the 3 spaces before it).
fn width(f: ReportField, policy: DiffPolicy) -> usize {
    match (policy.full, f.is_time() && !policy.percent) {
        (false, _) => 11,
        (true, true) => 35,
        (true, false) => 32,
    }
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

/// A percentage in `width` columns plus `%` (`N/A` and a blank without one); uftrace
/// shows at most 999.99%.
fn push_percent(out: &mut String, p: Option<f64>, width: usize) {
    match p {
        Some(p) => {
            let _ = write!(out, "{:>+width$.2}%", p.min(999.99));
        }
        None => {
            let _ = write!(out, "{:>width$} ", "N/A");
        }
    }
}

/// A duration of one side in 10 columns; `-` when the name is not in that recording, or
/// when the time is 0 (as uftrace 0.13 prints a zero time in a diff: a call whose entry and
/// exit have the same timestamp).
fn push_side(out: &mut String, s: &Option<Stats>, f: ReportField) {
    match s.as_ref().map(|s| s.value(f)) {
        Some(v) if v != 0 => push_duration(out, v, false),
        _ => {
            let _ = write!(out, "{:>10}", "-");
        }
    }
}

/// A stdv (0.16+ field, hundredths of a percent) as a percentage.
fn stdv(s: &Option<Stats>, f: ReportField) -> f64 {
    value(s, f) as f64 / 100.0
}

fn push_cell(out: &mut String, row: &DiffRow, f: ReportField, policy: DiffPolicy) {
    out.push_str("   ");
    let stdv_field = matches!(f, ReportField::TotalStdv | ReportField::SelfStdv);
    if stdv_field {
        let (a, b) = (stdv(&row.base, f), stdv(&row.new, f));
        if policy.full {
            let _ = write!(out, " {a:>8.2}%  {b:>8.2}%  {:>+8.2}%", b - a);
        } else {
            let _ = write!(out, "{:>+10.2}%", b - a);
        }
    } else if !f.is_time() {
        if policy.full {
            let _ = write!(
                out,
                " {:>9}  {:>9}  {:>+9}",
                value(&row.base, f),
                value(&row.new, f),
                row.diff(f)
            );
        } else {
            let _ = write!(out, "{:>+11}", row.diff(f));
        }
    } else if policy.full {
        push_side(out, &row.base, f);
        out.push_str("  ");
        push_side(out, &row.new, f);
        out.push_str("  ");
        if policy.percent {
            push_percent(out, row.percent(f), 7);
        } else {
            push_signed(out, row.diff(f), 11);
        }
    } else if policy.percent {
        push_percent(out, row.percent(f), 10);
    } else {
        push_signed(out, row.diff(f), 11);
    }
}

/// Prints the diff of the paired, sorted `rows` with its header.
pub fn write_diff(
    s: &mut String,
    base: &DiffSide<'_>,
    new: &DiffSide<'_>,
    rows: &[DiffRow],
    opts: &DiffOptions,
) {
    let cmd = |d: &TraceDir| d.info.cmdline.clone().unwrap_or_default();
    s.push_str("#\n# uftrace diff\n");
    let _ = writeln!(s, "#  [0] base: {}\t(from {})", base.label, cmd(base.dir));
    let _ = writeln!(s, "#  [1] diff: {}\t(from {})", new.label, cmd(new.dir));
    s.push_str("#\n");
    if !opts.fields.is_empty() {
        let mut rule = String::new();
        for f in &opts.fields {
            let w = width(*f, opts.policy);
            let head = if opts.policy.full {
                format!("{} (diff)", diff_header(*f))
            } else {
                f.header().to_string()
            };
            let _ = write!(s, "   {head:>w$}");
            let _ = write!(rule, "   {}", "=".repeat(w));
        }
        s.push_str("   Function\n");
        let _ = writeln!(s, "{rule}   ====================");
    }
    for row in rows {
        for f in &opts.fields {
            push_cell(s, row, *f, opts.policy);
        }
        s.push_str("   ");
        s.push_str(&row.name);
        s.push('\n');
    }
}

/// The header of a field in the full layout: uftrace 0.13 names `self-max` `Self min`
/// there.
fn diff_header(f: ReportField) -> &'static str {
    match f {
        ReportField::SelfMax => ReportField::SelfMin.header(),
        _ => f.header(),
    }
}

/// Prints `report --diff`: `Usage:` notices go to `out` first; warnings are returned.
pub fn report_diff(
    base: DiffSide<'_>,
    new: DiffSide<'_>,
    cfg: &Config,
    opts: &DiffOptions,
    out: &mut dyn Write,
) -> Result<Vec<String>> {
    let stdv = opts
        .fields
        .iter()
        .chain(opts.sort.iter().filter_map(|k| match k {
            SortKey::Field(f) => Some(f),
            SortKey::Func => None,
        }))
        .any(|f| matches!(f, ReportField::TotalStdv | ReportField::SelfStdv));
    let Collected {
        rows: rows0,
        notices,
        mut warnings,
        ..
    } = collect(base.dir, cfg, stdv)?;
    let other = collect(new.dir, cfg, stdv)?;
    warnings.extend(other.warnings);
    for n in &notices {
        writeln!(out, "Usage: {n}")?;
    }
    let mut rows = pair_rows(rows0, other.rows);
    sort_diff_rows(&mut rows, opts);
    let mut s = String::new();
    write_diff(&mut s, &base, &new, &rows, opts);
    out.write_all(s.as_bytes())?;
    Ok(warnings)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_zero_time_of_one_side_is_a_dash() {
        // uftrace 0.13 prints `-` for a time of 0 (a call whose entry and exit have the same
        // timestamp), as for a function the recording does not have.
        let mut out = String::new();
        push_side(&mut out, &Some(stats(3, 0)), ReportField::TotalMin);
        push_side(&mut out, &None, ReportField::TotalMin);
        push_side(&mut out, &Some(stats(3, 10)), ReportField::TotalMin);
        assert_eq!(
            out,
            format!("{:>10}{:>10}{}", "-", "-", {
                let mut t = String::new();
                push_duration(&mut t, 10, false);
                t
            })
        );
    }

    /// Stats of `calls` calls of `each` ns (total and self).
    fn stats(calls: u64, each: u64) -> Stats {
        Stats {
            total: calls * each,
            total_all: calls * each,
            total_min: each,
            total_max: each,
            self_sum: calls * each,
            self_min: each,
            self_max: each,
            calls,
            ..Stats::default()
        }
    }

    fn opts(sort: &[SortKey], policy: &str, sort_column: u8) -> DiffOptions {
        DiffOptions {
            fields: ReportField::DEFAULT.to_vec(),
            sort: sort.to_vec(),
            policy: DiffPolicy::parse(policy),
            sort_column,
        }
    }

    fn names(rows: &[DiffRow]) -> Vec<&str> {
        rows.iter().map(|r| r.name.as_str()).collect()
    }

    /// a: 1000 → 500, b: 100 → 400, c: 2000 → 2000, d only in base (300), e only in new (50).
    fn sample() -> Vec<DiffRow> {
        let base = vec![
            ("c".to_string(), stats(1, 2000)),
            ("a".to_string(), stats(1, 1000)),
            ("b".to_string(), stats(1, 100)),
            ("d".to_string(), stats(1, 300)),
        ];
        let new = vec![
            ("e".to_string(), stats(1, 50)),
            ("b".to_string(), stats(1, 400)),
            ("a".to_string(), stats(1, 500)),
            ("c".to_string(), stats(1, 2000)),
        ];
        pair_rows(base, new)
    }

    const TOTAL: SortKey = SortKey::Field(ReportField::Total);

    #[test]
    fn base_names_first_then_new_ones() {
        assert_eq!(names(&sample()), ["a", "b", "c", "d", "e"]);
    }

    #[test]
    fn policies_parse_last_word_wins() {
        let p = DiffPolicy::parse("full,percent,no-abs,bogus");
        assert_eq!((p.abs, p.percent, p.full), (false, true, true));
        let p = DiffPolicy::parse("full,compact,no-abs,abs");
        assert_eq!(p, DiffPolicy::default());
    }

    #[test]
    fn sorts_by_absolute_or_signed_difference() {
        let mut rows = sample();
        sort_diff_rows(&mut rows, &opts(&[TOTAL], "", 2));
        // |−500|, |+300|, |−300|, |+50|, 0; +300 before −300.
        assert_eq!(names(&rows), ["a", "b", "d", "e", "c"]);
        sort_diff_rows(&mut rows, &opts(&[TOTAL], "no-abs", 2));
        assert_eq!(names(&rows), ["b", "e", "c", "d", "a"]);
    }

    #[test]
    fn percent_sorts_na_as_zero_and_columns_by_base() {
        let mut rows = sample();
        sort_diff_rows(&mut rows, &opts(&[TOTAL], "percent", 2));
        // +300%, −50%, then 0% (c) and N/A (d, e) in their first order.
        assert_eq!(names(&rows), ["b", "a", "c", "d", "e"]);
        let mut rows = sample();
        sort_diff_rows(&mut rows, &opts(&[TOTAL], "full", 1));
        assert_eq!(names(&rows), ["c", "a", "d", "b", "e"]);
    }

    #[test]
    fn cells_of_each_layout() {
        let rows = sample();
        let cell = |row: usize, f: ReportField, policy: &str| {
            let mut s = String::new();
            push_cell(&mut s, &rows[row], f, DiffPolicy::parse(policy));
            s
        };
        assert_eq!(cell(0, ReportField::Total, ""), "     -0.500 us");
        assert_eq!(cell(2, ReportField::Total, ""), "          0 us");
        assert_eq!(cell(1, ReportField::Total, "percent"), "      +300.00%");
        assert_eq!(cell(3, ReportField::Total, "percent"), "          N/A ");
        assert_eq!(cell(1, ReportField::Call, "percent"), "            +0");
        assert_eq!(
            cell(4, ReportField::Total, "full"),
            "            -    0.050 us    +0.050 us"
        );
        assert_eq!(
            cell(3, ReportField::Total, "full,percent"),
            "     0.300 us           -      N/A "
        );
        assert_eq!(
            cell(4, ReportField::Call, "full"),
            "            0          1         +1"
        );
    }

    #[test]
    fn percentages_stop_at_999_99() {
        let rows = pair_rows(
            vec![("f".into(), stats(1, 10))],
            vec![("f".into(), stats(1, 1000))],
        );
        let mut s = String::new();
        push_cell(
            &mut s,
            &rows[0],
            ReportField::Total,
            DiffPolicy::parse("full,percent"),
        );
        assert!(s.ends_with("+999.99%"), "{s:?}");
    }
}
