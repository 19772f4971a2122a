//! `utrace graph [FUNC]`: the call graph of each session (cli.md §6).

use crate::config;
use crate::error::UsageExit;
use crate::invocation::Invocation;
use crate::notice::Notices;
use crate::pager::Output;
use anyhow::Context;
use replay::output::graph::{GraphField, GraphOptions};
use replay::output::task_graph::TaskField;
use std::process::ExitCode;

pub fn run(inv: &Invocation, notices: &mut Notices) -> anyhow::Result<ExitCode> {
    let dir = super::open_data(inv)?;
    let inv = inv.with_default_opts(dir.default_opts.as_deref(), notices)?;
    let cfg = config::analysis_config(&inv, notices)?;
    if inv.args.analysis.task {
        let fields = match inv.args.replay.output_fields.as_deref() {
            Some(spec) => parse_task_fields(spec)?,
            None => TaskField::ALL.to_vec(),
        };
        let tid_width = match inv.args.replay.tid_width.as_deref() {
            Some("6") => 6,
            _ => 7,
        };
        notices.flush();
        let mut out = Output::start(!inv.args.common.no_pager);
        let warnings =
            replay::output::task_graph::task_graph(&dir, &cfg, &fields, tid_width, out.writer())
                .with_context(|| format!("cannot read {}", dir.path.display()))?;
        out.finish()?;
        for w in warnings {
            crate::diag::warn(w);
        }
        return Ok(ExitCode::SUCCESS);
    }
    let fields = match inv.args.replay.output_fields.as_deref() {
        Some(spec) => parse_fields(spec, &GraphField::ALL)?,
        None => vec![GraphField::Total],
    };
    let func = inv
        .program
        .first()
        .map(|f| f.to_string_lossy().into_owned());
    notices.flush();
    let mut out = Output::start(!inv.args.common.no_pager);
    let warnings =
        replay::output::graph::graph(&dir, &cfg, &GraphOptions { fields, func }, out.writer())
            .with_context(|| format!("cannot read {}", dir.path.display()))?;
    out.finish()?;
    for w in warnings {
        crate::diag::warn(w);
    }
    Ok(ExitCode::SUCCESS)
}

/// `-f` for graph: table order; `+LIST` adds to the default (`total`); `none`. `known`: the
/// fields accepted (all for `graph`).
pub(crate) fn parse_fields(spec: &str, known: &[GraphField]) -> Result<Vec<GraphField>, UsageExit> {
    let (mut named, list) = match spec.strip_prefix('+') {
        Some(list) => (vec![GraphField::Total], list),
        None => (Vec::new(), spec),
    };
    for name in list.split(',').filter(|n| !n.is_empty()) {
        if name == "none" {
            named.clear();
            continue;
        }
        let field = GraphField::from_name(name).filter(|f| known.contains(f));
        named.push(field.ok_or_else(|| {
            let possible: Vec<&str> = known.iter().map(|f| f.names()[0]).collect();
            UsageExit {
                stdout_lines: vec![
                    format!("utrace: Unknown field name '{name}'"),
                    format!("utrace:   Possible fields are: {}", possible.join(" ")),
                ],
                code: 1,
            }
        })?);
    }
    Ok(GraphField::ALL
        .into_iter()
        .filter(|f| named.contains(f))
        .collect())
}

/// `-f` for `graph --task`: `total self tid` in table order; `+LIST` adds to all three.
fn parse_task_fields(spec: &str) -> Result<Vec<TaskField>, UsageExit> {
    let (mut named, list) = match spec.strip_prefix('+') {
        Some(list) => (TaskField::ALL.to_vec(), list),
        None => (Vec::new(), spec),
    };
    for name in list.split(',').filter(|n| !n.is_empty()) {
        if name == "none" {
            named.clear();
            continue;
        }
        named.push(TaskField::from_name(name).ok_or_else(|| {
            let possible: Vec<&str> = TaskField::ALL.iter().map(|f| f.names()[0]).collect();
            UsageExit {
                stdout_lines: vec![
                    format!("utrace: Unknown field name '{name}'"),
                    format!("utrace:   Possible fields are: {}", possible.join(" ")),
                ],
                code: 1,
            }
        })?);
    }
    Ok(TaskField::ALL
        .into_iter()
        .filter(|f| named.contains(f))
        .collect())
}
