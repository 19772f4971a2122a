//! `utrace record -p PID` and `utrace live -p PID`: tracing a process that is already running.
//!
//! Data flow: the data directory is prepared as for a launched program, and the settings the
//! environment would carry are written to `attach.env` in it (`record_format::env::ATTACH_FILE`);
//! the writer thread ([`super::pump`]) runs. Then every thread of the process is stopped
//! ([`ptrace`]), one of them calls the process's own `dlopen` on libmcount and libmcount's
//! `utrace_attach` ([`inject`]), its registers are put back and all threads let go. The process
//! runs traced until Ctrl-C (SIGINT, SIGTERM, SIGHUP or SIGQUIT to utrace), the `--duration`
//! given, or its end; then (if it still runs) its threads are stopped again, once none is inside
//! libmcount's code, and one calls `utrace_detach`. The rings are salvaged and the directory
//! finished ([`super::finish`]) like any recording. [`errors`] words the refusals.

mod caller;
mod errors;
mod inject;
mod ptrace;
mod session;

use super::{finish, launch, open_target, program, settings, write_file, Target, Termination};
use crate::invocation::Invocation;
use crate::notice::Notices;
use anyhow::{bail, Context};
use inject::Modules;
use record_format::env;
use session::{attach, detach};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// The pid of `-p PID`.
fn parse_pid(text: &str) -> anyhow::Result<i32> {
    match text.trim().parse::<i32>() {
        Ok(pid) if pid > 0 => Ok(pid),
        _ => bail!("invalid pid: {text}"),
    }
}

/// `--duration TIME`: a number with a unit (`ns`, `us`, `ms`, `s`, `m`), or a bare number of
/// seconds.
fn parse_duration(text: &str) -> anyhow::Result<Duration> {
    let t = text.trim();
    let bad = || {
        anyhow::anyhow!(
            "invalid --duration: {text} (seconds, or a number with a unit: ns, us, ms, s, m)"
        )
    };
    if !t.starts_with(|c: char| c.is_ascii_digit()) {
        return Err(bad());
    }
    let with_unit = match t.bytes().any(|b| b.is_ascii_alphabetic()) {
        true => t.to_string(),
        false => format!("{t}s"),
    };
    match record_format::timeval::parse_time(&with_unit, 9) {
        Ok(p) if p.unknown_unit.is_none() => Ok(Duration::from_nanos(p.ns)),
        _ => Err(bad()),
    }
}

/// Refuses what cannot go with `-p`/`--pid` (or `--duration` without it) before anything
/// else runs: `record`'s and `live`'s first check.
pub fn check_pid_options(inv: &Invocation) -> anyhow::Result<()> {
    let r = &inv.args.record;
    match (&r.pid, &r.duration) {
        (Some(_), _) => refuse_options(inv),
        (None, Some(_)) => bail!("--duration goes with -p/--pid only"),
        (None, None) => Ok(()),
    }
}

/// The record options that mean nothing for a running process, or that attaching does not
/// do yet: refused rather than ignored.
fn refuse_options(inv: &Invocation) -> anyhow::Result<()> {
    let r = &inv.args.record;
    let refused = [
        (!inv.program.is_empty(), "a program to run"),
        (r.keep_pid, "--keep-pid"),
        (r.kernel || r.kernel_only || r.kernel_full, "-k/--kernel"),
        (!r.event.is_empty(), "-E/--event"),
        (r.nop, "--nop"),
        (r.list_event, "--list-event"),
        (r.no_randomize_addr, "--no-randomize-addr"),
        (r.flight_recorder.is_some(), "--flight-recorder"),
        (
            r.agent,
            "-g/--agent (only a program started by record/live gets an agent)",
        ),
    ];
    match refused.into_iter().find(|(on, _)| *on) {
        Some((_, what)) => {
            bail!("-p/--pid attaches to a running process: {what} cannot go with it")
        }
        None => Ok(()),
    }
}

/// Set by a stop signal to utrace while it waits.
static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_stop(_: libc::c_int) {
    STOP.store(true, Ordering::Relaxed);
}

/// Fails, before anything is written, where the `PTRACE_SEIZE` would: another tracer holds
/// the process, or ptrace is not allowed on it (another user's, Yama): opening its memory
/// takes the same permission check.
fn probe(pid: i32) -> anyhow::Result<()> {
    let dir = ptrace::proc_dir(pid);
    let tracer = std::fs::read_to_string(dir.join("status"))
        .ok()
        .and_then(|s| {
            let line = s.lines().find(|l| l.starts_with("TracerPid:"))?.to_string();
            line.split_whitespace().nth(1)?.parse::<i32>().ok()
        })
        .unwrap_or(0);
    if tracer != 0 {
        bail!("cannot attach to process {pid}: it is being traced by process {tracer} already");
    }
    match std::fs::File::open(dir.join("mem")) {
        Ok(_) => Ok(()),
        Err(e) => match e.raw_os_error() {
            Some(libc::EACCES) | Some(libc::EPERM) => Err(errors::seize_error(
                pid,
                std::io::Error::from_raw_os_error(libc::EPERM),
            )),
            Some(libc::ENOENT) | Some(libc::ESRCH) => bail!("no such process: {pid}"),
            _ => Err(errors::seize_error(pid, e)),
        },
    }
}

/// Records process `pid_text` into `target`.
pub fn record(
    inv: &Invocation,
    notices: &mut Notices,
    target: Target<'_>,
    pid_text: &str,
) -> anyhow::Result<Termination> {
    let pid = parse_pid(pid_text)?;
    refuse_options(inv)?;
    if !Path::new(&format!("/proc/{pid}")).exists() {
        bail!("no such process: {pid}");
    }
    if pid as u32 == std::process::id() {
        bail!("cannot attach to process {pid}: it is utrace itself");
    }
    let exe = std::fs::read_link(ptrace::proc_dir(pid).join("exe")).map_err(|e| {
        match e.raw_os_error() {
            Some(libc::EACCES) | Some(libc::EPERM) => {
                errors::seize_error(pid, std::io::Error::from_raw_os_error(libc::EPERM))
            }
            _ => anyhow::anyhow!("no such process: {pid}"),
        }
    })?;
    probe(pid)?;
    let modules = Modules::read(pid)?;
    let Some((libc_path, libc_start)) = modules.find(inject::is_libc).cloned() else {
        bail!(
            "cannot attach to process {pid} ({}): it is statically linked (no libc.so in its maps), libmcount cannot be loaded into it",
            exe.display()
        );
    };
    // glibc 2.34 and later have `dlopen` in libc; before, in libdl if the program loaded it,
    // else libc's private `__libc_dlopen_mode` (which takes the same arguments).
    let dlopen = inject::symbol(pid, &libc_path, libc_start, "dlopen")
        .or_else(|| {
            let (p, s) = modules.find(|n| n.starts_with("libdl.so"))?;
            inject::symbol(pid, p, *s, "dlopen")
        })
        .or_else(|| inject::symbol(pid, &libc_path, libc_start, "__libc_dlopen_mode"))
        .with_context(|| {
            format!(
                "cannot attach to process {pid}: no dlopen in its C library {}",
                libc_path.display()
            )
        })?;
    let dlerror = inject::symbol(pid, &libc_path, libc_start, "dlerror");
    let program = program::check_program(exe.as_os_str(), true, true)?;
    let libmcount = launch::find_libmcount(inv.args.common.libmcount_path.as_deref())?;
    let settings = settings(inv, notices)?;
    notices.flush();
    let wait_for = inv
        .args
        .record
        .duration
        .as_deref()
        .map(parse_duration)
        .transpose()?;

    let dir = open_target(target)?;
    let opts = settings
        .time_filter
        .as_ref()
        .map_or(String::new(), |t| format!("-t {t}\n"));
    write_file(&dir, "default.opts", opts.as_bytes())?;
    let rings = super::ring_prefix();
    let mut vars = settings.env.clone();
    vars.push((env::DIR.to_string(), dir.clone().into_os_string()));
    vars.push((
        record_format::ring::ENV_PREFIX.to_string(),
        rings.clone().into(),
    ));
    vars.push((
        env::RECORDER.to_string(),
        std::process::id().to_string().into(),
    ));
    use std::os::unix::ffi::OsStrExt;
    let attach_file = dir.join(env::ATTACH_FILE);
    write_file(
        &dir,
        env::ATTACH_FILE,
        &env::encode_vars(vars.iter().map(|(k, v)| (k.as_str(), v.as_bytes()))),
    )?;

    let cmdline: Vec<String> = std::env::args_os()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let version = crate::usage::version_line();
    let summary = |ended: &launch::Ended| -> anyhow::Result<()> {
        finish::finish(
            &dir,
            &finish::RecordSummary {
                program: &program,
                ended,
                cmdline: super::clip(cmdline.join(" "), super::MAX_CMDLINE),
                max_stack: settings.max_stack,
                plthook: settings.plthook,
                pattern_type: settings.pattern_type,
                args: settings.args.clone(),
                debug_info: false,
                srcline: false,
                kernel: false,
                perf: false,
                events: false,
                version: version
                    .strip_prefix("utrace ")
                    .unwrap_or(&version)
                    .to_string(),
                with_syms: inv.args.record.with_syms.as_deref().map(Path::new),
                prefetched: None,
            },
        )
    };
    record_format::ring::create_ring_dir(&rings).with_context(|| {
        format!(
            "cannot create {}",
            record_format::ring::ring_dir(&rings).display()
        )
    })?;
    let started = Instant::now();
    let traced = trace(
        pid,
        &libmcount,
        &attach_file,
        [dlopen, dlerror.unwrap_or(0)],
        wait_for,
        (&rings, &dir),
        &settings,
        target.observer(),
    );
    let short = record_format::ring::short_of_space(&rings);
    let salvaged = record_format::ring::salvage(&rings, &dir);
    record_format::ring::remove_ring_dir(&rings);
    if short {
        notices.warn(super::SHORT_OF_SPACE);
    }
    let _ = std::fs::remove_file(&attach_file);
    let (exited, late) = traced?;
    // The session ran: its recording is finished whatever went wrong after.
    if let Some(e) = late {
        notices.warn(format!("{e:#}"));
    }
    if let Err(e) = salvaged {
        notices.warn(format!(
            "cannot move the trace buffers into the data files: {e}"
        ));
    }
    let mut ended = launch::Ended::not_yet(started.elapsed());
    // The process is not utrace's child: its exit status is not known.
    ended.stopped = !exited;
    summary(&ended)?;
    if inv.args.record.time {
        super::print_times(&ended);
    }
    Ok(Termination::Stopped)
}

/// Attaches, waits, detaches; returns whether the process ended meanwhile (or ran another
/// program), and the error of a detach that failed (the session's data is still good).
#[allow(clippy::too_many_arguments)]
fn trace(
    pid: i32,
    libmcount: &Path,
    attach_file: &Path,
    [dlopen, dlerror]: [u64; 2],
    wait_for: Option<Duration>,
    (rings, dir): (&str, &Path),
    settings: &settings::Settings,
    observer: Option<record_format::ring::Observer>,
) -> anyhow::Result<(bool, Option<anyhow::Error>)> {
    // Until the detach is done (the replay of `live -p` gets the default actions back).
    let _signals = super::launch::StopSignals::install(on_stop);
    // `-S`: the script's runner is told of every chunk written.
    let pump =
        super::pump::PumpThread::start(rings, dir, settings.threads, settings.rt_prio, observer)
            .context("cannot start the recorder's writer thread")?;
    let attached = attach(pid, libmcount, attach_file, dlopen, dlerror);
    let exited = attached.map(|()| {
        let exited = wait(pid, wait_for);
        // The stop signal that ended the wait asks for the detach; another one gives it up
        // (while no register is changed).
        STOP.store(false, Ordering::Relaxed);
        match exited {
            true => (true, None),
            false => match detach(pid, libmcount) {
                Ok(gone) => (gone, None),
                Err(_) if ptrace::ended(pid, pid) => (true, None),
                Err(e) => (
                    false,
                    Some(e.context(format!("detaching from process {pid} failed"))),
                ),
            },
        }
    });
    let pumped = pump.stop();
    let exited = exited?;
    pumped.context("the recorder's writer thread failed")?;
    Ok(exited)
}

/// Fails if a stop signal came to utrace.
pub(super) fn check_stop() -> anyhow::Result<()> {
    if STOP.load(Ordering::Relaxed) {
        bail!("interrupted");
    }
    Ok(())
}

/// Waits for a stop signal, the duration, or the end of the process; returns whether it
/// ended.
fn wait(pid: i32, wait_for: Option<Duration>) -> bool {
    let deadline = wait_for.map(|d| Instant::now() + d);
    // SAFETY: pidfd_open takes integers only.
    let pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) } as i32;
    let exited = || {
        if pidfd >= 0 {
            let mut pfd = libc::pollfd {
                fd: pidfd,
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one valid pollfd; no wait.
            (unsafe { libc::poll(&mut pfd, 1, 0) }) > 0
        } else {
            // SAFETY: kill with signal 0 only checks that the process exists.
            (unsafe { libc::kill(pid, 0) }) != 0
        }
    };
    let ended = loop {
        if exited() {
            break true;
        }
        if STOP.load(Ordering::Relaxed) || deadline.is_some_and(|d| Instant::now() >= d) {
            break false;
        }
        let left = deadline.map_or(Duration::from_millis(100), |d| {
            d.saturating_duration_since(Instant::now())
                .min(Duration::from_millis(100))
        });
        if pidfd >= 0 {
            let mut pfd = libc::pollfd {
                fd: pidfd,
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one valid pollfd.
            unsafe { libc::poll(&mut pfd, 1, left.as_millis() as i32) };
        } else {
            std::thread::sleep(left);
        }
    };
    if pidfd >= 0 {
        // SAFETY: our own descriptor.
        unsafe { libc::close(pidfd) };
    }
    ended
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_are_checked() {
        let ok = |t: &str| parse_duration(t).unwrap();
        assert_eq!(ok("5"), Duration::from_secs(5));
        assert_eq!(ok("1.5"), Duration::from_millis(1500));
        assert_eq!(ok("300ms"), Duration::from_millis(300));
        assert_eq!(ok("2m"), Duration::from_secs(120));
        assert_eq!(ok("10us"), Duration::from_micros(10));
        for bad in ["xyz", "", "5x", "ms", "-1"] {
            assert!(
                parse_duration(bad)
                    .unwrap_err()
                    .to_string()
                    .starts_with(&format!("invalid --duration: {bad} (")),
                "{bad}"
            );
        }
    }

    #[test]
    fn pids_are_checked() {
        assert_eq!(parse_pid(" 42 ").unwrap(), 42);
        for bad in ["0", "-3", "x", ""] {
            assert_eq!(
                parse_pid(bad).unwrap_err().to_string(),
                format!("invalid pid: {bad}")
            );
        }
    }
}
