//! Rendering of recorded argument and return values (`fib(5) = 5`, `strlen("alpha") = 5`).

use crate::specs::{EnumScope, FuncSpec};
use record_format::argspec::{ArgFormat, ArgItem, ArgValue};
use record_format::dbg::EnumValues;
use std::fmt::Write as _;

fn escape_into(out: &mut String, bytes: &[u8]) {
    if bytes.iter().any(|&b| b >= 0x80) {
        out.push_str(&String::from_utf8_lossy(bytes));
        return;
    }
    for &b in bytes {
        match b {
            0 => out.push_str("\\0"),
            8 => out.push_str("\\b"),
            b'\n' => out.push_str("\\n"),
            _ => out.push(b as char),
        }
    }
}

fn sign_extend(raw: u64, size: usize) -> i64 {
    match size {
        1 => raw as u8 as i8 as i64,
        2 => raw as u16 as i16 as i64,
        4 => raw as u32 as i32 as i64,
        _ => raw as i64,
    }
}

fn mask(raw: u64, size: usize) -> u64 {
    if size >= 8 {
        raw
    } else {
        raw & ((1u64 << (size * 8)) - 1)
    }
}

/// Appends a value in C `%#lx` style (`0` stays `0`).
fn push_hex(out: &mut String, v: u64) {
    if v == 0 {
        out.push('0');
    } else {
        let _ = write!(out, "{v:#x}");
    }
}

/// Appends the enumerators that make up `v`: the exact one, else (flags) enumerators taken
/// greedily from the largest value down and joined with `|`, plus `+0x..` for what is left.
fn push_enum(out: &mut String, values: &EnumValues, v: i64) {
    // Largest value first; of equal values, the later definition first.
    let mut order: Vec<(usize, &(i64, String))> = values.iter().enumerate().collect();
    order.sort_by(|(ia, (va, _)), (ib, (vb, _))| vb.cmp(va).then(ib.cmp(ia)));
    if let Some((_, (_, name))) = order.iter().find(|(_, (val, _))| *val == v) {
        out.push_str(name);
        return;
    }
    let mut left = v;
    let mut any = false;
    for (_, (val, name)) in order {
        if *val <= left {
            left = left.wrapping_sub(*val);
            if any {
                out.push('|');
            }
            out.push_str(name);
            any = true;
        }
        if left == 0 {
            break;
        }
    }
    if !any {
        if v.unsigned_abs() > 100_000 {
            push_hex(out, v as u64);
        } else {
            let _ = write!(out, "{v}");
        }
    } else if left != 0 {
        out.push('+');
        push_hex(out, left as u64);
    }
}

/// Appends one value. `enums` holds the definitions for `e:NAME` items; `symbol_at` names a
/// function at an address (for `p` pointers).
pub fn push_value(
    out: &mut String,
    item: &ArgItem,
    value: &ArgValue,
    enums: &EnumScope,
    symbol_at: &mut dyn FnMut(u64) -> Option<String>,
) {
    match (value, &item.format) {
        (ArgValue::Str(s), ArgFormat::Str | ArgFormat::StdString) => {
            if s.as_slice() == [0xff, 0xff, 0xff, 0xff] {
                out.push_str("NULL");
                return;
            }
            out.push('"');
            escape_into(out, s);
            out.push('"');
            if item.format == ArgFormat::StdString {
                out.push('s');
            }
        }
        (ArgValue::Char(c), _) => {
            out.push('\'');
            escape_into(out, &[*c]);
            out.push('\'');
        }
        (ArgValue::Float(f) | ArgValue::LongDouble(f), _) => {
            if f.is_finite() {
                let _ = write!(out, "{f:.6}");
            } else if f.is_nan() {
                out.push_str("nan");
            } else {
                out.push_str(if *f > 0.0 { "inf" } else { "-inf" });
            }
        }
        (ArgValue::Bytes(b), ArgFormat::Struct(name)) => {
            // gcc names anonymous lambdas "<lambda"; uftrace leaves that out (as clang does).
            out.push_str(name.as_deref().filter(|n| *n != "<lambda").unwrap_or(""));
            out.push_str(if b.is_empty() { "{}" } else { "{...}" });
        }
        (ArgValue::Int { raw, size }, fmt) => {
            let (raw, size) = (*raw, *size);
            let u = mask(raw, size);
            match fmt {
                ArgFormat::Signed => {
                    let _ = write!(out, "{}", sign_extend(raw, size));
                }
                ArgFormat::Unsigned => {
                    if u > 100_000 {
                        let _ = write!(out, "{u:#x}");
                    } else {
                        let _ = write!(out, "{u}");
                    }
                }
                ArgFormat::Hex => push_hex(out, u),
                ArgFormat::Octal => {
                    if u == 0 {
                        out.push('0');
                    } else {
                        let _ = write!(out, "0{u:o}");
                    }
                }
                ArgFormat::Enum(name) => {
                    let v = u as i64;
                    match enums.get(name) {
                        _ if !enums.has_module() => {
                            let _ = write!(out, "<ENUM?> {:x}", v as u32);
                        }
                        Some(values) => push_enum(out, values, v),
                        None => {
                            let _ = write!(out, "{v}");
                        }
                    }
                }
                ArgFormat::Pointer => {
                    if u == 0 {
                        out.push('0');
                    } else if let Some(name) = symbol_at(u) {
                        let _ = write!(out, "&{name}");
                    } else {
                        let _ = write!(out, "{u:#x}");
                    }
                }
                _ => {
                    // Auto: an int held in a 64-bit register shows as 32-bit when it looks
                    // like a negative int; large magnitudes show in hex.
                    if size == 8 && u > 0xffff_0000 && u <= 0xffff_ffff {
                        let _ = write!(out, "{}", u as u32 as i32);
                        return;
                    }
                    let v = sign_extend(raw, size);
                    if !(-100_000..=100_000).contains(&v) {
                        let _ = write!(out, "{u:#x}");
                    } else {
                        let _ = write!(out, "{v}");
                    }
                }
            }
        }
        (ArgValue::Str(s), _) | (ArgValue::Bytes(s), _) => {
            escape_into(out, s);
        }
    }
}

/// Appends `a, b, c` for argument values.
pub fn push_args(
    out: &mut String,
    items: &[ArgItem],
    values: &[ArgValue],
    enums: &EnumScope,
    symbol_at: &mut dyn FnMut(u64) -> Option<String>,
) {
    for (i, (item, v)) in items.iter().zip(values).enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        push_value(out, item, v, enums, symbol_at);
    }
}

/// `value` as the replay-time `item` shows it: integers narrowed to the item's size, chars
/// and integers turned into each other.
fn adapt(value: &ArgValue, item: &ArgItem) -> ArgValue {
    match (value, &item.format) {
        (ArgValue::Int { raw, .. }, ArgFormat::Char) => ArgValue::Char(*raw as u8),
        (ArgValue::Char(c), f) if *f != ArgFormat::Char => ArgValue::Int {
            raw: u64::from(*c),
            size: 1,
        },
        (ArgValue::Int { raw, size }, _) => ArgValue::Int {
            raw: *raw,
            size: item.size.min(*size),
        },
        (v, _) => v.clone(),
    }
}

/// Appends what the decoded `values` of an ENTRY payload (`a, b, c`) or EXIT payload (the
/// return value) of a function with `spec` show, through its replay-time selection.
pub fn push_recorded(
    out: &mut String,
    spec: &FuncSpec,
    ret: bool,
    values: &[ArgValue],
    symbol_at: &mut dyn FnMut(u64) -> Option<String>,
) {
    let shown = if ret {
        spec.shown_ret
            .as_ref()
            .map(|s| s.iter().collect::<Vec<_>>())
    } else {
        spec.shown_args.as_ref().map(|s| s.iter().collect())
    };
    match shown {
        None if ret => {
            if let (Some(item), Some(v)) = (&spec.ret, values.first()) {
                push_value(out, item, v, &spec.enums, symbol_at);
            }
        }
        None => push_args(out, &spec.args, values, &spec.enums, symbol_at),
        Some(list) => {
            let mut first = true;
            for s in list {
                let Some(v) = values.get(s.index) else {
                    continue;
                };
                if !first {
                    out.push_str(", ");
                }
                first = false;
                push_value(out, &s.item, &adapt(v, &s.item), &spec.enums, symbol_at);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use record_format::argspec::parse_item;

    fn show(spec: &str, v: ArgValue) -> String {
        let item = parse_item(spec, 8).unwrap().unwrap();
        let mut s = String::new();
        push_value(&mut s, &item, &v, &EnumScope::default(), &mut |_| None);
        s
    }

    #[test]
    fn rendering() {
        let int = |raw| ArgValue::Int { raw, size: 8 };
        assert_eq!(show("arg1", int(5)), "5");
        assert_eq!(show("arg1", int((-2i64) as u64)), "-2");
        assert_eq!(show("arg1", int(0xffff_fffe)), "-2");
        assert_eq!(show("arg1", int(0x1bd5b7dde)), "0x1bd5b7dde");
        assert_eq!(show("arg1", int(100_001)), "0x186a1");
        assert_eq!(show("arg1/x", int(0)), "0");
        assert_eq!(show("arg1/o", int(1)), "01");
        assert_eq!(show("arg1/u", int(7)), "7");
        assert_eq!(
            show(
                "arg1/i32",
                ArgValue::Int {
                    raw: 0xffff_fffe,
                    size: 4
                }
            ),
            "-2"
        );
        assert_eq!(show("arg1/s", ArgValue::Str(b"a\nb".to_vec())), "\"a\\nb\"");
        assert_eq!(
            show("arg1/S", ArgValue::Str(b"hello".to_vec())),
            "\"hello\"s"
        );
        assert_eq!(show("arg1/c", ArgValue::Char(b'a')), "'a'");
        assert_eq!(show("fparg1", ArgValue::Float(1.5)), "1.500000");
        assert_eq!(show("arg1/p", int(0)), "0");
        assert_eq!(show("arg1/t0:tag", ArgValue::Bytes(vec![])), "tag{}");
        assert_eq!(show("arg1/t8:pt", ArgValue::Bytes(vec![0; 8])), "pt{...}");
        assert_eq!(
            show("arg1/t4:<lambda", ArgValue::Bytes(vec![0; 4])),
            "{...}"
        );
        // Without the function's module uftrace cannot look enums up.
        assert_eq!(show("arg1/e:color", int(3)), "<ENUM?> 3");
    }

    fn enum_text(def: &str, v: i64) -> String {
        let values = &record_format::dbg::parse_enums(def).unwrap()[0].1;
        let mut s = String::new();
        push_enum(&mut s, values, v);
        s
    }

    #[test]
    fn enums() {
        let prot = "enum prot {NONE, READ, WRITE, EXEC = 4}";
        assert_eq!(enum_text(prot, 2), "WRITE");
        assert_eq!(enum_text(prot, 3), "WRITE|READ");
        assert_eq!(enum_text(prot, 7), "EXEC|WRITE|READ");
        assert_eq!(enum_text("enum a {A=8,B=16}", 5), "5");
        assert_eq!(
            enum_text("enum a {A=8,B=16}", -200_000),
            "0xfffffffffffcf2c0"
        );
        assert_eq!(enum_text("enum a {A=1,B=2}", 5), "B|A+0x2");
        assert_eq!(enum_text("enum a {A,B=1,C}", 5), "C|B|A+0x2");
        assert_eq!(enum_text("enum u {X=100,Y=-23,Z}", 5), "Z|Y+0x32");
        assert_eq!(enum_text("enum u {X=100,Y=-23,Z}", -22), "Z");
        // Of equal values, the later definition is taken.
        assert_eq!(enum_text("enum d {A=1,B=1,C=5,D=5}", 5), "D");
    }
}
