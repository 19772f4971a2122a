//! utrace's analysis engine. No unsafe code, no command-line parsing.
//!
//! Data flow: [`record_format::TraceDir`] maps the data directory; [`symbols`] resolves
//! addresses through the session maps and `.sym` files (or the ELF files as a fallback);
//! [`merge`] walks every task's records in time order; [`fstack`] pairs entries and exits per
//! task and applies the filters of [`filter`]; an [`output`] module renders the result.
#![forbid(unsafe_code)]

pub mod callstack;
pub mod config;
pub mod filter;
pub mod gate;
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
