//! Relocation of crafted instruction sequences, one per rule: the produced code is decoded
//! again and its branch targets and memory operands compared with the original's.

use super::decode::{direct_branch, disassembler};
use super::*;
use capstone::arch::x86::{X86OperandType, X86Reg};
use capstone::arch::{ArchDetail, DetailsArchInsn};
use proptest::prelude::*;

/// One decoded instruction of relocated code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Line {
    pub addr: u64,
    pub mnemonic: String,
    pub bytes: Vec<u8>,
    /// Where a relative branch, or an absolute one through an inline literal, goes.
    pub branch: Option<u64>,
    /// The absolute address of a RIP-relative memory operand.
    pub mem: Option<u64>,
}

fn read_u64(code: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(code.get(at..at + 8)?.try_into().ok()?))
}

/// Decodes the whole of `code` (at `dest`), stepping over the 8-byte literals of the absolute
/// jumps and calls; `None` when some bytes do not decode.
pub(super) fn listing(code: &[u8], dest: u64) -> Option<Vec<Line>> {
    let cs = disassembler(true)?;
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < code.len() {
        let addr = dest + pos as u64;
        let insns = cs.disasm_count(&code[pos..], addr, 1).ok()?;
        let insn = insns.iter().next()?;
        let bytes = insn.bytes().to_vec();
        let detail = cs.insn_detail(insn).ok()?;
        let ArchDetail::X86Detail(x86) = detail.arch_detail();
        let mut mem = x86.operands().find_map(|op| match op.op_type {
            X86OperandType::Mem(m) if m.base().0 as u32 == X86Reg::X86_REG_RIP => {
                Some((addr + bytes.len() as u64).wrapping_add(m.disp() as u64))
            }
            _ => None,
        });
        let mut branch = direct_branch(&bytes, addr).map(|b| b.target);
        let mut next = pos + bytes.len();
        if bytes == [0xff, 0x25, 0, 0, 0, 0] {
            branch = Some(read_u64(code, next)?);
            mem = None;
            next += 8;
        } else if bytes == [0xff, 0x15, 2, 0, 0, 0] {
            branch = Some(read_u64(code, next + 2)?);
            mem = None;
        } else if bytes == [0xeb, 8] && pos >= 6 && code[pos - 6..pos] == [0xff, 0x15, 2, 0, 0, 0] {
            next += 8;
        }
        out.push(Line {
            addr,
            mnemonic: insn.mnemonic()?.to_string(),
            bytes,
            branch,
            mem,
        });
        pos = next;
    }
    Some(out)
}

/// The RIP-relative memory operands and outside branch targets of a listing.
fn operands(lines: &[Line], start: u64, end: u64) -> (Vec<u64>, Vec<u64>) {
    let mems = lines.iter().filter_map(|l| l.mem).collect();
    let branches = lines
        .iter()
        .filter_map(|l| l.branch)
        .filter(|&t| t < start || t >= end)
        .collect();
    (mems, branches)
}

/// Checks `r`, the relocation of `func` (at `addr`, from `skip`) to `dest`: it decodes, has
/// the same RIP-relative operands, and keeps every branch that leaves the displaced bytes
/// (plus the jump back, unless the last displaced instruction ends the flow). Returns the
/// listing of the displaced instructions.
pub(super) fn check_relocated(
    func: &[u8],
    addr: u64,
    skip: usize,
    dest: u64,
    r: &Relocated,
) -> Result<Vec<Line>, String> {
    if r.code.len() > MAX_RELOCATED || r.patch_len < 5 || skip + r.patch_len > func.len() {
        return Err(format!("bad shape: {r:x?}"));
    }
    let start = addr.wrapping_add(skip as u64);
    let end = start.wrapping_add(r.patch_len as u64);
    let moved = listing(&r.code, dest).ok_or("relocated code does not decode")?;
    let orig = listing(&func[skip..skip + r.patch_len], start).ok_or("original does not decode")?;
    let (mems, mut branches) = operands(&orig, start, end);
    let (moved_mems, moved_branches) =
        operands(&moved, dest, dest.wrapping_add(r.code.len() as u64));
    let inside = |t: u64| t >= dest && t < dest.wrapping_add(r.code.len() as u64);
    let starts: Vec<u64> = moved.iter().map(|l| l.addr).collect();
    if let Some(l) = moved
        .iter()
        .find(|l| l.branch.is_some_and(|t| inside(t) && !starts.contains(&t)))
    {
        return Err(format!("branch into the middle of an instruction: {l:x?}"));
    }
    if moved_mems != mems {
        return Err(format!("memory operands {moved_mems:x?} != {mems:x?}"));
    }
    let last = orig.last().map_or("", |l| l.mnemonic.as_str());
    if !matches!(
        last,
        "jmp" | "ret" | "call" | "ud2" | "int3" | "hlt" | "ljmp" | "retf" | "retfq"
    ) {
        branches.push(end);
    }
    match branches.iter().find(|b| !moved_branches.contains(b)) {
        Some(b) => Err(format!("branch to {b:#x} lost: {moved:x?}")),
        None => Ok(orig),
    }
}

const ADDR: u64 = 0x40_0000;
const NEAR: u64 = 0x50_0000;
const FAR: u64 = 0x7f00_0000_0000;

/// `func` (at [`ADDR`]) relocated to `dest`, with its listing.
fn moved(func: &[u8], skip: usize, dest: u64) -> (usize, Vec<Line>) {
    let r = relocate(func, ADDR, skip, dest).expect("relocatable");
    assert!(r.code.len() <= MAX_RELOCATED);
    (
        r.patch_len,
        listing(&r.code, dest).expect("relocated code decodes"),
    )
}

fn mnemonics(lines: &[Line]) -> Vec<&str> {
    lines.iter().map(|l| l.mnemonic.as_str()).collect()
}

fn unsupported(why: &str) -> Result<Relocated, Refusal> {
    Err(Refusal::Unsupported(why.into()))
}

#[test]
fn reloc_copies_position_independent_code_and_jumps_back() {
    let func = [0x55, 0x48, 0x89, 0xe5, 0x48, 0x83, 0xec, 0x10, 0xc3];
    for dest in [NEAR, FAR] {
        let (len, lines) = moved(&func, 0, dest);
        assert_eq!(len, 8);
        assert_eq!(mnemonics(&lines), ["push", "mov", "sub", "jmp"]);
        assert_eq!(lines[..3].concat_bytes(), func[..8]);
        assert_eq!(lines[3].branch, Some(ADDR + 8));
    }
    // After endbr64: the patch point is 4 bytes in, and the continuation is relative to it.
    let func = [
        0xf3, 0x0f, 0x1e, 0xfa, 0x55, 0x48, 0x89, 0xe5, 0x41, 0x57, 0xc3,
    ];
    let (len, lines) = moved(&func, 4, NEAR);
    assert_eq!(len, 6);
    assert_eq!(mnemonics(&lines), ["push", "mov", "push", "jmp"]);
    assert_eq!(lines[3].branch, Some(ADDR + 10));
}

trait ConcatBytes {
    fn concat_bytes(&self) -> Vec<u8>;
}

impl ConcatBytes for [Line] {
    fn concat_bytes(&self) -> Vec<u8> {
        self.iter().flat_map(|l| l.bytes.clone()).collect()
    }
}

#[test]
fn reloc_rewrites_every_rip_relative_operand() {
    let rel = 0x1234_i32.to_le_bytes();
    let with =
        |head: &[u8], tail: &[u8]| -> Vec<u8> { [head, &rel[..], tail, &[0xc3][..]].concat() };
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("mov", with(&[0x48, 0x8b, 0x05], &[])), // mov rax, [rip+x]
        ("mov", with(&[0x48, 0x89, 0x05], &[])), // mov [rip+x], rax
        ("lea", with(&[0x48, 0x8d, 0x3d], &[])), // lea rdi, [rip+x]
        ("cmp", with(&[0x83, 0x3d], &[0x05])),   // cmp dword [rip+x], 5
        ("movsd", with(&[0xf2, 0x0f, 0x10, 0x05], &[])), // movsd xmm0, [rip+x]
        ("vmovdqa", with(&[0xc5, 0xf9, 0x6f, 0x05], &[])), // vmovdqa xmm0, [rip+x]
        ("mov", with(&[0xc7, 0x05], &[1, 0, 0, 0])), // mov dword [rip+x], 1
    ];
    for (name, func) in cases {
        let n = func.len() - 1;
        let target = ADDR + n as u64 + 0x1234;
        let (len, lines) = moved(&func, 0, NEAR);
        assert_eq!(len, n, "{name}");
        assert_eq!(lines[0].mnemonic, name);
        assert_eq!(lines[0].mem, Some(target), "{name}: same memory operand");
        assert_eq!(lines[0].bytes.len(), n);
        // Everything but the displacement is unchanged (the immediate after it too).
        let disp_at = lines[0].bytes.len()
            - 4
            - if name == "cmp" {
                1
            } else if n == 10 {
                4
            } else {
                0
            };
        assert_eq!(lines[0].bytes[..disp_at], func[..disp_at], "{name}");
        assert_eq!(
            lines[0].bytes[disp_at + 4..],
            func[disp_at + 4..n],
            "{name}"
        );
        assert_eq!(lines[1].branch, Some(ADDR + n as u64));
        assert_eq!(
            relocate(&func, ADDR, 0, FAR),
            unsupported("rip-relative out of reach"),
            "{name}"
        );
    }
}

#[test]
fn reloc_keeps_indirect_branches_through_rip() {
    // jmp qword ptr [rip+0x100]: ends the flow, so no jump back.
    let func = [0xff, 0x25, 0x00, 0x01, 0x00, 0x00, 0xcc];
    let (len, lines) = moved(&func, 0, NEAR);
    assert_eq!(len, 6);
    assert_eq!(mnemonics(&lines), ["jmp"]);
    assert_eq!(lines[0].mem, Some(ADDR + 6 + 0x100));
    // call qword ptr [rip+0x100]: a real call from the buffer, then the jump back.
    let func = [0xff, 0x15, 0x00, 0x01, 0x00, 0x00, 0xc3];
    let (len, lines) = moved(&func, 0, NEAR);
    assert_eq!(len, 6);
    assert_eq!(mnemonics(&lines), ["call", "jmp"]);
    assert_eq!(lines[0].mem, Some(ADDR + 6 + 0x100));
    assert_eq!(lines[1].branch, Some(ADDR + 6));
}

#[test]
fn reloc_moves_jumps_near_and_far() {
    // push rbp; mov rbp, rsp; jmp +0x10: the jmp is the last displaced instruction.
    let func = [0x55, 0x48, 0x89, 0xe5, 0xeb, 0x10, 0x90, 0xc3];
    let target = ADDR + 6 + 0x10;
    let (len, lines) = moved(&func, 0, NEAR);
    assert_eq!(len, 6);
    assert_eq!(
        mnemonics(&lines),
        ["push", "mov", "jmp"],
        "no jump back after a jmp"
    );
    assert_eq!(lines[2].bytes[0], 0xe9);
    assert_eq!(lines[2].branch, Some(target));
    let (_, lines) = moved(&func, 0, FAR);
    assert_eq!(mnemonics(&lines), ["push", "mov", "jmp"]);
    assert_eq!(lines[2].bytes, [0xff, 0x25, 0, 0, 0, 0]);
    assert_eq!(lines[2].branch, Some(target));
    // A tail call as the whole start: jmp rel32.
    let func = [0xe9, 0x00, 0x10, 0x00, 0x00, 0xcc];
    for dest in [NEAR, FAR] {
        let (len, lines) = moved(&func, 0, dest);
        assert_eq!(len, 5);
        assert_eq!(lines.len(), 1);
        assert_eq!(lines[0].branch, Some(ADDR + 5 + 0x1000));
    }
}

#[test]
fn reloc_moves_conditional_jumps_near_and_far() {
    // test rdi, rdi; jz +0x10
    let func = [0x48, 0x85, 0xff, 0x74, 0x10, 0x90, 0xc3];
    let target = ADDR + 5 + 0x10;
    let (len, lines) = moved(&func, 0, NEAR);
    assert_eq!(len, 5);
    assert_eq!(mnemonics(&lines), ["test", "je", "jmp"]);
    assert_eq!(lines[1].bytes[..2], [0x0f, 0x84]);
    assert_eq!(lines[1].branch, Some(target));
    assert_eq!(lines[2].branch, Some(ADDR + 5));
    let (_, lines) = moved(&func, 0, FAR);
    assert_eq!(mnemonics(&lines), ["test", "jne", "jmp", "jmp"]);
    // The inverse condition steps over the absolute jump to the original target.
    assert_eq!(lines[1].branch, Some(lines[3].addr));
    assert_eq!(lines[2].bytes, [0xff, 0x25, 0, 0, 0, 0]);
    assert_eq!(lines[2].branch, Some(target));
    assert_eq!(lines[3].branch, Some(ADDR + 5));
}

#[test]
fn reloc_maps_branches_inside_the_displaced_bytes() {
    // .L: add esi, edi; dec edi; jnz .L  (target: the patch point itself)
    let func = [0x01, 0xfe, 0xff, 0xcf, 0x75, 0xfa, 0x89, 0xf0, 0xc3];
    for dest in [NEAR, FAR] {
        let (len, lines) = moved(&func, 0, dest);
        assert_eq!(len, 6);
        assert_eq!(mnemonics(&lines), ["add", "dec", "jne", "jmp"]);
        assert_eq!(lines[2].branch, Some(dest), "jnz goes to the relocated add");
        assert_eq!(lines[3].branch, Some(ADDR + 6));
    }
    // xor eax, eax; .L: add eax, edi; jnz .L  (target: the second instruction)
    let func = [0x31, 0xc0, 0x01, 0xf8, 0x75, 0xfc, 0xc3];
    let (len, lines) = moved(&func, 0, FAR);
    assert_eq!(len, 6);
    assert_eq!(lines[1].branch, None);
    assert_eq!(lines[2].branch, Some(lines[1].addr));
    // A jump into the middle of a displaced instruction has no relocated equivalent.
    let func = [0x48, 0x85, 0xff, 0x74, 0xfc, 0xc3];
    assert_eq!(
        relocate(&func, ADDR, 0, NEAR),
        unsupported("branch into an instruction")
    );
}

#[test]
fn reloc_turns_a_displaced_call_into_push_and_jump() {
    // call +0x100; (continuation) ret
    let func = [0xe8, 0x00, 0x01, 0x00, 0x00, 0xc3];
    let ret = ADDR + 5;
    for dest in [NEAR, FAR, 0x1234_5678_9abc] {
        let (len, lines) = moved(&func, 0, dest);
        assert_eq!(len, 5);
        assert_eq!(mnemonics(&lines), ["push", "mov", "jmp"]);
        let lo = u32::from_le_bytes(lines[0].bytes[1..5].try_into().unwrap());
        assert_eq!(
            lines[1].bytes[..4],
            [0xc7, 0x44, 0x24, 0x04],
            "mov dword [rsp+4]"
        );
        let hi = u32::from_le_bytes(lines[1].bytes[4..8].try_into().unwrap());
        assert_eq!(
            u64::from(hi) << 32 | u64::from(lo),
            ret,
            "original return address"
        );
        assert_eq!(lines[2].branch, Some(ADDR + 5 + 0x100));
    }
}

#[test]
fn reloc_refuses_short_starts_and_early_ends() {
    assert_eq!(relocate(&[0xc3], ADDR, 0, NEAR), Err(Refusal::TooShort));
    assert_eq!(
        relocate(&[0x31, 0xc0, 0xff, 0xc0], ADDR, 0, NEAR),
        Err(Refusal::TooShort)
    );
    assert_eq!(
        relocate(&[0xf3, 0x0f, 0x1e, 0xfa], ADDR, 4, NEAR),
        Err(Refusal::TooShort)
    );
    assert_eq!(relocate(&[0x90], ADDR, 4, NEAR), Err(Refusal::TooShort));
    // xor eax, eax; ret; then padding: the ret ends the function's flow first.
    let func = [0x31, 0xc0, 0xc3, 0x90, 0x90, 0x90, 0x90];
    assert_eq!(relocate(&func, ADDR, 0, NEAR), Err(Refusal::TooShort));
    // jmp rel8 before 5 bytes.
    let func = [0x31, 0xc0, 0xeb, 0x02, 0x90, 0x90, 0xc3];
    assert_eq!(relocate(&func, ADDR, 0, NEAR), Err(Refusal::TooShort));
    // ...but a ret that is the last displaced instruction is fine, with no jump back.
    let func = [0x31, 0xc0, 0xff, 0xc0, 0xc3];
    let (len, lines) = moved(&func, 0, NEAR);
    assert_eq!(len, 5);
    assert_eq!(mnemonics(&lines), ["xor", "inc", "ret"]);
}

#[test]
fn reloc_refuses_unmovable_and_undecodable_instructions() {
    let rest = [0x90; 8];
    let with = |head: &[u8]| [head, &rest[..]].concat();
    assert_eq!(
        relocate(&with(&[0xe2, 0xfe]), ADDR, 0, NEAR),
        unsupported("loop")
    );
    assert_eq!(
        relocate(&with(&[0xe1, 0xfe]), ADDR, 0, NEAR),
        unsupported("loope")
    );
    assert_eq!(
        relocate(&with(&[0xe3, 0x02]), ADDR, 0, NEAR),
        unsupported("jrcxz")
    );
    assert_eq!(
        relocate(&with(&[0x67, 0xe3, 0x02]), ADDR, 0, NEAR),
        unsupported("jecxz")
    );
    let xbegin = with(&[0xc7, 0xf8, 0, 0, 0, 0]);
    assert_eq!(relocate(&xbegin, ADDR, 0, NEAR), unsupported("xbegin"));
    assert_eq!(
        relocate(&with(&[0x06]), ADDR, 0, NEAR),
        unsupported("undecodable")
    );
    // A branch with an operand-size prefix.
    let r = relocate(&with(&[0x66, 0xe9, 0x10, 0x00]), ADDR, 0, NEAR);
    assert!(matches!(r, Err(Refusal::Unsupported(_))), "{r:?}");
    // An EIP-relative operand.
    let r = relocate(&with(&[0x67, 0x8b, 0x05, 1, 0, 0, 0]), ADDR, 0, NEAR);
    assert_eq!(r, unsupported("eip-relative"));
}

#[test]
fn reloc_refuses_jumps_into_the_patch() {
    // push rbp; mov rbp, rsp; push r12 | ... jmp back to one of those bytes.
    let head = [0x55, 0x48, 0x89, 0xe5, 0x41, 0x54, 0x90, 0x90];
    let back_to = |offset: u64| -> Vec<u8> {
        let from = ADDR + head.len() as u64 + 2;
        let rel = offset.wrapping_add(ADDR).wrapping_sub(from) as i8 as u8;
        [&head[..], &[0xeb, rel], &[0xc3][..]].concat()
    };
    for offset in 1..6 {
        assert_eq!(
            relocate(&back_to(offset), ADDR, 0, NEAR),
            Err(Refusal::JumpIntoPatch),
            "{offset}"
        );
    }
    // To the patch point itself, or to the continuation: fine.
    assert!(relocate(&back_to(0), ADDR, 0, NEAR).is_ok());
    assert!(relocate(&back_to(6), ADDR, 0, NEAR).is_ok());
    // A conditional jump or a call (rel32) from further away too.
    let mut far = head.to_vec();
    far.extend_from_slice(&[0x90; 200]);
    let from = ADDR + far.len() as u64 + 6;
    let rel = ((ADDR + 2) as i64 - from as i64) as i32;
    far.extend_from_slice(&[0x0f, 0x85]);
    far.extend_from_slice(&rel.to_le_bytes());
    assert_eq!(relocate(&far, ADDR, 0, NEAR), Err(Refusal::JumpIntoPatch));
}

#[test]
fn reloc_lists_the_branches_that_leave_a_function() {
    let mut func = vec![0xe8, 0x00, 0x01, 0x00, 0x00]; // call ADDR+5+0x100 (outside)
    func.extend_from_slice(&[0x74, 0x02]); // je ADDR+9 (inside)
    func.extend_from_slice(&[0x0f, 0x85, 0xf0, 0xff, 0xff, 0xff]); // jne ADDR+13-16 (outside)
    func.extend_from_slice(&[0xeb, 0xf1]); // jmp ADDR (inside: start)
    func.extend_from_slice(&[0xff, 0xe0, 0xc3]); // jmp rax (indirect); ret
    let targets = direct_branch_targets(&func, ADDR);
    assert_eq!(targets, vec![ADDR - 3, ADDR + 5 + 0x100]);
    assert!(
        direct_branch_targets(&[0x06, 0xe8, 0, 1, 0, 0], ADDR).is_empty(),
        "stops at junk"
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]

    #[test]
    fn reloc_never_panics(
        func in proptest::collection::vec(any::<u8>(), 0..48),
        addr in prop_oneof![Just(ADDR), any::<u64>()],
        skip in 0usize..8,
        dest in prop_oneof![Just(NEAR), Just(FAR), any::<u64>()],
    ) {
        if let Ok(r) = relocate(&func, addr, skip, dest) {
            prop_assert!(r.code.len() <= MAX_RELOCATED);
            prop_assert!(r.patch_len >= 5 && skip + r.patch_len <= func.len());
            if dest < u64::MAX - MAX_RELOCATED as u64 && addr < u64::MAX - 64 {
                prop_assert!(listing(&r.code, dest).is_some(), "{:x?}", r.code);
            }
        }
        let _ = direct_branch_targets(&func, addr);
    }

    #[test]
    fn reloc_keeps_targets_of_generated_prologues(
        parts in proptest::collection::vec(template(), 1..6),
        near in any::<bool>(),
    ) {
        let func: Vec<u8> = parts.concat();
        let dest = if near { NEAR } else { FAR };
        if let Ok(r) = relocate(&func, ADDR, 0, dest) {
            if let Err(e) = check_relocated(&func, ADDR, 0, dest, &r) {
                prop_assert!(false, "{func:x?}: {e}");
            }
        }
    }
}

/// One instruction of the kinds the relocation rewrites, with a random displacement (which
/// may land inside the displaced bytes, or inside an instruction).
fn template() -> impl Strategy<Value = Vec<u8>> {
    let rel32 = any::<i32>().prop_map(|v| v.to_le_bytes().to_vec());
    let small = (-12i8..12).prop_map(|v| v as u8);
    prop_oneof![
        Just(vec![0x90]),
        Just(vec![0x55]),
        Just(vec![0x48, 0x89, 0xe5]),
        Just(vec![0xc3]),
        small.clone().prop_map(|r| vec![0xeb, r]),
        (0x70u8..0x80, small).prop_map(|(op, r)| vec![op, r]),
        rel32.clone().prop_map(|r| [&[0xe9][..], &r].concat()),
        rel32.clone().prop_map(|r| [&[0xe8][..], &r].concat()),
        (0x80u8..0x90, rel32.clone()).prop_map(|(op, r)| [&[0x0f, op][..], &r].concat()),
        rel32
            .clone()
            .prop_map(|r| [&[0x48, 0x8d, 0x05][..], &r].concat()),
        rel32.prop_map(|r| [&[0x81, 0x3d][..], &r, &[1, 2, 3, 4]].concat()),
    ]
}
