//! The stack changes of the exec, setjmp and longjmp families: the pending change of a shown
//! entry, execs deferred until the old image's other threads are gone, and the per-function
//! table of stack effects.

use super::Core;
use crate::symbols::FuncId;
use crate::walk::policy::Setjmp;
use record_format::libcall::{stack_effect, StackEffect};

impl Core<'_> {
    /// Applies the pending exec or longjmp, if any.
    #[inline]
    pub(in crate::walk) fn apply_pending(&mut self) {
        if let Some((ti, e)) = self.pending.take() {
            self.apply(ti, e);
        }
    }

    /// Takes the pending exec or longjmp of the entry just stepped and applies it; returns
    /// it (replay moves its display depth along).
    pub fn take_jump(&mut self) -> Option<StackEffect> {
        let (_, e) = self.pending?;
        self.apply_pending();
        Some(e)
    }

    /// Forgets the pending exec or longjmp (the look-ahead's skipped entries).
    pub(in crate::walk) fn drop_pending(&mut self) {
        self.pending = None;
    }

    /// Whether the entry just stepped has a pending exec or longjmp.
    pub fn jump_pending(&self) -> bool {
        self.pending.is_some()
    }

    /// Empties task `ti`'s stack after an exec.
    fn exec_task(&mut self, ti: usize) {
        let resets = self.policy.exec_resets_filters;
        let t = &mut self.tasks[ti];
        t.stack.exec();
        if resets {
            t.stack.reset_filters();
        }
        t.exec_reset = true;
        self.exec_reset_any = true;
    }

    /// Empties the stacks of the threads of `pid` other than `ti` (the exec'ing one).
    fn exec_others(&mut self, pid: u32, ti: usize) {
        for i in 0..self.tasks.len() {
            if i != ti && self.tasks[i].pid == pid {
                self.exec_task(i);
            }
        }
    }

    /// Applies the deferred execs whose new image started at or before `time` (`u64::MAX`:
    /// all of them, at the end of the data): the old image's threads are gone from there.
    pub fn apply_due_execs(&mut self, time: u64) {
        let mut i = 0;
        while i < self.deferred_execs.len() {
            let (pid, at, ti) = self.deferred_execs[i];
            if at <= time {
                self.deferred_execs.swap_remove(i);
                self.exec_others(pid, ti);
            } else {
                i += 1;
            }
        }
        self.exec_due = self
            .deferred_execs
            .iter()
            .map(|e| e.1)
            .min()
            .unwrap_or(u64::MAX);
    }

    /// The tasks whose stack an exec emptied since the last call (replay starts their
    /// display depth over).
    pub fn take_exec_resets(&mut self) -> Vec<usize> {
        if !std::mem::take(&mut self.exec_reset_any) {
            return Vec::new();
        }
        let tasks = self.tasks.iter_mut().enumerate();
        tasks
            .filter_map(|(i, t)| std::mem::take(&mut t.exec_reset).then_some(i))
            .collect()
    }

    /// The stack change of an entry of the exec/setjmp/longjmp families.
    pub(super) fn apply(&mut self, ti: usize, e: StackEffect) {
        let policy = self.policy;
        let pid = self.tasks[ti].pid;
        if e == StackEffect::Exec {
            // The new image replaces every thread of the process: the calls other threads
            // had open are gone too (a thread's exec ends them all, and the new image runs
            // in the leader's tid). But the other threads run on until the kernel ends them
            // in the exec (the leader may still return from a call and enter another after
            // the thread's exec entry): their stacks are emptied where the new image's
            // session starts, when the data has it.
            let (tid, time) = (self.merge.tid(ti), self.tasks[ti].last_time);
            let next = self.merge.sym.session_at(tid, time).map(|(_, next)| next);
            self.exec_task(ti);
            match next {
                Some(at) if at != u64::MAX => {
                    self.deferred_execs.push((pid, at, ti));
                    self.exec_due = self.exec_due.min(at);
                }
                _ => self.exec_others(pid, ti),
            }
            return;
        }
        let t = &mut self.tasks[ti];
        match e {
            StackEffect::Setjmp if policy.setjmp == Setjmp::PerTask => {
                t.setjmp = t.stack.open_calls();
            }
            StackEffect::Longjmp => match policy.setjmp {
                Setjmp::Global => t.stack.longjmp_to(self.setjmp),
                Setjmp::PerTask if t.setjmp > 0 => t.stack.longjmp_to(t.setjmp),
                Setjmp::PerTask => {}
            },
            _ => {}
        }
    }

    /// The stack effect of a function (cached per id).
    #[inline]
    pub fn fixup(&mut self, func: FuncId) -> Option<StackEffect> {
        let i = func as usize;
        if self.fixups.len() <= i {
            self.fixups.resize(i + 1, None);
        }
        *self.fixups[i].get_or_insert_with(|| stack_effect(&self.merge.sym.func(func).name))
    }
}
