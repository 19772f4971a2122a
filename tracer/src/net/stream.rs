//! `record --host` while the program runs: the pump tells of each chunk it writes to the
//! staging directory ([`record_format::ring::Observer`]), and the chunks of each thread are
//! sent as data messages in file order ([`DataStream`]: early chunks wait, gaps the pump never
//! tells of are read from the staging file), as soon as the ones before them have been.
//! Flight dumps and the salvage are sent by the final pass, from the staging file at
//! [`DataStream::sent`]. A send error stops the streaming and is reported at the end; the
//! recording itself goes on.

use super::send::Connection;
use crate::record::ordered::DataStream;
use record_format::ring::Written;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

struct State {
    conn: Connection,
    /// The staging directory.
    dir: PathBuf,
    stream: DataStream,
    error: Option<std::io::Error>,
}

/// The streaming side of a `record --host`.
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
            let ready = match written {
                Written::Chunk { tid, off, bytes } => s
                    .stream
                    .take(tid, off, bytes)
                    .into_iter()
                    .map(|run| (tid, run))
                    .collect(),
                Written::Pass { index, count } => s.stream.pass(index, count, &s.dir),
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
