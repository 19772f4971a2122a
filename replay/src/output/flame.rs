//! `dump --flame-graph` (cli.md §8.3): folded stacks for flamegraph.pl, `a;b;c WEIGHT`, one
//! line per call path of the merged call tree, depth first in first-call order.
//!
//! The weight of a path is its self time in whole sampling periods: the node's total time
//! minus its callees' time, where a callee counts only in whole periods (the remainder stays
//! with the caller). The period is `--sample-time`, or else derived from the recorded elapsed
//! time (1 us, times 10 while a million periods do not cover it, at most 1 s). Without a
//! recorded elapsed time the weight is the call count.
//!
//! With `--svg` the folded stacks are rendered to an SVG flame graph by `inferno`.

use super::calltree::{NameTree, ROOT};
use super::dump::{write_notices, DumpOptions};
use crate::config::Config;
use crate::walk::timed::Walk;
use crate::{ReplayError, Result};
use record_format::TraceDir;
use std::io::Write;

/// Periods per recording that the default sampling period aims for.
const SAMPLES: u64 = 1_000_000;
const NSEC_PER_SEC: u64 = 1_000_000_000;

/// The default sampling period for a recording that lasted `elapsed` ("SEC.NSEC").
pub fn default_sample_time(elapsed: &str) -> Option<u64> {
    let secs: f64 = elapsed.split_whitespace().next()?.parse().ok()?;
    let total = (secs * 1e9) as u64;
    let mut period = 1000u64;
    while period * SAMPLES < total && period < NSEC_PER_SEC {
        period *= 10;
    }
    Some(period)
}

/// The folded lines of the call tree.
pub fn folded(tree: &NameTree, sample_time: u64) -> Vec<String> {
    let mut lines = Vec::new();
    // The path of the node being visited, by depth (the root has no name in the path).
    let mut path: Vec<&str> = Vec::new();
    tree.walk(|n, depth| {
        if n == ROOT {
            return;
        }
        let node = tree.node(n);
        path.truncate(depth - 1);
        path.push(tree.name(n));
        let mut weight = node.calls;
        if weight > 0 && sample_time > 0 {
            weight = node.time.wrapping_sub(node.child_time) / sample_time;
        }
        if weight > 0 {
            lines.push(format!("{} {weight}", path.join(";")));
        }
    });
    lines
}

/// Writes the folded stacks (or the SVG) of `dir`; returns the warnings.
pub fn dump(
    dir: &TraceDir,
    cfg: &Config,
    opts: &DumpOptions,
    out: &mut dyn Write,
) -> Result<Vec<String>> {
    let walk = Walk::new(dir, cfg, true);
    write_notices(out, &walk.notices)?;
    let sample_time = opts
        .sample_time
        .filter(|&t| t > 0)
        .or_else(|| {
            let (_, elapsed) = dir.info.record_date.as_ref()?;
            default_sample_time(elapsed)
        })
        .unwrap_or(0);
    let mut tree = NameTree::new("", dir.data.len(), sample_time);
    let warnings = walk.run(&mut tree)?;
    let lines = folded(&tree, sample_time);
    if opts.svg {
        svg(&lines, &exe_title(dir), out)?;
    } else {
        for l in &lines {
            writeln!(out, "{l}")?;
        }
    }
    Ok(warnings)
}

fn exe_title(dir: &TraceDir) -> String {
    format!("Flame Graph: {}", super::dump::exe_basename(dir))
}

/// Renders folded lines as an SVG flame graph.
pub fn svg(lines: &[String], title: &str, out: &mut dyn Write) -> Result<()> {
    let mut opts = inferno::flamegraph::Options::default();
    opts.title = title.to_string();
    opts.count_name = "samples".to_string();
    if lines.is_empty() {
        // inferno refuses an empty profile; an empty graph is still a valid answer.
        writeln!(
            out,
            "<?xml version=\"1.0\" standalone=\"no\"?>\n<svg version=\"1.1\" \
             xmlns=\"http://www.w3.org/2000/svg\" width=\"1200\" height=\"60\"><text x=\"600\" \
             y=\"30\" text-anchor=\"middle\">{title}: no samples</text></svg>"
        )?;
        return Ok(());
    }
    inferno::flamegraph::from_lines(&mut opts, lines.iter().map(String::as_str), out)
        .map_err(|e| ReplayError::Other(format!("cannot render the flame graph: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_period_follows_elapsed_time() {
        assert_eq!(default_sample_time("0.011540324 sec"), Some(1_000));
        assert_eq!(default_sample_time("0.9 sec"), Some(1_000));
        assert_eq!(default_sample_time("2.005270567 sec"), Some(10_000));
        assert_eq!(default_sample_time("99999 sec"), Some(100_000_000));
        assert_eq!(default_sample_time("10000000 sec"), Some(NSEC_PER_SEC));
        assert_eq!(default_sample_time("x"), None);
    }
}
