//! Recording: the recorder half of `utrace record` and `utrace live`.
//!
//! Data flow: [`program`] finds and checks the executable; [`settings`] turns the options into
//! the environment contract (`record_format::env`); [`dir`] creates the data directory
//! ([`open_target`]), where `task.txt`, `default.opts` and a first `info` are written; a
//! [`guard`]ian process stands ready to finish the directory should the recorder be killed;
//! [`launch`] runs the program with libmcount preloaded (found by [`launch::find_libmcount`];
//! the copy built into `utrace` is written out by [`embedded`]) and the settings in the
//! environment, while the [`pump`] thread moves the threads' rings into the data files and, with `-k`, the
//! [`kernel`] session reads the kernel's trace; it waits for the whole process tree while libmcount writes
//! `<tid>.dat`, `task.txt` and `sid-*.map`; [`finish`] then trims the data files and writes
//! `.sym` files and `info`. With `-E`, [`sdt`] writes `events.txt` before the program starts;
//! with `--keep-pid`, [`kept_pid`] forks the recorder off this process, which becomes the
//! program, and the recorder waits for it through a pidfd instead of `waitpid`. With `-p PID`,
//! [`attach`] traces a process that is already running instead of launching one. With
//! `--host`, `net::send` records into a private staging directory ([`Target::Staging`]) and
//! the pump also hands every chunk it writes to an observer that sends it to the server.

pub mod agent_client;
mod attach;
pub use attach::check_pid_options;
mod dir;
pub mod dwarf;
pub mod embedded;
pub mod finish;
mod guard;
mod kept_pid;
mod kernel;
pub mod launch;
pub mod ordered;
pub mod program;
mod pump;
mod sched;
mod sdt;
mod settings;
mod symfiles;
mod syscalls;

use crate::invocation::Invocation;
use crate::notice::Notices;
use anyhow::Context;
use record_format::env;
use std::ffi::OsString;
use std::path::Path;
use std::process::ExitCode;

use dir::no_room_left;
pub(crate) use dir::write_file;
pub use dir::{open_target, prepare_dir, ChunkObserver, Target};
pub use sdt::event_list;
use settings::{runtime_env, settings, Settings, CONTRACT_VARS};

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

/// Said once when threads kept their rings private for want of room in `/dev/shm`.
pub(crate) const SHORT_OF_SPACE: &str =
    "/dev/shm is short of space: some threads wrote their own data (a larger /dev/shm lets the recorder write it)";

/// A debug line of the recorder (`uftrace` domain, `-v`).
fn debug(msg: String) {
    crate::diag::debug("uftrace", 1, msg);
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

/// A name prefix for the threads' rings in /dev/shm, unique to this recording.
fn ring_prefix() -> String {
    use std::hash::{BuildHasher, RandomState};
    let salt = RandomState::new().hash_one(std::time::SystemTime::now()) as u32;
    format!("utrace-{}-{salt:08x}", std::process::id())
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

/// `--nop`: runs the program as `record` would, but records nothing: libmcount is preloaded
/// without `UTRACE_DIR`, so its hooks stay no-ops (and glibc's gprof hooks stay unused).
pub fn run_untraced(inv: &Invocation) -> anyhow::Result<Termination> {
    let argv = &inv.program;
    let name = argv.first().context("no program to run")?;
    let program = program::check_program(
        name,
        inv.args.record.force,
        !inv.args.record.patch.is_empty() || !inv.args.record.unpatch.is_empty(),
    )?;
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
    if let Some(pid) = &inv.args.record.pid {
        return attach::record(inv, notices, target, pid);
    }
    let argv = &inv.program;
    let name = argv.first().context("no program to record")?;
    debug(format!("checking binary {}", name.to_string_lossy()));
    let program = program::check_program(
        name,
        inv.args.record.force,
        !inv.args.record.patch.is_empty() || !inv.args.record.unpatch.is_empty(),
    )?;
    let libmcount = launch::find_libmcount(inv.args.common.libmcount_path.as_deref())?;
    debug(format!("using {} library for tracing", libmcount.display()));
    let settings = settings(inv, notices)?;
    notices.flush();

    let dir = open_target(target)?;
    let write = |name: &str, text: &str| write_file(&dir, name, text.as_bytes());
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
    let match_type = match settings.pattern_type {
        "glob" => record_format::pattern::MatchType::Glob,
        _ => record_format::pattern::MatchType::Regex,
    };
    let events = sdt::write_events(&dir, &program.absolute, &settings.user_events, match_type)?;
    if events {
        env.push((env::EVENT.to_string(), "1".into()));
    }
    // With arguments, `--srcline` or `-L`, the program's DWARF as a `.dbg` file: enum names for
    // the readers, the automatic specs of its functions (`-a`, or `-A`/`-R` entries without
    // items), for the runtime too, and the functions' source locations. `-L` becomes hide
    // triggers here; the libraries' `.dbg` files are written at the end (`finish`).
    let srcline = wants_srcline(inv);
    let mut debug_info = false;
    if settings.args.is_some() || srcline {
        let args = settings.args.is_some();
        let debug = std::fs::read(&program.absolute)
            .ok()
            .and_then(|bytes| dwarf::read(&bytes, args));
        if let Some(d) = &debug {
            let text = d.text(
                &program.absolute.to_string_lossy(),
                program.build_id.as_deref(),
            );
            let name = program
                .absolute
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let path = dir.join(format!("{name}.dbg"));
            write(&format!("{name}.dbg"), &text)?;
            debug_info = true;
            if args {
                env.push((env::DBG.to_string(), path.into_os_string()));
            }
        }
        let locs = &inv.args.filter.loc_filter;
        if !locs.is_empty() {
            let hide =
                dwarf::hide::hide_triggers(&program.absolute, debug.as_ref(), locs, match_type);
            add_triggers(&mut env, &hide);
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
    let write_info = |write: Write,
                      ended: &launch::Ended,
                      kernel: bool,
                      perf: bool,
                      prefetched: Option<&symfiles::Prefetched>| {
        let summary = finish::RecordSummary {
            program: &program,
            ended,
            cmdline: cmdline.clone(),
            max_stack: settings.max_stack,
            plthook: settings.plthook,
            pattern_type: settings.pattern_type,
            args: settings.args.clone(),
            debug_info,
            srcline,
            kernel,
            perf,
            events,
            version: version.clone(),
            with_syms: inv.args.record.with_syms.as_deref().map(Path::new),
            prefetched,
        };
        write(&dir, &summary)
    };
    let started = std::time::Instant::now();
    let not_ended = launch::Ended::not_yet(started.elapsed());
    write_info(finish::start, &not_ended, false, false, None)?;
    record_format::ring::create_ring_dir(&rings).with_context(|| {
        format!(
            "cannot create {}",
            record_format::ring::ring_dir(&rings).display()
        )
    })?;
    if settings.flight.is_some() {
        if let Err(e) = record_format::flight::create_control(&rings) {
            record_format::ring::remove_ring_dir(&rings);
            return Err(e).context("cannot set up the flight recorder");
        }
    }
    let temporary = target.is_temporary();
    // --keep-pid: from here on this is the recorder, forked off the process that becomes the
    // program.
    let kept = match inv.args.record.keep_pid {
        true => Some(kept_pid::split(&launch::Launch {
            exe: &program.absolute,
            argv,
            env: env.clone(),
            env_remove: CONTRACT_VARS.to_vec(),
            no_randomize: inv.args.record.no_randomize_addr,
        })?),
        false => None,
    };
    // A recorder killed from now on leaves the directory to the guardian. Forked while this
    // process has one thread: before the writer thread and the kernel readers start.
    let guardian = guard::Guardian::start(|sent: &str| {
        // Kernel tracing (-k) off and tracefs as it was, first.
        if let Some(undo) = kernel::Undo::from_text(sent) {
            undo.apply();
        }
        let _ = record_format::ring::salvage(&rings, &dir);
        record_format::ring::remove_ring_dir(&rings);
        if temporary {
            let _ = std::fs::remove_dir_all(&dir);
        } else {
            let ended = launch::Ended::not_yet(started.elapsed());
            let _ = write_info(finish::finish, &ended, false, false, None);
        }
    });
    let mut guardian = match guardian {
        Ok(g) => g,
        Err(e) => {
            record_format::ring::remove_ring_dir(&rings);
            return Err(e);
        }
    };
    // The libraries' `.sym` texts, made while the program runs (after the guardian's fork:
    // it must be forked while this process has one thread).
    let prefetch = symfiles::Prefetch::start();
    let run = Run {
        dir: &dir,
        rings: &rings,
        env,
        kept,
        observer: target.observer(),
    };
    let recorded = run_recording(inv, &settings, &program, run, &mut guardian, notices);
    record_format::ring::remove_ring_dir(&rings);
    let Recorded {
        ended,
        kernel,
        perf,
        disk_full,
    } = recorded?;
    if inv.args.record.time {
        print_times(&ended);
    }
    crate::diag::debug("uftrace", 2, "all process/thread exited");
    debug(match Termination::from_raw(ended.raw_status) {
        _ if ended.stopped => "child stopped by the recorder".to_string(),
        Termination::Exited(code) => format!("child terminated with exit code: {code}"),
        Termination::Signaled(sig) => format!("child terminated by signal: {sig}"),
        _ => format!("child terminated with status {:#x}", ended.raw_status),
    });
    let prefetched = prefetch.finish();
    let finished = write_info(finish::finish, &ended, kernel, perf, Some(&prefetched));
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

/// Whether the recording keeps source locations: `--srcline`, or `-L` (which implies it).
fn wants_srcline(inv: &Invocation) -> bool {
    inv.args.replay.srcline || !inv.args.filter.loc_filter.is_empty()
}

/// Appends `triggers` to the runtime's trigger list (`UTRACE_TRIGGER`).
fn add_triggers(env: &mut Vec<(String, std::ffi::OsString)>, triggers: &[String]) {
    if triggers.is_empty() {
        return;
    }
    let added = triggers.join(";");
    match env.iter_mut().find(|(k, _)| k == env::TRIGGER) {
        Some((_, v)) => {
            let mut list = v.to_string_lossy().into_owned();
            list.push(';');
            list.push_str(&added);
            *v = list.into();
        }
        None => env.push((env::TRIGGER.to_string(), added.into())),
    }
}

/// Runs the program with the writer thread and the kernel readers (`-k`) around it, then
/// moves what is left in the rings into the data files. Returns how the program ended and
/// whether kernel data was written.
fn run_recording(
    inv: &Invocation,
    settings: &Settings,
    program: &program::Program,
    run: Run<'_>,
    guardian: &mut guard::Guardian,
    notices: &mut Notices,
) -> anyhow::Result<Recorded> {
    let Run {
        dir,
        rings,
        mut env,
        kept,
        observer,
    } = run;
    let argv = &inv.program;
    debug(format!(
        "creating {} thread(s) for recording",
        settings.threads
    ));
    let pump = pump::PumpThread::start(rings, dir, settings.threads, settings.rt_prio, observer)
        .with_context(|| "cannot start the recorder's writer thread".to_string())?;
    // After the writer thread: the tasks this process starts from now on are traced.
    let kernel = match settings.kernel {
        true => Some(
            kernel::Session::start(
                &kernel::Request {
                    buffer: settings.kernel_buffer,
                    depth: settings.kernel_depth,
                    events: settings.kernel_events.clone(),
                    rt_prio: settings.rt_prio,
                },
                dir,
            )
            .context("cannot trace the kernel")?,
        ),
        false => None,
    };
    if let Some(k) = &kernel {
        guardian.send(&k.undo().to_text());
        // libmcount writes its libaio markers there (record_format::aio).
        env.push((env::AIO_MARKER.to_string(), k.marker().into_os_string()));
    }
    // Last before the program starts: for this thread's next child, or the kept pid.
    let sched = sched::start_or_skip(settings.sched, kept.as_ref().map(|k| k.pid()), dir);
    // Before this process becomes a subreaper and waits for its children.
    guardian.settle();
    let ended = match kept {
        Some(kept) => kept.run(),
        None => launch::run(&launch::Launch {
            // Absolute: a bare name found in the current directory must not be searched in
            // $PATH.
            exe: &program.absolute,
            argv,
            env,
            env_remove: CONTRACT_VARS.to_vec(),
            no_randomize: inv.args.record.no_randomize_addr,
        }),
    };
    // Records that no one wrote (killed, crashed, exit() with threads running, or a pump
    // error) are in the rings: move them into the data files, also when the launch failed
    // half-way.
    let kernel_done = kernel.map(|k| k.finish(dir));
    let sched_done = sched.map(sched::SchedSession::finish);
    let perf = sched_done.is_some();
    let pumped = pump.stop();
    let short = record_format::ring::short_of_space(rings);
    let salvaged = record_format::ring::salvage(rings, dir);
    let ended = ended?;
    if short {
        notices.warn(SHORT_OF_SPACE);
    }
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
            "cannot save the scheduling events",
            sched_done.unwrap_or(Ok(())),
        ),
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
        perf,
        disk_full,
    })
}

/// Where [`run_recording`] records, and the program's environment.
struct Run<'a> {
    dir: &'a Path,
    /// The ring prefix.
    rings: &'a str,
    env: Vec<(String, OsString)>,
    /// `--keep-pid`: the program, waiting to start in the process utrace was started as.
    kept: Option<kept_pid::KeptPid>,
    /// `record --host`: told of every chunk the pump writes.
    observer: Option<record_format::ring::Observer>,
}

/// What [`run_recording`] did.
struct Recorded {
    ended: launch::Ended,
    /// Kernel data was written.
    kernel: bool,
    /// `perf-cpu*.dat` files were written.
    perf: bool,
    /// A write failed with ENOSPC.
    disk_full: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
