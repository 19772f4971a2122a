//! Kernel calls outside every user function (`record -k`): hidden by default, as uftrace's
//! `--kernel-skip-out` hides them, but still followed, because uftrace's report counts the
//! ones that never return. A process's last system call, `exit_group`, enters after `main`
//! has returned and never comes back: uftrace reports it with the time from its entry to the
//! task's last record, its self time without the calls it made that did return (themselves
//! not reported), and each call still open inside it the same way.

use record_format::dir::GraphRecord;

/// The kernel calls outside every user function that are open in one task.
#[derive(Debug, Default)]
pub(super) struct Outside {
    frames: Vec<Frame>,
    /// Time of the task's last kernel record outside every user function.
    last: u64,
}

#[derive(Debug, Clone, Copy)]
struct Frame {
    addr: u64,
    time: u64,
    /// Time spent in the calls it made that returned.
    child: u64,
}

/// A kernel call outside every user function still open at the end of the task's data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpenKernelCall {
    pub addr: u64,
    /// From its entry to the task's last record.
    pub total: u64,
    /// Time in the calls it made that returned.
    pub child: u64,
    /// Its kernel depth (0: the system call).
    pub depth: usize,
    /// The time it is closed at.
    pub time: u64,
}

impl Outside {
    /// Follows kernel record `k`, taken while no user function of the task is open.
    pub(super) fn take(&mut self, k: &GraphRecord) {
        self.last = self.last.max(k.time);
        if k.event.is_some() {
            return;
        }
        let d = k.depth as usize;
        if !k.exit {
            self.frames.truncate(d);
            if self.frames.len() == d {
                self.frames.push(Frame {
                    addr: k.func,
                    time: k.time,
                    child: 0,
                });
            }
            return;
        }
        let Some(f) = self.frames.get(d).copied() else {
            self.frames.truncate(d);
            return;
        };
        self.frames.truncate(d);
        if f.addr == k.func {
            if let Some(parent) = self.frames.last_mut() {
                parent.child += k.time.saturating_sub(f.time);
            }
        }
    }

    /// A user record of the task: whatever was open outside is over.
    #[inline]
    pub(super) fn clear(&mut self) {
        if !self.frames.is_empty() {
            self.frames.clear();
        }
    }

    /// The calls still open, innermost first.
    pub(super) fn open(&self) -> impl Iterator<Item = OpenKernelCall> + '_ {
        self.frames
            .iter()
            .enumerate()
            .rev()
            .map(|(depth, f)| OpenKernelCall {
                addr: f.addr,
                total: self.last.saturating_sub(f.time),
                child: f.child,
                depth,
                time: self.last,
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(time: u64, exit: bool, depth: u32, func: u64) -> GraphRecord {
        GraphRecord {
            time,
            tid: 1,
            exit,
            depth,
            func,
            event: None,
        }
    }

    #[test]
    fn exit_group_is_open_to_the_last_record_without_its_returned_children() {
        let mut o = Outside::default();
        for r in [
            rec(10, false, 0, 0xc105e),
            rec(12, true, 0, 0xc105e),
            rec(100, false, 0, 0xe817),
            rec(120, false, 1, 0x5c4ed),
            rec(160, true, 1, 0x5c4ed),
            rec(390, false, 1, 0x5c4ed),
        ] {
            o.take(&r);
        }
        let open: Vec<_> = o.open().collect();
        assert_eq!(
            open,
            [
                OpenKernelCall {
                    addr: 0x5c4ed,
                    total: 0,
                    child: 0,
                    depth: 1,
                    time: 390
                },
                OpenKernelCall {
                    addr: 0xe817,
                    total: 290,
                    child: 40,
                    depth: 0,
                    time: 390
                },
            ]
        );
        o.clear();
        assert_eq!(o.open().count(), 0);
    }

    #[test]
    fn an_exit_that_matches_no_entry_closes_what_is_under_it() {
        let mut o = Outside::default();
        o.take(&rec(1, false, 0, 0xa));
        o.take(&rec(2, false, 1, 0xb));
        o.take(&rec(3, true, 0, 0xc));
        assert_eq!(o.open().count(), 0);
        o.take(&rec(4, true, 0, 0xa));
        assert_eq!(o.open().count(), 0);
    }
}
