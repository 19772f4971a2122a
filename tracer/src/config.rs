//! From option values to what the analysis engine takes ([`replay::Config`] and
//! [`replay::ReplayOptions`]), with uftrace's complaints about bad values: most are a `Usage:`
//! line and the default is kept (cli.md §1.7); a time value over the digit limit is fatal and an
//! unknown field name ends the command with status 1.

use crate::error::UsageExit;
use crate::invocation::{Invocation, LastTimeOption};
use crate::notice::Notices;
use crate::timefmt;
use replay::config::KernelView;
use replay::{Config, Demangle, Field, MatchType, ReplayOptions, TimePoint, TimeRange};
use std::io::IsTerminal;

/// Largest `-D` accepted (uftrace's limit).
const MAX_DEPTH: u32 = 65534;
/// `--column-offset` default.
const DEFAULT_COLUMN_OFFSET: u32 = 8;

/// Words accepted for "on" and "off" by `--color` (and "off" by `--demangle`).
const YES_WORDS: [&str; 5] = ["yes", "true", "on", "y", "1"];
const NO_WORDS: [&str; 5] = ["no", "false", "off", "n", "0"];

/// `--color`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ColorChoice {
    #[default]
    Auto,
    Always,
    Never,
}

impl ColorChoice {
    /// Whether stdout output is colored: `auto` means stdout is a terminal whose TERM is not
    /// `dumb` (decided before a pager takes stdout over).
    pub fn for_stdout(self) -> bool {
        match self {
            ColorChoice::Always => true,
            ColorChoice::Never => false,
            ColorChoice::Auto => {
                std::io::stdout().is_terminal()
                    && !matches!(std::env::var_os("TERM"), Some(t) if t == "dumb")
            }
        }
    }
}

/// Parses the leading integer of `text` the way strtol does (garbage gives 0).
fn leading_integer(text: &str) -> i64 {
    let text = text.trim_start();
    let (neg, digits) = match text.strip_prefix('-') {
        Some(d) => (true, d),
        None => (false, text.strip_prefix('+').unwrap_or(text)),
    };
    let value = digits
        .bytes()
        .take_while(u8::is_ascii_digit)
        .fold(0i64, |acc, b| {
            acc.saturating_mul(10).saturating_add(i64::from(b - b'0'))
        });
    if neg {
        -value
    } else {
        value
    }
}

/// `-D DEPTH`: 1..=65534, otherwise ignored with a notice.
pub fn parse_depth(text: &str, notices: &mut Notices) -> Option<u32> {
    match u32::try_from(leading_integer(text)) {
        Ok(depth @ 1..=MAX_DEPTH) => Some(depth),
        _ => {
            notices.usage(format!("invalid depth given: {text} (ignoring..)"));
            None
        }
    }
}

/// `--tid T[,T...]`, possibly repeated; bad ids are skipped with a notice.
pub fn parse_tids(lists: &[String], notices: &mut Notices) -> Vec<u32> {
    let mut tids = Vec::new();
    for item in lists.iter().flat_map(|l| l.split(',')) {
        match item.trim().parse::<u32>() {
            Ok(tid) if tid > 0 => tids.push(tid),
            _ => notices.usage(format!("invalid thread id: {item}")),
        }
    }
    tids
}

/// `--color=SET`.
pub fn parse_color(text: &str, notices: &mut Notices) -> ColorChoice {
    let word = text.to_ascii_lowercase();
    if word == "auto" {
        ColorChoice::Auto
    } else if YES_WORDS.contains(&word.as_str()) {
        ColorChoice::Always
    } else if NO_WORDS.contains(&word.as_str()) {
        ColorChoice::Never
    } else {
        notices.usage(format!("unknown color setting: {text} (ignoring..)"));
        ColorChoice::Auto
    }
}

/// `--demangle=TYPE`.
pub fn parse_demangle(text: &str, notices: &mut Notices) -> Demangle {
    let word = text.to_ascii_lowercase();
    match word.as_str() {
        "full" => Demangle::Full,
        "simple" => Demangle::Simple,
        w if NO_WORDS.contains(&w) => Demangle::No,
        _ => {
            notices.usage(format!("unknown demangle value: {text} (ignoring..)"));
            Demangle::default()
        }
    }
}

/// `--match=TYPE`.
pub fn parse_match(text: &str, notices: &mut Notices) -> MatchType {
    match_type(text).unwrap_or_else(|| {
        notices.usage(format!("invalid match pattern: {text} (ignoring...)"));
        MatchType::default()
    })
}

/// The `--match` value named `text`, if it is one.
fn match_type(text: &str) -> Option<MatchType> {
    match text {
        "regex" => Some(MatchType::Regex),
        "glob" => Some(MatchType::Glob),
        _ => None,
    }
}

/// The two stdout lines (and exit status 1) for an unknown `-f` name.
fn unknown_field(name: &str) -> UsageExit {
    let possible: Vec<&str> = Field::ALL.iter().map(|f| f.name()).collect();
    UsageExit {
        stdout_lines: vec![
            format!("utrace: Unknown field name '{name}'"),
            format!("utrace:   Possible fields are: {}", possible.join(" ")),
        ],
        code: 1,
    }
}

/// `-f LIST`: an explicit list is printed in table order whatever order it was written in;
/// `+LIST` appends to `defaults` (again in table order); `none` means no field at all.
pub fn parse_fields(spec: &str, defaults: &[Field]) -> Result<Vec<Field>, UsageExit> {
    let (mut chosen, list) = match spec.strip_prefix('+') {
        Some(list) => (defaults.to_vec(), list),
        None => (Vec::new(), spec),
    };
    let mut named = Vec::new();
    for name in list.split(',').filter(|n| !n.is_empty()) {
        if name == "none" {
            named.clear();
            continue;
        }
        named.push(Field::from_name(name).ok_or_else(|| unknown_field(name))?);
    }
    for field in Field::ALL {
        if named.contains(&field) && !chosen.contains(&field) {
            chosen.push(field);
        }
    }
    Ok(chosen)
}

/// Default replay fields: `duration,tid`, with the elapsed time or the timestamp in front
/// when a time range is given (depending on how its ends were written).
pub fn default_fields(range: Option<&TimeRange>) -> Vec<Field> {
    let mut fields = Vec::new();
    if let Some(range) = range {
        let absolute = [range.start, range.stop]
            .iter()
            .any(|p| matches!(p, Some(TimePoint::Absolute(_))));
        fields.push(if absolute {
            Field::Time
        } else {
            Field::Elapsed
        });
    }
    fields.extend([Field::Duration, Field::Tid]);
    fields
}

/// A function pattern of `-F -N -H -C -T -A -R` that does not compile is an error (uftrace
/// 0.13 warns and goes on without the filter, printing the whole trace).
pub fn check_patterns(inv: &Invocation) -> anyhow::Result<()> {
    let f = &inv.args.filter;
    let ty = inv
        .args
        .common
        .match_type
        .as_deref()
        .and_then(match_type)
        .unwrap_or_default();
    let lists: [(&str, &[String]); 7] = [
        ("-F", &f.filter),
        ("-N", &f.notrace),
        ("-H", &f.hide),
        ("-C", &f.caller),
        ("-T", &f.trigger),
        ("-A", &f.argument),
        ("-R", &f.retval),
    ];
    for (opt, list) in lists {
        for spec in list.iter().flat_map(|s| s.split(';')) {
            let name = spec.split('@').next().unwrap_or(spec);
            if let Some(why) = record_format::pattern::invalid(name, ty) {
                anyhow::bail!("invalid pattern in {opt}: '{name}': {why}");
            }
        }
    }
    Ok(())
}

/// Filters and display options shared by the analysis commands.
pub fn analysis_config(inv: &Invocation, notices: &mut Notices) -> anyhow::Result<Config> {
    let filter = &inv.args.filter;
    let common = &inv.args.common;
    check_patterns(inv)?;

    let mut time_filter = None;
    let mut time_range = None;
    if filter.time_filter.is_some() && filter.time_range.is_some() {
        notices.usage("--time-range cannot be used with --time-filter");
    }
    match inv.last_time_option {
        LastTimeOption::None => {}
        LastTimeOption::TimeFilter => {
            if let Some(t) = &filter.time_filter {
                time_filter = Some(timefmt::parse_time(t, 3, notices)?);
            }
        }
        LastTimeOption::TimeRange => {
            if let Some(r) = &filter.time_range {
                time_range = timefmt::parse_time_range(r, notices)?;
            }
        }
    }

    Ok(Config {
        filters: filter.filter.clone(),
        notrace: filter.notrace.clone(),
        filter_order: inv.filter_order.clone(),
        hide: filter.hide.clone(),
        caller: filter.caller.clone(),
        triggers: filter.trigger.clone(),
        args: filter.argument.clone(),
        retvals: filter.retval.clone(),
        depth: filter
            .depth
            .as_deref()
            .and_then(|d| parse_depth(d, notices)),
        time_filter,
        tids: parse_tids(&filter.tid, notices),
        time_range,
        no_libcall: filter.no_libcall,
        no_event: filter.no_event,
        // -C shows call paths only; scheduling events would break them up.
        no_sched: filter.no_sched || !filter.caller.is_empty(),
        start_disabled: false,
        size_filter: filter
            .size_filter
            .as_deref()
            .and_then(|z| match z.trim().parse::<u32>() {
                Ok(n) if n > 0 => Some(n),
                _ => {
                    notices.usage("--size-filter should be positive");
                    None
                }
            }),
        no_sched_preempt: filter.no_sched_preempt,
        event_full: filter.event_full,
        match_type: common
            .match_type
            .as_deref()
            .map_or_else(MatchType::default, |m| parse_match(m, notices)),
        demangle: common
            .demangle
            .as_deref()
            .map_or_else(Demangle::default, |d| parse_demangle(d, notices)),
        kernel: KernelView {
            full: inv.args.record.kernel_full && !inv.args.record.kernel_skip_out,
            only: inv.args.record.kernel_only,
            depth: inv
                .args
                .record
                .kernel_depth
                .as_deref()
                .map(|d| match d.trim().parse::<u32>() {
                    Ok(n) if n > 0 => n,
                    _ => {
                        notices.usage(format!("invalid kernel depth: '{d}' (use 1)"));
                        1
                    }
                }),
        },
        srcline: inv.args.replay.srcline,
        loc_filters: filter.loc_filter.clone(),
    })
}

/// How `replay` prints; `cfg` is the result of [`analysis_config`] for the same invocation.
pub fn replay_options(
    inv: &Invocation,
    cfg: &Config,
    notices: &mut Notices,
) -> Result<ReplayOptions, UsageExit> {
    let args = &inv.args.replay;
    let defaults = default_fields(cfg.time_range.as_ref());
    let fields = match &args.output_fields {
        Some(spec) => parse_fields(spec, &defaults)?,
        None => defaults,
    };
    let color = inv
        .args
        .common
        .color
        .as_deref()
        .map_or(ColorChoice::Auto, |c| parse_color(c, notices));
    let column_offset = args.column_view.then(|| {
        args.column_offset
            .as_deref()
            .map_or(DEFAULT_COLUMN_OFFSET, |o| {
                u32::try_from(leading_integer(o)).unwrap_or(0)
            })
    });
    let mut tid_width = ReplayOptions::default().tid_width;
    if let Some(w) = &args.tid_width {
        match w.as_str() {
            "6" => tid_width = 6,
            "7" => tid_width = 7,
            _ => notices.usage(format!("invalid TID width: {w} (ignoring..)")),
        }
    }
    Ok(ReplayOptions {
        fields,
        no_comment: args.no_comment,
        no_args: args.no_args,
        flat: args.flat,
        color: color.for_stdout(),
        no_merge: args.no_merge,
        libname: args.libname,
        task_newline: args.task_newline,
        column_offset,
        tid_width,
        srcline: args.srcline,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use Field::*;

    #[test]
    fn explicit_fields_use_table_order() {
        assert_eq!(parse_fields("tid,duration", &[]).unwrap(), [Duration, Tid]);
        assert_eq!(
            parse_fields("module,addr,elapsed", &[]).unwrap(),
            [Addr, Elapsed, Module]
        );
        assert_eq!(parse_fields("none", &[Duration, Tid]).unwrap(), []);
    }

    #[test]
    fn plus_fields_extend_defaults() {
        let defaults = default_fields(None);
        assert_eq!(
            parse_fields("+elapsed", &defaults).unwrap(),
            [Duration, Tid, Elapsed]
        );
        assert_eq!(
            parse_fields("+module,time,delta,elapsed,addr,task", &defaults).unwrap(),
            [Duration, Tid, Addr, Time, Delta, Elapsed, Task, Module]
        );
        assert_eq!(parse_fields("+tid", &defaults).unwrap(), [Duration, Tid]);
    }

    #[test]
    fn unknown_field_lists_the_possible_ones() {
        let err = parse_fields("duration,bogus", &[]).unwrap_err();
        assert_eq!(err.code, 1);
        assert_eq!(
            err.stdout_lines,
            [
                "utrace: Unknown field name 'bogus'",
                "utrace:   Possible fields are: duration tid addr time delta elapsed task module"
            ]
        );
    }

    #[test]
    fn default_fields_follow_the_time_range() {
        let elapsed = TimeRange {
            start: Some(TimePoint::Elapsed(1)),
            stop: None,
        };
        assert_eq!(default_fields(Some(&elapsed)), [Elapsed, Duration, Tid]);
        let absolute = TimeRange {
            start: None,
            stop: Some(TimePoint::Absolute(1)),
        };
        assert_eq!(default_fields(Some(&absolute)), [Time, Duration, Tid]);
        assert_eq!(default_fields(None), [Duration, Tid]);
    }

    #[test]
    fn depth_limits() {
        let mut n = Notices::silent();
        assert_eq!(parse_depth("2", &mut n), Some(2));
        assert_eq!(parse_depth("65534", &mut n), Some(65534));
        assert_eq!(parse_depth("0", &mut n), None);
        assert_eq!(parse_depth("65535", &mut n), None);
        assert_eq!(parse_depth("abc", &mut n), None);
        assert_eq!(
            n.stdout_lines()[0],
            "Usage: invalid depth given: 0 (ignoring..)"
        );
        assert_eq!(n.stdout_lines().len(), 3);
    }

    #[test]
    fn value_words() {
        let mut n = Notices::silent();
        assert_eq!(parse_color("on", &mut n), ColorChoice::Always);
        assert_eq!(parse_color("0", &mut n), ColorChoice::Never);
        assert_eq!(parse_color("auto", &mut n), ColorChoice::Auto);
        assert_eq!(parse_color("pink", &mut n), ColorChoice::Auto);
        assert_eq!(parse_demangle("full", &mut n), Demangle::Full);
        assert_eq!(parse_demangle("false", &mut n), Demangle::No);
        assert_eq!(parse_demangle("odd", &mut n), Demangle::Simple);
        assert_eq!(parse_match("glob", &mut n), MatchType::Glob);
        assert_eq!(parse_match("re", &mut n), MatchType::Regex);
        assert_eq!(
            n.stdout_lines(),
            [
                "Usage: unknown color setting: pink (ignoring..)",
                "Usage: unknown demangle value: odd (ignoring..)",
                "Usage: invalid match pattern: re (ignoring...)"
            ]
        );
    }

    #[test]
    fn tids() {
        let mut n = Notices::silent();
        let lists = ["1,2".to_string(), "x".to_string(), "30".to_string()];
        assert_eq!(parse_tids(&lists, &mut n), [1, 2, 30]);
        assert_eq!(n.stdout_lines(), ["Usage: invalid thread id: x"]);
    }
}
