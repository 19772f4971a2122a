//! utrace's analysis engine. No unsafe code, no command-line parsing.
//!
//! Data flow, from the data directory to the text of a command:
//!
//! ```text
//! TraceDir ──▶ merge::Merge ──▶ walk::core::Core ───────────────── Step ──▶ consumers ──▶ output::*
//!  (mmap)      time order,      per task: callstack::TaskStack      Entry    replay printer (+ leaf
//!              -r -t -C (gate), (pairing, durations, filters,       Exit      look-ahead), Walker →
//!              symbols, payload  triggers, -D, LOST resync,         Event     Visitor (report, graph,
//!  perf-cpu*.dat ─────────────▶  exec/setjmp/longjmp, unfinished)   Lost      tui, histogram, task
//!                                 one Policy per uftrace reader     Sched     graph), timed → Sink
//!                                                                             (chrome, perfetto,
//!                                                                              flame, dot, mermaid)
//! ```
//!
//! - [`record_format::TraceDir`] maps the data directory; [`symbols`] resolves addresses through
//!   the session maps and `.sym` files; [`filter`] compiles `-F -N -H -T -C` and triggers.
//! - [`merge`] hands every task's records over in time order (kernel records nested in), after
//!   the reader-level gates of its `gate` submodule; [`payload`] renders recorded arguments and events on
//!   demand; [`perf`] reads the `perf-cpu*.dat` scheduling records.
//! - [`callstack`] is the one per-task call stack: it pairs entries and exits, counts
//!   durations and applies the filters and the stack fix-ups.
//! - [`walk`] is the one time-ordered walk: [`walk::core::Core`] owns the merge and the
//!   tasks' stacks and hands over one [`walk::core::Step`] at a time. Where uftrace's
//!   readers (replay, report/graph, dump) differ, a [`walk::policy::Policy`] names the
//!   choice. Its consumers: `replay` ([`output::replay`], with the walk's look-ahead
//!   [`walk::leaf`] printing leaves as `f();`), the [`walk::Walker`] and its
//!   [`walk::Visitor`]s (report, graph and the tui, task graph, histogram; with fast paths
//!   reading each task's file directly when the order across tasks does not matter), and
//!   [`walk::timed::Walk`] with its [`walk::timed::Sink`]s (dump's chrome, flame graph,
//!   graphviz, mermaid). The raw dump reads the task files in file order itself.
//! - [`output`] holds one module per format and the one call-tree builder
//!   ([`output::calltree`]) of graph, the tui, flame graph, graphviz and mermaid; the engine
//!   modules above never import it.
#![forbid(unsafe_code)]

pub mod callstack;
pub mod config;
pub mod filter;
pub mod io;
pub mod merge;
pub mod modules;
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
        DumpFormat::Perfetto => output::perfetto::dump(dir, cfg, opts, out, warn)?,
        DumpFormat::FlameGraph => output::flame::dump(dir, cfg, opts, out)?,
        DumpFormat::Graphviz => output::graphviz::dump(dir, cfg, opts, out)?,
        DumpFormat::Mermaid => output::mermaid::dump(dir, cfg, opts, out)?,
    };
    for w in warnings {
        warn(&w);
    }
    Ok(())
}
