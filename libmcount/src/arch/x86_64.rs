//! Every x86_64 trampoline, and the thread-local slot that holds the thread's state.
//!
//! Stacks at the first instruction of each trampoline (8-byte words, higher addresses up):
//!
//! ```text
//!  mcount (gcc -pg)                       __fentry__ (gcc -pg -mfentry)
//!  parent_loc+8  caller's stack args      parent_loc+8  caller's stack args
//!  parent_loc    return addr -> parent    parent_loc    return addr -> parent  = rsp+8
//!  child rbp ->  parent's saved rbp       rsp ->        return addr -> child   = child_ip
//!                child's saved regs,                    (rsp % 16 == 0; rbp is the parent's)
//!                locals
//!  rsp ->        return addr -> child = child_ip
//!  (rsp % 16 == 8; parent_loc = child rbp + 8)
//!
//!  exit trampoline (reached by the child's `ret` through the hijacked slot)
//!  parent_loc+8  caller's data      <- rsp (normally rsp % 16 == 0)
//!  parent_loc    the hijacked slot, now free: receives the real return address
//! ```
//!
//! Entry trampolines: `push rbp; mov rbp, rsp` (a normal frame), reserve an [`EntryRegs`] area
//! aligned to 16 bytes (the Rust handler needs the ABI alignment; `rsp % 16` differs between
//! the two hooks), save the argument registers `rdi rsi rdx rcx r8 r9`, `rax` (`al` = vector
//! count of variadic callees), `r10` (static chain), `r11`, and `xmm0-7` (float arguments:
//! Rust code does use SSE registers), call the handler with `(parent_loc, child_ip, regs)`,
//! restore, `leave; ret`. `endbr64` first, for IBT.
//!
//! Exit trampoline: `sub rsp, 8` turns the freed slot back into the return-address word,
//! then a frame with an [`ExitRegs`] area saves the return-value registers `rax rdx xmm0 xmm1`
//! (other scratch registers are dead at a return in compiler-generated code), calls the exit
//! handler with `(regs, parent_loc)`, stores its result (the original return address) into
//! the slot, restores and `ret`s there. x87 `st0/st1` (`long double` returns) are left alone:
//! Rust code never uses x87.
//!
//! Thread pointer: an 8-byte `.tbss` object accessed with the initial-exec model
//! (`mov sym@gottpoff(%rip)`, then `%fs:`), two instructions and no call. Stable Rust has no
//! `#[thread_local]` and `thread_local!` compiles to `__tls_get_addr` calls in a shared object;
//! the initial-exec model needs static TLS space, which a library loaded at start-up by
//! `LD_PRELOAD` always gets (it would fail only for `dlopen`). The object is hidden, so it is
//! not exported.

use crate::entry::{mcount_entry, mcount_exit};
use core::arch::{asm, global_asm, naked_asm};
use core::mem::{offset_of, size_of};

/// Registers saved by the entry trampolines (the traced function's arguments).
#[repr(C, align(16))]
#[derive(Debug)]
pub struct EntryRegs {
    pub rdi: usize,
    pub rsi: usize,
    pub rdx: usize,
    pub rcx: usize,
    pub r8: usize,
    pub r9: usize,
    pub rax: usize,
    pub r10: usize,
    pub r11: usize,
    _pad: usize,
    pub xmm: [[u8; 16]; 8],
}

/// Registers saved by the exit trampoline (the return value).
#[repr(C, align(16))]
#[derive(Debug)]
pub struct ExitRegs {
    pub rax: usize,
    pub rdx: usize,
    pub xmm0: [u8; 16],
    pub xmm1: [u8; 16],
}

const ENTRY_SIZE: usize = size_of::<EntryRegs>();
const EXIT_SIZE: usize = size_of::<ExitRegs>();
const XMM: usize = offset_of!(EntryRegs, xmm);
const _: () = {
    assert!(ENTRY_SIZE == 208 && ENTRY_SIZE.is_multiple_of(16));
    assert!(XMM.is_multiple_of(16));
    assert!(EXIT_SIZE.is_multiple_of(16));
    assert!(offset_of!(ExitRegs, xmm0).is_multiple_of(16));
    assert!(offset_of!(ExitRegs, xmm1).is_multiple_of(16));
};

/// One entry trampoline; `$parent_loc` leaves the return-slot address in `rdi` (rbp = the
/// trampoline's own frame).
macro_rules! entry_trampoline {
    ($(#[$attr:meta])* $name:ident, $parent_loc:literal) => {
        $(#[$attr])*
        #[unsafe(naked)]
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $name() {
            naked_asm!(
                "endbr64",
                "push rbp",
                "mov rbp, rsp",
                "sub rsp, {size}",
                "and rsp, -16",
                "mov [rsp + {rdi}], rdi",
                "mov [rsp + {rsi}], rsi",
                "mov [rsp + {rdx}], rdx",
                "mov [rsp + {rcx}], rcx",
                "mov [rsp + {r8}], r8",
                "mov [rsp + {r9}], r9",
                "mov [rsp + {rax}], rax",
                "mov [rsp + {r10}], r10",
                "mov [rsp + {r11}], r11",
                "movaps [rsp + {xmm}], xmm0",
                "movaps [rsp + {xmm} + 16], xmm1",
                "movaps [rsp + {xmm} + 32], xmm2",
                "movaps [rsp + {xmm} + 48], xmm3",
                "movaps [rsp + {xmm} + 64], xmm4",
                "movaps [rsp + {xmm} + 80], xmm5",
                "movaps [rsp + {xmm} + 96], xmm6",
                "movaps [rsp + {xmm} + 112], xmm7",
                $parent_loc,
                "mov rsi, [rbp + 8]",
                "mov rdx, rsp",
                "call {handler}",
                "movaps xmm0, [rsp + {xmm}]",
                "movaps xmm1, [rsp + {xmm} + 16]",
                "movaps xmm2, [rsp + {xmm} + 32]",
                "movaps xmm3, [rsp + {xmm} + 48]",
                "movaps xmm4, [rsp + {xmm} + 64]",
                "movaps xmm5, [rsp + {xmm} + 80]",
                "movaps xmm6, [rsp + {xmm} + 96]",
                "movaps xmm7, [rsp + {xmm} + 112]",
                "mov rdi, [rsp + {rdi}]",
                "mov rsi, [rsp + {rsi}]",
                "mov rdx, [rsp + {rdx}]",
                "mov rcx, [rsp + {rcx}]",
                "mov r8, [rsp + {r8}]",
                "mov r9, [rsp + {r9}]",
                "mov rax, [rsp + {rax}]",
                "mov r10, [rsp + {r10}]",
                "mov r11, [rsp + {r11}]",
                "leave",
                "ret",
                size = const ENTRY_SIZE,
                rdi = const offset_of!(EntryRegs, rdi),
                rsi = const offset_of!(EntryRegs, rsi),
                rdx = const offset_of!(EntryRegs, rdx),
                rcx = const offset_of!(EntryRegs, rcx),
                r8 = const offset_of!(EntryRegs, r8),
                r9 = const offset_of!(EntryRegs, r9),
                rax = const offset_of!(EntryRegs, rax),
                r10 = const offset_of!(EntryRegs, r10),
                r11 = const offset_of!(EntryRegs, r11),
                xmm = const XMM,
                handler = sym mcount_entry,
            )
        }
    };
}

entry_trampoline!(
    /// `gcc -pg`: called after the prologue; the child's frame pointer locates the return slot.
    ///
    /// # Safety
    /// Only instrumented code may call it, with the stack described in the module docs.
    mcount,
    "mov rdi, [rbp]\nadd rdi, 8"
);

entry_trampoline!(
    /// `gcc -pg -mfentry`: called as the first instruction; the slot is right above the hook's
    /// own return address.
    ///
    /// # Safety
    /// Only instrumented code may call it, with the stack described in the module docs.
    __fentry__,
    "lea rdi, [rbp + 16]"
);

/// The gprof spelling of [`mcount`].
///
/// # Safety
/// As for [`mcount`].
#[unsafe(naked)]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn _mcount() {
    naked_asm!("endbr64", "jmp {m}", m = sym mcount)
}

/// Where hijacked functions return to; never called directly.
///
/// # Safety
/// Reached only through a return slot that the entry handler hijacked.
#[unsafe(naked)]
pub unsafe extern "C" fn exit_trampoline() {
    naked_asm!(
        "sub rsp, 8",
        "push rbp",
        "mov rbp, rsp",
        "sub rsp, {size}",
        "and rsp, -16",
        "mov [rsp + {rax}], rax",
        "mov [rsp + {rdx}], rdx",
        "movaps [rsp + {xmm0}], xmm0",
        "movaps [rsp + {xmm1}], xmm1",
        "mov rdi, rsp",
        "lea rsi, [rbp + 8]",
        "call {handler}",
        "mov [rbp + 8], rax",
        "movaps xmm0, [rsp + {xmm0}]",
        "movaps xmm1, [rsp + {xmm1}]",
        "mov rdx, [rsp + {rdx}]",
        "mov rax, [rsp + {rax}]",
        "leave",
        "ret",
        size = const EXIT_SIZE,
        rax = const offset_of!(ExitRegs, rax),
        rdx = const offset_of!(ExitRegs, rdx),
        xmm0 = const offset_of!(ExitRegs, xmm0),
        xmm1 = const offset_of!(ExitRegs, xmm1),
        handler = sym mcount_exit,
    )
}

/// A thunk for a function that starts or resumes unwinding: call `$prepare(caller's sp)`
/// with the argument registers saved (three pushes keep `rsp % 16 == 0` at the call), then
/// tail-jump to the real function it returns, so no libmcount frame is on the stack while the
/// unwinder runs.
macro_rules! unwind_thunk {
    ($(#[$attr:meta])* $name:ident, $prepare:path) => {
        $(#[$attr])*
        #[unsafe(naked)]
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $name() {
            naked_asm!(
                "endbr64",
                "push rdi",
                "push rsi",
                "push rdx",
                "lea rdi, [rsp + 32]",
                "call {prepare}",
                "pop rdx",
                "pop rsi",
                "pop rdi",
                "jmp rax",
                prepare = sym $prepare,
            )
        }
    };
}

unwind_thunk!(
    /// Interposed `__cxa_throw`: restores hijacked return slots first (see `unwind`).
    ///
    /// # Safety
    /// As libstdc++'s `__cxa_throw`.
    __cxa_throw,
    crate::unwind::prepare_throw
);

unwind_thunk!(
    /// Interposed `__cxa_rethrow`.
    ///
    /// # Safety
    /// As libstdc++'s `__cxa_rethrow`.
    __cxa_rethrow,
    crate::unwind::prepare_rethrow
);

unwind_thunk!(
    /// Interposed `_Unwind_Resume` (called at the end of every cleanup landing pad).
    ///
    /// # Safety
    /// As libgcc's `_Unwind_Resume`.
    _Unwind_Resume,
    crate::unwind::prepare_resume
);

/// Interposed `__cxa_begin_catch`: passes the address of its own return slot to
/// `unwind::begin_catch` and tail-jumps there.
///
/// # Safety
/// As libstdc++'s `__cxa_begin_catch`.
#[unsafe(naked)]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn __cxa_begin_catch() {
    naked_asm!(
        "endbr64",
        "mov rsi, rsp",
        "jmp {handler}",
        handler = sym crate::unwind::begin_catch,
    )
}

/// Interposed `backtrace`: passes the caller's stack pointer to `unwind::backtrace` and
/// tail-jumps there.
///
/// # Safety
/// As glibc's `backtrace`.
#[unsafe(naked)]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn backtrace() {
    naked_asm!(
        "endbr64",
        "lea rdx, [rsp + 8]",
        "jmp {handler}",
        handler = sym crate::unwind::backtrace,
    )
}

/// Address written into hijacked return slots.
#[inline]
pub fn exit_trampoline_addr() -> usize {
    exit_trampoline as *const () as usize
}

global_asm!(
    ".pushsection .tbss,\"awT\",@nobits",
    ".p2align 3",
    ".globl utrace_thread_state",
    ".hidden utrace_thread_state",
    ".type utrace_thread_state,@object",
    ".size utrace_thread_state, 8",
    "utrace_thread_state:",
    ".zero 8",
    ".popsection",
);

/// The calling thread's state word (0 until set).
#[inline(always)]
pub fn tls_get() -> usize {
    let v: usize;
    // SAFETY: reads the calling thread's own 8-byte TLS object; no other memory is touched.
    unsafe {
        asm!(
            "movq utrace_thread_state@gottpoff(%rip), {v}",
            "movq %fs:({v}), {v}",
            v = out(reg) v,
            options(att_syntax, nostack, readonly, preserves_flags),
        );
    }
    v
}

/// Sets the calling thread's state word.
#[inline(always)]
pub fn tls_set(v: usize) {
    // SAFETY: writes the calling thread's own 8-byte TLS object only.
    unsafe {
        asm!(
            "movq utrace_thread_state@gottpoff(%rip), {t}",
            "movq {v}, %fs:({t})",
            t = out(reg) _,
            v = in(reg) v,
            options(att_syntax, nostack, preserves_flags),
        );
    }
}
