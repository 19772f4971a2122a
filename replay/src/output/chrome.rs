//! `dump --chrome` (cli.md §8.2): Chrome trace-event JSON, loadable in Perfetto and
//! chrome://tracing, in uftrace's layout: one event object per line.
//!
//! * two `"ph":"M"` metadata events per task (`process_name`, `thread_name`, `"[TID] comm"`);
//! * a `"B"` event per shown entry and an `"E"` event per shown exit, `ts` in microseconds
//!   with three decimals; a main thread has only `pid`, other threads `pid` and `tid`;
//! * arguments as `"args":{"arguments":"(1, 2)"}`, return values as `"args":{"retval":"3"}`;
//! * with `--srcline`, an entry's location first in its `args`: `"args":{"srcline":"a.c:4"}`
//!   (as uftrace 0.14+ writes it; 0.13 writes no location);
//! * a footer with `displayTimeUnit` and the recording's metadata.
//!
//! Data recorded by uftrace 0.17+ carries a UTC offset: `ts` is then wall-clock time, as in
//! uftrace 0.19.
//!
//! Events are written as they come (nothing is kept in memory); strings are escaped by
//! serde_json.

use super::dump::{write_notices, DumpOptions};
use crate::config::Config;
use crate::walk::timed::{Call, Sink, Walk};
use crate::Result;
use record_format::TraceDir;
use std::io::{self, Write};

struct Chrome<'w> {
    out: &'w mut dyn Write,
    lost: u64,
    /// Added to every timestamp: the recorded UTC offset (uftrace 0.17+ data), which makes
    /// `ts` wall-clock time as uftrace 0.19 shows it; 0 for older data.
    shift: u64,
    /// The event being written (one `write_all` per event).
    line: Vec<u8>,
    /// Per task: `,"pid":P` or `,"pid":P,"tid":T`.
    ids: Vec<Vec<u8>>,
    /// `--srcline`: `"srcline":"file:line"` first in the `args` of an entry.
    srcline: bool,
}

/// Writes `s` as a JSON string (with its quotes).
fn json_str(out: &mut dyn Write, s: &str) -> io::Result<()> {
    serde_json::to_writer(&mut *out, s).map_err(io::Error::from)
}

/// Appends `s` as a JSON string; serde_json escapes what needs it.
fn push_json_str(buf: &mut Vec<u8>, s: &str) {
    let plain = s.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\');
    if plain {
        buf.push(b'"');
        buf.extend_from_slice(s.as_bytes());
        buf.push(b'"');
    } else {
        // Writing into a Vec cannot fail.
        let _ = serde_json::to_writer(&mut *buf, s);
    }
}

/// Appends the decimal digits of `v` (the `ts` values are written millions of times).
pub(crate) fn push_u64(buf: &mut Vec<u8>, mut v: u64) {
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    loop {
        i -= 1;
        digits[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    buf.extend_from_slice(&digits[i..]);
}

impl Sink for Chrome<'_> {
    fn wants_args(&self) -> bool {
        true
    }

    fn call(&mut self, c: &Call<'_>) -> io::Result<()> {
        if self.ids.len() <= c.task {
            self.ids.resize(c.task + 1, Vec::new());
        }
        if self.ids[c.task].is_empty() {
            let mut id = format!(",\"pid\":{}", c.pid);
            if c.pid != c.tid {
                id.push_str(&format!(",\"tid\":{}", c.tid));
            }
            self.ids[c.task] = id.into_bytes();
        }
        let line = &mut self.line;
        line.clear();
        line.extend_from_slice(b",\n{\"ts\":");
        let ts = c.time.wrapping_add(self.shift);
        push_u64(line, ts / 1000);
        let frac = (ts % 1000) as u16;
        line.extend_from_slice(&[
            b'.',
            b'0' + (frac / 100) as u8,
            b'0' + (frac / 10 % 10) as u8,
            b'0' + (frac % 10) as u8,
        ]);
        line.extend_from_slice(if c.exit {
            b",\"ph\":\"E\""
        } else {
            b",\"ph\":\"B\""
        });
        line.extend_from_slice(&self.ids[c.task]);
        line.extend_from_slice(b",\"name\":");
        push_json_str(line, c.name);
        let srcline = c.srcline.filter(|_| self.srcline);
        if let Some(loc) = srcline {
            line.extend_from_slice(b",\"args\":{\"srcline\":");
            push_json_str(line, loc);
        }
        if let Some(args) = c.args {
            line.extend_from_slice(match (c.exit, srcline.is_some()) {
                (true, _) => b",\"args\":{\"retval\":",
                (false, true) => b",\"arguments\":",
                (false, false) => b",\"args\":{\"arguments\":",
            });
            push_json_str(line, args);
        }
        if srcline.is_some() || c.args.is_some() {
            line.push(b'}');
        }
        line.push(b'}');
        self.out.write_all(line)
    }

    fn lost(&mut self) {
        self.lost += 1;
    }
}

/// Writes the trace-event JSON of `dir`; returns the warnings.
pub fn dump(
    dir: &TraceDir,
    cfg: &Config,
    opts: &DumpOptions,
    out: &mut dyn Write,
    warn: &mut dyn FnMut(&str),
) -> Result<Vec<String>> {
    let walk = Walk::new(dir, cfg, opts.no_args);
    write_notices(out, &walk.notices)?;
    out.write_all(b"{\"traceEvents\":[")?;
    // Each event after the first starts with ",\n"; the metadata come first.
    let mut first = true;
    for t in walk.tasks() {
        let label = format!("[{}] {}", t.tid, t.comm);
        for kind in ["process_name", "thread_name"] {
            out.write_all(if first { b"\n" } else { b",\n" })?;
            first = false;
            write!(
                out,
                "{{\"ts\":0,\"ph\":\"M\",\"pid\":{},\"name\":\"{kind}\",\"args\":{{\"name\":",
                t.tid
            )?;
            json_str(out, &label)?;
            out.write_all(b"}}")?;
        }
    }
    let shift = dir
        .info
        .utc_offset
        .map_or(0, |s| (s as u64).wrapping_mul(1_000_000_000));
    let mut sink = Chrome {
        out,
        lost: 0,
        shift,
        line: Vec::with_capacity(256),
        ids: Vec::new(),
        srcline: cfg.srcline,
    };
    let warnings = walk.run(&mut sink)?;
    let lost = sink.lost;
    write!(
        out,
        "\n], \"displayTimeUnit\": \"ns\", \"metadata\": {{\n\"version\":"
    )?;
    json_str(out, &opts.version)?;
    out.write_all(b",\n\"recorded_time\":")?;
    json_str(out, &opts.recorded_time)?;
    if let Some(cmd) = &dir.info.cmdline {
        out.write_all(b",\n\"command_line\":")?;
        json_str(out, &unescape_cmdline(cmd))?;
    }
    out.write_all(b"\n} }\n")?;
    if lost > 0 {
        warn(&format!(
            "Some of function trace records are lost. ({lost} times shown)"
        ));
        warn("The output json format may not show the correct view in chrome browser.");
    }
    Ok(warnings)
}

/// The command line as recorded has `"` escaped as `\"`; JSON escaping is applied on top of
/// the plain text.
fn unescape_cmdline(cmd: &str) -> String {
    cmd.replace("\\\"", "\"")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_and_strings() {
        let mut b = Vec::new();
        for v in [0, 7, 1838913716, u64::MAX] {
            push_u64(&mut b, v);
            b.push(b' ');
        }
        push_json_str(&mut b, "main");
        push_json_str(&mut b, "(\"a\\b\")\n");
        assert_eq!(
            String::from_utf8(b).unwrap(),
            "0 7 1838913716 18446744073709551615 \"main\"\"(\\\"a\\\\b\\\")\\n\""
        );
    }
}
