//! The memory layouts the x86_64 trampolines read and write: the register areas they save
//! for the Rust handlers ([`EntryRegs`], [`ExitRegs`]) and the offsets of the fields of
//! `ThreadState` and `Frame` their fast paths use ([`off`]), all from the `#[repr(C)]` Rust
//! types, with compile-time checks of what the assembly assumes; and `hook_asm!`, which binds
//! them to the operand names the trampolines use.

use core::mem::{offset_of, size_of};

use crate::cpu::{EntryRegs, ExitRegs};

pub(super) const ENTRY_SIZE: usize = size_of::<EntryRegs>();
pub(super) const EXIT_SIZE: usize = size_of::<ExitRegs>();
pub(super) const XMM: usize = offset_of!(EntryRegs, xmm);
const _: () = {
    assert!(ENTRY_SIZE == 208 && ENTRY_SIZE.is_multiple_of(16));
    assert!(XMM.is_multiple_of(16));
    assert!(EXIT_SIZE.is_multiple_of(16));
    assert!(offset_of!(ExitRegs, xmm0).is_multiple_of(16));
    assert!(offset_of!(ExitRegs, xmm1).is_multiple_of(16));
};

/// Offsets the fast paths use, from the `#[repr(C)]` layouts of the Rust types.
pub(super) mod off {
    use crate::rstack::Frame;
    use crate::thread::ThreadState;
    use core::mem::offset_of;

    pub const BLOCK: usize = offset_of!(ThreadState, block);
    pub const FAST_DEPTH: usize = offset_of!(ThreadState, fast_depth);
    pub const FRAMES: usize = offset_of!(ThreadState, rstack.frames);
    pub const LEN: usize = offset_of!(ThreadState, rstack.len);
    pub const OVERFLOW: usize = offset_of!(ThreadState, rstack.overflow);
    pub const CURSOR: usize = offset_of!(ThreadState, writer.buf.cursor);
    pub const LIMIT: usize = offset_of!(ThreadState, writer.buf.limit);
    pub const COMMIT: usize = offset_of!(ThreadState, writer.buf.commit);
    pub const TSC_BASE: usize = offset_of!(ThreadState, clock.tsc_base);
    pub const NS_BASE: usize = offset_of!(ThreadState, clock.ns_base);
    pub const MULT: usize = offset_of!(ThreadState, clock.mult);
    pub const TSC_MAX: usize = offset_of!(ThreadState, clock.tsc_max);
    pub const RECORDED: usize = offset_of!(ThreadState, filt.recorded);
    pub const FILT_DEPTH: usize = offset_of!(ThreadState, filt.depth);
    pub const F_SIZE: usize = size_of::<Frame>();
    pub const F_PARENT_LOC: usize = offset_of!(Frame, parent_loc);
    pub const F_PARENT_IP: usize = offset_of!(Frame, parent_ip);
    pub const F_CHILD_IP: usize = offset_of!(Frame, child_ip);
    pub const F_DEPTH: usize = offset_of!(Frame, depth);
    pub const F_FLAGS: usize = offset_of!(Frame, flags);
    pub const F_START: usize = offset_of!(Frame, start);
    pub const F_WORD: usize = offset_of!(Frame, word);
    /// Low bits of an ENTRY / EXIT header word: kind and magic.
    pub const ENTRY_BITS: u64 =
        record_format::raw::header_word(record_format::raw::RecordKind::Entry, false, 0, 0);
    pub const EXIT_BITS: u64 =
        record_format::raw::header_word(record_format::raw::RecordKind::Exit, false, 0, 0);
    pub const MAX_DEPTH: u16 = record_format::raw::MAX_DEPTH;
    /// An ENTRY header word xor this is the EXIT one.
    pub const WORD_FLIP: u64 = ENTRY_BITS ^ EXIT_BITS;

    const _: () = {
        // `frame_at!` multiplies by 48.
        assert!(F_SIZE == 48 && F_PARENT_LOC == 0);
        // One 32-bit store clears `flags` and the padding after it; one 64-bit store of a
        // depth below 2^32 sets `depth` and clears `flags` and the padding.
        assert!(F_FLAGS == F_DEPTH + 4 && F_START >= F_FLAGS + 4 && F_DEPTH.is_multiple_of(8));
        // The exit paths read `flags` and the zero `pad` after it as one 32-bit word.
        assert!(offset_of!(Frame, pad) == F_FLAGS + 2);
        assert!(crate::filter::FORCE_BIT > u16::MAX as u32);
        assert!(ENTRY_BITS < 64 && EXIT_BITS < 64);
        assert!(crate::thread::block::GUARD == 1);
        // `recorded` and `depth` are read and written as 32-bit words.
        assert!(size_of::<crate::filter::FilterState>() >= 20);
    };
}

/// `naked_asm!` for the hooks: the template strings in brackets, then the hook's own operands;
/// the operands every hook may use (the [`off`] offsets, the [`EntryRegs`] slots, the session
/// state, the exit trampoline) are added here. The comment line uses each of them once (an
/// assembler comment emits nothing), so no hook has to name them.
macro_rules! hook_asm {
    ([$($template:expr),+ $(,)?] $(, $($operand:tt)+)?) => {
        naked_asm!(
            $($template,)+
            concat!(
                "/* {block} {fast_depth} {frames} {len} {overflow} {cursor} {limit} {commit} ",
                "{tsc_base} {ns_base} {mult} {tsc_max} {f_size} {f_parent_loc} {f_parent_ip} ",
                "{f_child_ip} {f_depth} {f_flags} {f_start} {entry_bits} {exit_bits} {max_depth} ",
                "{more} {state} {on} {tramp} {size} {rdi} {rsi} {rdx} {rcx} {r8} {r9} {rax} {r10} ",
                "{r11} {xmm} {recorded} {filt_depth} {fast_time} {pending} {f_word} {word_flip} ",
                "{plain} {exit_force} {force} */"
            ),
            $($($operand)+,)?
            block = const off::BLOCK,
            fast_depth = const off::FAST_DEPTH,
            frames = const off::FRAMES,
            len = const off::LEN,
            overflow = const off::OVERFLOW,
            cursor = const off::CURSOR,
            limit = const off::LIMIT,
            commit = const off::COMMIT,
            tsc_base = const off::TSC_BASE,
            ns_base = const off::NS_BASE,
            mult = const off::MULT,
            tsc_max = const off::TSC_MAX,
            f_size = const off::F_SIZE,
            f_parent_loc = const off::F_PARENT_LOC,
            f_parent_ip = const off::F_PARENT_IP,
            f_child_ip = const off::F_CHILD_IP,
            f_depth = const off::F_DEPTH,
            f_flags = const off::F_FLAGS,
            f_start = const off::F_START,
            f_word = const off::F_WORD,
            word_flip = const off::WORD_FLIP,
            entry_bits = const off::ENTRY_BITS,
            exit_bits = const off::EXIT_BITS,
            max_depth = const off::MAX_DEPTH,
            // The "more records" bit of a header word (`raw::header_word`'s `more`).
            more = const 4,
            state = sym crate::config::STATE,
            on = const crate::config::ON,
            plain = sym crate::config::PLAIN,
            tramp = sym exit_trampoline,
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
            recorded = const off::RECORDED,
            filt_depth = const off::FILT_DEPTH,
            fast_time = sym crate::filter::FAST_THRESHOLD,
            exit_force = sym crate::filter::EXIT_FORCE,
            force = const crate::filter::FORCE_BIT,
            pending = const crate::frame_flags::PENDING,
        )
    };
}
