//! `setjmp`/`longjmp` through the PLT: `setjmp` is recorded as a call of no duration that
//! returns 0, and the shadow stack's state is kept by `jmp_buf`; a `longjmp` to a known point
//! drops the frames it jumps over and records the second return of `setjmp`, with the value
//! it returns there (what uftrace records, `} = 1; /* _setjmp */` with a return value spec).

use super::{exit_word, ThreadState};
use crate::cpu::{EntryRegs, ExitRegs};
use crate::filter::{self, Saved};
use crate::frame_flags as flags;
use crate::rstack::{Frame, NO_SLOT};
use crate::{args, plt};

/// The shadow stack when `setjmp(env)` was called (through the PLT).
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct JumpPoint {
    /// The `jmp_buf` address (0: unused).
    env: usize,
    /// Frames on the shadow stack.
    len: usize,
    /// The depth `setjmp` was recorded at, and its address.
    depth: u32,
    ip: usize,
}

/// `setjmp` points remembered per thread.
pub(super) const JUMP_POINTS: usize = 8;

impl ThreadState {
    /// `setjmp(env)`: an [`ThreadState::instant`] call returning 0, and the shadow stack's
    /// state kept for the `longjmp(env)` that may come.
    pub fn setjmp(&mut self, child_ip: usize, regs: Option<&EntryRegs>) {
        let Some((depth, now)) = self.instant_parts(child_ip, regs, false) else {
            return;
        };
        self.jump_exit(now, child_ip, depth, 0);
        let Some(env) = regs.map(|r| r.rdi).filter(|&e| e != 0) else {
            return;
        };
        let at = match self.jumps.iter().position(|j| j.env == env) {
            Some(i) => i,
            None => {
                let i = self.next_jump % JUMP_POINTS;
                self.next_jump = self.next_jump.wrapping_add(1);
                i
            }
        };
        self.jumps[at] = JumpPoint {
            env,
            len: self.rstack.len(),
            depth,
            ip: child_ip,
        };
    }

    /// `longjmp(env, value)`: its ENTRY; then, if `env` is a known `setjmp` point below, the
    /// frames jumped over are dropped without records and `setjmp` returns again (its EXIT,
    /// returning `value`, or 1 for 0), which is what uftrace records.
    pub fn longjmp(&mut self, child_ip: usize, regs: Option<&EntryRegs>) {
        if self.instant_parts(child_ip, regs, false).is_none() {
            return;
        }
        let Some((env, value)) = regs.map(|r| (r.rdi, r.rsi)) else {
            return;
        };
        let Some(point) = self
            .jumps
            .iter()
            .copied()
            .find(|j| j.env == env && j.env != 0 && j.len <= self.rstack.len())
        else {
            return;
        };
        let filters = filter::get();
        while let Some(i) = self.rstack.len().checked_sub(1).filter(|&i| i >= point.len) {
            let Some(f) = self.rstack.get(i).copied() else {
                break;
            };
            if f.flags & flags::REARM != 0 {
                if let Some(p) = plt::get() {
                    p.rearm(f.child_ip);
                }
            }
            if filters.is_some() {
                let saved = match f.flags & flags::LIMITS {
                    0 => Saved::default(),
                    _ => self.saved_slot(i).copied().unwrap_or_default(),
                };
                self.filt.pop(f.flags, &saved);
            }
            self.rstack.truncate(i);
        }
        self.writer.prepare();
        let now = self.clock.now();
        // `longjmp` makes `setjmp` return 1 for 0 (an `int`).
        let value = match value as u32 {
            0 => 1,
            v => v as i32 as isize as usize,
        };
        self.jump_exit(now, point.ip, point.depth, value);
    }

    /// The EXIT record of `setjmp` at `ip` and `depth`, returning `value` (recorded when a
    /// return value spec names it).
    fn jump_exit(&mut self, now: u64, ip: usize, depth: u32, value: usize) {
        let spec = args::get().and_then(|t| t.lookup(ip as u64));
        let flags = spec.map_or(0, |s| s.ret_flags());
        let frame = Frame::new(NO_SLOT, 0, ip, depth, flags, now);
        if frame.flags & flags::RETVAL == 0 {
            self.writer.record(now, exit_word(&frame));
            return;
        }
        let regs = ExitRegs {
            rax: value,
            rdx: 0,
            xmm0: [0; 16],
            xmm1: [0; 16],
        };
        self.write_exit(now, &frame, Some(&regs));
    }
}
