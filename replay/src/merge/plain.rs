//! The reader's fast path: records that no reader-level filter can hold back go from the
//! mapped data straight to the task's head.

use super::{Head, Merge, RELEASE_WINDOW};
use record_format::raw::RECORD_SIZE;
use record_format::{RawRecord, RecordKind};
use std::cmp::Reverse;

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
