//! `-W cpu` (data-format §3.6): an EVENT `watch:cpu` with the CPU number (i32) whenever a
//! task's function entry or exit runs on another CPU than the one before did. The first entry
//! of each task notes its CPU 1 ns after the ENTRY record (inside the function, as uftrace
//! shows it); a change is noted 1 ns before the ENTRY or EXIT record it was seen at.
//!
//! The CPU comes from glibc's `sched_getcpu` (`sys::current_cpu`): a load from the thread's
//! `rseq` area, about 6 ns, against 45 ns for `rdtscp` (TSC_AUX) and 330 ns for the `getcpu`
//! system call on the measuring VM. Sessions with `-W cpu` take the hooks' slow path (the
//! trampolines' fast paths know nothing of it), so only they pay for it.
//!
//! Also here: [`ThreadState::event_now`], the EVENT of an SDT probe (`crate::sdt`).

use super::ThreadState;
use crate::sys;
use record_format::event::{WATCH_CPU, WATCH_CPU_LEN};
use record_format::raw::{header_word, RecordKind, RECORD_SIZE};

/// `ThreadState::cpu` before the task's first entry.
pub(crate) const UNSEEN: i32 = i32::MIN;

impl ThreadState {
    /// At an entry timed `time`: writes the `watch:cpu` event of a CPU change (at `time - 1`),
    /// or returns the CPU of the task's first entry, whose event follows the ENTRY record.
    pub(super) fn watch_cpu(&mut self, time: u64) -> Option<i32> {
        let cpu = sys::current_cpu();
        if cpu == self.cpu || cpu < 0 {
            return None;
        }
        let first = self.cpu == UNSEEN;
        self.cpu = cpu;
        if first {
            return Some(cpu);
        }
        self.write_watch_cpu(time.saturating_sub(1), cpu);
        None
    }

    /// Before the EXIT record timed `time`: the `watch:cpu` event of a CPU change.
    pub(super) fn watch_cpu_at_exit(&mut self, time: u64) {
        let cpu = sys::current_cpu();
        if cpu != self.cpu && cpu >= 0 {
            self.cpu = cpu;
            self.write_watch_cpu(time.saturating_sub(1), cpu);
        }
    }

    /// The `watch:cpu` EVENT: its payload is one word (`u16` length 4, the i32, two zero
    /// bytes), stored without a call to memcpy or memset.
    pub(super) fn write_watch_cpu(&mut self, time: u64, cpu: i32) {
        let word = header_word(RecordKind::Event, true, 0, WATCH_CPU);
        let payload = (WATCH_CPU_LEN as u64) | (u64::from(cpu as u32) << 16);
        self.writer.record_with(RECORD_SIZE + 8, |out: &mut [u8]| {
            out[..8].copy_from_slice(&time.to_le_bytes());
            out[8..16].copy_from_slice(&word.to_le_bytes());
            out[16..24].copy_from_slice(&payload.to_le_bytes());
            RECORD_SIZE + 8
        });
    }

    /// An EVENT record `id` without payload, now (an SDT probe hit).
    pub fn event_now(&mut self, id: u64) {
        self.writer.prepare();
        let now = self.clock.now();
        self.writer
            .record(now, header_word(RecordKind::Event, false, 0, id));
    }
}
