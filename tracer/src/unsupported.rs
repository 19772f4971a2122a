//! uftrace options that utrace parses (so that a uftrace command line, `--opt-file` or a data
//! directory's `default.opts` reads the same) but does not implement yet. They are hidden from
//! `--help` (in `cli`), and using one stops the command with a one-line error naming what is
//! missing, rather than being ignored: a user must never get a trace that silently lacks what
//! they asked for.

use crate::cli::Subcommand;
use crate::invocation::Invocation;

/// The first unsupported option of `inv`, as an error.
pub fn check(inv: &Invocation) -> anyhow::Result<()> {
    match first(inv) {
        Some((option, why)) => anyhow::bail!("{option} is not supported yet: {why}"),
        None => Ok(()),
    }
}

/// The first unsupported option given: its spelling and what is missing.
fn first(inv: &Invocation) -> Option<(&'static str, &'static str)> {
    let a = &inv.args;
    let r = &a.record;
    let records = matches!(inv.subcommand, Subcommand::Record | Subcommand::Live);
    let live = matches!(inv.subcommand, Subcommand::Live);
    let checks: [(bool, &str, &str); 4] = [
        (
            r.estimate_return,
            "-e/--estimate-return",
            "recording entries only and estimating the returns",
        ),
        (
            r.pid.is_some() && !records,
            "-p/--pid",
            "the agent in the traced program",
        ),
        (
            live && r.host.is_some(),
            "--host",
            "with `live`, which replays the trace here (use `record --host`)",
        ),
        (
            a.common.format.as_deref().is_some_and(|f| f != "normal"),
            "--format=html",
            "HTML output",
        ),
    ];
    checks
        .into_iter()
        .find(|c| c.0)
        .map(|(_, option, why)| (option, why))
}
