//! `utrace script -S FILE [ARG...]`: run a Python or Lua script over the trace data (cli.md
//! §11, `man uftrace-script`); `script -S FILE --record COMMAND` records COMMAND first.
//! `record -S` and `live -S` run the script while the program runs, over the records as the
//! recorder writes them ([`for_record`], `script::live`).

use crate::config;
use crate::invocation::Invocation;
use crate::notice::Notices;
use crate::record::{self, Target};
use crate::script::{self, LiveScript, Script, Setup};
use record_format::TraceDir;
use std::io::Write;
use std::process::ExitCode;

pub fn run(inv: &Invocation, notices: &mut Notices) -> anyhow::Result<ExitCode> {
    let Some(path) = inv.args.record.script.clone() else {
        anyhow::bail!("script needs a script file: -S FILE (a .py or .lua file)");
    };
    if inv.args.record.record {
        if inv.program.is_empty() {
            return Ok(super::missing_program(notices));
        }
        crate::config::check_patterns(inv)?;
        let rec_inv = with_script_options(inv, &path, notices)?;
        let mut script = Script::open(&path)?;
        let dir = inv.args.data.record_dir();
        let ended = record::record(&rec_inv, notices, Target::Fresh(&dir))?;
        let status = ended.report(notices);
        let data = super::open_data_at(&dir)?;
        let analysis = super::live::replay_invocation(inv);
        run_over(
            &data,
            &analysis,
            notices,
            &mut script,
            &words(&inv.program),
            false,
        )?;
        return Ok(status);
    }
    let data = super::open_data(inv)?;
    let mut script = Script::open(&path)?;
    run_over(
        &data,
        inv,
        notices,
        &mut script,
        &words(&inv.program),
        false,
    )?;
    Ok(ExitCode::SUCCESS)
}

/// How `record -S`/`live -S` run the script.
pub enum RecordScript {
    /// While the program runs.
    Live(LiveScript),
    /// `--keep-pid`: the recorder goes on in a forked copy of this process, which has none of
    /// its other threads: the script is loaded first and runs over the data once the program
    /// ended.
    After(Script),
}

impl RecordScript {
    /// The observer of the recording's chunks, if the script runs while the program runs.
    pub fn observer(&self) -> Option<crate::record::ChunkObserver> {
        match self {
            RecordScript::Live(live) => Some(live.observer()),
            RecordScript::After(_) => None,
        }
    }

    /// The recording into `dir` ended: the script's end (or its whole run).
    pub fn finish(
        self,
        inv: &Invocation,
        dir: &std::path::Path,
        notices: &mut Notices,
    ) -> anyhow::Result<()> {
        match self {
            RecordScript::Live(live) => live.finish(),
            RecordScript::After(mut script) => {
                let data = super::open_data_at(dir)?;
                let analysis = super::live::replay_invocation(inv);
                let cmds = words(&inv.program);
                run_over(&data, &analysis, notices, &mut script, &cmds, true)
            }
        }
    }
}

/// A command line as strings.
fn words(v: &[std::ffi::OsString]) -> Vec<String> {
    v.iter().map(|w| w.to_string_lossy().into_owned()).collect()
}

/// `record -S`/`live -S`: the invocation to record with (the script's `uftrace-option:`
/// options added), and the script started ([`LiveScript`]: loaded, `uftrace_begin` called)
/// to run over what is recorded into `dir` while the program runs; no script without `-S`.
/// A script that cannot be loaded stops here, before the program runs.
pub fn for_record(
    inv: &Invocation,
    notices: &mut Notices,
    dir: &std::path::Path,
) -> anyhow::Result<(Option<RecordScript>, Invocation)> {
    let Some(path) = inv.args.record.script.as_deref() else {
        return Ok((None, inv.clone()));
    };
    let rec_inv = with_script_options(inv, path, notices)?;
    if inv.args.record.keep_pid {
        return Ok((Some(RecordScript::After(Script::open(path)?)), rec_inv));
    }
    // As `script` would run it over the data: the filters were applied by the recorder.
    let cfg = config::analysis_config(&super::live::replay_invocation(inv), notices)?;
    notices.flush();
    let setup = Setup {
        demangle: cfg.demangle,
        match_type: cfg.match_type,
        no_args: inv.args.replay.no_args,
    };
    let live = LiveScript::start(path, setup, words(&inv.program), dir)?;
    Ok((Some(RecordScript::Live(live)), rec_inv))
}

/// The record target of `dir` (`fresh`: made fresh, else a private one that exists), observed
/// by `script` when there is one.
pub fn target<'a>(
    dir: &'a std::path::Path,
    fresh: bool,
    observer: Option<&'a crate::record::ChunkObserver>,
) -> Target<'a> {
    match (fresh, observer) {
        (true, None) => Target::Fresh(dir),
        (true, Some(o)) => Target::FreshObserved(dir, o),
        (false, None) => Target::Existing(dir),
        (false, Some(o)) => Target::Staging(dir, o),
    }
}

/// `inv` with the record options the script at `path` asks for in its `uftrace-option:`
/// lines (the command line's own win).
pub fn with_script_options(
    inv: &Invocation,
    path: &str,
    notices: &mut Notices,
) -> anyhow::Result<Invocation> {
    let words = script::record_options(path);
    if words.is_empty() {
        return Ok(inv.clone());
    }
    let text = words.join(" ");
    let mut out = inv.with_default_opts(Some(&text), notices)?;
    out.program = inv.program.clone();
    Ok(out)
}

/// Runs `script` over `dir` with the analysis options of `inv` (and the directory's
/// `default.opts`): `uftrace_begin`, the records, `uftrace_end`.
fn run_over(
    dir: &TraceDir,
    inv: &Invocation,
    notices: &mut Notices,
    script: &mut Script,
    cmds: &[String],
    record: bool,
) -> anyhow::Result<()> {
    let inv = inv.with_default_opts(dir.default_opts.as_deref(), notices)?;
    let mut cfg = config::analysis_config(&inv, notices)?;
    // `--disable` (`--trace=off`): nothing runs the script before a trace_on trigger.
    cfg.start_disabled = inv.args.filter.disable || inv.args.filter.trace.as_deref() == Some("off");
    notices.flush();
    script::walk::run(dir, &cfg, script, inv.args.replay.no_args, (record, cmds))?;
    let _ = std::io::stdout().flush();
    Ok(())
}
