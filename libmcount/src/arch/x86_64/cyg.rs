//! The `-finstrument-functions` hooks, `__cyg_profile_func_enter/exit`: plain C calls made by
//! the instrumented function itself (after its prologue, and before its epilogue), so there is
//! no return slot to hijack and every scratch register is free. Their fast paths push or pop
//! the shadow-stack frame (`parent_loc` = `rstack::NO_SLOT`) and write the record; with `-t`
//! alone (`filter::FAST_THRESHOLD`) the entry writes nothing and the exit of a short call only
//! pops, as in the mcount trampolines.

use crate::entry::{cyg_enter_slow, cyg_exit_slow};
use core::arch::naked_asm;
use core::mem::offset_of;

use super::exit_trampoline;
use super::layout::{off, ENTRY_SIZE, XMM};
use crate::cpu::EntryRegs;

/// `-finstrument-functions` entry hook: `(this_fn, call_site)` in `rdi`/`rsi`. A normal C
/// call, so every scratch register is free; the fast path (as in the mcount trampolines, with
/// no `-finstrument-functions` overflow pending) keeps `rdi`/`rsi` for the Rust handler.
///
/// # Safety
/// Called by instrumented code only.
#[unsafe(naked)]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn __cyg_profile_func_enter() {
    hook_asm!(
        [
            "endbr64",
            read_tsc!(),
            take_thread!("rcx", "2"),
            "cmp qword ptr [rcx + {overflow}], 0",
            "jne 4f",
            "mov rax, [rcx + {len}]",
            "cmp rax, [rcx + {fast_depth}]",
            "jae 4f",
            check_room!("rcx", "rdx", "16"),
            tsc_to_ns!("rcx"),
            frame_at!("r9", "rax", "rcx"),
            // The session on and no `-t` (`config::PLAIN`; arguments are not recorded here).
            "cmp byte ptr [rip + {plain}], 0",
            "jne 30f",
            "31:",
            "mov qword ptr [r9 + {f_parent_loc}], 0",
            "mov [r9 + {f_parent_ip}], rsi",
            "mov [r9 + {f_child_ip}], rdi",
            "mov [r9 + {f_depth}], rax",
            "mov [r9 + {f_start}], r8",
            "mov r10, rdi",
            "shl r10, 16",
            header_bits!("r11d", "rax", "r11", "{entry_bits}"),
            "or r10, rax",
            "mov [r9 + {f_word}], r10",
            "mov rdx, [rcx + {cursor}]",
            "mov [rdx], r8",
            "mov [rdx + 8], r10",
            "add rdx, 16",
            publish!("rcx", "rdx", "r11"),
            "inc qword ptr [rcx + {len}]",
            "mov dword ptr [rcx + {block}], 0",
            "ret",
            // `-t` alone: a `PENDING` frame counted in `FilterState::recorded`, no record (as
            // in the mcount trampolines).
            "20:",
            "mov edx, [rcx + {recorded}]",
            "cmp edx, [rcx + {filt_depth}]",
            "jae 4f",
            "mov qword ptr [r9 + {f_parent_loc}], 0",
            "mov [r9 + {f_parent_ip}], rsi",
            "mov [r9 + {f_child_ip}], rdi",
            "mov [r9 + {f_depth}], edx",
            "mov dword ptr [r9 + {f_flags}], {pending}",
            "mov [r9 + {f_start}], r8",
            "inc edx",
            "mov [rcx + {recorded}], edx",
            "inc qword ptr [rcx + {len}]",
            "mov dword ptr [rcx + {block}], 0",
            "ret",
            "30:",
            "cmp byte ptr [rip + {state}], {on}",
            "jne 4f",
            "cmp qword ptr [rip + {fast_time}], 0",
            "jne 20b",
            "jmp 31b",
            to_slow_path!("rcx", "2"),
            "jmp {slow}"
        ],
        slow = sym cyg_enter_slow
    )
}

/// `-finstrument-functions` exit hook: `(this_fn, call_site)`. Fast path when the innermost
/// frame is this function's (pushed by the entry hook, not hijacked) and no overflow is
/// pending.
///
/// # Safety
/// Called by instrumented code only.
#[unsafe(naked)]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn __cyg_profile_func_exit() {
    hook_asm!(
        [
            "endbr64",
            read_tsc!(),
            take_thread!("rcx", "2"),
            "cmp qword ptr [rcx + {overflow}], 0",
            "jne 4f",
            "mov rax, [rcx + {len}]",
            frame_at!("r9", "rax", "rcx"),
            "sub r9, {f_size}",
            // With no frame, the sentinel's slot is not 0.
            "cmp qword ptr [r9 + {f_parent_loc}], 0",
            "jne 4f",
            "cmp [r9 + {f_child_ip}], rdi",
            "jne 4f",
            // Frames with flags (filters, or left by an earlier session) take the Rust handler.
            // (`filter::EXIT_FORCE`: as in the exit trampoline.)
            "mov edx, dword ptr [r9 + {f_flags}]",
            "or edx, dword ptr [rip + {exit_force}]",
            "jnz 20f",
            check_room!("rcx", "rdx", "16"),
            tsc_to_ns!("rcx"),
            // The EXIT header: the frame's ENTRY one, another kind.
            "mov r10, [r9 + {f_word}]",
            "xor r10, {word_flip}",
            "mov rdx, [rcx + {cursor}]",
            "mov [rdx], r8",
            "mov [rdx + 8], r10",
            "add rdx, 16",
            publish!("rcx", "rdx", "r11"),
            "dec qword ptr [rcx + {len}]",
            "mov dword ptr [rcx + {block}], 0",
            "ret",
            // `-t` alone: the `PENDING` frame of a short call pops without a record.
            "20:",
            "cmp edx, {pending} + {force}",
            "jne 4f",
            tsc_to_ns!("rcx"),
            "sub r8, [r9 + {f_start}]",
            "cmp r8, [rip + {fast_time}]",
            "jae 4f",
            "dec dword ptr [rcx + {recorded}]",
            "dec qword ptr [rcx + {len}]",
            "mov dword ptr [rcx + {block}], 0",
            "ret",
            to_slow_path!("rcx", "2"),
            "jmp {slow}"
        ],
        slow = sym cyg_exit_slow
    )
}
