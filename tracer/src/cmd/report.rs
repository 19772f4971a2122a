//! `utrace report`: per-function statistics (cli.md §5), `--task`, `--diff`,
//! `--histogram FUNC` and `--io` (I/O requests of a `-k` trace, [`replay::output::io`]).

use crate::config;
use crate::error::UsageExit;
use crate::invocation::Invocation;
use crate::notice::Notices;
use crate::pager::Output;
use anyhow::Context;
use record_format::TraceDir;
use replay::output::report::{
    self, parse_sort_keys, DiffOptions, DiffPolicy, DiffSide, ReportField, ReportOptions, SortKey,
    TaskField, TaskKey,
};
use std::process::ExitCode;

pub fn run(inv: &Invocation, notices: &mut Notices) -> anyhow::Result<ExitCode> {
    let dir = super::open_data(inv)?;
    show(&dir, inv, notices)
}

/// Reports the opened data directory `dir` with the options of `inv` (and the directory's
/// `default.opts`); `live --report` calls this before its replay.
pub fn show(dir: &TraceDir, inv: &Invocation, notices: &mut Notices) -> anyhow::Result<ExitCode> {
    let inv = inv.with_default_opts(dir.default_opts.as_deref(), notices)?;
    let cfg = config::analysis_config(&inv, notices)?;
    let args = &inv.args.analysis;
    let tid_width = match inv.args.replay.tid_width.as_deref() {
        Some("6") => 6,
        _ => 7,
    };

    if let Some(func) = &args.histogram {
        notices.flush();
        let mut out = Output::start(!inv.args.common.no_pager);
        let warnings = replay::output::histogram::histogram(dir, &cfg, func, out.writer())
            .with_context(|| format!("cannot read {}", dir.path.display()))?;
        out.finish()?;
        warn_all(&warnings);
        return Ok(ExitCode::SUCCESS);
    }

    if args.io {
        notices.flush();
        let (requests, warnings) = replay::io::requests(dir, &cfg)
            .with_context(|| format!("cannot read {}", dir.path.display()))?;
        let requests = replay::io::select(requests, &cfg);
        let mut out = Output::start(!inv.args.common.no_pager);
        replay::output::io::report(&requests, out.writer())?;
        out.finish()?;
        warn_all(&warnings);
        return Ok(ExitCode::SUCCESS);
    }

    if args.task {
        let mut keys = Vec::new();
        for k in args.sort.iter().flat_map(|l| l.split(',')) {
            match TaskKey::from_name(k) {
                Some(key) => keys.push(key),
                None if k.is_empty() => {}
                None => return Err(bad_sort_key(k, notices)),
            }
        }
        if keys.is_empty() {
            keys.push(TaskKey::Total);
        }
        let fields = match inv.args.replay.output_fields.as_deref() {
            Some(spec) => parse_task_fields(spec)?,
            None => TaskField::ALL.to_vec(),
        };
        notices.flush();
        let mut out = Output::start(!inv.args.common.no_pager);
        let warnings = report::report_tasks(dir, &cfg, &fields, &keys, tid_width, out.writer())
            .with_context(|| format!("cannot read {}", dir.path.display()))?;
        out.finish()?;
        warn_all(&warnings);
        return Ok(ExitCode::SUCCESS);
    }

    if args.avg_total && args.avg_self {
        notices.flush();
        return Err(UsageExit {
            stdout_lines: vec![
                "Usage: --avg-total and --avg-self options should not be used together.".into(),
            ],
            code: 1,
        }
        .into());
    }
    let explicit = inv.args.replay.output_fields.as_deref();
    let avg = match (explicit, args.avg_total, args.avg_self) {
        (Some(_), true, _) | (Some(_), _, true) => {
            notices
                .warn("--avg-total and --avg-self options are ignored when used with -f option.");
            None
        }
        (None, true, _) => Some(true),
        (None, _, true) => Some(false),
        _ => None,
    };
    let defaults: &[ReportField] = match avg {
        Some(true) => &ReportField::AVG_TOTAL,
        Some(false) => &ReportField::AVG_SELF,
        None => &ReportField::DEFAULT,
    };
    let fields = match explicit {
        Some(spec) => parse_fields(spec, defaults)?,
        None => defaults.to_vec(),
    };
    let mut sort = match parse_sort_keys(&args.sort, avg) {
        Ok(k) => k,
        Err(k) => return Err(bad_sort_key(&k, notices)),
    };
    if sort.is_empty() {
        sort.push(SortKey::Field(match avg {
            Some(true) => ReportField::TotalAvg,
            Some(false) => ReportField::SelfAvg,
            None => ReportField::Total,
        }));
    }

    if let Some(other) = &args.diff {
        let dir2 = super::open_data_at(std::path::Path::new(other))?;
        let mut sort_column = 2;
        if let Some(col) = &args.sort_column {
            match col.parse::<u8>() {
                Ok(c @ 0..=2) => sort_column = c,
                _ => {
                    notices.usage(format!("invalid column number: {col}"));
                    notices.usage("force to set it to --sort-column=2 for diff percentage");
                }
            }
        }
        let diff_opts = DiffOptions {
            fields,
            sort,
            policy: DiffPolicy::parse(args.diff_policy.as_deref().unwrap_or("")),
            sort_column,
        };
        notices.flush();
        let label = inv.args.data.analysis_dir();
        let label = label.to_string_lossy();
        let mut out = Output::start(!inv.args.common.no_pager);
        let warnings = report::report_diff(
            DiffSide { dir, label: &label },
            DiffSide {
                dir: &dir2,
                label: other.trim_end_matches('/'),
            },
            &cfg,
            &diff_opts,
            out.writer(),
        )
        .with_context(|| format!("cannot compare {} with {other}", dir.path.display()))?;
        out.finish()?;
        warn_all(&warnings);
        return Ok(ExitCode::SUCCESS);
    }

    // Colors only matter for the gray locations of `--srcline`.
    let color = cfg.srcline
        && inv
            .args
            .common
            .color
            .as_deref()
            .map_or(crate::config::ColorChoice::Auto, |c| {
                crate::config::parse_color(c, notices)
            })
            .for_stdout();
    notices.flush();
    let opts = ReportOptions {
        fields,
        sort,
        tid_width,
        color,
    };
    let mut out = Output::start(!inv.args.common.no_pager);
    let warnings = report::report(dir, &cfg, &opts, out.writer())
        .with_context(|| format!("cannot report {}", dir.path.display()))?;
    out.finish()?;
    warn_all(&warnings);
    Ok(ExitCode::SUCCESS)
}

fn warn_all(warnings: &[String]) {
    for w in warnings {
        crate::diag::warn(w);
    }
}

/// `Usage: invalid sort key: KEY` on stdout, status 255.
fn bad_sort_key(key: &str, notices: &mut Notices) -> anyhow::Error {
    notices.flush();
    UsageExit {
        stdout_lines: vec![format!("Usage: invalid sort key: {key}")],
        code: 255,
    }
    .into()
}

/// `-f` for report: table order; `+LIST` adds to `defaults`; `all`, `none`.
fn parse_fields(spec: &str, defaults: &[ReportField]) -> Result<Vec<ReportField>, UsageExit> {
    let (mut named, list) = match spec.strip_prefix('+') {
        Some(list) => (defaults.to_vec(), list),
        None => (Vec::new(), spec),
    };
    for name in list.split(',').filter(|n| !n.is_empty()) {
        match name {
            "none" => named.clear(),
            "all" => named.extend(ReportField::ALL_013),
            _ => {
                named.push(ReportField::from_name(name).ok_or_else(|| {
                    unknown_field(name, ReportField::ALL.iter().map(|f| f.name()))
                })?)
            }
        }
    }
    Ok(ReportField::ALL
        .into_iter()
        .filter(|f| named.contains(f))
        .collect())
}

/// `-f` for `report --task`: table order (`total self tid func`), `none`.
fn parse_task_fields(spec: &str) -> Result<Vec<TaskField>, UsageExit> {
    let mut named = Vec::new();
    for name in spec.split(',').filter(|n| !n.is_empty()) {
        match name {
            "none" => named.clear(),
            "all" => named.extend(TaskField::ALL),
            _ => named.push(
                TaskField::from_name(name)
                    .ok_or_else(|| unknown_field(name, TaskField::ALL.iter().map(|f| f.name())))?,
            ),
        }
    }
    Ok(TaskField::ALL
        .into_iter()
        .filter(|f| named.contains(f))
        .collect())
}

/// `utrace: Unknown field name 'NAME'` and the possible fields, on stdout, status 1.
fn unknown_field<'a>(name: &str, possible: impl Iterator<Item = &'a str>) -> UsageExit {
    let possible: Vec<&str> = possible.collect();
    UsageExit {
        stdout_lines: vec![
            format!("utrace: Unknown field name '{name}'"),
            format!("utrace:   Possible fields are: {}", possible.join(" ")),
        ],
        code: 1,
    }
}
