//! `utrace live` (also the default without a subcommand): record into a private temporary
//! directory, then replay it with the same options, minus those the recorder already applied
//! (cli.md §3, §10). The program's output comes first, then the trace; the exit status says how
//! the program ended. `--record` keeps the data in the data directory instead.

use crate::invocation::Invocation;
use crate::notice::Notices;
use crate::record;
use anyhow::Context;
use std::process::ExitCode;

pub fn run(inv: &Invocation, notices: &mut Notices) -> anyhow::Result<ExitCode> {
    if inv.program.is_empty() && inv.args.record.pid.is_none() {
        return Ok(super::missing_program(notices));
    }
    crate::config::check_patterns(inv)?;
    // -p PID of a process with an agent (`-g`): send it the options and exit.
    if let Some(status) = record::agent_client::send_if_agent(inv, notices)? {
        return Ok(status);
    }
    record::check_pid_options(inv)?;
    if inv.args.record.list_event {
        return list_events(inv);
    }
    if inv.args.record.nop {
        return Ok(record::run_untraced(inv)?.report(notices));
    }
    // Removed with its contents when this function returns, also on errors.
    let mut temp = None;
    let dir = if inv.args.record.record {
        inv.args.data.record_dir()
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
        dir
    };
    // `-S`: loaded before the program runs, runs while it runs, before the replay.
    let (script, rec_inv) = super::script::for_record(inv, notices, &dir)?;
    let observer = script.as_ref().and_then(|s| s.observer());
    let target = super::script::target(&dir, temp.is_none(), observer.as_ref());
    let ended = record::record(&rec_inv, notices, target)?;
    // A failing script still lets the recording be reported and replayed; its error comes last.
    let finished = script.map(|s| s.finish(inv, &dir, notices));
    let status = ended.report(notices);
    let data = super::open_data_at(&dir)?;
    let mut replay_inv = replay_invocation(inv);
    // Two outputs one after the other: straight to the terminal, not one pager each.
    replay_inv.args.common.no_pager |= inv.args.record.report;
    if inv.args.record.report {
        // `--report`: the report first, then the replay, each under a title as uftrace's.
        print!("#\n# uftrace report\n#\n");
        let mut report_inv = replay_inv.clone();
        report_inv.args.replay.output_fields = None;
        super::report::show(&data, &report_inv, notices)?;
        print!("\n#\n# uftrace replay\n#\n");
    }
    let replayed = super::replay::show(&data, &replay_inv, notices)?;
    drop(data);
    drop(temp);
    finished.transpose()?;
    Ok(if replayed == ExitCode::SUCCESS {
        status
    } else {
        replayed
    })
}

/// `--list-event`: the events the program offers, listed without running it.
pub fn list_events(inv: &Invocation) -> anyhow::Result<ExitCode> {
    let exe = record::program::find_program(&inv.program[0])?;
    print!("{}", record::event_list(&exe)?);
    Ok(ExitCode::SUCCESS)
}

/// The invocation of the replay phase: what the recorder already applied is dropped (cli.md
/// §10): libmcount applies `-F`, `-N`, `-H`, `-C`, `-Z`, `-D` and `--trace=off` while
/// recording. `-t` and `-T` stay: applying them again to the data they shaped changes nothing,
/// and the replay-only trigger actions (`backtrace`, `color=`) need the replay.
pub fn replay_invocation(inv: &Invocation) -> Invocation {
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
