//! `utrace tui`: text user interface (cli.md §9): the call graph with folding, the report and
//! the info of a data directory, with search and jumps (see [`crate::tui`]).

use crate::config;
use crate::invocation::Invocation;
use crate::notice::Notices;
use crate::tui::model::{App, Row};
use anyhow::Context;
use replay::output::graph::GraphField;
use replay::output::report::{self, ReportField};
use std::io::IsTerminal;
use std::process::ExitCode;

pub fn run(inv: &Invocation, notices: &mut Notices) -> anyhow::Result<ExitCode> {
    let dir = super::open_data(inv)?;
    let inv = inv.with_default_opts(dir.default_opts.as_deref(), notices)?;
    let cfg = config::analysis_config(&inv, notices)?;
    // The graph's columns: uftrace 0.13's graph fields.
    let fields = match inv.args.replay.output_fields.as_deref() {
        Some(spec) => super::graph::parse_fields(
            spec,
            &[GraphField::Total, GraphField::SelfTime, GraphField::Addr],
        )?,
        None => vec![GraphField::Total],
    };
    notices.flush();
    if !(std::io::stdout().is_terminal() && std::io::stdin().is_terminal()) {
        anyhow::bail!("tui needs a terminal: run it with stdin and stdout on a tty");
    }
    let what = || format!("cannot read {}", dir.path.display());
    let (graphs, mut messages) =
        replay::output::graph::call_graphs(&dir, &cfg).with_context(what)?;
    let collected = report::collect(&dir, &cfg, false).with_context(what)?;
    messages.extend(collected.notices);
    messages.extend(collected.warnings);
    let rows = collected
        .rows
        .into_iter()
        .map(|(name, s)| Row {
            total: s.value(ReportField::Total),
            self_time: s.value(ReportField::SelfTime),
            calls: s.value(ReportField::Call),
            name,
        })
        .collect();
    let info = replay::output::info::info_text(&dir);
    let data = dir.path.display().to_string();
    let mut app = App::new(&graphs, rows, info, data).with_fields(fields);
    if let Some(m) = messages.first() {
        app.message = format!("{m} ({} messages)", messages.len());
    }
    crate::tui::run(app).context("terminal")?;
    Ok(ExitCode::SUCCESS)
}
