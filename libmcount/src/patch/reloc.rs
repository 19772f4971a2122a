//! Relocating the first instructions of a function built without instrumentation, so that a
//! 5-byte `call` can take their place (runtime spec §11.3).
//!
//! API contract (shared by the patcher): [`relocate`] decodes the instructions at the patch
//! point, rewrites them for the address they will run at, and appends a jump back to the
//! first byte after the displaced ones.

/// Upper bound of [`Relocated::code`]'s length: the patcher reserves this much per function.
pub const MAX_RELOCATED: usize = 256;

/// The displaced instructions, ready to be copied to the `dest` given to [`relocate`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Relocated {
    /// The code to place at `dest`: the displaced instructions (rewritten where they refer to
    /// their own address), then a jump to `addr + skip + patch_len`.
    pub code: Vec<u8>,
    /// How many bytes after the patch point the displaced instructions cover (>= 5): the
    /// patcher writes its 5-byte call there and pads the rest with `nop`s (0x90).
    pub patch_len: usize,
}

/// Why a function cannot be patched safely.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// Fewer than 5 bytes of instructions before the function's end (or a `ret`/`jmp` ends
    /// it first).
    TooShort,
    /// A branch in the rest of the function lands inside the displaced bytes (after their
    /// first one).
    JumpIntoPatch,
    /// An instruction that cannot be decoded, or that cannot run elsewhere (named by its
    /// mnemonic).
    Unsupported(String),
}

/// Relocates the instructions of `func` (the whole function's bytes, loaded at `addr`) that
/// start at offset `skip` (4 after an `endbr64`, else 0) and cover at least 5 bytes, for
/// running at `dest`.
pub fn relocate(func: &[u8], addr: u64, skip: usize, dest: u64) -> Result<Relocated, Refusal> {
    let _ = (func, addr, skip, dest);
    Err(Refusal::Unsupported("not written yet".into()))
}

/// The targets of the direct jumps, conditional jumps and calls in `func` (loaded at `addr`)
/// that leave it: a target inside another function (not at its start) makes that one
/// unsafe to patch.
pub fn direct_branch_targets(func: &[u8], addr: u64) -> Vec<u64> {
    let _ = (func, addr);
    Vec::new()
}
