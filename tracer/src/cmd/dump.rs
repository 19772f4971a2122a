//! `utrace dump`: the raw records, or the trace as Chrome trace-event JSON, a Perfetto
//! protobuf trace (refused on a terminal), folded stacks for
//! flame graphs (`--svg`: the flame graph itself), a graphviz or a mermaid call graph
//! (cli.md §8).

use crate::config;
use crate::invocation::Invocation;
use crate::notice::Notices;
use crate::pager::Output;
use crate::timefmt;
use crate::usage;
use anyhow::Context;
use replay::{DumpFormat, DumpOptions};
use std::io::IsTerminal;
use std::process::ExitCode;

pub fn run(inv: &Invocation, notices: &mut Notices) -> anyhow::Result<ExitCode> {
    let dir = super::open_data(inv)?;
    let inv = inv.with_default_opts(dir.default_opts.as_deref(), notices)?;
    let cfg = config::analysis_config(&inv, notices)?;
    let replay_opts = config::replay_options(&inv, &cfg, notices)?;
    let a = &inv.args.analysis;
    let format = if a.chrome {
        DumpFormat::Chrome
    } else if a.perfetto {
        DumpFormat::Perfetto
    } else if a.flame_graph {
        DumpFormat::FlameGraph
    } else if a.graphviz {
        DumpFormat::Graphviz
    } else if a.mermaid {
        DumpFormat::Mermaid
    } else {
        DumpFormat::Raw
    };
    if a.svg && format != DumpFormat::FlameGraph {
        notices.usage("--svg is only used with --flame-graph (ignoring..)");
    }
    let sample_time = match &a.sample_time {
        Some(t) => Some(timefmt::parse_time(t, 9, notices)?),
        None => None,
    };
    let common = &inv.args.common;
    let opts = DumpOptions {
        format,
        debug: common.verbose > 0 || common.debug > 0,
        no_args: replay_opts.no_args,
        sample_time,
        svg: a.svg,
        tid_width: replay_opts.tid_width,
        version: usage::version_line(),
        recorded_time: recorded_time(&dir.path.join("info")),
    };
    notices.flush();
    if format == DumpFormat::Perfetto && std::io::stdout().is_terminal() {
        crate::diag::line(
            "utrace: dump --perfetto writes a binary trace: redirect standard output to a file or a pipe",
        );
        return Ok(ExitCode::from(1));
    }

    let mut out = Output::start(!common.no_pager && format != DumpFormat::Perfetto);
    let mut warn = |msg: &str| {
        crate::diag::warn(msg);
    };
    replay::dump(&dir, &cfg, &opts, out.writer(), &mut warn)
        .with_context(|| format!("cannot dump {}", dir.path.display()))?;
    out.finish()?;
    Ok(ExitCode::SUCCESS)
}

/// The modification time of `info` in `ctime` form (`Sat Nov 21 14:17:17 2026`, local time),
/// which uftrace shows as the recording time; empty if unknown.
fn recorded_time(info: &std::path::Path) -> String {
    let Ok(meta) = std::fs::metadata(info) else {
        return String::new();
    };
    let Ok(since) = meta
        .modified()
        .map(|m| m.duration_since(std::time::UNIX_EPOCH))
    else {
        return String::new();
    };
    let Ok(secs) = since.map(|d| d.as_secs()) else {
        return String::new();
    };
    let Ok(t) = libc::time_t::try_from(secs) else {
        return String::new();
    };
    let mut buf = [0 as libc::c_char; 64];
    // SAFETY: ctime_r writes at most 26 bytes (NUL included) into `buf`, which is 64 long, and
    // returns NULL or `buf`.
    let p = unsafe { libc::ctime_r(&t, buf.as_mut_ptr()) };
    if p.is_null() {
        return String::new();
    }
    // SAFETY: `p` points to `buf`, NUL-terminated by ctime_r.
    let text = unsafe { std::ffi::CStr::from_ptr(p) };
    text.to_string_lossy().trim_end().to_string()
}
