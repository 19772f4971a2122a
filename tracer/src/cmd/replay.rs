//! `utrace replay`: print the recorded calls as a tree (cli.md §4).

use crate::config;
use crate::invocation::Invocation;
use crate::notice::Notices;
use crate::pager::Output;
use anyhow::Context;
use record_format::TraceDir;
use std::process::ExitCode;

pub fn run(inv: &Invocation, notices: &mut Notices) -> anyhow::Result<ExitCode> {
    let dir = super::open_data(inv)?;
    show(&dir, inv, notices)
}

/// Replays the opened data directory `dir` with the options of `inv` (and the directory's
/// `default.opts`); `live` calls this after recording.
pub fn show(dir: &TraceDir, inv: &Invocation, notices: &mut Notices) -> anyhow::Result<ExitCode> {
    let inv = inv.with_default_opts(dir.default_opts.as_deref(), notices)?;
    let mut cfg = config::analysis_config(&inv, notices)?;
    // `--disable` (replay only, as in uftrace; `--trace=off` is its newer spelling): nothing
    // shows before a trace_on trigger.
    cfg.start_disabled = inv.args.filter.disable || inv.args.filter.trace.as_deref() == Some("off");
    let opts = config::replay_options(&inv, &cfg, notices)?;
    notices.flush();

    let mut out = Output::start(!inv.args.common.no_pager);
    let mut warn = |msg: &str| {
        crate::diag::warn(msg);
    };
    replay::replay(dir, &cfg, &opts, out.writer(), &mut warn)
        .with_context(|| format!("cannot replay {}", dir.path.display()))?;
    out.finish()?;
    Ok(ExitCode::SUCCESS)
}
