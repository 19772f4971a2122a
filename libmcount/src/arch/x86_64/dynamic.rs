//! The trampolines of full dynamic patching (runtime spec §11.3): functions of ordinary `-O2`
//! code whose first instructions were moved out of line and replaced by `call stub`, the stub
//! being `jmp [rip]` to [`dyn_entry_trampoline`] in a page next to the module (`patch::near`).
//!
//! Such code uses IPA-RA (spec §2.5): a caller may keep a value in any call-clobbered register
//! the patched function does not touch, so both trampolines save and restore every scratch
//! register, `rax rcx rdx rsi rdi r8-r11` and `xmm0-15`, and neither has a fast path.
//!
//! ```text
//!  dynamic entry (first instruction)        dynamic exit (reached by the function's `ret`)
//!  parent_loc+8  caller's stack args        parent_loc+8  caller's data   <- rsp
//!  parent_loc    return addr -> parent      parent_loc    the hijacked slot, now free
//!  rsp ->        return addr into the
//!                patched function (F+5, or
//!                F+9 after an endbr64) = child_ip; rsp % 16 == 0
//! ```
//!
//! Entry: a frame, the [`DynRegs`] area aligned to 16, then `crate::entry::dyn_entry(parent_loc,
//! child_ip, regs)`, which records the entry and returns where the displaced instructions run:
//! the trampoline writes it over its own return address, so `ret` goes there (always, traced
//! or not: the patched bytes are a `call` and NOP padding, not the function's code).
//!
//! Exit: as the exit trampoline's slow path (`sub rsp, 8` makes the freed slot the return
//! word again), with the [`ExitRegs`] area first and the other scratch registers after it;
//! `crate::entry::mcount_exit` returns the real return address, stored into the slot.

use super::exit_trampoline;
use super::layout::{off, ENTRY_SIZE, XMM};
use crate::cpu::{DynRegs, EntryRegs, ExitRegs};
use core::arch::naked_asm;
use core::mem::{offset_of, size_of};

/// The dynamic exit trampoline's save area: [`ExitRegs`] (for the handler), then `rcx rsi rdi
/// r8 r9 r10 r11` and `xmm2-15`.
const X_GPR: usize = size_of::<ExitRegs>();
const X_XMM: usize = X_GPR + 64;
const X_SIZE: usize = X_XMM + 14 * 16;
const D_SIZE: usize = size_of::<DynRegs>();
const D_HI: usize = offset_of!(DynRegs, xmm_hi);
const D_XMM: usize = offset_of!(EntryRegs, xmm);
const _: () = {
    assert!(offset_of!(DynRegs, regs) == 0);
    assert!(D_SIZE.is_multiple_of(16) && D_HI.is_multiple_of(16) && D_XMM.is_multiple_of(16));
    assert!(X_GPR.is_multiple_of(16) && X_XMM.is_multiple_of(16));
    assert!(offset_of!(ExitRegs, xmm0).is_multiple_of(16));
};

/// Where the stubs of fully patched functions jump.
///
/// # Safety
/// Reached only from a patched function's `call stub`, with the stack in the module docs.
#[unsafe(naked)]
#[unsafe(export_name = "utrace_dyn_entry_trampoline")]
pub unsafe extern "C" fn dyn_entry_trampoline() {
    // The entry trampolines' own runs for the argument registers and xmm0-7 (the
    // [`EntryRegs`] prefix of [`DynRegs`]), then xmm8-15 after it.
    hook_asm!(
        [
            "endbr64",
            "push rbp",
            "mov rbp, rsp",
            "sub rsp, {dsize}",
            "and rsp, -16",
            save_args!(),
            "mov [rsp + {r11}], r11",
            save_xmm!(),
            "movaps [rsp + {hi}], xmm8",
            "movaps [rsp + {hi} + 16], xmm9",
            "movaps [rsp + {hi} + 32], xmm10",
            "movaps [rsp + {hi} + 48], xmm11",
            "movaps [rsp + {hi} + 64], xmm12",
            "movaps [rsp + {hi} + 80], xmm13",
            "movaps [rsp + {hi} + 96], xmm14",
            "movaps [rsp + {hi} + 112], xmm15",
            "lea rdi, [rbp + 16]",
            "mov rsi, [rbp + 8]",
            "mov rdx, rsp",
            "call {handler}",
            // `ret` below runs the displaced instructions.
            "mov [rbp + 8], rax",
            restore_xmm!(),
            "movaps xmm8, [rsp + {hi}]",
            "movaps xmm9, [rsp + {hi} + 16]",
            "movaps xmm10, [rsp + {hi} + 32]",
            "movaps xmm11, [rsp + {hi} + 48]",
            "movaps xmm12, [rsp + {hi} + 64]",
            "movaps xmm13, [rsp + {hi} + 80]",
            "movaps xmm14, [rsp + {hi} + 96]",
            "movaps xmm15, [rsp + {hi} + 112]",
            restore_args!(),
            "mov r11, [rsp + {r11}]",
            "leave",
            "ret"
        ],
        dsize = const D_SIZE,
        hi = const D_HI,
        handler = sym crate::entry::dyn_entry
    )
}

/// Where frames entered through [`dyn_entry_trampoline`] return to; never called directly.
///
/// # Safety
/// Reached only through a return slot that `crate::entry::dyn_entry` hijacked.
#[unsafe(naked)]
#[unsafe(export_name = "utrace_dyn_exit_trampoline")]
pub unsafe extern "C" fn dyn_exit_trampoline() {
    naked_asm!(
        "sub rsp, 8",
        "push rbp",
        "mov rbp, rsp",
        "sub rsp, {size}",
        "and rsp, -16",
        "mov [rsp + {x_rax}], rax",
        "mov [rsp + {x_rdx}], rdx",
        "movaps [rsp + {x_xmm0}], xmm0",
        "movaps [rsp + {x_xmm1}], xmm1",
        "mov [rsp + {gpr}], rcx",
        "mov [rsp + {gpr} + 8], rsi",
        "mov [rsp + {gpr} + 16], rdi",
        "mov [rsp + {gpr} + 24], r8",
        "mov [rsp + {gpr} + 32], r9",
        "mov [rsp + {gpr} + 40], r10",
        "mov [rsp + {gpr} + 48], r11",
        "movaps [rsp + {xmm}], xmm2",
        "movaps [rsp + {xmm} + 16], xmm3",
        "movaps [rsp + {xmm} + 32], xmm4",
        "movaps [rsp + {xmm} + 48], xmm5",
        "movaps [rsp + {xmm} + 64], xmm6",
        "movaps [rsp + {xmm} + 80], xmm7",
        "movaps [rsp + {xmm} + 96], xmm8",
        "movaps [rsp + {xmm} + 112], xmm9",
        "movaps [rsp + {xmm} + 128], xmm10",
        "movaps [rsp + {xmm} + 144], xmm11",
        "movaps [rsp + {xmm} + 160], xmm12",
        "movaps [rsp + {xmm} + 176], xmm13",
        "movaps [rsp + {xmm} + 192], xmm14",
        "movaps [rsp + {xmm} + 208], xmm15",
        "mov rdi, rsp",
        "lea rsi, [rbp + 8]",
        "call {handler}",
        "mov [rbp + 8], rax",
        "movaps xmm2, [rsp + {xmm}]",
        "movaps xmm3, [rsp + {xmm} + 16]",
        "movaps xmm4, [rsp + {xmm} + 32]",
        "movaps xmm5, [rsp + {xmm} + 48]",
        "movaps xmm6, [rsp + {xmm} + 64]",
        "movaps xmm7, [rsp + {xmm} + 80]",
        "movaps xmm8, [rsp + {xmm} + 96]",
        "movaps xmm9, [rsp + {xmm} + 112]",
        "movaps xmm10, [rsp + {xmm} + 128]",
        "movaps xmm11, [rsp + {xmm} + 144]",
        "movaps xmm12, [rsp + {xmm} + 160]",
        "movaps xmm13, [rsp + {xmm} + 176]",
        "movaps xmm14, [rsp + {xmm} + 192]",
        "movaps xmm15, [rsp + {xmm} + 208]",
        "mov rcx, [rsp + {gpr}]",
        "mov rsi, [rsp + {gpr} + 8]",
        "mov rdi, [rsp + {gpr} + 16]",
        "mov r8, [rsp + {gpr} + 24]",
        "mov r9, [rsp + {gpr} + 32]",
        "mov r10, [rsp + {gpr} + 40]",
        "mov r11, [rsp + {gpr} + 48]",
        "movaps xmm0, [rsp + {x_xmm0}]",
        "movaps xmm1, [rsp + {x_xmm1}]",
        "mov rdx, [rsp + {x_rdx}]",
        "mov rax, [rsp + {x_rax}]",
        "leave",
        "ret",
        size = const X_SIZE,
        gpr = const X_GPR,
        xmm = const X_XMM,
        x_rax = const offset_of!(ExitRegs, rax),
        x_rdx = const offset_of!(ExitRegs, rdx),
        x_xmm0 = const offset_of!(ExitRegs, xmm0),
        x_xmm1 = const offset_of!(ExitRegs, xmm1),
        handler = sym crate::entry::mcount_exit,
    )
}
