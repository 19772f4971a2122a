//! Runs a script over a data directory: replay's time-ordered walk ([`Core`], with replay's
//! policy: the same filters, triggers, `-D`, `-t`, `-r` and `--tid` as `utrace replay`) hands
//! every shown entry and exit, and every event, to the script, as uftrace's `script` does.
//!
//! A call's `depth` is its depth among the calls shown (a function below `-F` starts at 0, a
//! `-H` function does not count), as uftrace gives it. `UFTRACE_FUNCS` selects functions by
//! the `--match` patterns after the filters; events always pass.

use super::{Ctx, Kind, OutputClosed, Script, Value};
use record_format::argspec::{ArgFormat, ArgItem, ArgValue};
use record_format::TraceDir;
use replay::filter::Pattern;
use replay::walk::core::{Core, Step};
use replay::walk::policy::Policy;
use replay::{Config, MatchType};

/// A recorded value as uftrace hands it to a script.
pub(super) fn value(item: &ArgItem, v: &ArgValue) -> Value {
    match v {
        ArgValue::Int { raw, size } => {
            let size = (*size).min(item.size.max(1)).min(8);
            let masked = if size >= 8 {
                *raw
            } else {
                raw & ((1u64 << (size * 8)) - 1)
            };
            Value::Int(masked)
        }
        ArgValue::Float(f) | ArgValue::LongDouble(f) => Value::Float(*f),
        ArgValue::Char(c) => Value::Str(char::from(*c).to_string()),
        ArgValue::Str(s) if s.as_slice() == [0xff, 0xff, 0xff, 0xff] => Value::Str("NULL".into()),
        ArgValue::Str(s) => Value::Str(String::from_utf8_lossy(s).into_owned()),
        ArgValue::Bytes(_) => {
            let name = match &item.format {
                ArgFormat::Struct(Some(n)) => n.as_str(),
                _ => "",
            };
            Value::Str(format!("{name}{{...}}"))
        }
    }
}

/// Splits an event's text (`read:proc/statm (vmsize=1KB ...)`) into its name and its data.
/// A `diff:` event's values are given without their `+` sign, as uftrace does.
pub(super) fn event_parts(text: &str) -> (&str, Option<String>) {
    match text.split_once(" (") {
        Some((name, rest)) if rest.ends_with(')') => {
            let body = &rest[..rest.len() - 1];
            let body = if name.starts_with("diff:") {
                body.replace("=+", "=")
            } else {
                body.to_string()
            };
            (name, Some(body))
        }
        _ => (text, None),
    }
}

/// Whether the script runs for function `name`: no `UFTRACE_FUNCS`, or a pattern matches.
pub(super) struct Selection {
    patterns: Option<Vec<Pattern>>,
    /// Per function id: decided yet, and the answer.
    cache: Vec<Option<bool>>,
}

impl Selection {
    pub(super) fn new(list: Option<Vec<String>>, match_type: MatchType) -> Selection {
        Selection {
            patterns: list.map(|l| l.iter().map(|p| Pattern::parse(p, match_type)).collect()),
            cache: Vec::new(),
        }
    }

    pub(super) fn wants(&mut self, id: usize, name: &str) -> bool {
        let Some(patterns) = &self.patterns else {
            return true;
        };
        if self.cache.len() <= id {
            self.cache.resize(id + 1, None);
        }
        *self.cache[id].get_or_insert_with(|| patterns.iter().any(|p| p.matches_name(name)))
    }
}

/// Runs `script` over `dir`: `uftrace_begin` (`record`, `cmds`), every shown record in time
/// order, `uftrace_end`. `no_args` leaves the arguments and return values out. Once standard
/// output is a closed pipe ([`OutputClosed`]) the run stops there, quietly.
pub fn run(
    dir: &TraceDir,
    cfg: &Config,
    script: &mut Script,
    no_args: bool,
    record_cmds: (bool, &[String]),
) -> anyhow::Result<()> {
    match walk(dir, cfg, script, no_args, record_cmds) {
        Err(e) if e.is::<OutputClosed>() => Ok(()),
        r => r,
    }
}

fn walk(
    dir: &TraceDir,
    cfg: &Config,
    script: &mut Script,
    no_args: bool,
    (record, cmds): (bool, &[String]),
) -> anyhow::Result<()> {
    let mut select = Selection::new(script.funcs(), cfg.match_type);
    let mut core = Core::new(dir, cfg, Policy::REPLAY);
    // The `Usage:` complaints about the filters, before the script runs, through C's stdout
    // as uftrace prints them (so that they come where uftrace's do: before a Lua script's
    // lines, which share that buffer, and after a Python script's, flushed at its end).
    for n in core.notices.drain(..) {
        super::print_c_stdout(&format!("Usage: {n}"));
    }
    script.begin(record, cmds)?;
    let plain = cfg.filters.is_empty()
        && cfg.notrace.is_empty()
        && cfg.hide.is_empty()
        && cfg.caller.is_empty()
        && cfg.triggers.is_empty()
        && cfg.depth.is_none()
        && cfg.size_filter.is_none()
        && cfg.loc_filters.is_empty()
        && !cfg.start_disabled
        && !cfg.no_libcall;
    let mut values = Vec::new();
    while let Some(step) = core.next_step() {
        let (kind, ti, head, slot, duration) = match step {
            Step::Entry(e) if e.reported => (Kind::Entry, e.task, e.head, e.slot, 0),
            Step::Exit(e) if e.reported => (Kind::Exit, e.task, e.head, e.slot, e.closed.total),
            Step::Event { task, head } => (Kind::Event, task, head, 0, 0),
            _ => continue,
        };
        let tid = i64::from(core.merge.tid(ti));
        values.clear();
        if kind == Kind::Event {
            // The filters do not hide events from a script, the data's edges do.
            if !core.user_event_placed(ti, &head) {
                continue;
            }
            let Some(text) = core.merge.event_text(ti, &head) else {
                continue;
            };
            let (name, body) = event_parts(&text);
            if let Some(b) = body {
                values.push(Value::Str(b));
            }
            let ctx = Ctx {
                kind,
                tid,
                depth: i64::from(head.raw.depth),
                timestamp: head.raw.time,
                duration: 0,
                address: head.raw.addr,
                name,
                values: (!values.is_empty()).then_some(&values[..]),
                record: false,
            };
            script.call(&ctx)?;
            continue;
        }
        let func = head.func;
        if !select.wants(func as usize, &core.merge.sym.func(func).name) {
            continue;
        }
        // The calls below that the filters hide do not count.
        let depth = if plain {
            slot
        } else {
            let stack = &mut core.tasks[ti].stack;
            (0..slot).filter(|&j| !stack.hidden(j)).count()
        };
        let exit = kind == Kind::Exit;
        let recorded = !no_args
            && core
                .merge
                .arg_values(ti, func, &head, exit)
                .map(|(items, vals)| {
                    values.extend(items.iter().zip(&vals).map(|(i, v)| value(i, v)));
                })
                .is_some();
        let ctx = Ctx {
            kind,
            tid,
            depth: depth as i64,
            timestamp: head.raw.time,
            duration,
            address: head.raw.addr,
            name: &core.merge.sym.func(func).name,
            values: recorded.then_some(&values[..]),
            record: false,
        };
        script.call(&ctx)?;
    }
    let ended = script.end();
    super::flush_c_stdio();
    ended
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_split_into_name_and_data() {
        assert_eq!(
            event_parts("read:proc/statm (vmsize=1KB vmrss=2KB)"),
            ("read:proc/statm", Some("vmsize=1KB vmrss=2KB".into()))
        );
        assert_eq!(
            event_parts("diff:proc/statm (vmsize=+0KB vmrss=-4KB)"),
            ("diff:proc/statm", Some("vmsize=0KB vmrss=-4KB".into()))
        );
        assert_eq!(event_parts("sdt:probe"), ("sdt:probe", None));
    }

    #[test]
    fn values_as_uftrace_gives_them() {
        let item = |spec: &str| {
            record_format::argspec::parse_item(spec, 8)
                .unwrap()
                .unwrap()
        };
        let int4 = ArgValue::Int {
            raw: 0xffff_fffe,
            size: 4,
        };
        assert_eq!(value(&item("arg1/i32"), &int4), Value::Int(0xffff_fffe));
        assert_eq!(
            value(
                &item("arg1"),
                &ArgValue::Int {
                    raw: u64::MAX - 2,
                    size: 8
                }
            ),
            Value::Int(u64::MAX - 2)
        );
        assert_eq!(
            value(&item("arg1/c"), &ArgValue::Char(b'q')),
            Value::Str("q".into())
        );
        assert_eq!(
            value(&item("arg1/s"), &ArgValue::Str(vec![0xff; 4])),
            Value::Str("NULL".into())
        );
        assert_eq!(
            value(&item("fparg1"), &ArgValue::Float(2.5)),
            Value::Float(2.5)
        );
    }
}
