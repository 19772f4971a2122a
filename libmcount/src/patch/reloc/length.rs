//! The lengths of the most common x86-64 instructions, read from their bytes without capstone:
//! the linear decode of every function of a module (the jump-into checks) spends most of its
//! time on `mov`, `lea`, `push`, `cmp`, `jcc`... which need only their opcode and ModRM byte.
//! Anything else (prefixes but one REX, SSE/AVX, rare opcodes) is left to capstone; what this
//! does read, capstone decodes to the same length (checked by the tests on random bytes and on
//! the C library).

/// What follows an opcode.
#[derive(Clone, Copy)]
enum Operands {
    None,
    /// An immediate of this many bytes.
    Imm(usize),
    /// A ModRM byte (with its SIB and displacement), then an immediate of this many bytes.
    ModRm(usize),
    /// A ModRM byte addressing memory only (`lea`).
    ModRmMem,
}

/// The length of the instruction at the start of `bytes`, when it is a common one known here;
/// `None` sends it to capstone.
pub(super) fn quick_len(bytes: &[u8]) -> Option<usize> {
    let mut i = 0;
    let mut rex_w = false;
    if let Some(&b @ 0x40..=0x4f) = bytes.first() {
        rex_w = b & 8 != 0;
        i = 1;
    }
    let op = *bytes.get(i)?;
    let reg = |at: usize| bytes.get(at).map(|m| (m >> 3) & 7);
    let operands = match op {
        0x50..=0x5f | 0x90..=0x97 | 0x98 | 0x99 | 0xc3 | 0xc9 => Operands::None,
        0x00..=0x03
        | 0x08..=0x0b
        | 0x10..=0x13
        | 0x18..=0x1b
        | 0x20..=0x23
        | 0x28..=0x2b
        | 0x30..=0x33
        | 0x38..=0x3b
        | 0x84..=0x8b => Operands::ModRm(0),
        0x8d => Operands::ModRmMem,
        0x80 | 0x83 | 0x6b => Operands::ModRm(1),
        0x81 | 0x69 => Operands::ModRm(4),
        0xc0 | 0xc1 if reg(i + 1)? != 6 => Operands::ModRm(1),
        0xd1 | 0xd3 if reg(i + 1)? != 6 => Operands::ModRm(0),
        0xc6 if reg(i + 1)? == 0 => Operands::ModRm(1),
        0xc7 if reg(i + 1)? == 0 => Operands::ModRm(4),
        0xf6 => match reg(i + 1)? {
            0 => Operands::ModRm(1),
            1 => return None,
            _ => Operands::ModRm(0),
        },
        0xf7 => match reg(i + 1)? {
            0 => Operands::ModRm(4),
            1 => return None,
            _ => Operands::ModRm(0),
        },
        0xfe if reg(i + 1)? <= 1 => Operands::ModRm(0),
        0xff if matches!(reg(i + 1)?, 0 | 1 | 2 | 4 | 6) => Operands::ModRm(0),
        0x04 | 0x0c | 0x24 | 0x2c | 0x34 | 0x3c | 0xa8 | 0xb0..=0xb7 => Operands::Imm(1),
        0x05 | 0x0d | 0x25 | 0x2d | 0x35 | 0x3d | 0xa9 => Operands::Imm(4),
        0xb8..=0xbf => Operands::Imm(if rex_w { 8 } else { 4 }),
        // Branches only without a prefix.
        0x70..=0x7f | 0xeb if i == 0 => Operands::Imm(1),
        0xe8 | 0xe9 if i == 0 => Operands::Imm(4),
        0x0f => {
            let op2 = *bytes.get(i + 1)?;
            i += 1;
            match op2 {
                0x80..=0x8f if i == 1 => Operands::Imm(4),
                0x1f | 0x40..=0x4f | 0x90..=0x9f | 0xaf | 0xb6 | 0xb7 | 0xbe | 0xbf => {
                    Operands::ModRm(0)
                }
                _ => return None,
            }
        }
        _ => return None,
    };
    i += 1;
    let len = match operands {
        Operands::None => i,
        Operands::Imm(n) => i + n,
        Operands::ModRm(n) => i + modrm_len(bytes.get(i..)?)? + n,
        Operands::ModRmMem => {
            if bytes.get(i)? >> 6 == 3 {
                return None;
            }
            i + modrm_len(bytes.get(i..)?)?
        }
    };
    (len <= bytes.len()).then_some(len)
}

/// The length of a ModRM byte with its SIB byte and displacement.
fn modrm_len(b: &[u8]) -> Option<usize> {
    let modrm = *b.first()?;
    let (md, rm) = (modrm >> 6, modrm & 7);
    if md == 3 {
        return Some(1);
    }
    let mut len = 1;
    let mut disp = [0, 1, 4][usize::from(md)];
    if rm == 4 {
        let sib = *b.get(1)?;
        len += 1;
        if md == 0 && sib & 7 == 5 {
            disp = 4;
        }
    } else if md == 0 && rm == 5 {
        disp = 4;
    }
    Some(len + disp)
}

#[cfg(test)]
mod tests {
    use super::super::decode::disassembler;
    use super::*;
    use proptest::prelude::*;

    /// Capstone's length of the instruction at the start of `bytes`.
    fn capstone_len(bytes: &[u8]) -> Option<usize> {
        let cs = disassembler(false)?;
        let insns = cs.disasm_count(bytes, 0x1000, 1).ok()?;
        let len = insns.iter().next().map(|i| i.bytes().len());
        len
    }

    #[test]
    fn common_instructions() {
        for (bytes, len) in [
            (&[0x55][..], 1),
            (&[0x48, 0x89, 0xe5], 3),
            (&[0x48, 0x8d, 0x05, 1, 2, 3, 4], 7),
            (&[0x8b, 0x44, 0x24, 0x08], 4),
            (&[0x48, 0xb8, 1, 2, 3, 4, 5, 6, 7, 8], 10),
            (&[0x0f, 0x84, 1, 2, 3, 4], 6),
            (&[0xc7, 0x04, 0x25, 1, 2, 3, 4, 5, 6, 7, 8], 11),
        ] {
            assert_eq!(quick_len(bytes), Some(len), "{bytes:x?}");
            assert_eq!(capstone_len(bytes), Some(len), "{bytes:x?}");
        }
        // Left to capstone: prefixes, SSE, lea of a register.
        for bytes in [
            &[0x66, 0x90][..],
            &[0xf3, 0x0f, 0x10, 0xc1],
            &[0x48, 0x8d, 0xc0],
        ] {
            assert_eq!(quick_len(bytes), None, "{bytes:x?}");
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(20000))]
        #[test]
        fn lengths_agree_with_capstone(bytes in proptest::collection::vec(any::<u8>(), 1..16)) {
            if let Some(len) = quick_len(&bytes) {
                prop_assert_eq!(capstone_len(&bytes), Some(len), "{:x?}", bytes);
            }
        }
    }
}
