//! The walker's fast paths: the direct reader, which decodes one task's file on its own
//! (no time-ordered merge) when the visitor does not depend on the order of records across
//! tasks and feeds its records to [`Core::step`], and the plain record, which pairs an entry
//! or exit in one go when no filter can hide a call and the task's stack is in sync.

use super::*;
use crate::merge::Head;
use record_format::RecordKind;

impl<'d> Walker<'d> {
    /// The direct reader's shortcut for plain walks: an entry or exit of a task whose stack
    /// is in sync, handled in one go (what [`Core::step`] and [`Walker::visit`] do, without
    /// the special cases). Returns `false` when the record needs the general path.
    #[inline]
    pub(super) fn plain_record<V: Visitor + ?Sized>(
        &mut self,
        ti: usize,
        h: &Head,
        v: &mut V,
    ) -> bool {
        let r = &h.raw;
        // Entries of exec/setjmp/longjmp (and their first sight) take the general path.
        if r.kind == RecordKind::Entry && self.core.fixup(h.func).is_some() {
            return false;
        }
        self.core.apply_pending();
        if r.time >= self.core.exec_due {
            return false;
        }
        let t = &mut self.core.tasks[ti];
        if !t.stack.in_sync() || t.first_time == 0 {
            return false;
        }
        match r.kind {
            RecordKind::Entry => {
                t.last_time = r.time;
                t.last_seen = r.time;
                let depth = t.stack.push(r, h.func);
                if v.wants_entries() {
                    let entry = Entry {
                        task: ti,
                        func: h.func,
                        addr: r.addr,
                        time: r.time,
                        depth,
                    };
                    v.entry(&self.view(), &entry);
                }
                true
            }
            RecordKind::Exit => {
                if t.stack.open_calls() == 0 {
                    return false;
                }
                t.last_time = r.time;
                t.last_seen = r.time;
                t.last_exit = r.time;
                let c = t.stack.pop(r);
                let i = t.stack.open_calls();
                self.report_exit(ti, h, c, i, v);
                true
            }
            _ => false,
        }
    }

    /// Keeps `session` of task `ti` up to date for a record at `time`.
    #[inline]
    pub(super) fn track_session(&mut self, ti: usize, time: u64) {
        let t = &self.core.tasks[ti];
        if (t.sess_from..t.sess_until).contains(&time) {
            return;
        }
        let tid = self.core.merge.tid(ti);
        let (s, from, until) = match self.core.merge.sym.session_at(tid, time) {
            Some((s, next)) => (Some(s), time, next),
            None => (None, time, time + 1),
        };
        let t = &mut self.core.tasks[ti];
        t.session = s.or(t.session);
        t.sess_from = from;
        t.sess_until = until;
    }

    /// Reads every task's file on its own, in task order (the direct reader), each with its
    /// own context switches merged in by time.
    pub(super) fn run_direct<V: Visitor + ?Sized>(&mut self, v: &mut V) {
        // The switches grouped by task, in time order within each.
        self.core.perf.sort_by_key(|&(ti, _)| ti);
        let mut next = 0;
        for ti in 0..self.core.tasks.len() {
            let end = next + self.core.perf[next..].partition_point(|&(t, _)| t == ti);
            (self.core.perf_next, self.core.perf_until) = (next, end);
            if self.core.tasks[ti].allowed {
                self.read_task(ti, v);
                // Switches after the task's last record still count in its open calls.
                self.sched_until(u64::MAX, v);
            }
            next = end;
        }
        self.core.perf_until = self.core.perf.len();
    }

    /// Hands over the task's context switches before `time` (the direct reader).
    #[inline]
    fn sched_until<V: Visitor + ?Sized>(&mut self, time: u64, v: &mut V) {
        while self.core.perf_next < self.core.perf_until {
            match self.core.next_sched(time) {
                Some(s) => self.visit(Step::Sched(s), v),
                None => break,
            }
        }
    }

    /// Decodes task `ti`'s records in file order and walks them: what [`Merge`] does for one
    /// task, without the heap and the reader-level gates (which `direct_ok` excludes).
    pub(super) fn read_task<V: Visitor + ?Sized>(&mut self, ti: usize, v: &mut V) {
        use record_format::argspec::{payload_len, ArgItem};
        use record_format::dat::{event_payload_len, read_header, BadRecord};
        use record_format::raw::RECORD_SIZE;

        const WINDOW: usize = 4 << 20;
        const CACHE: usize = 256;

        let file = &self.merge_dir().data[ti];
        let (bytes, tid) = (file.bytes(), file.tid);
        let mut pos = 0;
        let mut released = 0;
        let mut last_time = 0;
        // Time of the task's next context switch (u64::MAX: none left).
        let next_switch = |core: &Core<'_>| {
            core.perf[core.perf_next..core.perf_until]
                .first()
                .map_or(u64::MAX, |(_, e)| e.time)
        };
        let mut switch_at = next_switch(&self.core);
        // Direct-mapped cache: (addr, session, func).
        let mut cache = vec![(0u64, None, 0 as FuncId); CACHE];
        loop {
            let mut raw = match read_header(bytes, pos) {
                None => break,
                Some(Ok(r)) => r,
                Some(Err(e)) => {
                    let msg = match e {
                        BadRecord::Magic => {
                            format!("invalid record in {tid}.dat at offset {pos}: broken data?")
                        }
                        BadRecord::Truncated => format!("{tid}.dat is truncated at offset {pos}"),
                    };
                    self.core.merge.warnings.push(msg);
                    break;
                }
            };
            let pstart = pos + RECORD_SIZE;
            let mut plen = 0;
            let mut func = 0;
            match raw.kind {
                RecordKind::Lost => raw.time = last_time,
                RecordKind::Entry | RecordKind::Exit => {
                    self.track_session(ti, raw.time);
                    let session = self.core.tasks[ti].session;
                    let slot = ((raw.addr ^ (raw.addr >> 8)) as usize) % CACHE;
                    let c = cache[slot];
                    func = if c.0 == raw.addr && c.1 == session && raw.addr != 0 {
                        c.2
                    } else {
                        let f = self.core.merge.sym.resolve(session, raw.time, raw.addr);
                        cache[slot] = (raw.addr, session, f);
                        f
                    };
                    if raw.more {
                        let f = self.core.merge.sym.func(func).clone();
                        let spec = self.core.merge.specs.get(func, &f);
                        let items: Vec<&ArgItem> = if raw.kind == RecordKind::Entry {
                            spec.args.iter().collect()
                        } else {
                            spec.ret.iter().collect()
                        };
                        let len = if items.is_empty() {
                            None
                        } else {
                            payload_len(&items, bytes.get(pstart..).unwrap_or(&[]))
                        };
                        match len {
                            Some(l) => plen = l,
                            None => {
                                self.core.merge.warnings.push(format!(
                                    "record missing argument info for {} in {tid}.dat",
                                    f.name
                                ));
                                break;
                            }
                        }
                    }
                }
                RecordKind::Event if raw.more => match event_payload_len(bytes, pstart) {
                    Ok(l) => plen = l,
                    Err(_) => {
                        self.core
                            .merge
                            .warnings
                            .push(format!("{tid}.dat is truncated at offset {pos}"));
                        break;
                    }
                },
                RecordKind::Event => {}
            }
            if raw.kind != RecordKind::Lost {
                last_time = last_time.max(raw.time);
            }
            pos = pstart + plen;
            if pos > released + 2 * WINDOW {
                released = pos - WINDOW;
                file.release(released);
            }

            let head = Head {
                raw,
                func,
                payload: (pstart, plen),
                kernel_event: None,
            };
            if switch_at < head.raw.time {
                self.sched_until(head.raw.time, v);
                switch_at = next_switch(&self.core);
            }
            if self.core.plain && self.plain_record(ti, &head, v) {
                continue;
            }
            let step = self.core.step(ti, head);
            self.visit(step, v);
        }
    }

    /// The data directory (through the merge, which holds it).
    pub(super) fn merge_dir(&self) -> &'d TraceDir {
        self.dir
    }
}
