//! `utrace info`: the recording's system and process information (cli.md §7), `--task` and
//! `--symbols [EXE]`.

use crate::config;
use crate::invocation::Invocation;
use crate::notice::Notices;
use crate::pager::Output;
use replay::output::info;
use std::io::Write;
use std::process::ExitCode;

pub fn run(inv: &Invocation, notices: &mut Notices) -> anyhow::Result<ExitCode> {
    let dir = super::open_data(inv)?;
    let args = &inv.args.analysis;
    let text = if args.symbols {
        let exe = inv
            .program
            .first()
            .map(|p| p.to_string_lossy().into_owned());
        let mode = inv
            .args
            .common
            .demangle
            .as_deref()
            .map_or_else(replay::Demangle::default, |d| {
                config::parse_demangle(d, notices)
            });
        match info::symbols_text(&dir, exe.as_deref(), mode) {
            Some(t) => t,
            None => {
                notices.flush();
                writeln!(std::io::stdout(), "Usage: utrace info --symbols [COMMAND]")?;
                return Ok(ExitCode::from(255));
            }
        }
    } else if args.task {
        let tid_width = match inv.args.replay.tid_width.as_deref() {
            Some("6") => 6,
            _ => 7,
        };
        info::task_text(&dir, tid_width)
    } else {
        info::info_text(&dir)
    };
    notices.flush();
    let mut out = Output::start(!inv.args.common.no_pager);
    out.writer().write_all(text.as_bytes())?;
    out.finish()?;
    Ok(ExitCode::SUCCESS)
}
