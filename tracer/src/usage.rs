//! The texts printed by `utrace` alone, `--usage`, `--help` and `--version` (cli.md §1.2).
//! The layout follows uftrace's; the wording is utrace's own.

use crate::cli::{Cli, Subcommand};
use clap::CommandFactory;
use std::fmt::Write as _;

/// Optional features this build really supports, as listed by `--version`, in uftrace 0.13's
/// order. uftrace's test suite skips tests whose feature word (`dwarf`, `perf`, `luajit`,
/// `python`) is missing, so only add a word here once the feature works: `dwarf` (`-A .` with
/// DWARF types, `--srcline`), `python3` and `luajit` (`script -S`), `tui` (`utrace tui`),
/// `perf` and `sched` (scheduler events recorded from perf events), `dynamic` (`-P`, `-U`:
/// functions patched at run time).
pub const FEATURES: &[&str] = &[
    "dwarf", "python3", "luajit", "tui", "perf", "sched", "dynamic",
];

/// Column where option descriptions start in `--help` (0-based).
const HELP_COLUMN: usize = 29;

/// `utrace v0.1.0 ( x86_64 dwarf python3 luajit tui perf sched dynamic )`.
pub fn version_line() -> String {
    let mut line = format!(
        "utrace v{} ( {}",
        env!("CARGO_PKG_VERSION"),
        std::env::consts::ARCH
    );
    for feature in FEATURES {
        line.push(' ');
        line.push_str(feature);
    }
    line.push_str(" )");
    line
}

fn summary(sub: Subcommand) -> &'static str {
    match sub {
        Subcommand::Record => "Run a program and record its trace data",
        Subcommand::Replay => "Print the recorded function calls",
        Subcommand::Report => "Print per-function statistics of the trace data",
        Subcommand::Live => "Record and replay in one go (default)",
        Subcommand::Info => "Print system and program information of the trace data",
        Subcommand::Dump => "Print the trace data in raw or other formats",
        Subcommand::Recv => "Receive trace data over the network",
        Subcommand::Graph => "Print the call graph of the trace data",
        Subcommand::Script => "Run a script over the trace data",
        Subcommand::Tui => "Browse the trace data in a text user interface",
    }
}

/// The banner up to the subcommand list.
fn banner_head() -> String {
    let mut text = String::new();
    text.push_str(" utrace -- function (graph) tracer for userspace\n\n");
    text.push_str(" usage: utrace [COMMAND] [OPTION...] [<program>]\n\n");
    text.push_str(" COMMAND:\n");
    for sub in Subcommand::ALL {
        let _ = writeln!(text, "   {:<16}{}", sub.name(), summary(sub));
    }
    text
}

/// Printed by `utrace` with no arguments, `--usage`, and `record`/`live` without a program.
pub fn banner() -> String {
    let mut text = banner_head();
    text.push_str("\n Try `utrace --help' for more information.\n\n");
    text
}

/// `--help`: the banner head, then one line per option.
pub fn help() -> String {
    let mut text = banner_head();
    text.push_str("\n OPTION:\n");
    let command = Cli::command();
    for arg in command.get_arguments() {
        if arg.is_positional() || arg.is_hide_set() {
            continue;
        }
        let mut left = String::from("  ");
        match arg.get_short() {
            Some(short) => {
                let _ = write!(left, "-{short}");
                if arg.get_long().is_some() {
                    left.push_str(", ");
                }
            }
            None => left.push_str("    "),
        }
        if let Some(long) = arg.get_long() {
            let _ = write!(left, "--{long}");
        }
        if arg.get_action().takes_values() {
            let value = arg
                .get_value_names()
                .and_then(|names| names.first())
                .map_or("VALUE".to_string(), ToString::to_string);
            if arg.get_long().is_some() {
                let _ = write!(left, "={value}");
            } else {
                let _ = write!(left, " {value}");
            }
        }
        let help = arg.get_help().map(ToString::to_string).unwrap_or_default();
        if left.len() < HELP_COLUMN {
            let _ = writeln!(text, "{left:<HELP_COLUMN$}{help}");
        } else {
            let _ = writeln!(text, "{left}\n{:HELP_COLUMN$}{help}", "");
        }
    }
    text.push_str("\n Try `utrace --usage' for the list of commands.\n\n");
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_shape() {
        let line = version_line();
        assert!(line.starts_with("utrace v0.1.0 ( "));
        assert!(line.ends_with(" )"));
        // The words uftrace's test suite reads: only features that work.
        let words: Vec<&str> = line
            .split(['(', ')'])
            .nth(1)
            .unwrap()
            .split_whitespace()
            .collect();
        assert_eq!(
            words,
            [
                std::env::consts::ARCH,
                "dwarf",
                "python3",
                "luajit",
                "tui",
                "perf",
                "sched",
                "dynamic"
            ]
        );
    }

    #[test]
    fn banner_lists_every_working_subcommand() {
        let text = banner();
        assert!(text.starts_with(" utrace -- "));
        assert!(text.ends_with("\n\n"));
        for sub in Subcommand::ALL {
            let listed = text.contains(&format!("\n   {:<16}", sub.name()));
            assert!(listed, "{}", sub.name());
        }
    }

    #[test]
    fn help_aligns_descriptions() {
        let text = help();
        let line = text
            .lines()
            .find(|l| l.starts_with("  -F, --filter=FUNC"))
            .unwrap();
        assert_eq!(line.find("Only"), Some(HELP_COLUMN));
        assert!(text.contains("      --no-pager "));
        assert!(!text.contains("tid-width"));
    }
}
