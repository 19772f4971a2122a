//! `utrace dump`: raw records, chrome, flame-graph, graphviz, mermaid (cli.md §8). Not implemented yet.

use crate::cli::Subcommand;
use crate::invocation::Invocation;
use crate::notice::Notices;
use std::process::ExitCode;

pub fn run(inv: &Invocation, notices: &mut Notices) -> anyhow::Result<ExitCode> {
    let _ = (inv, notices);
    Err(super::not_implemented(Subcommand::Dump))
}
