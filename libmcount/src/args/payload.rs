//! The payloads of one call (data-format §3.4): ENTRY items read from the registers the
//! entry trampoline saved and the caller's stack above the return slot, the EXIT item from
//! the return-value registers (x87 `st(0)` for `f80`), each where its [`Cap`] says. Memory
//! behind pointers is copied with `read_self`, zeros or `<0x…>` where unreadable. No
//! allocation, lock or panic: it runs inside every recorded call.

use super::{Cap, Form, FuncArgs};
use crate::cpu::{EntryRegs, ExitRegs};
use record_format::argspec::{Location, Register, MAX_STR};
use record_format::raw::align;

/// Writes payload items into ring memory (4-byte aligned items, zero padding). The caller
/// sized the buffer for the function's largest payload.
struct Payload<'a> {
    out: &'a mut [u8],
    len: usize,
}

impl Payload<'_> {
    fn put(&mut self, bytes: &[u8]) {
        let end = (self.len + bytes.len()).min(self.out.len());
        if let Some(dst) = self.out.get_mut(self.len..end) {
            dst.copy_from_slice(&bytes[..end - self.len]);
        }
        self.len = end;
    }

    /// Zero padding to the next multiple of `to` (4 or 8).
    #[inline]
    fn pad(&mut self, to: usize) {
        let end = align(self.len, to).min(self.out.len());
        if end == self.len {
            return;
        }
        // One 8-byte store covers any pad when there is room (no memset call).
        if let Some(dst) = self.out.get_mut(self.len..self.len + 8) {
            dst.copy_from_slice(&[0; 8]);
        } else if let Some(dst) = self.out.get_mut(self.len..end) {
            dst.fill(0);
        }
        self.len = end;
    }

    /// An integer of `size` bytes, padded to 4 (one 8-byte store when there is room).
    #[inline]
    fn int(&mut self, value: u64, size: usize) {
        let len = align(size.min(8), 4);
        let keep = match size {
            1 => 0xff,
            2 => 0xffff,
            4 => 0xffff_ffff,
            _ => u64::MAX,
        };
        if let Some(dst) = self.out.get_mut(self.len..self.len + 8) {
            dst.copy_from_slice(&(value & keep).to_le_bytes());
            self.len += len;
        } else {
            self.put(&(value & keep).to_le_bytes()[..len]);
        }
    }

    /// A string read from `ptr`: `NULL`, `<0x…>` when unreadable, cut at [`MAX_STR`].
    fn string(&mut self, ptr: usize, known_len: Option<usize>) {
        let mut buf = [0u8; MAX_STR + 1];
        let len = if ptr == 0 {
            buf[..4].copy_from_slice(b"NULL");
            4
        } else {
            let want = known_len.map_or(buf.len(), |n| n.min(buf.len()));
            let got = crate::sys::read_self(ptr, &mut buf[..want]);
            if got == 0 && want > 0 {
                hex_pointer(ptr, &mut buf)
            } else {
                let s = &buf[..got];
                let mut n = match known_len {
                    Some(n) => n.min(got),
                    None => s.iter().position(|&b| b == 0).unwrap_or(got),
                };
                if n > MAX_STR || known_len.is_some_and(|k| k > MAX_STR) {
                    buf[MAX_STR - 3..MAX_STR].copy_from_slice(b"...");
                    n = MAX_STR;
                }
                n
            }
        };
        self.put(&(len as u16).to_le_bytes());
        self.put(&buf[..len]);
        self.pad(4);
    }
}

/// `<0x…>` for an unreadable pointer; returns the length.
fn hex_pointer(ptr: usize, buf: &mut [u8; MAX_STR + 1]) -> usize {
    let mut n = 0;
    for &b in b"<0x" {
        buf[n] = b;
        n += 1;
    }
    let digits = (usize::BITS - ptr.leading_zeros()).div_ceil(4).max(1);
    for i in (0..digits).rev() {
        buf[n] = b"0123456789abcdef"[(ptr >> (i * 4)) & 0xf];
        n += 1;
    }
    buf[n] = b'>';
    n + 1
}

/// The 8 bytes of integer register `r` (0 = rdi … 5 = r9).
#[inline]
fn int_reg(regs: &EntryRegs, r: u8) -> u64 {
    (match r {
        0 => regs.rdi,
        1 => regs.rsi,
        2 => regs.rdx,
        3 => regs.rcx,
        4 => regs.r8,
        _ => regs.r9,
    }) as u64
}

/// The 16 bytes of `xmm{x}` as two words (low first).
#[inline]
fn xmm_words(regs: &EntryRegs, x: u8) -> (u64, u64) {
    let b = regs.xmm[x as usize % 8];
    (
        u64::from_le_bytes(b[..8].try_into().unwrap_or([0; 8])),
        u64::from_le_bytes(b[8..].try_into().unwrap_or([0; 8])),
    )
}

/// The first 8 bytes of register `r`.
#[inline]
fn reg_word(regs: &EntryRegs, r: Register) -> u64 {
    match r {
        Register::Int(i) => int_reg(regs, i),
        Register::Xmm(x) => xmm_words(regs, x).0,
    }
}

/// The 8-byte word `k` words above the return slot (the caller's stack; `k` ≥ 1), read
/// directly when it lies in the stack page of the slot, else through `read_self` (zero when
/// unreadable).
#[inline]
fn stack_word(parent_loc: usize, k: u32) -> u64 {
    if parent_loc == 0 {
        return 0;
    }
    let addr = parent_loc.wrapping_add(8 * k as usize);
    if addr > parent_loc && addr / crate::sys::PAGE_SIZE == parent_loc / crate::sys::PAGE_SIZE {
        // SAFETY: `parent_loc` is a live return slot on this thread's stack, so its page is
        // mapped; `addr` is an aligned word of the same page.
        return unsafe { (addr as *const u64).read() };
    }
    let mut b = [0u8; 8];
    crate::sys::read_self(addr, &mut b);
    u64::from_le_bytes(b)
}

/// Writes one item whose first two register/stack words are `lo`, `hi` (the `xmm` bytes for
/// floats, the 10 bytes of a long double); a struct found in memory is copied from
/// `struct_at` (zeros where unreadable).
fn put_item(p: &mut Payload, cap: &Cap, lo: u64, hi: u64, struct_at: Option<usize>) {
    match cap.form {
        Form::Int => p.int(lo, cap.size),
        Form::Char => p.int(lo & 0xff, 1),
        Form::Str => p.string(lo as usize, None),
        Form::StdStr => {
            // libstdc++: `{ char *ptr; size_t len; ... }` at the address passed.
            let mut obj = [0u8; 16];
            if lo != 0 && crate::sys::read_self(lo as usize, &mut obj) == 16 {
                let ptr = u64::from_le_bytes(obj[..8].try_into().unwrap_or([0; 8]));
                let len = u64::from_le_bytes(obj[8..].try_into().unwrap_or([0; 8]));
                p.string(ptr as usize, Some(len as usize));
            } else {
                p.string(lo as usize, None);
            }
        }
        Form::Float => {
            let mut raw = [0u8; 16];
            raw[..8].copy_from_slice(&lo.to_le_bytes());
            raw[8..].copy_from_slice(&hi.to_le_bytes());
            p.put(&raw[..cap.size.min(16)]);
            p.pad(4);
        }
        Form::Struct => {
            let n = cap.size;
            match struct_at {
                Some(addr) => {
                    let mut chunk = [0u8; 64];
                    let mut done = 0;
                    while done < n {
                        let k = (n - done).min(chunk.len());
                        chunk[..k].fill(0);
                        if addr != 0 {
                            crate::sys::read_self(addr.wrapping_add(done), &mut chunk[..k]);
                        }
                        p.put(&chunk[..k]);
                        done += k;
                    }
                }
                None => {
                    let mut raw = [0u8; 16];
                    raw[..8].copy_from_slice(&lo.to_le_bytes());
                    raw[8..].copy_from_slice(&hi.to_le_bytes());
                    p.put(&raw[..n.min(16)]);
                }
            }
            p.pad(4);
        }
    }
}

/// Writes the ENTRY payload of `f` into `out` (at least `f.args_max` bytes); returns its
/// length (a multiple of 8).
#[inline]
pub fn entry_payload(f: &FuncArgs, regs: &EntryRegs, parent_loc: usize, out: &mut [u8]) -> usize {
    let mut p = Payload { out, len: 0 };
    for cap in &f.plan {
        let (lo, hi) = match cap.loc {
            Some(Location::Reg(r)) => (int_reg(regs, r), 0),
            Some(Location::RegPair(a, b)) => (reg_word(regs, a), reg_word(regs, b)),
            Some(Location::Xmm(x)) => xmm_words(regs, x),
            Some(Location::Stack(k)) => (
                stack_word(parent_loc, k),
                stack_word(parent_loc, k.saturating_add(1)),
            ),
            Some(Location::Return) | None => (0, 0),
        };
        let struct_at = match (cap.form, cap.loc) {
            // In memory on the caller's stack.
            (Form::Struct, Some(Location::Stack(k))) if parent_loc != 0 => {
                Some(parent_loc.wrapping_add(8 * k as usize))
            }
            (Form::Struct, Some(Location::Stack(_))) => Some(0),
            // Larger than the register: passed by invisible reference, the register holds
            // the address.
            (Form::Struct, Some(Location::Reg(_))) if cap.size > 8 => Some(lo as usize),
            _ => None,
        };
        put_item(&mut p, cap, lo, hi, struct_at);
    }
    p.pad(8);
    p.len
}

/// Writes the EXIT payload of `f` into `out` (at least `f.ret_max` bytes); returns its length
/// (a multiple of 8, 0 without a return item).
#[inline]
pub fn exit_payload(f: &FuncArgs, regs: &ExitRegs, out: &mut [u8]) -> usize {
    let Some(cap) = &f.ret_plan else {
        return 0;
    };
    let (lo, hi) = match cap.form {
        // A long double is returned in x87 st(0), read only for such a spec.
        Form::Float if cap.size == 10 => {
            let b = crate::cpu::read_st0().unwrap_or([0; 10]);
            (
                u64::from_le_bytes(b[..8].try_into().unwrap_or([0; 8])),
                u64::from(u16::from_le_bytes([b[8], b[9]])),
            )
        }
        Form::Float => (
            u64::from_le_bytes(regs.xmm0[..8].try_into().unwrap_or([0; 8])),
            u64::from_le_bytes(regs.xmm0[8..].try_into().unwrap_or([0; 8])),
        ),
        _ => (regs.rax as u64, regs.rdx as u64),
    };
    // Returned in memory: rax holds the caller's buffer.
    let struct_at = (cap.form == Form::Struct && cap.size > 16).then_some(regs.rax);
    let mut p = Payload { out, len: 0 };
    put_item(&mut p, cap, lo, hi, struct_at);
    p.pad(8);
    p.len
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::args::tests::item;
    use crate::args::MAX_PAYLOAD;
    use crate::frame_flags::RETVAL;
    use record_format::argspec::{decode_payload, ArgItem, ArgValue};

    fn regs() -> EntryRegs {
        // SAFETY: EntryRegs is plain integers and byte arrays: all-zero is valid.
        let mut r: EntryRegs = unsafe { core::mem::zeroed() };
        r.rdi = 7;
        r.rsi = c"hello".as_ptr() as usize;
        r.rdx = 0;
        r.rcx = 0xdead_0000; // unmapped
        r.r8 = b'z' as usize;
        r.xmm[0][..8].copy_from_slice(&2.5f64.to_le_bytes());
        r.xmm[1][..4].copy_from_slice(&1.5f32.to_le_bytes());
        r
    }

    #[test]
    fn entry_payload_decodes_with_the_same_items() {
        let items: Vec<ArgItem> = [
            "arg1/i32",
            "arg2/s",
            "arg3/s",
            "arg4/s",
            "arg5/c",
            "fparg1",
            "fparg2/32",
            "arg1",
        ]
        .iter()
        .map(|w| item(w))
        .collect();
        let mut buf = [0u8; MAX_PAYLOAD + 8];
        let f = FuncArgs::new(items.clone(), None);
        let n = entry_payload(&f, &regs(), 0, &mut buf);
        assert_eq!(n % 8, 0);
        let refs: Vec<&ArgItem> = items.iter().collect();
        let v = decode_payload(&refs, &buf[..n]).unwrap();
        assert_eq!(v[0], ArgValue::Int { raw: 7, size: 4 });
        assert_eq!(v[1], ArgValue::Str(b"hello".to_vec()));
        assert_eq!(v[2], ArgValue::Str(b"NULL".to_vec()));
        assert_eq!(v[3], ArgValue::Str(b"<0xdead0000>".to_vec()));
        assert_eq!(v[4], ArgValue::Char(b'z'));
        assert_eq!(v[5], ArgValue::Float(2.5));
        assert_eq!(v[6], ArgValue::Float(1.5));
        assert_eq!(v[7], ArgValue::Int { raw: 7, size: 8 });
        assert_eq!(
            record_format::argspec::payload_len(&refs, &buf[..n]),
            Some(n)
        );
    }

    #[test]
    fn long_strings_are_cut_like_uftrace() {
        let long = [b'a'; 300];
        let mut s = long.to_vec();
        s.push(0);
        let mut r = regs();
        r.rdi = s.as_ptr() as usize;
        let mut buf = [0u8; MAX_PAYLOAD + 8];
        let it = item("arg1/s");
        let f = FuncArgs::new(vec![it.clone()], None);
        let n = entry_payload(&f, &r, 0, &mut buf);
        let v = decode_payload(&[&it], &buf[..n]).unwrap();
        let ArgValue::Str(text) = &v[0] else {
            panic!("{v:?}")
        };
        assert_eq!(text.len(), 98);
        assert!(text.ends_with(b"a..."));
    }

    #[test]
    fn return_values() {
        let regs = ExitRegs {
            rax: 42,
            rdx: 0,
            xmm0: {
                let mut x = [0u8; 16];
                x[..8].copy_from_slice(&0.75f64.to_le_bytes());
                x
            },
            xmm1: [0; 16],
        };
        let mut buf = [0u8; MAX_PAYLOAD + 8];
        for (w, want) in [
            ("retval", ArgValue::Int { raw: 42, size: 8 }),
            ("retval/i32", ArgValue::Int { raw: 42, size: 4 }),
            ("retval/f64", ArgValue::Float(0.75)),
        ] {
            let it = item(w);
            let f = FuncArgs::new(Vec::new(), Some(it.clone()));
            let n = exit_payload(&f, &regs, &mut buf);
            assert_eq!(n, 8, "{w}");
            assert_eq!(decode_payload(&[&it], &buf[..n]).unwrap()[0], want, "{w}");
        }
    }

    /// Every kind of location: registers by name, pairs of any registers, stack words,
    /// long doubles on the stack, structs in memory and behind an invisible reference.
    #[test]
    fn locations_are_read_where_the_spec_says() {
        let big: [u64; 3] = [100, 200, 300];
        // The caller's stack above a return slot: [slot, 7, 8, long double 1.5 (2 words),
        // long double 4.0 (2 words), big (3 words)].
        let f80 = |v: u64, e: u16| [v, u64::from(e)];
        let mut stack = vec![0xdead_u64, 7, 8];
        stack.extend(f80(0xC000_0000_0000_0000, 16383));
        stack.extend(f80(0x8000_0000_0000_0000, 16385));
        stack.extend(big);
        let parent_loc = stack.as_ptr() as usize;
        let mut r = regs();
        r.rdx = 3;
        r.rcx = 4;
        r.rdi = big.as_ptr() as usize;
        let specs = [
            "arg1/t24:big%RDI",
            "arg2%stack1",
            "arg3/i32%stack+2",
            "arg4%RCX",
            "arg5%Rdx",
            "fparg1/80%stack+3",
            "fparg2/80",
            "fparg3%XMM0",
            "arg6/t16:ld%RDX+XMM0",
            "arg7/t16:dl%xmm0+rcx",
            "arg8/t12:ff%XMM1+XMM0",
            "arg9/t16:ll%rdx+rcx",
            "arg10/t24:big%stack+7",
            "arg11/t8:small%RDX",
        ];
        let items: Vec<ArgItem> = specs.iter().map(|w| item(w)).collect();
        let f = FuncArgs::new(items.clone(), None);
        let mut buf = [0u8; MAX_PAYLOAD + 8];
        let n = entry_payload(&f, &r, parent_loc, &mut buf);
        let refs: Vec<&ArgItem> = items.iter().collect();
        let v = decode_payload(&refs, &buf[..n]).unwrap();
        let bytes = |words: &[u64], n: usize| {
            let b: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
            ArgValue::Bytes(b[..n].to_vec())
        };
        let x0 = u64::from_le_bytes(r.xmm[0][..8].try_into().unwrap());
        let x1 = u64::from_le_bytes(r.xmm[1][..8].try_into().unwrap());
        assert_eq!(v[0], bytes(&big, 24));
        assert_eq!(v[1], ArgValue::Int { raw: 7, size: 8 });
        assert_eq!(v[2], ArgValue::Int { raw: 8, size: 4 });
        assert_eq!(v[3], ArgValue::Int { raw: 4, size: 8 });
        assert_eq!(v[4], ArgValue::Int { raw: 3, size: 8 });
        assert_eq!(v[5], ArgValue::LongDouble(1.5));
        // The second long double of the spec: stack words 5 and 6 by default.
        assert_eq!(v[6], ArgValue::LongDouble(4.0));
        assert_eq!(v[7], ArgValue::Float(2.5));
        assert_eq!(v[8], bytes(&[3, x0], 16));
        assert_eq!(v[9], bytes(&[x0, 4], 16));
        assert_eq!(v[10], bytes(&[x1, x0], 12));
        assert_eq!(v[11], bytes(&[3, 4], 16));
        assert_eq!(v[12], bytes(&big, 24));
        assert_eq!(v[13], bytes(&[3], 8));
        // An unreadable address and no stack (a `-finstrument-functions` hook): zeros.
        r.rdi = 0xdead_0000;
        let n = entry_payload(&f, &r, 0, &mut buf);
        let v = decode_payload(&refs, &buf[..n]).unwrap();
        assert_eq!(v[0], ArgValue::Bytes(vec![0; 24]));
        assert_eq!(v[1], ArgValue::Int { raw: 0, size: 8 });
        assert_eq!(v[5], ArgValue::LongDouble(0.0));
        assert_eq!(v[12], ArgValue::Bytes(vec![0; 24]));
    }

    /// `retval/f80` copies x87 st(0) and leaves the x87 stack and flags as they were; with
    /// st(0) empty (a wrong spec) it records zero and raises nothing.
    #[test]
    fn long_double_return_values() {
        let regs = ExitRegs {
            rax: 42,
            rdx: 0,
            xmm0: [0; 16],
            xmm1: [0; 16],
        };
        let it = item("retval/f80");
        let f = FuncArgs::new(Vec::new(), Some(it.clone()));
        assert_eq!(f.ret_flags(), RETVAL);
        let mut buf = [0u8; MAX_PAYLOAD + 8];
        let mut six = [0u8; 10];
        six[..8].copy_from_slice(&0xC000_0000_0000_0000u64.to_le_bytes());
        six[8..].copy_from_slice(&16385u16.to_le_bytes());
        // SAFETY: `six` is 10 readable bytes; the pop below balances the push.
        unsafe { crate::arch::test_push_st0(&six) };
        let n = exit_payload(&f, &regs, &mut buf);
        let again = crate::cpu::read_st0();
        // SAFETY: st(0) holds the value pushed above.
        let flags = unsafe { crate::arch::test_pop_st0() };
        assert_eq!(flags, 0);
        assert_eq!(again, Some(six));
        assert_eq!(n, 16);
        assert_eq!(&buf[..10], &six);
        assert_eq!(
            decode_payload(&[&it], &buf[..n]).unwrap()[0],
            ArgValue::LongDouble(6.0)
        );
        assert_eq!(crate::arch::test_x87_exceptions(), 0);
        assert_eq!(crate::cpu::read_st0(), None);
        let n = exit_payload(&f, &regs, &mut buf);
        assert_eq!(
            decode_payload(&[&it], &buf[..n]).unwrap()[0],
            ArgValue::LongDouble(0.0)
        );
        assert_eq!(crate::arch::test_x87_exceptions(), 0);
    }
}
