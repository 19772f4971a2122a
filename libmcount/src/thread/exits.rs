//! Leaving frames: a hijacked function's return, a `__cyg_profile_func_exit`, frames an
//! unwinder or `longjmp` removed, and the return slots put back and hijacked again around a
//! caught exception. Every way out pops through [`ThreadState::close_to_with`], which writes
//! the EXIT records as the filters say.

use super::ThreadState;
use crate::cpu::ExitRegs;
use crate::filter::{self, Saved};
use crate::frame_flags as flags;
use crate::plt;
use crate::rstack::NO_SLOT;

impl ThreadState {
    /// Pops (with EXIT records) every frame whose return slot satisfies `dead`: frames that
    /// an unwinder or `longjmp` removed from the stack. Returns the number left.
    pub fn prune(&mut self, dead: impl Fn(usize) -> bool) -> usize {
        let mut keep = self.rstack.len();
        while let Some(f) = keep.checked_sub(1).and_then(|i| self.rstack.get(i)) {
            if f.parent_loc == NO_SLOT || !dead(f.parent_loc) {
                break;
            }
            keep -= 1;
        }
        if keep < self.rstack.len() {
            self.writer.prepare();
            let now = self.clock.now();
            self.close_to(keep, now);
        }
        keep
    }

    /// Puts the original return addresses back into every hijacked slot (innermost first, so
    /// that tail-call aliases, whose saved address is the trampoline, are overwritten by the
    /// real one).
    ///
    /// # Safety
    /// Every frame left on the shadow stack must be live: its slot a return-address word of
    /// this thread's stack.
    pub unsafe fn restore_slots(&mut self, tramp: usize) {
        for i in (0..self.rstack.len()).rev() {
            if let Some(f) = self.rstack.get(i) {
                if f.parent_loc != NO_SLOT && f.parent_ip != tramp {
                    // SAFETY: guaranteed live by the caller.
                    unsafe { (f.parent_loc as *mut usize).write(f.parent_ip) };
                }
            }
        }
    }

    /// Hijacks every slot again after an exception has been caught: with `tramp`, or the
    /// dynamic exit trampoline for frames entered through the dynamic entry (`DYN_EXIT`).
    /// Outermost first, so that a slot shared by a tail call ends with the innermost frame's
    /// trampoline, as before.
    ///
    /// # Safety
    /// As for [`ThreadState::restore_slots`].
    pub unsafe fn rehijack_slots(&mut self, tramp: usize) {
        for i in 0..self.rstack.len() {
            if let Some(f) = self.rstack.get(i) {
                if f.parent_loc != NO_SLOT {
                    let t = if f.flags & flags::DYN_EXIT != 0 {
                        crate::cpu::dyn_exit_trampoline_addr()
                    } else {
                        tramp
                    };
                    // SAFETY: guaranteed live by the caller.
                    unsafe { (f.parent_loc as *mut usize).write(t) };
                }
            }
        }
    }

    /// A hijacked function returned through return slot `slot`: write EXIT records for it and
    /// for every frame above it (skipped by `longjmp` or an unhooked unwind), pop them, and
    /// return the original return address. `None` when no frame owns the slot.
    #[inline]
    pub fn exit(&mut self, slot: usize) -> Option<usize> {
        self.exit_with(slot, None)
    }

    /// [`ThreadState::exit`] with the registers the exit trampoline saved (the return value).
    #[inline]
    pub fn exit_with(&mut self, slot: usize, regs: Option<&ExitRegs>) -> Option<usize> {
        let k = self.rstack.find_slot(slot)?;
        let parent_ip = self.rstack.get(k)?.parent_ip;
        let signalled = crate::signals::take();
        if signalled != 0 {
            filter::switch_before(signalled);
        }
        self.writer.prepare();
        let now = self.clock.now();
        self.close_to_with(k, now, regs);
        if signalled != 0 {
            filter::switch_after(signalled);
        }
        Some(parent_ip)
    }
    /// `__cyg_profile_func_exit`: pop the matching frame (and frames above it that a `longjmp`
    /// skipped); unmatched exits are ignored.
    pub fn cyg_exit(&mut self, this_fn: usize) {
        if self.rstack.pop_overflow() {
            return;
        }
        let Some(k) = self.rstack.find_cyg(this_fn) else {
            return;
        };
        self.writer.prepare();
        let now = self.clock.now();
        self.close_to(k, now);
    }

    /// Pops frames `keep..` innermost first at time `now`, writing their EXIT records as the
    /// filters say (see `filter`).
    pub(super) fn close_to(&mut self, keep: usize, now: u64) {
        self.close_to_with(keep, now, None);
    }

    /// [`ThreadState::close_to`], frame `keep` returning with `regs` (frames above it were
    /// skipped by a `longjmp` or an unwinder: their return values are unknown).
    pub(super) fn close_to_with(&mut self, keep: usize, now: u64, regs: Option<&ExitRegs>) {
        let filters = filter::get();
        while let Some(i) = self.rstack.len().checked_sub(1).filter(|&i| i >= keep) {
            let Some(f) = self.rstack.get(i).copied() else {
                break;
            };
            if f.flags & flags::REARM != 0 {
                if let Some(p) = plt::get() {
                    p.rearm(f.child_ip);
                }
            }
            let ret = regs.filter(|_| i == keep);
            let Some(filters) = filters else {
                // NORECORD without filters: a frame of an earlier session (see `block::STALE`).
                if f.flags & flags::NORECORD == 0 {
                    self.write_exit(now, &f, ret);
                }
                self.rstack.truncate(i);
                continue;
            };
            if f.flags & flags::NORECORD == 0 && filter::tracing() {
                if f.flags & flags::READ != 0 {
                    self.read_at_exit(i, now);
                }
                if f.flags & flags::PENDING == 0 {
                    self.write_exit(now, &f, ret);
                } else if !filters.has_caller
                    && now.saturating_sub(f.start) >= self.filt.time_in_force(filters)
                {
                    // The limits in force are this frame's own: its callees have popped.
                    self.write_pending(i + 1);
                    self.write_exit(now, &f, ret);
                }
            }
            let saved = match f.flags & flags::LIMITS {
                0 => Saved::default(),
                _ => {
                    let duration = now.saturating_sub(f.start);
                    if filters.dumps_at_exit(f.child_ip as u64, duration) {
                        crate::flight::request_dump();
                    }
                    self.saved_slot(i).copied().unwrap_or_default()
                }
            };
            self.filt.pop(f.flags, &saved);
            self.rstack.truncate(i);
        }
    }
}
