//! Fork children: a child starts with its parent's open calls (its exits from `fork` and
//! `main` have their durations, as in uftrace's record-time script, where the child inherits
//! the parent's call stack). Its records wait until its parent's have been decoded up to the
//! fork (then its entries of before the fork are copied), or until the recording ended.

use super::{Names, Outcome, Threads};
use crate::script::Script;

/// Whether a thread is a fork child that waits for its parent.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(super) enum Fork {
    #[default]
    Unknown,
    /// Not a fork child, or one that took its parent's entries.
    Decided,
    /// Waiting for parent `.0` to pass time `.1`.
    Waiting(u32, u64),
}

impl Threads {
    /// Whether `tid` is a fork child and must wait for its parent (it is then registered);
    /// `None` when a fresher snapshot may know.
    pub(super) fn fork_of(
        &mut self,
        tid: u32,
        names: &Option<Names<'_>>,
        arrived: u64,
    ) -> Option<Fork> {
        let fork = match names {
            Some(n) => n.forks.get(&tid).copied(),
            None => None,
        };
        if fork.is_none() && self.stale(names, tid, arrived) {
            return None;
        }
        let decided = match fork {
            Some((ppid, time)) if ppid != tid => {
                let past = self.threads.get(&ppid).is_some_and(|p| p.last_time > time);
                match past {
                    // The parent went on already: its entries as they are now.
                    true => {
                        self.inherit(tid, ppid, time);
                        Fork::Decided
                    }
                    false => {
                        self.waiting.entry(ppid).or_default().push(tid);
                        Fork::Waiting(ppid, time)
                    }
                }
            }
            _ => Fork::Decided,
        };
        self.threads.entry(tid).or_default().fork = decided;
        Some(decided)
    }

    /// Gives the fork children of `parent` whose fork came before `now` (all when `None`)
    /// their parent's entries; they are decoded by the next [`Threads::resume`].
    pub(super) fn release(&mut self, parent: u32, now: Option<u64>) {
        let Some(kids) = self.waiting.remove(&parent) else {
            return;
        };
        let mut still = Vec::new();
        for kid in kids {
            let Some(Fork::Waiting(_, time)) = self.threads.get(&kid).map(|t| t.fork) else {
                continue;
            };
            if now.is_some_and(|now| now <= time) {
                still.push(kid);
                continue;
            }
            self.inherit(kid, parent, time);
            self.threads.entry(kid).or_default().fork = Fork::Decided;
            self.released = true;
        }
        if !still.is_empty() {
            self.waiting.insert(parent, still);
        }
    }

    /// `kid` starts with the entries of `parent` from before `time`.
    fn inherit(&mut self, kid: u32, parent: u32, time: u64) {
        let Some(p) = self.threads.get(&parent) else {
            return;
        };
        let before: Vec<_> = p
            .entered
            .iter()
            .filter(|(_, &t)| t < time)
            .map(|(&k, &t)| (k, t))
            .collect();
        self.threads.entry(kid).or_default().entered.extend(before);
    }

    /// The recording ended: fork children still waiting take their parents' entries as they
    /// are, and are decoded.
    pub fn release_all(
        &mut self,
        names: &mut Option<Names<'_>>,
        script: &mut Script,
    ) -> anyhow::Result<Outcome> {
        let parents: Vec<u32> = self.waiting.keys().copied().collect();
        for p in parents {
            self.release(p, None);
        }
        self.resume(names, script)
    }
}
