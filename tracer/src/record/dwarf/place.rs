//! From a function's parameter and return types to its `A:`/`R:` items, with the registers and
//! stack slots the SysV x86-64 calling convention puts each value in.
//!
//! Items are numbered as uftrace numbers them: `fparg` for `float`, `double` and `long double`,
//! `arg` for everything else (structs included, whatever their class). A location is written
//! as uftrace writes it: always for values on the stack (`%stack+N`, N counting 8-byte words
//! from the first stack argument) and for structs and strings (`%RDI`, `%XMM0+RSI`); once a
//! struct or string was passed or is returned, for every item after it; and otherwise only
//! where the value is not where the item's number alone puts it (the Nth integer register,
//! `xmm(N-1)`), which uftrace would read from the wrong register.

use super::abi::{eightbytes, Class};
use super::types::Ty;

const INT_REGS: [&str; 6] = ["RDI", "RSI", "RDX", "RCX", "R8", "R9"];
const SSE_REGS: usize = 8;

/// Where a value is passed.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Loc {
    /// Registers, by name.
    Regs(Vec<String>),
    /// The Nth stack word (1-based).
    Stack(u64),
}

impl Loc {
    fn text(&self) -> String {
        match self {
            Loc::Regs(r) => r.join("+"),
            Loc::Stack(n) => format!("stack+{n}"),
        }
    }
}

/// The registers and stack words handed out so far.
#[derive(Default)]
struct Alloc {
    ints: usize,
    sses: usize,
    words: u64,
}

impl Alloc {
    /// The registers of one value's eightbytes (all or nothing); an SSEUP eightbyte is the
    /// upper half of the vector register before it.
    fn regs(&mut self, classes: &[Class]) -> Option<Loc> {
        let nint = classes.iter().filter(|c| **c == Class::Integer).count();
        let nsse = classes.iter().filter(|c| **c == Class::Sse).count();
        if self.ints + nint > INT_REGS.len() || self.sses + nsse > SSE_REGS {
            return None;
        }
        let mut names = Vec::new();
        for c in classes {
            match c {
                Class::Integer => {
                    names.push(INT_REGS[self.ints].to_string());
                    self.ints += 1;
                }
                Class::Sse => {
                    names.push(format!("XMM{}", self.sses));
                    self.sses += 1;
                }
                _ => {}
            }
        }
        Some(Loc::Regs(names))
    }

    /// `size` bytes on the stack at alignment `align`.
    fn stack(&mut self, size: u64, align: u64) -> Loc {
        let step = (align / 8).max(1);
        let start = self.words.next_multiple_of(step);
        self.words = start + size.div_ceil(8).max(1);
        Loc::Stack(start + 1)
    }

    /// Registers of `classes` if they fit, else the stack.
    fn place(&mut self, classes: &[Class], size: u64, align: u64) -> Loc {
        self.regs(classes)
            .unwrap_or_else(|| self.stack(size, align))
    }
}

/// The `R:` item of a function returning `ty`.
pub struct RetItem {
    /// `None`: void, or a type without spec.
    pub text: Option<String>,
    /// Returned through a hidden pointer passed as the first integer argument.
    pub hidden: bool,
    /// A struct or string.
    pub record: bool,
}

pub fn ret_item(ty: Option<&Ty>) -> RetItem {
    let (text, hidden) = ret_text(ty);
    RetItem {
        record: matches!(ty, Some(Ty::Record(_))) && text.is_some(),
        text,
        hidden,
    }
}

fn ret_text(ty: Option<&Ty>) -> (Option<String>, bool) {
    let Some(ty) = ty else {
        return (None, false);
    };
    let item = |fmt: &str| Some(format!("retval{fmt}"));
    match ty {
        Ty::Int {
            size: ..=8,
            plain_char: true,
        } => (item("/c"), false),
        Ty::Int { .. } => (item(""), false),
        Ty::Ptr { to_char, .. } => (item(if *to_char { "/s" } else { "/p" }), false),
        Ty::Enum { name, .. } => (item(&enum_fmt(name)), false),
        Ty::Float { size: 4, .. } => (item("/f32"), false),
        Ty::Float { size: 8, .. } => (item("/f64"), false),
        Ty::Float { x87: true, .. } => (item("/f80"), false),
        Ty::Record(r) if r.string => (item("/S"), true),
        Ty::Record(r) => {
            let empty = r.is_empty();
            let size = if empty { 0 } else { r.size };
            // X87 classes come back in st0: only memory-class values use the hidden pointer.
            let hidden = r.by_ref || (!empty && eightbytes(ty).is_none());
            (item(&struct_fmt(size, &r.name)), hidden)
        }
        _ => (None, false),
    }
}

fn enum_fmt(name: &Option<String>) -> String {
    name.as_ref().map_or(String::new(), |n| format!("/e:{n}"))
}

fn struct_fmt(size: u64, name: &Option<String>) -> String {
    match name {
        Some(n) => format!("/t{size}:{n}"),
        None => format!("/t{size}"),
    }
}

/// The `A:` items of a function with parameters `params` (`None`: a parameter of a type
/// without spec, or `...`, which ends the list) returning `ret`.
pub fn arg_items(params: &[Option<Ty>], ret: Option<&Ty>) -> Vec<String> {
    let ret = ret_item(ret);
    let mut alloc = Alloc::default();
    if ret.hidden {
        alloc.ints = 1;
    }
    // A struct or string returned puts locations on every item, as uftrace does.
    let mut sticky = ret.record;
    let (mut args, mut fpargs) = (0u32, 0u32);
    let mut out = Vec::new();
    for ty in params {
        let Some(ty) = ty else {
            break;
        };
        // (fparg?, format, location, whether it is a struct or string)
        let (fp, fmt, loc, record) = match ty {
            Ty::Int { size, plain_char } => {
                let fmt = if *plain_char { "/c" } else { "" };
                let classes = vec![Class::Integer; size.div_ceil(8) as usize];
                (
                    false,
                    fmt.to_string(),
                    alloc.place(&classes, *size, ty.align()),
                    false,
                )
            }
            Ty::Ptr { size, to_char } => {
                let fmt = if *to_char { "/s" } else { "/p" };
                let classes = vec![Class::Integer; size.div_ceil(8) as usize];
                (
                    false,
                    fmt.to_string(),
                    alloc.place(&classes, *size, 8),
                    false,
                )
            }
            Ty::Enum { name, .. } => (
                false,
                enum_fmt(name),
                alloc.place(&[Class::Integer], 8, 8),
                false,
            ),
            Ty::Float {
                size: size @ (4 | 8),
                ..
            } => (
                true,
                format!("/{}", size * 8),
                alloc.place(&[Class::Sse], 8, 8),
                false,
            ),
            Ty::Float {
                size: 16,
                x87: true,
            } => (true, "/80".to_string(), alloc.stack(16, 16), false),
            Ty::Record(r) if r.string => (
                false,
                "/S".to_string(),
                alloc.place(&[Class::Integer], 8, 8),
                true,
            ),
            // By invisible reference: the pointer takes an integer register.
            Ty::Record(r) if r.by_ref => (
                false,
                struct_fmt(r.size, &r.name),
                alloc.place(&[Class::Integer], 8, 8),
                true,
            ),
            // Nothing is passed: the location names the next stack word, left free.
            Ty::Record(r) if r.is_empty() => (
                false,
                struct_fmt(0, &r.name),
                Loc::Stack(alloc.words + 1),
                true,
            ),
            Ty::Record(r) => {
                let loc = match eightbytes(ty) {
                    Some(c)
                        if c.iter()
                            .all(|c| matches!(c, Class::Integer | Class::Sse | Class::SseUp)) =>
                    {
                        alloc.place(&c, r.size, r.align)
                    }
                    _ => alloc.stack(r.size, r.align),
                };
                (false, struct_fmt(r.size, &r.name), loc, true)
            }
            _ => break,
        };
        let (name, default) = if fp {
            fpargs += 1;
            let d = (fpargs as usize <= SSE_REGS)
                .then(|| Loc::Regs(vec![format!("XMM{}", fpargs - 1)]));
            (format!("fparg{fpargs}"), d)
        } else {
            args += 1;
            let d = match args as usize {
                n @ 1..=6 => Loc::Regs(vec![INT_REGS[n - 1].to_string()]),
                n => Loc::Stack(n as u64 - 6),
            };
            (format!("arg{args}"), Some(d))
        };
        // An integer of two registers is read from the first.
        let loc = match loc {
            Loc::Regs(mut r) if !record => {
                r.truncate(1);
                Loc::Regs(r)
            }
            loc => loc,
        };
        let on_stack = matches!(loc, Loc::Stack(_));
        if sticky || record || on_stack || default.as_ref() != Some(&loc) {
            out.push(format!("{name}{fmt}%{}", loc.text()));
        } else {
            out.push(format!("{name}{fmt}"));
        }
        sticky |= record;
    }
    out
}

#[cfg(test)]
mod tests;
