//! The runs of instructions that several x86_64 trampolines share, each said once by a macro
//! that expands to one template string (so the generated code is the same as with the lines
//! written out in each trampoline). Operand names (`{block}`, `{cursor}`…) are those that
//! `hook_asm!` binds; labels `2:` (slow path) and `4:` (slow path, guard bit to drop) are the
//! trampolines' own.

/// The capture plan (`args::Plan`) of the function whose entry hook this is (its address at
/// `[rbp + 8]`) into `r11`, from the cache `args::PLAN_CACHE` (16-byte entries, indexed by
/// address bits 4 and up: `{cache_mask}` is the index mask shifted left by 4); to `4:` (the
/// Rust handler, which fills it) when the function is not cached. Clobbers `rdx`.
macro_rules! plan_lookup {
    () => {
        concat!(
            "mov edx, dword ptr [rbp + 8]\n",
            "and edx, {cache_mask}\n",
            "lea r11, [rip + {cache}]\n",
            "add r11, rdx\n",
            "mov rdx, [rbp + 8]\n",
            "cmp rdx, [r11]\n",
            "jne 4f\n",
            "mov r11, [r11 + 8]"
        )
    };
}

/// The six scratch registers the fast entry paths use, pushed (`pop_scratch!` in reverse).
macro_rules! push_scratch {
    () => {
        "push rax\npush rcx\npush rdx\npush rsi\npush rdi\npush r8"
    };
}

/// Undoes [`push_scratch!`].
macro_rules! pop_scratch {
    () => {
        "pop r8\npop rdi\npop rsi\npop rdx\npop rcx\npop rax"
    };
}

/// The TSC into `r8` (clobbers `rax`, `rdx`; `rdtsc` zeroes their high halves, so an add
/// joins them).
macro_rules! read_tsc {
    () => {
        "rdtsc\nshl rdx, 32\nlea r8, [rax + rdx]"
    };
}

/// The calling thread's `ThreadState` into `$td`, its guard bit taken; to `$no:` when it has
/// none (0 or `thread::DEAD`) or something blocks it (`ThreadState::block`).
macro_rules! take_thread {
    ($td:literal, $no:literal) => {
        concat!(
            "mov ",
            $td,
            ", qword ptr [rip + utrace_thread_state@gottpoff]\n",
            "mov ",
            $td,
            ", qword ptr fs:[",
            $td,
            "]\n",
            "cmp ",
            $td,
            ", 1\n",
            "jbe ",
            $no,
            "f\n",
            "cmp dword ptr [",
            $td,
            " + {block}], 0\n",
            "jne ",
            $no,
            "f\n",
            "mov dword ptr [",
            $td,
            " + {block}], 1"
        )
    };
}

/// Label `4:` drops the guard bit [`take_thread!`] took, then falls into label `$no:` (the
/// slow path).
macro_rules! to_slow_path {
    ($td:literal, $no:literal) => {
        concat!("4:\nmov dword ptr [", $td, " + {block}], 0\n", $no, ":")
    };
}

/// To `4:` unless the ring of the thread in `$td` has `$bytes` free (`$r` clobbered).
macro_rules! check_room {
    ($td:literal, $r:literal, $bytes:literal) => {
        concat!(
            "mov ",
            $r,
            ", [",
            $td,
            " + {cursor}]\n",
            "add ",
            $r,
            ", ",
            $bytes,
            "\n",
            "cmp ",
            $r,
            ", [",
            $td,
            " + {limit}]\n",
            "ja 4f"
        )
    };
}

/// `$dst` = the address of shadow-stack frame `$n` of the thread in `$td` (48-byte frames).
macro_rules! frame_at {
    ($dst:literal, $n:literal, $td:literal) => {
        concat!(
            "lea ",
            $dst,
            ", [",
            $n,
            " + ",
            $n,
            " * 2]\n",
            "shl ",
            $dst,
            ", 4\n",
            "add ",
            $dst,
            ", [",
            $td,
            " + {frames}]"
        )
    };
}

/// The low bits of a header word into `$d` (which holds the depth): the depth capped at
/// `raw::MAX_DEPTH` (with `$t32`/`$t`, one scratch register), then `$bits` (kind and magic).
macro_rules! header_bits {
    ($t32:literal, $d:literal, $t:literal, $bits:literal) => {
        concat!(
            "mov ",
            $t32,
            ", {max_depth}\n",
            "cmp ",
            $d,
            ", ",
            $t,
            "\n",
            "cmova ",
            $d,
            ", ",
            $t,
            "\n",
            "shl ",
            $d,
            ", 6\n",
            "or ",
            $d,
            ", ",
            $bits
        )
    };
}

/// The entry trampolines' ENTRY record, begun: with the depth in `rax`, the frame at `rcx`
/// and the time in `r8`, the header word into `rax` (also kept as the frame's `word`, with
/// the child's address, `[rbp + 8]`, stored as its `child_ip`), the ring's cursor into `rdx`
/// and the time stored there; the header and any payload are the caller's to store.
macro_rules! entry_record {
    () => {
        concat!(
            header_bits!("edx", "rax", "rdx", "{entry_bits}"),
            "\nmov rdx, [rbp + 8]\n",
            "mov [rcx + {f_child_ip}], rdx\n",
            "shl rdx, 16\n",
            "or rax, rdx\n",
            "mov [rcx + {f_word}], rax\n",
            "mov rdx, [rsi + {cursor}]\n",
            "mov [rdx], r8"
        )
    };
}

/// Publishes the records written up to `$end` by the thread in `$td`: its cursor, then the
/// ring's commit word (through `$x`), which the recorder reads.
macro_rules! publish {
    ($td:literal, $end:literal, $x:literal) => {
        concat!(
            "mov [",
            $td,
            " + {cursor}], ",
            $end,
            "\n",
            "mov ",
            $x,
            ", [",
            $td,
            " + {commit}]\n",
            "mov [",
            $x,
            "], ",
            $end
        )
    };
}

/// The TSC in `r8` to nanoseconds with the clock of the `ThreadState` in `$td`; to `4:` when
/// the TSC is past the clock's sync point (`Clock::tsc_max`: the Rust handler re-syncs).
macro_rules! tsc_to_ns {
    ($td:literal) => {
        concat!(
            "sub r8, [",
            $td,
            " + {tsc_base}]\n",
            "cmp r8, [",
            $td,
            " + {tsc_max}]\n",
            "jae 4f\n",
            "imul r8, [",
            $td,
            " + {mult}]\n",
            "shr r8, 32\n",
            "add r8, [",
            $td,
            " + {ns_base}]"
        )
    };
}

/// The argument registers (and `rax`, `r10`) into the [`EntryRegs`] area at `rsp`.
macro_rules! save_args {
    () => {
        concat!(
            "mov [rsp + {rdi}], rdi\nmov [rsp + {rsi}], rsi\nmov [rsp + {rdx}], rdx\n",
            "mov [rsp + {rcx}], rcx\nmov [rsp + {r8}], r8\nmov [rsp + {r9}], r9\n",
            "mov [rsp + {rax}], rax\nmov [rsp + {r10}], r10"
        )
    };
}

/// Undoes [`save_args!`].
macro_rules! restore_args {
    () => {
        concat!(
            "mov rdi, [rsp + {rdi}]\nmov rsi, [rsp + {rsi}]\nmov rdx, [rsp + {rdx}]\n",
            "mov rcx, [rsp + {rcx}]\nmov r8, [rsp + {r8}]\nmov r9, [rsp + {r9}]\n",
            "mov rax, [rsp + {rax}]\nmov r10, [rsp + {r10}]"
        )
    };
}

/// `xmm0-7` into the [`EntryRegs`] area at `rsp`.
macro_rules! save_xmm {
    () => {
        concat!(
            "movaps [rsp + {xmm}], xmm0\nmovaps [rsp + {xmm} + 16], xmm1\n",
            "movaps [rsp + {xmm} + 32], xmm2\nmovaps [rsp + {xmm} + 48], xmm3\n",
            "movaps [rsp + {xmm} + 64], xmm4\nmovaps [rsp + {xmm} + 80], xmm5\n",
            "movaps [rsp + {xmm} + 96], xmm6\nmovaps [rsp + {xmm} + 112], xmm7"
        )
    };
}

/// Undoes [`save_xmm!`].
macro_rules! restore_xmm {
    () => {
        concat!(
            "movaps xmm0, [rsp + {xmm}]\nmovaps xmm1, [rsp + {xmm} + 16]\n",
            "movaps xmm2, [rsp + {xmm} + 32]\nmovaps xmm3, [rsp + {xmm} + 48]\n",
            "movaps xmm4, [rsp + {xmm} + 64]\nmovaps xmm5, [rsp + {xmm} + 80]\n",
            "movaps xmm6, [rsp + {xmm} + 96]\nmovaps xmm7, [rsp + {xmm} + 112]"
        )
    };
}
