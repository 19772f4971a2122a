//! Evaluation of a parsed argument against one record's payload: field reads (fixed,
//! arrays, `__data_loc` strings), C arithmetic on sized integers, the print helpers.

use super::expr::Expr;
use crate::kernel::{EventFormat, Field};

#[derive(Debug, Clone, PartialEq)]
pub(super) enum Value {
    /// Bits and whether they are signed.
    Int(u64, bool),
    Str(String),
}

impl Value {
    pub(super) fn int(&self) -> Option<u64> {
        match self {
            Value::Int(v, _) => Some(*v),
            Value::Str(_) => None,
        }
    }
}

pub(super) struct Eval<'a> {
    pub(super) fmt: &'a EventFormat,
    pub(super) payload: &'a [u8],
}

impl Eval<'_> {
    pub(super) fn field(&self, f: &Field) -> Option<Value> {
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

    pub(super) fn eval(&self, e: &Expr) -> Option<Value> {
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

    pub(super) fn binary(&self, op: &str, l: &Expr, r: &Expr) -> Option<Value> {
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
    pub(super) fn flags(&self, mut v: u64, sep: &str, table: &[(Expr, String)]) -> Option<String> {
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

pub(super) fn truncate(v: u64, size: usize, signed: bool) -> u64 {
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

pub(super) fn c_string(b: &[u8]) -> String {
    let end = b.iter().position(|c| *c == 0).unwrap_or(b.len());
    String::from_utf8_lossy(&b[..end]).into_owned()
}
