//! `report --histogram FUNC`: a log2 histogram of FUNC's call durations in the layout of
//! BCC's `funclatency` (not a uftrace feature).
//!
//! ```text
//!      nsecs               : count     distribution
//!          0 -> 1          : 0        |                                        |
//!        256 -> 511        : 3        |****************************************|
//! ```
//!
//! Bucket `i` (from 1) holds durations `d` with `2^(i-1) <= d < 2^i` (bucket 1 also holds 0),
//! i.e. `i` is the number of significant bits of `d`. Lines run from bucket 1 to the highest
//! non-empty bucket; the bar is 40 stars wide for the largest count (20 when buckets past 32
//! are used, with wider number columns), as funclatency prints it.

use crate::filter::Pattern;
use crate::walk::{Call, View, Visitor, Walker};
use crate::{Config, Result};
use record_format::TraceDir;
use std::fmt::Write as _;
use std::io::Write;

const STARS_MAX: u64 = 40;

/// Durations of the calls whose name matches a pattern, by log2 bucket.
#[derive(Debug, Clone)]
pub struct Histogram {
    /// `buckets[i]`: calls whose duration has `i` significant bits.
    pub buckets: [u64; 65],
    pub count: u64,
    pub sum: u128,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram {
            buckets: [0; 65],
            count: 0,
            sum: 0,
        }
    }
}

impl Histogram {
    pub fn add(&mut self, ns: u64) {
        let bits = (64 - ns.leading_zeros()) as usize;
        self.buckets[bits.max(1)] += 1;
        self.count += 1;
        self.sum += u128::from(ns);
    }

    /// The histogram text (empty when nothing was counted), then funclatency's summary line.
    pub fn render(&self, unit: &str) -> String {
        let mut s = String::new();
        let idx_max = self.buckets.iter().rposition(|&c| c > 0).unwrap_or(0);
        let val_max = self.buckets.iter().copied().max().unwrap_or(0);
        if idx_max == 0 {
            return s;
        }
        let wide = idx_max > 32;
        let stars = if wide { STARS_MAX / 2 } else { STARS_MAX };
        if wide {
            let _ = writeln!(s, "               {unit:<29} : count     distribution");
        } else {
            let _ = writeln!(s, "     {unit:<19} : count     distribution");
        }
        for i in 1..=idx_max {
            let mut low: u128 = (1u128 << i) >> 1;
            let high: u128 = (1u128 << i) - 1;
            if low == high {
                low -= 1;
            }
            let val = self.buckets[i];
            let bar = bar(val, val_max, stars);
            let w = stars as usize;
            if wide {
                let _ = writeln!(s, "{low:>20} -> {high:<20} : {val:<8} |{bar:<w$}|");
            } else {
                let _ = writeln!(s, "{low:>10} -> {high:<10} : {val:<8} |{bar:<w$}|");
            }
        }
        let avg = self.sum / u128::from(self.count.max(1));
        let _ = writeln!(
            s,
            "\navg = {avg} {unit}, total: {} {unit}, count: {}",
            self.sum, self.count
        );
        s
    }
}

/// funclatency's bar: `width * val / val_max` stars (at least one for a non-zero count
/// whose share rounds up), never more than `width`.
fn bar(val: u64, val_max: u64, width: u64) -> String {
    if val_max == 0 {
        return String::new();
    }
    let mut n = 0u64;
    // Same loop condition as funclatency: stop once i > width*val/val_max - 1.
    while n < width && (n as f64) <= (width as f64 * val as f64 / val_max as f64) - 1.0 {
        n += 1;
    }
    "*".repeat(n as usize)
}

struct Collect<'p> {
    pattern: &'p Pattern,
    /// Per function id: 0 unknown, 1 matches, 2 does not.
    decided: Vec<u8>,
    hist: Histogram,
}

impl Visitor for Collect<'_> {
    fn wants_entries(&self) -> bool {
        false
    }

    fn exit(&mut self, view: &View<'_, '_>, call: &Call) {
        if call.unfinished {
            return;
        }
        let i = call.func as usize;
        if self.decided.len() <= i {
            self.decided.resize(i + 1, 0);
        }
        if self.decided[i] == 0 {
            self.decided[i] = if self.pattern.matches(view.func(call.func)) {
                1
            } else {
                2
            };
        }
        if self.decided[i] == 1 {
            self.hist.add(call.total);
        }
    }
}

/// Walks `dir` and returns the histogram of the durations of the finished calls of the
/// functions matching `func` (a function pattern), with the walk's notices and warnings.
pub fn collect(
    dir: &TraceDir,
    cfg: &Config,
    func: &str,
) -> Result<(Histogram, Vec<String>, Vec<String>)> {
    let pattern = Pattern::parse(func, cfg.match_type);
    let mut walker = Walker::new(dir, cfg)?.task_order();
    let mut c = Collect {
        pattern: &pattern,
        decided: Vec::new(),
        hist: Histogram::default(),
    };
    let warnings = walker.run(&mut c)?;
    Ok((c.hist, walker.notices().to_vec(), warnings))
}

/// Prints the histogram of `func` (durations in nanoseconds); returns the warnings.
pub fn histogram(
    dir: &TraceDir,
    cfg: &Config,
    func: &str,
    out: &mut dyn Write,
) -> Result<Vec<String>> {
    let (hist, notices, warnings) = collect(dir, cfg, func)?;
    for n in &notices {
        writeln!(out, "Usage: {n}")?;
    }
    if hist.count == 0 {
        writeln!(out, "utrace: no finished calls of '{func}'")?;
    } else {
        out.write_all(hist.render("nsecs").as_bytes())?;
    }
    Ok(warnings)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_and_layout() {
        let mut h = Histogram::default();
        for ns in [0, 1, 2, 3, 300, 300, 400, 511] {
            h.add(ns);
        }
        assert_eq!(h.buckets[1], 2);
        assert_eq!(h.buckets[2], 2);
        assert_eq!(h.buckets[9], 4);
        let text = h.render("nsecs");
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[0],
            "     nsecs               : count     distribution"
        );
        assert_eq!(
            lines[1],
            "         0 -> 1          : 2        |********************                    |"
        );
        assert_eq!(
            lines[9],
            "       256 -> 511        : 4        |****************************************|"
        );
        assert_eq!(lines.len(), 1 + 9 + 2);
    }
}
