//! Running relocated code: the prologue of a real function is relocated to a page mapped
//! near it (or far from it, for the absolute forms), the copy is called as if it were the
//! function, and its result compared with the original's. The continuation jumps back into
//! the untouched original.

use super::*;
use std::ffi::{c_int, c_void};
use std::mem::transmute;

/// An anonymous read-write-execute page of the test process.
pub(super) struct Page {
    ptr: *mut c_void,
}

impl Page {
    fn map(hint: u64, flags: c_int) -> Option<Page> {
        // SAFETY: a fresh anonymous mapping; with MAP_FIXED_NOREPLACE it never replaces one.
        let ptr = unsafe {
            libc::mmap(
                hint as *mut c_void,
                4096,
                libc::PROT_READ | libc::PROT_WRITE | libc::PROT_EXEC,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | flags,
                -1,
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return None;
        }
        let page = Page { ptr };
        (flags == 0 || ptr as u64 == hint).then_some(page)
    }

    /// A page within ±1 GiB of `addr`.
    pub(super) fn near(addr: u64) -> Option<Page> {
        let base = addr & !0xffff;
        (1..64u64)
            .flat_map(|i| [base.wrapping_sub(i << 24), base.wrapping_add(i << 24)])
            .find_map(|hint| Page::map(hint, libc::MAP_FIXED_NOREPLACE))
    }

    /// A page wherever the kernel likes (usually far from the executable).
    fn anywhere() -> Option<Page> {
        Page::map(0, 0)
    }

    pub(super) fn addr(&self) -> u64 {
        self.ptr as u64
    }

    /// Copies `code` to the start of the page; returns its address.
    fn place(&self, code: &[u8]) -> u64 {
        assert!(code.len() <= 4096);
        // SAFETY: the page is 4096 writable bytes owned by `self`.
        unsafe { std::ptr::copy_nonoverlapping(code.as_ptr(), self.ptr.cast::<u8>(), code.len()) };
        self.addr()
    }
}

impl Drop for Page {
    fn drop(&mut self) {
        // SAFETY: the mapping was made by Page::map and nothing refers to it any more.
        unsafe { libc::munmap(self.ptr, 4096) };
    }
}

/// Relocates `func` (at `addr`) to `page` and places the code there; the address to call.
pub(super) fn relocated_at(func: &[u8], addr: u64, page: &Page) -> Result<u64, Refusal> {
    let skip = if func.starts_with(&[0xf3, 0x0f, 0x1e, 0xfa]) {
        4
    } else {
        0
    };
    let r = relocate(func, addr, skip, page.addr())?;
    assert!(r.code.len() <= MAX_RELOCATED);
    Ok(page.place(&r.code))
}

// Small functions whose first instructions exercise each rule. The branches and calls are
// written as bytes so that the assembler cannot choose another encoding.
std::arch::global_asm!(
    ".pushsection .data",
    ".p2align 3",
    "utrace_reloc_data: .quad 1000, 2000",
    "utrace_reloc_scratch: .quad 0",
    "utrace_reloc_dbl: .double 2.5",
    ".popsection",
    ".text",
    ".p2align 4",
    ".globl utrace_reloc_t_load, utrace_reloc_t_load_end",
    "utrace_reloc_t_load:",
    "    mov rax, qword ptr [rip + utrace_reloc_data]",
    "    add rax, rdi",
    "    ret",
    "utrace_reloc_t_load_end:",
    ".globl utrace_reloc_t_lea, utrace_reloc_t_lea_end",
    "utrace_reloc_t_lea:",
    "    lea rax, [rip + utrace_reloc_data]",
    "    mov rax, qword ptr [rax + 8]",
    "    add rax, rdi",
    "    ret",
    "utrace_reloc_t_lea_end:",
    ".globl utrace_reloc_t_store, utrace_reloc_t_store_end",
    "utrace_reloc_t_store:",
    "    mov qword ptr [rip + utrace_reloc_scratch], rdi",
    "    mov rax, qword ptr [rip + utrace_reloc_scratch]",
    "    add rax, 1",
    "    ret",
    "utrace_reloc_t_store_end:",
    ".globl utrace_reloc_t_cmp, utrace_reloc_t_cmp_end",
    "utrace_reloc_t_cmp:",
    "    cmp dword ptr [rip + utrace_reloc_data], 999",
    "    setg al",
    "    movzx eax, al",
    "    add rax, rdi",
    "    ret",
    "utrace_reloc_t_cmp_end:",
    ".globl utrace_reloc_t_sse, utrace_reloc_t_sse_end",
    "utrace_reloc_t_sse:",
    "    movsd xmm1, qword ptr [rip + utrace_reloc_dbl]",
    "    addsd xmm0, xmm1",
    "    ret",
    "utrace_reloc_t_sse_end:",
    ".globl utrace_reloc_t_call, utrace_reloc_t_call_end",
    "utrace_reloc_t_call:",
    "    .byte 0xe8",
    "    .long utrace_reloc_double - . - 4",
    "    add rax, 1",
    "    ret",
    "utrace_reloc_t_call_end:",
    ".globl utrace_reloc_t_ret_addr, utrace_reloc_t_ret_addr_end",
    "utrace_reloc_t_ret_addr:",
    "    .byte 0xe8",
    "    .long utrace_reloc_own_ret - . - 4",
    "    ret",
    "utrace_reloc_t_ret_addr_end:",
    ".globl utrace_reloc_t_jcc, utrace_reloc_t_jcc_end",
    "utrace_reloc_t_jcc:",
    "    test rdi, rdi",
    "    .byte 0x74, .Lutrace_reloc_zero - . - 1",
    "    mov eax, 1",
    "    ret",
    ".Lutrace_reloc_zero:",
    "    mov eax, 2",
    "    ret",
    "utrace_reloc_t_jcc_end:",
    ".globl utrace_reloc_t_loop, utrace_reloc_t_loop_end",
    "utrace_reloc_t_loop:",
    ".Lutrace_reloc_loop:",
    "    add esi, edi",
    "    dec edi",
    "    .byte 0x75, .Lutrace_reloc_loop - . - 1",
    "    mov eax, esi",
    "    ret",
    "utrace_reloc_t_loop_end:",
    ".globl utrace_reloc_t_loop2, utrace_reloc_t_loop2_end",
    "utrace_reloc_t_loop2:",
    "    mov eax, edi",
    ".Lutrace_reloc_loop2:",
    "    dec edi",
    "    .byte 0x75, .Lutrace_reloc_loop2 - . - 1",
    "    add eax, 1",
    "    ret",
    "utrace_reloc_t_loop2_end:",
    ".globl utrace_reloc_t_short_jmp, utrace_reloc_t_short_jmp_end",
    "utrace_reloc_t_short_jmp:",
    "    mov eax, edi",
    "    add eax, eax",
    "    .byte 0xeb, .Lutrace_reloc_out - . - 1",
    "    int3",
    "    int3",
    ".Lutrace_reloc_out:",
    "    add eax, 7",
    "    ret",
    "utrace_reloc_t_short_jmp_end:",
    ".globl utrace_reloc_t_tail, utrace_reloc_t_tail_end",
    "utrace_reloc_t_tail:",
    "    .byte 0xe9",
    "    .long utrace_reloc_double - . - 4",
    "utrace_reloc_t_tail_end:",
    "utrace_reloc_double:",
    "    lea rax, [rdi + rdi]",
    "    ret",
    "utrace_reloc_own_ret:",
    "    mov rax, qword ptr [rsp]",
    "    ret",
);

extern "C" {
    static utrace_reloc_t_load: u8;
    static utrace_reloc_t_load_end: u8;
    static utrace_reloc_t_lea: u8;
    static utrace_reloc_t_lea_end: u8;
    static utrace_reloc_t_store: u8;
    static utrace_reloc_t_store_end: u8;
    static utrace_reloc_t_cmp: u8;
    static utrace_reloc_t_cmp_end: u8;
    static utrace_reloc_t_sse: u8;
    static utrace_reloc_t_sse_end: u8;
    static utrace_reloc_t_call: u8;
    static utrace_reloc_t_call_end: u8;
    static utrace_reloc_t_ret_addr: u8;
    static utrace_reloc_t_ret_addr_end: u8;
    static utrace_reloc_t_jcc: u8;
    static utrace_reloc_t_jcc_end: u8;
    static utrace_reloc_t_loop: u8;
    static utrace_reloc_t_loop_end: u8;
    static utrace_reloc_t_loop2: u8;
    static utrace_reloc_t_loop2_end: u8;
    static utrace_reloc_t_short_jmp: u8;
    static utrace_reloc_t_short_jmp_end: u8;
    static utrace_reloc_t_tail: u8;
    static utrace_reloc_t_tail_end: u8;
}

/// The bytes between two labels of the assembly above.
fn code_between(start: &u8, end: &u8) -> &'static [u8] {
    let (s, e) = (start as *const u8, end as *const u8);
    assert!(e > s);
    // SAFETY: both labels delimit one function in the test binary's text, mapped readable.
    unsafe { std::slice::from_raw_parts(s, e as usize - s as usize) }
}

macro_rules! asm_fn {
    ($start:ident, $end:ident) => {
        // SAFETY: only the addresses of the labels are taken.
        code_between(unsafe { &$start }, unsafe { &$end })
    };
}

type IntFn = extern "C" fn(u64, u64) -> u64;

/// Calls `addr` as an `IntFn`.
fn call_int(addr: u64, a: u64, b: u64) -> u64 {
    // SAFETY: `addr` is one of the functions above or its relocated copy, which take at most
    // two integer arguments and return one.
    let f = unsafe { transmute::<usize, IntFn>(addr as usize) };
    f(a, b)
}

/// A test function: name, bytes, whether it has a RIP-relative operand, argument pairs.
type IntCase = (&'static str, &'static [u8], bool, Vec<(u64, u64)>);

/// The integer test functions with the arguments they are called with.
fn int_cases() -> Vec<IntCase> {
    let args = |v: &[u64]| v.iter().map(|&a| (a, 5)).collect::<Vec<_>>();
    vec![
        (
            "load",
            asm_fn!(utrace_reloc_t_load, utrace_reloc_t_load_end),
            true,
            args(&[0, 7]),
        ),
        (
            "lea",
            asm_fn!(utrace_reloc_t_lea, utrace_reloc_t_lea_end),
            true,
            args(&[1, 9]),
        ),
        (
            "store",
            asm_fn!(utrace_reloc_t_store, utrace_reloc_t_store_end),
            true,
            args(&[3, 41]),
        ),
        (
            "cmp",
            asm_fn!(utrace_reloc_t_cmp, utrace_reloc_t_cmp_end),
            true,
            args(&[0, 10]),
        ),
        (
            "call",
            asm_fn!(utrace_reloc_t_call, utrace_reloc_t_call_end),
            false,
            args(&[0, 21]),
        ),
        (
            "ret_addr",
            asm_fn!(utrace_reloc_t_ret_addr, utrace_reloc_t_ret_addr_end),
            false,
            args(&[0]),
        ),
        (
            "jcc",
            asm_fn!(utrace_reloc_t_jcc, utrace_reloc_t_jcc_end),
            false,
            args(&[0, 1, 2]),
        ),
        (
            "loop",
            asm_fn!(utrace_reloc_t_loop, utrace_reloc_t_loop_end),
            false,
            args(&[1, 10, 100]),
        ),
        (
            "loop2",
            asm_fn!(utrace_reloc_t_loop2, utrace_reloc_t_loop2_end),
            false,
            args(&[1, 10]),
        ),
        (
            "short_jmp",
            asm_fn!(utrace_reloc_t_short_jmp, utrace_reloc_t_short_jmp_end),
            false,
            args(&[0, 4]),
        ),
        (
            "tail",
            asm_fn!(utrace_reloc_t_tail, utrace_reloc_t_tail_end),
            false,
            args(&[3, 8]),
        ),
    ]
}

#[test]
fn reloc_exec_small_functions_near() {
    for (name, func, _, args) in int_cases() {
        let addr = func.as_ptr() as u64;
        let page = Page::near(addr).expect("a page near the test binary");
        let dest = relocated_at(func, addr, &page).unwrap_or_else(|e| panic!("{name}: {e:?}"));
        for (a, b) in args {
            let want = call_int(addr, a, b);
            assert_eq!(call_int(dest, a, b), want, "{name}({a}, {b})");
        }
    }
    // The callee of a displaced call sees the original return address.
    let func = asm_fn!(utrace_reloc_t_ret_addr, utrace_reloc_t_ret_addr_end);
    let addr = func.as_ptr() as u64;
    let page = Page::near(addr).expect("a page");
    let dest = relocated_at(func, addr, &page).expect("relocatable");
    assert_eq!(call_int(dest, 0, 0), addr + 5);
    // Floating point: an SSE load from RIP.
    let func = asm_fn!(utrace_reloc_t_sse, utrace_reloc_t_sse_end);
    let addr = func.as_ptr() as u64;
    let page = Page::near(addr).expect("a page");
    let dest = relocated_at(func, addr, &page).expect("relocatable");
    type FloatFn = extern "C" fn(f64) -> f64;
    // SAFETY: both are the `double (double)` function above.
    let (orig, copy) = unsafe {
        (
            transmute::<usize, FloatFn>(addr as usize),
            transmute::<usize, FloatFn>(dest as usize),
        )
    };
    assert_eq!(copy(1.25), orig(1.25));
    assert_eq!(copy(1.25), 3.75);
}

#[test]
fn reloc_exec_small_functions_far() {
    let page = Page::anywhere().expect("a page");
    let mut far = 0;
    for (name, func, rip_relative, args) in int_cases() {
        let addr = func.as_ptr() as u64;
        if page.addr().abs_diff(addr) < 1 << 32 {
            continue;
        }
        far += 1;
        let result = relocated_at(func, addr, &page);
        if rip_relative {
            assert_eq!(
                result,
                Err(Refusal::Unsupported("rip-relative out of reach".into()))
            );
            continue;
        }
        let dest = result.unwrap_or_else(|e| panic!("{name}: {e:?}"));
        for (a, b) in args {
            assert_eq!(
                call_int(dest, a, b),
                call_int(addr, a, b),
                "{name}({a}, {b}) far"
            );
        }
    }
    eprintln!("{far} functions relocated out of rel32 reach");
}
