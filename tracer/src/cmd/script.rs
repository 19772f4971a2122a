//! `utrace script -S FILE [ARG...]`: run a Python or Lua script over the trace data (cli.md
//! §11, `man uftrace-script`); `script -S FILE --record COMMAND` records COMMAND first.
//! `record -S` and `live -S` run the script over what they recorded ([`after_record`]).

use crate::config;
use crate::invocation::Invocation;
use crate::notice::Notices;
use crate::record::{self, Target};
use crate::script::{self, Script};
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
        run_over(&data, &analysis, notices, &mut script, &cmds(inv), false)?;
        return Ok(status);
    }
    let data = super::open_data(inv)?;
    let mut script = Script::open(&path)?;
    run_over(&data, inv, notices, &mut script, &cmds(inv), false)?;
    Ok(ExitCode::SUCCESS)
}

/// `record -S`/`live -S`: the script loaded, and the invocation to record with (the
/// script's `uftrace-option:` options added); no script without `-S`.
pub fn for_record(
    inv: &Invocation,
    notices: &mut Notices,
) -> anyhow::Result<(Option<Script>, Invocation)> {
    match inv.args.record.script.as_deref() {
        None => Ok((None, inv.clone())),
        Some(path) => {
            let rec_inv = with_script_options(inv, path, notices)?;
            Ok((Some(Script::open(path)?), rec_inv))
        }
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

/// `record -S`/`live -S`: runs the script loaded before recording over the data recorded in
/// `dir`, as at record time (`ctx["record"]` is true, `cmds` the program's command line; the
/// filters were applied by the recorder).
pub fn after_record(
    inv: &Invocation,
    dir: &std::path::Path,
    notices: &mut Notices,
    script: &mut Script,
) -> anyhow::Result<()> {
    let data = super::open_data_at(dir)?;
    let analysis = super::live::replay_invocation(inv);
    run_over(&data, &analysis, notices, script, &cmds(inv), true)
}

/// The script's `cmds`: the program's command line, as text.
fn cmds(inv: &Invocation) -> Vec<String> {
    inv.program
        .iter()
        .map(|w| w.to_string_lossy().into_owned())
        .collect()
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
