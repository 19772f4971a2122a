//! Argument specs (`fib@arg1,arg2/s;half@fparg1`) and the payloads they describe.
//!
//! A payload has no length and no type tags: its layout is the spec's items in order, each at a
//! 4-byte aligned offset, the whole padded to 8 bytes. Integers are stored in their spec size,
//! `c` in 1 byte (+3), floats in 4/8/10 bytes, strings as `u16 len` + bytes, structs raw.

use crate::raw::align;

/// What an item holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ArgSlot {
    /// Integer-class argument N (1-based).
    Arg(u32),
    /// Floating-point argument N (1-based).
    FpArg(u32),
    Retval,
}

/// How an item is stored and displayed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ArgFormat {
    /// `d`: signed, shown in hex when large.
    Auto,
    Signed,
    Unsigned,
    Hex,
    Octal,
    Pointer,
    Char,
    Str,
    StdString,
    Float,
    Enum(String),
    Struct(Option<String>),
}

/// One item of a spec.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArgItem {
    pub slot: ArgSlot,
    pub format: ArgFormat,
    /// Bytes of the value (integers, floats, structs); unused for strings and chars.
    pub size: usize,
    /// The item as written, for messages and for writing the spec back.
    pub text: String,
}

impl ArgItem {
    /// Bytes the item occupies in a payload starting at `data` (strings read their length).
    fn stored_len(&self, data: &[u8]) -> Option<usize> {
        Some(match self.format {
            ArgFormat::Str | ArgFormat::StdString => {
                let len = u16::from_le_bytes([*data.first()?, *data.get(1)?]) as usize;
                align(2 + len, 4)
            }
            ArgFormat::Char => 4,
            _ => align(self.size, 4),
        })
    }
}

/// One `PATTERN@items` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArgSpec {
    pub pattern: String,
    /// `@MODULE` restriction (`PLT`, a library basename, `kernel`).
    pub module: Option<String>,
    pub items: Vec<ArgItem>,
}

/// Why an item was rejected (the caller prints uftrace's `Usage:` line).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ItemError {
    UnsupportedType(String),
    UnsupportedSize(String),
    Invalid(String),
}

impl std::fmt::Display for ItemError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ItemError::UnsupportedType(s) => write!(f, "unsupported argument type: {s}"),
            ItemError::UnsupportedSize(s) => write!(f, "unsupported argument size: {s}"),
            ItemError::Invalid(s) => write!(f, "skipping invalid argument: {s}"),
        }
    }
}

/// Parses one item such as `arg2/x32`, `fparg1/32`, `retval/f`, `arg1/e:color`, `arg1%rsi`.
/// Returns `Ok(None)` when the word is not an argument item (a module name or trigger action).
pub fn parse_item(word: &str, long_size: usize) -> Result<Option<ArgItem>, ItemError> {
    let text = word.to_string();
    // Drop the location (`%rdi`, `%stack+1`): it does not change the layout.
    let core = match word.find('%') {
        Some(i) => &word[..i],
        None => word,
    };
    let (head, fmt) = match core.split_once('/') {
        Some((h, f)) => (h, Some(f)),
        None => (core, None),
    };
    let slot = if let Some(n) = head.strip_prefix("fparg") {
        ArgSlot::FpArg(
            n.parse()
                .ok()
                .filter(|&n| n > 0)
                .ok_or(ItemError::Invalid(text.clone()))?,
        )
    } else if let Some(n) = head.strip_prefix("arg") {
        ArgSlot::Arg(
            n.parse()
                .ok()
                .filter(|&n| n > 0)
                .ok_or(ItemError::Invalid(text.clone()))?,
        )
    } else if head == "retval" {
        ArgSlot::Retval
    } else {
        return Ok(None);
    };
    let is_fp = matches!(slot, ArgSlot::FpArg(_));
    let size_of = |bits: &str, allowed: &[usize]| -> Result<usize, ItemError> {
        let b: usize = bits
            .parse()
            .map_err(|_| ItemError::UnsupportedSize(text.clone()))?;
        if allowed.contains(&b) {
            Ok(if b == 80 { 10 } else { b / 8 })
        } else {
            Err(ItemError::UnsupportedSize(text.clone()))
        }
    };
    let (format, size) = match fmt {
        None if is_fp => (ArgFormat::Float, 8),
        None => (ArgFormat::Auto, long_size),
        Some(f) if is_fp || f.starts_with('f') => {
            let bits = f.strip_prefix('f').unwrap_or(f);
            if !is_fp && !f.starts_with('f') {
                return Err(ItemError::UnsupportedType(text));
            }
            let size = if bits.is_empty() {
                8
            } else {
                size_of(bits, &[32, 64, 80])?
            };
            (ArgFormat::Float, size)
        }
        Some(f) => {
            let mut chars = f.chars();
            let c = chars
                .next()
                .ok_or(ItemError::UnsupportedType(text.clone()))?;
            let rest = chars.as_str();
            let int = |fmt: ArgFormat| -> Result<(ArgFormat, usize), ItemError> {
                let size = if rest.is_empty() {
                    long_size
                } else {
                    size_of(rest, &[8, 16, 32, 64])?
                };
                Ok((fmt, size))
            };
            match c {
                'd' => int(ArgFormat::Auto)?,
                'i' => int(ArgFormat::Signed)?,
                'u' => int(ArgFormat::Unsigned)?,
                'x' => int(ArgFormat::Hex)?,
                'o' => int(ArgFormat::Octal)?,
                'p' => int(ArgFormat::Pointer)?,
                'c' if rest.is_empty() => (ArgFormat::Char, 1),
                's' if rest.is_empty() => (ArgFormat::Str, 0),
                'S' if rest.is_empty() => (ArgFormat::StdString, 0),
                'e' => {
                    let name = rest.strip_prefix(':').filter(|n| !n.is_empty());
                    let name = name.ok_or(ItemError::Invalid(text.clone()))?;
                    (ArgFormat::Enum(name.to_string()), long_size)
                }
                't' => {
                    let (n, ty) = match rest.split_once(':') {
                        Some((n, t)) => (n, Some(t.to_string())),
                        None => (rest, None),
                    };
                    // A payload never exceeds a u16 length; larger sizes are corrupt specs.
                    let n: usize = n
                        .parse()
                        .ok()
                        .filter(|&n| n <= 4096)
                        .ok_or(ItemError::Invalid(text.clone()))?;
                    (ArgFormat::Struct(ty), n)
                }
                _ => return Err(ItemError::UnsupportedType(text)),
            }
        }
    };
    Ok(Some(ArgItem {
        slot,
        format,
        size,
        text,
    }))
}

/// Parses a `;`-separated spec list. Items that fail are reported through `warn` and dropped;
/// entries left without items are kept (the pattern may still select auto-args).
pub fn parse_spec_list(
    list: &str,
    long_size: usize,
    mut warn: impl FnMut(ItemError),
) -> Vec<ArgSpec> {
    let mut out = Vec::new();
    for entry in list.split(';').filter(|e| !e.trim().is_empty()) {
        let (pattern, items) = match entry.split_once('@') {
            Some((p, i)) => (p, i),
            None => (entry, ""),
        };
        let mut spec = ArgSpec {
            pattern: pattern.to_string(),
            module: None,
            items: Vec::new(),
        };
        for word in items.split(',').filter(|w| !w.is_empty()) {
            match parse_item(word, long_size) {
                Ok(Some(item)) => spec.items.push(item),
                Ok(None) => {
                    if spec.module.is_none() {
                        spec.module = Some(word.to_string());
                    }
                }
                Err(e) => warn(e),
            }
        }
        out.push(spec);
    }
    out
}

/// Which items a spec list contributes: uftrace reads `argspec` for arguments and `retspec`
/// for return values, ignoring the other kind in each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ItemKind {
    Args,
    Ret,
}

impl ItemKind {
    /// The kind of an item word (`arg2/s`, `fparg1`, `retval/x`), `None` for other words
    /// (a module restriction).
    pub fn of_word(word: &str) -> Option<ItemKind> {
        let starts = |p: &str| {
            word.get(..p.len())
                .is_some_and(|w| w.eq_ignore_ascii_case(p))
        };
        if starts("arg") || starts("fparg") {
            Some(ItemKind::Args)
        } else if starts("retval") {
            Some(ItemKind::Ret)
        } else {
            None
        }
    }
}

/// Items before the first one that does not parse, and why it does not.
pub type ItemsError = (Vec<ArgItem>, ItemError);

/// The items of `kind` in `items` (`arg1,arg2/s,libfoo`), and the first other word (a module
/// restriction).
pub fn items_of_kind(
    items: &str,
    kind: ItemKind,
    long_size: usize,
) -> Result<(Vec<ArgItem>, Option<&str>), ItemsError> {
    let mut out = Vec::new();
    let mut module = None;
    for word in items.split(',').filter(|w| !w.is_empty()) {
        match ItemKind::of_word(word) {
            Some(k) if k == kind => match parse_item(word, long_size) {
                Ok(Some(item)) => out.push(item),
                Ok(None) => {}
                Err(e) => return Err((out, e)),
            },
            Some(_) => {}
            None => {
                module.get_or_insert(word);
            }
        }
    }
    Ok((out, module))
}

/// One function's items, gathered from every spec entry that names it the way uftrace's
/// reader does: items keep the position of their first appearance; a later item for the same
/// argument replaces the format, except that a regex match never overrides an exact one. The
/// runtime that writes payloads and the reader that splits them both use it, so that they
/// agree on the layout.
#[derive(Debug, Clone, Default)]
pub struct ItemSet {
    items: Vec<(ArgItem, bool)>,
}

impl ItemSet {
    /// Adds the items of an entry whose pattern is a plain name (`exact`) or a regex/glob.
    pub fn add(&mut self, new: &[ArgItem], exact: bool) {
        for it in new {
            match self.items.iter_mut().find(|(o, _)| o.slot == it.slot) {
                Some(old) if exact || !old.1 => *old = (it.clone(), exact),
                Some(_) => {}
                None => self.items.push((it.clone(), exact)),
            }
        }
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// The ENTRY items in payload order, and the EXIT item.
    pub fn into_parts(self) -> (Vec<ArgItem>, Option<ArgItem>) {
        let mut args = Vec::new();
        let mut ret = None;
        for (it, _) in self.items {
            if it.slot == ArgSlot::Retval {
                ret.get_or_insert(it);
            } else {
                args.push(it);
            }
        }
        (args, ret)
    }
}

/// Where the runtime reads an item (the `%LOC` suffix, or the SysV default for its slot).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Location {
    /// Integer argument register, 0 = `rdi` … 5 = `r9`.
    Reg(u8),
    /// Two integer registers holding a small struct (`%rdi+rsi`).
    RegPair(u8, u8),
    /// `xmm0` … `xmm7`.
    Xmm(u8),
    /// The N-th 8-byte word above the return address (`%stack+N`; 1 = the first stack
    /// argument).
    Stack(u32),
    /// The return value (`rax`, `xmm0`).
    Return,
}

const INT_REGS: [&str; 6] = ["rdi", "rsi", "rdx", "rcx", "r8", "r9"];

fn int_reg(name: &str) -> Option<u8> {
    INT_REGS
        .iter()
        .position(|r| r.eq_ignore_ascii_case(name))
        .map(|i| i as u8)
}

impl ArgItem {
    /// Where the value of this item is found on x86-64. Integer arguments 7 and up are on the
    /// stack; floating-point arguments past `xmm7` have no default location (`None`).
    pub fn location(&self) -> Option<Location> {
        if let Some((_, loc)) = self.text.split_once('%') {
            let loc = loc.trim();
            if let Some(n) = loc
                .strip_prefix("stack+")
                .or_else(|| loc.strip_prefix("STACK+"))
            {
                return n.parse().ok().filter(|&n| n > 0).map(Location::Stack);
            }
            if let Some((a, b)) = loc.split_once('+') {
                return Some(Location::RegPair(int_reg(a)?, int_reg(b)?));
            }
            if let Some(n) = loc.strip_prefix("xmm").or_else(|| loc.strip_prefix("XMM")) {
                return n.parse().ok().filter(|&n| n < 8).map(Location::Xmm);
            }
            return int_reg(loc).map(Location::Reg);
        }
        match self.slot {
            ArgSlot::Retval => Some(Location::Return),
            ArgSlot::Arg(n @ 1..=6) => Some(Location::Reg((n - 1) as u8)),
            ArgSlot::Arg(n) => Some(Location::Stack(n - 6)),
            ArgSlot::FpArg(n @ 1..=8) => Some(Location::Xmm((n - 1) as u8)),
            ArgSlot::FpArg(_) => None,
        }
    }

    /// Most bytes the item can take in a payload (strings at their longest).
    pub fn max_len(&self) -> usize {
        match self.format {
            ArgFormat::Str | ArgFormat::StdString => align(2 + MAX_STR, 4),
            ArgFormat::Char => 4,
            _ => align(self.size, 4),
        }
    }
}

/// Longest string stored: longer ones keep their first 95 bytes and `...`.
pub const MAX_STR: usize = 98;

/// A decoded payload item.
#[derive(Debug, Clone, PartialEq)]
pub enum ArgValue {
    Int {
        raw: u64,
        size: usize,
    },
    Float(f64),
    /// A long double (80-bit) converted to f64.
    LongDouble(f64),
    Char(u8),
    Str(Vec<u8>),
    Bytes(Vec<u8>),
}

/// Splits a payload into values, one per item. Returns `None` when the payload is too short.
pub fn decode_payload(items: &[&ArgItem], payload: &[u8]) -> Option<Vec<ArgValue>> {
    let mut pos = 0;
    let mut out = Vec::with_capacity(items.len());
    for item in items {
        let data = payload.get(pos..)?;
        let len = item.stored_len(data)?;
        let data = data.get(..len)?;
        let v = match &item.format {
            ArgFormat::Str | ArgFormat::StdString => {
                let n = u16::from_le_bytes([data[0], data[1]]) as usize;
                ArgValue::Str(data.get(2..2 + n)?.to_vec())
            }
            ArgFormat::Char => ArgValue::Char(data[0]),
            ArgFormat::Float => match item.size {
                4 => ArgValue::Float(f64::from(f32::from_le_bytes(data[..4].try_into().ok()?))),
                10 => ArgValue::LongDouble(f80_to_f64(data[..10].try_into().ok()?)),
                _ => ArgValue::Float(f64::from_le_bytes(data[..8].try_into().ok()?)),
            },
            ArgFormat::Struct(_) => ArgValue::Bytes(data[..item.size].to_vec()),
            _ => {
                let mut buf = [0u8; 8];
                let n = item.size.min(8);
                buf[..n].copy_from_slice(&data[..n]);
                ArgValue::Int {
                    raw: u64::from_le_bytes(buf),
                    size: n,
                }
            }
        };
        out.push(v);
        pos += len;
    }
    Some(out)
}

/// Total payload bytes for the given items (including the final 8-byte padding); `None` when
/// `payload` is shorter than that.
pub fn payload_len(items: &[&ArgItem], payload: &[u8]) -> Option<usize> {
    let mut pos = 0;
    for item in items {
        pos += item.stored_len(payload.get(pos..)?)?;
    }
    let total = align(pos, 8);
    (total <= payload.len()).then_some(total)
}

/// Encodes values for items (the writer side). Strings longer than 98 bytes are cut as
/// libmcount does (95 bytes + `...`).
pub fn encode_payload(items: &[&ArgItem], values: &[ArgValue], out: &mut Vec<u8>) {
    let start = out.len();
    for (item, v) in items.iter().zip(values) {
        let at = out.len();
        match v {
            ArgValue::Str(s) => {
                let mut s = s.clone();
                if s.len() > 98 {
                    s.truncate(95);
                    s.extend_from_slice(b"...");
                }
                out.extend_from_slice(&(s.len() as u16).to_le_bytes());
                out.extend_from_slice(&s);
            }
            ArgValue::Char(c) => out.push(*c),
            ArgValue::Float(f) if item.size == 4 => {
                out.extend_from_slice(&(*f as f32).to_le_bytes())
            }
            ArgValue::Float(f) | ArgValue::LongDouble(f) if item.size == 10 => {
                out.extend_from_slice(&f64_to_f80(*f))
            }
            ArgValue::Float(f) | ArgValue::LongDouble(f) => out.extend_from_slice(&f.to_le_bytes()),
            ArgValue::Int { raw, .. } => {
                out.extend_from_slice(&raw.to_le_bytes()[..item.size.min(8)])
            }
            ArgValue::Bytes(b) => out.extend_from_slice(b),
        }
        let used = out.len() - at;
        let want = match item.format {
            ArgFormat::Str | ArgFormat::StdString => align(used, 4),
            ArgFormat::Char => 4,
            _ => align(item.size, 4),
        };
        out.resize(at + want, 0);
    }
    let total = align(out.len() - start, 8);
    out.resize(start + total, 0);
}

/// Converts an f64 to the x87 80-bit extended format.
fn f64_to_f80(f: f64) -> [u8; 10] {
    let bits = f.to_bits();
    let sign = ((bits >> 63) as u16) << 15;
    let exp = ((bits >> 52) & 0x7ff) as i32;
    let frac = bits & ((1 << 52) - 1);
    let (e, mant) = match exp {
        0 if frac == 0 => (0u16, 0u64),
        0 => {
            // Subnormal: normalise the fraction.
            let shift = frac.leading_zeros() - 11;
            (
                (1 - 1023 + 16383 - shift as i32) as u16,
                frac << (11 + shift),
            )
        }
        0x7ff => (0x7fff, (1 << 63) | (frac << 11)),
        _ => ((exp - 1023 + 16383) as u16, (1 << 63) | (frac << 11)),
    };
    let mut out = [0u8; 10];
    out[..8].copy_from_slice(&mant.to_le_bytes());
    out[8..].copy_from_slice(&(sign | e).to_le_bytes());
    out
}

/// Converts an x87 80-bit extended float to f64 (enough precision for display).
fn f80_to_f64(b: [u8; 10]) -> f64 {
    let mant = u64::from_le_bytes(b[..8].try_into().unwrap_or([0; 8]));
    let se = u16::from_le_bytes([b[8], b[9]]);
    let sign = if se & 0x8000 != 0 { -1.0 } else { 1.0 };
    let exp = i32::from(se & 0x7fff);
    if exp == 0 && mant == 0 {
        return 0.0 * sign;
    }
    if exp == 0x7fff {
        return if mant << 1 == 0 {
            sign * f64::INFINITY
        } else {
            f64::NAN
        };
    }
    let e = exp - 16383 + 1023;
    if (1..2047).contains(&e) {
        let bits = ((se as u64 & 0x8000) << 48) | ((e as u64) << 52) | ((mant << 1) >> 12);
        return f64::from_bits(bits);
    }
    // Outside f64's normal range: scale in two steps to avoid an early underflow.
    sign * (mant as f64 / 2f64.powi(63)) * 2f64.powi(exp - 16383)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_items() {
        let p = |w| parse_item(w, 8).unwrap().unwrap();
        assert_eq!(p("arg1").size, 8);
        assert_eq!(p("arg2/x32").format, ArgFormat::Hex);
        assert_eq!(p("arg2/x32").size, 4);
        assert_eq!(p("fparg1").format, ArgFormat::Float);
        assert_eq!(p("fparg1/32").size, 4);
        assert_eq!(p("retval/f").size, 8);
        assert_eq!(p("retval/f32").size, 4);
        assert_eq!(p("arg1/e:color").format, ArgFormat::Enum("color".into()));
        assert_eq!(p("arg1/t16:pt%RDI+RSI").size, 16);
        assert_eq!(p("arg1%rsi").slot, ArgSlot::Arg(1));
        assert!(parse_item("PLT", 8).unwrap().is_none());
        assert!(matches!(
            parse_item("arg1/q", 8),
            Err(ItemError::UnsupportedType(_))
        ));
        assert!(matches!(
            parse_item("arg1/i12", 8),
            Err(ItemError::UnsupportedSize(_))
        ));
    }

    #[test]
    fn spec_list_with_module() {
        let specs = parse_spec_list("fib@arg1;slen@arg1/s;b@abc,arg1", 8, |_| {});
        assert_eq!(specs.len(), 3);
        assert_eq!(specs[2].module.as_deref(), Some("abc"));
        assert_eq!(specs[2].items.len(), 1);
    }

    #[test]
    fn payload_round_trip() {
        let specs = parse_spec_list("f@arg1/s,arg2/c,fparg1,arg3/i32,fparg2/32", 8, |_| {});
        let items: Vec<&ArgItem> = specs[0].items.iter().collect();
        let values = vec![
            ArgValue::Str(b"hello world".to_vec()),
            ArgValue::Char(b'z'),
            ArgValue::Float(3.0),
            ArgValue::Int {
                raw: 0xffff_fffe,
                size: 4,
            },
            ArgValue::Float(1.5),
        ];
        let mut buf = Vec::new();
        encode_payload(&items, &values, &mut buf);
        assert_eq!(&buf[..16], b"\x0b\x00hello world\x00\x00\x00");
        assert_eq!(buf.len() % 8, 0);
        assert_eq!(payload_len(&items, &buf), Some(buf.len()));
        assert_eq!(decode_payload(&items, &buf).unwrap(), values);
    }

    #[test]
    fn long_double() {
        // 1.5 as x87 extended: mantissa 0xC000000000000000, exponent 16383.
        let mut b = [0u8; 10];
        b[..8].copy_from_slice(&0xC000_0000_0000_0000u64.to_le_bytes());
        b[8..].copy_from_slice(&16383u16.to_le_bytes());
        assert_eq!(f80_to_f64(b), 1.5);
        assert_eq!(f64_to_f80(1.5), b);
        assert_eq!(f80_to_f64(f64_to_f80(-3.25e-300)), -3.25e-300);
    }
}
