//! Writing the relocated code: re-encoded branches (a `rel32` form when the target is within
//! reach of the whole buffer, else an absolute form through an inline 8-byte literal), copied
//! instructions with their RIP-relative displacement adjusted, and the push of a return address.

use super::{Refusal, MAX_RELOCATED};

/// Where a re-encoded branch goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Target {
    /// The relocated copy of the displaced instruction with this index.
    Local(usize),
    /// An address outside the displaced bytes.
    Abs(u64),
}

/// The code being built for `dest`, with the `rel32`s to local targets left to resolve.
#[derive(Debug)]
pub(super) struct Emitter {
    pub code: Vec<u8>,
    dest: u64,
    /// (offset of a rel32 in `code`, index of the displaced instruction it jumps to).
    fixups: Vec<(usize, usize)>,
}

/// `value` as a rel32, if it fits.
fn rel32(value: i128) -> Option<i32> {
    i32::try_from(value).ok()
}

impl Emitter {
    pub fn new(dest: u64) -> Self {
        Emitter {
            code: Vec::with_capacity(64),
            dest,
            fixups: Vec::new(),
        }
    }

    /// The run-time address of the next byte written.
    fn here(&self) -> i128 {
        i128::from(self.dest) + self.code.len() as i128
    }

    /// A rel32 reaches `target` from anywhere in the buffer (so that the form chosen does not
    /// depend on where in it the branch lands).
    fn near(&self, target: u64) -> bool {
        let t = i128::from(target);
        let lo = i128::from(self.dest);
        rel32(t - lo).is_some() && rel32(t - (lo + MAX_RELOCATED as i128)).is_some()
    }

    /// `target` can be written as a rel32 (a local one is resolved in [`Emitter::finish`]).
    fn direct(&self, target: Target) -> bool {
        match target {
            Target::Local(_) => true,
            Target::Abs(a) => self.near(a),
        }
    }

    /// Writes the rel32 of an instruction ending right after it.
    fn put_rel32(&mut self, target: Target) {
        let value = match target {
            Target::Local(index) => {
                self.fixups.push((self.code.len(), index));
                0
            }
            Target::Abs(a) => rel32(i128::from(a) - (self.here() + 4)).unwrap_or(0),
        };
        self.code.extend_from_slice(&value.to_le_bytes());
    }

    /// `jmp rel32`, or `jmp qword ptr [rip+0]` followed by the 8-byte target.
    pub fn jmp(&mut self, target: Target) {
        match target {
            Target::Abs(a) if !self.near(a) => {
                self.code.extend_from_slice(&[0xff, 0x25, 0, 0, 0, 0]);
                self.code.extend_from_slice(&a.to_le_bytes());
            }
            _ => {
                self.code.push(0xe9);
                self.put_rel32(target);
            }
        }
    }

    /// `jcc rel32` with condition `cc`, or the inverse `jcc rel8` over an absolute jump.
    pub fn jcc(&mut self, cc: u8, target: Target) {
        if self.direct(target) {
            self.code.extend_from_slice(&[0x0f, 0x80 | cc]);
            self.put_rel32(target);
        } else {
            // The absolute jump below is 14 bytes long.
            self.code.extend_from_slice(&[0x70 | (cc ^ 1), 14]);
            self.jmp(target);
        }
    }

    /// `call rel32`, or `call qword ptr [rip+2]; jmp +8` followed by the 8-byte target (the
    /// callee returns to the `jmp`, which steps over the literal).
    pub fn call(&mut self, target: Target) {
        if self.direct(target) {
            self.code.push(0xe8);
            self.put_rel32(target);
        } else if let Target::Abs(a) = target {
            self.code
                .extend_from_slice(&[0xff, 0x15, 2, 0, 0, 0, 0xeb, 8]);
            self.code.extend_from_slice(&a.to_le_bytes());
        }
    }

    /// Pushes `value` without touching the flags or any register but `rsp`:
    /// `push imm32` (sign-extended low half), then `mov dword ptr [rsp+4], imm32` (high half).
    pub fn push_u64(&mut self, value: u64) {
        self.code.push(0x68);
        self.code.extend_from_slice(&(value as u32).to_le_bytes());
        self.code.extend_from_slice(&[0xc7, 0x44, 0x24, 0x04]);
        self.code
            .extend_from_slice(&((value >> 32) as u32).to_le_bytes());
    }

    /// Copies `bytes` as they are.
    pub fn copy(&mut self, bytes: &[u8]) {
        self.code.extend_from_slice(bytes);
    }

    /// Copies an instruction whose disp32 at `disp_at` addresses `target` from RIP.
    pub fn copy_rip_relative(
        &mut self,
        bytes: &[u8],
        disp_at: usize,
        target: u64,
    ) -> Result<(), Refusal> {
        let end = self.here() + bytes.len() as i128;
        let disp = rel32(i128::from(target) - end)
            .ok_or_else(|| Refusal::Unsupported("rip-relative out of reach".into()))?;
        let start = self.code.len();
        self.code.extend_from_slice(bytes);
        let slot = self
            .code
            .get_mut(start + disp_at..start + disp_at + 4)
            .ok_or_else(|| Refusal::Unsupported("rip-relative (unusual encoding)".into()))?;
        slot.copy_from_slice(&disp.to_le_bytes());
        Ok(())
    }

    /// The finished code, with the local rel32s pointing at `starts[index]` (the offset of each
    /// displaced instruction's relocated copy).
    pub fn finish(mut self, starts: &[usize]) -> Vec<u8> {
        for &(at, index) in &self.fixups {
            let to = starts.get(index).copied().unwrap_or(0) as i64;
            let rel = (to - (at as i64 + 4)) as i32;
            if let Some(slot) = self.code.get_mut(at..at + 4) {
                slot.copy_from_slice(&rel.to_le_bytes());
            }
        }
        self.code
    }
}
