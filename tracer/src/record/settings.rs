//! The record options turned into settings: the environment contract libmcount reads
//! (`record_format::env`), with uftrace's complaints about values, and what the recorder
//! itself needs of them (`info`'s fields, `-k`'s request).

use crate::config;
use crate::invocation::Invocation;
use crate::notice::Notices;
use crate::timefmt;
use record_format::env;
use record_format::info::ArgSpecInfo;
use std::ffi::OsString;
use std::path::Path;

mod specs;

use specs::arg_settings;
pub(super) use specs::trigger_items;

/// Largest `--max-stack`.
const MAX_STACK_LIMIT: u32 = 65535;
const PAGE_SIZE: u64 = 4096;

/// Every variable of the env contract, removed from the program's environment before the
/// recorder sets its own (a stale one could come from an outer recording).
pub(super) const CONTRACT_VARS: [&str; 27] = [
    env::DIR,
    env::CLOCK,
    record_format::ring::ENV_PREFIX,
    env::BUFFER,
    env::MAX_STACK,
    env::DEPTH,
    env::THRESHOLD,
    env::TRIGGER,
    env::SIZE,
    env::SIGNAL,
    env::TRACE_OFF,
    env::PATTERN,
    env::PLTHOOK,
    env::LOGFD,
    env::DEBUG,
    env::ARGSPEC,
    env::RETSPEC,
    env::AUTO_ARGS,
    env::DBG,
    env::NEST_LIBCALL,
    env::RECORDER,
    env::WATCH,
    env::EVENT,
    env::KEEP_PID,
    env::PATCH,
    env::PATCH_DEBUG,
    env::AIO_MARKER,
];

/// The record-time settings taken from the options, with uftrace's complaints about values.
#[derive(Debug)]
pub(super) struct Settings {
    pub(super) env: Vec<(String, OsString)>,
    pub(super) max_stack: u16,
    pub(super) plthook: bool,
    pub(super) pattern_type: &'static str,
    /// The `-t` value as given, stored in `default.opts`.
    pub(super) time_filter: Option<String>,
    /// The `info` ARG_SPEC section (`-A`, `-R`, `-a`).
    pub(super) args: Option<ArgSpecInfo>,
    /// `-k`: the kernel's system calls too.
    pub(super) kernel: bool,
    /// `--kernel-buffer`: bytes of the kernel's buffer per CPU.
    pub(super) kernel_buffer: Option<u64>,
    /// `-K`: kernel graph depth (function_graph mode).
    pub(super) kernel_depth: u32,
    /// `--num-thread`: writer threads (default: a quarter of the online CPUs, at least one).
    pub(super) threads: usize,
    /// `--rt-prio`: SCHED_FIFO priority of the recorder's threads.
    pub(super) rt_prio: Option<i32>,
    /// `-E SYSTEM:EVENT@kernel`: kernel tracepoints kept as events.
    pub(super) kernel_events: Vec<String>,
    /// `-E PROVIDER:NAME`: user SDT event patterns (see `record::sdt`).
    pub(super) user_events: Vec<String>,
    /// The scheduling events, unless `--no-event` (`--no-sched` keeps task names and ends).
    pub(super) sched: Option<super::sched::Request>,
    /// `--flight-recorder=SIZE`: bytes of records kept per thread.
    pub(super) flight: Option<u64>,
}

/// `-P`/`-U` as the `UTRACE_PATCH` list (`+PATTERN` / `-PATTERN`, command-line order);
/// `None` when neither is given.
pub(super) fn patch_env(inv: &Invocation) -> Option<String> {
    let r = &inv.args.record;
    let items: Vec<String> = inv
        .patch_order
        .iter()
        .filter_map(|&(is_patch, i)| {
            let list = if is_patch { &r.patch } else { &r.unpatch };
            Some((is_patch, list.get(i)?))
        })
        .flat_map(|(is_patch, value)| {
            value
                .split(';')
                .filter(|p| !p.trim().is_empty())
                .map(move |p| format!("{}{}", if is_patch { '+' } else { '-' }, p.trim()))
        })
        .collect();
    (!items.is_empty()).then(|| items.join(";"))
}

/// `-b SIZE`: decimal, `0x` hex or `0` octal with an optional k/m/g suffix; rounded up to a
/// page multiple.
fn parse_size(text: &str, notices: &mut Notices) -> Option<u64> {
    let Some(size) = parse_bytes(text) else {
        notices.usage(format!("invalid size: {text}"));
        return None;
    };
    if size % PAGE_SIZE != 0 {
        notices.usage("buffer size should be multiple of page size");
        return Some(size.div_ceil(PAGE_SIZE) * PAGE_SIZE);
    }
    Some(size)
}

/// `--flight-recorder=SIZE` in bytes; checks that `dump` actions (`-T`, `--signal`) come
/// with it and that it fits in memory.
fn flight_size(inv: &Invocation) -> anyhow::Result<Option<u64>> {
    let r = &inv.args.record;
    let dump_trigger = inv
        .args
        .filter
        .trigger
        .iter()
        .flat_map(|s| s.split(';'))
        .any(|t| {
            record_format::trigger::parse_trigger(t, &mut Vec::new())
                .actions
                .dump
        });
    let dump_signal = r.signal.iter().flat_map(|s| s.split(';')).any(|s| {
        record_format::trigger::parse_signal_trigger(s)
            .is_ok_and(|(_, a)| a.contains(&record_format::trigger::SignalAction::Dump))
    });
    let Some(text) = r.flight_recorder.as_deref() else {
        if dump_trigger || dump_signal {
            anyhow::bail!("the dump action needs --flight-recorder=SIZE");
        }
        return Ok(None);
    };
    if r.buffer.is_some() {
        anyhow::bail!(
            "--flight-recorder and --buffer cannot be used together (SIZE sets the buffers)"
        );
    }
    let Some(size) = parse_bytes(text) else {
        anyhow::bail!("invalid --flight-recorder size: {text} (e.g. 16M, 512k or bytes)");
    };
    // SAFETY: sysconf only reads system configuration.
    let phys = unsafe { libc::sysconf(libc::_SC_PHYS_PAGES) }.max(0) as u64 * PAGE_SIZE;
    if phys > 0 && size > phys / 2 {
        anyhow::bail!(
            "flight recorder size {text} is too large: each thread keeps that much, {} MB here (half the memory)",
            (phys / 2) >> 20
        );
    }
    Ok(Some(size))
}

/// A size as `-b` takes it (decimal, `0x` hex or `0` octal, optional k/m/g suffix); `None`
/// when it is not one or is 0.
fn parse_bytes(text: &str) -> Option<u64> {
    let t = text.trim();
    let (digits, mult) = match t.chars().last().map(|c| c.to_ascii_lowercase()) {
        Some('k') => (&t[..t.len() - 1], 1u64 << 10),
        Some('m') => (&t[..t.len() - 1], 1 << 20),
        Some('g') => (&t[..t.len() - 1], 1 << 30),
        _ => (t, 1),
    };
    let value = record_format::printfmt::int_literal(digits);
    value.and_then(|v| v.checked_mul(mult)).filter(|&v| v > 0)
}

pub(super) fn settings(inv: &Invocation, notices: &mut Notices) -> anyhow::Result<Settings> {
    let f = &inv.args.filter;
    let r = &inv.args.record;
    let mut vars: Vec<(String, OsString)> = Vec::new();
    let mut set = |name: &str, value: String| vars.push((name.to_string(), value.into()));

    let flight = flight_size(inv)?;
    if let Some(size) = flight {
        // The ring of CHUNKS chunks holds SIZE: its chunks are the buffers.
        let chunk = (size / record_format::ring::CHUNKS as u64).div_ceil(PAGE_SIZE) * PAGE_SIZE;
        set(env::BUFFER, chunk.max(PAGE_SIZE).to_string());
    }
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
    let triggers = trigger_items(f);
    if !triggers.is_empty() {
        set(env::TRIGGER, triggers.join(";"));
    }
    // --logfile: the runtime writes its messages there too; -v: its debug lines.
    if let Some(fd) = crate::diag::runtime_log_fd() {
        set(env::LOGFD, fd.to_string());
    }
    let runtime_level = crate::diag::level("mcount");
    if runtime_level > 0 {
        set(env::DEBUG, runtime_level.to_string());
    }
    let dynamic_level = crate::diag::level("dynamic");
    if dynamic_level > 0 {
        set(env::PATCH_DEBUG, dynamic_level.to_string());
    }
    if let Some(patch) = patch_env(inv) {
        set(env::PATCH, patch);
    }
    let mut signals = Vec::new();
    for spec in r
        .signal
        .iter()
        .flat_map(|s| s.split(';'))
        .filter(|s| !s.is_empty())
    {
        record_format::trigger::parse_signal_trigger(spec).map_err(anyhow::Error::msg)?;
        signals.push(spec.to_string());
    }
    if !signals.is_empty() {
        set(env::SIGNAL, signals.join(";"));
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
    if r.agent {
        set(env::AGENT, "1".to_string());
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
    let mut kernel_events = Vec::new();
    let mut user_events = Vec::new();
    for ev in r.event.iter().flat_map(|e| e.split(',')) {
        match ev.strip_suffix("@kernel").or_else(|| ev.strip_suffix("@k")) {
            Some(k) if kernel => kernel_events.push(k.to_string()),
            Some(_) => anyhow::bail!("kernel events (-E {ev}) are recorded with -k"),
            None => user_events.push(ev.to_string()),
        }
    }
    for point in r.watch.iter().flat_map(|w| w.split(';')) {
        match point {
            "cpu" => set(env::WATCH, point.to_string()),
            _ => notices.warn(format!(
                "unknown watch point: '{point}' (only 'cpu' is known)"
            )),
        }
    }
    if r.no_pltbind {
        set("LD_BIND_NOT", "1".to_string());
    }
    let args = arg_settings(f, &mut set, notices);
    let threads = match r.num_thread.as_deref().map(str::trim) {
        None => {
            let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
            (cpus / 4).max(1)
        }
        Some(t) => match t.parse::<usize>() {
            Ok(n @ 1..=256) => n,
            _ => anyhow::bail!("invalid --num-thread value: {t} (1 to 256 threads)"),
        },
    };
    let rt_prio = match r.rt_prio.as_deref().map(str::trim) {
        None => None,
        Some(p) => match p.parse::<i32>() {
            Ok(n @ 1..=99) => Some(n),
            _ => anyhow::bail!("invalid --rt-prio value: {p} (a SCHED_FIFO priority, 1 to 99)"),
        },
    };
    let sched = (!f.no_event).then(|| super::sched::Request {
        switches: !f.no_sched,
        clock: super::sched::clock_id(r.clock.as_deref()),
    });
    Ok(Settings {
        flight,
        sched,
        threads,
        rt_prio,
        args,
        kernel,
        kernel_buffer,
        kernel_depth,
        kernel_events,
        user_events,
        env: vars,
        max_stack,
        plthook,
        pattern_type,
        time_filter,
    })
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

/// `LD_PRELOAD` with libmcount, and the glibc tunables the runtime needs.
pub(super) fn runtime_env(libmcount: &Path) -> Vec<(String, OsString)> {
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

#[cfg(test)]
#[path = "settings_tests.rs"]
mod tests;
