//! One module per subcommand, each with `run(&Invocation, &mut Notices) -> anyhow::Result<ExitCode>`.
//! The returned status is the process exit status; errors are printed by `main`.

pub mod dump;
pub mod graph;
pub mod info;
pub mod live;
pub mod record;
pub mod recv;
pub mod replay;
pub mod report;
pub mod script;
pub mod tui;

use crate::cli::Subcommand;
use crate::error::OpenDataError;
use crate::invocation::Invocation;
use crate::notice::Notices;
use crate::usage;
use record_format::TraceDir;
use std::io::Write;
use std::process::ExitCode;

/// Runs the subcommand of `inv`.
pub fn run(inv: &Invocation, notices: &mut Notices) -> anyhow::Result<ExitCode> {
    crate::unsupported::check(inv)?;
    match inv.subcommand {
        Subcommand::Record => record::run(inv, notices),
        Subcommand::Replay => replay::run(inv, notices),
        Subcommand::Report => report::run(inv, notices),
        Subcommand::Live => live::run(inv, notices),
        Subcommand::Info => info::run(inv, notices),
        Subcommand::Dump => dump::run(inv, notices),
        Subcommand::Recv => recv::run(inv, notices),
        Subcommand::Graph => graph::run(inv, notices),
        Subcommand::Script => script::run(inv, notices),
        Subcommand::Tui => tui::run(inv, notices),
    }
}

/// An opened data directory. The files it leaves out (a thread's `.dat`, a `.sym` or `.dbg`,
/// `default.opts` that cannot be read) are reported as `WARN:` lines on stderr: those met while
/// opening it at once, those met later (symbol files are read on first use) when it is dropped,
/// after the command's output (and the pager, or the tui, have finished).
#[derive(Debug)]
pub struct Data(TraceDir);

impl Data {
    fn print_warnings(&self) {
        for w in self.0.take_warnings() {
            crate::diag::warn(w);
        }
    }
}

impl std::ops::Deref for Data {
    type Target = TraceDir;

    fn deref(&self) -> &TraceDir {
        &self.0
    }
}

impl Drop for Data {
    fn drop(&mut self) {
        self.print_warnings();
    }
}

/// Opens the data directory an analysis command reads (`-d DIR`, `uftrace.data`, or `.` when
/// it holds an `info` file). Like uftrace, a directory without data makes `main` print
/// `WARN: cannot open record data: …` and exit with 255; damaged data is a fatal error (1).
pub fn open_data(inv: &Invocation) -> anyhow::Result<Data> {
    let mut data = open_data_at(&inv.args.data.analysis_dir())?;
    if let Some(syms) = &inv.args.record.with_syms {
        data.0.set_sym_dir(syms.into());
    }
    Ok(data)
}

/// Opens the data directory `dir`, with the errors of [`open_data`].
pub fn open_data_at(dir: &std::path::Path) -> anyhow::Result<Data> {
    use record_format::FormatError;
    match TraceDir::open(dir) {
        Ok(d) => {
            let data = Data(d);
            data.print_warnings();
            Ok(data)
        }
        Err(FormatError::NoData { path, warnings }) => {
            for w in warnings {
                crate::diag::warn(w);
            }
            let e = FormatError::NoData {
                path,
                warnings: Vec::new(),
            };
            Err(OpenDataError(e).into())
        }
        Err(e @ FormatError::Open { .. }) => Err(OpenDataError(e).into()),
        Err(e) => Err(anyhow::anyhow!(crate::error::without_os_error_code(
            &e.to_string()
        ))),
    }
}

/// `record`/`live` without a program: the banner on stdout, status 1.
pub fn missing_program(notices: &mut Notices) -> ExitCode {
    notices.flush();
    let _ = std::io::stdout().write_all(usage::banner().as_bytes());
    ExitCode::from(1)
}
