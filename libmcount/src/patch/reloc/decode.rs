//! Reading the instructions the relocation moves: capstone gives each instruction's length,
//! mnemonic and memory operands; the relative branches are recognised from their bytes, so that
//! the target and the width of the displacement come from the encoding itself.

use capstone::arch::x86::{ArchMode, X86Insn, X86InsnGroup, X86OperandType, X86Reg};
use capstone::arch::{ArchDetail, BuildsCapstone, BuildsCapstoneSyntax, DetailsArchInsn};
use capstone::{Capstone, Insn};

/// An x86-64 disassembler, with details (operands, groups, encoding offsets) when `detail`.
pub(super) fn disassembler(detail: bool) -> Option<Capstone> {
    Capstone::new()
        .x86()
        .mode(ArchMode::Mode64)
        .syntax(capstone::arch::x86::ArchSyntax::Intel)
        .detail(detail)
        .build()
        .ok()
}

/// What a relative branch does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum BranchKind {
    /// `jmp rel8` / `jmp rel32`.
    Jmp,
    /// `jcc rel8` / `jcc rel32`, with its condition code (the low nibble of the opcode).
    Jcc(u8),
    /// `call rel32`.
    Call,
    /// `loop`, `loope`, `loopne`, `jrcxz`/`jecxz`, `xbegin`: relative, but with no
    /// equivalent of longer reach.
    Other,
}

/// A relative (direct) branch recognised from its bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Branch {
    pub kind: BranchKind,
    /// The absolute target (end of the instruction + displacement).
    pub target: u64,
    /// The displacement's width in bytes (1, 2 or 4).
    pub rel_size: usize,
    /// The displacement width the opcode calls for (1 for `eb`/`7x`/loops, 4 otherwise).
    pub encoded_size: usize,
    /// An operand-size prefix (`66`) is present: the CPUs disagree on what it does.
    pub opsize: bool,
}

/// The relative branch encoded by `bytes` (one whole instruction at `addr`), if it is one.
pub(super) fn direct_branch(bytes: &[u8], addr: u64) -> Option<Branch> {
    let mut i = 0;
    let mut opsize = false;
    while let Some(&b) = bytes.get(i) {
        match b {
            0x66 => opsize = true,
            0xf0 | 0xf2 | 0xf3 | 0x2e | 0x36 | 0x3e | 0x26 | 0x64 | 0x65 | 0x67 => {}
            _ => break,
        }
        i += 1;
    }
    if matches!(bytes.get(i), Some(0x40..=0x4f)) {
        i += 1;
    }
    let (kind, opcode_end, encoded_size) = match (bytes.get(i)?, bytes.get(i + 1)) {
        (0xe8, _) => (BranchKind::Call, i + 1, 4),
        (0xe9, _) => (BranchKind::Jmp, i + 1, 4),
        (0xeb, _) => (BranchKind::Jmp, i + 1, 1),
        (op @ 0x70..=0x7f, _) => (BranchKind::Jcc(op & 0xf), i + 1, 1),
        (0xe0..=0xe3, _) => (BranchKind::Other, i + 1, 1),
        (0x0f, Some(op @ 0x80..=0x8f)) => (BranchKind::Jcc(op & 0xf), i + 2, 4),
        (0xc7, Some(0xf8)) => (BranchKind::Other, i + 2, 4),
        _ => return None,
    };
    let rel = bytes.get(opcode_end..)?;
    let disp = match rel.len() {
        1 => i64::from(rel[0] as i8),
        2 => i64::from(i16::from_le_bytes([rel[0], rel[1]])),
        4 => i64::from(i32::from_le_bytes([rel[0], rel[1], rel[2], rel[3]])),
        _ => return None,
    };
    let end = addr.wrapping_add(bytes.len() as u64);
    Some(Branch {
        kind,
        target: end.wrapping_add(disp as u64),
        rel_size: rel.len(),
        encoded_size,
        opsize,
    })
}

/// How one displaced instruction is to be moved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Action {
    /// Copied as it is.
    Copy,
    /// Copied with its RIP-relative disp32 (at this offset in the instruction) rewritten to
    /// keep addressing `target`.
    RipRelative { disp_at: usize, target: u64 },
    /// A relative jump, conditional jump or call, re-encoded for the new address.
    Branch(Branch),
}

/// One displaced instruction, decoded.
#[derive(Debug, Clone)]
pub(super) struct Displaced {
    /// Offset from the patch point.
    pub offset: usize,
    pub bytes: Vec<u8>,
    pub mnemonic: String,
    pub action: Action,
    /// Execution never continues with the next instruction (`ret`, `jmp`, `ud2`...).
    pub ends_flow: bool,
}

/// Classifies `insn` (at `offset` from the patch point) for relocation, or names why it
/// cannot move.
pub(super) fn classify(cs: &Capstone, insn: &Insn<'_>, offset: usize) -> Result<Displaced, String> {
    let bytes = insn.bytes().to_vec();
    let mnemonic = insn.mnemonic().unwrap_or("?").to_string();
    let detail = cs
        .insn_detail(insn)
        .map_err(|_| "undecodable".to_string())?;
    let id = insn.id().0;
    let in_group = |g: u32| detail.groups().iter().any(|x| u32::from(x.0) == g);
    let is = |i: X86Insn| id == i as u32;
    let ends_flow = in_group(X86InsnGroup::X86_GRP_RET)
        || in_group(X86InsnGroup::X86_GRP_IRET)
        || [
            X86Insn::X86_INS_JMP,
            X86Insn::X86_INS_LJMP,
            X86Insn::X86_INS_HLT,
            X86Insn::X86_INS_UD0,
            X86Insn::X86_INS_UD1,
            X86Insn::X86_INS_UD2,
            X86Insn::X86_INS_INT3,
        ]
        .into_iter()
        .any(is);
    let unmovable = [
        X86Insn::X86_INS_LOOP,
        X86Insn::X86_INS_LOOPE,
        X86Insn::X86_INS_LOOPNE,
        X86Insn::X86_INS_JRCXZ,
        X86Insn::X86_INS_JECXZ,
        X86Insn::X86_INS_JCXZ,
        X86Insn::X86_INS_XBEGIN,
    ]
    .into_iter()
    .any(is);
    let relative = in_group(X86InsnGroup::X86_GRP_BRANCH_RELATIVE);
    let branch = direct_branch(&bytes, insn.address());
    let action = match branch {
        _ if unmovable => return Err(mnemonic),
        Some(b) if b.kind == BranchKind::Other => return Err(mnemonic),
        Some(b) => {
            // jmp/jcc/call with a 16-bit operand size behave differently on Intel and AMD.
            if b.opsize || b.rel_size != b.encoded_size {
                return Err(format!("{mnemonic} (unusual encoding)"));
            }
            Action::Branch(b)
        }
        None if relative => return Err(mnemonic),
        None => rip_relative(&detail, &bytes, insn.address())?,
    };
    Ok(Displaced {
        offset,
        bytes,
        mnemonic,
        action,
        ends_flow,
    })
}

/// [`Action::RipRelative`] when one of the instruction's memory operands is addressed from RIP,
/// else [`Action::Copy`].
fn rip_relative(
    detail: &capstone::InsnDetail<'_>,
    bytes: &[u8],
    addr: u64,
) -> Result<Action, String> {
    let ArchDetail::X86Detail(x86) = detail.arch_detail();
    let mut rip = false;
    for op in x86.operands() {
        if let X86OperandType::Mem(m) = op.op_type {
            match m.base().0 as u32 {
                X86Reg::X86_REG_RIP => rip = true,
                X86Reg::X86_REG_EIP => return Err("eip-relative".into()),
                _ => {}
            }
        }
    }
    if !rip {
        return Ok(Action::Copy);
    }
    // RIP-relative means ModRM mod=00 rm=101 with a disp32 right after it (no SIB). Capstone
    // reports the ModRM's offset reliably, not always the disp's size (VEX forms).
    let unusual = || "rip-relative (unusual encoding)".to_string();
    let modrm_at = usize::from(x86.encoding().modrm_offset);
    if modrm_at == 0 || x86.addr_size() != 8 || bytes.get(modrm_at).map(|m| m & 0xc7) != Some(0x05)
    {
        return Err(unusual());
    }
    let at = modrm_at + 1;
    let raw = bytes.get(at..at + 4).ok_or_else(unusual)?;
    let value = i32::from_le_bytes([raw[0], raw[1], raw[2], raw[3]]);
    if i64::from(value) != x86.disp() {
        return Err(unusual());
    }
    let end = addr.wrapping_add(bytes.len() as u64);
    Ok(Action::RipRelative {
        disp_at: at,
        target: end.wrapping_add(i64::from(value) as u64),
    })
}
