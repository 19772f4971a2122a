//! Recording: the recorder half of `utrace record` and `utrace live`.
//!
//! Data flow: [`program`] finds and checks the executable; [`prepare_dir`] creates the data
//! directory with an empty `task.txt` and `default.opts`; [`launch`] runs the program with
//! libmcount preloaded and the settings in the environment (the contract in
//! `record_format::env`), and waits for the whole process tree while libmcount writes
//! `<tid>.dat`, `task.txt` and `sid-*.map`; [`finish`] then trims the data files and writes
//! `.sym` files and `info`.

pub mod dwarf;
pub mod finish;
mod guard;
mod kernel;
pub mod launch;
pub mod program;
mod pump;
mod syscalls;

use crate::config;
use crate::invocation::Invocation;
use crate::notice::Notices;
use crate::timefmt;
use anyhow::Context;
use record_format::argspec::{items_of_kind, ItemKind};
use record_format::env;
use record_format::info::ArgSpecInfo;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Largest `--max-stack`.
const MAX_STACK_LIMIT: u32 = 65535;
const PAGE_SIZE: u64 = 4096;

/// Every variable of the env contract, removed from the program's environment before the
/// recorder sets its own (a stale one could come from an outer recording).
const CONTRACT_VARS: [&str; 19] = [
    env::DIR,
    env::CLOCK,
    record_format::ring::ENV_PREFIX,
    env::BUFFER,
    env::MAX_STACK,
    env::DEPTH,
    env::THRESHOLD,
    env::TRIGGER,
    env::SIZE,
    env::TRACE_OFF,
    env::PATTERN,
    env::PLTHOOK,
    env::LOGFD,
    env::ARGSPEC,
    env::RETSPEC,
    env::AUTO_ARGS,
    env::DBG,
    env::NEST_LIBCALL,
    env::RECORDER,
];

/// How the traced program ended, from its raw wait status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Termination {
    Exited(i32),
    Signaled(i32),
    Unknown(i32),
    /// The recorder was stopped by a signal and stopped the program.
    Stopped,
}

impl Termination {
    pub fn from_raw(status: i32) -> Termination {
        if libc::WIFEXITED(status) {
            Termination::Exited(libc::WEXITSTATUS(status))
        } else if libc::WIFSIGNALED(status) {
            Termination::Signaled(libc::WTERMSIG(status))
        } else {
            Termination::Unknown(status)
        }
    }

    /// Prints the warning for a program killed by a signal and gives uftrace's exit status
    /// (cli.md §1.7): 0 success, 1 non-zero exit, 2 signal, 3 anything else.
    pub fn report(self, notices: &mut Notices) -> ExitCode {
        match self {
            Termination::Exited(0) => ExitCode::SUCCESS,
            Termination::Exited(_) => ExitCode::from(1),
            Termination::Signaled(sig) => {
                notices.warn(format!(
                    "child terminated by signal: {sig}: {}",
                    signal_name(sig)
                ));
                notices.flush();
                ExitCode::from(2)
            }
            Termination::Unknown(_) => ExitCode::from(3),
            // As uftrace: a recording stopped with Ctrl-C or kill is a success.
            Termination::Stopped => ExitCode::SUCCESS,
        }
    }
}

/// strsignal's text for `sig`.
fn signal_name(sig: i32) -> String {
    // SAFETY: strsignal returns a pointer to a NUL-terminated string that stays valid until the
    // next strsignal call in this thread; it is copied right away.
    let p = unsafe { libc::strsignal(sig) };
    if p.is_null() {
        return format!("Unknown signal {sig}");
    }
    // SAFETY: non-NULL results of strsignal are NUL-terminated strings.
    unsafe { std::ffi::CStr::from_ptr(p) }
        .to_string_lossy()
        .into_owned()
}

/// Where the data goes.
#[derive(Debug, Clone, Copy)]
pub enum Target<'a> {
    /// `record`: a fresh directory; an existing one is renamed to `<dir>.old`.
    Fresh(&'a Path),
    /// `live`: an empty directory that already exists (a private temporary one).
    Existing(&'a Path),
}

/// Whether `path` is a directory `record` may replace or delete: empty, or holding one of the
/// files every data directory starts with. Anything else (`-d ~` by mistake) is left alone.
fn is_data_dir(path: &Path) -> bool {
    let Ok(mut entries) = std::fs::read_dir(path) else {
        return false;
    };
    entries.next().is_none()
        || ["info", "task.txt", "default.opts"]
            .iter()
            .any(|f| path.join(f).is_file())
}

/// Creates `dir` as `record` does (cli.md §1.4): an existing `dir` becomes `dir.old` (an
/// existing `dir.old` is removed first); parents are not created. Directories that are not
/// data directories are never renamed or removed.
pub fn prepare_dir(dir: &Path) -> anyhow::Result<()> {
    if dir.symlink_metadata().is_ok() {
        if !is_data_dir(dir) {
            anyhow::bail!("{} exists and is not a data directory", dir.display());
        }
        let mut old = dir.as_os_str().to_os_string();
        old.push(".old");
        let old = PathBuf::from(old);
        if old.symlink_metadata().is_ok() {
            if !is_data_dir(&old) {
                anyhow::bail!("{} exists and is not a data directory", old.display());
            }
            std::fs::remove_dir_all(&old)
                .with_context(|| format!("cannot remove {}", old.display()))?;
        }
        std::fs::rename(dir, &old)
            .with_context(|| format!("cannot rename {} to {}", dir.display(), old.display()))?;
    }
    record_format::create::create_data_dir(dir)
        .with_context(|| format!("creating directory failed: {}", dir.display()))
}

/// Writes the file `name` of the data directory `dir` (modes and links as
/// `record_format::create` says; an old content is replaced whole or not at all).
pub(crate) fn write_file(dir: &Path, name: &str, bytes: &[u8]) -> anyhow::Result<()> {
    let path = dir.join(name);
    record_format::create::replace(&path, bytes)
        .with_context(|| format!("cannot write {}", path.display()))
}

/// The record-time settings taken from the options, with uftrace's complaints about values.
#[derive(Debug)]
struct Settings {
    env: Vec<(String, OsString)>,
    max_stack: u16,
    plthook: bool,
    pattern_type: &'static str,
    /// The `-t` value as given, stored in `default.opts`.
    time_filter: Option<String>,
    /// The `info` ARG_SPEC section (`-A`, `-R`, `-a`).
    args: Option<ArgSpecInfo>,
    /// `-k`: the kernel's system calls too.
    kernel: bool,
    /// `--kernel-buffer`: bytes of the kernel's buffer per CPU.
    kernel_buffer: Option<u64>,
    /// `-K`: kernel graph depth (function_graph mode).
    kernel_depth: u32,
    /// `-E SYSTEM:EVENT@kernel`: kernel tracepoints kept as events.
    kernel_events: Vec<String>,
}

/// The `-A` or `-R` entries (`;`-separated lists split), without those whose items of `kind`
/// do not parse: they get uftrace's `Usage:` line and are left out, as readers leave them out.
fn spec_entries(lists: &[String], kind: ItemKind, notices: &mut Notices) -> Vec<String> {
    let mut out = Vec::new();
    for entry in lists.iter().flat_map(|s| s.split(';')) {
        if entry.trim().is_empty() {
            continue;
        }
        let items = entry.split_once('@').map_or("", |(_, i)| i);
        match items_of_kind(items, kind, 8) {
            Ok(_) => out.push(entry.to_string()),
            Err((_, e)) => notices.usage(e.to_string()),
        }
    }
    out
}

/// The ARG_SPEC section and the runtime's variables for `-A`, `-R` and `-a`.
fn arg_settings(
    f: &crate::cli::FilterArgs,
    set: &mut impl FnMut(&str, String),
    notices: &mut Notices,
) -> Option<ArgSpecInfo> {
    let args = spec_entries(&f.argument, ItemKind::Args, notices);
    let rets = spec_entries(&f.retval, ItemKind::Ret, notices);
    if args.is_empty() && rets.is_empty() && !f.auto_args {
        return None;
    }
    let argspec = (!args.is_empty()).then(|| args.join(";"));
    let retspec = (!rets.is_empty()).then(|| rets.join(";"));
    if let Some(a) = &argspec {
        set(env::ARGSPEC, a.clone());
    }
    if let Some(r) = &retspec {
        set(env::RETSPEC, r.clone());
    }
    if f.auto_args {
        set(env::AUTO_ARGS, "1".to_string());
    }
    Some(ArgSpecInfo {
        argspec,
        retspec,
        argauto: record_format::autoargs::ARGAUTO.to_string(),
        retauto: record_format::autoargs::RETAUTO.to_string(),
        enumauto: record_format::autoargs::ENUMAUTO.to_string(),
        auto_args: f.auto_args,
    })
}

/// `-b SIZE`: decimal, `0x` hex or `0` octal with an optional k/m/g suffix; rounded up to a
/// page multiple.
fn parse_size(text: &str, notices: &mut Notices) -> Option<u64> {
    let t = text.trim();
    let (digits, mult) = match t.chars().last().map(|c| c.to_ascii_lowercase()) {
        Some('k') => (&t[..t.len() - 1], 1u64 << 10),
        Some('m') => (&t[..t.len() - 1], 1 << 20),
        Some('g') => (&t[..t.len() - 1], 1 << 30),
        _ => (t, 1),
    };
    let value = record_format::printfmt::int_literal(digits);
    let Some(size) = value.and_then(|v| v.checked_mul(mult)).filter(|&v| v > 0) else {
        notices.usage(format!("invalid size: {text}"));
        return None;
    };
    if size % PAGE_SIZE != 0 {
        notices.usage("buffer size should be multiple of page size");
        return Some(size.div_ceil(PAGE_SIZE) * PAGE_SIZE);
    }
    Some(size)
}

fn settings(inv: &Invocation, notices: &mut Notices) -> anyhow::Result<Settings> {
    let f = &inv.args.filter;
    let r = &inv.args.record;
    if let Some(script) = &r.script {
        if let Err(e) = std::fs::File::open(script) {
            anyhow::bail!("cannot open script file: {script}: {e}");
        }
        anyhow::bail!("running a script while recording (-S) is not supported yet: {script}");
    }
    let mut vars: Vec<(String, OsString)> = Vec::new();
    let mut set = |name: &str, value: String| vars.push((name.to_string(), value.into()));

    if let Some(size) = r.buffer.as_deref().and_then(|b| parse_size(b, notices)) {
        // Each thread maps a ring of `CHUNKS` buffers: one that memory cannot hold would
        // leave every thread unrecorded.
        // SAFETY: sysconf only reads system configuration.
        let phys = unsafe { libc::sysconf(libc::_SC_PHYS_PAGES) }.max(0) as u64 * PAGE_SIZE;
        let ring = size.saturating_mul(record_format::ring::CHUNKS as u64);
        if phys > 0 && ring > phys / 2 {
            anyhow::bail!(
                "buffer size {} is too large: each thread keeps {} of them, {} MB here (half the memory)",
                r.buffer.as_deref().unwrap_or_default(),
                record_format::ring::CHUNKS,
                (phys / 2) >> 20
            );
        }
        set(env::BUFFER, size.to_string());
    }
    let mut max_stack = env::DEFAULT_MAX_STACK as u16;
    if let Some(text) = &r.max_stack {
        match text.trim().parse::<u32>() {
            Ok(n @ 1..MAX_STACK_LIMIT) => max_stack = n as u16,
            _ => notices.usage("max stack depth should be >0 and <65535"),
        }
    }
    set(env::MAX_STACK, max_stack.to_string());
    if let Some(depth) = f
        .depth
        .as_deref()
        .and_then(|d| config::parse_depth(d, notices))
    {
        set(env::DEPTH, depth.to_string());
    }
    let time_filter = match &f.time_filter {
        Some(t) => {
            let ns = timefmt::parse_time(t, 3, notices)?;
            set(env::THRESHOLD, ns.to_string());
            Some(t.clone())
        }
        None => None,
    };
    // One trigger list in command-line order of kinds: -F, -N, -H, -C, then -T.
    let as_trigger = |list: &[String], action: &'static str| -> Vec<String> {
        list.iter()
            .flat_map(|s| s.split(';'))
            .filter(|s| !s.is_empty())
            .map(move |s| match s.contains('@') {
                true => format!("{s},{action}"),
                false => format!("{s}@{action}"),
            })
            .collect()
    };
    let mut triggers = as_trigger(&f.filter, "filter");
    triggers.extend(as_trigger(&f.notrace, "notrace"));
    triggers.extend(as_trigger(&f.hide, "hide"));
    triggers.extend(as_trigger(&f.caller, "caller"));
    for t in f.trigger.iter().flat_map(|s| s.split(';')) {
        if t.is_empty() {
            continue;
        }
        let mut ignored = Vec::new();
        let parsed = record_format::trigger::parse_trigger(t, &mut ignored);
        if parsed.actions.read {
            anyhow::bail!("the read= trigger action (performance counters) is not supported: {t}");
        }
        triggers.push(t.to_string());
    }
    if !triggers.is_empty() {
        set(env::TRIGGER, triggers.join(";"));
    }
    if let Some(size) = &f.size_filter {
        match size.trim().parse::<u64>() {
            Ok(n) if n > 0 => set(env::SIZE, n.to_string()),
            _ => notices.usage("--size-filter should be positive"),
        }
    }
    let trace_off = match f.trace.as_deref() {
        None => f.disable,
        Some("off") => true,
        Some("on") => f.disable,
        Some(other) => anyhow::bail!("invalid --trace value: {other} (use on or off)"),
    };
    if trace_off {
        set(env::TRACE_OFF, "1".to_string());
    }
    if !f.loc_filter.is_empty() {
        anyhow::bail!("-L/--loc-filter needs source lines (--srcline), which are not recorded yet");
    }
    let pattern_type = match inv.args.common.match_type.as_deref() {
        Some(m) => match config::parse_match(m, notices) {
            replay::MatchType::Glob => "glob",
            _ => "regex",
        },
        None => "regex",
    };
    set(env::PATTERN, pattern_type.to_string());
    match r.clock.as_deref() {
        None | Some("mono") => {}
        Some(c @ ("mono_raw" | "boot")) => set(env::CLOCK, c.to_string()),
        Some(other) => notices.usage(format!(
            "invalid clock source: '{other}' (force to use 'mono')"
        )),
    }
    let plthook = !f.no_libcall;
    if plthook {
        set(env::PLTHOOK, "1".to_string());
        if r.nest_libcall {
            set(env::NEST_LIBCALL, "1".to_string());
        }
    }
    let kernel = r.kernel || r.kernel_depth.is_some() || r.kernel_only || r.kernel_full;
    let kernel_buffer = r
        .kernel_buffer
        .as_deref()
        .and_then(|b| parse_size(b, notices));
    let kernel_depth = match r.kernel_depth.as_deref().map(str::trim) {
        None => 1,
        Some(d) => match d.parse::<u32>() {
            Ok(n) if n > 0 => n,
            _ => {
                notices.usage(format!("invalid kernel depth: '{d}' (use 1)"));
                1
            }
        },
    };
    if !r.patch.is_empty() {
        notices.warn("dynamic patching (-P) is not supported yet: ignoring it");
    }
    let mut kernel_events = Vec::new();
    for ev in r.event.iter().flat_map(|e| e.split(',')) {
        match ev.strip_suffix("@kernel").or_else(|| ev.strip_suffix("@k")) {
            Some(k) if kernel => kernel_events.push(k.to_string()),
            Some(_) => anyhow::bail!("kernel events (-E {ev}) are recorded with -k"),
            None => notices.warn(format!(
                "-E {ev}: only kernel tracepoints (SYSTEM:EVENT@kernel) are supported: ignoring it"
            )),
        }
    }
    if !r.watch.is_empty() {
        notices.warn("watch points (-W) are not supported yet: ignoring them");
    }
    if r.no_pltbind {
        set("LD_BIND_NOT", "1".to_string());
    }
    let args = arg_settings(f, &mut set, notices);
    Ok(Settings {
        args,
        kernel,
        kernel_buffer,
        kernel_depth,
        kernel_events,
        env: vars,
        max_stack,
        plthook,
        pattern_type,
        time_filter,
    })
}

/// A name prefix for the threads' rings in /dev/shm, unique to this recording.
fn ring_prefix() -> String {
    use std::hash::{BuildHasher, RandomState};
    let salt = RandomState::new().hash_one(std::time::SystemTime::now()) as u32;
    format!("utrace-{}-{salt:08x}", std::process::id())
}

/// `value` prepended to the colon-separated list in the environment variable `name`.
fn prepend_list(name: &str, value: &std::ffi::OsStr, sep: &str) -> OsString {
    let mut out = value.to_os_string();
    if let Some(old) = std::env::var_os(name).filter(|v| !v.is_empty()) {
        out.push(sep);
        out.push(old);
    }
    out
}

/// Longest `cmdline` stored: uftrace reads `info` lines into a 4096-byte buffer.
const MAX_CMDLINE: usize = 4000;

/// `text` cut to at most `max` bytes, at a character boundary.
fn clip(mut text: String, max: usize) -> String {
    if text.len() > max {
        let mut end = max;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
    }
    text
}

/// `--time`: the elapsed, system and user time of the program on stdout (cli.md §3.4).
fn print_times(ended: &launch::Ended) {
    use std::io::Write;
    let elapsed = format!(
        "{}.{:09} sec",
        ended.elapsed_ns / 1_000_000_000,
        ended.elapsed_ns % 1_000_000_000
    );
    let (sys, usr) = (ended.usage.ru_stime, ended.usage.ru_utime);
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "elapsed time: {elapsed:>20}");
    let _ = writeln!(
        out,
        " system time: {:6}.{:06}000 sec",
        sys.tv_sec, sys.tv_usec
    );
    let _ = writeln!(
        out,
        "   user time: {:6}.{:06}000 sec",
        usr.tv_sec, usr.tv_usec
    );
    let _ = out.flush();
}

/// `LD_PRELOAD` with libmcount, and the glibc tunables the runtime needs.
fn runtime_env(libmcount: &Path) -> Vec<(String, OsString)> {
    vec![
        (
            "LD_PRELOAD".to_string(),
            prepend_list("LD_PRELOAD", libmcount.as_os_str(), ":"),
        ),
        // CET shadow stacks would kill the program at the first hijacked return (runtime.md
        // §6.16).
        (
            "GLIBC_TUNABLES".to_string(),
            prepend_list(
                "GLIBC_TUNABLES",
                "glibc.cpu.hwcaps=-IBT,-SHSTK".as_ref(),
                ":",
            ),
        ),
    ]
}

/// `--nop`: runs the program as `record` would, but records nothing: libmcount is preloaded
/// without `UTRACE_DIR`, so its hooks stay no-ops (and glibc's gprof hooks stay unused).
pub fn run_untraced(inv: &Invocation) -> anyhow::Result<Termination> {
    let argv = &inv.program;
    let name = argv.first().context("no program to run")?;
    let program = program::check_program(name, inv.args.record.force)?;
    let libmcount = launch::find_libmcount(inv.args.common.libmcount_path.as_deref())?;
    let ended = launch::run(&launch::Launch {
        exe: &program.absolute,
        argv,
        env: runtime_env(&libmcount),
        env_remove: CONTRACT_VARS.to_vec(),
        no_randomize: inv.args.record.no_randomize_addr,
    })?;
    if inv.args.record.time {
        print_times(&ended);
    }
    Ok(Termination::from_raw(ended.raw_status))
}

/// Records `inv.program` into `target`; returns how the program ended. Prints nothing on
/// success (the program's own output passes through).
pub fn record(
    inv: &Invocation,
    notices: &mut Notices,
    target: Target<'_>,
) -> anyhow::Result<Termination> {
    let argv = &inv.program;
    let name = argv.first().context("no program to record")?;
    let program = program::check_program(name, inv.args.record.force)?;
    let libmcount = launch::find_libmcount(inv.args.common.libmcount_path.as_deref())?;
    let settings = settings(inv, notices)?;
    notices.flush();

    let dir = match target {
        Target::Fresh(dir) => {
            prepare_dir(dir)?;
            dir
        }
        Target::Existing(dir) => dir,
    };
    let dir = std::fs::canonicalize(dir)
        .with_context(|| format!("cannot find the data directory {}", dir.display()))?;
    let write = |name: &str, text: &str| write_file(&dir, name, text.as_bytes());
    write("task.txt", "")?;
    let mut opts = settings
        .time_filter
        .as_ref()
        .map_or(String::new(), |t| format!("-t {t}\n"));
    // What the kernel view options ask of the analysis: they read the same data.
    for (on, opt) in [
        (
            settings.kernel && inv.args.record.kernel_full,
            "--kernel-full",
        ),
        (
            settings.kernel && inv.args.record.kernel_only,
            "--kernel-only",
        ),
    ] {
        if on {
            opts.push_str(opt);
            opts.push('\n');
        }
    }
    write("default.opts", &opts)?;

    let mut env = settings.env.clone();
    env.push((env::DIR.to_string(), dir.clone().into_os_string()));
    // With arguments, the program's DWARF as a `.dbg` file: enum names for the readers, and
    // with -a the specs of its functions, for the runtime too.
    let mut debug_info = false;
    if let Some(args) = &settings.args {
        if let Some(text) = std::fs::read(&program.absolute).ok().and_then(|bytes| {
            dwarf::dbg_text(
                &program.absolute.to_string_lossy(),
                &bytes,
                program.build_id.as_deref(),
            )
        }) {
            let name = program
                .absolute
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let path = dir.join(format!("{name}.dbg"));
            write(&format!("{name}.dbg"), &text)?;
            debug_info = true;
            if args.auto_args {
                env.push((env::DBG.to_string(), path.into_os_string()));
            }
        }
    }
    let rings = ring_prefix();
    env.push((
        record_format::ring::ENV_PREFIX.to_string(),
        rings.clone().into(),
    ));
    env.push((
        env::RECORDER.to_string(),
        std::process::id().to_string().into(),
    ));
    env.extend(runtime_env(&libmcount));
    let cmdline: Vec<String> = std::env::args_os()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let cmdline = clip(cmdline.join(" "), MAX_CMDLINE);
    let version = crate::usage::version_line();
    let version = version
        .strip_prefix("utrace ")
        .unwrap_or(&version)
        .to_string();
    // `info` is written at the start, at the end, and by the guardian: `write` is one of
    // `finish::start`, `finish::finish`.
    type Write = fn(&Path, &finish::RecordSummary<'_>) -> anyhow::Result<()>;
    let write_info = |write: Write, ended: &launch::Ended, kernel: bool| {
        let summary = finish::RecordSummary {
            program: &program,
            ended,
            cmdline: cmdline.clone(),
            max_stack: settings.max_stack,
            plthook: settings.plthook,
            pattern_type: settings.pattern_type,
            args: settings.args.clone(),
            debug_info,
            kernel,
            version: version.clone(),
        };
        write(&dir, &summary)
    };
    let started = std::time::Instant::now();
    let not_ended = launch::Ended::not_yet(started.elapsed());
    write_info(finish::start, &not_ended, false)?;
    record_format::ring::create_ring_dir(&rings).with_context(|| {
        format!(
            "cannot create {}",
            record_format::ring::ring_dir(&rings).display()
        )
    })?;
    let temporary = matches!(target, Target::Existing(_));
    // A recorder killed from now on leaves the directory to the guardian. Forked while this
    // process has one thread: before the writer thread and the kernel readers start.
    let guardian = guard::Guardian::start(|| {
        let _ = record_format::ring::salvage(&rings, &dir);
        record_format::ring::remove_ring_dir(&rings);
        if temporary {
            let _ = std::fs::remove_dir_all(&dir);
        } else {
            let ended = launch::Ended::not_yet(started.elapsed());
            let _ = write_info(finish::finish, &ended, false);
        }
    });
    let guardian = match guardian {
        Ok(g) => g,
        Err(e) => {
            record_format::ring::remove_ring_dir(&rings);
            return Err(e);
        }
    };
    let recorded = run_recording(inv, &settings, &program, &dir, &rings, env, notices);
    record_format::ring::remove_ring_dir(&rings);
    let Recorded {
        ended,
        kernel,
        disk_full,
    } = recorded?;
    if inv.args.record.time {
        print_times(&ended);
    }
    let finished = write_info(finish::finish, &ended, kernel);
    guardian.done();
    if disk_full || (finished.is_err() && no_room_left(&dir)) {
        let tasks = finish::data_file_tids(&dir).map_or(0, |t| t.len());
        anyhow::bail!(
            "no space left on the device of {}: the trace ends early; what was written is kept and replays ({tasks} tasks)",
            dir.display()
        );
    }
    finished?;
    Ok(match ended.stopped {
        true => Termination::Stopped,
        false => Termination::from_raw(ended.raw_status),
    })
}

/// Runs the program with the writer thread and the kernel readers (`-k`) around it, then
/// moves what is left in the rings into the data files. Returns how the program ended and
/// whether kernel data was written.
fn run_recording(
    inv: &Invocation,
    settings: &Settings,
    program: &program::Program,
    dir: &Path,
    rings: &str,
    env: Vec<(String, OsString)>,
    notices: &mut Notices,
) -> anyhow::Result<Recorded> {
    let argv = &inv.program;
    let pump = pump::PumpThread::start(rings, dir)
        .with_context(|| "cannot start the recorder's writer thread".to_string())?;
    // After the writer thread: the tasks this process starts from now on are traced.
    let kernel = match settings.kernel {
        true => Some(
            kernel::Session::start(
                &kernel::Request {
                    buffer: settings.kernel_buffer,
                    depth: settings.kernel_depth,
                    events: settings.kernel_events.clone(),
                },
                dir,
            )
            .context("cannot trace the kernel")?,
        ),
        false => None,
    };
    let ended = launch::run(&launch::Launch {
        // Absolute: a bare name found in the current directory must not be searched in $PATH.
        exe: &program.absolute,
        argv,
        env,
        env_remove: CONTRACT_VARS.to_vec(),
        no_randomize: inv.args.record.no_randomize_addr,
    });
    // Records that no one wrote (killed, crashed, exit() with threads running, or a pump
    // error) are in the rings: move them into the data files, also when the launch failed
    // half-way.
    let kernel_done = kernel.map(|k| k.finish(dir));
    let pumped = pump.stop();
    let salvaged = record_format::ring::salvage(rings, dir);
    let ended = ended?;
    let kernel = match kernel_done {
        Some(done) => {
            let stats = done.context("cannot save the kernel trace")?;
            if stats.lost > 0 {
                notices.warn(format!(
                    "kernel: {} of {} events lost: a larger --kernel-buffer keeps more",
                    stats.lost,
                    stats.events + stats.lost
                ));
            }
            true
        }
        None => false,
    };
    let mut disk_full = false;
    for (what, result) in [
        ("the recorder's writer thread failed", pumped.map(drop)),
        (
            "cannot move the trace buffers into the data files",
            salvaged.map(drop),
        ),
    ] {
        match result {
            Err(e) if e.raw_os_error() == Some(libc::ENOSPC) => disk_full = true,
            Err(e) => notices.warn(format!("{what}: {e}")),
            Ok(()) => {}
        }
    }
    Ok(Recorded {
        ended,
        kernel,
        disk_full,
    })
}

/// What [`run_recording`] did.
struct Recorded {
    ended: launch::Ended,
    /// Kernel data was written.
    kernel: bool,
    /// A write failed with ENOSPC.
    disk_full: bool,
}

/// Whether the file system of `dir` has no room left for this user.
fn no_room_left(dir: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let Ok(path) = std::ffi::CString::new(dir.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: statvfs is plain data; all-zero is valid.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `path` is NUL-terminated and `st` a valid out-pointer.
    unsafe { libc::statvfs(path.as_ptr(), &mut st) == 0 && st.f_bavail == 0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        let mut n = Notices::silent();
        assert_eq!(parse_size("128K", &mut n), Some(128 * 1024));
        assert_eq!(parse_size("0x2000", &mut n), Some(8192));
        assert_eq!(parse_size("1m", &mut n), Some(1 << 20));
        assert_eq!(parse_size("010000", &mut n), Some(4096));
        assert_eq!(parse_size("5000", &mut n), Some(8192));
        assert_eq!(parse_size("x", &mut n), None);
        assert_eq!(
            n.stdout_lines(),
            [
                "Usage: buffer size should be multiple of page size",
                "Usage: invalid size: x"
            ]
        );
    }

    fn settings_of(words: &[&str]) -> (Settings, Notices) {
        let mut argv = vec![OsString::from("utrace")];
        argv.extend(words.iter().map(OsString::from));
        let mut n = Notices::silent();
        let inv = crate::invocation::parse_command_line(argv, &mut n).unwrap();
        (settings(&inv, &mut n).unwrap(), n)
    }

    fn var<'a>(s: &'a Settings, name: &str) -> Option<&'a str> {
        s.env
            .iter()
            .find(|(k, _)| k == name)
            .and_then(|(_, v)| v.to_str())
    }

    #[test]
    fn options_become_the_env_contract() {
        let (s, n) = settings_of(&[
            "record",
            "-F",
            "main",
            "-N",
            "b",
            "-T",
            "c@depth=1",
            "-T",
            "d@trace_off",
            "-D",
            "3",
            "-t",
            "1.5us",
            "-b",
            "8k",
            "--max-stack=100",
            "--match=glob",
            "./x",
        ]);
        assert!(n.stdout_lines().is_empty(), "{:?}", n.stdout_lines());
        assert_eq!(
            var(&s, env::TRIGGER),
            Some("main@filter;b@notrace;c@depth=1;d@trace_off")
        );
        assert_eq!(var(&s, env::DEPTH), Some("3"));
        assert_eq!(var(&s, env::THRESHOLD), Some("1500"));
        assert_eq!(var(&s, env::BUFFER), Some("8192"));
        assert_eq!(var(&s, env::MAX_STACK), Some("100"));
        assert_eq!(var(&s, env::PATTERN), Some("glob"));
        assert_eq!(var(&s, env::PLTHOOK), Some("1"));
        assert_eq!(s.max_stack, 100);
        assert_eq!(s.time_filter.as_deref(), Some("1.5us"));

        let (s, _) = settings_of(&["record", "--no-libcall", "./x"]);
        assert_eq!(var(&s, env::PLTHOOK), None);
        assert_eq!(var(&s, env::TRIGGER), None);
        assert_eq!(var(&s, env::MAX_STACK), Some("1024"));
        assert!(!s.plthook);

        let (s, _) = settings_of(&[
            "record",
            "-H",
            "a@libx",
            "-C",
            "c",
            "-Z",
            "30",
            "--trace=off",
            "./x",
        ]);
        assert_eq!(var(&s, env::TRIGGER), Some("a@libx,hide;c@caller"));
        assert_eq!(var(&s, env::SIZE), Some("30"));
        assert_eq!(var(&s, env::TRACE_OFF), Some("1"));

        let (s, n) = settings_of(&["record", "--max-stack=0", "-D", "0", "./x"]);
        assert_eq!(s.max_stack, 1024);
        assert_eq!(var(&s, env::DEPTH), None);
        assert_eq!(
            n.stdout_lines(),
            [
                "Usage: max stack depth should be >0 and <65535",
                "Usage: invalid depth given: 0 (ignoring..)"
            ]
        );
    }

    #[test]
    fn long_command_lines_are_clipped() {
        assert_eq!(clip("abc".into(), 5), "abc");
        assert_eq!(clip("abcdef".into(), 4), "abcd");
        assert_eq!(clip("aé".into(), 2), "a");
    }

    #[test]
    fn wait_statuses() {
        assert_eq!(Termination::from_raw(0), Termination::Exited(0));
        assert_eq!(Termination::from_raw(3 << 8), Termination::Exited(3));
        assert_eq!(Termination::from_raw(11), Termination::Signaled(11));
        assert_eq!(signal_name(10), "User defined signal 1");
    }

    #[test]
    fn data_dir_is_renamed_to_old() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("uftrace.data");
        prepare_dir(&dir).unwrap();
        std::fs::write(dir.join("info"), "1").unwrap();
        prepare_dir(&dir).unwrap();
        assert!(tmp.path().join("uftrace.data.old/info").is_file());
        std::fs::write(dir.join("info"), "2").unwrap();
        prepare_dir(&dir).unwrap();
        assert_eq!(
            std::fs::read_to_string(tmp.path().join("uftrace.data.old/info")).unwrap(),
            "2"
        );
        assert!(std::fs::read_dir(&dir).unwrap().next().is_none());
        // Other directories are left alone.
        let other = tmp.path().join("home");
        std::fs::create_dir(&other).unwrap();
        std::fs::write(other.join("notes"), "x").unwrap();
        let err = prepare_dir(&other).unwrap_err();
        assert!(err
            .to_string()
            .ends_with("home exists and is not a data directory"));
        assert!(other.join("notes").is_file());
        std::fs::rename(&other, tmp.path().join("d.old")).unwrap();
        std::fs::create_dir(tmp.path().join("d")).unwrap();
        assert!(prepare_dir(&tmp.path().join("d")).is_err());
        assert!(tmp.path().join("d.old/notes").is_file());

        let err = prepare_dir(&tmp.path().join("missing/parent")).unwrap_err();
        assert!(format!("{err:#}").contains("No such file or directory"));
    }
}
