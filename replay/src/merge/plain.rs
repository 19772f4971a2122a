//! The reader's fast path: records that no reader-level filter can hold back go from the
//! mapped data straight to the task's head. Also the `extern.dat` parser.

use super::{Head, Merge, RELEASE_WINDOW};
use record_format::raw::RECORD_SIZE;
use record_format::{RawRecord, RecordKind};
use std::cmp::Reverse;

/// Parses `extern.dat`: `<sec>[.<frac>] <message>` lines.
pub fn parse_extern(text: &str) -> Vec<(u64, String)> {
    let mut out = Vec::new();
    for line in text.lines() {
        let line = line.trim_start();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (ts, msg) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
        let (sec, frac) = ts.split_once('.').unwrap_or((ts, ""));
        let Ok(sec) = sec.parse::<u64>() else {
            continue;
        };
        let frac: String = frac.chars().take(9).collect();
        let nsec = if frac.is_empty() {
            0
        } else {
            format!("{frac:0<9}").parse::<u64>().unwrap_or(0)
        };
        let mut msg = msg.trim().to_string();
        if msg.len() > 1023 {
            let mut cut = 1023;
            while !msg.is_char_boundary(cut) {
                cut -= 1;
            }
            msg.truncate(cut);
        }
        out.push((sec * 1_000_000_000 + nsec, msg));
    }
    out.sort_by_key(|e| e.0);
    out
}

impl Merge<'_> {
    /// Whether every record passes the reader-level filters untouched: no time range, `-t`,
    /// `time=` trigger, `-C` or `--kernel-only`.
    pub(super) fn update_plain(&mut self) {
        let g = &self.gate;
        self.plain =
            g.range == (0, u64::MAX) && !g.time_active() && !g.caller && !self.kernel_view.only;
    }

    /// [`Merge::load`] in the common case without reader-level filters: an entry or exit
    /// without payload, and no kernel record of the task pending. `false` (with nothing
    /// consumed) leaves every other case to [`Merge::read_raw`].
    ///
    /// The head is written in place: returning it through the stack makes the copy read
    /// bytes just stored piecewise, which stalls.
    #[inline(always)]
    pub(super) fn load_plain(&mut self, ti: usize) -> bool {
        let c = &self.cursors[ti];
        if c.kpos < c.kernel.len() {
            return false;
        }
        let pos = c.pos;
        let Some(rec) = c.bytes.get(pos..pos + RECORD_SIZE) else {
            return false;
        };
        let Some(raw) = rec.try_into().ok().and_then(RawRecord::decode) else {
            return false;
        };
        if raw.more || !matches!(raw.kind, RecordKind::Entry | RecordKind::Exit) {
            return false;
        }
        let session = self.resolve_session(ti, raw.time);
        let c = &self.cursors[ti];
        let func = if c.memo.0 == raw.addr && c.memo.1 == session && raw.addr != 0 {
            c.memo.2
        } else {
            let f = self.sym.resolve(session, raw.time, raw.addr);
            self.cursors[ti].memo = (raw.addr, session, f);
            f
        };
        let next = pos + RECORD_SIZE;
        let c = &mut self.cursors[ti];
        c.last_time = c.last_time.max(raw.time);
        c.pos = next;
        c.user_depth = u32::from(raw.depth) + u32::from(raw.kind == RecordKind::Entry);
        c.outside.clear();
        if c.pos > c.released + 2 * RELEASE_WINDOW {
            c.released = c.pos - RELEASE_WINDOW;
            c.file.release(c.released);
        }
        self.heads[ti] = Some(Head {
            raw,
            func,
            payload: (next, 0),
            kernel_event: None,
        });
        if self.current != Some(ti) {
            self.heap.push(Reverse((raw.time, ti)));
        }
        true
    }
}
