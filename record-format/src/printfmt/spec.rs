//! The `%` conversions of the format text: their flags, width, precision and length, and
//! the text each gives a value (integers, strings, characters, `%p` and its symbol forms).

use super::eval::{truncate, Value};
use super::Symbols;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Width {
    None,
    Star,
    Fixed(usize),
}

/// One `%` conversion of the format text.
#[derive(Debug, Clone)]
pub(super) struct Spec {
    pub(super) left: bool,
    pub(super) zero: bool,
    pub(super) plus: bool,
    pub(super) space: bool,
    pub(super) alt: bool,
    pub(super) width: Width,
    pub(super) precision: Option<usize>,
    /// Bytes the length modifier gives an integer.
    pub(super) size: usize,
    pub(super) conv: char,
    /// The letter after `%p` (`s`, `S`, `f`, `F`), if any.
    pub(super) pointer: Option<char>,
}

impl Spec {
    /// The conversion at the start of `s` (just after its `%`) and the text after it.
    pub(super) fn parse(s: &str) -> Option<(Spec, &str)> {
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
    pub(super) fn format(&self, v: &Value, sym: Symbols) -> Option<String> {
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
    pub(super) fn precise(&self, digits: String) -> String {
        match self.precision {
            Some(p) if digits.len() < p => format!("{}{digits}", "0".repeat(p - digits.len())),
            _ => digits,
        }
    }
}

/// `%p` and its symbol forms: `%ps` the name, `%pS` the name and offset.
pub(super) fn pointer(addr: u64, kind: Option<char>, sym: Symbols) -> String {
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
pub(super) fn pad(out: &mut String, body: &str, width: Option<i64>, spec: &Spec) {
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
