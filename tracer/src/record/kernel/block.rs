//! Block requests of `record -k`, in both modes: the block instance records them without a
//! pid filter (a completion runs in whatever task the interrupt hit), and a request is kept
//! as the traced task's that queued, inserted or issued it, with its later records (an issue
//! from a kworker unplugging, the completion) paired by device and sector and rewritten as
//! that task's ([`Block::keep`]). Event mode's converter keeps them as it converts; in graph
//! mode [`merge_graph`] copies the function_graph tracer's records into the kernel files
//! merged in time order with the block records kept, so that replay's I/O model (`report
//! --io`) sees the same events in both modes.

use record_format::kernel::EventFormat;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use super::behalf::{Behalf, Workers};
use super::convert::Int;
use super::graph::{Functions, Grapher, PidSet, Step};
use super::spool::{each_event, Merge};
use super::tracefs::{BLOCK_BIO_QUEUE, BLOCK_COMPLETE, BLOCK_INSERT, BLOCK_ISSUE};
use super::Stats;

/// The block instance's events, with the fields read from their records found in their
/// formats once.
pub(super) struct Block {
    /// Every record's type and task (at the same places in every event, `block_rq_issue`'s).
    ty: Option<Int>,
    pid: Option<Int>,
    /// `block_rq_complete`'s type.
    complete: u16,
    /// `block_bio_queue`'s type, when recorded.
    bio_queue: Option<u16>,
    /// Issue, completion, and `block_bio_queue` and `block_rq_insert` when recorded.
    events: Vec<Fields>,
    /// The writeback that untraced tasks do for the traced ones.
    behalf: Behalf,
}

/// The fields of a block event's records that pair them (device, first sector, and the
/// number of sectors of a completion) and their task.
struct Fields {
    id: u16,
    dev: Option<Int>,
    sector: Option<Int>,
    nr_sector: Option<Int>,
    pid: Option<Int>,
}

impl Fields {
    fn of(format: &EventFormat) -> Fields {
        Fields {
            id: format.id,
            dev: Int::of(format, "dev"),
            sector: Int::of(format, "sector"),
            nr_sector: Int::of(format, "nr_sector"),
            pid: Int::of(format, "common_pid"),
        }
    }
}

/// The block requests in flight, (dev, sector) → the traced task they are kept for and its
/// CPU, the untraced tasks writing back for traced ones, and a scratch record for the
/// rewritten ones.
#[derive(Default)]
pub(super) struct Flight {
    pub(super) owners: Owners,
    rewritten: Vec<u8>,
}

/// What decides whose a block record is: the requests in flight, (dev, sector) → the traced
/// task they are kept for and its CPU, and the writeback done on behalf of traced tasks.
#[derive(Default)]
pub(super) struct Owners {
    pub(super) flight: BTreeMap<(u64, u64), (u32, usize)>,
    pub(super) workers: Workers,
}

impl Block {
    /// The block events among `formats`, when issue and completion are both `kept`.
    pub(super) fn of(formats: &[EventFormat], kept: &[String]) -> Option<Block> {
        let find = |ev: &str| kept_format(formats, kept, ev);
        let mut block = Block::new(
            find(BLOCK_ISSUE)?,
            find(BLOCK_COMPLETE)?,
            [find(BLOCK_BIO_QUEUE), find(BLOCK_INSERT)],
        );
        block.behalf = Behalf::of(formats, kept);
        Some(block)
    }

    /// The events `issue`, `complete` and, when recorded, those that queue a request.
    pub(super) fn new(
        issue: &EventFormat,
        complete: &EventFormat,
        queued: [Option<&EventFormat>; 2],
    ) -> Block {
        let events = [Some(issue), Some(complete)].into_iter().chain(queued);
        Block {
            ty: Int::of(issue, "common_type"),
            pid: Int::of(issue, "common_pid"),
            complete: complete.id,
            bio_queue: queued[0].map(|f| f.id),
            events: events.flatten().map(Fields::of).collect(),
            behalf: Behalf::of(&[], &[]),
        }
    }

    /// Notes record `p` of a traced task's own buffer (the inodes it dirties).
    pub(super) fn note(&self, p: &[u8], flight: &mut Flight) {
        let ty = Int::read(self.ty, p).unwrap_or(0) as u16;
        let workers = &mut flight.owners.workers;
        self.behalf.note(ty, self.pid(p), p, workers);
    }

    /// The task of record `p`, of any event.
    fn pid(&self, p: &[u8]) -> u32 {
        Int::read(self.pid, p).unwrap_or(0) as u32
    }

    /// Gives `graph` block record `p` (of the instance's CPU `cpu`, at `time`) as an event
    /// of the traced task that owns it, if any ([`owner`](Self::owner)).
    pub(super) fn keep(
        &self,
        (time, cpu, p): (u64, usize, &[u8]),
        flight: &mut Flight,
        graph: &mut Grapher,
    ) -> anyhow::Result<()> {
        let owner = self.owner(p, cpu, &mut flight.owners, |pid| graph.traces(pid));
        if let Some((cpu, pid, rewrite)) = owner {
            let p = match rewrite {
                true => rewrite_pid(self.pid, p, pid, &mut flight.rewritten),
                false => p,
            };
            graph.step(time, cpu, pid, Step::Event, p)?;
        }
        Ok(())
    }

    /// Whether record `p` of the block instance (of its CPU `cpu`) is kept, and as whose: a
    /// traced task's when it was queued, inserted or issued in its context, or when it pairs
    /// by device and sector with such a record (an issue from another context, the
    /// completion), or when an insertion or issue takes in a bio of such a request (a merge
    /// into a request started by another); and the writeback by an untraced task of an
    /// inode a traced task dirtied, with the bios it queues meanwhile, as that traced task's
    /// (see [`Behalf`]). `state` holds the requests in flight and the writeback under way.
    /// The answer is the CPU and task it is kept for, and whether its `common_pid` must be
    /// rewritten to that task.
    pub(super) fn owner(
        &self,
        p: &[u8],
        cpu: usize,
        state: &mut Owners,
        traced: impl Fn(u32) -> bool,
    ) -> Option<(usize, u32, bool)> {
        let ty = Int::read(self.ty, p).unwrap_or(0) as u16;
        if self.behalf.is_writeback(ty) {
            let owner = self
                .behalf
                .owner((ty, self.pid(p), p), &mut state.workers, traced);
            return owner.map(|o| (cpu, o, true));
        }
        let owners = &mut state.flight;
        let fmt = self.events.iter().find(|f| f.id == ty)?;
        let key = (
            Int::read(fmt.dev, p).unwrap_or(0),
            Int::read(fmt.sector, p).unwrap_or(0),
        );
        if fmt.id == self.complete {
            let (pid, cpu) = owners.remove(&key)?;
            // Bios merged into this request (queued at sectors inside it) end with it.
            let end = key
                .1
                .saturating_add(Int::read(fmt.nr_sector, p).unwrap_or(0).max(1));
            let merged: Vec<_> = owners.range(key..(key.0, end)).map(|(k, _)| *k).collect();
            for k in merged {
                owners.remove(&k);
            }
            return Some((cpu, pid, true));
        }
        if let Some(&(owner, owner_cpu)) = owners.get(&key) {
            return Some((owner_cpu, owner, true));
        }
        let pid = Int::read(fmt.pid, p).unwrap_or(0) as u32;
        if traced(pid) {
            owners.insert(key, (pid, cpu));
            return Some((cpu, pid, false));
        }
        // A bio an untraced task queues while writing back for a traced one (its insertion
        // or issue too when bios are not recorded).
        let worker = match self.bio_queue {
            Some(bio) if bio != fmt.id => None,
            _ => state.workers.working_for(pid),
        };
        if let Some(owner) = worker {
            owners.insert(key, (owner, cpu));
            return Some((cpu, owner, true));
        }
        // The insertion or issue of a request that took in a kept bio at a later sector.
        if Some(fmt.id) == self.bio_queue {
            return None;
        }
        let end = key
            .1
            .saturating_add(Int::read(fmt.nr_sector, p).unwrap_or(0).max(1));
        let (_, &(owner, owner_cpu)) = owners.range(key..(key.0, end)).next()?;
        owners.insert(key, (owner, owner_cpu));
        Some((owner_cpu, owner, true))
    }
}

/// Block record `p` with its task (field `pid`) rewritten to `pid`, in `out`.
/// The format of event `ev` (`system:name`) among `formats`, when it is one of the `kept`.
pub(super) fn kept_format<'f>(
    formats: &'f [EventFormat],
    kept: &[String],
    ev: &str,
) -> Option<&'f EventFormat> {
    let (sys, name) = ev.split_once(':').unwrap_or(("", ev));
    formats
        .iter()
        .find(|f| f.system == sys && f.name == name)
        .filter(|_| kept.iter().any(|k| k == ev))
}

fn rewrite_pid<'b>(field: Option<Int>, p: &[u8], pid: u32, out: &'b mut Vec<u8>) -> &'b [u8] {
    out.clear();
    out.extend_from_slice(p);
    if let Some(f) = field {
        if let Some(b) = out.get_mut(f.offset..f.offset.saturating_add(4)) {
            b.copy_from_slice(&pid.to_le_bytes());
        }
    }
    out
}

/// The error of a spool that cannot be read back.
pub(super) fn unspooled(e: std::io::Error) -> anyhow::Error {
    anyhow::Error::new(e).context("cannot read the spooled kernel pages")
}

/// Graph mode with block requests: writes the files `kernel-cpuN.dat` of `dir` from the
/// function_graph tracer's spools `main` (a file per CPU, each record copied to its CPU's
/// file) and the block instance's spools `block`, whose records of the traced tasks (those
/// with records in `main`, this process left out) are kept as those tasks' events, in time
/// order. False, with nothing written, when no block record is kept: the main spools are the
/// kernel files as they are. Events the kernel lost are counted on each CPU file's first
/// page (where they were lost no longer says anything once block records are added).
pub(super) fn merge_graph(
    dir: &Path,
    (main, block): (&[PathBuf], &[PathBuf]),
    page_size: usize,
    formats: &[EventFormat],
    kept: &[String],
) -> anyhow::Result<bool> {
    let Some(blk) = Block::of(formats, kept) else {
        return Ok(false);
    };
    let me = std::process::id();
    let mut tasks = PidSet::default();
    let mut lost = Vec::new();
    for path in main {
        let mut stats = Stats::default();
        each_event(
            std::slice::from_ref(path),
            page_size,
            &mut stats,
            |_, _, p| {
                let pid = blk.pid(p);
                if pid != 0 && pid != me && pid < i32::MAX as u32 {
                    tasks.insert(pid);
                }
            },
        )
        .map_err(unspooled)?;
        lost.push(stats.lost);
    }
    // Whether any block record is kept (the same answers as in the merge below: they
    // depend only on the block records, which come in the same order), or may be: a
    // writeback by another task is kept when a traced task dirtied the inode, which the
    // main spools say.
    let mut owners = Owners::default();
    let mut merge = Merge::open(block, page_size).map_err(unspooled)?;
    let mut any = false;
    while let Some((_, cpu, p)) = merge.next().map_err(unspooled)? {
        let ty = Int::read(blk.ty, p).unwrap_or(0) as u16;
        if blk.behalf.is_writeback(ty)
            || blk
                .owner(p, cpu, &mut owners, |pid| tasks.contains(&pid))
                .is_some()
        {
            any = true;
            break;
        }
    }
    if !any {
        return Ok(false);
    }
    let none = HashMap::new();
    let fns = Functions {
        entry: 0,
        exit: 0,
        addr_of: &none,
    };
    let mut graph = Grapher::create(dir, (main.len(), page_size), &tasks, 0, fns)?;
    for (cpu, &n) in lost.iter().enumerate() {
        graph.lose(cpu, n);
    }
    let spools: Vec<PathBuf> = main.iter().chain(block).cloned().collect();
    let mut merge = Merge::open(&spools, page_size).map_err(unspooled)?;
    let mut flight = Flight::default();
    while let Some((time, i, p)) = merge.next().map_err(unspooled)? {
        match i.checked_sub(main.len()) {
            Some(cpu) => blk.keep((time, cpu, p), &mut flight, &mut graph)?,
            None => {
                blk.note(p, &mut flight);
                graph.copy(time, i, p)?
            }
        }
    }
    graph.finish()?;
    Ok(true)
}
