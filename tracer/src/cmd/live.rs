//! `utrace live` (also the default without a subcommand): record into a temporary directory,
//! then replay with the same options (cli.md §3, §10). Not implemented yet.

use crate::cli::Subcommand;
use crate::invocation::Invocation;
use crate::notice::Notices;
use std::process::ExitCode;

pub fn run(inv: &Invocation, notices: &mut Notices) -> anyhow::Result<ExitCode> {
    let Some(program) = inv.program.first() else {
        return Ok(super::missing_program(notices));
    };
    let _exe = super::record::find_program(program)?;
    Err(super::not_implemented(Subcommand::Live))
}
