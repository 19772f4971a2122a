//! `utrace`, a function tracer compatible with uftrace: the command line.
//!
//! Data flow: [`invocation`] splits argv into options (the table of [`cli`]), subcommand and
//! program, giving an [`invocation::Invocation`] (`--opt-file` and later the data directory's
//! `default.opts` add options); [`cmd`] runs the subcommand, which uses [`config`] to build the
//! analysis engine's `replay::Config` and options (parsing values with [`timefmt`]), writes
//! through [`pager::Output`], and returns the exit status. Complaints about option values are
//! collected in [`notice::Notices`]; fatal errors come back here and are printed as uftrace
//! prints them (cli.md §1.7).

mod cli;
mod cmd;
mod config;
mod diag;
mod error;
mod invocation;
mod net;
mod notice;
mod pager;
mod record;
mod script;
mod timefmt;
mod tui;
mod unsupported;
mod usage;

use cli::Subcommand;
use error::{OpenDataError, UsageExit};
use notice::Notices;
use std::ffi::OsString;
use std::io::Write;
use std::process::ExitCode;

fn main() -> ExitCode {
    let mut subcommand = None;
    match run(std::env::args_os().collect(), &mut subcommand) {
        Ok(code) => code,
        Err(err) => report_error(&err, subcommand),
    }
}

/// Parses the command line and runs the subcommand; `subcommand` is set as soon as it is
/// known, for the error message.
fn run(argv: Vec<OsString>, subcommand: &mut Option<Subcommand>) -> anyhow::Result<ExitCode> {
    let mut notices = Notices::new();
    if argv.len() <= 1 {
        std::io::stdout().write_all(usage::banner().as_bytes())?;
        return Ok(ExitCode::SUCCESS);
    }
    let inv = invocation::parse_command_line(argv, &mut notices)?;
    *subcommand = Some(inv.subcommand);
    let inv = inv.with_option_file(&mut notices)?;
    let common = &inv.args.common;
    if common.version {
        notices.flush();
        writeln!(std::io::stdout(), "{}", usage::version_line())?;
        return Ok(ExitCode::SUCCESS);
    }
    if common.help {
        notices.flush();
        let mut out = pager::Output::start(!common.no_pager);
        out.writer().write_all(usage::help().as_bytes())?;
        out.finish()?;
        return Ok(ExitCode::SUCCESS);
    }
    if common.usage {
        notices.flush();
        std::io::stdout().write_all(usage::banner().as_bytes())?;
        return Ok(ExitCode::SUCCESS);
    }
    let levels = diag::Levels::parse(
        common.verbose.saturating_add(common.debug),
        common.debug_domain.as_deref(),
    )
    .map_err(anyhow::Error::msg)?;
    diag::init(levels, common.logfile.as_deref())?;
    diag::debug("uftrace", 1, format!("running {}", usage::version_line()));
    cmd::run(&inv, &mut notices)
}

/// The error's message with its causes, each cause added only if the text so far does not
/// already contain it (thiserror messages often repeat their source).
fn error_text(err: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in err.chain() {
        let part = cause.to_string();
        if text.is_empty() {
            text = part;
        } else if !text.contains(&part) {
            text.push_str(": ");
            text.push_str(&part);
        }
    }
    error::without_os_error_code(&text)
}

/// Prints a fatal error the way uftrace does and picks the exit status.
fn report_error(err: &anyhow::Error, subcommand: Option<Subcommand>) -> ExitCode {
    if error::is_broken_pipe(err) {
        return ExitCode::SUCCESS;
    }
    if let Some(exit) = err.chain().find_map(|e| e.downcast_ref::<UsageExit>()) {
        let mut out = std::io::stdout().lock();
        for line in &exit.stdout_lines {
            let _ = writeln!(out, "{line}");
        }
        return ExitCode::from(exit.code);
    }
    if let Some(open) = err.chain().find_map(|e| e.downcast_ref::<OpenDataError>()) {
        diag::warn(open.to_string());
        return ExitCode::from(255);
    }
    let place = subcommand.map_or("command line", Subcommand::name);
    diag::line(format!("utrace: {place}\n ERROR: {}", error_text(err)));
    ExitCode::from(1)
}
