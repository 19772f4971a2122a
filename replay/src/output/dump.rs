//! `dump` (cli.md §8): its options and the helpers its formats share. The raw format reads
//! the task files itself, in file order ([`super::dump_raw`]); the others are sinks of the
//! one walk ([`crate::walk::timed`]), the graph formats through the one call-tree builder
//! ([`super::calltree`]). [`crate::dump`] picks the format.

use record_format::TraceDir;
use std::io::{self, Write};

/// Which format `dump` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DumpFormat {
    /// Every record of every task file (the default).
    #[default]
    Raw,
    Chrome,
    /// Perfetto's protobuf trace.
    Perfetto,
    FlameGraph,
    Graphviz,
    Mermaid,
}

/// Display options of `dump`.
#[derive(Debug, Clone, Default)]
pub struct DumpOptions {
    pub format: DumpFormat,
    /// `--debug`/`-v`: hex of every record and the task list (raw format).
    pub debug: bool,
    /// `--no-args`: no arguments and return values.
    pub no_args: bool,
    /// `--sample-time` in nanoseconds (flame graph).
    pub sample_time: Option<u64>,
    /// `--svg`: render the flame graph as SVG instead of folded stacks.
    pub svg: bool,
    /// TID width of the raw lines: 7 (uftrace 0.17+ layout) or 6 (0.13).
    pub tid_width: usize,
    /// The version line of the running program, e.g. `utrace v0.1.0 ( x86_64 )`.
    pub version: String,
    /// When the data was recorded (`ctime` text of the `info` file's mtime).
    pub recorded_time: String,
}

/// Basename of the recorded executable (the root of the call graphs).
pub fn exe_basename(dir: &TraceDir) -> String {
    let exe = dir.info.exename.as_deref().unwrap_or("");
    exe.rsplit('/').next().unwrap_or(exe).to_string()
}

/// Writes the `Usage:` notices of a walk.
pub(crate) fn write_notices(out: &mut dyn Write, notices: &[String]) -> io::Result<()> {
    for n in notices {
        writeln!(out, "Usage: {n}")?;
    }
    Ok(())
}
