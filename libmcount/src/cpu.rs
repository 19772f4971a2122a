//! What the handlers need from the machine, below every other module: the register areas the
//! trampolines save for them ([`EntryRegs`], [`ExitRegs`]), the thread pointer slot
//! ([`tls_get`], [`tls_set`]), x87 `st(0)` for `long double` return values ([`read_st0`]),
//! the address of the exit trampoline that hijacked return slots point to
//! ([`exit_trampoline_addr`]) and that of the PLT hook ([`plt_hook_addr`]).
//!
//! The trampolines themselves are in [`crate::arch`], the top layer: they call the handlers of
//! `entry`, `unwind` and `dlopen`, which use this module, so neither side imports the other's
//! module in both directions. The two trampolines whose addresses the handlers store, and the
//! `st(0)` reader, are reached through their symbol names.
//!
//! Thread pointer: an 8-byte `.tbss` object accessed with the initial-exec model
//! (`mov sym@gottpoff(%rip)`, then `%fs:`), two instructions and no call. Stable Rust has no
//! `#[thread_local]` and `thread_local!` compiles to `__tls_get_addr` calls in a shared object;
//! the initial-exec model needs static TLS space, which a library loaded at start-up by
//! `LD_PRELOAD` always gets; loaded by `dlopen` (`utrace record -p`, see `attach`) it takes
//! room from glibc's static TLS surplus, which holds libmcount's 128 bytes of TLS. The object is hidden, so it is
//! not exported; the trampolines' fast paths read it by the same name.

use core::arch::{asm, global_asm};

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

/// Registers saved by the dynamic entry and exit trampolines (full dynamic patching, runtime
/// spec §2.5): every scratch register, since `-O2` callers keep values in the ones the
/// patched function does not touch. `regs` is what the handlers read (arguments, or `rax`
/// `rdx` `xmm0` `xmm1` for a return value).
#[repr(C, align(16))]
#[derive(Debug)]
pub struct DynRegs {
    pub regs: EntryRegs,
    /// `xmm8-15`.
    pub xmm_hi: [[u8; 16]; 8],
}

/// Address written into the return slots of frames entered through the dynamic entry
/// trampoline (`frame_flags::DYN_EXIT`): arch's dynamic exit trampoline.
#[inline]
pub fn dyn_exit_trampoline_addr() -> usize {
    utrace_dyn_exit_trampoline as *const () as usize
}

/// Address the stubs of fully patched functions jump to: arch's dynamic entry trampoline.
#[inline]
pub fn dyn_entry_trampoline_addr() -> usize {
    utrace_dyn_entry_trampoline as *const () as usize
}

/// Address of the `__fentry__` trampoline (`-pg -mfentry`), where the stubs of NOP-patched
/// functions jump.
#[inline]
pub fn fentry_addr() -> usize {
    __fentry__ as *const () as usize
}

/// The exit trampoline a frame's hijacked slot holds (`frame_flags::DYN_EXIT` or not).
#[inline]
pub fn exit_trampoline_for(flags: u16) -> usize {
    if flags & crate::frame_flags::DYN_EXIT != 0 {
        dyn_exit_trampoline_addr()
    } else {
        exit_trampoline_addr()
    }
}

/// Address written into hijacked return slots: arch's exit trampoline.
#[inline]
pub fn exit_trampoline_addr() -> usize {
    utrace_exit_trampoline as *const () as usize
}

/// Address the PLT stubs jump to: arch's PLT hook.
#[inline]
pub fn plt_hook_addr() -> usize {
    utrace_plt_hook as *const () as usize
}

unsafe extern "C" {
    /// The exit trampoline (`arch::exit_trampoline`, defined under this name). Never called
    /// from Rust: only its address is taken.
    fn utrace_exit_trampoline();
    /// The PLT hook (`arch::plt_hook`, defined under this name); address only, as above.
    fn utrace_plt_hook();
    /// `arch::dynamic::dyn_exit_trampoline`, defined under this name; address only.
    fn utrace_dyn_exit_trampoline();
    /// `arch::dynamic::dyn_entry_trampoline`, defined under this name; address only.
    fn utrace_dyn_entry_trampoline();
    /// `arch::__fentry__` (exported under its own name); address only.
    fn __fentry__();
    /// `arch::read_st0`, defined under this name.
    fn utrace_read_st0(out: *mut [u8; 10]) -> u32;
}

/// The x87 `st(0)` register's 10 bytes (a `long double` return value), `None` when it is
/// empty. Call it only for a function whose spec says it returns a `long double`, and only
/// from the exit handler, before anything else could use x87 (Rust code never does); the
/// program's x87 flags are left as they were (see `arch::read_st0`).
#[inline]
pub fn read_st0() -> Option<[u8; 10]> {
    let mut out = [0u8; 10];
    // SAFETY: `out` is a local array of 10 bytes; the function writes nothing else and keeps
    // the x87 stack and exception flags as they were.
    let full = unsafe { utrace_read_st0(&mut out) };
    (full != 0).then_some(out)
}

// Hidden: the trampolines are found by address inside the library, never through the dynamic
// symbol table, and the traced program must not see them (the definition's `.globl` and these
// references merge to the most constraining visibility at link time).
global_asm!(
    ".hidden utrace_exit_trampoline",
    ".hidden utrace_plt_hook",
    ".hidden utrace_read_st0",
    ".hidden utrace_dyn_exit_trampoline",
    ".hidden utrace_dyn_entry_trampoline"
);

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
