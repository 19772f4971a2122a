//! The text of a tracepoint record, from its format's `print fmt:` line.
//!
//! The line is a C string literal and the arguments the kernel's `TP_printk` passes to it:
//! `REC->field` reads, casts, arithmetic, `?:`, `__get_str`, `__print_symbolic` and
//! `__print_flags`. [`render`] evaluates them against a record's payload; anything it does not
//! understand (a helper it does not know, a payload too short) makes it list the event's own
//! fields as `name=value` instead, so an event always gets a readable text.

use crate::kernel::{EventFormat, Field};

/// Names a kernel address: the symbol and the offset into it.
pub type Symbols<'a> = &'a dyn Fn(u64) -> Option<(String, u64)>;

/// The text of the record `payload` of event `fmt`.
pub fn render(fmt: &EventFormat, payload: &[u8], sym: Symbols) -> String {
    try_render(fmt, payload, sym).unwrap_or_else(|| fallback(fmt, payload))
}

fn try_render(fmt: &EventFormat, payload: &[u8], sym: Symbols) -> Option<String> {
    let tokens = lex(&fmt.print_fmt)?;
    let mut p = Parser {
        tokens: &tokens,
        at: 0,
    };
    let Some(Tok::Str(text)) = p.next() else {
        return None;
    };
    let mut args = Vec::new();
    while p.eat(",") {
        args.push(p.expr()?);
    }
    if p.at != tokens.len() {
        return None;
    }
    let ev = Eval { fmt, payload };
    let mut values = args.iter().map(|a| ev.eval(a));
    let mut out = String::new();
    let mut rest = text.as_str();
    while let Some(pos) = rest.find('%') {
        out.push_str(&rest[..pos]);
        let (spec, after) = Spec::parse(&rest[pos + 1..])?;
        rest = after;
        if spec.conv == '%' {
            out.push('%');
            continue;
        }
        let width = match spec.width {
            Width::Star => Some(values.next()??.int()? as i64),
            Width::Fixed(w) => Some(w as i64),
            Width::None => None,
        };
        let value = values.next()??;
        let body = spec.format(&value, sym)?;
        pad(&mut out, &body, width, &spec);
    }
    out.push_str(rest);
    // Arguments the format never used mean it was not understood.
    values.next().is_none().then_some(out)
}

/// `name=value` of each field the event adds to the common ones.
fn fallback(fmt: &EventFormat, payload: &[u8]) -> String {
    let ev = Eval { fmt, payload };
    let mut parts = Vec::new();
    for f in fmt.fields.iter().filter(|f| !f.name.starts_with("common_")) {
        let text = match ev.field(f) {
            Some(Value::Str(s)) => s,
            Some(Value::Int(v, true)) => (v as i64).to_string(),
            Some(Value::Int(v, false)) => format!("{v:#x}"),
            None => "?".to_string(),
        };
        parts.push(format!("{}={}", f.name, text));
    }
    parts.join(" ")
}

// ---------------------------------------------------------------- tokens

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    /// A literal and whether it is signed (no `U` suffix).
    Int(u64, bool),
    Str(String),
    Ident(String),
    Punct(&'static str),
}

const PUNCTS: [&str; 25] = [
    "->", "<<", ">>", "<=", ">=", "==", "!=", "&&", "||", "(", ")", "{", "}", "[", "]", ",", "?",
    ":", "+", "-", "*", "/", "%", "<", ">",
];
const PUNCTS1: [&str; 5] = ["&", "|", "^", "~", "!"];

fn lex(s: &str) -> Option<Vec<Tok>> {
    let b = s.as_bytes();
    let mut i = 0;
    let mut out = Vec::new();
    while i < b.len() {
        let c = b[i];
        if c.is_ascii_whitespace() {
            i += 1;
        } else if c == b'"' {
            let (text, end) = string_literal(b, i + 1)?;
            i = end;
            // Adjacent literals concatenate.
            if let Some(Tok::Str(prev)) = out.last_mut() {
                prev.push_str(&text);
            } else {
                out.push(Tok::Str(text));
            }
        } else if c == b'\'' {
            let (text, end) = string_literal_until(b, i + 1, b'\'')?;
            i = end;
            out.push(Tok::Int(u64::from(*text.as_bytes().first()?), true));
        } else if c.is_ascii_digit() {
            let start = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric()) {
                i += 1;
            }
            let lit = &s[start..i];
            out.push(Tok::Int(int_literal(lit)?, !lit.contains(['u', 'U'])));
        } else if c.is_ascii_alphabetic() || c == b'_' {
            let start = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            out.push(Tok::Ident(s[start..i].to_string()));
        } else {
            let rest = &s[i..];
            let p = PUNCTS
                .iter()
                .chain(PUNCTS1.iter())
                .find(|p| rest.starts_with(**p))?;
            // `&&` and `||` are in PUNCTS, tried before the single `&` and `|`.
            i += p.len();
            out.push(Tok::Punct(p));
        }
    }
    Some(out)
}

fn string_literal(b: &[u8], start: usize) -> Option<(String, usize)> {
    string_literal_until(b, start, b'"')
}

/// The text of a literal from `start` to its closing `quote`, escapes resolved; and the index
/// after the quote.
fn string_literal_until(b: &[u8], start: usize, quote: u8) -> Option<(String, usize)> {
    let mut out = Vec::new();
    let mut i = start;
    loop {
        let c = *b.get(i)?;
        i += 1;
        if c == quote {
            return Some((String::from_utf8_lossy(&out).into_owned(), i));
        }
        if c != b'\\' {
            out.push(c);
            continue;
        }
        let e = *b.get(i)?;
        i += 1;
        out.push(match e {
            b'n' => b'\n',
            b't' => b'\t',
            b'r' => b'\r',
            b'0' => 0,
            other => other,
        });
    }
}

/// A C integer literal: decimal, `0x` hex or `0` octal, with optional `u`/`l` suffixes.
pub fn int_literal(s: &str) -> Option<u64> {
    let digits = s.trim_end_matches(['u', 'U', 'l', 'L']);
    if let Some(hex) = digits
        .strip_prefix("0x")
        .or_else(|| digits.strip_prefix("0X"))
    {
        u64::from_str_radix(hex, 16).ok()
    } else if digits.len() > 1 && digits.starts_with('0') {
        u64::from_str_radix(&digits[1..], 8).ok()
    } else {
        digits.parse().ok()
    }
}

// ---------------------------------------------------------------- expressions

#[derive(Debug, Clone, PartialEq)]
enum Expr {
    Int(u64, bool),
    Str(String),
    /// An identifier the format cannot define (an enum constant): 0.
    Unknown,
    Field(String),
    Element(String, Box<Expr>),
    GetStr(String),
    Cast {
        size: usize,
        signed: bool,
        inner: Box<Expr>,
    },
    Unary(&'static str, Box<Expr>),
    Binary(&'static str, Box<Expr>, Box<Expr>),
    Cond(Box<Expr>, Box<Expr>, Box<Expr>),
    Symbolic(Box<Expr>, Vec<(Expr, String)>),
    Flags(Box<Expr>, String, Vec<(Expr, String)>),
}

struct Parser<'a> {
    tokens: &'a [Tok],
    at: usize,
}

/// Binary operators by precedence, loosest first.
const LEVELS: [&[&str]; 9] = [
    &["||"],
    &["&&"],
    &["|"],
    &["^"],
    &["&"],
    &["==", "!="],
    &["<", ">", "<=", ">="],
    &["<<", ">>"],
    &["+", "-"],
];
const MUL: [&str; 3] = ["*", "/", "%"];

impl Parser<'_> {
    fn peek(&self) -> Option<&Tok> {
        self.tokens.get(self.at)
    }

    fn next(&mut self) -> Option<Tok> {
        let t = self.tokens.get(self.at).cloned();
        self.at += 1;
        t
    }

    fn eat(&mut self, p: &str) -> bool {
        let hit = matches!(self.peek(), Some(Tok::Punct(q)) if *q == p);
        if hit {
            self.at += 1;
        }
        hit
    }

    fn expect(&mut self, p: &str) -> Option<()> {
        self.eat(p).then_some(())
    }

    fn expr(&mut self) -> Option<Expr> {
        let cond = self.binary(0)?;
        if !self.eat("?") {
            return Some(cond);
        }
        let yes = self.expr()?;
        self.expect(":")?;
        let no = self.expr()?;
        Some(Expr::Cond(Box::new(cond), Box::new(yes), Box::new(no)))
    }

    fn binary(&mut self, level: usize) -> Option<Expr> {
        let ops: &[&str] = LEVELS.get(level).copied().unwrap_or(&MUL);
        let mut left = if level < LEVELS.len() {
            self.binary(level + 1)?
        } else {
            self.unary()?
        };
        loop {
            let op = match self.peek() {
                Some(Tok::Punct(p)) => ops.iter().find(|o| **o == *p).copied(),
                _ => None,
            };
            let Some(op) = op else {
                return Some(left);
            };
            self.at += 1;
            let right = if level < LEVELS.len() {
                self.binary(level + 1)?
            } else {
                self.unary()?
            };
            left = Expr::Binary(op, Box::new(left), Box::new(right));
        }
    }

    fn unary(&mut self) -> Option<Expr> {
        for op in ["-", "~", "!", "+"] {
            if self.eat(op) {
                return Some(Expr::Unary(op, Box::new(self.unary()?)));
            }
        }
        if matches!(self.peek(), Some(Tok::Punct("("))) {
            if let Some(cast) = self.cast_type() {
                let inner = self.unary()?;
                let (size, signed) = cast;
                return Some(Expr::Cast {
                    size,
                    signed,
                    inner: Box::new(inner),
                });
            }
            self.at += 1;
            let e = self.expr()?;
            self.expect(")")?;
            return Some(e);
        }
        self.primary()
    }

    /// A `(type)` at the cursor, consumed: its size and signedness (a pointer: 8, unsigned).
    fn cast_type(&mut self) -> Option<(usize, bool)> {
        let mut i = self.at + 1;
        let mut words = Vec::new();
        let mut pointer = false;
        loop {
            match self.tokens.get(i)? {
                Tok::Ident(w) => words.push(w.as_str()),
                Tok::Punct("*") => pointer = true,
                Tok::Punct(")") => break,
                _ => return None,
            }
            i += 1;
        }
        let (size, signed) = type_layout(&words)?;
        self.at = i + 1;
        Some(if pointer { (8, false) } else { (size, signed) })
    }

    fn primary(&mut self) -> Option<Expr> {
        match self.next()? {
            Tok::Int(v, signed) => Some(Expr::Int(v, signed)),
            Tok::Str(s) => Some(Expr::Str(s)),
            Tok::Ident(w) if w == "REC" => {
                self.expect("->")?;
                let Some(Tok::Ident(name)) = self.next() else {
                    return None;
                };
                if self.eat("[") {
                    let i = self.expr()?;
                    self.expect("]")?;
                    return Some(Expr::Element(name, Box::new(i)));
                }
                Some(Expr::Field(name))
            }
            Tok::Ident(w) if w == "__get_str" => {
                self.expect("(")?;
                let Some(Tok::Ident(name)) = self.next() else {
                    return None;
                };
                self.expect(")")?;
                Some(Expr::GetStr(name))
            }
            Tok::Ident(w) if w == "__print_symbolic" => {
                self.expect("(")?;
                let v = self.expr()?;
                let table = self.table()?;
                Some(Expr::Symbolic(Box::new(v), table))
            }
            Tok::Ident(w) if w == "__print_flags" => {
                self.expect("(")?;
                let v = self.expr()?;
                self.expect(",")?;
                let Some(Tok::Str(sep)) = self.next() else {
                    return None;
                };
                let table = self.table()?;
                Some(Expr::Flags(Box::new(v), sep, table))
            }
            // A call of a helper this evaluator does not know.
            Tok::Ident(_) if matches!(self.peek(), Some(Tok::Punct("("))) => None,
            Tok::Ident(_) => Some(Expr::Unknown),
            Tok::Punct(_) => None,
        }
    }

    /// `, { key, "name" } ... )` of `__print_symbolic` and `__print_flags`.
    fn table(&mut self) -> Option<Vec<(Expr, String)>> {
        let mut out = Vec::new();
        while self.eat(",") {
            self.expect("{")?;
            let key = self.expr()?;
            self.expect(",")?;
            let Some(Tok::Str(name)) = self.next() else {
                return None;
            };
            self.expect("}")?;
            out.push((key, name));
        }
        self.expect(")")?;
        Some(out)
    }
}

/// Size and signedness of a C type named by `words` (`unsigned long long`, `u32`, `pid_t`).
fn type_layout(words: &[&str]) -> Option<(usize, bool)> {
    let words: Vec<&str> = words
        .iter()
        .copied()
        .filter(|w| *w != "const" && *w != "struct")
        .collect();
    let unsigned = words.contains(&"unsigned");
    let longs = words.iter().filter(|w| **w == "long").count();
    let base = words
        .iter()
        .find(|w| **w != "unsigned" && **w != "signed" && **w != "long");
    let size_of = |name: &str| -> Option<(usize, bool)> {
        Some(match name {
            "char" => (1, true),
            "short" => (2, true),
            "int" => (4, true),
            "bool" | "_Bool" | "u8" | "__u8" => (1, false),
            "s8" | "__s8" => (1, true),
            "u16" | "__u16" => (2, false),
            "s16" | "__s16" => (2, true),
            "u32" | "__u32" | "dev_t" | "gfp_t" => (4, false),
            "s32" | "__s32" | "pid_t" => (4, true),
            "u64" | "__u64" | "size_t" | "sector_t" | "void" => (8, false),
            "s64" | "__s64" | "ssize_t" | "loff_t" => (8, true),
            _ => return None,
        })
    };
    let (size, signed) = match (base, longs) {
        (Some(b), 0) => size_of(b)?,
        (None | Some(&"int"), 1..) => (8, true),
        (None, 0) if unsigned => (4, true),
        _ => return None,
    };
    Some((size, signed && !unsigned))
}

// ---------------------------------------------------------------- values

#[derive(Debug, Clone, PartialEq)]
enum Value {
    /// Bits and whether they are signed.
    Int(u64, bool),
    Str(String),
}

impl Value {
    fn int(&self) -> Option<u64> {
        match self {
            Value::Int(v, _) => Some(*v),
            Value::Str(_) => None,
        }
    }
}

struct Eval<'a> {
    fmt: &'a EventFormat,
    payload: &'a [u8],
}

impl Eval<'_> {
    fn field(&self, f: &Field) -> Option<Value> {
        let bytes = |off: usize, len: usize| self.payload.get(off..off.checked_add(len)?);
        if f.ty.starts_with("__data_loc") {
            let loc = self.fmt.value(&f.name, self.payload)?;
            let (off, len) = ((loc & 0xffff) as usize, ((loc >> 16) & 0xffff) as usize);
            return Some(Value::Str(c_string(bytes(off, len)?)));
        }
        if f.array.is_some() && f.ty.ends_with("char") {
            return Some(Value::Str(c_string(bytes(f.offset, f.size)?)));
        }
        if f.array.is_some() {
            return None;
        }
        Some(Value::Int(self.fmt.value(&f.name, self.payload)?, f.signed))
    }

    fn eval(&self, e: &Expr) -> Option<Value> {
        let int = |e: &Expr| self.eval(e)?.int();
        Some(match e {
            Expr::Int(v, signed) => Value::Int(*v, *signed),
            Expr::Str(s) => Value::Str(s.clone()),
            Expr::Unknown => Value::Int(0, true),
            Expr::Field(name) => self.field(self.fmt.field(name)?)?,
            Expr::GetStr(name) => match self.field(self.fmt.field(name)?)? {
                s @ Value::Str(_) => s,
                Value::Int(..) => return None,
            },
            Expr::Element(name, i) => {
                let f = self.fmt.field(name)?;
                Value::Int(
                    self.fmt
                        .element(name, usize::try_from(int(i)?).ok()?, self.payload)?,
                    f.signed,
                )
            }
            Expr::Cast {
                size,
                signed,
                inner,
            } => Value::Int(truncate(int(inner)?, *size, *signed), *signed),
            Expr::Unary(op, inner) => {
                let v = self.eval(inner)?;
                let (x, signed) = match v {
                    Value::Int(x, s) => (x, s),
                    Value::Str(_) => return None,
                };
                match *op {
                    "-" => Value::Int(x.wrapping_neg(), true),
                    "~" => Value::Int(!x, signed),
                    "!" => Value::Int(u64::from(x == 0), true),
                    _ => Value::Int(x, signed),
                }
            }
            Expr::Binary(op, l, r) => self.binary(op, l, r)?,
            Expr::Cond(c, yes, no) => {
                if int(c)? != 0 {
                    self.eval(yes)?
                } else {
                    self.eval(no)?
                }
            }
            Expr::Symbolic(v, table) => {
                let v = int(v)?;
                for (key, name) in table {
                    if int(key)? == v {
                        return Some(Value::Str(name.clone()));
                    }
                }
                Value::Str(format!("{v:#x}"))
            }
            Expr::Flags(v, sep, table) => Value::Str(self.flags(int(v)?, sep, table)?),
        })
    }

    fn binary(&self, op: &str, l: &Expr, r: &Expr) -> Option<Value> {
        let (Value::Int(a, sa), Value::Int(b, sb)) = (self.eval(l)?, self.eval(r)?) else {
            return None;
        };
        let signed = sa && sb;
        let cmp = |o: std::cmp::Ordering| {
            let ord = if signed {
                (a as i64).cmp(&(b as i64))
            } else {
                a.cmp(&b)
            };
            u64::from(ord == o)
        };
        let v = match op {
            "||" => u64::from(a != 0 || b != 0),
            "&&" => u64::from(a != 0 && b != 0),
            "|" => a | b,
            "^" => a ^ b,
            "&" => a & b,
            "==" => u64::from(a == b),
            "!=" => u64::from(a != b),
            "<" => cmp(std::cmp::Ordering::Less),
            ">" => cmp(std::cmp::Ordering::Greater),
            "<=" => 1 - cmp(std::cmp::Ordering::Greater),
            ">=" => 1 - cmp(std::cmp::Ordering::Less),
            "<<" => a.checked_shl(u32::try_from(b).ok()?).unwrap_or(0),
            ">>" if sa => (a as i64).checked_shr(u32::try_from(b).ok()?).unwrap_or(0) as u64,
            ">>" => a.checked_shr(u32::try_from(b).ok()?).unwrap_or(0),
            "+" => a.wrapping_add(b),
            "-" => a.wrapping_sub(b),
            "*" => a.wrapping_mul(b),
            "/" if signed => (a as i64).checked_div(b as i64)? as u64,
            "/" => a.checked_div(b)?,
            "%" if signed => (a as i64).checked_rem(b as i64)? as u64,
            "%" => a.checked_rem(b)?,
            _ => return None,
        };
        Some(Value::Int(v, signed))
    }

    /// The names of the flags set in `v`, joined by `sep`; bits no name covers are added in hex.
    fn flags(&self, mut v: u64, sep: &str, table: &[(Expr, String)]) -> Option<String> {
        let mut names = Vec::new();
        for (key, name) in table {
            let mask = self.eval(key)?.int()?;
            if mask == 0 {
                if v == 0 {
                    names.push(name.clone());
                    break;
                }
                continue;
            }
            if v & mask == mask {
                names.push(name.clone());
                v &= !mask;
            }
        }
        if v != 0 {
            names.push(format!("{v:#x}"));
        }
        Some(names.join(sep))
    }
}

fn truncate(v: u64, size: usize, signed: bool) -> u64 {
    if size >= 8 {
        return v;
    }
    let shift = 64 - 8 * size as u32;
    if signed {
        (((v << shift) as i64) >> shift) as u64
    } else {
        (v << shift) >> shift
    }
}

fn c_string(b: &[u8]) -> String {
    let end = b.iter().position(|c| *c == 0).unwrap_or(b.len());
    String::from_utf8_lossy(&b[..end]).into_owned()
}

// ---------------------------------------------------------------- conversions

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Width {
    None,
    Star,
    Fixed(usize),
}

/// One `%` conversion of the format text.
#[derive(Debug, Clone)]
struct Spec {
    left: bool,
    zero: bool,
    plus: bool,
    space: bool,
    alt: bool,
    width: Width,
    precision: Option<usize>,
    /// Bytes the length modifier gives an integer.
    size: usize,
    conv: char,
    /// The letter after `%p` (`s`, `S`, `f`, `F`), if any.
    pointer: Option<char>,
}

impl Spec {
    /// The conversion at the start of `s` (just after its `%`) and the text after it.
    fn parse(s: &str) -> Option<(Spec, &str)> {
        let mut spec = Spec {
            left: false,
            zero: false,
            plus: false,
            space: false,
            alt: false,
            width: Width::None,
            precision: None,
            size: 4,
            conv: '%',
            pointer: None,
        };
        let mut chars = s.char_indices().peekable();
        while let Some(&(_, c)) = chars.peek() {
            match c {
                '-' => spec.left = true,
                '0' => spec.zero = true,
                '+' => spec.plus = true,
                ' ' => spec.space = true,
                '#' => spec.alt = true,
                _ => break,
            }
            chars.next();
        }
        let number = |chars: &mut std::iter::Peekable<std::str::CharIndices>| {
            let mut n: Option<usize> = None;
            while let Some(&(_, c)) = chars.peek() {
                let Some(d) = c.to_digit(10) else { break };
                n = Some(n.unwrap_or(0).saturating_mul(10).saturating_add(d as usize));
                chars.next();
            }
            n
        };
        if chars.peek().map(|c| c.1) == Some('*') {
            chars.next();
            spec.width = Width::Star;
        } else if let Some(w) = number(&mut chars) {
            spec.width = Width::Fixed(w);
        }
        if chars.peek().map(|c| c.1) == Some('.') {
            chars.next();
            spec.precision = Some(number(&mut chars).unwrap_or(0));
        }
        let mut hs = 0;
        while let Some(&(_, c)) = chars.peek() {
            match c {
                'h' => {
                    hs += 1;
                    spec.size = if hs == 1 { 2 } else { 1 };
                }
                'l' | 'z' | 'j' | 't' | 'L' | 'q' => spec.size = 8,
                _ => break,
            }
            chars.next();
        }
        let (i, conv) = chars.next()?;
        spec.conv = conv;
        let mut end = i + conv.len_utf8();
        if conv == 'p' {
            spec.size = 8;
            if let Some(&(j, c)) = chars.peek() {
                if matches!(c, 's' | 'S' | 'f' | 'F' | 'B') {
                    spec.pointer = Some(c);
                    end = j + 1;
                }
            }
        }
        if !"diuxXocspn%".contains(conv) {
            return None;
        }
        Some((spec, s.get(end..)?))
    }

    /// The converted text, before width padding.
    fn format(&self, v: &Value, sym: Symbols) -> Option<String> {
        let (bits, _) = match (self.conv, v) {
            ('s', Value::Str(s)) => {
                return Some(match self.precision {
                    Some(p) => s.chars().take(p).collect(),
                    None => s.clone(),
                });
            }
            (_, Value::Str(_)) => return None,
            (_, Value::Int(b, s)) => (*b, *s),
        };
        let x = truncate(bits, self.size, false);
        let digits = match self.conv {
            'd' | 'i' => {
                let n = truncate(bits, self.size, true) as i64;
                let sign = if n < 0 {
                    "-"
                } else if self.plus {
                    "+"
                } else if self.space {
                    " "
                } else {
                    ""
                };
                let body = self.precise(n.unsigned_abs().to_string());
                return Some(format!("{sign}{body}"));
            }
            'u' => x.to_string(),
            'x' => format!("{x:x}"),
            'X' => format!("{x:X}"),
            'o' => format!("{x:o}"),
            'c' => return Some(char::from(x as u8).to_string()),
            'p' => return Some(pointer(bits, self.pointer, sym)),
            // `%s` of a number: what the kernel would print for the pointer.
            's' => return Some(format!("{bits:#x}")),
            _ => return None,
        };
        let body = self.precise(digits);
        Some(match (self.alt, self.conv) {
            (true, 'x') if x != 0 => format!("0x{body}"),
            (true, 'X') if x != 0 => format!("0X{body}"),
            (true, 'o') if !body.starts_with('0') => format!("0{body}"),
            _ => body,
        })
    }

    /// `digits` with the precision's leading zeros.
    fn precise(&self, digits: String) -> String {
        match self.precision {
            Some(p) if digits.len() < p => format!("{}{digits}", "0".repeat(p - digits.len())),
            _ => digits,
        }
    }
}

/// `%p` and its symbol forms: `%ps` the name, `%pS` the name and offset.
fn pointer(addr: u64, kind: Option<char>, sym: Symbols) -> String {
    match kind {
        Some('s' | 'f') => sym(addr).map_or_else(|| format!("{addr:#x}"), |(name, _)| name),
        Some('S' | 'F' | 'B') => sym(addr).map_or_else(
            || format!("{addr:#x}"),
            |(name, off)| {
                if off == 0 {
                    name
                } else {
                    format!("{name}+{off:#x}")
                }
            },
        ),
        _ => format!("{addr:#x}"),
    }
}

/// Appends `body` padded to `width` (negative: left-aligned).
fn pad(out: &mut String, body: &str, width: Option<i64>, spec: &Spec) {
    let width = width.unwrap_or(0);
    let left = spec.left || width < 0;
    let w = width.unsigned_abs() as usize;
    let n = body.chars().count();
    if n >= w {
        out.push_str(body);
        return;
    }
    let fill = w - n;
    let numeric = !matches!(spec.conv, 's' | 'c' | 'p');
    if left {
        out.push_str(body);
        out.extend(std::iter::repeat_n(' ', fill));
    } else if spec.zero && numeric && spec.precision.is_none() {
        // Zeros go after a sign or `0x`.
        let head = if body.starts_with(['-', '+', ' ']) {
            1
        } else if body.starts_with("0x") || body.starts_with("0X") {
            2
        } else {
            0
        };
        let (head, tail) = body.split_at(head);
        out.push_str(head);
        out.extend(std::iter::repeat_n('0', fill));
        out.push_str(tail);
    } else {
        out.extend(std::iter::repeat_n(' ', fill));
        out.push_str(body);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn format(system: &str, text: &str) -> EventFormat {
        EventFormat::parse(system, text).expect("format parses")
    }

    fn no_symbols(_: u64) -> Option<(String, u64)> {
        None
    }

    fn put(p: &mut Vec<u8>, off: usize, bytes: &[u8]) {
        if p.len() < off + bytes.len() {
            p.resize(off + bytes.len(), 0);
        }
        p[off..off + bytes.len()].copy_from_slice(bytes);
    }

    const COMMON: &str = "\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\
        \tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n\
        \tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n\
        \tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n";

    fn page_fault() -> EventFormat {
        format(
            "exceptions",
            &format!(
                "name: page_fault_user\nID: 190\nformat:\n{COMMON}\
                 \tfield:unsigned long address;\toffset:8;\tsize:8;\tsigned:0;\n\
                 \tfield:unsigned long ip;\toffset:16;\tsize:8;\tsigned:0;\n\
                 \tfield:unsigned long error_code;\toffset:24;\tsize:8;\tsigned:0;\n\n\
                 print fmt: \"address=%ps ip=%ps error_code=0x%lx\", (void *)REC->address, (void *)REC->ip, REC->error_code\n"
            ),
        )
    }

    fn fault_payload() -> Vec<u8> {
        let mut p = vec![0u8; 32];
        put(&mut p, 8, &0x7f00_1234_5000u64.to_le_bytes());
        put(&mut p, 16, &0x40_1136u64.to_le_bytes());
        put(&mut p, 24, &6u64.to_le_bytes());
        p
    }

    #[test]
    fn page_fault_addresses_without_symbols_are_hex() {
        let text = render(&page_fault(), &fault_payload(), &no_symbols);
        assert_eq!(text, "address=0x7f0012345000 ip=0x401136 error_code=0x6");
    }

    #[test]
    fn symbol_conversions_name_the_address() {
        let f = format(
            "test",
            &format!(
                "name: t\nID: 1\nformat:\n{COMMON}\
                 \tfield:unsigned long ip;\toffset:8;\tsize:8;\tsigned:0;\n\n\
                 print fmt: \"%pS %ps %pS\", (void *)REC->ip, (void *)REC->ip, (void *)(REC->ip - 0x10)\n"
            ),
        );
        let mut p = vec![0u8; 16];
        put(&mut p, 8, &0xffff_0000_0000_1010u64.to_le_bytes());
        let sym = |a: u64| {
            (a >= 0xffff_0000_0000_1000)
                .then(|| ("vfs_read".to_string(), a - 0xffff_0000_0000_1000))
        };
        assert_eq!(render(&f, &p, &sym), "vfs_read+0x10 vfs_read vfs_read");
    }

    fn block_issue() -> EventFormat {
        format(
            "block",
            &format!(
                "name: block_rq_issue\nID: 2108\nformat:\n{COMMON}\
                 \tfield:dev_t dev;\toffset:8;\tsize:4;\tsigned:0;\n\
                 \tfield:sector_t sector;\toffset:16;\tsize:8;\tsigned:0;\n\
                 \tfield:unsigned int nr_sector;\toffset:24;\tsize:4;\tsigned:0;\n\
                 \tfield:unsigned int bytes;\toffset:28;\tsize:4;\tsigned:0;\n\
                 \tfield:unsigned short ioprio;\toffset:32;\tsize:2;\tsigned:0;\n\
                 \tfield:char rwbs[10];\toffset:34;\tsize:10;\tsigned:0;\n\
                 \tfield:char comm[16];\toffset:44;\tsize:16;\tsigned:0;\n\
                 \tfield:__data_loc char[] cmd;\toffset:60;\tsize:4;\tsigned:0;\n\n\
                 print fmt: \"%d,%d %s %u (%s) %llu + %u %s,%u,%u [%s]\", ((unsigned int) ((REC->dev) >> 20)), ((unsigned int) ((REC->dev) & ((1U << 20) - 1))), REC->rwbs, REC->bytes, __get_str(cmd), (unsigned long long)REC->sector, REC->nr_sector, __print_symbolic((((REC->ioprio) >> 13) & (8 - 1)), {{ IOPRIO_CLASS_NONE, \"none\" }}, {{ IOPRIO_CLASS_RT, \"rt\" }}, {{ IOPRIO_CLASS_BE, \"be\" }}, {{ IOPRIO_CLASS_IDLE, \"idle\" }}, {{ IOPRIO_CLASS_INVALID, \"invalid\"}}), (((REC->ioprio) >> 3) & ((1 << 10) - 1)), ((REC->ioprio) & ((1 << 3) - 1)), REC->comm\n"
            ),
        )
    }

    fn block_payload() -> Vec<u8> {
        let mut p = vec![0u8; 64];
        put(&mut p, 8, &(254u32 << 20).to_le_bytes());
        put(&mut p, 16, &123_456u64.to_le_bytes());
        put(&mut p, 24, &8u32.to_le_bytes());
        put(&mut p, 28, &4096u32.to_le_bytes());
        put(&mut p, 34, b"WS\0");
        put(&mut p, 44, b"ksys\0");
        // An empty `cmd` at the end of the record.
        put(&mut p, 60, &64u32.to_le_bytes());
        p
    }

    #[test]
    fn block_issue_reads_device_strings_and_symbolic_class() {
        let text = render(&block_issue(), &block_payload(), &no_symbols);
        assert_eq!(text, "254,0 WS 4096 () 123456 + 8 none,0,0 [ksys]");
    }

    #[test]
    fn data_loc_strings_are_read_at_their_offset() {
        let mut p = block_payload();
        put(&mut p, 60, &((4u32 << 16) | 64).to_le_bytes());
        put(&mut p, 64, b"abc\0");
        let text = render(&block_issue(), &p, &no_symbols);
        assert!(text.contains("4096 (abc) 123456"), "{text}");
    }

    #[test]
    fn sched_switch_state_flags_and_conditionals() {
        let f = format(
            "sched",
            &format!(
                "name: sched_switch\nID: 372\nformat:\n{COMMON}\
                 \tfield:char prev_comm[16];\toffset:8;\tsize:16;\tsigned:0;\n\
                 \tfield:pid_t prev_pid;\toffset:24;\tsize:4;\tsigned:1;\n\
                 \tfield:int prev_prio;\toffset:28;\tsize:4;\tsigned:1;\n\
                 \tfield:long prev_state;\toffset:32;\tsize:8;\tsigned:1;\n\
                 \tfield:char next_comm[16];\toffset:40;\tsize:16;\tsigned:0;\n\
                 \tfield:pid_t next_pid;\toffset:56;\tsize:4;\tsigned:1;\n\
                 \tfield:int next_prio;\toffset:60;\tsize:4;\tsigned:1;\n\n\
                 print fmt: \"prev_comm=%s prev_pid=%d prev_prio=%d prev_state=%s%s ==> next_comm=%s next_pid=%d next_prio=%d\", REC->prev_comm, REC->prev_pid, REC->prev_prio, (REC->prev_state & ((((0x00000000 | 0x00000001 | 0x00000002 | 0x00000004 | 0x00000008 | 0x00000010 | 0x00000020 | 0x00000040) + 1) << 1) - 1)) ? __print_flags(REC->prev_state & ((((0x00000000 | 0x00000001 | 0x00000002 | 0x00000004 | 0x00000008 | 0x00000010 | 0x00000020 | 0x00000040) + 1) << 1) - 1), \"|\", {{ 0x00000001, \"S\" }}, {{ 0x00000002, \"D\" }}, {{ 0x00000004, \"T\" }}, {{ 0x00000008, \"t\" }}, {{ 0x00000010, \"X\" }}, {{ 0x00000020, \"Z\" }}, {{ 0x00000040, \"P\" }}, {{ 0x00000080, \"I\" }}) : \"R\", REC->prev_state & (((0x00000000 | 0x00000001 | 0x00000002 | 0x00000004 | 0x00000008 | 0x00000010 | 0x00000020 | 0x00000040) + 1) << 1) ? \"+\" : \"\", REC->next_comm, REC->next_pid, REC->next_prio\n"
            ),
        );
        let mut p = vec![0u8; 64];
        put(&mut p, 8, b"prog\0");
        put(&mut p, 24, &4242i32.to_le_bytes());
        put(&mut p, 28, &120i32.to_le_bytes());
        put(&mut p, 32, &3i64.to_le_bytes());
        put(&mut p, 40, b"swapper/1\0");
        put(&mut p, 56, &0i32.to_le_bytes());
        put(&mut p, 60, &(-1i32).to_le_bytes());
        assert_eq!(
            render(&f, &p, &no_symbols),
            "prev_comm=prog prev_pid=4242 prev_prio=120 prev_state=S|D ==> next_comm=swapper/1 next_pid=0 next_prio=-1"
        );
        put(&mut p, 32, &0i64.to_le_bytes());
        assert!(render(&f, &p, &no_symbols).contains("prev_state=R ==>"));
    }

    #[test]
    fn sys_enter_reads_array_elements_with_long_conversions() {
        let f = format(
            "raw_syscalls",
            &format!(
                "name: sys_enter\nID: 443\nformat:\n{COMMON}\
                 \tfield:long id;\toffset:8;\tsize:8;\tsigned:1;\n\
                 \tfield:unsigned long args[6];\toffset:16;\tsize:48;\tsigned:0;\n\n\
                 print fmt: \"NR %ld (%lx, %lx, %lx, %lx, %lx, %lx)\", REC->id, REC->args[0], REC->args[1], REC->args[2], REC->args[3], REC->args[4], REC->args[5]\n"
            ),
        );
        let mut p = vec![0u8; 64];
        put(&mut p, 8, &1i64.to_le_bytes());
        put(&mut p, 16, &3u64.to_le_bytes());
        put(&mut p, 24, &0x7ffd_0000_1000u64.to_le_bytes());
        put(&mut p, 32, &4096u64.to_le_bytes());
        assert_eq!(
            render(&f, &p, &no_symbols),
            "NR 1 (3, 7ffd00001000, 1000, 0, 0, 0)"
        );
    }

    #[test]
    fn widths_flags_and_negative_numbers() {
        let f = format(
            "test",
            &format!(
                "name: t\nID: 1\nformat:\n{COMMON}\
                 \tfield:int v;\toffset:8;\tsize:4;\tsigned:1;\n\
                 \tfield:char name[8];\toffset:12;\tsize:8;\tsigned:0;\n\n\
                 print fmt: \"[%5d|%-5d|%05d|%x|%#x|%-6s|%3s|%%|%c]\", REC->v, REC->v, REC->v, REC->v, 255, REC->name, REC->name, 'A'\n"
            ),
        );
        let mut p = vec![0u8; 20];
        put(&mut p, 8, &(-42i32).to_le_bytes());
        put(&mut p, 12, b"ab\0");
        assert_eq!(
            render(&f, &p, &no_symbols),
            "[  -42|-42  |-0042|ffffffd6|0xff|ab    | ab|%|A]"
        );
    }

    #[test]
    fn unknown_helpers_fall_back_to_the_fields() {
        let f = format(
            "test",
            &format!(
                "name: t\nID: 1\nformat:\n{COMMON}\
                 \tfield:unsigned int mask;\toffset:8;\tsize:4;\tsigned:0;\n\
                 \tfield:char comm[16];\toffset:12;\tsize:16;\tsigned:0;\n\n\
                 print fmt: \"mask=%s\", __get_bitmask(mask)\n"
            ),
        );
        let mut p = vec![0u8; 28];
        put(&mut p, 8, &0x30u32.to_le_bytes());
        put(&mut p, 12, b"kworker\0");
        assert_eq!(render(&f, &p, &no_symbols), "mask=0x30 comm=kworker");
    }

    #[test]
    fn truncated_payloads_never_panic() {
        let f = block_issue();
        let full = block_payload();
        for n in 0..full.len() {
            let text = render(&f, &full[..n], &no_symbols);
            assert!(n > 8 || text.contains('?'), "{n}: {text}");
        }
        // A `__data_loc` pointing past the end.
        let mut p = full.clone();
        put(&mut p, 60, &((200u32 << 16) | 60).to_le_bytes());
        assert!(render(&f, &p, &no_symbols).contains("cmd=?"));
    }

    fn int_event(print: &str) -> EventFormat {
        format(
            "test",
            &format!(
                "name: t\nID: 1\nformat:\n{COMMON}\
                 \tfield:int v;\toffset:8;\tsize:4;\tsigned:1;\n\nprint fmt: {print}\n"
            ),
        )
    }

    #[test]
    fn operators_follow_c_precedence() {
        let mut p = vec![0u8; 12];
        put(&mut p, 8, &(-5i32).to_le_bytes());
        let f = int_event(
            "\"%d %d %d %u %d %lx\", 1 + 2 * 3, (1 + 2) * 3, REC->v < 0 ? -REC->v : REC->v, (unsigned char)300, 7 % 4 << 1 == 6 && 1, ~0UL >> 60",
        );
        assert_eq!(render(&f, &p, &no_symbols), "7 9 5 44 1 f");
        // `4 / 0` is not a value: the fallback lists the fields.
        let f = int_event("\"%d\", !REC->v || 4 / 0");
        assert_eq!(render(&f, &p, &no_symbols), "v=-5");
    }
}
