//! The data files of the raw dump, record by record in file order: each task's `.dat` (with
//! the filters' verdicts, payloads and `--debug` hex), and the `kernel-cpu<N>.dat` and
//! `perf-cpu<N>.dat` files.

use super::payload::payload_items;
use super::{hex, perf_debug, Raw};
use crate::callstack::{TaskStack, Verdict};
use crate::config::Config;
use crate::perf;
use crate::symbols::FuncId;
use crate::Result;
use record_format::dat::{event_payload_len, read_header, BadRecord};
use record_format::raw::RECORD_SIZE;
use record_format::RecordKind;
use std::io;

impl Raw<'_, '_> {
    /// One task file.
    pub(super) fn task(
        &mut self,
        ti: usize,
        cfg: &Config,
        allowed: bool,
        range: (u64, u64),
    ) -> Result<()> {
        let data = &self.dir.data[ti];
        let (tid, bytes) = (data.tid, data.bytes());
        writeln!(self.out, "reading {tid}.dat")?;
        self.offset = 0;
        let mut stack = TaskStack::new(cfg.depth);
        let mut pos = 0;
        let mut prev_time = 0;
        // The session of the last record and the times it covers; the last resolution.
        let mut sess: (u64, u64, Option<usize>) = (1, 0, None);
        let mut memo: (u64, Option<usize>, FuncId) = (0, None, 0);
        let mut released = 0;
        while let Some(head) = read_header(bytes, pos) {
            // Keep resident memory flat on large files: drop what was read long ago.
            const WINDOW: usize = 4 << 20;
            if pos > released + 2 * WINDOW {
                released = pos - WINDOW;
                data.release(released);
            }
            let r = match head {
                Ok(r) => r,
                Err(BadRecord::Truncated) => {
                    self.warnings
                        .push(format!("{tid}.dat is truncated at offset {pos}"));
                    break;
                }
                Err(BadRecord::Magic) => {
                    self.warnings.push(format!(
                        "invalid record in {tid}.dat at offset {pos}: broken data?"
                    ));
                    break;
                }
            };
            let pstart = pos + RECORD_SIZE;
            let mut func = 0;
            let mut spec = None;
            let plen = match r.kind {
                RecordKind::Entry | RecordKind::Exit => {
                    if r.time < sess.0 || r.time >= sess.1 {
                        sess = match self.sym.session_at(tid, r.time) {
                            Some((s, until)) => (r.time, until, Some(s)),
                            None => (r.time, r.time + 1, None),
                        };
                    }
                    let session = sess.2;
                    self.session = session;
                    func = if memo.0 == r.addr && memo.1 == session && r.addr != 0 {
                        memo.2
                    } else {
                        let f = self.sym.resolve(session, r.time, r.addr);
                        memo = (r.addr, session, f);
                        f
                    };
                    if r.more {
                        let f = self.sym.func(func).clone();
                        let s = self.specs.get(func, &f).clone();
                        let items = payload_items(&s, r.kind == RecordKind::Exit);
                        if items.is_empty() {
                            self.warnings.push(format!(
                                "record missing argument info for {} in {tid}.dat",
                                f.name
                            ));
                            break;
                        }
                        let Some(len) = record_format::argspec::payload_len(
                            &items,
                            bytes.get(pstart..).unwrap_or(&[]),
                        ) else {
                            self.warnings
                                .push(format!("{tid}.dat is truncated at offset {pos}"));
                            break;
                        };
                        spec = Some(s);
                        len
                    } else {
                        0
                    }
                }
                RecordKind::Event if r.more => match event_payload_len(bytes, pstart) {
                    Ok(len) => len,
                    Err(_) => {
                        self.warnings
                            .push(format!("{tid}.dat is truncated at offset {pos}"));
                        break;
                    }
                },
                _ => 0,
            };
            let record = &bytes[pos..pstart];
            let payload = &bytes[pstart..pstart + plen];
            pos = pstart + plen;
            if !allowed {
                continue;
            }
            stack.consume(&r, func);
            if r.time < range.0 || r.time > range.1 {
                continue;
            }
            // A LOST record has time 0: uftrace reports it as an inverted time too.
            if prev_time > r.time {
                self.inverted_time()?;
            }
            prev_time = r.time;
            let shown = match r.kind {
                RecordKind::Entry => {
                    let ff = self.decide(func);
                    stack.enter(&ff, self.filters.has_filter, ff.hide, None, None) == Verdict::Shown
                }
                RecordKind::Exit => stack.exit(),
                RecordKind::Event => !cfg.no_event,
                RecordKind::Lost => true,
            };
            if !shown {
                continue;
            }
            self.record(tid, &r, func, record)?;
            if let Some(spec) = &spec {
                if !self.opts.no_args {
                    self.payload(tid, &r, spec, payload)?;
                }
            } else if r.kind == RecordKind::Event && r.more {
                self.event_data(tid, &r, payload)?;
            }
        }
        Ok(())
    }

    /// The `kernel-cpu<N>.dat` files (`-k`): their function-graph records in file order, as
    /// `[entry]`/`[exit ]` lines with the kernel's graph depth.
    /// The `kernel-cpu<N>.dat` files; their events (page faults) not with `--no-event`.
    pub(super) fn kernel_files(&mut self, no_event: bool) -> io::Result<()> {
        let Some(k) = &self.dir.kernel else {
            return Ok(());
        };
        let mut recs = k.graph_records();
        let files: Vec<_> = std::mem::take(&mut recs.cpus)
            .into_iter()
            .enumerate()
            .filter(|(_, recs)| !recs.is_empty())
            .collect();
        let tasks: std::collections::HashSet<u32> = self.dir.data.iter().map(|d| d.tid).collect();
        for (i, (cpu, list)) in files.into_iter().enumerate() {
            if i == 0 {
                self.out.write_all(b"\n")?;
            }
            writeln!(self.out, "reading kernel-cpu{cpu}.dat")?;
            for g in list {
                if let Some(ev) = g.event {
                    if no_event {
                        continue;
                    }
                    let tid = recs.owner(&g, |t| tasks.contains(&t));
                    self.prefix(tid, g.time)?;
                    let sym = &self.sym;
                    let text = recs.event_text(ev, &|a| sym.kernel_symbol(a));
                    writeln!(
                        self.out,
                        "[event] {}({}) {text}",
                        recs.event_name(ev),
                        g.func
                    )?;
                    continue;
                }
                // Kernel addresses resolve alike in every session: tasks the data does not
                // follow take the first one.
                let session = self
                    .sym
                    .session_at(g.tid, g.time)
                    .map_or(Some(0), |(s, _)| Some(s));
                let func = self.sym.resolve(session, g.time, g.func);
                self.record(g.tid, &g.raw(0), func, &[])?;
            }
        }
        Ok(())
    }

    /// The `perf-cpu<N>.dat` files: `[event] NAME(ID)` lines in file order, of the tasks
    /// `--tid` keeps and inside `-r` (as uftrace).
    pub(super) fn perf_files(&mut self, cfg: &Config, range: (u64, u64)) -> io::Result<()> {
        for (cpu, events) in perf::cpu_files(self.dir) {
            // `--debug` offsets count from each file's start.
            self.offset = 0;
            if cpu == 0 {
                self.out.write_all(b"\n")?;
            }
            let name = record_format::perf::file_name(cpu);
            writeln!(self.out, "reading {name}")?;
            let payloads = if self.opts.debug {
                record_format::file::map_regular(&self.dir.path.join(&name))
                    .map(|b| perf_debug::payloads(&b))
                    .unwrap_or_default()
            } else {
                Vec::new()
            };
            for (i, e) in events.into_iter().enumerate() {
                if (cfg.no_sched && perf::is_sched(e.id))
                    || !(cfg.tids.is_empty() || cfg.tids.contains(&e.tid))
                    || !(range.0..=range.1).contains(&e.time)
                {
                    continue;
                }
                self.prefix(e.tid, e.time)?;
                let name = record_format::event::builtin(e.id).map_or("", |(n, _)| n);
                writeln!(self.out, "[event] {name}({})", e.id)?;
                if let Some(p) = payloads.get(i).filter(|p| !p.is_empty()) {
                    hex(self.out, &mut self.offset, p)?;
                }
            }
        }
        Ok(())
    }
}
