//! The one table of [`crate::rstack::Frame::flags`] bits: what each hooked function's frame
//! asks of its exit. Every module that marks frames takes its bits from here, and a
//! compile-time check below proves that no two bits overlap.
//!
//! Who sets them:
//!
//! | bits | set by | meaning at the exit |
//! |---|---|---|
//! | `NORECORD` … `FINISH` | `filter` (record-time filters and triggers) | counters and limits to restore, pending entries to write |
//! | `ARGS_SAVED` | `thread` | the pending ENTRY has its argument payload saved |
//! | `RET_INT_KIND`, `RET_FP_KIND`, `RETVAL` | `args` | a return value to record |
//! | `REARM` | `plt` | the PLT slot was unbound at the call: re-arm it |
//! | `DYN_EXIT` | `entry` (dynamic entry) | the slot holds the dynamic exit trampoline |
//!
//! The exit trampoline's fast path takes a frame whose flags are 0, [`RET_INT`] or [`RET_FP`];
//! any other value sends the exit to the Rust handler. The entry trampoline stores the flags
//! of an argument plan (`args::Plan`, bits 48–63) as they are, so those values must stay
//! `u16` frame flags too.

/// Hooked only to keep a filter counter: no records.
pub const NORECORD: u16 = 0x0001;
/// A `-F` function: decrements `in_count` on exit.
pub const IN: u16 = 0x0002;
/// A `-N` function: decrements `out_count` on exit.
pub const OUT: u16 = 0x0004;
/// ENTRY record not written yet (`-t`, `-C`).
pub const PENDING: u16 = 0x0008;
/// A `-C` function: writes the pending entries of its callers (below it, only the paths to
/// further `-C` functions are recorded).
pub const CALLER: u16 = 0x0010;
/// Changed the limits in force: restore them from the frame's `filter::Saved`.
pub const LIMITS: u16 = 0x0020;
/// `trace_on`: recording resumes at this entry.
pub const TRACE_ON: u16 = 0x0040;
/// `trace_off`: recording stops at this entry.
pub const TRACE_OFF: u16 = 0x0080;
/// `finish`: recording ends for good after this entry.
pub const FINISH: u16 = 0x0100;
/// The frame's pending ENTRY has its argument payload saved (`ThreadState::save_args`).
pub const ARGS_SAVED: u16 = 0x0200;
/// `read=`: counters are read at the entry and their differences recorded before the exit
/// (`counters`).
pub const READ: u16 = 0x0400;
/// Entered through the dynamic entry trampoline (full dynamic patching): the hijacked slot
/// holds the dynamic exit trampoline, which saves every scratch register; re-hijacking after
/// an exception writes that one back.
pub const DYN_EXIT: u16 = 0x0800;
/// With [`RETVAL`]: the return value is the 8 bytes of `rax`.
pub const RET_INT_KIND: u16 = 0x1000;
/// With [`RETVAL`]: the return value is the 8 low bytes of `xmm0`.
pub const RET_FP_KIND: u16 = 0x2000;
/// The function has a return-value item (its exit takes the Rust handler unless the flags
/// are exactly [`RET_INT`] or [`RET_FP`]).
pub const RETVAL: u16 = 0x4000;
/// The PLT slot was not bound when the call started; re-arm it at the exit.
pub const REARM: u16 = 0x8000;

/// Frame flags value (no other bit) for a return value whose payload is the 8 bytes of `rax`:
/// integers, chars and pointers of up to 8 bytes, stored in their size and padded to 8, which
/// readers skip. The exit trampoline writes such records itself.
pub const RET_INT: u16 = RETVAL | RET_INT_KIND;
/// As [`RET_INT`], with the 8 low bytes of `xmm0` (`float` or `double`).
pub const RET_FP: u16 = RETVAL | RET_FP_KIND;

/// Every single bit of the table, once.
const ALL: [u16; 16] = [
    NORECORD,
    IN,
    OUT,
    PENDING,
    CALLER,
    LIMITS,
    TRACE_ON,
    TRACE_OFF,
    FINISH,
    ARGS_SAVED,
    READ,
    DYN_EXIT,
    RET_INT_KIND,
    RET_FP_KIND,
    RETVAL,
    REARM,
];

/// Whether every entry of `bits` is one bit and no two share it.
const fn disjoint(bits: &[u16]) -> bool {
    let mut seen = 0u16;
    let mut i = 0;
    while i < bits.len() {
        if !bits[i].is_power_of_two() || seen & bits[i] != 0 {
            return false;
        }
        seen |= bits[i];
        i += 1;
    }
    true
}

const _: () = assert!(disjoint(&ALL), "frame flag bits overlap");

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overlap_is_detected() {
        assert!(disjoint(&ALL));
        assert!(!disjoint(&[IN, OUT, IN]));
        assert!(!disjoint(&[RET_INT]));
    }
}
