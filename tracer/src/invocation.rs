//! Splitting argv the way getopt_long does in "stop at the first non-option" mode (cli.md §1.1):
//!
//! `utrace [OPTION...] [SUBCOMMAND] [OPTION...] [PROGRAM [ARGS...]]`
//!
//! clap parses the options into [`Cli`] and collects everything from the first non-option word
//! on, verbatim, into `rest`. If that word names a subcommand it is removed from argv and argv is
//! parsed again, so options may come before and after the subcommand; what is then left in
//! `rest` is the program and its arguments, untouched. Unknown options are reported and
//! skipped. `--opt-file` and the data directory's `default.opts` add option words and are parsed
//! the same way.

use crate::cli::{Cli, Subcommand};
use crate::notice::Notices;
use anyhow::{bail, Context};
use clap::error::{ContextKind, ContextValue, ErrorKind};
use clap::{CommandFactory, FromArgMatches};
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;

/// Which of `-t` and `-r` was given last; they exclude each other and the later one wins.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LastTimeOption {
    None,
    TimeFilter,
    TimeRange,
}

/// A parsed command line.
#[derive(Debug, Clone)]
pub struct Invocation {
    /// The subcommand (`live` when none was given).
    pub subcommand: Subcommand,
    /// All options, with `rest` emptied (see `program`).
    pub args: Cli,
    /// PROGRAM and its arguments, exactly as given. For analysis commands, extra words
    /// (e.g. the FUNC of `graph FUNC`).
    pub program: Vec<OsString>,
    pub last_time_option: LastTimeOption,
    /// `-F` and `-N` in command-line order: (is `-F`, index in its list).
    pub filter_order: Vec<(bool, usize)>,
    /// `-P` and `-U` in command-line order: (is `-P`, index in its list).
    pub patch_order: Vec<(bool, usize)>,
    argv0: OsString,
    /// The option words of the command line (and option file), without the subcommand and
    /// the program; parsed again when `default.opts` adds options.
    option_words: Vec<OsString>,
}

/// One parse of a word list by clap.
struct Parsed {
    cli: Cli,
    last_time_option: LastTimeOption,
    filter_order: Vec<(bool, usize)>,
    patch_order: Vec<(bool, usize)>,
    /// The words parsed, argv0 first, unknown options removed.
    words: Vec<OsString>,
}

impl Parsed {
    /// Index in `words` of the first word of `cli.rest`.
    fn rest_start(&self) -> usize {
        self.words.len() - self.cli.rest.len()
    }

    /// The option words (no argv0, no positional words, no final `--`).
    fn option_words(&self) -> Vec<OsString> {
        let mut words = self.words[1..self.rest_start()].to_vec();
        if words.last().is_some_and(|w| w == "--") {
            words.pop();
        }
        words
    }
}

/// The first line of a clap error, without clap's `error: ` prefix.
fn clap_message(err: &clap::Error) -> String {
    let text = err.to_string();
    let line = text.lines().next().unwrap_or("invalid command line");
    line.strip_prefix("error: ").unwrap_or(line).to_string()
}

/// Finds the word that clap reported as unknown (`--bogus`, `--bogus=1`, or `-q` inside `-aq`).
fn find_unknown(words: &[OsString], bad: &str) -> Option<usize> {
    let bad = bad.as_bytes();
    words.iter().enumerate().skip(1).find_map(|(i, word)| {
        let w = word.as_bytes();
        let found = if bad.starts_with(b"--") {
            w == bad || (w.starts_with(bad) && w.get(bad.len()) == Some(&b'='))
        } else if bad.len() == 2 && bad[0] == b'-' {
            w.len() >= 2 && w[0] == b'-' && w[1] != b'-' && w[1..].contains(&bad[1])
        } else {
            false
        };
        found.then_some(i)
    })
}

/// The values of the two list options `ids` in command-line order: (is the first option,
/// index in its list).
fn option_order(matches: &clap::ArgMatches, ids: (&str, &str)) -> Vec<(bool, usize)> {
    let mut order: Vec<(usize, bool, usize)> = Vec::new();
    for (id, first) in [(ids.0, true), (ids.1, false)] {
        if let Some(at) = matches.indices_of(id) {
            order.extend(at.enumerate().map(|(i, pos)| (pos, first, i)));
        }
    }
    order.sort_unstable();
    order.into_iter().map(|(_, f, i)| (f, i)).collect()
}

/// Parses `words` (argv0 first). Unknown options are reported like getopt does and skipped;
/// other errors (a missing value, a value given to a flag) are fatal.
fn parse_words(mut words: Vec<OsString>, notices: &mut Notices) -> anyhow::Result<Parsed> {
    loop {
        let err = match Cli::command().try_get_matches_from(&words) {
            Ok(matches) => {
                let cli = Cli::from_arg_matches(&matches).map_err(|e| {
                    anyhow::anyhow!("{}", clap_message(&e)) // cannot happen: same definition
                })?;
                let last_time_option = match (
                    matches.index_of("time_filter"),
                    matches.index_of("time_range"),
                ) {
                    (None, None) => LastTimeOption::None,
                    (Some(_), None) => LastTimeOption::TimeFilter,
                    (None, Some(_)) => LastTimeOption::TimeRange,
                    (Some(t), Some(r)) if t > r => LastTimeOption::TimeFilter,
                    (Some(_), Some(_)) => LastTimeOption::TimeRange,
                };
                let filter_order = option_order(&matches, ("filter", "notrace"));
                let patch_order = option_order(&matches, ("patch", "unpatch"));
                return Ok(Parsed {
                    cli,
                    last_time_option,
                    filter_order,
                    patch_order,
                    words,
                });
            }
            Err(err) => err,
        };
        if err.kind() != ErrorKind::UnknownArgument {
            bail!("{}", clap_message(&err));
        }
        let bad = match err.get(ContextKind::InvalidArg) {
            Some(ContextValue::String(s)) => s.clone(),
            _ => bail!("{}", clap_message(&err)),
        };
        let Some(index) = find_unknown(&words, &bad) else {
            bail!("{}", clap_message(&err));
        };
        if bad.starts_with("--") {
            let word = words[index].to_string_lossy();
            notices.stderr_line(format!("utrace: unrecognized option '{word}'"));
            words.remove(index);
        } else {
            let c = bad.as_bytes()[1];
            notices.stderr_line(format!("utrace: invalid option -- '{}'", char::from(c)));
            let mut word = words[index].as_bytes().to_vec();
            if let Some(pos) = word.iter().skip(1).position(|&b| b == c) {
                word.remove(pos + 1);
            }
            if word.len() > 1 {
                words[index] = OsStr::from_bytes(&word).to_os_string();
            } else {
                words.remove(index);
            }
        }
    }
}

/// Parses `words`; if the first non-option word is a subcommand, removes it and parses the
/// remaining words again, so that the options after it are parsed too.
fn parse_with_subcommand(
    words: Vec<OsString>,
    notices: &mut Notices,
) -> anyhow::Result<(Option<Subcommand>, Parsed)> {
    let mut parsed = parse_words(words, notices)?;
    let Some(sub) = parsed
        .cli
        .rest
        .first()
        .and_then(|w| Subcommand::from_word(w))
    else {
        return Ok((None, parsed));
    };
    let start = parsed.rest_start();
    let mut words = std::mem::take(&mut parsed.words);
    words.remove(start);
    Ok((Some(sub), parse_words(words, notices)?))
}

/// Parses the process arguments (argv0 first). `--opt-file` is applied separately by
/// [`Invocation::with_option_file`].
pub fn parse_command_line(
    argv: Vec<OsString>,
    notices: &mut Notices,
) -> anyhow::Result<Invocation> {
    let argv0 = argv
        .first()
        .cloned()
        .unwrap_or_else(|| OsString::from("utrace"));
    let (sub, parsed) = parse_with_subcommand(argv, notices)?;
    let subcommand = sub.unwrap_or(Subcommand::Live);
    let option_words = parsed.option_words();
    let mut args = parsed.cli;
    let program = std::mem::take(&mut args.rest);
    Ok(Invocation {
        subcommand,
        args,
        program,
        last_time_option: parsed.last_time_option,
        filter_order: parsed.filter_order,
        patch_order: parsed.patch_order,
        argv0,
        option_words,
    })
}

impl Invocation {
    /// Adds the options of `--opt-file=FILE`, if given, after those of the command line. A
    /// subcommand word in the file is ignored; a program in the file is used when the command
    /// line has none.
    pub fn with_option_file(self, notices: &mut Notices) -> anyhow::Result<Invocation> {
        let Some(file) = self.args.common.opt_file.as_deref() else {
            return Ok(self);
        };
        let text = record_format::file::read_regular_text(
            std::path::Path::new(file),
            record_format::file::limit::OPTS,
        )
        .with_context(|| format!("cannot read option file '{file}'"))?;
        let mut words = vec![self.argv0.clone()];
        words.extend(self.option_words.iter().cloned());
        words.extend(text.split_whitespace().map(OsString::from));
        let (sub, parsed) = parse_with_subcommand(words, notices)?;
        if let Some(sub) = sub {
            notices.usage(format!(
                "ignoring subcommand '{}' in option file {file}",
                sub.name()
            ));
        }
        let option_words = parsed.option_words();
        let mut args = parsed.cli;
        let file_rest = std::mem::take(&mut args.rest);
        let program = if self.program.is_empty() {
            file_rest
        } else {
            self.program.clone()
        };
        Ok(Invocation {
            subcommand: self.subcommand,
            args,
            program,
            last_time_option: parsed.last_time_option,
            filter_order: parsed.filter_order,
            patch_order: parsed.patch_order,
            argv0: self.argv0.clone(),
            option_words,
        })
    }

    /// Applies the options a recording stored in `DIR/default.opts` (text as read from the
    /// file), with lower priority than the command line. A `-t` there is dropped when the
    /// command line has `-t` or `-r`.
    pub fn with_default_opts(
        &self,
        text: Option<&str>,
        notices: &mut Notices,
    ) -> anyhow::Result<Invocation> {
        let Some(text) = text.filter(|t| !t.trim().is_empty()) else {
            return Ok(self.clone());
        };
        let mut words = vec![self.argv0.clone()];
        words.extend(text.split_whitespace().map(OsString::from));
        // Positional words in the file would swallow the command line's options: drop them.
        let defaults = parse_words(words, notices)
            .context("invalid default.opts in the data directory")?
            .option_words();
        let mut words = vec![self.argv0.clone()];
        words.extend(defaults);
        words.extend(self.option_words.iter().cloned());
        let parsed = parse_words(words, notices)?;
        let mut args = parsed.cli;
        args.rest.clear();
        let mut last_time_option = parsed.last_time_option;
        if self.last_time_option != LastTimeOption::None {
            args.filter.time_filter = self.args.filter.time_filter.clone();
            args.filter.time_range = self.args.filter.time_range.clone();
            last_time_option = self.last_time_option;
        }
        Ok(Invocation {
            subcommand: self.subcommand,
            args,
            program: self.program.clone(),
            last_time_option,
            filter_order: parsed.filter_order,
            patch_order: parsed.patch_order,
            argv0: self.argv0.clone(),
            option_words: self.option_words.clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn parse(words: &[&str]) -> Invocation {
        let mut argv = vec![OsString::from("utrace")];
        argv.extend(words.iter().map(OsString::from));
        parse_command_line(argv, &mut Notices::silent()).unwrap()
    }

    fn program(inv: &Invocation) -> Vec<&str> {
        inv.program.iter().map(|w| w.to_str().unwrap()).collect()
    }

    #[test]
    fn options_before_and_after_subcommand() {
        let a = parse(&["-F", "main", "record", "./abc"]);
        let b = parse(&["record", "-F", "main", "./abc"]);
        for inv in [&a, &b] {
            assert_eq!(inv.subcommand, Subcommand::Record);
            assert_eq!(inv.args.filter.filter, ["main"]);
            assert_eq!(program(inv), ["./abc"]);
        }
        let c = parse(&["-N", "x", "replay", "-N", "y", "--no-pager"]);
        assert_eq!(c.subcommand, Subcommand::Replay);
        assert_eq!(c.args.filter.notrace, ["x", "y"]);
        assert!(c.args.common.no_pager);
        assert!(c.program.is_empty());
    }

    #[test]
    fn program_arguments_are_untouched() {
        let inv = parse(&[
            "--no-event",
            "./abc",
            "arg1",
            "--bogus",
            "-F",
            "x",
            "record",
        ]);
        assert_eq!(inv.subcommand, Subcommand::Live);
        assert!(inv.args.filter.no_event);
        assert!(inv.args.filter.filter.is_empty());
        assert_eq!(
            program(&inv),
            ["./abc", "arg1", "--bogus", "-F", "x", "record"]
        );
        let inv = parse(&["record", "record", "-x"]);
        assert_eq!(inv.subcommand, Subcommand::Record);
        assert_eq!(program(&inv), ["record", "-x"]);
    }

    #[test]
    fn attached_and_equals_values() {
        let inv = parse(&["replay", "-Fmain", "--filter=a", "--filter", "b", "-D2"]);
        assert_eq!(inv.args.filter.filter, ["main", "a", "b"]);
        assert_eq!(inv.args.filter.depth.as_deref(), Some("2"));
        let inv = parse(&["replay", "--data=d.abc/", "--column-offset=4", "-vv", "-v"]);
        assert_eq!(inv.args.data.record_dir(), PathBuf::from("d.abc"));
        assert_eq!(inv.args.replay.column_offset.as_deref(), Some("4"));
        assert_eq!(inv.args.common.verbose, 3);
    }

    #[test]
    fn repeatable_options_accumulate_others_last_wins() {
        let inv = parse(&[
            "replay",
            "-T",
            "a@depth=1",
            "-T",
            "b@trace",
            "--tid",
            "1,2",
            "--tid=3",
            "-A",
            "f@arg1",
            "-R",
            "f@retval",
            "-C",
            "c",
            "-H",
            "h",
            "-D",
            "1",
            "-D",
            "5",
        ]);
        assert_eq!(inv.args.filter.trigger, ["a@depth=1", "b@trace"]);
        assert_eq!(inv.args.filter.tid, ["1,2", "3"]);
        assert_eq!(inv.args.filter.argument, ["f@arg1"]);
        assert_eq!(inv.args.filter.retval, ["f@retval"]);
        assert_eq!(inv.args.filter.caller, ["c"]);
        assert_eq!(inv.args.filter.hide, ["h"]);
        assert_eq!(inv.args.filter.depth.as_deref(), Some("5"));
    }

    #[test]
    fn double_dash_ends_options() {
        let inv = parse(&["record", "--", "-prog", "-F", "x"]);
        assert_eq!(inv.subcommand, Subcommand::Record);
        assert!(inv.args.filter.filter.is_empty());
        assert_eq!(program(&inv), ["-prog", "-F", "x"]);
    }

    #[test]
    fn long_option_prefixes() {
        let inv = parse(&["replay", "--no-pag", "--no-lib"]);
        assert!(inv.args.common.no_pager);
        assert!(inv.args.filter.no_libcall);
    }

    #[test]
    fn unknown_options_are_reported_and_skipped() {
        let mut notices = Notices::silent();
        let argv = ["utrace", "--bogus", "-aq", "./abc"]
            .map(OsString::from)
            .to_vec();
        let inv = parse_command_line(argv, &mut notices).unwrap();
        assert_eq!(inv.subcommand, Subcommand::Live);
        assert!(inv.args.filter.auto_args);
        assert_eq!(program(&inv), ["./abc"]);
        assert_eq!(
            notices.stderr_lines(),
            [
                "utrace: unrecognized option '--bogus'",
                "utrace: invalid option -- 'q'"
            ]
        );
    }

    #[test]
    fn missing_value_is_an_error() {
        let argv = ["utrace", "replay", "-F"].map(OsString::from).to_vec();
        assert!(parse_command_line(argv, &mut Notices::silent()).is_err());
    }

    /// uftrace takes `-D -1` as the (invalid, ignored) depth `-1` and goes on, for replay and
    /// record alike.
    #[test]
    fn negative_depth_is_a_value() {
        let inv = parse(&["replay", "-D", "-1", "-F", "main"]);
        assert_eq!(inv.args.filter.depth.as_deref(), Some("-1"));
        assert_eq!(inv.args.filter.filter, ["main"]);
        let inv = parse(&["record", "-D", "-1", "./abc"]);
        assert_eq!(inv.args.filter.depth.as_deref(), Some("-1"));
        assert_eq!(program(&inv), ["./abc"]);
        let mut n = Notices::silent();
        assert_eq!(crate::config::parse_depth("-1", &mut n), None);
        assert_eq!(
            n.stdout_lines(),
            ["Usage: invalid depth given: -1 (ignoring..)"]
        );
    }

    #[test]
    fn option_file_must_be_a_regular_file() {
        let file = "--opt-file=/dev/zero";
        let err = parse(&["replay", file])
            .with_option_file(&mut Notices::silent())
            .unwrap_err();
        assert!(format!("{err:#}").contains("not a regular file"), "{err:#}");
    }

    #[test]
    fn time_options_order() {
        assert_eq!(
            parse(&["replay", "-t", "1us", "-r", "1us~"]).last_time_option,
            LastTimeOption::TimeRange
        );
        assert_eq!(
            parse(&["-r", "1us~", "replay", "-t", "1us"]).last_time_option,
            LastTimeOption::TimeFilter
        );
        assert_eq!(parse(&["replay"]).last_time_option, LastTimeOption::None);
    }

    #[test]
    fn default_opts_have_lower_priority() {
        let mut n = Notices::silent();
        let inv = parse(&["replay", "-F", "main"]);
        let merged = inv
            .with_default_opts(Some("-t 1us\n-F a\n"), &mut n)
            .unwrap();
        assert_eq!(merged.args.filter.time_filter.as_deref(), Some("1us"));
        assert_eq!(merged.last_time_option, LastTimeOption::TimeFilter);
        assert_eq!(merged.args.filter.filter, ["a", "main"]);

        let inv = parse(&["replay", "-r", "~1ms"]);
        let merged = inv.with_default_opts(Some("-t 1us"), &mut n).unwrap();
        assert_eq!(merged.args.filter.time_filter, None);
        assert_eq!(merged.last_time_option, LastTimeOption::TimeRange);

        let inv = parse(&["replay", "-t", "5us"]);
        let merged = inv.with_default_opts(Some("-t 1us"), &mut n).unwrap();
        assert_eq!(merged.args.filter.time_filter.as_deref(), Some("5us"));

        let merged = inv.with_default_opts(Some("  \n"), &mut n).unwrap();
        assert_eq!(merged.args.filter.time_filter.as_deref(), Some("5us"));
    }

    #[test]
    fn option_file_adds_options() {
        let dir = std::env::temp_dir().join(format!("utrace-optfile-{}", std::process::id()));
        std::fs::write(&dir, "--no-libcall\nreplay\n-F main\n").unwrap();
        let file = format!("--opt-file={}", dir.display());
        let inv = parse(&["replay", "-F", "a", &file])
            .with_option_file(&mut Notices::silent())
            .unwrap();
        std::fs::remove_file(&dir).unwrap();
        assert!(inv.args.filter.no_libcall);
        assert_eq!(inv.args.filter.filter, ["a", "main"]);
        assert!(inv.program.is_empty());
    }
}
