//! The agent protocol: how `utrace live -p PID` / `utrace record -p PID` (the client) changes
//! the tracing of a process that runs libmcount with an agent (`record -g`/`--agent`, which
//! sets [`crate::env::AGENT`]).
//!
//! **Where.** The agent listens on a Unix stream socket at [`socket_path`]`(euid, pid)`:
//! `/tmp/utrace-agent-<EUID>/<PID>.sock`, keyed by the traced process's effective uid and pid
//! (the client reads both from `/proc/<PID>/status`). libmcount creates the directory with
//! mode 0700 (or accepts an existing one only if it is a real directory owned by that uid with
//! no group/other access), removes a stale socket of the same name (a dead process with the
//! same pid, or the image before an `exec`), binds the socket with mode 0600 and removes it at
//! process exit. Each connection's peer must have the process's effective uid, or be root
//! (`SO_PEERCRED`); others get an [`ERROR`] reply and are disconnected.
//!
//! **Frames.** Every message, both ways, is an 8-byte header then a payload:
//!
//! | bytes | field |
//! |---|---|
//! | 0..2 | message type, u16 little-endian |
//! | 2..4 | reserved, 0 |
//! | 4..8 | payload length, u32 little-endian, at most [`MAX_PAYLOAD`] |
//!
//! The client sends requests one at a time and reads one reply ([`OK`] or [`ERROR`], whose
//! payload is a one-line UTF-8 message) after each. A malformed request (unknown type, bad
//! payload) gets an [`ERROR`] reply and the connection goes on; an oversize length, a bad
//! header or a connection idle for [`IDLE_TIMEOUT_MS`] is answered (when possible) and closed.
//! Requests:
//!
//! | type | payload | effect |
//! |---|---|---|
//! | [`HELLO`] | empty | reply [`OK`] with `utrace-agent <VERSION> pid=<PID>` |
//! | [`TRACE`] | 1 byte: 0 off, 1 on | `--trace=off|on` (`--disable` is off): records stop or resume; hooked frames keep their depths |
//! | [`DEPTH`] | u32 LE, 1..=65535 | `-D`: replaces the global depth limit |
//! | [`THRESHOLD`] | u64 LE nanoseconds (0: none) | `-t`: replaces the global time threshold |
//! | [`TRIGGERS`] | 1 byte match type (`r` regex, `g` glob), then `;`-separated `PATTERN@ACTIONS` items | adds to the record-time filters and triggers, as [`crate::env::TRIGGER`] items (`-F x` is `x@filter`, `-N x` `x@notrace`, `-C x` `x@caller`); an item `PATTERN@clear` removes the earlier items of that pattern, `PATTERN@clear=A+B` only their actions `A` and `B`, and `PATTERN@filter,clear` (`-F x@clear`) only their `filter` action |
//!
//! Changes apply to every thread at its next function entry; a call already running keeps
//! what it was entered with. Settings replaced by a trigger on a running function (`depth=`,
//! `time=`) stay in force until it returns.
//!
//! **Processes.** The agent lives in one thread of the process, with every signal blocked;
//! it is never traced, and ends with the process (or when it is the last thread left). A
//! `fork` child has no agent (it inherits no thread; its copy of the listening socket is
//! closed); an `exec`ed image that still has [`crate::env::AGENT`] in its environment starts
//! a fresh agent at the same path (same pid).

/// Request: say who you are.
pub const HELLO: u16 = 1;
/// Request: recording on or off.
pub const TRACE: u16 = 2;
/// Request: the global depth limit.
pub const DEPTH: u16 = 3;
/// Request: the global time threshold.
pub const THRESHOLD: u16 = 4;
/// Request: filters and triggers to add or clear.
pub const TRIGGERS: u16 = 5;
/// Reply: done.
pub const OK: u16 = 0x80;
/// Reply: refused, with a one-line reason.
pub const ERROR: u16 = 0x81;

/// Protocol version, in the [`HELLO`] reply.
pub const VERSION: u32 = 1;
/// Largest payload either side accepts.
pub const MAX_PAYLOAD: usize = 64 * 1024;
/// Length of a frame header.
pub const HEADER_LEN: usize = 8;
/// The agent drops a connection that sends nothing for this long.
pub const IDLE_TIMEOUT_MS: u64 = 2000;
/// Largest `-D` a [`DEPTH`] request may set (libmcount's shadow stack is never deeper).
pub const MAX_DEPTH: u32 = 65535;

/// The directory of the agents of processes running with effective uid `euid`.
pub fn socket_dir(euid: u32) -> String {
    format!("/tmp/utrace-agent-{euid}")
}

/// The socket of the agent in process `pid`, running with effective uid `euid`.
pub fn socket_path(euid: u32, pid: i32) -> String {
    format!("{}/{pid}.sock", socket_dir(euid))
}

/// A frame header: type and payload length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub kind: u16,
    pub len: u32,
}

/// Why a header is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeaderError {
    /// The reserved bytes are not zero: not this protocol.
    Reserved,
    /// The payload would be longer than [`MAX_PAYLOAD`].
    TooLong(u32),
}

impl core::fmt::Display for HeaderError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            HeaderError::Reserved => write!(f, "malformed message header"),
            HeaderError::TooLong(n) => {
                write!(
                    f,
                    "message of {n} bytes is too long (at most {MAX_PAYLOAD})"
                )
            }
        }
    }
}

impl Header {
    /// The header's bytes.
    pub fn encode(&self) -> [u8; HEADER_LEN] {
        let mut b = [0u8; HEADER_LEN];
        b[..2].copy_from_slice(&self.kind.to_le_bytes());
        b[4..].copy_from_slice(&self.len.to_le_bytes());
        b
    }

    /// Reads a header, refusing what the other side must never send.
    pub fn decode(b: &[u8; HEADER_LEN]) -> Result<Header, HeaderError> {
        let kind = u16::from_le_bytes([b[0], b[1]]);
        let len = u32::from_le_bytes([b[4], b[5], b[6], b[7]]);
        if b[2] != 0 || b[3] != 0 {
            return Err(HeaderError::Reserved);
        }
        if len as usize > MAX_PAYLOAD {
            return Err(HeaderError::TooLong(len));
        }
        Ok(Header { kind, len })
    }
}

/// A whole frame: header and payload (`payload` no longer than [`MAX_PAYLOAD`]).
pub fn frame(kind: u16, payload: &[u8]) -> Vec<u8> {
    let len = payload.len().min(MAX_PAYLOAD);
    let mut out = Header {
        kind,
        len: len as u32,
    }
    .encode()
    .to_vec();
    out.extend_from_slice(&payload[..len]);
    out
}

/// A decoded request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    Hello,
    Trace(bool),
    Depth(u32),
    Threshold(u64),
    /// Match type (`true`: glob) and the `;`-separated items.
    Triggers {
        glob: bool,
        items: String,
    },
}

impl Request {
    /// The request's frame.
    pub fn encode(&self) -> Vec<u8> {
        match self {
            Request::Hello => frame(HELLO, &[]),
            Request::Trace(on) => frame(TRACE, &[*on as u8]),
            Request::Depth(d) => frame(DEPTH, &d.to_le_bytes()),
            Request::Threshold(t) => frame(THRESHOLD, &t.to_le_bytes()),
            Request::Triggers { glob, items } => {
                let mut p = vec![if *glob { b'g' } else { b'r' }];
                p.extend_from_slice(items.as_bytes());
                frame(TRIGGERS, &p)
            }
        }
    }

    /// The request of a frame's type and payload; `Err` says what is wrong with it.
    pub fn decode(kind: u16, payload: &[u8]) -> Result<Request, String> {
        match kind {
            HELLO if payload.is_empty() => Ok(Request::Hello),
            TRACE => match payload {
                [0] => Ok(Request::Trace(false)),
                [1] => Ok(Request::Trace(true)),
                _ => Err("trace request: payload must be one byte, 0 or 1".into()),
            },
            DEPTH => match <[u8; 4]>::try_from(payload).map(u32::from_le_bytes) {
                Ok(d @ 1..=MAX_DEPTH) => Ok(Request::Depth(d)),
                Ok(d) => Err(format!("invalid depth: {d} (1 to {MAX_DEPTH})")),
                Err(_) => Err("depth request: payload must be 4 bytes".into()),
            },
            THRESHOLD => match <[u8; 8]>::try_from(payload) {
                Ok(b) => Ok(Request::Threshold(u64::from_le_bytes(b))),
                Err(_) => Err("time-filter request: payload must be 8 bytes".into()),
            },
            TRIGGERS => {
                let (glob, text) = match payload.split_first() {
                    Some((b'g', rest)) => (true, rest),
                    Some((b'r', rest)) => (false, rest),
                    _ => return Err("trigger request: bad match type".into()),
                };
                let items = core::str::from_utf8(text)
                    .map_err(|_| "trigger request: items are not UTF-8".to_string())?;
                if items.contains('\0') {
                    return Err("trigger request: items contain a NUL byte".into());
                }
                Ok(Request::Triggers {
                    glob,
                    items: items.to_string(),
                })
            }
            HELLO => Err("hello request: payload must be empty".into()),
            other => Err(format!("unknown request type {other}")),
        }
    }
}

/// The item list after applying `added` (`;`-separated items, with `clear` items, see the
/// module documentation) to `current`: the items kept, in order, then the new ones, which
/// carry `tag` (their match type). A `clear` item clears items whatever their tag.
pub fn merge_items<T: Copy>(current: &[(T, String)], added: &str, tag: T) -> Vec<(T, String)> {
    let mut items: Vec<(T, String)> = current.to_vec();
    for item in added.split(';').map(str::trim).filter(|s| !s.is_empty()) {
        let (pattern, actions) = item.split_once('@').unwrap_or((item, ""));
        let words: Vec<&str> = actions
            .split(',')
            .map(str::trim)
            .filter(|w| !w.is_empty())
            .collect();
        let clear = words
            .iter()
            .find(|w| **w == "clear" || w.starts_with("clear="));
        let Some(clear) = clear else {
            items.push((tag, item.to_string()));
            continue;
        };
        // What to remove: the `clear=` list, else the item's other actions (`-F x@clear` is
        // `x@clear,filter`), else everything.
        let mut names: Vec<&str> = match clear.strip_prefix("clear=") {
            Some(list) => list.split('+').map(|w| action_name(w.trim())).collect(),
            None => Vec::new(),
        };
        names.extend(
            words
                .iter()
                .filter(|w| !w.starts_with("clear"))
                .map(|w| action_name(w)),
        );
        items = items
            .into_iter()
            .filter_map(|(t, it)| {
                let (p, acts) = it.split_once('@').unwrap_or((&it, ""));
                if p != pattern {
                    return Some((t, it));
                }
                if names.is_empty() {
                    return None;
                }
                let kept: Vec<&str> = acts
                    .split(',')
                    .map(str::trim)
                    .filter(|a| !a.is_empty())
                    .filter(|a| !names.contains(&action_name(a)))
                    .collect();
                (!kept.is_empty()).then(|| (t, format!("{p}@{}", kept.join(","))))
            })
            .collect();
    }
    items
}

/// The name of an action word (`depth=3` is `depth`; `traceon` is `trace_on`).
fn action_name(word: &str) -> &str {
    let name = word.split(['=', ':']).next().unwrap_or(word);
    match name {
        "traceon" => "trace_on",
        "traceoff" => "trace_off",
        n => n,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_round_trip() {
        for r in [
            Request::Hello,
            Request::Trace(false),
            Request::Trace(true),
            Request::Depth(3),
            Request::Threshold(1500),
            Request::Triggers {
                glob: true,
                items: "a*@filter;b@notrace".into(),
            },
        ] {
            let bytes = r.encode();
            let h = Header::decode(bytes[..HEADER_LEN].try_into().unwrap()).unwrap();
            assert_eq!(h.len as usize, bytes.len() - HEADER_LEN);
            assert_eq!(Request::decode(h.kind, &bytes[HEADER_LEN..]), Ok(r));
        }
    }

    #[test]
    fn bad_frames_are_refused() {
        let mut h = Header { kind: 2, len: 1 }.encode();
        h[2] = 1;
        assert_eq!(Header::decode(&h), Err(HeaderError::Reserved));
        let h = Header {
            kind: 2,
            len: MAX_PAYLOAD as u32 + 1,
        }
        .encode();
        assert!(matches!(Header::decode(&h), Err(HeaderError::TooLong(_))));
        assert!(Request::decode(TRACE, &[2]).is_err());
        assert!(Request::decode(DEPTH, &0u32.to_le_bytes()).is_err());
        assert!(Request::decode(DEPTH, &[1, 2]).is_err());
        assert!(Request::decode(THRESHOLD, &[1]).is_err());
        assert!(Request::decode(TRIGGERS, b"xa@filter").is_err());
        assert!(Request::decode(TRIGGERS, b"r\xff").is_err());
        assert!(Request::decode(HELLO, b"x").is_err());
        assert!(Request::decode(999, b"").is_err());
    }

    #[test]
    fn items_are_added_and_cleared() {
        let cur = vec![(0, "a@filter".to_string()), (0, "b@notrace".to_string())];
        let s = |v: Vec<(u8, String)>| {
            v.iter()
                .map(|(t, i)| format!("{t}:{i}"))
                .collect::<Vec<_>>()
                .join(";")
        };
        let m = |cur: &[(u8, String)], add| s(merge_items(cur, add, 1));
        assert_eq!(m(&cur, "c@filter"), "0:a@filter;0:b@notrace;1:c@filter");
        assert_eq!(m(&cur, "a@clear"), "0:b@notrace");
        assert_eq!(m(&cur, "a@clear,filter"), "0:b@notrace");
        assert_eq!(m(&cur, "a@clear,notrace"), "0:a@filter;0:b@notrace");
        let cur = vec![(0, "m@depth=2,trace_on,read=pmu-cycle".to_string())];
        assert_eq!(m(&cur, "m@clear=depth+traceon"), "0:m@read=pmu-cycle");
        assert_eq!(m(&cur, "x@clear"), s(cur.clone()));
    }

    #[test]
    fn paths_are_keyed_by_uid_and_pid() {
        assert_eq!(socket_path(1000, 42), "/tmp/utrace-agent-1000/42.sock");
    }
}
