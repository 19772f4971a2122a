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
//! Rust code never uses x87, so the handler finds `st(0)` intact and copies it ([`read_st0`])
//! when a return value spec says `f80`.
//!
//! Thread pointer: the fast paths read `utrace_thread_state`, the initial-exec TLS word
//! defined in [`crate::cpu`] (`mov sym@gottpoff(%rip)`, then `%fs:`).
//!
//! Every trampoline's code is here or in a submodule (`cyg`: the `-finstrument-functions`
//! hooks; `dynamic`: dynamic patching); the register areas are in [`crate::cpu`], the field
//! offsets its operands name in `layout` (with `hook_asm!`, which binds them), the instruction
//! runs that several trampolines share in `runs`, one macro per run.

use crate::cpu::{EntryRegs, ExitRegs};
use crate::entry::{mcount_entry, mcount_exit};
use core::arch::naked_asm;
use core::mem::{offset_of, size_of};
use layout::{off, ENTRY_SIZE, EXIT_SIZE, XMM};

#[macro_use]
mod layout;
#[macro_use]
mod runs;
mod cyg;
pub mod dynamic;
pub use cyg::{__cyg_profile_func_enter, __cyg_profile_func_exit};

/// One entry trampoline; `$parent_loc` leaves the return-slot address in `rdi` (rbp = the
/// trampoline's own frame).
///
/// Fast path (no call; six saved registers plus `r11`, which is free at a profiling call,
/// and the raw TSC pushed for the handler; no vector register touched): when the thread's
/// state exists and nothing blocks it (`ThreadState::block`), the session is on, the shadow
/// stack and the ring have room, the new slot lies below the innermost frame's (no tail call,
/// no orphans) and the TSC needs no new sync point, it pushes the frame, writes the ENTRY
/// record and hijacks the slot itself, holding the thread's guard bit so a signal handler
/// cannot interleave. With `-t` alone (`filter::FAST_THRESHOLD`) it pushes a `PENDING` frame
/// and writes nothing (`20:`). Anything else goes to the Rust handler (`2:`), after the guard
/// is dropped again (`4:`).
macro_rules! entry_trampoline {
    ($(#[$attr:meta])* $name:ident, $parent_loc:literal) => {
        $(#[$attr])*
        #[unsafe(naked)]
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $name() {
            hook_asm!(
                [
                    "endbr64",
                    "push rbp",
                    "mov rbp, rsp",
                    push_scratch!(),
                    // The TSC first: its latency overlaps with the checks below.
                    read_tsc!(),
                    // The raw TSC stays at [rbp - 56] for the Rust handler (`r8` becomes
                    // nanoseconds on the way).
                    "push r8",
                    take_thread!("rsi", "2"),
                    "mov rax, [rsi + {len}]",
                    "cmp rax, [rsi + {fast_depth}]",
                    "jae 4f",
                    // Room for a record with the largest fast-path payload (`args::FAST_ROOM`).
                    check_room!("rsi", "rcx", "{room}"),
                    tsc_to_ns!("rsi"),
                    $parent_loc,
                    frame_at!("rcx", "rax", "rsi"),
                    // Below the innermost frame's slot (the sentinel's, at depth 0, is above
                    // every slot), and not hijacked already.
                    "cmp rdi, [rcx - {f_size}]",
                    "jae 4f",
                    "mov rdx, [rdi]",
                    "lea r11, [rip + {tramp}]",
                    "cmp rdx, r11",
                    "je 4f",
                    "mov [rcx + {f_parent_loc}], rdi",
                    "mov [rcx + {f_parent_ip}], rdx",
                    "mov [rcx + {f_start}], r8",
                    // The session on, no arguments, no `-t` (`config::PLAIN`): the frame
                    // without flags and a 16-byte ENTRY.
                    "cmp byte ptr [rip + {plain}], 0",
                    "jne 30f",
                    "mov [rcx + {f_depth}], rax",
                    entry_record!(),
                    "mov [rdx + 8], rax",
                    "add rdx, 16",
                    "8:",
                    publish!("rsi", "rdx", "rax"),
                    "inc qword ptr [rsi + {len}]",
                    "mov [rdi], r11",
                    "mov dword ptr [rsi + {block}], 0",
                    "pop r11",
                    pop_scratch!(),
                    "pop rbp",
                    "ret",
                    // Arguments recorded and no `-t` (`config::PLAIN_ARGS`): the function's
                    // capture plan (`args::Plan`) comes from the cache the Rust handler fills
                    // (a function not in it goes there).
                    "30:",
                    "cmp byte ptr [rip + {plain}], {plain_args}",
                    "jne 31f",
                    plan_lookup!(),
                    "32:",
                    "mov [rcx + {f_depth}], eax",
                    "mov rdx, r11",
                    "shr rdx, 48",
                    "mov dword ptr [rcx + {f_flags}], edx",
                    entry_record!(),
                    "test r11b, r11b",
                    "jnz 7f",
                    "mov [rdx + 8], rax",
                    "add rdx, 16",
                    "14:",
                    "lea r11, [rip + {tramp}]",
                    "jmp 8b",
                    // Anything else: the session must be on; arguments as above; with `-t`
                    // alone, `20:`.
                    "31:",
                    "cmp byte ptr [rip + {state}], {on}",
                    "jne 4f",
                    "xor r11d, r11d",
                    "cmp byte ptr [rip + {args_on}], 0",
                    "je 6f",
                    plan_lookup!(),
                    "6:",
                    "cmp qword ptr [rip + {fast_time}], 0",
                    "jne 20f",
                    "jmp 32b",
                    // `-t` alone (`filter::FAST_THRESHOLD`): the ENTRY waits in a `PENDING`
                    // frame at the depth `FilterState::recorded`, which counts it; no record
                    // (and no header word: `write_pending` sets it). Arguments, or a call past
                    // `-D`, go to the Rust handler.
                    "20:",
                    "test r11, r11",
                    "jnz 4f",
                    "mov edx, [rsi + {recorded}]",
                    "cmp edx, [rsi + {filt_depth}]",
                    "jae 4f",
                    "mov r11, [rbp + 8]",
                    "mov [rcx + {f_child_ip}], r11",
                    "mov [rcx + {f_depth}], edx",
                    "mov dword ptr [rcx + {f_flags}], {pending}",
                    "inc edx",
                    "mov [rsi + {recorded}], edx",
                    "inc qword ptr [rsi + {len}]",
                    "lea rax, [rip + {tramp}]",
                    "mov [rdi], rax",
                    "mov dword ptr [rsi + {block}], 0",
                    "pop r11",
                    pop_scratch!(),
                    "pop rbp",
                    "ret",
                    // The payload: one byte per item (`args::Plan`), register k at [rbp - 8k]
                    // (7: r9, never pushed), stored in 4 or 8 bytes; then padded to 8.
                    "7:",
                    "or rax, {more}",
                    "mov [rdx + 8], rax",
                    "add rdx, 16",
                    "9:",
                    "movzx ecx, r11b",
                    "test ecx, ecx",
                    "jz 10f",
                    "mov eax, ecx",
                    "and eax, 7",
                    "cmp eax, 7",
                    "je 12f",
                    "neg rax",
                    "mov rax, [rbp + rax * 8]",
                    "13:",
                    "shr r11, 8",
                    "test ecx, 8",
                    "jz 11f",
                    "mov [rdx], rax",
                    "add rdx, 8",
                    "jmp 9b",
                    "11:",
                    "mov [rdx], eax",
                    "add rdx, 4",
                    "jmp 9b",
                    "10:",
                    "test edx, 4",
                    "jz 14b",
                    "mov dword ptr [rdx], 0",
                    "add rdx, 4",
                    "jmp 14b",
                    "12:",
                    "mov rax, r9",
                    "jmp 13b",
                    to_slow_path!("rsi", "2"),
                    // The TSC goes to the handler (r11 is scratch at a hook: its value on return
                    // is the TSC).
                    "pop r11",
                    pop_scratch!(),
                    "sub rsp, {size}",
                    "and rsp, -16",
                    save_args!(),
                    "mov [rsp + {r11}], r11",
                    save_xmm!(),
                    $parent_loc,
                    "mov rsi, [rbp + 8]",
                    "mov rdx, rsp",
                    "mov rcx, r11",
                    "call {handler}",
                    restore_xmm!(),
                    restore_args!(),
                    "mov r11, [rsp + {r11}]",
                    "leave",
                    "ret"
                ],
                handler = sym mcount_entry,
                room = const crate::args::FAST_ROOM,
                args_on = sym crate::args::ARGS_ON,
                cache = sym crate::args::PLAN_CACHE,
                cache_mask = const (crate::args::CACHE_LEN - 1) << 4,
                plain_args = const crate::config::PLAIN_ARGS
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
/// Fast path (as in the entry trampolines): when nothing blocks the thread, the innermost
/// frame owns this slot, the ring has room and the TSC needs no new sync point, it writes the
/// EXIT record (with a return value of `rax` or `xmm0`: `7:`), pops the frame and returns to
/// the real address itself; with `-t` alone, a call shorter than the threshold only pops
/// (`20:`). Otherwise the Rust handler does it all (`2:`; `4:` drops the guard bit first).
///
/// # Safety
/// Reached only through a return slot that the entry handler hijacked.
#[unsafe(naked)]
#[unsafe(export_name = "utrace_exit_trampoline")]
pub unsafe extern "C" fn exit_trampoline() {
    hook_asm!(
        [
            // The return values move to r10/r11: at a return, every other caller-saved register
            // is dead (the hooked function's callee, mcount, clobbers them all as well).
            "mov r10, rax",
            "mov r11, rdx",
            read_tsc!(),
            take_thread!("rsi", "2"),
            "mov rax, [rsi + {len}]",
            frame_at!("rcx", "rax", "rsi"),
            "sub rcx, {f_size}",
            // The slot `ret` just popped (with no frame, the sentinel's matches none).
            "lea rdi, [rsp - 8]",
            "cmp rdi, [rcx + {f_parent_loc}]",
            "jne 4f",
            // Frames with flags (filters, a PLT slot to re-arm) need the Rust handler, except a
            // return value that is the 8 bytes of rax or xmm0 (`args::RET_INT`/`RET_FP`, `7:`);
            // with `-t` alone, every frame (`filter::EXIT_FORCE` sets a bit above the flags,
            // whose padding is zero), `20:`.
            "mov eax, dword ptr [rcx + {f_flags}]",
            "or eax, dword ptr [rip + {exit_force}]",
            "jnz 7f",
            "mov rdx, [rsi + {cursor}]",
            "lea r9, [rdx + 16]",
            "cmp r9, [rsi + {limit}]",
            "ja 4f",
            tsc_to_ns!("rsi"),
            "mov [rdx], r8",
            // The EXIT header: the frame's ENTRY one, another kind.
            "mov r8, [rcx + {f_word}]",
            "xor r8, {word_flip}",
            "mov [rdx + 8], r8",
            publish!("rsi", "r9", "r8"),
            // Pop the frame and jump to the real return address (rsp is already where the
            // hooked function's `ret` left it). A `jmp`, not a `ret` through the slot: the
            // `ret` that brought us here consumed the return-stack-buffer entry of this call,
            // so a second `ret` would pop the caller's entry and misalign the buffer for every
            // return after it (bench/README.md: 3-4 ns per call).
            "5:",
            "mov rcx, [rcx + {f_parent_ip}]",
            "dec qword ptr [rsi + {len}]",
            "mov dword ptr [rsi + {block}], 0",
            "mov rax, r10",
            "mov rdx, r11",
            // `notrack`: the return address has no `endbr64` (with IBT enforced, a tracked
            // indirect jump there would fault; a `ret` is not tracked).
            "notrack jmp rcx",
            // A return value: 8 more bytes of payload.
            "7:",
            "cmp eax, {ret_int}",
            "jne 8f",
            "mov r9, r10",
            "jmp 9f",
            "8:",
            "cmp eax, {ret_fp}",
            "jne 20f",
            "movq r9, xmm0",
            "9:",
            "mov rdx, [rsi + {cursor}]",
            "lea rax, [rdx + 24]",
            "cmp rax, [rsi + {limit}]",
            "ja 4f",
            tsc_to_ns!("rsi"),
            "mov [rdx], r8",
            "mov [rdx + 16], r9",
            "mov r8, [rcx + {f_word}]",
            "xor r8, {word_flip} + {more}",
            "mov [rdx + 8], r8",
            "add rdx, 24",
            publish!("rsi", "rdx", "r8"),
            "jmp 5b",
            // `-t` alone: a `PENDING` frame of a call shorter than the threshold pops without
            // a record. Any other frame goes to the Rust handler (a long call writes its
            // callers' pending entries; a frame whose ENTRY was written uncounts itself).
            "20:",
            "cmp eax, {pending} + {force}",
            "jne 4f",
            tsc_to_ns!("rsi"),
            "sub r8, [rcx + {f_start}]",
            "cmp r8, [rip + {fast_time}]",
            "jae 4f",
            "dec dword ptr [rsi + {recorded}]",
            "jmp 5b",
            to_slow_path!("rsi", "2"),
            "mov rax, r10",
            "mov rdx, r11",
            // The Rust handler finds the slot at [rbp + 8] and returns through it.
            "sub rsp, 8",
            "push rbp",
            "mov rbp, rsp",
            "sub rsp, {x_size}",
            "and rsp, -16",
            "mov [rsp + {x_rax}], rax",
            "mov [rsp + {x_rdx}], rdx",
            "movaps [rsp + {x_xmm0}], xmm0",
            "movaps [rsp + {x_xmm1}], xmm1",
            "mov rdi, rsp",
            "lea rsi, [rbp + 8]",
            "call {handler}",
            "mov [rbp + 8], rax",
            "movaps xmm0, [rsp + {x_xmm0}]",
            "movaps xmm1, [rsp + {x_xmm1}]",
            "mov rdx, [rsp + {x_rdx}]",
            "mov rax, [rsp + {x_rax}]",
            "leave",
            "ret"
        ],
        x_size = const EXIT_SIZE,
        x_rax = const offset_of!(ExitRegs, rax),
        x_rdx = const offset_of!(ExitRegs, rdx),
        x_xmm0 = const offset_of!(ExitRegs, xmm0),
        x_xmm1 = const offset_of!(ExitRegs, xmm1),
        handler = sym mcount_exit,
        ret_int = const crate::frame_flags::RET_INT,
        ret_fp = const crate::frame_flags::RET_FP
    )
}

/// Copies x87 `st(0)` (a `long double` return value, which the exit trampoline does not save:
/// Rust code never uses x87) as 10 bytes to `out` and returns 1; returns 0 without touching
/// `out` when `st(0)` is empty.
///
/// The traced program must not see the read: `fxam` classifies `st(0)` without raising an
/// exception (an `fld` from an empty register would set the invalid and stack-fault flags a
/// program can test with `fetestexcept`), then a copy (`fld st(0)`, which raises nothing for
/// any register contents) is stored and popped (`fstp` to 80 bits is exact and raises
/// nothing). Only the condition codes C0–C3 change, which no caller may rely on across a
/// return (the x87 status word is caller-saved).
///
/// # Safety
/// `out` must be valid for 10 bytes of writes.
#[unsafe(naked)]
#[unsafe(export_name = "utrace_read_st0")]
pub unsafe extern "C" fn read_st0(out: *mut [u8; 10]) -> u32 {
    naked_asm!(
        "endbr64",
        "fxam",
        "fnstsw ax",
        // Empty: C3 = 1, C2 = 0, C0 = 1.
        "and ax, 0x4500",
        "cmp ax, 0x4100",
        "je 2f",
        "fld st(0)",
        "fstp tbyte ptr [rdi]",
        "mov eax, 1",
        "ret",
        "2:",
        "xor eax, eax",
        "ret",
    )
}

/// Tests only: pushes the 10-byte value at `value` onto the x87 stack, as a function
/// returning `long double` leaves it.
///
/// # Safety
/// `value` must be valid for 10 bytes of reads; [`test_pop_st0`] must follow.
#[cfg(test)]
#[unsafe(naked)]
pub unsafe extern "C" fn test_push_st0(value: *const [u8; 10]) {
    naked_asm!("fld tbyte ptr [rdi]", "ret")
}

/// Tests only: pops `st(0)` and returns the x87 exception flags (status word bits 0–5),
/// then clears them.
///
/// # Safety
/// The x87 stack must hold a value pushed by [`test_push_st0`].
#[cfg(test)]
#[unsafe(naked)]
pub unsafe extern "C" fn test_pop_st0() -> u32 {
    naked_asm!("fstp st(0)", "fnstsw ax", "and eax, 0x3f", "fnclex", "ret")
}

/// Tests only: the x87 exception flags (status word bits 0–5).
#[cfg(test)]
#[unsafe(naked)]
pub extern "C" fn test_x87_exceptions() -> u32 {
    naked_asm!("fnstsw ax", "and eax, 0x3f", "ret")
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

/// Interposed `_Unwind_Backtrace` (libgcc's stack walker, used directly by some programs):
/// passes the caller's stack pointer to `unwind::unwind_backtrace` and tail-jumps there.
///
/// # Safety
/// As libgcc's `_Unwind_Backtrace`.
#[unsafe(naked)]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn _Unwind_Backtrace() {
    naked_asm!(
        "endbr64",
        "lea rdx, [rsp + 8]",
        "jmp {handler}",
        handler = sym crate::unwind::unwind_backtrace,
    )
}

/// Where the hooked PLT slots lead (through the stubs of `plt`, which push the slot index).
///
/// Fast path (as in `mcount`'s): for a bound slot of an ordinary function (`Slot::fast`), when
/// nothing blocks the thread, it pushes the frame, writes the ENTRY record, hijacks the
/// caller's return address and jumps to the function. Otherwise (also while slots are
/// [`crate::plt::PENDING`]) it calls
/// [`crate::entry::plt_entry`] with the registers saved as for `mcount`, then jumps to the
/// address it returns with the arguments restored and the caller's return address on top of
/// the stack, as if the call had gone there directly.
///
/// # Safety
/// Reached only through a `plt` stub.
#[unsafe(naked)]
#[unsafe(export_name = "utrace_plt_hook")]
pub unsafe extern "C" fn plt_hook() {
    hook_asm!(
        [
            "endbr64",
            // [rsp] = slot index, [rsp + 8] = the caller's return address.
            "push rbp",
            "mov rbp, rsp",
            push_scratch!(),
            read_tsc!(),
            "mov rax, qword ptr [rip + {slots}]",
            "test rax, rax",
            "jz 2f",
            "imul rcx, [rbp + 8], {slot_size}",
            "add rax, rcx",
            "mov rcx, [rax + {s_fast}]",
            "test rcx, rcx",
            "jz 2f",
            // Slots left to the lazy binder are re-armed by the Rust handler.
            "cmp qword ptr [rip + {plt_pending}], 0",
            "jne 2f",
            // [rbp - 56] = where the call goes, [rbp - 64] = the PLT entry.
            "push rcx",
            "push qword ptr [rax + {s_entry}]",
            take_thread!("rsi", "3"),
            // The session on, and not `-t` (library calls then take the Rust handler): one
            // test in the plain case (`config::PLAIN`).
            "cmp byte ptr [rip + {plain}], 0",
            "je 6f",
            "cmp byte ptr [rip + {state}], {on}",
            "jne 4f",
            "cmp qword ptr [rip + {fast_time}], 0",
            "jne 4f",
            "6:",
            "mov rax, [rsi + {len}]",
            "cmp rax, [rsi + {fast_depth}]",
            "jae 4f",
            check_room!("rsi", "rcx", "16"),
            tsc_to_ns!("rsi"),
            "lea rdi, [rbp + 16]",
            frame_at!("rcx", "rax", "rsi"),
            // The sentinel's slot, at depth 0, is above every slot.
            "cmp rdi, [rcx - {f_size}]",
            "jae 4f",
            "mov rdx, [rdi]",
            "lea r11, [rip + {tramp}]",
            "cmp rdx, r11",
            "je 4f",
            "mov [rcx + {f_parent_loc}], rdi",
            "mov [rcx + {f_parent_ip}], rdx",
            "mov rdx, [rbp - 64]",
            "mov [rcx + {f_child_ip}], rdx",
            "mov [rcx + {f_depth}], rax",
            "mov [rcx + {f_start}], r8",
            "shl rdx, 16",
            header_bits!("r11d", "rax", "r11", "{entry_bits}"),
            "or rdx, rax",
            "mov [rcx + {f_word}], rdx",
            "mov rax, [rsi + {cursor}]",
            "mov [rax], r8",
            "mov [rax + 8], rdx",
            "add rax, 16",
            publish!("rsi", "rax", "r11"),
            "inc qword ptr [rsi + {len}]",
            "lea rax, [rip + {tramp}]",
            "mov [rdi], rax",
            "mov dword ptr [rsi + {block}], 0",
            "mov r11, [rbp - 56]",
            "add rsp, 16",
            pop_scratch!(),
            "pop rbp",
            "add rsp, 8",
            "jmp r11",
            to_slow_path!("rsi", "3"),
            "add rsp, 16",
            "2:",
            pop_scratch!(),
            // The slow path, with rbp's frame as set up above.
            "sub rsp, {size}",
            "and rsp, -16",
            save_args!(),
            save_xmm!(),
            "lea rdi, [rbp + 16]",
            "mov rsi, [rbp + 8]",
            "mov rdx, rsp",
            "call {handler}",
            // r11 is free at a call (ld.so's lazy binder clobbers it too).
            "mov r11, rax",
            restore_xmm!(),
            restore_args!(),
            "leave",
            "add rsp, 8",
            "jmp r11"
        ],
        handler = sym crate::entry::plt_entry,
        slots = sym crate::plt::SLOTS,
        plt_pending = sym crate::plt::PENDING,
        slot_size = const size_of::<crate::plt::Slot>(),
        s_fast = const offset_of!(crate::plt::Slot, fast),
        s_entry = const offset_of!(crate::plt::Slot, entry)
    )
}

/// An interposed function of two arguments: `$prepare` (no arguments) runs first and returns
/// the real function's address, which is jumped to with the arguments and the caller's
/// return address untouched (the caller is the one glibc sees).
macro_rules! interposed_2 {
    ($(#[$attr:meta])* $name:ident, $prepare:path) => {
        $(#[$attr])*
        #[unsafe(naked)]
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $name() {
            naked_asm!(
                "endbr64",
                "push rdi",
                "push rsi",
                "sub rsp, 8",
                "call {prepare}",
                "add rsp, 8",
                "pop rsi",
                "pop rdi",
                "jmp rax",
                prepare = sym $prepare,
            )
        }
    };
}

interposed_2!(
    /// Interposed `dlopen`: lets [`crate::dlopen::prepare`] note the call, then jumps to the real
    /// `dlopen` with the arguments and the caller's return address untouched (glibc resolves
    /// relative names for the object that made the call).
    ///
    /// # Safety
    /// Called as `dlopen(const char *, int)`.
    dlopen,
    crate::dlopen::prepare
);

interposed_2!(
    /// Interposed `dlsym`: lets [`crate::dlopen::before_dlsym`] patch the libraries loaded since
    /// (`-P FUNC@MODULE`; a library `dlopen`ed by a name that is not a path is patched there, before
    /// the program can call it through the address it asks for), then jumps to the real `dlsym`
    /// with the caller's return address untouched (`RTLD_NEXT` is resolved for the caller).
    ///
    /// # Safety
    /// Called as `dlsym(void *, const char *)`.
    dlsym,
    crate::dlopen::before_dlsym
);

/// Interposed `dlclose`: lets [`crate::dlopen::before_close`] write the `DLOP` lines of the
/// objects still loaded, then jumps to the real `dlclose`.
///
/// # Safety
/// Called as `dlclose(void *)`.
#[unsafe(naked)]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dlclose() {
    naked_asm!(
        "endbr64",
        "push rdi",
        "call {prepare}",
        "pop rdi",
        "jmp rax",
        prepare = sym crate::dlopen::before_close,
    )
}
