//! The arguments of a `print fmt:` line: tokens, and the C expressions they form (field
//! reads, casts, arithmetic, `?:` and the kernel's print helpers), parsed into [`Expr`].

#[derive(Debug, Clone, PartialEq)]
pub(super) enum Tok {
    /// A literal and whether it is signed (no `U` suffix).
    Int(u64, bool),
    Str(String),
    Ident(String),
    Punct(&'static str),
}

pub(super) const PUNCTS: [&str; 25] = [
    "->", "<<", ">>", "<=", ">=", "==", "!=", "&&", "||", "(", ")", "{", "}", "[", "]", ",", "?",
    ":", "+", "-", "*", "/", "%", "<", ">",
];
pub(super) const PUNCTS1: [&str; 5] = ["&", "|", "^", "~", "!"];

pub(super) fn lex(s: &str) -> Option<Vec<Tok>> {
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

pub(super) fn string_literal(b: &[u8], start: usize) -> Option<(String, usize)> {
    string_literal_until(b, start, b'"')
}

/// The text of a literal from `start` to its closing `quote`, escapes resolved; and the index
/// after the quote.
pub(super) fn string_literal_until(b: &[u8], start: usize, quote: u8) -> Option<(String, usize)> {
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
pub(super) enum Expr {
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

pub(super) struct Parser<'a> {
    pub(super) tokens: &'a [Tok],
    pub(super) at: usize,
}

/// Binary operators by precedence, loosest first.
pub(super) const LEVELS: [&[&str]; 9] = [
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
pub(super) const MUL: [&str; 3] = ["*", "/", "%"];

impl Parser<'_> {
    pub(super) fn peek(&self) -> Option<&Tok> {
        self.tokens.get(self.at)
    }

    pub(super) fn next(&mut self) -> Option<Tok> {
        let t = self.tokens.get(self.at).cloned();
        self.at += 1;
        t
    }

    pub(super) fn eat(&mut self, p: &str) -> bool {
        let hit = matches!(self.peek(), Some(Tok::Punct(q)) if *q == p);
        if hit {
            self.at += 1;
        }
        hit
    }

    pub(super) fn expect(&mut self, p: &str) -> Option<()> {
        self.eat(p).then_some(())
    }

    pub(super) fn expr(&mut self) -> Option<Expr> {
        let cond = self.binary(0)?;
        if !self.eat("?") {
            return Some(cond);
        }
        let yes = self.expr()?;
        self.expect(":")?;
        let no = self.expr()?;
        Some(Expr::Cond(Box::new(cond), Box::new(yes), Box::new(no)))
    }

    pub(super) fn binary(&mut self, level: usize) -> Option<Expr> {
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

    pub(super) fn unary(&mut self) -> Option<Expr> {
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
    pub(super) fn cast_type(&mut self) -> Option<(usize, bool)> {
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

    pub(super) fn primary(&mut self) -> Option<Expr> {
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
    pub(super) fn table(&mut self) -> Option<Vec<(Expr, String)>> {
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
pub(super) fn type_layout(words: &[&str]) -> Option<(usize, bool)> {
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
