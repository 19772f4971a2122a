//! `utrace record`: run a program and write its trace into the data directory (cli.md §3).
//! Silent on success; the exit status says how the program ended (cli.md §1.7).

use crate::invocation::Invocation;
use crate::notice::Notices;
use crate::record;
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
        return super::live::list_events(inv);
    }
    if inv.args.record.nop {
        return Ok(record::run_untraced(inv)?.report(notices));
    }
    if let Some(host) = &inv.args.record.host {
        if inv.args.record.script.is_some() {
            anyhow::bail!("-S/--script cannot be used with --host: run `utrace script -S` on the received data");
        }
        let ended = crate::net::send::record_to_host(inv, notices, host)?;
        return Ok(ended.report(notices));
    }
    // `-S`: the script is loaded first (an error stops before the program runs) and runs over
    // the records as they are written.
    let dir = inv.args.data.record_dir();
    let (script, rec_inv) = super::script::for_record(inv, notices, &dir)?;
    let observer = script.as_ref().and_then(|s| s.observer());
    let target = super::script::target(&dir, true, observer.as_ref());
    let ended = record::record(&rec_inv, notices, target)?;
    // The recording is reported also when the script failed (a program killed by a signal).
    let finished = script.map(|s| s.finish(inv, &dir, notices));
    let status = ended.report(notices);
    finished.transpose()?;
    Ok(status)
}
