//! The payload blocks of the raw dump: `[args ]`/`[retval]` items and `[data ]` of events,
//! as uftrace 0.13's `dump` prints them.

use super::{builtin, counter_values, hex, push_value, Raw};
use crate::specs::FuncSpec;
use record_format::argspec::{ArgFormat, ArgItem};
use record_format::{RawRecord, RecordKind};
use std::io;

impl Raw<'_, '_> {
    /// The `[args ]`/`[retval]` block of a record with a payload.
    pub(super) fn payload(
        &mut self,
        tid: u32,
        r: &RawRecord,
        spec: &FuncSpec,
        data: &[u8],
    ) -> io::Result<()> {
        let ret = r.kind == RecordKind::Exit;
        let items = payload_items(spec, ret);
        let len = unpadded_len(&items, data);
        self.time = r.time;
        self.prefix(tid, r.time)?;
        let what = if ret { "retval" } else { "args " };
        writeln!(self.out, "[{what}] length = {len}")?;
        let mut pos = 0;
        for (i, item) in items.iter().enumerate() {
            let label = if ret {
                String::from("retval")
            } else {
                format!("args[{i}]")
            };
            let rest = data.get(pos..).unwrap_or(&[]);
            let used = self.item(&label, item, spec, rest)?;
            pos += used;
        }
        if self.opts.debug {
            let end = data.len().min((len + 7) & !7);
            hex(self.out, &mut self.offset, &data[..end])?;
        }
        Ok(())
    }

    /// One payload item; returns the bytes it takes.
    fn item(
        &mut self,
        label: &str,
        item: &ArgItem,
        spec: &FuncSpec,
        data: &[u8],
    ) -> io::Result<usize> {
        let out = &mut *self.out;
        let int = |n: usize| -> u64 {
            let mut buf = [0u8; 8];
            let n = n.min(8).min(data.len());
            buf[..n].copy_from_slice(&data[..n]);
            u64::from_le_bytes(buf)
        };
        let size = match &item.format {
            ArgFormat::Str | ArgFormat::StdString => {
                let n = int(2) as usize & 0xffff;
                let text = data.get(2..2 + n).unwrap_or(&[]);
                let text = text.split(|&b| b == 0).next().unwrap_or(&[]);
                let kind = if item.format == ArgFormat::Str {
                    "str"
                } else {
                    "std::string"
                };
                let shown = if text.starts_with(&[0xff, 0xff, 0xff, 0xff]) {
                    String::from("NULL")
                } else {
                    String::from_utf8_lossy(text).into_owned()
                };
                writeln!(out, "  {label} {kind}: {shown}")?;
                n + 2
            }
            ArgFormat::Pointer => {
                let v = int(item.size);
                let id = self.sym.resolve(self.session, self.time, v);
                let f = self.sym.func(id);
                if v != 0 && f.known {
                    writeln!(out, "  {label} p: {v:x} (&{})", f.name)?;
                } else if v == 0 {
                    // uftrace 0.13 prints a null argument `0` and a null return value `(nil)`.
                    let null = if label == "retval" { "(nil)" } else { "0" };
                    writeln!(out, "  {label} p: {null}")?;
                } else {
                    writeln!(out, "  {label} p: {v:#x}")?;
                }
                item.size
            }
            ArgFormat::Enum(name) => {
                let v = int(item.size);
                let signed = sign_extend(v, item.size);
                let values =
                    record_format::argspec::decode_payload(&[item], data).unwrap_or_default();
                let mut text = String::new();
                if let Some(value) = values.first() {
                    push_value(&mut text, item, value, &spec.enums, &mut |_| None);
                }
                writeln!(out, "  {label} enum {name}: {text} ({signed})")?;
                item.size
            }
            ArgFormat::Struct(name) => {
                // uftrace's layout: the bytes by 16 a line, tab-indented, a space after each
                // and another after every eighth.
                writeln!(out, "  {label} struct {}:", name.as_deref().unwrap_or(""))?;
                let bytes = data.get(..item.size).unwrap_or(data);
                for line in bytes.chunks(16) {
                    let mut text = String::from("\t");
                    for (i, b) in line.iter().enumerate() {
                        text.push_str(&format!("{b:02x} "));
                        if i % 8 == 7 {
                            text.push(' ');
                        }
                    }
                    writeln!(out, "{text}")?;
                }
                item.size
            }
            other => {
                let c = match other {
                    ArgFormat::Auto => 'd',
                    ArgFormat::Signed => 'i',
                    ArgFormat::Unsigned => 'u',
                    ArgFormat::Hex => 'x',
                    ArgFormat::Octal => 'o',
                    ArgFormat::Char => 'c',
                    ArgFormat::Float => 'f',
                    _ => 't',
                };
                let size = if *other == ArgFormat::Char {
                    1
                } else {
                    item.size
                };
                let v = int(size);
                let width = size.min(8) * 2;
                writeln!(out, "  {label} {c}{}: 0x{v:0width$x}", size * 8)?;
                size
            }
        };
        Ok((size + 3) & !3)
    }

    /// The `[data ]` block of an event with a payload (`u16` length, then the data): its
    /// length and, for the built-in counters and `watch:cpu`, their values as uftrace 0.13
    /// prints them.
    pub(super) fn event_data(&mut self, tid: u32, r: &RawRecord, data: &[u8]) -> io::Result<()> {
        let len = data
            .get(..2)
            .map_or(0, |b| u16::from_le_bytes([b[0], b[1]]) as usize);
        let body = data.get(2..2 + len).unwrap_or_default();
        self.prefix(tid, r.time)?;
        writeln!(self.out, "[data ] length = {len}")?;
        if let (Some((name, _)), Some((_, fields, unit))) =
            (builtin(r.addr), record_format::event::counter(r.addr))
        {
            let v: Vec<i64> = body
                .chunks_exact(8)
                .map(|c| i64::from_le_bytes(c.try_into().unwrap_or([0; 8])))
                .collect();
            // uftrace's dump shows differences unsigned-looking (`minor=1`), unlike replay.
            let values = counter_values(&v, fields, unit, false);
            writeln!(self.out, "  {name}: {values}")?;
        } else if r.addr == record_format::event::WATCH_CPU {
            let cpu = body
                .get(..4)
                .map_or(0, |b| i32::from_le_bytes([b[0], b[1], b[2], b[3]]));
            writeln!(self.out, "  watch:cpu: cpu={cpu}")?;
        }
        if self.opts.debug {
            let end = data.len().div_ceil(8) * 8;
            let mut padded = data.to_vec();
            padded.resize(end, 0);
            hex(self.out, &mut self.offset, &padded)?;
        }
        Ok(())
    }

    /// Name of an event id: an SDT event of `events.txt`, or a built-in one.
    pub(super) fn event_name(&self, id: u64) -> String {
        if let Some((_, name)) = self.sdt_events.iter().find(|(i, _)| *i == id) {
            return name.clone();
        }
        builtin(id).map_or_else(|| id.to_string(), |(n, _)| n.to_string())
    }
}

pub(super) fn payload_items(spec: &FuncSpec, ret: bool) -> Vec<&ArgItem> {
    if ret {
        spec.ret.iter().collect()
    } else {
        spec.args.iter().collect()
    }
}

/// Payload length as uftrace reports it: the items, each padded to 4 bytes, without the
/// final padding to 8.
fn unpadded_len(items: &[&ArgItem], data: &[u8]) -> usize {
    let mut pos = 0;
    for item in items {
        let len = match item.format {
            ArgFormat::Str | ArgFormat::StdString => match data.get(pos..pos + 2) {
                Some(b) => u16::from_le_bytes([b[0], b[1]]) as usize + 2,
                None => 2,
            },
            ArgFormat::Char => 1,
            _ => item.size,
        };
        pos += (len + 3) & !3;
    }
    pos
}

fn sign_extend(v: u64, size: usize) -> i64 {
    if size >= 8 || size == 0 {
        return v as i64;
    }
    let shift = 64 - size * 8;
    ((v << shift) as i64) >> shift
}
