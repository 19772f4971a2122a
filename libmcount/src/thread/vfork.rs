//! `vfork`: the child runs on the parent's memory (its stack, its TLS block, so the same thread
//! pointer slot and [`ThreadState`]) until it execs or exits, while the parent is suspended.
//!
//! `vfork` is hooked like any call (glibc's `vfork` keeps its return address in a register
//! across the system call and pushes it back in both processes, so both return through the
//! exit trampoline). The parent's state is marked ([`block::VFORK`]) at the call. The child's
//! first hook (its return from `vfork`) finds the marked state of another pid: it gets a state
//! of its own (see `lifecycle::vfork_settle`), a copy of the parent's shadow stack writing its
//! own `<tid>.dat`, swapped into the slot, and records what uftrace records there (the exit
//! of `vfork`, then `execl`…). The parent's first hook after it resumes finds the child's state
//! (another pid again) and puts its own state back, untouched by the child.
//!
//! A `vfork` from a `vfork` child is not followed (the hooks stay off in the grandchild).

use super::{block, ThreadState};
use crate::sys;

/// What the hook that found a marked state must do (see [`ThreadState::vfork_step`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VforkStep {
    /// Use the state as it is.
    Same,
    /// A `vfork` child's first hook on its parent's state: give it a state of its own.
    ChildStarts,
    /// The parent runs again on the state of its (exec'd or exited) child: put this one back.
    ParentResumes(*mut ThreadState),
}

impl ThreadState {
    /// `vfork` was called: the hooks that follow in the child must leave this state alone.
    pub fn start_vfork(&mut self) {
        if self.vfork_parent.is_null() {
            self.vfork_pid = sys::getpid();
            self.set_flag(block::VFORK, true);
        }
    }

    /// Whether the state is marked by a `vfork` (a hook must call [`ThreadState::vfork_step`]
    /// before using it).
    #[inline]
    pub fn vfork_marked(&self) -> bool {
        self.flag(block::VFORK)
    }

    /// Which process runs on this marked state.
    pub fn vfork_step(&mut self) -> VforkStep {
        let pid = sys::getpid();
        if pid == self.vfork_pid {
            if self.vfork_parent.is_null() {
                // The parent itself, its child gone without a hook (or vfork failed).
                self.set_flag(block::VFORK, false);
            }
            return VforkStep::Same;
        }
        if self.vfork_parent.is_null() {
            VforkStep::ChildStarts
        } else {
            VforkStep::ParentResumes(self.vfork_parent)
        }
    }

    /// Whether this is a `vfork` child running on its parent's state (it could not get one of
    /// its own): its hooks must not record, and its returns not pop.
    pub fn vfork_child(&mut self) -> bool {
        self.flag(block::VFORK) && self.vfork_parent.is_null() && sys::getpid() != self.vfork_pid
    }

    /// Where the frame owning `slot` returns to, without popping it (a `vfork` child).
    pub fn peek_exit(&self, slot: usize) -> Option<usize> {
        let k = self.rstack.find_slot(slot)?;
        Some(self.rstack.get(k)?.parent_ip)
    }

    /// Makes this fresh state (set up for the calling `vfork` child, with the same
    /// configuration as `parent`) a copy of `parent`'s: its frames, filter counters and jump
    /// points; marked as the child's, with `parent` to put back when the parent resumes.
    pub fn inherit_vfork(&mut self, parent: &mut ThreadState) {
        let n = parent.rstack.len().min(self.rstack.capacity());
        // SAFETY: both states were set up with the same `max_stack`: `n` frames (and saved
        // limits, and pending payloads, when the state has them) fit in either mapping, and
        // the two mappings are distinct.
        unsafe {
            core::ptr::copy_nonoverlapping(parent.rstack.frames, self.rstack.frames, n);
            if !parent.saved.is_null() && !self.saved.is_null() {
                core::ptr::copy_nonoverlapping(parent.saved, self.saved, n);
            }
            if !parent.pending.is_null() && !self.pending.is_null() {
                core::ptr::copy_nonoverlapping(
                    parent.pending,
                    self.pending,
                    n * super::PENDING_ARGS,
                );
            }
        }
        self.rstack.len = n;
        self.rstack.overflow = parent.rstack.overflow;
        self.block = parent.block & !block::GUARD;
        self.fast_depth = parent.fast_depth;
        self.depth_limit = parent.depth_limit;
        self.clock = parent.clock;
        self.filt = parent.filt;
        self.jumps = parent.jumps;
        self.next_jump = parent.next_jump;
        self.vfork_pid = sys::getpid();
        self.vfork_parent = parent;
        self.set_flag(block::VFORK, true);
    }

    /// The parent resumed on its child's state `self`: the child's ring and data file are let
    /// go of (the exec'd image or the recorder writes what is left); the parent's state is
    /// unmarked. Returns the mapping to free.
    pub fn end_vfork_child(&mut self) -> (*mut u8, usize) {
        self.writer.detach();
        if let Some(plt) = crate::plt::get() {
            // The child's calls sent to the lazy binder are past it.
            plt.settle(&mut self.plt_claims, usize::MAX);
        }
        if let Some(parent) = {
            // SAFETY: `vfork_parent` is the parent's live state (it outlives the child's).
            unsafe { self.vfork_parent.as_mut() }
        } {
            parent.set_flag(block::VFORK, false);
        }
        (self as *mut ThreadState as *mut u8, self.map_len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::buffer::DatWriter;
    use crate::rstack::{Frame, ShadowStack};
    use std::os::fd::AsRawFd;

    /// A state over `frames` (the first is the sentinel).
    fn state(frames: &mut [Frame], dirfd: i32, tid: i32) -> ThreadState {
        // SAFETY: `frames` outlives the state in each test.
        let rs = unsafe { ShadowStack::from_raw(frames.as_mut_ptr(), frames.len() - 1) };
        ThreadState::new(rs, DatWriter::new(dirfd, tid, 0, None), tid)
    }

    #[test]
    fn child_copies_the_parent_and_the_parent_gets_its_state_back() {
        let dir = tempfile::tempdir().unwrap();
        let d = std::fs::File::open(dir.path()).unwrap();
        let blank = Frame::SENTINEL;
        let (mut pf, mut cf) = (vec![blank; 5], vec![blank; 5]);
        let mut parent = state(&mut pf, d.as_raw_fd(), 1);
        parent.enter(0x1000, 0x10, 1, 0xdead);
        parent.enter(0x0f00, 0x11, 2, 0xdead); // vfork
        parent.start_vfork();
        assert!(parent.vfork_marked());
        // Same pid: the parent itself (its child gone without a hook) unmarks its state.
        assert_eq!(parent.vfork_step(), VforkStep::Same);
        assert!(!parent.vfork_marked());
        parent.start_vfork();
        // Another pid on the parent's state: a child starting.
        parent.vfork_pid += 1;
        assert_eq!(parent.vfork_step(), VforkStep::ChildStarts);
        // Without a state of its own, its hooks would stay off.
        assert!(parent.vfork_child());
        let mut child = state(&mut cf, d.as_raw_fd(), 2);
        child.inherit_vfork(&mut parent);
        assert_eq!(child.rstack.len(), 2);
        assert_eq!(child.rstack.get(1).map(|f| f.child_ip), Some(2));
        assert!(child.vfork_marked() && !child.vfork_child());
        // The child returns from vfork on its own state; the parent's is untouched.
        assert_eq!(child.exit(0x0f00), Some(0x11));
        assert_eq!((child.rstack.len(), parent.rstack.len()), (1, 2));
        assert_eq!(child.vfork_step(), VforkStep::Same);
        // Another pid on the child's state: the parent resumed.
        child.vfork_pid += 1;
        let me: *mut ThreadState = &mut parent;
        assert_eq!(child.vfork_step(), VforkStep::ParentResumes(me));
        child.end_vfork_child();
        assert!(!parent.vfork_marked());
        assert_eq!(parent.exit(0x0f00), Some(0x11));
    }
}
