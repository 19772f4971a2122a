//! Relocating the first instructions of a function built without instrumentation, so that a
//! 5-byte `call` can take their place (runtime spec §11.3).
//!
//! API contract (shared by the patcher): [`relocate`] decodes the instructions at the patch
//! point, rewrites them for the address they will run at, and appends a jump back to the
//! first byte after the displaced ones.
//! The patcher goes through a [`Decoder`], made once per module: [`Decoder::scan`] decodes each
//! function once, and that decode serves both the checks across functions and the
//! [`Refusal::JumpIntoPatch`] check of [`Decoder::relocate`].
//!
//! How each displaced instruction moves (`dest` is where the code will run):
//!
//! - position-independent instructions are copied verbatim;
//! - a RIP-relative memory operand (any instruction: `lea`, loads, stores, compares, SSE...)
//!   gets its disp32 recomputed for `dest`; out of ±2 GiB → `Unsupported("rip-relative out of
//!   reach")`;
//! - `jmp rel8/rel32` → `jmp rel32`, or `jmp qword ptr [rip+0]` + 8-byte target when `dest` is
//!   too far; `jcc rel8/rel32` → `jcc rel32`, or the inverse `jcc rel8` over such an absolute
//!   jump; a branch to a displaced instruction goes to its relocated copy;
//! - `call rel32` is necessarily the last displaced instruction (it is 5 bytes long), so its
//!   return address is the continuation: the original return address is pushed (`push imm32;
//!   mov dword ptr [rsp+4], imm32`, no flag or register other than `rsp` touched) and the
//!   target jumped to. The callee, and a backtrace taken inside it, see exactly the frame of
//!   the unpatched program (return address inside the function, whose unwind info applies).
//!   A displaced direct call that is not the last (impossible with `e8 rel32`, kept for
//!   completeness) would be a real `call` from `dest`, like an indirect `call` (`call rax`,
//!   `call qword ptr [rip+x]`, copied with its operand adjusted): a backtrace inside such a
//!   callee sees a return address in the out-of-line buffer, which has no unwind info, so
//!   the libgcc unwinder stops there (frame-pointer walkers go on).
//! - `loop*`, `jrcxz`/`jecxz`, `xbegin`, branches with an operand-size prefix,
//!   `EIP`-relative operands → `Unsupported(mnemonic)`; bytes capstone cannot decode →
//!   `Unsupported("undecodable")`.
//!
//! A `ret`, `jmp` or other end of flow (`ud2`, `hlt`, `int3`) before 5 bytes are covered is
//! refused with [`Refusal::TooShort`] (the function's start is too short to hold the call);
//! as the last displaced instruction it is fine, and no jump back follows it.
//!
//! The rest of the function (`func` after the displaced bytes) is decoded linearly, up to its
//! end or the first bytes that do not decode: a direct branch (`jmp`, `jcc`, `call`, `loop`,
//! `jrcxz`) into the displaced bytes after their first → [`Refusal::JumpIntoPatch`] (a jump
//! to the patch point itself is allowed). Branches from other functions, jump tables and
//! exception tables are not seen here: [`direct_branch_targets`] lets the patcher check the
//! first kind across functions.
//!
//! The code is valid at the given `dest` only. A `rel32` form is chosen when the target is in
//! reach from anywhere in `[dest, dest + MAX_RELOCATED]`. Other `Unsupported` reasons:
//! `"<mnemonic> (unusual encoding)"`, `"rip-relative (unusual encoding)"`, `"eip-relative"`,
//! `"branch into an instruction"` (a displaced branch into the middle of a displaced
//! instruction), `"relocated code too long"` (cannot happen with 5 displaced bytes).
//!
//! While the displaced instructions run at `dest`, a backtrace (a signal, a profiler) sees a
//! PC without unwind info; after them the code jumps back and runs in place again.

mod decode;
mod emit;
#[cfg(test)]
mod tests_crafted;
#[cfg(test)]
mod tests_exec;
#[cfg(test)]
mod tests_libc;

use capstone::Capstone;
use decode::{classify, direct_branch, disassembler, Action, BranchKind, Displaced};
use emit::{Emitter, Target};

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

/// The size of the call written at the patch point.
const CALL_LEN: usize = 5;

/// The disassemblers used while patching a module, made once for all its functions: one with
/// details for the displaced instructions, one without for the linear scans of whole functions.
pub struct Decoder {
    detailed: Capstone,
    plain: Capstone,
}

/// The direct branches of one function, decoded linearly from its first byte up to its end or
/// the first bytes that do not decode.
#[derive(Debug, Default)]
pub struct Scan {
    /// Offset of each decoded instruction.
    starts: Vec<u32>,
    /// `(offset of the instruction, target)` of each direct branch.
    branches: Vec<(u32, u64)>,
}

impl Scan {
    /// The targets outside `[addr, addr + len)` (the scanned function's place).
    pub fn leaving(&self, addr: u64, len: usize) -> impl Iterator<Item = u64> + '_ {
        let end = addr.wrapping_add(len as u64);
        self.branches
            .iter()
            .map(|&(_, t)| t)
            .filter(move |&t| t < addr || t >= end)
    }
}

impl Decoder {
    /// `None` when capstone cannot be set up.
    pub fn new() -> Option<Decoder> {
        Some(Decoder {
            detailed: disassembler(true)?,
            plain: disassembler(false)?,
        })
    }

    /// The direct branches of `code` (loaded at `addr`).
    pub fn scan(&self, code: &[u8], addr: u64) -> Scan {
        let mut out = Scan::default();
        let Ok(mut insns) = self.plain.disasm_iter(code, addr) else {
            return out;
        };
        while let Some(insn) = insns.next() {
            let offset = insn.address().wrapping_sub(addr) as u32;
            out.starts.push(offset);
            if let Some(b) = direct_branch(insn.bytes(), insn.address()) {
                out.branches.push((offset, b.target));
            }
        }
        out
    }

    /// [`relocate`], with the [`Decoder::scan`] of `func` when it was made already.
    pub fn relocate(
        &self,
        func: &[u8],
        addr: u64,
        skip: usize,
        dest: u64,
        scan: Option<&Scan>,
    ) -> Result<Relocated, Refusal> {
        let start = addr.wrapping_add(skip as u64);
        let body = func.get(skip..).ok_or(Refusal::TooShort)?;
        let displaced = displaced(&self.detailed, body, start)?;
        let patch_len = displaced.last().map_or(0, |d| d.offset + d.bytes.len());
        let rest_at = skip + patch_len;
        let rest_addr = start.wrapping_add(patch_len as u64);
        let into = |t: u64| t > start && t < rest_addr;
        // The linear decode of the whole function passes through the end of the displaced
        // instructions when they decode the same way (always but for undecodable bytes):
        // from there on it is the decode of the rest.
        let jumps_in = match scan.filter(|s| s.starts.binary_search(&(rest_at as u32)).is_ok()) {
            Some(s) => s
                .branches
                .iter()
                .any(|&(at, t)| at as usize >= rest_at && into(t)),
            None => self
                .scan(&body[patch_len..], rest_addr)
                .branches
                .iter()
                .any(|&(_, t)| into(t)),
        };
        if jumps_in {
            return Err(Refusal::JumpIntoPatch);
        }
        let code = emit(&displaced, start, rest_addr, dest)?;
        if code.len() > MAX_RELOCATED {
            return Err(Refusal::Unsupported("relocated code too long".into()));
        }
        Ok(Relocated { code, patch_len })
    }
}

/// Relocates the instructions of `func` (the whole function's bytes, loaded at `addr`) that
/// start at offset `skip` (4 after an `endbr64`, else 0) and cover at least 5 bytes, for
/// running at `dest`.
pub fn relocate(func: &[u8], addr: u64, skip: usize, dest: u64) -> Result<Relocated, Refusal> {
    let d = Decoder::new().ok_or_else(|| Refusal::Unsupported("no disassembler".into()))?;
    d.relocate(func, addr, skip, dest, None)
}

/// The whole instructions of `body` (at `start`) that cover the first 5 bytes.
fn displaced(cs: &Capstone, body: &[u8], start: u64) -> Result<Vec<Displaced>, Refusal> {
    let mut out: Vec<Displaced> = Vec::new();
    let mut covered = 0;
    while covered < CALL_LEN {
        let left = &body[covered..];
        if left.is_empty() {
            return Err(Refusal::TooShort);
        }
        // One instruction at a time: at most 15 bytes are looked at.
        let window = &left[..left.len().min(15)];
        let insns = cs
            .disasm_count(window, start.wrapping_add(covered as u64), 1)
            .map_err(|_| Refusal::Unsupported("undecodable".into()))?;
        let insn = insns
            .iter()
            .next()
            .ok_or_else(|| Refusal::Unsupported("undecodable".into()))?;
        let d = classify(cs, insn, covered).map_err(Refusal::Unsupported)?;
        covered += d.bytes.len();
        let ends =
            d.ends_flow || matches!(d.action, Action::Branch(b) if b.kind == BranchKind::Jmp);
        out.push(d);
        if ends && covered < CALL_LEN {
            return Err(Refusal::TooShort);
        }
    }
    Ok(out)
}

/// The relocated code of `displaced` (from `start` to `cont`), for running at `dest`.
fn emit(displaced: &[Displaced], start: u64, cont: u64, dest: u64) -> Result<Vec<u8>, Refusal> {
    let mut out = Emitter::new(dest);
    let mut starts = Vec::with_capacity(displaced.len());
    // A target inside the displaced bytes must be one of their instruction starts.
    let target_of = |t: u64| -> Result<Target, Refusal> {
        if t < start || t >= cont {
            return Ok(Target::Abs(t));
        }
        let offset = (t - start) as usize;
        displaced
            .iter()
            .position(|d| d.offset == offset)
            .map(Target::Local)
            .ok_or_else(|| Refusal::Unsupported("branch into an instruction".into()))
    };
    let mut falls_through = true;
    for (i, d) in displaced.iter().enumerate() {
        starts.push(out.code.len());
        let last = i + 1 == displaced.len();
        match &d.action {
            Action::Copy => out.copy(&d.bytes),
            Action::RipRelative { disp_at, target } => {
                out.copy_rip_relative(&d.bytes, *disp_at, *target)?
            }
            Action::Branch(b) => {
                let target = target_of(b.target)?;
                match b.kind {
                    BranchKind::Jmp => out.jmp(target),
                    BranchKind::Jcc(cc) => out.jcc(cc, target),
                    BranchKind::Call if last => {
                        out.push_u64(cont);
                        out.jmp(target);
                        falls_through = false;
                    }
                    BranchKind::Call => out.call(target),
                    BranchKind::Other => return Err(Refusal::Unsupported(d.mnemonic.clone())),
                }
                if b.kind == BranchKind::Jmp {
                    falls_through = false;
                }
            }
        }
        if d.ends_flow {
            falls_through = false;
        }
    }
    if falls_through {
        out.jmp(Target::Abs(cont));
    }
    Ok(out.finish(&starts))
}

/// The targets of the direct jumps, conditional jumps and calls in `func` (loaded at `addr`)
/// that leave it: a target inside another function (not at its start) makes that one
/// unsafe to patch.
pub fn direct_branch_targets(func: &[u8], addr: u64) -> Vec<u64> {
    let Some(d) = Decoder::new() else {
        return Vec::new();
    };
    let mut out: Vec<u64> = d.scan(func, addr).leaving(addr, func.len()).collect();
    out.sort_unstable();
    out.dedup();
    out
}
