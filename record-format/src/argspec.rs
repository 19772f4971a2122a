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
    check_location_syntax(word, matches!(format, ArgFormat::Struct(_)))?;
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

/// A register named by a location: an integer argument register or an SSE register.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Register {
    /// 0 = `rdi` … 5 = `r9`.
    Int(u8),
    /// `xmm0` … `xmm7`.
    Xmm(u8),
}

impl Register {
    /// A register name in any case: `rdi rsi rdx rcx r8 r9`, `xmm0` … `xmm7`.
    pub fn parse(name: &str) -> Option<Register> {
        if let Some(i) = INT_REGS.iter().position(|r| r.eq_ignore_ascii_case(name)) {
            return Some(Register::Int(i as u8));
        }
        let n = name
            .get(3..)
            .filter(|_| name[..3].eq_ignore_ascii_case("xmm"))?;
        match n.as_bytes() {
            [d @ b'0'..=b'7'] => Some(Register::Xmm(d - b'0')),
            _ => None,
        }
    }
}

/// Where the runtime reads an item: the `%LOC` suffix, or the SysV default ([`locations`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Location {
    /// Integer argument register, 0 = `rdi` … 5 = `r9`. A struct of more than 8 bytes in one
    /// register (`/t24%RDI`) was passed by invisible reference: the register holds its address.
    Reg(u8),
    /// `xmm0` … `xmm7` (the low 8 bytes for floats and integers, 16 for structs).
    Xmm(u8),
    /// A small struct in two registers (`%RDI+RSI`, `%RDI+XMM0`, `%XMM0+RDI`, `%XMM0+XMM1`):
    /// the first eightbyte in the first, the rest in the second.
    RegPair(Register, Register),
    /// The N-th 8-byte word above the return address (`%stack+N`, also spelled `%stackN`;
    /// 1 = the first stack argument).
    Stack(u32),
    /// The return value (`rax`/`rdx`, `xmm0`, x87 `st(0)` for `f80`).
    Return,
}

impl Location {
    fn single(r: Register) -> Location {
        match r {
            Register::Int(i) => Location::Reg(i),
            Register::Xmm(x) => Location::Xmm(x),
        }
    }
}

const INT_REGS: [&str; 6] = ["rdi", "rsi", "rdx", "rcx", "r8", "r9"];

/// The location text of an item word (after `%`), trimmed; `None` without one.
fn location_text(word: &str) -> Option<&str> {
    word.split_once('%').map(|(_, loc)| loc.trim())
}

/// Whether a location text is a stack offset as uftrace's parser sees one (`stack` first).
fn is_stack_text(loc: &str) -> bool {
    loc.starts_with("stack")
}

/// What the layout parser accepts as a location (as uftrace 0.13 does, so that both read the
/// same `info`): a stack offset in any spelling, any text for structs, else one register name.
fn check_location_syntax(word: &str, is_struct: bool) -> Result<(), ItemError> {
    match location_text(word) {
        None => Ok(()),
        Some(loc) if is_stack_text(loc) || is_struct => Ok(()),
        Some(loc) => match Register::parse(loc) {
            Some(_) => Ok(()),
            None => Err(ItemError::UnknownRegister(word.to_string())),
        },
    }
}

/// A stack offset text (`stack+2`, `stack2`, `stack + 2`): the word number, at least 1.
fn stack_offset(loc: &str) -> Option<u32> {
    let n = loc.strip_prefix("stack")?.trim_start();
    let n = n.strip_prefix('+').unwrap_or(n).trim_start();
    n.parse().ok().filter(|&n| n > 0)
}

impl ArgItem {
    fn is_struct(&self) -> bool {
        matches!(self.format, ArgFormat::Struct(_))
    }

    fn is_long_double(&self) -> bool {
        self.format == ArgFormat::Float && self.size == 10
    }

    /// The explicit location (`%LOC`), `Ok(None)` without one; an error for a location the
    /// runtime cannot read (see [`ArgItem::location_error`]).
    pub fn explicit_location(&self) -> Result<Option<Location>, ItemError> {
        let Some(loc) = location_text(&self.text) else {
            return Ok(None);
        };
        let bad = |e: fn(String) -> ItemError| Err(e(self.text.clone()));
        if self.slot == ArgSlot::Retval {
            // uftrace ignores a return value's location (the ABI fixes it).
            return Ok(Some(Location::Return));
        }
        let found = if is_stack_text(loc) {
            match stack_offset(loc) {
                Some(n) => Location::Stack(n),
                None => return bad(ItemError::BadStackOffset),
            }
        } else if let Some((a, b)) = loc.split_once('+') {
            match (Register::parse(a.trim()), Register::parse(b.trim())) {
                (Some(a), Some(b)) if self.is_struct() => Location::RegPair(a, b),
                _ => return bad(ItemError::UnknownRegister),
            }
        } else {
            match Register::parse(loc) {
                Some(r) => Location::single(r),
                None => return bad(ItemError::UnknownRegister),
            }
        };
        match found {
            // A long double never travels in a register.
            Location::Reg(_) | Location::Xmm(_) | Location::RegPair(..)
                if self.is_long_double() =>
            {
                bad(ItemError::Unreadable)
            }
            // More than a register pair holds, and not an address (only integer registers
            // carry one).
            Location::Xmm(_) | Location::RegPair(..) if self.is_struct() && self.size > 16 => {
                bad(ItemError::Unreadable)
            }
            l => Ok(Some(l)),
        }
    }

    /// Why the runtime could not read this item where its spec says (an unknown register in
    /// a struct's location, a stack offset that is not a positive number, a long double in a
    /// register): the recorder rejects such items instead of recording zeros.
    pub fn location_error(&self) -> Option<ItemError> {
        self.explicit_location().err()
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

/// Where the runtime reads each of a function's argument items (`items`: the ENTRY items in
/// payload order); `None` for an item whose location the recorder rejects.
///
/// An explicit `%LOC` wins. Without one, the SysV x86-64 convention is applied to what the
/// spec tells of the function, taking its items to come in declaration order (the `.dbg`
/// lines and prototypes do):
/// - `argN`, N ≤ 6: the N-th integer register;
/// - `fpargN` other than `/80`: `xmm(N-1-L)`, where L counts the `/80` items of the spec
///   with a smaller N (a long double takes no SSE register); past `xmm7`, the stack;
/// - stack words go out in spec order. `argN` with N > 6 is word `N-6` plus the words that
///   earlier non-integer stack items took; `fpargN/80` takes two words from the next free one
///   aligned to 16 bytes (an odd word number), so `ldmul(long double, long double)` has
///   `fparg1/80` at `%stack+1` and `fparg2/80` at `%stack+3`; a double past `xmm7` takes the
///   next free word, a struct `/tN` of more than 16 bytes the next N/8 (rounded up).
///   Explicit `%stack+N` items take their words too, so a default after them follows them.
pub fn locations(items: &[ArgItem]) -> Vec<Option<Location>> {
    let mut stack = StackWords { next: 1, extra: 0 };
    items
        .iter()
        .map(|it| {
            let words = it.size.div_ceil(8).max(1) as u32;
            let in_memory = it.is_struct() && it.size > 16;
            match it.explicit_location().ok()? {
                Some(Location::Stack(k)) => {
                    let int = matches!(it.slot, ArgSlot::Arg(_)) && !in_memory;
                    Some(stack.take(k, words, int))
                }
                Some(l) => Some(l),
                None => Some(match it.slot {
                    ArgSlot::Retval => Location::Return,
                    ArgSlot::Arg(n @ 1..=6) if !in_memory => Location::Reg((n - 1) as u8),
                    ArgSlot::Arg(_) if in_memory => stack.take(stack.next, words, false),
                    ArgSlot::Arg(n) => stack.take((n - 6).saturating_add(stack.extra), words, true),
                    ArgSlot::FpArg(_) if it.is_long_double() => {
                        stack.take(stack.next | 1, 2, false)
                    }
                    ArgSlot::FpArg(n) => {
                        let before = items
                            .iter()
                            .filter(|o| {
                                o.is_long_double() && matches!(o.slot, ArgSlot::FpArg(m) if m < n)
                            })
                            .count() as u32;
                        match n - 1 - before.min(n - 1) {
                            x @ 0..=7 => Location::Xmm(x as u8),
                            _ => stack.take(stack.next, 1, false),
                        }
                    }
                }),
            }
        })
        .collect()
}

/// The stack words [`locations`] has given out.
struct StackWords {
    /// The first word no item has taken yet.
    next: u32,
    /// Words taken by non-integer stack items: integer argument N > 6 moves up by those.
    extra: u32,
}

impl StackWords {
    /// Words `k .. k + words` taken by an item (`int`: an integer argument).
    fn take(&mut self, k: u32, words: u32, int: bool) -> Location {
        let end = k.saturating_add(words);
        if !int {
            self.extra = self.extra.saturating_add(end.saturating_sub(self.next));
        }
        self.next = self.next.max(end);
        Location::Stack(k)
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
    fn register_names_in_any_case() {
        assert_eq!(Register::parse("RDI"), Some(Register::Int(0)));
        assert_eq!(Register::parse("Rsi"), Some(Register::Int(1)));
        assert_eq!(Register::parse("r9"), Some(Register::Int(5)));
        assert_eq!(Register::parse("XMM0"), Some(Register::Xmm(0)));
        assert_eq!(Register::parse("xmm7"), Some(Register::Xmm(7)));
        for bad in ["rax", "xmm8", "xmm08", "xmm", "r0", "", "stack+1"] {
            assert_eq!(Register::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn explicit_locations() {
        let loc = |w| parse_item(w, 8).unwrap().unwrap().explicit_location();
        use Location::*;
        use Register::{Int, Xmm as X};
        assert_eq!(loc("arg7%stack1"), Ok(Some(Stack(1))));
        assert_eq!(loc("arg8%stack+2"), Ok(Some(Stack(2))));
        assert_eq!(loc("arg9/i32%stack + 3"), Ok(Some(Stack(3))));
        assert_eq!(loc("arg1%RDI"), Ok(Some(Reg(0))));
        assert_eq!(loc("arg3%Rcx"), Ok(Some(Reg(3))));
        assert_eq!(loc("arg1%xmm0"), Ok(Some(Xmm(0))));
        assert_eq!(loc("fparg1%XMM3"), Ok(Some(Xmm(3))));
        assert_eq!(loc("fparg1/80%stack+1"), Ok(Some(Stack(1))));
        assert_eq!(loc("arg1"), Ok(None));
        let pair = |a, b| Ok(Some(RegPair(a, b)));
        assert_eq!(loc("arg1/t16:ld%RDI+XMM0"), pair(Int(0), X(0)));
        assert_eq!(loc("arg1/t16:dl%XMM0+RDI"), pair(X(0), Int(0)));
        assert_eq!(loc("arg1/t16:dd%XMM0+XMM1"), pair(X(0), X(1)));
        assert_eq!(loc("arg1/t12:i3%RDI+RSI"), pair(Int(0), Int(1)));
        assert_eq!(loc("arg1/t24:vector%RDI"), Ok(Some(Reg(0))));
        assert_eq!(loc("arg1/S%RDI"), Ok(Some(Reg(0))));
        // uftrace ignores a return value's location.
        assert_eq!(loc("retval/i32%RDI"), Ok(Some(Return)));
    }

    #[test]
    fn locations_uftrace_rejects_or_we_cannot_read() {
        // Rejected by the layout parser, as uftrace's parser rejects them.
        for w in [
            "arg1%rax",
            "arg1%",
            "arg1%r0",
            "arg1%rdi+rsi",
            "arg7%STACK+1",
            "retval%rax",
        ] {
            assert!(
                matches!(parse_item(w, 8), Err(ItemError::UnknownRegister(_))),
                "{w}"
            );
        }
        // Read by the layout parser (uftrace records them: its data must replay), refused by
        // the recorder.
        let err = |w| parse_item(w, 8).unwrap().unwrap().location_error();
        for w in [
            "arg1%stack0",
            "arg1%stack",
            "arg1%stack-1",
            "arg1%stack+1+2",
            "arg1%stackx",
        ] {
            assert!(matches!(err(w), Some(ItemError::BadStackOffset(_))), "{w}");
        }
        for w in ["arg1/t16:s%foo", "arg1/t16:s%rdi+rax", "arg1/t8%rax"] {
            assert!(matches!(err(w), Some(ItemError::UnknownRegister(_))), "{w}");
        }
        for w in [
            "fparg1/80%xmm0",
            "fparg1/80%rdi",
            "arg1/t24:s%XMM0",
            "arg1/t24%RDI+RSI",
        ] {
            assert!(matches!(err(w), Some(ItemError::Unreadable(_))), "{w}");
        }
        assert_eq!(err("arg1/t24:vector%RDI"), None);
    }

    #[test]
    fn default_locations_follow_the_convention() {
        let locs = |list: &str| {
            let spec = parse_spec_list(&format!("f@{list}"), 8, |e| panic!("{e}"));
            locations(&spec[0].items)
                .into_iter()
                .map(|l| l.unwrap())
                .collect::<Vec<_>>()
        };
        use Location::*;
        assert_eq!(
            locs("arg1,arg6,arg7,arg8/i32"),
            [Reg(0), Reg(5), Stack(1), Stack(2)]
        );
        assert_eq!(locs("arg8,arg7"), [Stack(2), Stack(1)]);
        // ldmul(long double, long double)
        assert_eq!(locs("fparg1/80,fparg2/80"), [Stack(1), Stack(3)]);
        // ld_after(7 longs, long double): aligned past the seventh.
        assert_eq!(locs("arg1,arg7,fparg1/80"), [Reg(0), Stack(1), Stack(3)]);
        // ld_mixed(int, long double, double, long double): the double is in xmm0.
        assert_eq!(
            locs("arg1,fparg1/80,fparg2,fparg3/80"),
            [Reg(0), Stack(1), Xmm(0), Stack(3)]
        );
        // (6 longs, long double, long): the seventh integer after the long double.
        assert_eq!(locs("fparg1/80,arg7"), [Stack(1), Stack(3)]);
        assert_eq!(locs("fparg1/80%stack+1,arg7"), [Stack(1), Stack(3)]);
        assert_eq!(locs("arg7,fparg1/80,arg8"), [Stack(1), Stack(3), Stack(5)]);
        assert_eq!(
            locs("fparg8,fparg9,fparg10/32"),
            [Xmm(7), Stack(1), Stack(2)]
        );
        assert_eq!(locs("arg1/t24:big,arg2"), [Stack(1), Reg(1)]);
        assert_eq!(locs("arg1/t16:ld%RDI+XMM0,retval/f80").len(), 2);
    }

    #[test]
    fn long_double_payloads() {
        let specs = parse_spec_list("f@fparg1/80%stack+1,arg1/i32,fparg2/80", 8, |_| {});
        let items: Vec<&ArgItem> = specs[0].items.iter().collect();
        // 6.0: mantissa 0xC000000000000000, exponent 16385; then 2 bytes of padding.
        let mut six = 0xC000_0000_0000_0000u64.to_le_bytes().to_vec();
        six.extend_from_slice(&16385u16.to_le_bytes());
        let mut payload = six.clone();
        payload.extend_from_slice(&[0, 0, 7, 0, 0, 0]);
        payload.extend_from_slice(&f64_to_f80(-1.5));
        payload.extend_from_slice(&[0; 6]);
        assert_eq!(payload_len(&items, &payload), Some(32));
        let want = vec![
            ArgValue::LongDouble(6.0),
            ArgValue::Int { raw: 7, size: 4 },
            ArgValue::LongDouble(-1.5),
        ];
        assert_eq!(decode_payload(&items, &payload).unwrap(), want);
        let mut buf = Vec::new();
        encode_payload(&items, &want, &mut buf);
        assert_eq!(buf, payload);
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
