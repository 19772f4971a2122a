//! `dump` without a format option (cli.md §8.1): the `info` header, then every task file in
//! TASKINFO order, one line per record, exactly as stored (raw depth and address), with the
//! argument and return-value payloads decoded item by item. `--debug` adds a hex dump of the
//! header and of every record and payload shown, and the task list.
//!
//! The filters (`-F -N -H -D --tid -r --no-libcall`) hide records; the file headings stay.

use super::chrome::push_u64;
use super::dump::{write_notices, DumpOptions};
use crate::config::{Config, TimePoint};
use crate::filter::{Filters, FuncFilter};
use crate::payload::args::push_value;
use crate::payload::events::counter_values;
use crate::specs::Specs;
use crate::symbols::{FuncId, Symbolizer};
use crate::Result;
use record_format::dat::read_header;
use record_format::event::builtin;
use record_format::task::{TaskLine, Timestamp};
use record_format::{RawRecord, RecordKind, TraceDir};
use std::collections::HashMap;
use std::io::{self, Write};

mod files;
mod payload;
mod perf_debug;

const FEATURES: [&str; 11] = [
    "PLTHOOK",
    "TASK_SESSION",
    "KERNEL",
    "ARGUMENT",
    "RETVAL",
    "SYM_REL_ADDR",
    "MAX_STACK",
    "EVENT",
    "PERF_EVENT",
    "AUTO_ARGS",
    "DEBUG_INFO",
];

const INFO_SECTIONS: [&str; 14] = [
    "EXE_NAME",
    "EXE_BUILD_ID",
    "EXIT_STATUS",
    "CMDLINE",
    "CPUINFO",
    "MEMINFO",
    "OSINFO",
    "TASKINFO",
    "USAGEINFO",
    "LOADINFO",
    "ARG_SPEC",
    "RECORD_DATE",
    "PATTERN_TYPE",
    "VERSION",
];

/// `A | B | C` for the set bits of `mask` that have names.
fn flag_names(mask: u64, names: &[&str]) -> String {
    let set: Vec<&str> = names
        .iter()
        .enumerate()
        .filter(|(i, _)| mask & (1 << i) != 0)
        .map(|(_, n)| *n)
        .collect();
    set.join(" | ")
}

/// `--debug` hex lines: 16 bytes a line, offsets counted over what was printed.
/// The 40-byte header of the `info` file (already read once by `TraceDir::open`), for `-D`.
fn info_header_bytes(path: &std::path::Path) -> Vec<u8> {
    use std::io::Read;
    let mut bytes = Vec::new();
    if let Ok(f) = record_format::file::open_regular(path) {
        let _ = f.take(40).read_to_end(&mut bytes);
    }
    bytes
}

fn hex(out: &mut dyn Write, offset: &mut u64, data: &[u8]) -> io::Result<()> {
    for chunk in data.chunks(16) {
        write!(out, " <{:016x}>:", *offset)?;
        for (i, b) in chunk.iter().enumerate() {
            if i == 8 {
                out.write_all(b" ")?;
            }
            write!(out, " {b:02x}")?;
        }
        out.write_all(b"\n")?;
        *offset += chunk.len() as u64;
    }
    Ok(())
}

struct Raw<'d, 'w> {
    dir: &'d TraceDir,
    out: &'w mut dyn Write,
    opts: &'d DumpOptions,
    sym: Symbolizer<'d>,
    specs: Specs,
    filters: Filters,
    decided: HashMap<FuncId, FuncFilter>,
    offset: u64,
    /// Session of the record being shown (to name pointer values).
    session: Option<usize>,
    /// Time of the record whose payload is shown (pointers name what was loaded then).
    time: u64,
    /// The line being written (one `write_all` per record).
    line: Vec<u8>,
    /// The user SDT events of `events.txt` (id, `provider:name`), read once.
    sdt_events: Vec<(u64, String)>,
    warnings: Vec<String>,
}

/// Writes the raw dump of `dir`; returns the warnings.
pub fn dump(
    dir: &TraceDir,
    cfg: &Config,
    opts: &DumpOptions,
    out: &mut dyn Write,
) -> Result<Vec<String>> {
    let (sym, specs, filters, notices) = parts(dir, cfg);
    write_notices(out, &notices)?;
    let mut raw = Raw {
        dir,
        out,
        opts,
        sym,
        specs,
        filters,
        decided: HashMap::new(),
        offset: 0,
        session: None,
        time: 0,
        line: Vec::with_capacity(256),
        sdt_events: dir
            .read_text("events.txt")
            .map(|t| record_format::sdt::parse_events_txt(&t))
            .unwrap_or_default(),
        warnings: Vec::new(),
    };
    raw.header()?;
    let first = dir
        .data
        .iter()
        .filter_map(|d| match read_header(d.bytes(), 0) {
            Some(Ok(r)) if r.kind != RecordKind::Lost => Some(r.time),
            _ => None,
        })
        .min()
        .unwrap_or(0);
    // An elapsed stop counts from the first record of the data, switches included (the perf
    // files are read for it only then).
    let point = |p: TimePoint, origin: &dyn Fn() -> u64| match p {
        TimePoint::Elapsed(ns) => origin().saturating_add(ns),
        TimePoint::Absolute(ns) => ns,
    };
    let with_switches = || {
        let events = crate::perf::events_by_time(dir);
        crate::walk::sched::origin(&events, dir, &cfg.tids, (0, u64::MAX), first, false)
    };
    let range = cfg.time_range.map_or((0, u64::MAX), |r| {
        (
            r.start.map_or(0, |p| point(p, &|| first)),
            r.stop.map_or(u64::MAX, |p| point(p, &with_switches)),
        )
    });
    for ti in 0..dir.data.len() {
        let allowed = cfg.tids.is_empty() || cfg.tids.contains(&dir.data[ti].tid);
        raw.task(ti, cfg, allowed, range)?;
    }
    // uftrace 0.13 lists the kernel files before the perf files.
    raw.kernel_files(cfg.no_event)?;
    if !cfg.no_event {
        raw.perf_files(cfg, range)?;
    }
    Ok(raw.warnings)
}

/// The symbolizer, specs and filters of `dir`, with their `Usage:` notices.
fn parts<'d>(dir: &'d TraceDir, cfg: &Config) -> (Symbolizer<'d>, Specs, Filters, Vec<String>) {
    let mut sym = Symbolizer::new(dir, cfg.demangle);
    let specs = Specs::new(dir);
    let mut filters = Filters::new(cfg);
    let mut notices: Vec<String> = specs.notices.clone();
    notices.append(&mut filters.notices);
    if !filters.is_empty() {
        let ids = sym.all_functions();
        let funcs: Vec<_> = ids.iter().map(|&i| sym.func(i)).collect();
        if let Some(msg) = filters.check(&funcs, specs.binds_any(&funcs)) {
            notices.push(msg);
        }
    }
    (sym, specs, filters, notices)
}

impl Raw<'_, '_> {
    fn header(&mut self) -> io::Result<()> {
        let h = &self.dir.info.header;
        let out = &mut *self.out;
        writeln!(out, "uftrace file header: magic         = 4674726163652100")?;
        writeln!(out, "uftrace file header: version       = {}", h.version)?;
        writeln!(out, "uftrace file header: header size   = 40")?;
        let endian = if h.endian == 1 { "little" } else { "big" };
        writeln!(
            out,
            "uftrace file header: endian        = {} ({endian})",
            h.endian
        )?;
        let class = if h.elf_class == 2 { "64" } else { "32" };
        writeln!(
            out,
            "uftrace file header: class         = {} ({class} bit)",
            h.elf_class
        )?;
        writeln!(
            out,
            "uftrace file header: features      = {:#x} ({})",
            h.feat_mask,
            flag_names(h.feat_mask, &FEATURES)
        )?;
        writeln!(
            out,
            "uftrace file header: info          = {:#x} ({})",
            h.info_mask,
            flag_names(h.info_mask, &INFO_SECTIONS)
        )?;
        if self.opts.debug {
            let bytes = info_header_bytes(&self.dir.path.join("info"));
            let mut off = 0;
            hex(out, &mut off, &bytes[..bytes.len().min(40)])?;
        }
        out.write_all(b"\n")?;
        if self.opts.debug {
            writeln!(out, "{} tasks found", self.dir.data.len())?;
            for t in &self.dir.tasks {
                match t {
                    TaskLine::Task { time, tid, pid } => {
                        writeln!(out, "{}  task tid {tid} (pid {pid})", Timestamp(*time))?
                    }
                    TaskLine::Fork { time, pid, ppid } => {
                        writeln!(out, "{}  fork pid {pid} (ppid {ppid})", Timestamp(*time))?
                    }
                    TaskLine::Sess {
                        time,
                        pid,
                        sid,
                        exename,
                    } => {
                        let sid: String = sid.chars().take(16).collect();
                        writeln!(
                            out,
                            "{}  session of task {pid}: {sid} ({exename})",
                            Timestamp(*time)
                        )?
                    }
                    TaskLine::Dlop { .. } => {}
                }
            }
            out.write_all(b"\n")?;
        }
        Ok(())
    }

    fn decide(&mut self, id: FuncId) -> FuncFilter {
        if let Some(d) = self.decided.get(&id) {
            return *d;
        }
        let d = self.filters.decide(self.sym.func(id));
        self.decided.insert(id, d);
        d
    }

    fn inverted_time(&mut self) -> io::Result<()> {
        self.out.write_all(
            b"\n*************************************\n\
              * inverted time - data seems broken *\n\
              *************************************\n\n",
        )
    }

    fn prefix(&mut self, tid: u32, time: u64) -> io::Result<()> {
        let mut line = std::mem::take(&mut self.line);
        line.clear();
        self.push_prefix(&mut line, tid, time);
        let res = self.out.write_all(&line);
        self.line = line;
        res
    }

    /// `SEC.NSEC  TID: ` (the TID in 5 columns as uftrace 0.13 prints it, 7 as 0.17+).
    fn push_prefix(&self, line: &mut Vec<u8>, tid: u32, time: u64) {
        push_u64(line, time / 1_000_000_000);
        line.push(b'.');
        push_padded(line, time % 1_000_000_000, 9, b'0');
        line.extend_from_slice(b"  ");
        let w = if self.opts.tid_width == 6 { 5 } else { 7 };
        push_padded(line, u64::from(tid), w, b' ');
        line.extend_from_slice(b": ");
    }

    fn record(&mut self, tid: u32, r: &RawRecord, func: FuncId, bytes: &[u8]) -> io::Result<()> {
        let kind: &[u8] = match r.kind {
            RecordKind::Entry => b"[entry] ",
            RecordKind::Exit => b"[exit ] ",
            RecordKind::Event => b"[event] ",
            RecordKind::Lost => b"[lost ] ",
        };
        let event;
        let name = match r.kind {
            RecordKind::Event => {
                event = self.event_name(r.addr);
                event.as_str()
            }
            RecordKind::Lost => {
                event = format!("<{:x}>", r.addr);
                event.as_str()
            }
            _ => self.sym.func(func).name.as_str(),
        };
        let mut line = std::mem::take(&mut self.line);
        line.clear();
        self.push_prefix(&mut line, tid, r.time);
        line.extend_from_slice(kind);
        line.extend_from_slice(name.as_bytes());
        line.push(b'(');
        push_hex(&mut line, r.addr);
        line.extend_from_slice(b") depth: ");
        push_u64(&mut line, u64::from(r.depth));
        line.push(b'\n');
        let res = self.out.write_all(&line);
        self.line = line;
        res?;
        if self.opts.debug {
            hex(self.out, &mut self.offset, bytes)?;
        }
        Ok(())
    }
}

/// Appends `v` in `width` columns, padded on the left with `pad`.
fn push_padded(buf: &mut Vec<u8>, v: u64, width: usize, pad: u8) {
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    let mut v = v;
    loop {
        i -= 1;
        digits[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    for _ in digits.len() - i..width {
        buf.push(pad);
    }
    buf.extend_from_slice(&digits[i..]);
}

/// Appends `v` in lowercase hex, without prefix.
fn push_hex(buf: &mut Vec<u8>, v: u64) {
    let mut digits = [0u8; 16];
    let mut i = digits.len();
    let mut v = v;
    loop {
        i -= 1;
        digits[i] = b"0123456789abcdef"[(v & 15) as usize];
        v >>= 4;
        if v == 0 {
            break;
        }
    }
    buf.extend_from_slice(&digits[i..]);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn feature_names_join_set_bits() {
        assert_eq!(
            flag_names(0x263, &FEATURES),
            "PLTHOOK | TASK_SESSION | SYM_REL_ADDR | MAX_STACK | AUTO_ARGS"
        );
        assert_eq!(flag_names(0, &FEATURES), "");
    }

    #[test]
    fn numbers_are_padded() {
        let mut b = Vec::new();
        push_padded(&mut b, 5, 9, b'0');
        b.push(b'|');
        push_padded(&mut b, 20182, 7, b' ');
        b.push(b'|');
        push_padded(&mut b, 1234567, 5, b' ');
        b.push(b'|');
        push_hex(&mut b, 0x5556e4d9e050);
        b.push(b'|');
        push_hex(&mut b, 0);
        assert_eq!(
            String::from_utf8(b).unwrap(),
            "000000005|  20182|1234567|5556e4d9e050|0"
        );
    }

    #[test]
    fn hex_lines_split_at_eight_bytes() {
        let mut out = Vec::new();
        let mut off = 0;
        hex(&mut out, &mut off, &(0u8..20).collect::<Vec<_>>()).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert_eq!(
            text,
            " <0000000000000000>: 00 01 02 03 04 05 06 07  08 09 0a 0b 0c 0d 0e 0f\n \
             <0000000000000010>: 10 11 12 13\n"
        );
        assert_eq!(off, 20);
    }
}
