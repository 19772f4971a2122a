//! The agent (`record -g`): a thread of the traced process that listens on a Unix socket and
//! lets `utrace live -p PID` change tracing while the program runs (protocol, socket path and
//! the rules for fork and exec: `record_format::agent`).
//!
//! The hooks never see the agent: it changes only what they already read, by atomic stores.
//! `--trace=on|off` flips the process-wide recording switch of `filter`; `-D`, `-t`, `-F`,
//! `-N`, `-C` and `-T` build a new [`filter::Filters`] table (here, on the agent thread,
//! where allocating and reading ELF files is fine) and swap it in with one Release store; the
//! old table is leaked, since a hook may still be reading it. Threads keep the global depth
//! and time limits as `filter::INHERIT` (the session runs with `Filters::live`), so a new
//! table's limits hold from their next function entry.
//!
//! The thread is created by the constructor with every signal blocked (the program's signals
//! go to its own threads), marks itself untraced before anything else, and polls so that it
//! can end when it is the last thread of the process (it must not keep a program whose threads
//! have all called `pthread_exit` alive). Everything it reads from a client is checked before
//! use: a bad message gets an error reply, never a panic (libmcount aborts on panic).

use crate::{config, filter, sys};
use core::sync::atomic::{AtomicI32, Ordering};
use record_format::agent::{self as proto, Header, Request, HEADER_LEN};
use record_format::pattern::MatchType;
use std::ffi::CString;
use std::io::{Read, Write};
use std::os::fd::FromRawFd;
use std::os::unix::net::UnixStream;
use std::sync::Mutex;
use std::time::Duration;

/// The listening socket (a kept descriptor, see `config::keep_fd`), -1 without an agent.
static LISTEN_FD: AtomicI32 = AtomicI32::new(-1);
/// The process whose agent listens (a `fork` child has none, see [`after_fork`]).
static AGENT_PID: AtomicI32 = AtomicI32::new(0);
/// The socket's path, removed at exit.
static PATH: Mutex<Option<CString>> = Mutex::new(None);

/// What the agent's filters are made of: the trigger items in force and the global limits.
struct State {
    items: Vec<(MatchType, String)>,
    depth: u32,
    threshold: u64,
    size: u64,
    signals: bool,
}

/// Starts the agent (constructor, after the filters were built from `set`). Failures are
/// logged: the program then runs traced, without an agent.
pub fn start(set: &filter::Settings) {
    let state = State {
        items: set
            .triggers
            .split(';')
            .filter(|s| !s.is_empty())
            .map(|s| (set.match_type, s.to_string()))
            .collect(),
        depth: set.depth,
        threshold: set.threshold,
        size: set.size,
        signals: set.signals,
    };
    let fd = match listen() {
        Ok(fd) => fd,
        Err((what, e)) => {
            crate::log::error(what, e);
            return;
        }
    };
    LISTEN_FD.store(fd, Ordering::Relaxed);
    AGENT_PID.store(sys::getpid(), Ordering::Relaxed);
    // The thread starts with every signal blocked: they stay the program's threads'.
    // SAFETY: plain signal-mask calls on valid, initialised sets.
    let spawned = unsafe {
        let mut all: libc::sigset_t = core::mem::zeroed();
        let mut old: libc::sigset_t = core::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
        let r = std::thread::Builder::new()
            .name("utrace-agent".into())
            .stack_size(256 * 1024)
            .spawn(move || serve(fd, state));
        libc::pthread_sigmask(libc::SIG_SETMASK, &old, core::ptr::null_mut());
        r
    };
    if spawned.is_err() {
        crate::log::error(b"cannot start the agent thread", 0);
        stop();
        after_fork();
    }
}

/// Creates the socket directory (0700) and the listening socket (0600); returns the kept
/// descriptor.
fn listen() -> Result<i32, (&'static [u8], i32)> {
    let errno = || std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
    // SAFETY: geteuid has no preconditions.
    let euid = unsafe { libc::geteuid() };
    let dir = CString::new(proto::socket_dir(euid)).map_err(|_| (&b"agent path"[..], 0))?;
    // SAFETY: NUL-terminated path.
    if unsafe { libc::mkdir(dir.as_ptr(), 0o700) } != 0 && errno() != libc::EEXIST {
        return Err((b"cannot create the agent directory", errno()));
    }
    // An existing directory must be ours alone (not a symlink, not another user's).
    // SAFETY: `stat` is plain data, valid all zero.
    let mut st: libc::stat = unsafe { core::mem::zeroed() };
    // SAFETY: `st` is a valid out-pointer; NUL-terminated path.
    if unsafe { libc::lstat(dir.as_ptr(), &mut st) } != 0 {
        return Err((b"cannot check the agent directory", errno()));
    }
    if st.st_mode & libc::S_IFMT != libc::S_IFDIR || st.st_uid != euid || st.st_mode & 0o077 != 0 {
        return Err((
            b"agent directory is not private (mode 0700, owned by this user)",
            0,
        ));
    }
    let path = proto::socket_path(euid, sys::getpid());
    let cpath = CString::new(path.clone()).map_err(|_| (&b"agent path"[..], 0))?;
    // SAFETY: plain socket calls on a descriptor this function owns; `addr` is initialised.
    unsafe {
        libc::unlink(cpath.as_ptr());
        let fd = libc::socket(libc::AF_UNIX, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        if fd < 0 {
            return Err((b"cannot create the agent socket", errno()));
        }
        let mut addr: libc::sockaddr_un = core::mem::zeroed();
        addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
        let bytes = path.as_bytes();
        if bytes.len() >= addr.sun_path.len() {
            libc::close(fd);
            return Err((b"agent socket path too long", 0));
        }
        for (d, s) in addr.sun_path.iter_mut().zip(bytes) {
            *d = *s as libc::c_char;
        }
        let len = core::mem::size_of::<libc::sockaddr_un>() as libc::socklen_t;
        if libc::bind(fd, &addr as *const _ as *const libc::sockaddr, len) != 0 {
            let e = errno();
            libc::close(fd);
            return Err((b"cannot bind the agent socket", e));
        }
        libc::chmod(cpath.as_ptr(), 0o600);
        if libc::listen(fd, 4) != 0 {
            let e = errno();
            libc::close(fd);
            libc::unlink(cpath.as_ptr());
            return Err((b"cannot listen on the agent socket", e));
        }
        if let Ok(mut p) = PATH.lock() {
            *p = Some(cpath);
        }
        config::keep_fd(fd).ok_or((&b"no descriptor left for the agent"[..], libc::EMFILE))
    }
}

/// Process exit (library destructor): the socket goes away with the agent's process.
pub fn stop() {
    if AGENT_PID.load(Ordering::Relaxed) != sys::getpid() {
        return;
    }
    if let Ok(p) = PATH.try_lock() {
        if let Some(path) = p.as_ref() {
            // SAFETY: NUL-terminated path.
            unsafe { libc::unlink(path.as_ptr()) };
        }
    }
}

/// `fork` child: the agent thread was not copied; close the copy of its socket. (Also after
/// the thread could not be started.)
pub fn after_fork() {
    let fd = LISTEN_FD.swap(-1, Ordering::Relaxed);
    if fd >= 0 {
        config::release_fd(fd);
    }
}

/// The agent thread: accepts clients one at a time until the process ends.
fn serve(fd: i32, mut state: State) {
    // Never traced: hooks on this thread find it DEAD and return.
    crate::cpu::tls_set(crate::thread::DEAD);
    loop {
        let mut pfd = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        let n = unsafe { libc::poll(&mut pfd, 1, 500) };
        if n == 0 {
            if last_thread() {
                return;
            }
            continue;
        }
        if n < 0 {
            continue;
        }
        // SAFETY: accept4 on the listening descriptor; no address wanted.
        let conn = unsafe {
            libc::accept4(
                fd,
                core::ptr::null_mut(),
                core::ptr::null_mut(),
                libc::SOCK_CLOEXEC,
            )
        };
        if conn < 0 {
            continue;
        }
        // SAFETY: `conn` is a fresh descriptor owned from here on by the stream.
        let mut stream = unsafe { UnixStream::from_raw_fd(conn) };
        let idle = Some(Duration::from_millis(proto::IDLE_TIMEOUT_MS));
        let _ = stream.set_read_timeout(idle);
        let _ = stream.set_write_timeout(idle);
        if !peer_allowed(conn) {
            let _ = reply(
                &mut stream,
                proto::ERROR,
                b"permission denied: not the same user",
            );
            continue;
        }
        session(&mut stream, &mut state);
    }
}

/// Whether the process has no other live thread (a main thread that called `pthread_exit`
/// stays a zombie, still counted in `Threads:`: hence the look at each task's state).
fn last_thread() -> bool {
    let me = sys::gettid().to_string();
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return false;
    };
    !tasks.flatten().any(|t| {
        let name = t.file_name();
        if name.to_str() == Some(me.as_str()) {
            return false;
        }
        let stat = std::fs::read_to_string(t.path().join("stat")).unwrap_or_default();
        // The state follows the parenthesised name, which may itself hold ") ".
        let state = stat
            .rsplit_once(") ")
            .and_then(|(_, rest)| rest.chars().next());
        !matches!(state, Some('Z' | 'X') | None)
    })
}

/// Whether the peer of `conn` runs as this process's effective user, or as root.
fn peer_allowed(conn: i32) -> bool {
    // SAFETY: `cred` is a valid out-buffer of the size given.
    let mut cred: libc::ucred = unsafe { core::mem::zeroed() };
    let mut len = core::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: as above; `conn` is an open socket.
    let r = unsafe {
        libc::getsockopt(
            conn,
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            &mut cred as *mut _ as *mut libc::c_void,
            &mut len,
        )
    };
    // SAFETY: geteuid has no preconditions.
    let euid = unsafe { libc::geteuid() };
    r == 0 && (cred.uid == euid || cred.uid == 0)
}

fn reply(stream: &mut UnixStream, kind: u16, msg: &[u8]) -> std::io::Result<()> {
    stream.write_all(&proto::frame(kind, msg))
}

/// One client: requests until it closes, misbehaves or stays idle.
fn session(stream: &mut UnixStream, state: &mut State) {
    loop {
        let mut head = [0u8; HEADER_LEN];
        if stream.read_exact(&mut head).is_err() {
            return;
        }
        let h = match Header::decode(&head) {
            Ok(h) => h,
            Err(e) => {
                let _ = reply(stream, proto::ERROR, e.to_string().as_bytes());
                return;
            }
        };
        let mut payload = vec![0u8; h.len as usize];
        if stream.read_exact(&mut payload).is_err() {
            return;
        }
        let answer = Request::decode(h.kind, &payload).and_then(|r| apply(r, state));
        let sent = match answer {
            Ok(text) => reply(stream, proto::OK, text.as_bytes()),
            Err(e) => reply(stream, proto::ERROR, e.as_bytes()),
        };
        if sent.is_err() {
            return;
        }
    }
}

/// Carries out one request; the reply's text.
fn apply(req: Request, state: &mut State) -> Result<String, String> {
    match req {
        Request::Hello => {
            return Ok(format!(
                "utrace-agent {} pid={}",
                proto::VERSION,
                sys::getpid()
            ))
        }
        Request::Trace(on) => {
            filter::set_tracing(on);
            return Ok(String::new());
        }
        Request::Depth(d) => state.depth = d,
        Request::Threshold(t) => state.threshold = t,
        Request::Triggers { glob, items } => {
            let ty = if glob {
                MatchType::Glob
            } else {
                MatchType::Regex
            };
            if items.split(';').any(|i| i.trim().starts_with('@')) {
                return Err(format!("invalid trigger: {items}"));
            }
            state.items = proto::merge_items(&state.items, &items, ty);
        }
    }
    rebuild(state);
    Ok(String::new())
}

/// Swaps in the filters of `state`, built over the modules mapped now.
fn rebuild(state: &State) {
    let set = filter::Settings {
        triggers: "",
        match_type: MatchType::Regex,
        depth: state.depth,
        threshold: state.threshold,
        size: state.size,
        start_off: false,
        signals: state.signals,
        live: true,
    };
    let maps = crate::session::current_maps();
    let filters = crate::session::with_targets(&maps, |modules, plt| {
        filter::build_items(modules, plt, &state.items, &set)
    });
    filter::install(filters, true);
}
