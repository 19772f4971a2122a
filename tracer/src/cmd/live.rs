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
    crate::config::check_patterns(inv)?;
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
/// §10): libmcount applies `-F`, `-N`, `-H`, `-C`, `-Z`, `-D` and `--trace=off` while
/// recording. `-t` and `-T` stay: applying them again to the data they shaped changes nothing,
/// and the replay-only trigger actions (`backtrace`, `color=`) need the replay.
fn replay_invocation(inv: &Invocation) -> Invocation {
    let mut inv = inv.clone();
    let f = &mut inv.args.filter;
    f.filter.clear();
    f.notrace.clear();
    f.hide.clear();
    f.caller.clear();
    f.size_filter = None;
    f.depth = None;
    // The recording holds exactly what -A/-R asked for: no replay-time selection.
    f.argument.clear();
    f.retval.clear();
    f.trace = None;
    f.disable = false;
    inv
}
