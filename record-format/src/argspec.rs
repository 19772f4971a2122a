//! Argument specs (`fib@arg1,arg2/s;half@fparg1`) and the payloads they describe.
//!
//! A payload has no length and no type tags: its layout is the spec's items in order, each at a
//! 4-byte aligned offset, the whole padded to 8 bytes. Integers are stored in their spec size,
//! `c` in 1 byte (+3), floats in 4/8/10 bytes, strings as `u16 len` + bytes, structs raw.

use crate::raw::align;

mod location;
mod payload;

pub use location::{locations, Location, Register};
pub use payload::{decode_payload, encode_payload, payload_len, ArgValue};

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
    /// Most bytes the item can take in a payload (strings at their longest).
    pub fn max_len(&self) -> usize {
        match self.format {
            ArgFormat::Str | ArgFormat::StdString => align(2 + MAX_STR, 4),
            ArgFormat::Char => 4,
            _ => align(self.size, 4),
        }
    }

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
    /// A location naming no argument register (uftrace's message).
    UnknownRegister(String),
    /// `%stack…` without a positive word number.
    BadStackOffset(String),
    /// A location that cannot hold the value (a long double in a register, a large struct in
    /// an SSE register).
    Unreadable(String),
}

impl std::fmt::Display for ItemError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ItemError::UnsupportedType(s) => write!(f, "unsupported argument type: {s}"),
            ItemError::UnsupportedSize(s) => write!(f, "unsupported argument size: {s}"),
            ItemError::Invalid(s) => write!(f, "skipping invalid argument: {s}"),
            ItemError::UnknownRegister(s) => write!(f, "unknown register name: {s}"),
            ItemError::BadStackOffset(s) => write!(f, "invalid stack offset: {s}"),
            ItemError::Unreadable(s) => write!(f, "unsupported argument location: {s}"),
        }
    }
}

/// Parses one item such as `arg2/x32`, `fparg1/32`, `retval/f`, `arg1/e:color`, `arg1%rsi`.
/// Returns `Ok(None)` when the word is not an argument item (a module name or trigger action).
pub fn parse_item(word: &str, long_size: usize) -> Result<Option<ArgItem>, ItemError> {
    let text = word.to_string();
    // The location (`%rdi`, `%stack+1`) does not change the layout; only its syntax is
    // checked, at the end.
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
    location::check_syntax(word, matches!(format, ArgFormat::Struct(_)))?;
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

/// Longest string stored: longer ones keep their first 95 bytes and `...`.
pub const MAX_STR: usize = 98;

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
}
