//! `-T FUNC@read=...`: the counters of the frames that asked for them (see
//! [`crate::counters`]). At FUNC's entry, after its ENTRY record, each counter is read and
//! written as a `read:` EVENT, and its values kept in a [`ReadSlot`] by shadow-stack index;
//! before FUNC's EXIT record the counters are read again and the differences written as
//! `diff:` EVENTs. A few slots suffice: only nested `read=` functions need more than one,
//! and a slot left by a frame that was popped without its exit (longjmp, unwinding) is
//! taken back by the next entry.

use super::ThreadState;
use crate::counters::{self, PmuFds, Values};
use crate::filter;
use record_format::raw::{header_word, RecordKind, RECORD_SIZE};

/// Frames with counters read at once.
const SLOTS: usize = 4;

/// The counters read at one frame's entry.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
struct ReadSlot {
    /// Shadow-stack index of the frame (`usize::MAX`: free).
    index: usize,
    /// The counters read (`trigger::read` bits).
    bits: u8,
    /// Values, in `counters::each` order.
    values: [Values; 5],
}

impl Default for ReadSlot {
    fn default() -> ReadSlot {
        ReadSlot {
            index: usize::MAX,
            bits: 0,
            values: [[0; 3]; 5],
        }
    }
}

/// A thread's `read=` state.
#[repr(C)]
#[derive(Debug, Default)]
pub struct Reads {
    slots: [ReadSlot; SLOTS],
    pmu: PmuFds,
}

impl Reads {
    /// Closes the thread's hardware counters.
    pub fn close(&mut self) {
        self.pmu.close();
    }
}

impl ThreadState {
    /// After the ENTRY record of the frame at shadow-stack index `i` (function `ip`): reads
    /// its counters and writes the `read:` events.
    pub(super) fn read_at_entry(&mut self, i: usize, ip: u64) {
        let Some(bits) = filter::get().map(|f| f.read_of(ip)).filter(|&b| b != 0) else {
            return;
        };
        let len = self.rstack.len();
        let slots = &mut self.reads.slots;
        for s in slots
            .iter_mut()
            .filter(|s| s.index != usize::MAX && s.index >= len - 1)
        {
            *s = ReadSlot::default();
        }
        let Some(k) = slots.iter().position(|s| s.index == usize::MAX) else {
            return;
        };
        let mut slot = ReadSlot {
            index: i,
            ..ReadSlot::default()
        };
        for (n, (bit, read_id, _, count)) in counters::each(bits).enumerate() {
            let mut v = [0; 3];
            if counters::read(bit, &mut self.reads.pmu, &mut v) {
                slot.bits |= bit;
                slot.values[n] = v;
                let time = self.clock.now();
                self.write_event(time, read_id, &v[..count]);
            }
        }
        self.reads.slots[k] = slot;
    }

    /// Before the EXIT record of the frame at index `i`, timed `now`: writes the `diff:`
    /// events (at `now`: not after the EXIT).
    pub(super) fn read_at_exit(&mut self, i: usize, now: u64) {
        let Some(k) = self.reads.slots.iter().position(|s| s.index == i) else {
            return;
        };
        let slot = core::mem::take(&mut self.reads.slots[k]);
        for (n, (bit, _, diff_id, count)) in counters::each(slot.bits).enumerate() {
            let mut v = [0; 3];
            if counters::read(bit, &mut self.reads.pmu, &mut v) {
                for (now, then) in v.iter_mut().zip(slot.values[n]) {
                    *now = now.wrapping_sub(then);
                }
                self.write_event(now, diff_id, &v[..count]);
            }
        }
    }

    /// An EVENT record `id` at `time` with `values` as its payload (`u16` length, the values, padded to
    /// 8 bytes), depth 0 as uftrace writes them.
    fn write_event(&mut self, time: u64, id: u32, values: &[u64]) {
        let word = header_word(RecordKind::Event, true, 0, u64::from(id));
        let data = values.len() * 8;
        let payload = (2 + data).next_multiple_of(8);
        self.writer
            .record_with(RECORD_SIZE + payload, |out: &mut [u8]| {
                let (head, rest) = out.split_at_mut(RECORD_SIZE);
                head[..8].copy_from_slice(&time.to_le_bytes());
                head[8..].copy_from_slice(&word.to_le_bytes());
                rest[..payload].fill(0);
                rest[..2].copy_from_slice(&(data as u16).to_le_bytes());
                for (chunk, v) in rest[2..2 + data].chunks_exact_mut(8).zip(values) {
                    chunk.copy_from_slice(&v.to_le_bytes());
                }
                RECORD_SIZE + payload
            });
    }
}
