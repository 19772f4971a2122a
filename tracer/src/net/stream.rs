//! `record --host` while the program runs: the pump tells of each chunk it writes to the
//! staging directory ([`record_format::ring::Observer`]), and the chunks of each thread are
//! sent as data messages in file order, as soon as the ones before them have been. A chunk
//! that comes early waits (within [`MAX_WAITING`] bytes in all); records the pump does not
//! tell of (flight dumps, the salvage, a thread's own writes) leave a gap that only the final
//! pass fills, from the staging file at [`DataStream::sent`]. A send error stops the streaming
//! and is reported at the end; the recording itself goes on.

use super::send::Connection;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

/// Most bytes of early chunks held; past it a thread's streaming stops until the end.
const MAX_WAITING: usize = 64 << 20;

/// One thread's stream.
#[derive(Default)]
struct ThreadStream {
    /// Bytes of `<tid>.dat` sent: the file up to here is on its way.
    sent: u64,
    /// Early chunks by offset.
    waiting: BTreeMap<u64, Vec<u8>>,
    /// Gave up (too much waiting): the final pass sends the rest.
    stopped: bool,
}

/// What was sent while the program ran.
#[derive(Default)]
pub struct DataStream {
    threads: HashMap<u32, ThreadStream>,
    waiting_bytes: usize,
}

impl DataStream {
    /// How many bytes of `<tid>.dat` were sent.
    pub fn sent(&self, tid: u32) -> u64 {
        self.threads.get(&tid).map_or(0, |t| t.sent)
    }

    /// Takes the chunk of `tid` at `off`; returns the byte runs now ready to send, in order.
    fn take(&mut self, tid: u32, off: u64, bytes: &[u8]) -> Vec<Vec<u8>> {
        let t = self.threads.entry(tid).or_default();
        if t.stopped || off < t.sent {
            return Vec::new();
        }
        if off > t.sent {
            if self.waiting_bytes + bytes.len() > MAX_WAITING {
                t.stopped = true;
                self.waiting_bytes -= t.waiting.values().map(Vec::len).sum::<usize>();
                t.waiting.clear();
            } else {
                self.waiting_bytes += bytes.len();
                t.waiting.insert(off, bytes.to_vec());
            }
            return Vec::new();
        }
        let mut ready = vec![bytes.to_vec()];
        t.sent += bytes.len() as u64;
        while let Some(next) = t.waiting.remove(&t.sent) {
            self.waiting_bytes -= next.len();
            t.sent += next.len() as u64;
            ready.push(next);
        }
        ready
    }
}

struct State {
    conn: Connection,
    stream: DataStream,
    error: Option<std::io::Error>,
}

/// The streaming side of a `record --host`.
pub struct Streamer {
    state: Arc<Mutex<Option<State>>>,
}

impl Streamer {
    pub fn new(conn: Connection) -> Streamer {
        Streamer {
            state: Arc::new(Mutex::new(Some(State {
                conn,
                stream: DataStream::default(),
                error: None,
            }))),
        }
    }

    /// The observer to give the pump.
    pub fn observer(&self) -> record_format::ring::Observer {
        let state = Arc::clone(&self.state);
        Arc::new(move |tid: u32, off: u64, bytes: &[u8]| {
            let mut guard = state.lock().unwrap_or_else(|e| e.into_inner());
            let Some(s) = guard.as_mut() else { return };
            if s.error.is_some() {
                return;
            }
            for run in s.stream.take(tid, off, bytes) {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_are_sent_in_file_order() {
        let mut s = DataStream::default();
        assert_eq!(s.take(1, 0, b"aa"), [b"aa".to_vec()]);
        assert!(s.take(1, 4, b"cc").is_empty());
        assert!(s.take(1, 6, b"dd").is_empty());
        assert_eq!(s.waiting_bytes, 4);
        assert_eq!(
            s.take(1, 2, b"bb"),
            [b"bb".to_vec(), b"cc".to_vec(), b"dd".to_vec()]
        );
        assert_eq!(s.sent(1), 8);
        assert_eq!(s.waiting_bytes, 0);
        // Another thread, and a chunk from before what was sent.
        assert_eq!(s.sent(2), 0);
        assert!(s.take(1, 0, b"aa").is_empty());
    }

    #[test]
    fn too_much_waiting_stops_a_thread() {
        let mut s = DataStream::default();
        let big = vec![0u8; MAX_WAITING];
        assert!(s.take(3, 16, &big[..16]).is_empty());
        assert!(s.take(3, 32, &big).is_empty());
        assert_eq!(s.waiting_bytes, 0);
        assert!(s.take(3, 0, b"x").is_empty());
        assert_eq!(s.sent(3), 0);
    }
}
