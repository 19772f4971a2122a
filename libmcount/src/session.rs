//! Start and end of a session (one exec image): configuration from the environment (stored in
//! `config`), the `SESS`/`TASK` lines, the `sid-<SID>.map` snapshot, and the process-exit
//! destructor. This is the top of the module graph: it wires up every other part.
//!
//! The constructor runs from `.init_array` after the program's `DT_NEEDED` libraries and
//! before the executable's own constructors; hooks that fire earlier find the session state
//! not `ON` and return. Allocation and `std` are fine here (cold path, single-threaded).

use crate::config::{
    DEPTH, DIRFD, HIGH_FD, KEY, MAX_STACK, ON, RECORDER_FD, RECORDER_GONE, SID, SLOW_PATH, STATE,
    WATCH_CPU, WINDOW,
};
use crate::{clock, config, filter, lifecycle, sys, tasklog};
use core::sync::atomic::Ordering;
use record_format::env;
use record_format::maps::{parse_maps, MapEntry};
use record_format::pattern::MatchType;
use std::ffi::CString;

/// Where a session's settings come from: the environment (`LD_PRELOAD`ed at start-up) or the
/// file the recorder wrote for an attached session (`env::ATTACH_FILE`, see `attach`), which
/// holds the same names. An attached process's own environment is never touched: its children
/// must not inherit tracing.
pub enum Source {
    Env,
    File(Vec<(String, std::ffi::OsString)>),
}

impl Source {
    /// The settings of an attach file's bytes.
    pub fn from_file(bytes: &[u8]) -> Source {
        use std::os::unix::ffi::OsStrExt;
        let vars = env::decode_vars(bytes)
            .map(|(k, v)| {
                let value = std::ffi::OsStr::from_bytes(v).to_os_string();
                (String::from_utf8_lossy(k).into_owned(), value)
            })
            .collect();
        Source::File(vars)
    }

    pub fn var_os(&self, name: &str) -> Option<std::ffi::OsString> {
        match self {
            Source::Env => std::env::var_os(name),
            Source::File(vars) => vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone()),
        }
    }

    pub fn var(&self, name: &str) -> Option<String> {
        self.var_os(name)?.into_string().ok()
    }

    fn usize(&self, name: &str) -> Option<usize> {
        self.var(name)?.trim().parse().ok()
    }
}

/// Opens a pidfd of the recorder named by `UTRACE_RECORDER`, parked out of the program's way.
/// `Err(ESRCH)`: the recorder is already gone.
fn open_recorder(src: &Source) -> sys::SysResult<Option<i32>> {
    let Some(pid) = src
        .usize(env::RECORDER)
        .filter(|&p| p > 0 && p <= i32::MAX as usize)
    else {
        return Ok(None);
    };
    let fd = match sys::pidfd_open(pid as i32) {
        Ok(fd) => fd,
        // Kernels before 5.3: recording goes on without the check.
        Err(libc::ENOSYS) => return Ok(None),
        Err(e) => return Err(e),
    };
    match sys::dup_cloexec_above(fd, HIGH_FD) {
        Ok(high) => {
            sys::close(fd);
            Ok(Some(high))
        }
        Err(_) => Ok(Some(fd)),
    }
}

fn session_id() -> u64 {
    let mut b = [0u8; 8];
    if sys::getrandom(&mut b) != Ok(8) {
        // Unique enough without entropy: time and pid, mixed.
        let x = clock::now() ^ ((sys::getpid() as u64) << 40);
        b = x.wrapping_mul(0x9e37_79b9_7f4a_7c15).to_le_bytes();
    }
    u64::from_le_bytes(b)
}

/// The session map of the process as mapped now, in the calling thread's view (`/proc/self`
/// is empty once the main thread has called `pthread_exit`).
pub fn current_maps() -> String {
    session_maps(&std::fs::read_to_string("/proc/thread-self/maps").unwrap_or_default())
}

/// Calls `f` with what filters and argument specs are bound to: the modules of the session
/// map `maps` and the PLT functions hooked (entry, name).
pub fn with_targets<R>(maps: &str, f: impl FnOnce(&[MapEntry], &[(usize, &str)]) -> R) -> R {
    let names = crate::plt::get().map(|p| p.functions()).unwrap_or_default();
    let plt: Vec<(usize, &str)> = names.iter().map(|(a, n)| (*a, &**n)).collect();
    f(&parse_maps(maps), &plt)
}

/// uftrace's session map (data-format §5): file-backed mappings and `[stack]`, consecutive
/// mappings of one file merged (start of the first, end of the last, the executable
/// segment's permissions), offset/device/inode written as `00000000 00:00 0`.
pub fn session_maps(proc_maps: &str) -> String {
    struct Module<'a> {
        start: u64,
        end: u64,
        perms: &'a str,
        path: &'a str,
    }
    let mut mods: Vec<Module> = Vec::new();
    for line in proc_maps.lines() {
        let mut it = line.split_whitespace();
        let (Some(range), Some(perms)) = (it.next(), it.next()) else {
            continue;
        };
        let path = it.nth(3).unwrap_or("");
        if path.is_empty() || (path.starts_with('[') && path != "[stack]") {
            continue;
        }
        let Some((s, e)) = range.split_once('-') else {
            continue;
        };
        let (Ok(start), Ok(end)) = (u64::from_str_radix(s, 16), u64::from_str_radix(e, 16)) else {
            continue;
        };
        match mods.last_mut() {
            Some(m) if m.path == path && path != "[stack]" => {
                m.end = end;
                if perms.contains('x') {
                    m.perms = perms;
                }
            }
            _ => mods.push(Module {
                start,
                end,
                perms,
                path,
            }),
        }
    }
    let mut out = String::new();
    for m in mods {
        let head = format!("{:x}-{:x} {} 00000000 00:00 0", m.start, m.end, m.perms);
        out.push_str(&format!("{head:<73}{}\n", m.path));
    }
    out
}

/// Opens the data directory and parks the descriptor above the program's usual range.
fn open_dir(dir: &std::ffi::OsStr) -> sys::SysResult<i32> {
    use std::os::unix::ffi::OsStrExt;
    let path = std::ffi::CString::new(dir.as_bytes()).map_err(|_| libc::EINVAL)?;
    let fd = sys::openat(
        libc::AT_FDCWD,
        &path,
        libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC,
        0,
    )?;
    match sys::dup_cloexec_above(fd, HIGH_FD) {
        Ok(high) => {
            sys::close(fd);
            Ok(high)
        }
        Err(_) => Ok(fd),
    }
}

/// Creates `name` in the data directory (it must not exist) and writes `bytes` into it.
fn write_new_file(dirfd: i32, name: &str, bytes: &[u8]) -> sys::SysResult<()> {
    let name = CString::new(name).map_err(|_| libc::EINVAL)?;
    let (fd, _) = sys::open_data_file(dirfd, &name, libc::O_CREAT | libc::O_EXCL)?;
    let r = sys::pwrite_all(fd, bytes, 0);
    sys::close(fd);
    r
}

/// Library constructor: start the session if `UTRACE_DIR` is set.
pub extern "C" fn init() {
    // The interposed functions' real ones, also when nothing is recorded (`--nop`).
    crate::wrap::init();
    crate::aio::init();
    let src = Source::Env;
    if let Some(fd) = src.usize(env::LOGFD) {
        crate::log::LOGFD.store(fd as i32, Ordering::Relaxed);
    }
    if src.var_os(env::DIR).is_none() {
        return;
    }
    crate::crash::install();
    crate::kept_pid::init();
    let _ = start(&src);
}

/// Starts a session with the settings of `src` (the constructor's, or an attached one's:
/// then the process's other threads are stopped). Returns an errno when tracing stays off.
pub fn start(src: &Source) -> Result<(), i32> {
    let Some(dir) = src.var_os(env::DIR) else {
        return Err(libc::EINVAL);
    };
    if let Some(level) = src.usize(env::DEBUG) {
        crate::log::DEBUG.store(level.min(3) as i32, Ordering::Relaxed);
    }
    crate::log::debug(1, b"mcount", &[b"initializing mcount library"]);
    let dirfd = match open_dir(&dir) {
        Ok(fd) => fd,
        Err(e) => {
            crate::log::error(b"cannot open UTRACE_DIR: tracing disabled", e);
            return Err(e);
        }
    };
    match open_recorder(src) {
        Ok(fd) => RECORDER_FD.store(fd.unwrap_or(-1), Ordering::Relaxed),
        Err(e) => {
            crate::log::error(b"the recorder has ended: tracing disabled", e);
            sys::close(dirfd);
            return Err(e);
        }
    }
    RECORDER_GONE.store(false, Ordering::Relaxed);
    DIRFD.store(dirfd, Ordering::Relaxed);
    config::set_ring_prefix(
        src.var(record_format::ring::ENV_PREFIX)
            .filter(|p| !p.is_empty() && !p.contains('/'))
            .and_then(|p| CString::new(p).ok()),
    );
    crate::aio::set_marker(
        src.var(env::AIO_MARKER)
            .filter(|p| !p.is_empty())
            .and_then(|p| CString::new(p).ok()),
    );
    let clock_id = match src.var(env::CLOCK).as_deref() {
        Some("mono_raw") => libc::CLOCK_MONOTONIC_RAW,
        Some("boot") => libc::CLOCK_BOOTTIME,
        _ => libc::CLOCK_MONOTONIC,
    };
    SLOW_PATH.store(
        src.var_os(env::SLOW_PATH).is_some_and(|v| v == "1"),
        Ordering::Relaxed,
    );
    WATCH_CPU.store(
        src.var(env::WATCH)
            .unwrap_or_default()
            .split(';')
            .any(|w| w == "cpu"),
        Ordering::Relaxed,
    );
    clock::init(clock_id, src.var_os(env::NO_TSC).is_none());
    WINDOW.store(
        src.usize(env::BUFFER)
            .filter(|&w| w > 0)
            .unwrap_or(env::DEFAULT_BUFFER),
        Ordering::Relaxed,
    );
    MAX_STACK.store(
        src.usize(env::MAX_STACK)
            .filter(|&m| m > 0)
            .map_or(env::DEFAULT_MAX_STACK, |m| m.min(65535)),
        Ordering::Relaxed,
    );
    // -D alone keeps the fast paths (deeper functions are not even hooked). With filters the
    // depth counts from the -F function, -t defers entries and so on: the `filter` module does
    // it all.
    let triggers = src.var(env::TRIGGER).unwrap_or_default();
    // `-g`: only for a program started by the recorder (an attached session has none).
    let agent = matches!(src, Source::Env) && src.var_os(env::AGENT).is_some_and(|v| v == "1");
    let depth = src.usize(env::DEPTH).filter(|&d| d > 0);
    let filter_set = filter::Settings {
        triggers: &triggers,
        match_type: match src.var(env::PATTERN).as_deref() {
            Some("glob") => MatchType::Glob,
            _ => MatchType::Regex,
        },
        depth: depth.map_or(u32::MAX, |d| d.min(u32::MAX as usize) as u32),
        threshold: src.usize(env::THRESHOLD).unwrap_or(0) as u64,
        size: src.usize(env::SIZE).unwrap_or(0) as u64,
        start_off: src.var_os(env::TRACE_OFF).is_some(),
        signals: crate::signals::install(&src.var(env::SIGNAL).unwrap_or_default()),
        live: agent,
    };
    let filtered = filter_set.active();
    DEPTH.store(
        depth.filter(|_| !filtered).unwrap_or(usize::MAX),
        Ordering::Relaxed,
    );

    // Once per process (a second attach finds them done).
    static PROCESS_SETUP: std::sync::Once = std::sync::Once::new();
    PROCESS_SETUP.call_once(|| {
        let mut key: libc::pthread_key_t = 0;
        // SAFETY: `key` is a valid out-pointer; thread_exit has the destructor signature.
        if unsafe { libc::pthread_key_create(&mut key, Some(lifecycle::thread_exit)) } == 0 {
            KEY.store(key as usize, Ordering::Relaxed);
        }
        // SAFETY: fork_prepare and fork_child are plain extern "C" fns without arguments.
        unsafe {
            libc::pthread_atfork(
                Some(lifecycle::fork_prepare),
                None,
                Some(lifecycle::fork_child),
            )
        };
        crate::dlopen::init();
    });
    let sid = session_id();
    SID.store(sid, Ordering::Relaxed);
    let pid = sys::getpid();
    // The calling thread's view: `/proc/self` is empty once the main thread has called
    // `pthread_exit` (an attached process may be in that state).
    let exename = std::fs::read_link("/proc/thread-self/exe").unwrap_or_default();
    let maps = current_maps();
    use std::os::unix::ffi::OsStrExt;
    if src.var_os(env::PLTHOOK).is_some() {
        match crate::plt::get() {
            // A second attached session: the hooks the first one set up, put back.
            Some(p) => p.set_hooked(true),
            None => {
                let exe = exename.as_os_str().as_bytes();
                crate::log::debug(1, b"plthook", &[b"setup PLT hooking \"", exe, b"\""]);
                crate::plt::install(src.var_os(env::NEST_LIBCALL).is_some());
            }
        }
    }
    if filtered {
        with_targets(&maps, |modules, plt| {
            filter::init(modules, plt, &filter_set)
        });
    }
    init_args(src, &maps, &exename, &filter_set);
    if src.var_os(env::EVENT).is_some_and(|v| v == "1") {
        let exe_start = parse_maps(&maps)
            .iter()
            .find(|m| std::path::Path::new(&m.path) == exename)
            .map(|m| m.start);
        if let Some(start) = exe_start {
            crate::sdt::init(dirfd, &exename, start);
        }
    }
    if let Err(e) = write_new_file(dirfd, &format!("sid-{sid:016x}.map"), maps.as_bytes()) {
        crate::log::error(b"cannot write the session map", e);
    }
    let line = tasklog::sess_line(clock::now(), pid, sid, exename.as_os_str().as_bytes());
    if let Err(e) = tasklog::append(dirfd, &line) {
        crate::log::error(b"cannot append to task.txt: tracing disabled", e);
        return Err(e);
    }
    crate::log::debug(1, b"mcount", &[b"mcount setup done"]);
    if crate::log::DEBUG.load(Ordering::Relaxed) > 0 {
        let sid_hex = format!("{sid:016x}");
        let comm = exename
            .file_name()
            .map(|n| n.as_bytes())
            .unwrap_or_default();
        crate::log::debug(
            1,
            b"mcount",
            &[b"new session started: ", sid_hex.as_bytes(), b": ", comm],
        );
    }
    // An attach stopped the process's threads; none may be inside the bytes patched.
    let avoid = src
        .var(env::ATTACH_AVOID)
        .map(|a| env::parse_avoid(&a))
        .unwrap_or_default();
    crate::patch::init(&|k| src.var(k), &avoid);
    if agent {
        crate::agent::start(&filter_set);
    }
    // Pairs with the Acquire loads in the hooks: everything above is visible to them.
    config::set_state(ON);
    // The calling thread's state: created (with its TASK line), or, after an earlier attach,
    // moved to this session.
    let _ = lifecycle::current();
    Ok(())
}

/// Binds the recorder's `-A`/`-R`/`-a` specs to the session's functions.
fn init_args(src: &Source, maps: &str, exe: &std::path::Path, filters: &filter::Settings) {
    let var = |name| src.var(name).unwrap_or_default();
    let (argspec, retspec) = (var(env::ARGSPEC), var(env::RETSPEC));
    let auto = src.var_os(env::AUTO_ARGS).is_some();
    if argspec.is_empty() && retspec.is_empty() && !auto {
        return;
    }
    with_targets(maps, |modules, plt| {
        let exe_start = modules
            .iter()
            .find(|m| std::path::Path::new(&m.path) == exe)
            .map(|m| m.start);
        let exe_dbg = src
            .var_os(env::DBG)
            .and_then(|p| std::fs::read_to_string(p).ok())
            .zip(exe_start)
            .map(|(text, start)| (start, record_format::dbg::parse_dbg(&text)));
        let set = crate::args::Settings {
            argspec: &argspec,
            retspec: &retspec,
            auto,
            argauto: record_format::autoargs::ARGAUTO,
            retauto: record_format::autoargs::RETAUTO,
            exe_dbg,
            match_type: filters.match_type,
        };
        crate::args::init(modules, plt, &set);
    });
    if let Some(table) = crate::args::get() {
        // Calls with items take the handlers; the others keep the trampolines' fast paths.
        if let Some(p) = crate::plt::get() {
            p.slow_down(|entry| table.lookup(entry as u64).is_some());
        }
        // (With `-t` alone the fast paths run too, and must see which calls have items.)
        if filter::get().is_none() || filter::time_only() {
            crate::args::ARGS_ON.store(1, Ordering::Relaxed);
        }
    }
}

/// Library destructor (`.fini_array`, run by `exit()` after the `atexit` handlers and the
/// executable's destructors): stop tracing and close the calling thread's data file. Other
/// threads keep their windows (unmapping memory they may be writing would crash them); the
/// recorder trims their files' zero tails.
pub extern "C" fn fini() {
    if STATE.load(Ordering::Acquire) == ON {
        crate::dlopen::scan();
    }
    crate::agent::stop();
    if config::finish() {
        lifecycle::finish_current();
        crate::log::debug(1, b"mcount", &[b"mcount trace finished"]);
        crate::log::debug(1, b"mcount", &[b"exit from libmcount"]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAPS: &str = "\
55d0c0a00000-55d0c0a01000 r--p 00000000 08:01 1234                       /tmp/fib
55d0c0a01000-55d0c0a02000 r-xp 00001000 08:01 1234                       /tmp/fib
55d0c0a02000-55d0c0a04000 rw-p 00002000 08:01 1234                       /tmp/fib
55d0c1000000-55d0c1021000 rw-p 00000000 00:00 0                          [heap]
7f0000000000-7f0000001000 rw-p 00000000 00:00 0 
7f0000001000-7f0000100000 r-xp 00000000 08:01 99                         /lib/libc.so.6
7f0000100000-7f0000101000 r--p 000ff000 08:01 99                         /lib/libc.so.6
7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0                          [stack]
7ffd00100000-7ffd00102000 r-xp 00000000 00:00 0                          [vdso]
";

    #[test]
    fn attach_file_settings() {
        let bytes = env::encode_vars([
            (env::DIR, &b"/tmp/d"[..]),
            (env::BUFFER, &b" 8192 "[..]),
            (env::TRIGGER, &b"a=b@filter"[..]),
        ]);
        let src = Source::from_file(&bytes);
        assert_eq!(src.var(env::DIR).as_deref(), Some("/tmp/d"));
        assert_eq!(src.usize(env::BUFFER), Some(8192));
        assert_eq!(src.var(env::TRIGGER).as_deref(), Some("a=b@filter"));
        // Only the file counts: the environment of the process is not read.
        assert_eq!(src.var("PATH"), None);
        assert!(Source::Env.var("PATH").is_some());
    }

    #[test]
    fn maps_are_merged_like_uftrace() {
        let out = session_maps(MAPS);
        let lines: Vec<_> = out.lines().collect();
        assert_eq!(lines.len(), 3, "{out}");
        assert!(lines[0].starts_with("55d0c0a00000-55d0c0a04000 r-xp 00000000 00:00 0 "));
        assert!(lines[2].ends_with(" [stack]"));
        let parsed = parse_maps(&out);
        assert_eq!(parsed.len(), 3);
        assert_eq!(parsed[0].to_string(), lines[0]);
        assert_eq!(parsed[1].path, "/lib/libc.so.6");
        assert_eq!(
            (parsed[1].start, parsed[1].end),
            (0x7f0000001000, 0x7f0000101000)
        );
    }
}
