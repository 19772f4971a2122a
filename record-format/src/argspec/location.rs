//! Where the runtime reads an argument: the `%LOC` suffix of an item (`%RDI`, `%stack+2`,
//! `%RDI+XMM0`), checked as uftrace's parser checks it and again for what the runtime can
//! read, and the SysV x86-64 defaults of a whole spec ([`locations`]).

use super::{ArgFormat, ArgItem, ArgSlot, ItemError};

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
pub(super) fn check_syntax(word: &str, is_struct: bool) -> Result<(), ItemError> {
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
///   earlier non-integer stack items took; `fpargN/80` (any `f80` item) takes two words from
///   the next free one aligned to 16 bytes (an odd word number), so `ldmul(long double, long
///   double)` has `fparg1/80` at `%stack+1` and `fparg2/80` at `%stack+3`; a double past
///   `xmm7` takes the next free word, a struct `/tN` of more than 16 bytes the next N/8
///   (rounded up). Explicit `%stack+N` items take their words too, so a default after them
///   follows them.
///
/// uftrace 0.13 reads no stack word for a long double without a location (it records 0) and
/// keeps `xmm(N-1)` for a double after one.
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
                    // A long double is in memory whichever way it is numbered (`arg1/f80`).
                    _ if it.is_long_double() => stack.take(stack.next | 1, 2, false),
                    ArgSlot::Arg(n @ 1..=6) if !in_memory => Location::Reg((n - 1) as u8),
                    ArgSlot::Arg(_) if in_memory => stack.take(stack.next, words, false),
                    ArgSlot::Arg(n) => stack.take((n - 6).saturating_add(stack.extra), words, true),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::argspec::{parse_item, parse_spec_list};

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
        assert_eq!(locs("arg1/f80,arg2"), [Stack(1), Reg(1)]);
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
}
