//! Reading one task's next head: decoding a record (its function, session and payload),
//! the task's kernel records nested under its user functions, and the reader-level filters
//! (time range, `-C`, `-t` and `time=` triggers) that hold records back before the merge.

use super::{Head, Merge, RELEASE_WINDOW};
use record_format::argspec::{payload_len, ArgItem};
use record_format::dat::{event_payload_len, read_header, BadRecord};
use record_format::dir::GraphRecord;
use record_format::raw::RECORD_SIZE;
use record_format::RecordKind;
use std::cmp::Reverse;

impl Merge<'_> {
    fn broken(&mut self, ti: usize, what: BadRecord) {
        let c = &self.cursors[ti];
        let msg = match what {
            BadRecord::Magic => format!(
                "invalid record in {}.dat at offset {}: broken data?",
                c.tid, c.pos
            ),
            BadRecord::Truncated => format!("{}.dat is truncated at offset {}", c.tid, c.pos),
        };
        self.warnings.push(msg);
        self.cursors[ti].pos = self.cursors[ti].bytes.len();
    }

    /// The session of task `ti` at `time` (the last one found while `time` stays in its span).
    #[inline(always)]
    pub(super) fn resolve_session(&mut self, ti: usize, time: u64) -> Option<usize> {
        let c = &self.cursors[ti];
        if time >= c.sess_from && time < c.sess_until {
            return c.session;
        }
        self.find_session(ti, time)
    }

    #[inline(never)]
    fn find_session(&mut self, ti: usize, time: u64) -> Option<usize> {
        let tid = self.cursors[ti].tid;
        let (s, from, until) = match self.sym.session_at(tid, time) {
            Some((s, until)) => (Some(s), time, until),
            None => (None, time, time + 1),
        };
        let c = &mut self.cursors[ti];
        c.session = s;
        c.sess_from = from;
        c.sess_until = until;
        if c.first_session.is_none() {
            c.first_session = s;
        }
        s
    }

    /// Decodes the record at `pos` of task `ti`: the record, its function and payload, and the
    /// offset of the next record. `Ok(None)` at the end of the data.
    #[inline]
    fn decode(
        &mut self,
        ti: usize,
        pos: usize,
        last_time: u64,
    ) -> Result<Option<(Head, usize)>, Stop> {
        let bytes = self.cursors[ti].bytes;
        let mut raw = match read_header(bytes, pos) {
            None => return Ok(None),
            Some(Err(e)) => return Err(Stop::Bad(e)),
            Some(Ok(r)) => r,
        };
        let pstart = pos + RECORD_SIZE;
        if raw.kind == RecordKind::Lost {
            raw.time = last_time;
        }
        let mut func = 0;
        let mut plen = 0;
        match raw.kind {
            RecordKind::Entry | RecordKind::Exit => {
                let session = self.resolve_session(ti, raw.time);
                // An exit usually follows its own entry: remember the last resolution.
                let c = &self.cursors[ti];
                func = if c.memo.0 == raw.addr && c.memo.1 == session && raw.addr != 0 {
                    c.memo.2
                } else {
                    let f = self.sym.resolve(session, raw.time, raw.addr);
                    self.cursors[ti].memo = (raw.addr, session, f);
                    f
                };
                if raw.more {
                    let f = self.sym.func(func).clone();
                    let spec = self.specs.get(func, &f);
                    let items: Vec<&ArgItem> = if raw.kind == RecordKind::Entry {
                        spec.args.iter().collect()
                    } else {
                        spec.ret.iter().collect()
                    };
                    if items.is_empty() {
                        return Err(Stop::NoSpec(f.name));
                    }
                    plen = payload_len(&items, &bytes[pstart.min(bytes.len())..])
                        .ok_or(Stop::Bad(BadRecord::Truncated))?;
                }
            }
            RecordKind::Event if raw.more => {
                plen = event_payload_len(bytes, pstart).map_err(Stop::Bad)?
            }
            _ => {}
        }
        // Event payloads carry a u16 length before the data; hand over only the data.
        let payload = if raw.kind == RecordKind::Event && plen > 0 {
            let n = u16::from_le_bytes([bytes[pstart], bytes[pstart + 1]]) as usize;
            (pstart + 2, n)
        } else {
            (pstart, plen)
        };
        Ok(Some((
            Head {
                raw,
                func,
                payload,
                kernel_event: None,
            },
            pstart + plen,
        )))
    }

    /// Puts the task's next record that passes the reader-level filters into its head and
    /// queues it.
    #[inline]
    pub(super) fn load(&mut self, ti: usize) {
        if self.plain && self.load_plain(ti) {
            return;
        }
        let head = if self.gate.time_active() {
            if self.gate.buffer_empty(ti) {
                self.fill_time_buffer(ti);
            }
            self.gate.pop_buffer(ti)
        } else {
            self.read_raw(ti)
        };
        let Some(head) = head else { return };
        let time = head.raw.time;
        self.heads[ti] = Some(head);
        if self.current != Some(ti) {
            self.heap.push(Reverse((time, ti)));
        }
    }

    /// The next record of the task inside the time range and, with `-C`, on a path to a target.
    #[inline]
    fn read_raw(&mut self, ti: usize) -> Option<Head> {
        loop {
            let (pos, last) = (self.cursors[ti].pos, self.cursors[ti].last_time);
            let decoded = self.decode(ti, pos, last);
            // A kernel record earlier than the task's next user record comes first.
            if let Some(k) = self.cursors[ti].kernel.get(self.cursors[ti].kpos).copied() {
                let user_time = match &decoded {
                    Ok(Some((h, _))) => h.raw.time,
                    _ => u64::MAX,
                };
                if k.time < user_time {
                    self.cursors[ti].kpos += 1;
                    match self.kernel_head(ti, k) {
                        Some(h) => return Some(h),
                        None => continue,
                    }
                }
            }
            let (head, next) = match decoded {
                Ok(Some(h)) => h,
                Ok(None) => return None,
                Err(Stop::Bad(e)) => {
                    self.broken(ti, e);
                    return None;
                }
                Err(Stop::NoSpec(name)) => {
                    self.warnings.push(format!(
                        "record missing argument info for {name} in {}.dat",
                        self.cursors[ti].tid
                    ));
                    self.cursors[ti].pos = self.cursors[ti].bytes.len();
                    return None;
                }
            };
            let c = &mut self.cursors[ti];
            if head.raw.kind != RecordKind::Lost {
                c.last_time = c.last_time.max(head.raw.time);
            }
            c.pos = next;
            match head.raw.kind {
                RecordKind::Entry => c.user_depth = u32::from(head.raw.depth) + 1,
                RecordKind::Exit => c.user_depth = u32::from(head.raw.depth),
                _ => {}
            }
            if matches!(head.raw.kind, RecordKind::Entry | RecordKind::Exit) {
                c.outside.clear();
            }
            if c.pos > c.released + 2 * RELEASE_WINDOW {
                c.released = c.pos - RELEASE_WINDOW;
                c.file.release(c.released);
            }
            if head.raw.kind != RecordKind::Lost && !self.gate.in_range(head.raw.time) {
                continue;
            }
            if self.kernel_view.only && head.raw.kind != RecordKind::Lost {
                self.user_passed_over = true;
                continue;
            }
            if self.gate.caller && !self.caller_pass(ti, &head) {
                continue;
            }
            return Some(head);
        }
    }

    /// The head of kernel record `k` of task `ti`, nested under the user functions open then;
    /// `None` outside every user function (uftrace's default `--kernel-skip-out`) or outside
    /// the time range.
    fn kernel_head(&mut self, ti: usize, k: GraphRecord) -> Option<Head> {
        let view = self.kernel_view;
        let user = self.cursors[ti].user_depth;
        // Events outside every user function stay hidden even with `--kernel-full`, as uftrace.
        let outside = user == 0 && (!view.full || k.event.is_some());
        if !self.gate.in_range(k.time) {
            return None;
        }
        if outside {
            if !view.full {
                self.cursors[ti].outside.take(&k);
            }
            return None;
        }
        // Alone, kernel records nest only among themselves.
        let above = if view.only { 0 } else { user };
        if view.depth.is_some_and(|d| k.depth >= d) && k.event.is_none() {
            return None;
        }
        let session = self.resolve_session(ti, k.time);
        let func = self.sym.resolve(session, k.time, k.func);
        Some(Head {
            raw: k.raw(above),
            func,
            payload: (0, 0),
            kernel_event: k.event,
        })
    }

    /// `-C`: keeps targets and functions that call one; drops the rest with their subtrees.
    /// A call that never returns is kept: nothing proves it uninteresting.
    fn caller_pass(&mut self, ti: usize, h: &Head) -> bool {
        let d = h.raw.depth;
        match h.raw.kind {
            RecordKind::Entry => {
                if self.gate.entry_inside_dropped(ti, d) {
                    return false;
                }
                if self.decide(h.func).caller {
                    return true;
                }
                let pos = self.cursors[ti].pos;
                let (exit, found) = self.scan_from(ti, pos, d, true);
                if !found && exit.is_some() {
                    self.gate.drop_entry(ti, d);
                    return false;
                }
                true
            }
            RecordKind::Exit => self.gate.exit(ti, d),
            _ => !self.gate.inside_dropped(ti),
        }
    }

    /// `-t` and `time=` triggers, as uftrace's task reader does them: entries wait in a
    /// buffer until an exit decides; an exit shorter than the threshold deletes itself and the
    /// last buffered entry, a longer one releases the whole buffer.
    fn fill_time_buffer(&mut self, ti: usize) {
        while let Some(h) = self.read_raw(ti) {
            let threshold = self.gate.threshold(ti).unwrap_or(0);
            match h.raw.kind {
                RecordKind::Entry => {
                    if let Some(t) = self.decide(h.func).actions.time {
                        self.gate.push_time(ti, h.raw.depth, t);
                    }
                    self.gate.push_buffer(ti, h);
                }
                RecordKind::Exit => {
                    self.gate.pop_time(ti, h.raw.depth);
                    let Some(last) = self.gate.last_buffered_time(ti) else {
                        self.gate.push_buffer(ti, h);
                        return;
                    };
                    if h.raw.time.saturating_sub(last) < threshold
                        && !self.decide(h.func).actions.trace
                    {
                        self.gate.drop_last_buffered(ti);
                    } else {
                        self.gate.push_buffer(ti, h);
                        return;
                    }
                }
                _ => {
                    self.gate.push_buffer(ti, h);
                    return;
                }
            }
        }
    }

    /// Looks ahead in task `ti` from byte offset `pos`, just after an entry at `depth`: returns
    /// the time of its exit (`None` if it never returns) and whether a `-C` target is called
    /// inside. Stops early once a target is found unless `need_exit`.
    fn scan_from(
        &mut self,
        ti: usize,
        mut pos: usize,
        depth: u16,
        need_exit: bool,
    ) -> (Option<u64>, bool) {
        let mut found = false;
        let mut last = self.cursors[ti].last_time;
        while let Ok(Some((h, next))) = self.decode(ti, pos, last) {
            match h.raw.kind {
                RecordKind::Entry if h.raw.depth <= depth => return (None, found),
                RecordKind::Entry => {
                    found = found || (self.filters.has_caller && self.decide(h.func).caller);
                    if found && !need_exit {
                        return (None, true);
                    }
                }
                RecordKind::Exit if h.raw.depth == depth => return (Some(h.raw.time), found),
                RecordKind::Exit if h.raw.depth < depth => return (None, found),
                _ => {}
            }
            last = last.max(h.raw.time);
            pos = next;
        }
        (None, found)
    }
}

/// Why decoding stopped.
enum Stop {
    Bad(BadRecord),
    NoSpec(String),
}
