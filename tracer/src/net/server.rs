//! The `recv` server: listens on a TCP port (every address of the machine, IPv6 and IPv4),
//! and writes each session a sender makes ([`super::proto`]) into its own data directory
//! under the receiving directory, named as the sender's `-d` (a name already there is moved to
//! `NAME.old` first, as `record` does). Each connection is served by its own thread, so a slow
//! or stalled sender does not hold the others up.
//!
//! Every message is written whole or not at all: a sender that disconnects in the middle of a
//! message leaves the files as the last complete message made them, and the server goes on
//! serving. After a session's end message, `--run-cmd` is started (its words split at spaces,
//! in the receiving directory, as uftrace does) and not waited for.
//!
//! The server runs until SIGINT or SIGTERM (as uftrace's), then exits with status 0; what a
//! session received up to then stays on disk.

use super::proto::{read_message, Message};
use anyhow::Context;
use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::io::{Seek, Write};
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex};

/// What `recv` was asked to do.
#[derive(Debug, Clone)]
pub struct Options {
    /// Where sessions are written (`-d`); created if missing. `None`: the current directory.
    pub dir: Option<PathBuf>,
    pub port: u16,
    /// `--run-cmd`: run after each complete session.
    pub run_cmd: Option<String>,
}

/// What the connection threads share.
struct Shared {
    root: PathBuf,
    run_cmd: Option<String>,
    /// Data directories being received now: a second sender of the same name is refused.
    active: Mutex<HashSet<PathBuf>>,
}

/// A debug line of the server (`uftrace` domain, `-v`).
fn debug(msg: String) {
    crate::diag::debug("uftrace", 1, msg);
}

/// Runs the server until SIGINT or SIGTERM.
pub fn serve(opts: &Options) -> anyhow::Result<()> {
    let root = match &opts.dir {
        Some(dir) => {
            match record_format::create::create_data_dir(dir) {
                Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => {
                    return Err(e)
                        .with_context(|| format!("cannot create directory {}", dir.display()))
                }
                _ => {}
            }
            dir.clone()
        }
        None => PathBuf::from("."),
    };
    let root = std::fs::canonicalize(&root)
        .with_context(|| format!("cannot find directory {}", root.display()))?;
    if !root.is_dir() {
        anyhow::bail!("{} is not a directory", root.display());
    }
    let listener = listen(opts.port)?;
    // The signals are read from a descriptor, by this thread only: blocked before any
    // connection thread starts (threads inherit the mask; spawned commands get a clean one).
    let signals = Signals::block()?;
    debug(format!(
        "receiving into {} on port {}",
        root.display(),
        opts.port
    ));
    let shared = Arc::new(Shared {
        root,
        run_cmd: opts.run_cmd.clone(),
        active: Mutex::new(HashSet::new()),
    });
    loop {
        let mut fds = [
            libc::pollfd {
                fd: listener.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: signals.fd.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        // SAFETY: `fds` is a valid array of two pollfd for the duration of the call.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), 2, -1) };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e).context("cannot wait for connections");
        }
        if fds[1].revents != 0 {
            debug("stopped by a signal".to_string());
            return Ok(());
        }
        if fds[0].revents == 0 {
            continue;
        }
        match listener.accept() {
            Ok((stream, peer)) => {
                // 127.0.0.1 rather than ::ffff:127.0.0.1 in messages.
                let peer = SocketAddr::new(peer.ip().to_canonical(), peer.port());
                let shared = Arc::clone(&shared);
                let spawned = std::thread::Builder::new()
                    .name("utrace-recv".to_string())
                    .spawn(move || serve_connection(stream, peer, &shared));
                if let Err(e) = spawned {
                    crate::diag::warn(format!("cannot serve {peer}: {e}"));
                }
            }
            // A connection reset before it was accepted, or no descriptor left for now.
            Err(e) => crate::diag::warn(format!("cannot accept a connection: {e}")),
        }
    }
}

/// A listener on every address of the machine at `port`: IPv6 and IPv4 on one socket, or
/// IPv4 only where IPv6 is off.
fn listen(port: u16) -> anyhow::Result<TcpListener> {
    let v6 = TcpListener::bind(SocketAddr::from((Ipv6Addr::UNSPECIFIED, port)));
    match v6 {
        Ok(l) => Ok(l),
        Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => {
            Err(e).with_context(|| format!("cannot listen on port {port}"))
        }
        Err(_) => TcpListener::bind(SocketAddr::from((Ipv4Addr::UNSPECIFIED, port)))
            .with_context(|| format!("cannot listen on port {port}")),
    }
}

/// SIGINT and SIGTERM, blocked and readable from a descriptor.
struct Signals {
    fd: OwnedFd,
}

impl Signals {
    fn block() -> anyhow::Result<Signals> {
        // SAFETY: sigset_t is plain data, initialised by sigemptyset before use.
        let mut set: libc::sigset_t = unsafe { std::mem::zeroed() };
        // SAFETY: `set` is a valid sigset_t; the calls only change it and this thread's mask.
        let fd = unsafe {
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, libc::SIGINT);
            libc::sigaddset(&mut set, libc::SIGTERM);
            libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
            libc::signalfd(-1, &set, libc::SFD_CLOEXEC | libc::SFD_NONBLOCK)
        };
        if fd < 0 {
            return Err(std::io::Error::last_os_error()).context("cannot wait for signals");
        }
        // SAFETY: signalfd returned a new descriptor that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(Signals { fd })
    }
}

/// Serves one sender until its end message, its disconnection or an error (one warning).
fn serve_connection(stream: TcpStream, peer: SocketAddr, shared: &Shared) {
    debug(format!("connection from {peer}"));
    keep_alive(&stream);
    let mut input = std::io::BufReader::with_capacity(1 << 16, stream);
    let mut session: Option<Session> = None;
    let outcome = loop {
        let message = match read_message(&mut input) {
            Ok(Some(m)) => m,
            // A connection closed before it said anything (a port probe) is no session.
            Ok(None) if session.is_none() => {
                debug(format!("{peer} closed the connection"));
                return;
            }
            Ok(None) => {
                break Err(anyhow::anyhow!(
                    "the connection was closed before the end of the session"
                ))
            }
            Err(e) => break Err(anyhow::Error::from(e)),
        };
        match apply(message, &mut session, shared) {
            Ok(true) => break Ok(()),
            Ok(false) => {}
            Err(e) => break Err(e),
        }
    };
    let name = session.as_ref().map(|s| s.name.clone()).unwrap_or_default();
    if let Some(s) = session {
        shared
            .active
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&s.dir);
    }
    match outcome {
        Ok(()) => {
            debug(format!("received {name} from {peer}"));
            if let Some(cmd) = &shared.run_cmd {
                run_command(cmd, &shared.root);
            }
        }
        Err(e) if name.is_empty() => crate::diag::warn(format!("{peer}: {e:#}")),
        Err(e) => crate::diag::warn(format!(
            "{name} from {peer} is incomplete: {e:#} (what was received is kept)"
        )),
    }
}

/// Has the kernel probe an idle connection, so that a sender whose machine went away without
/// closing it is noticed within about two minutes (its session's name is then free again).
/// A sender may be silent for long while its program runs, so there is no read timeout.
fn keep_alive(stream: &TcpStream) {
    let fd = stream.as_raw_fd();
    for (level, name, value) in [
        (libc::SOL_SOCKET, libc::SO_KEEPALIVE, 1),
        (libc::IPPROTO_TCP, libc::TCP_KEEPIDLE, 60),
        (libc::IPPROTO_TCP, libc::TCP_KEEPINTVL, 10),
        (libc::IPPROTO_TCP, libc::TCP_KEEPCNT, 6),
    ] {
        let value: libc::c_int = value;
        // SAFETY: `fd` is the open socket of `stream`; the option value is a c_int of the
        // size given.
        unsafe {
            libc::setsockopt(
                fd,
                level,
                name,
                (&value as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            );
        }
    }
}

/// One session being received.
struct Session {
    /// The name the sender gave, for messages.
    name: String,
    dir: PathBuf,
    /// Files written so far, kept open.
    files: HashMap<String, File>,
}

/// Files kept open per session at most (a session has a few per thread and CPU).
const MAX_OPEN: usize = 256;

impl Session {
    /// Appends `bytes` to the file `name` of the session.
    fn append(&mut self, name: &str, bytes: &[u8]) -> anyhow::Result<()> {
        if !self.files.contains_key(name) {
            if self.files.len() >= MAX_OPEN {
                self.files.clear();
            }
            let path = self.dir.join(name);
            let file = record_format::create::open_data_file(&path)
                .with_context(|| format!("cannot open {}", path.display()))?;
            self.files.insert(name.to_string(), file);
        }
        let file = self.files.get_mut(name).expect("inserted above");
        let path = || self.dir.join(name);
        let start = file
            .seek(std::io::SeekFrom::End(0))
            .with_context(|| format!("cannot write {}", path().display()))?;
        if let Err(e) = file.write_all(bytes) {
            // Whole messages only: a failed write is taken back.
            let _ = file.set_len(start);
            return Err(e).with_context(|| format!("cannot write {}", path().display()));
        }
        Ok(())
    }
}

/// Applies one message; `Ok(true)` after the end message.
fn apply(message: Message, session: &mut Option<Session>, shared: &Shared) -> anyhow::Result<bool> {
    if let Message::Start { dir } = &message {
        if session.is_some() {
            anyhow::bail!("a second start message in one session");
        }
        *session = Some(start(dir, shared)?);
        return Ok(false);
    }
    let Some(s) = session.as_mut() else {
        anyhow::bail!("the session did not begin with a start message");
    };
    match message {
        Message::Start { .. } => unreachable!("handled above"),
        Message::Data { tid, bytes } => s.append(&format!("{tid}.dat"), &bytes)?,
        Message::KernelData { cpu, bytes } => s.append(&format!("kernel-cpu{cpu}.dat"), &bytes)?,
        Message::PerfData { cpu, bytes } => s.append(&format!("perf-cpu{cpu}.dat"), &bytes)?,
        Message::Info { bytes } => s.append("info", &super::proto::info_from_wire(bytes))?,
        Message::Metadata { name, bytes } => {
            let name = file_name(&name)?;
            s.append(&name, &bytes)?;
        }
        Message::End => return Ok(true),
    }
    Ok(false)
}

/// Makes the data directory of a session named `name` under the root.
fn start(name: &[u8], shared: &Shared) -> anyhow::Result<Session> {
    let relative = dir_name(name)?;
    let display = relative.display().to_string();
    let dir = shared.root.join(&relative);
    {
        let mut active = shared.active.lock().unwrap_or_else(|e| e.into_inner());
        if !active.insert(dir.clone()) {
            anyhow::bail!("{display} is being received from another sender");
        }
    }
    let made = (|| {
        if let Some(parent) = dir.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("cannot create {}", parent.display()))?;
        }
        crate::record::prepare_dir(&dir)?;
        // As uftrace's receiver: the options file exists even when the sender sends none.
        record_format::create::write_new(&dir.join("default.opts"), b"")
            .with_context(|| format!("cannot write {}/default.opts", dir.display()))
    })();
    if let Err(e) = made {
        shared
            .active
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&dir);
        return Err(e);
    }
    debug(format!("receiving {display}"));
    Ok(Session {
        name: display,
        dir,
        files: HashMap::new(),
    })
}

/// The directory a start message names, made relative to the root: a leading `/` is dropped
/// (a sender's absolute `-d` lands under the root too), `..` is refused.
fn dir_name(name: &[u8]) -> anyhow::Result<PathBuf> {
    use std::os::unix::ffi::OsStrExt;
    let text = String::from_utf8_lossy(name);
    if name.contains(&0) {
        anyhow::bail!("bad data directory name: {text}");
    }
    let mut out = PathBuf::new();
    for part in Path::new(std::ffi::OsStr::from_bytes(name)).components() {
        match part {
            Component::Normal(p) => out.push(p),
            Component::RootDir | Component::CurDir => {}
            Component::ParentDir | Component::Prefix(_) => {
                anyhow::bail!("bad data directory name: {text}")
            }
        }
    }
    if out.as_os_str().is_empty() {
        anyhow::bail!("bad data directory name: {text}");
    }
    Ok(out)
}

/// The name of a file a metadata message names: one plain file name.
fn file_name(name: &[u8]) -> anyhow::Result<String> {
    let text = String::from_utf8_lossy(name);
    let ok = std::str::from_utf8(name).is_ok()
        && !name.is_empty()
        && name.len() <= 255
        && name != b"."
        && name != b".."
        && !name.iter().any(|&b| b == b'/' || b == 0);
    match ok {
        true => Ok(text.into_owned()),
        false => anyhow::bail!("bad file name: {text}"),
    }
}

/// Starts `--run-cmd` (words split at spaces) in `dir`; a thread reaps it.
fn run_command(cmd: &str, dir: &Path) {
    let mut words = cmd.split_whitespace();
    let Some(program) = words.next() else {
        return;
    };
    let spawned = std::process::Command::new(program)
        .args(words)
        .current_dir(dir)
        .spawn();
    match spawned {
        Ok(mut child) => {
            let _ = std::thread::Builder::new()
                .name("utrace-run-cmd".to_string())
                .spawn(move || child.wait());
        }
        Err(e) => crate::diag::warn(format!("cannot run {program}: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directory_names_stay_under_the_root() {
        let ok = |n: &str| dir_name(n.as_bytes()).unwrap();
        assert_eq!(ok("uftrace.data"), Path::new("uftrace.data"));
        assert_eq!(ok("/tmp/x/"), Path::new("tmp/x"));
        assert_eq!(ok("./a/./b"), Path::new("a/b"));
        for bad in ["", "/", "..", "a/../../b", "a\0b"] {
            assert!(dir_name(bad.as_bytes()).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn file_names_are_plain() {
        assert_eq!(file_name(b"task.txt").unwrap(), "task.txt");
        for bad in [&b""[..], b".", b"..", b"a/b", b"../info", b"a\0"] {
            assert!(file_name(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn messages_make_a_directory() {
        let tmp = tempfile::tempdir().unwrap();
        let shared = Shared {
            root: tmp.path().to_path_buf(),
            run_cmd: None,
            active: Mutex::new(HashSet::new()),
        };
        let mut s = None;
        let data = |bytes: &[u8]| Message::Data {
            tid: 5,
            bytes: bytes.to_vec(),
        };
        assert!(apply(data(b"x"), &mut s, &shared).is_err());
        let start = Message::Start { dir: b"d".to_vec() };
        assert!(!apply(start.clone(), &mut s, &shared).unwrap());
        assert!(apply(start, &mut s, &shared).is_err());
        apply(data(b"ab"), &mut s, &shared).unwrap();
        apply(data(b"cd"), &mut s, &shared).unwrap();
        let meta = Message::Metadata {
            name: b"../escape".to_vec(),
            bytes: vec![],
        };
        assert!(apply(meta, &mut s, &shared).is_err());
        assert!(apply(Message::End, &mut s, &shared).unwrap());
        let dir = tmp.path().join("d");
        assert_eq!(std::fs::read(dir.join("5.dat")).unwrap(), b"abcd");
        assert_eq!(std::fs::read(dir.join("default.opts")).unwrap(), b"");
        assert!(!tmp.path().join("escape").exists());
        // The same name again while the first is active is refused.
        let mut other = None;
        let start = Message::Start { dir: b"d".to_vec() };
        assert!(apply(start, &mut other, &shared).is_err());
    }
}
