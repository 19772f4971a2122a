//! utrace's analysis engine. No unsafe code, no command-line parsing.
//!
//! Data flow, from the data directory to the text of a command:
//!
//! ```text
//! TraceDir ──▶ merge::Merge ──▶ callstack::TaskStack (one per task) ──▶ visitor / sink / printer
//!  (mmap)      time order,        pairing, durations, filters,          output::* renders
//!              -r -t -C (gate),   triggers, -D, LOST resync,
//!              symbols, payload   exec/setjmp/longjmp, unfinished
//! ```
//!
//! - [`record_format::TraceDir`] maps the data directory; [`symbols`] resolves addresses through
//!   the session maps and `.sym` files; [`filter`] compiles `-F -N -H -T -C` and triggers.
//! - [`merge`] hands every task's records over in time order (kernel records nested in), after
//!   the reader-level gates of its `gate` submodule; [`payload`] renders recorded arguments and events on
//!   demand; [`perf`] reads the `perf-cpu*.dat` scheduling records.
//! - [`callstack`] is the one per-task call stack: every walk pairs entries and exits, counts
//!   durations and applies the filters and the stack fix-ups through it.
//! - The walks that drive it: [`walk::Walker`] reports entries, finished calls and LOST to a
//!   [`walk::Visitor`] (report, graph and its call-tree builder used by the tui, task graph,
//!   histogram); it has fast paths (direct per-task reading, no filter bookkeeping) when
//!   nothing needs them. [`walk::timed::Walk`] hands every shown entry and exit, with payloads
//!   and perf scheduling, to a [`walk::timed::Sink`] (dump's chrome, flame graph, graphviz,
//!   mermaid). `replay` ([`output::replay`]) walks the merge itself with one record of
//!   lookahead to print leaves as `f();`.
//! - [`output`] holds one module per format; the engine modules above never import it.
#![forbid(unsafe_code)]

pub mod callstack;
pub mod config;
pub mod filter;
pub mod merge;
pub mod output;
pub mod payload;
pub mod perf;
pub mod specs;
pub mod symbols;
pub use record_format::timeval;
pub mod walk;

pub use config::{Config, Demangle, Field, MatchType, ReplayOptions, TimePoint, TimeRange};
pub use output::dump::{DumpFormat, DumpOptions};

use std::io::Write;

/// Errors of the analysis engine.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    #[error(transparent)]
    Format(#[from] record_format::FormatError),
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("{0}")]
    Other(String),
}

pub type Result<T, E = ReplayError> = std::result::Result<T, E>;

/// Prints the call graph of `dir` as `uftrace replay` does. `Usage:` notices go to `out`
/// (uftrace prints them on stdout); warnings go to `warn`.
pub fn replay(
    dir: &record_format::TraceDir,
    cfg: &Config,
    opts: &ReplayOptions,
    out: &mut dyn Write,
    warn: &mut dyn FnMut(&str),
) -> Result<()> {
    let engine = output::replay::Engine::new(dir, cfg, opts, out)?;
    let warnings = engine.run()?;
    for w in warnings {
        warn(&w);
    }
    Ok(())
}

/// Dumps `dir` in the format of `opts` to `out`. `Usage:` notices go to `out` first (uftrace
/// prints them on stdout); warnings go to `warn`.
pub fn dump(
    dir: &record_format::TraceDir,
    cfg: &Config,
    opts: &DumpOptions,
    out: &mut dyn Write,
    warn: &mut dyn FnMut(&str),
) -> Result<()> {
    let warnings = match opts.format {
        DumpFormat::Raw => output::dump_raw::dump(dir, cfg, opts, out)?,
        DumpFormat::Chrome => output::chrome::dump(dir, cfg, opts, out, warn)?,
        DumpFormat::FlameGraph => output::flame::dump(dir, cfg, opts, out)?,
        DumpFormat::Graphviz => output::graphviz::dump(dir, cfg, opts, out)?,
        DumpFormat::Mermaid => output::mermaid::dump(dir, cfg, opts, out)?,
    };
    for w in warnings {
        warn(&w);
    }
    Ok(())
}
