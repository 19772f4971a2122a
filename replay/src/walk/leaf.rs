//! The walk's look-ahead for `replay`: a shown entry whose exit is the next record shown of
//! the whole trace is printed as one leaf line `f();`.
//!
//! After the consumer saw a shown entry, [`Core::leaf`] looks at the next record of the
//! merge. Records that would not be shown anyway (hidden by the filters, of tasks `--tid`
//! leaves out, events with `--no-event`) are taken out of the way: consumed like any other
//! record, each handed to the caller's `seen` hook so it can keep its own bookkeeping (the
//! display depth) in step. The look-ahead stops at the first record that would be shown, at
//! a LOST record, when tracing is switched off, or when the entry itself is an exec or
//! longjmp (its stack change must be applied first). When the record it stops at is the
//! entry's own exit, that exit is consumed and returned.
//!
//! The check of "would be shown" is uftrace's prediction (its skip check), not the filters
//! themselves: it is what decides which lines merge, so it is kept as it is.

use super::core::{Core, EntryStep, Step};
use crate::filter::FuncFilter;
use crate::merge::Head;
use record_format::RecordKind;

impl Core<'_> {
    /// The exit of the shown entry `e` when it is the next record to be shown, consumed;
    /// `None` otherwise (the records skipped on the way stay consumed). `no_event`: event
    /// records are never shown. `seen` gets each record consumed on the way.
    pub fn leaf(
        &mut self,
        e: &EntryStep,
        no_event: bool,
        seen: &mut dyn FnMut(&Step),
    ) -> Option<Head> {
        let ti = e.task;
        if self.jump_pending() {
            return None;
        }
        let curr_depth = e.head.raw.depth;
        let next = loop {
            let next = self.merge.peek()?;
            let h = *self.merge.head(next)?;
            // A context switch of the task before it is a line of its own (unless hidden by
            // the filters).
            if self.switch_before(ti, h.raw.time) && !self.pass_hidden_switches(ti, h.raw.time) {
                return None;
            }
            // External data in between is a line of its own.
            if self.merge.has_extern() && self.merge.extern_before(h.raw.time) {
                return None;
            }
            if next == ti && curr_depth >= h.raw.depth {
                break next;
            }
            if h.raw.kind == RecordKind::Lost {
                return None;
            }
            if !self.tasks[next].allowed || (h.raw.kind == RecordKind::Event && no_event) {
                // Invisible to the whole replay: take it out of the way.
                self.merge.pop();
                continue;
            }
            if !self.would_skip(next, &h) {
                break next;
            }
            self.merge.pop();
            let step = self.skipped(next, h);
            seen(&step);
            if !self.enabled {
                return None;
            }
        };
        let h = *self.merge.head(next)?;
        if next != ti || h.raw.depth != curr_depth || h.raw.kind != RecordKind::Exit {
            return None;
        }
        self.merge.pop();
        let t = &mut self.tasks[ti];
        t.last_seen = h.raw.time;
        t.last_time = h.raw.time;
        t.last_exit = h.raw.time;
        t.stack.consume(&h.raw, h.func);
        t.stack.exit();
        Some(h)
    }

    /// Consumes a record the look-ahead skips: an entry through the filters (as any step;
    /// a fix-up it would mark is dropped, as uftrace never applies it), an exit or event
    /// restoring the counters of the slot above the stack (uftrace's skip does so for both).
    fn skipped(&mut self, ti: usize, h: Head) -> Step {
        match h.raw.kind {
            RecordKind::Entry => {
                let step = self.step(ti, h);
                self.drop_pending();
                step
            }
            _ => {
                let first = !self.tasks[ti].stack.started();
                let t = &mut self.tasks[ti];
                t.last_seen = h.raw.time;
                let closed = t.stack.consume(&h.raw, h.func);
                t.stack.exit();
                match closed {
                    Some(closed) => {
                        t.last_time = h.raw.time;
                        t.last_exit = h.raw.time;
                        Step::Exit(super::core::ExitStep {
                            task: ti,
                            head: h,
                            closed,
                            slot: t.stack.open_calls(),
                            reported: false,
                            first,
                        })
                    }
                    None => Step::Event { task: ti, head: h },
                }
            }
        }
    }

    /// Whether a peeked record would be skipped (not shown): uftrace's skip check.
    #[inline]
    fn would_skip(&mut self, ti: usize, h: &Head) -> bool {
        let has_filter = self.merge.filters.has_filter;
        if self.tasks[ti].stack.inside_notrace() {
            return true;
        }
        if h.raw.kind == RecordKind::Exit {
            let s = &mut self.tasks[ti].stack;
            let i = s.open_calls().saturating_sub(1);
            return s.hidden(i);
        }
        let ff = if h.raw.kind == RecordKind::Entry {
            self.merge.decide(h.func)
        } else {
            FuncFilter::default()
        };
        if h.raw.kind == RecordKind::Entry
            && self.no_libcall()
            && self.merge.sym.func(h.func).is_plt
        {
            return true;
        }
        let s = &self.tasks[ti].stack;
        let mut depth = s.depth_left();
        if ff.notrace {
            return true;
        }
        if ff.filter {
            depth = s.default_depth();
        } else if has_filter && !s.inside_filter() {
            return true;
        }
        let size_limit = ff
            .actions
            .size
            .map_or(s.size_limit(), |z| u32::try_from(z).unwrap_or(u32::MAX));
        if (ff.hide && !ff.loc_hidden) || ff.size < size_limit {
            return true;
        }
        if ff.actions.depth.is_some() || ff.actions.trace_on {
            return false;
        }
        ff.actions.trace_off || depth <= 0
    }
}
