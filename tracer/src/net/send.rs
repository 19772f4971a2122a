//! `record --host HOST [--port N]`: the trace goes to a `recv` server instead of a local data
//! directory, in uftrace 0.13's protocol ([`super::proto`]).
//!
//! The connection is made first: when the server cannot be reached, the command stops with one
//! line before the program starts (uftrace starts the program first and leaves it waiting).
//! The recorder then writes its data directory as always, into a private staging directory
//! (libmcount writes `task.txt` and the session maps there itself, the finishing steps read
//! it), while the pump's observer ([`Streamer`]) sends each thread's records as the pump writes
//! them, in file order ([`DataStream`]: early chunks wait, gaps the pump never tells of are
//! read from the staging file). Once the program has ended, the rest goes in uftrace's order:
//! the remaining records (flight dumps, the salvage, what came out of order), perf and kernel
//! data, `task.txt`, the session maps, the other files (`.sym`, `.dbg`, `default.opts`, ...),
//! `info` and the end message; the staging directory is then removed, so nothing is left
//! locally. Should the connection fail on the way, the staging
//! directory is kept and named in the error.

use super::proto::{self, kind};
use crate::record::ordered::DataStream;
use anyhow::Context;
use record_format::raw::RECORD_SIZE;
use record_format::ring::Written;
use std::borrow::Cow;
use std::io::{BufWriter, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Longest wait for a connection to one address.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Longest wait for a server to take more data.
const WRITE_TIMEOUT: Duration = Duration::from_secs(30);
/// Longest wait for the server to close the connection after the end message.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(10);
/// Largest data payload sent in one message (a multiple of the record size).
pub const DATA_CHUNK: usize = 1 << 20;

/// A connection to a `recv` server.
pub struct Connection {
    out: BufWriter<TcpStream>,
    /// `HOST:PORT`, for messages.
    pub peer: String,
}

impl Connection {
    /// Connects to `host` at `port` (a name, an IPv4 or an IPv6 address).
    pub fn open(host: &str, port: u16) -> anyhow::Result<Connection> {
        // `[::1]` as well as `::1`.
        let host = host
            .strip_prefix('[')
            .and_then(|h| h.strip_suffix(']'))
            .unwrap_or(host);
        let peer = match host.contains(':') {
            true => format!("[{host}]:{port}"),
            false => format!("{host}:{port}"),
        };
        let addrs: Vec<_> = (host, port)
            .to_socket_addrs()
            .with_context(|| format!("cannot find host {host}"))?
            .collect();
        let mut last = None;
        for addr in &addrs {
            match TcpStream::connect_timeout(addr, CONNECT_TIMEOUT) {
                Ok(stream) => {
                    let _ = stream.set_nodelay(true);
                    // A server that stops reading must not stall the recorder for ever.
                    let _ = stream.set_write_timeout(Some(WRITE_TIMEOUT));
                    return Ok(Connection {
                        out: BufWriter::with_capacity(1 << 16, stream),
                        peer,
                    });
                }
                Err(e) => last = Some(e),
            }
        }
        match last {
            Some(e) => Err(e).with_context(|| format!("cannot connect to {peer}")),
            None => anyhow::bail!("cannot find host {host}"),
        }
    }

    pub fn message(&mut self, kind: u16, prefix: &[u8], body: &[u8]) -> std::io::Result<()> {
        proto::write_message(&mut self.out, kind, prefix, body)
    }

    /// Records of thread `tid`, in messages of at most [`DATA_CHUNK`] bytes.
    pub fn data(&mut self, tid: u32, bytes: &[u8]) -> std::io::Result<()> {
        for chunk in bytes.chunks(DATA_CHUNK) {
            self.message(kind::DATA, &tid.to_be_bytes(), chunk)?;
        }
        Ok(())
    }

    /// Sends what is buffered, then waits for the server to close the connection, as a
    /// receiver does after the end message: a server that went away before it read everything
    /// resets the connection instead, and the trace did not arrive whole (writes into the
    /// socket buffer succeed all the same).
    pub fn close(mut self) -> std::io::Result<()> {
        self.out.flush()?;
        let stream = self.out.get_ref();
        stream.shutdown(std::net::Shutdown::Write)?;
        stream.set_read_timeout(Some(CLOSE_TIMEOUT))?;
        let mut buf = [0u8; 256];
        loop {
            match (&*stream).read(&mut buf) {
                Ok(0) => return Ok(()),
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                // A server that keeps the connection open: nothing more to learn.
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) =>
                {
                    return Ok(())
                }
                Err(e) => return Err(e),
            }
        }
    }
}

/// Records `inv.program` and sends the trace to `host`; returns how the program ended.
pub fn record_to_host(
    inv: &crate::invocation::Invocation,
    notices: &mut crate::notice::Notices,
    host: &str,
) -> anyhow::Result<crate::record::Termination> {
    let port = proto::parse_port(inv.args.record.port.as_deref())?;
    // A program that cannot be recorded is refused before the server hears of it (`record`
    // checks it again).
    if let (None, Some(program)) = (&inv.args.record.pid, inv.program.first()) {
        let r = &inv.args.record;
        let patching = !r.patch.is_empty() || !r.unpatch.is_empty();
        crate::record::program::check_program(program, r.force, patching)?;
    }
    let mut conn = Connection::open(host, port)?;
    let name = inv.args.data.record_dir();
    let peer = conn.peer.clone();
    let lost = |e: std::io::Error| anyhow::anyhow!("cannot send the trace to {peer}: {e}");
    {
        use std::os::unix::ffi::OsStrExt;
        conn.message(kind::START, b"", name.as_os_str().as_bytes())
            .map_err(lost)?;
    }
    let staging = tempfile::Builder::new()
        .prefix("utrace-send-")
        .tempdir()
        .context("cannot create a staging directory")?;
    let streamer = Streamer::new(conn, staging.path());
    let observer = crate::record::ChunkObserver(streamer.observer());
    let target = crate::record::Target::Staging(staging.path(), &observer);
    let recorded = crate::record::record(inv, notices, target);
    drop(observer);
    let ended = recorded?;
    let sent = streamer.finish().and_then(|(mut conn, stream)| {
        let started = std::time::Instant::now();
        send_dir(&mut conn, staging.path(), &stream)?;
        let sent = started.elapsed();
        conn.close()?;
        crate::diag::debug(
            "uftrace",
            1,
            format!(
                "sent the rest in {:.1} ms, the server closed {:.1} ms later",
                sent.as_secs_f64() * 1e3,
                (started.elapsed() - sent).as_secs_f64() * 1e3
            ),
        );
        Ok(())
    });
    if let Err(e) = sent {
        let kept = staging.keep();
        anyhow::bail!(
            "cannot send the trace to {peer}: {e}; it is kept in {}",
            kept.display()
        );
    }
    Ok(ended)
}

/// Sends the finished data directory `dir`, except the records `stream` has sent already,
/// then the end message.
fn send_dir(conn: &mut Connection, dir: &Path, stream: &DataStream) -> std::io::Result<()> {
    let mut names: Vec<String> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .filter_map(|e| e.file_name().into_string().ok())
        .collect();
    names.sort();
    // The threads' records, then perf and kernel data, a piece at a time.
    let mut buf = vec![0u8; DATA_CHUNK];
    for name in &names {
        if let Some(tid) = record_format::dir::task_file(name) {
            // Whole records only (the files are, unless a disk filled up).
            send_pieces(
                &dir.join(name),
                stream.sent(tid),
                RECORD_SIZE,
                &mut buf,
                |piece| conn.message(kind::DATA, &tid.to_be_bytes(), piece),
            )?;
        }
    }
    for (prefix, kind) in [
        ("perf-cpu", kind::PERF_DATA),
        ("kernel-cpu", kind::KERNEL_DATA),
    ] {
        for name in &names {
            if let Some(cpu) = record_format::dir::cpu_file(name, prefix) {
                send_pieces(&dir.join(name), 0, 1, &mut buf, |piece| {
                    conn.message(kind, &cpu.to_be_bytes(), piece)
                })?;
            }
        }
    }
    // The other files: task.txt and the session maps first, `info` last.
    let rank = |name: &str| match name {
        "task.txt" => 0,
        n if n.starts_with("sid-") && n.ends_with(".map") => 1,
        _ => 2,
    };
    let mut meta: Vec<&String> = names
        .iter()
        .filter(|n| {
            record_format::dir::task_file(n).is_none()
                && record_format::dir::cpu_file(n, "perf-cpu").is_none()
                && record_format::dir::cpu_file(n, "kernel-cpu").is_none()
                && n.as_str() != "info"
        })
        .collect();
    meta.sort_by_key(|n| rank(n));
    for name in meta {
        let bytes = std::fs::read(dir.join(name))?;
        let len = u32::try_from(name.len()).map_err(std::io::Error::other)?;
        let mut prefix = len.to_be_bytes().to_vec();
        prefix.extend_from_slice(name.as_bytes());
        conn.message(kind::METADATA, &prefix, &bytes)?;
    }
    let info = proto::info_to_wire(std::fs::read(dir.join("info"))?);
    conn.message(kind::INFO, b"", &info)?;
    conn.message(kind::END, b"", b"")
}

/// Reads `path` from offset `from` to its end in pieces of at most `buf.len()` bytes, each a
/// multiple of `unit`, and gives them to `send` (a tail shorter than `unit` is left out).
fn send_pieces(
    path: &Path,
    from: u64,
    unit: usize,
    buf: &mut [u8],
    mut send: impl FnMut(&[u8]) -> std::io::Result<()>,
) -> std::io::Result<()> {
    use std::io::Seek;
    let mut f = std::fs::File::open(path)?;
    let len = f.metadata()?.len();
    f.seek(std::io::SeekFrom::Start(from))?;
    let mut left = len.saturating_sub(from) / unit as u64 * unit as u64;
    let max = buf.len() / unit * unit;
    while left > 0 {
        let n = max.min(usize::try_from(left).unwrap_or(max));
        f.read_exact(&mut buf[..n])?;
        send(&buf[..n])?;
        left -= n as u64;
    }
    Ok(())
}

/// The streaming side of a `record --host`: a send error stops the streaming and is reported
/// at the end; the recording itself goes on.
struct State {
    conn: Connection,
    /// The staging directory.
    dir: PathBuf,
    stream: DataStream,
    error: Option<std::io::Error>,
}

pub struct Streamer {
    state: Arc<Mutex<Option<State>>>,
}

impl Streamer {
    /// Streams what the pump writes into `dir` over `conn`.
    pub fn new(conn: Connection, dir: &Path) -> Streamer {
        Streamer {
            state: Arc::new(Mutex::new(Some(State {
                conn,
                dir: dir.to_path_buf(),
                stream: DataStream::default(),
                error: None,
            }))),
        }
    }

    /// The observer to give the pump.
    pub fn observer(&self) -> record_format::ring::Observer {
        let state = Arc::clone(&self.state);
        Arc::new(move |written: Written<'_>| {
            let mut guard = state.lock().unwrap_or_else(|e| e.into_inner());
            let Some(s) = guard.as_mut() else { return };
            if s.error.is_some() {
                return;
            }
            let ready: Vec<(u32, Cow<[u8]>)> = match written {
                Written::Chunk { tid, off, bytes } => s
                    .stream
                    .take(tid, off, bytes)
                    .into_iter()
                    .map(|run| (tid, run))
                    .collect(),
                Written::Pass { index, count } => (s.stream.pass(index, count, &s.dir))
                    .into_iter()
                    .map(|(tid, run)| (tid, Cow::Owned(run)))
                    .collect(),
            };
            for (tid, run) in ready {
                if let Err(e) = s.conn.data(tid, &run) {
                    s.error = Some(e);
                    return;
                }
            }
        })
    }

    /// Ends the streaming: the connection and what was sent, or the first send error.
    pub fn finish(self) -> Result<(Connection, DataStream), std::io::Error> {
        let state = self
            .state
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
            .expect("finished once");
        match state.error {
            Some(e) => Err(e),
            None => Ok((state.conn, state.stream)),
        }
    }
}
