//! Writing the thread's records: ENTRY and EXIT with their argument and return-value
//! payloads, and the entries `-t` and `-C` hold back (with the arguments saved for them)
//! until their frame proves worth recording.

use super::{Capture, ThreadState, PENDING_ARGS};
use crate::args::{self, FuncArgs};
use crate::cpu::{EntryRegs, ExitRegs};
use crate::filter::{self, Saved};
use crate::frame_flags::{self as flags, ARGS_SAVED};
use crate::rstack::{Frame, NO_SLOT};
use record_format::raw::{header_word, RecordKind, RECORD_SIZE};

impl ThreadState {
    /// Writes the ENTRY record of `frame`, just pushed, if `record`; a `-C` function first
    /// writes the entries of its callers that were waiting for it.
    #[inline]
    pub(super) fn entered(&mut self, frame: &Frame, record: bool, capture: Capture) {
        // -W cpu: a change is noted just before the ENTRY, the first CPU just after it.
        let first_cpu = match record && crate::config::watch_cpu() {
            true => self.watch_cpu(frame.start),
            false => None,
        };
        self.write_entered(frame, record, capture);
        if let Some(cpu) = first_cpu {
            self.write_watch_cpu(frame.start + 1, cpu);
        }
    }

    #[inline]
    fn write_entered(&mut self, frame: &Frame, record: bool, capture: Capture) {
        if frame.flags == 0 {
            if record {
                self.write_entry(frame.start, frame, capture);
            }
            return;
        }
        if record && frame.flags & flags::CALLER != 0 {
            self.write_pending(self.rstack.len() - 1);
        }
        if record {
            self.write_entry(frame.start, frame, capture);
            if frame.flags & flags::READ != 0 {
                self.read_at_entry(self.rstack.len() - 1, frame.child_ip as u64);
            }
        }
        filter::switch_after(frame.flags);
        if frame.flags & flags::LIMITS != 0
            && filter::get().is_some_and(|f| f.dumps_at_entry(frame.child_ip as u64))
        {
            crate::flight::request_dump();
        }
    }

    /// The ENTRY record of `frame`, with its argument payload if there is one.
    #[inline]
    pub(super) fn write_entry(&mut self, time: u64, frame: &Frame, capture: Capture) {
        let Some((spec, regs)) = capture else {
            self.writer.record(time, entry_word(frame));
            return;
        };
        let word = header_word(
            RecordKind::Entry,
            true,
            frame.depth as u16,
            frame.child_ip as u64,
        );
        let parent_loc = match frame.parent_loc {
            NO_SLOT => 0,
            slot => slot,
        };
        self.writer
            .record_with(RECORD_SIZE + spec.args_max, |out: &mut [u8]| {
                let (head, rest) = out.split_at_mut(RECORD_SIZE);
                head[..8].copy_from_slice(&time.to_le_bytes());
                head[8..].copy_from_slice(&word.to_le_bytes());
                RECORD_SIZE + args::entry_payload(spec, regs, parent_loc, rest)
            });
    }

    /// The EXIT record of `frame`, with its return value when `regs` holds it.
    #[inline]
    pub(super) fn write_exit(&mut self, time: u64, frame: &Frame, regs: Option<&ExitRegs>) {
        if crate::config::watch_cpu() {
            self.watch_cpu_at_exit(time);
        }
        if frame.flags & flags::RETVAL != 0 {
            if let (Some(regs), Some(table)) = (regs, args::get()) {
                if let Some(spec) = table.lookup(frame.child_ip as u64) {
                    let word = header_word(
                        RecordKind::Exit,
                        true,
                        frame.depth as u16,
                        frame.child_ip as u64,
                    );
                    self.writer
                        .record_with(RECORD_SIZE + spec.ret_max, |out: &mut [u8]| {
                            let (head, rest) = out.split_at_mut(RECORD_SIZE);
                            head[..8].copy_from_slice(&time.to_le_bytes());
                            head[8..].copy_from_slice(&word.to_le_bytes());
                            RECORD_SIZE + args::exit_payload(spec, regs, rest)
                        });
                    return;
                }
            }
        }
        self.writer.record(time, exit_word(frame));
    }

    /// Saves the argument payload of the frame about to be pushed at index `i`, whose ENTRY
    /// is pending; `false` when there is no room for it.
    pub(super) fn save_args(
        &mut self,
        i: usize,
        spec: &FuncArgs,
        regs: &EntryRegs,
        loc: usize,
    ) -> bool {
        if self.pending.is_null() || i >= self.rstack.capacity() || spec.args_max + 2 > PENDING_ARGS
        {
            return false;
        }
        // SAFETY: `pending` holds `PENDING_ARGS` bytes for each of the `capacity` indexes,
        // owned by this thread (see the field).
        let slot = unsafe {
            core::slice::from_raw_parts_mut(self.pending.add(i * PENDING_ARGS), PENDING_ARGS)
        };
        let (len, rest) = slot.split_at_mut(2);
        let parent_loc = if loc == NO_SLOT { 0 } else { loc };
        let n = args::entry_payload(spec, regs, parent_loc, &mut rest[..spec.args_max]);
        len.copy_from_slice(&(n as u16).to_le_bytes());
        true
    }

    /// The payload [`ThreadState::save_args`] kept for index `i`.
    fn saved_args(&self, i: usize) -> &[u8] {
        if self.pending.is_null() || i >= self.rstack.capacity() {
            return &[];
        }
        // SAFETY: as in `save_args`; the slot was written when its frame was pushed.
        let slot = unsafe {
            core::slice::from_raw_parts(self.pending.add(i * PENDING_ARGS), PENDING_ARGS)
        };
        let n = u16::from_le_bytes([slot[0], slot[1]]) as usize;
        slot.get(2..2 + n).unwrap_or(&[])
    }

    /// Where frame `i` keeps the limits it replaced.
    pub(super) fn saved_slot(&mut self, i: usize) -> Option<&mut Saved> {
        if self.saved.is_null() || i >= self.rstack.capacity() {
            return None;
        }
        // SAFETY: `saved` points to `capacity` entries owned by this thread (see the field).
        Some(unsafe { &mut *self.saved.add(i) })
    }

    /// Writes the ENTRY records still pending (`-t`, `-C`) in frames `0..end`, outermost
    /// first.
    #[cold]
    pub(super) fn write_pending(&mut self, end: usize) {
        for j in 0..end {
            let Some(f) = self.rstack.get_mut(j) else {
                break;
            };
            if f.flags & (flags::PENDING | flags::NORECORD) == flags::PENDING {
                let args = f.flags & ARGS_SAVED != 0;
                f.flags &= !(flags::PENDING | ARGS_SAVED);
                // The fast paths' `-t` entries pushed it without its header word.
                f.word = Frame::entry_word(f.depth, f.child_ip);
                let (time, depth, addr) = (f.start, f.depth as u16, f.child_ip as u64);
                if !args {
                    self.writer.record(time, f.word);
                    continue;
                }
                let word = header_word(RecordKind::Entry, true, depth, addr);
                let mut buf = [0u8; PENDING_ARGS];
                let saved = self.saved_args(j);
                let n = saved.len();
                buf[..n].copy_from_slice(saved);
                self.writer.record_with(RECORD_SIZE + n, |out: &mut [u8]| {
                    out[..8].copy_from_slice(&time.to_le_bytes());
                    out[8..16].copy_from_slice(&word.to_le_bytes());
                    out[RECORD_SIZE..RECORD_SIZE + n].copy_from_slice(&buf[..n]);
                    RECORD_SIZE + n
                });
            }
        }
    }
}

#[inline]
pub(super) fn entry_word(f: &Frame) -> u64 {
    Frame::entry_word(f.depth, f.child_ip)
}

#[inline]
pub(super) fn exit_word(f: &Frame) -> u64 {
    Frame::exit_word(f.depth, f.child_ip)
}
