//! `utrace live` (also the default without a subcommand): record into a private temporary
//! directory, then replay it with the same options, minus those the recorder already applied
//! (cli.md §3, §10). The program's output comes first, then the trace; the exit status says how
//! the program ended. `--record` keeps the data in the data directory instead.

use crate::invocation::Invocation;
use crate::notice::Notices;
use crate::record::{self, Target};
use anyhow::Context;
use std::process::ExitCode;

pub fn run(inv: &Invocation, notices: &mut Notices) -> anyhow::Result<ExitCode> {
    if inv.program.is_empty() {
        return Ok(super::missing_program(notices));
    }
    if inv.args.record.nop {
        return Ok(record::run_untraced(inv)?.report(notices));
    }
    // Removed with its contents when this function returns, also on errors.
    let mut temp = None;
    let dir = if inv.args.record.record {
        let dir = inv.args.data.record_dir();
        record::record(inv, notices, Target::Fresh(&dir)).map(|t| (t, dir))
    } else {
        let tmp = tempfile::Builder::new()
            .prefix("utrace-live-")
            .tempdir_in("/tmp")
            .or_else(|_| {
                tempfile::Builder::new()
                    .prefix("utrace-live-")
                    .tempdir_in(".")
            })
            .context("cannot create a temporary data directory")?;
        let dir = tmp.path().to_path_buf();
        temp = Some(tmp);
        record::record(inv, notices, Target::Existing(&dir)).map(|t| (t, dir))
    };
    let (ended, dir) = dir?;
    let status = ended.report(notices);
    let data = super::open_data_at(&dir)?;
    let replayed = super::replay::show(&data, &replay_invocation(inv), notices)?;
    drop(data);
    drop(temp);
    Ok(if replayed == ExitCode::SUCCESS {
        status
    } else {
        replayed
    })
}

/// The invocation of the replay phase: what the recorder already applied is dropped (cli.md
/// §10): `-F`, `-N`, `-C`, `-Z`, `-D`, `--trace=off`, and the `-T` actions other than
/// `backtrace`, `color=`, `hide`, `time=` and `trace…`. While libmcount does not apply them
/// ([`record::RUNTIME_APPLIES_FILTERS`]), everything is kept and the replay applies them: the
/// semantics are the same at record and at replay time (cli.md §3.1).
fn replay_invocation(inv: &Invocation) -> Invocation {
    let mut inv = inv.clone();
    if !record::RUNTIME_APPLIES_FILTERS {
        return inv;
    }
    let f = &mut inv.args.filter;
    f.filter.clear();
    f.notrace.clear();
    f.caller.clear();
    f.size_filter = None;
    f.depth = None;
    f.trace = None;
    f.disable = false;
    f.trigger = f.trigger.iter().filter_map(|t| replay_trigger(t)).collect();
    inv
}

/// Actions of a `-T` that the recorder applies and that must not be applied again.
fn applied_by_recorder(item: &str) -> bool {
    let name = item.split_once('=').map_or(item, |(n, _)| n);
    let numbered = |prefix: &str| {
        name.strip_prefix(prefix)
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
    };
    matches!(
        name,
        "depth" | "filter" | "notrace" | "caller" | "finish" | "recover" | "read" | "diff"
    ) || name.starts_with("retval")
        || numbered("arg")
        || numbered("fparg")
        || item.starts_with("arg")
        || item.starts_with("fparg")
}

/// `FUNC@ACT,...` with the recorder's actions removed; `None` if no action is left. Items that
/// are not actions (a module name) stay.
fn replay_trigger(trigger: &str) -> Option<String> {
    let (func, actions) = trigger.split_once('@')?;
    let kept: Vec<&str> = actions
        .split(',')
        .filter(|a| !a.is_empty() && !applied_by_recorder(a))
        .collect();
    let has_action = kept.iter().any(|a| {
        let name = a.split_once('=').map_or(*a, |(n, _)| n);
        matches!(name, "backtrace" | "color" | "hide" | "time") || name.starts_with("trace")
    });
    has_action.then(|| format!("{func}@{}", kept.join(",")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn triggers_for_the_replay_phase() {
        assert_eq!(replay_trigger("a@depth=1"), None);
        assert_eq!(
            replay_trigger("a@depth=1,backtrace"),
            Some("a@backtrace".into())
        );
        assert_eq!(
            replay_trigger("a@trace_off,color=red"),
            Some("a@trace_off,color=red".into())
        );
        assert_eq!(replay_trigger("b@abc,hide"), Some("b@abc,hide".into()));
        assert_eq!(replay_trigger("f@arg1,retval,filter"), None);
        assert_eq!(replay_trigger("f@time=1us"), Some("f@time=1us".into()));
    }
}
