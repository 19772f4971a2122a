//! The traced tasks' steps (kernel.md §5.3) turned into function-graph records as they come,
//! in time order: a system call is an entry and an exit of its `__x64_sys_` function, a time
//! off the CPU an entry and an exit of `schedule` under it; kept events are copied. Each
//! record goes into the page of its output CPU, and each page into its `kernel-cpuN.dat` as
//! soon as it is full, so that what is held is the tasks' open state and a page per CPU.

use anyhow::Context;
use record_format::kernel::{Lost, PageWriter};
use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::hash::{BuildHasherDefault, Hasher};
use std::path::{Path, PathBuf};

use crate::record::syscalls;

/// What a kernel event means for one traced task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Step {
    /// Enters system call `nr`.
    Enter(u64),
    /// Returns from its system call.
    Exit,
    /// Leaves the CPU.
    Out,
    /// Runs again.
    In,
    /// An event kept as it is (its record is given with the step).
    Event,
}

/// The IDs of the function-graph events and the kernel functions the records name.
pub(super) struct Functions<'a> {
    pub(super) entry: u16,
    pub(super) exit: u16,
    pub(super) addr_of: &'a HashMap<&'a str, u64>,
}

/// One output CPU: its page being filled and its file, written under a temporary name.
struct Output {
    pages: PageWriter,
    file: File,
    tmp: PathBuf,
    path: PathBuf,
}

impl Output {
    /// Appends a record to the page, writing the page out once full.
    fn push(&mut self, time: u64, payload: &[u8]) -> anyhow::Result<()> {
        self.pages.push(time, payload);
        self.pages
            .write_sealed(&mut self.file)
            .with_context(|| format!("cannot write {}", self.path.display()))
    }

    /// A function-graph record of task `pid`: an entry (`ids.0`), or an exit (`ids.1`, whose
    /// call and return times are left zero: the record's own time says when).
    fn record(&mut self, time: u64, ids: (u16, u16), pid: u32, call: Call) -> anyhow::Result<()> {
        let (id, len) = match call.exit {
            true => (ids.1, 40),
            false => (ids.0, 24),
        };
        let mut p = [0u8; 40];
        p[0..2].copy_from_slice(&id.to_le_bytes());
        p[4..8].copy_from_slice(&pid.to_le_bytes());
        p[8..16].copy_from_slice(&call.func.to_le_bytes());
        p[16..20].copy_from_slice(&call.depth.to_le_bytes());
        self.push(time, &p[..len])
    }
}

/// What a function-graph record says of a call.
#[derive(Clone, Copy)]
struct Call {
    func: u64,
    depth: u32,
    exit: bool,
}

impl Call {
    fn entry(func: u64, depth: u32) -> Call {
        Call {
            func,
            depth,
            exit: false,
        }
    }

    fn exit(func: u64, depth: u32) -> Call {
        Call {
            func,
            depth,
            exit: true,
        }
    }
}

/// Hashes a task's id with a multiply: pids are few and the kernel's, a hash for hostile
/// keys is not needed where every event looks its task up.
#[derive(Default, Clone, Copy)]
pub(super) struct PidHasher(u64);

impl Hasher for PidHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(GOLDEN);
        }
    }

    fn write_u32(&mut self, n: u32) {
        self.0 = (self.0 ^ u64::from(n)).wrapping_mul(GOLDEN);
    }
}

/// 2^64 / φ, odd: multiplying by it spreads consecutive pids over the high bits.
const GOLDEN: u64 = 0x9e37_79b9_7f4a_7c15;

/// Sets and maps by pid.
pub(super) type PidSet = HashSet<u32, BuildHasherDefault<PidHasher>>;
type PidMap<V> = HashMap<u32, V, BuildHasherDefault<PidHasher>>;

/// What is open in a traced task.
#[derive(Default)]
struct Task {
    /// The output CPU of all its records, once it is seen.
    home: Option<usize>,
    /// The function of the system call it is in.
    open: Option<u64>,
    /// Off the CPU: the kernel depth of its `schedule`.
    off: Option<u32>,
}

/// Turns the steps of the traced tasks into records written page by page into the kernel
/// files.
pub(super) struct Grapher<'a> {
    fns: Functions<'a>,
    schedule: Option<u64>,
    outputs: Vec<Output>,
    tasks: PidMap<Task>,
    /// The functions of system calls `0..NUMBERS`, once looked up.
    functions: Vec<Option<Option<u64>>>,
}

/// System call numbers whose functions are remembered.
const NUMBERS: usize = 1024;

impl<'a> Grapher<'a> {
    /// Creates the files `kernel-cpuN.dat` of `dir` (under temporary names until
    /// [`finish`](Self::finish)) for `cpus` CPUs of `page_size` pages, for the steps of
    /// `tasks`; the first page says that `lost` events were lost.
    pub(super) fn create(
        dir: &Path,
        (cpus, page_size): (usize, usize),
        tasks: &PidSet,
        lost: u64,
        fns: Functions<'a>,
    ) -> anyhow::Result<Grapher<'a>> {
        let mut g = Grapher {
            schedule: fns.addr_of.get("schedule").copied(),
            fns,
            outputs: Vec::new(),
            tasks: tasks.iter().map(|&pid| (pid, Task::default())).collect(),
            functions: Vec::new(),
        };
        for cpu in 0..cpus.max(1) {
            let path = dir.join(format!("kernel-cpu{cpu}.dat"));
            let tmp = dir.join(format!("kernel-cpu{cpu}.dat.new"));
            let _ = std::fs::remove_file(&tmp);
            let file = record_format::create::open_data_file(&tmp)
                .and_then(|f| f.set_len(0).map(|()| f))
                .with_context(|| format!("cannot write {}", path.display()))?;
            g.outputs.push(Output {
                pages: PageWriter::new(page_size),
                file,
                tmp,
                path,
            });
        }
        // The count of events the kernel dropped, on the first page (records are regrouped
        // by task, so where they were dropped no longer says anything).
        if let Some(first) = g.outputs.first_mut().filter(|_| lost > 0) {
            first.pages.lose(Lost::Count(lost));
        }
        Ok(g)
    }

    /// Whether `pid` is a traced task.
    pub(super) fn traces(&self, pid: u32) -> bool {
        self.tasks.contains_key(&pid)
    }

    /// The step `step` of task `pid` at `time`, seen on `cpu`; `event` is the record of a
    /// [`Step::Event`]. Steps of tasks not traced are left out.
    pub(super) fn step(
        &mut self,
        time: u64,
        cpu: usize,
        pid: u32,
        step: Step,
        event: &[u8],
    ) -> anyhow::Result<()> {
        let func = match step {
            Step::Enter(nr) => self.function(nr),
            _ => None,
        };
        let Some(task) = self.tasks.get_mut(&pid) else {
            return Ok(());
        };
        // A task's records all go to the file of the CPU it was first seen on: uftrace's
        // reader loses calls whose entry and exit lie in different CPU files (a task that
        // migrated while off the CPU).
        let last = self.outputs.len().saturating_sub(1);
        let home = *task.home.get_or_insert(cpu.min(last));
        let Some(out) = self.outputs.get_mut(home) else {
            return Ok(());
        };
        let ids = (self.fns.entry, self.fns.exit);
        let mut record = |call: Call| out.record(time, ids, pid, call);
        match step {
            Step::Enter(_) => {
                let Some(func) = func else {
                    return Ok(());
                };
                if let Some(prev) = task.open.replace(func) {
                    // An enter without an exit (a lost event): close the old call first.
                    record(Call::exit(prev, 0))?;
                }
                record(Call::entry(func, 0))?;
            }
            Step::Exit => {
                if let (Some(depth), Some(s)) = (task.off.take(), self.schedule) {
                    record(Call::exit(s, depth))?;
                }
                // Exits of calls entered before the task was traced (a new thread
                // returning from clone) have no enter and are left out.
                if let Some(func) = task.open.take() {
                    record(Call::exit(func, 0))?;
                }
            }
            Step::Out => {
                if let Some(s) = self.schedule.filter(|_| task.off.is_none()) {
                    let depth = u32::from(task.open.is_some());
                    task.off = Some(depth);
                    record(Call::entry(s, depth))?;
                }
            }
            Step::In => {
                if let (Some(depth), Some(s)) = (task.off.take(), self.schedule) {
                    record(Call::exit(s, depth))?;
                }
            }
            Step::Event => out.push(time, event)?,
        }
        Ok(())
    }

    /// Record `payload` of `cpu` at `time`, copied as it is into that CPU's file (graph
    /// mode: the function_graph tracer's records).
    pub(super) fn copy(&mut self, time: u64, cpu: usize, payload: &[u8]) -> anyhow::Result<()> {
        let last = self.outputs.len().saturating_sub(1);
        match self.outputs.get_mut(cpu.min(last)) {
            Some(out) => out.push(time, payload),
            None => Ok(()),
        }
    }

    /// Marks `n` events lost (if any) before the next record of `cpu`'s file.
    pub(super) fn lose(&mut self, cpu: usize, n: u64) {
        if let Some(out) = self.outputs.get_mut(cpu).filter(|_| n > 0) {
            out.pages.lose(Lost::Count(n));
        }
    }

    /// The address of system call `nr`'s function, `__x64_sys_<name>`.
    fn function(&mut self, nr: u64) -> Option<u64> {
        let lookup = |nr: u64| {
            let name = syscalls::name(nr).map_or_else(
                || "__x64_sys_ni_syscall".to_string(),
                |n| format!("__x64_sys_{n}"),
            );
            self.fns.addr_of.get(name.as_str()).copied()
        };
        // The numbers system calls have, not any a bad record may hold, are remembered.
        let Some(i) = usize::try_from(nr).ok().filter(|&i| i < NUMBERS) else {
            return lookup(nr);
        };
        if self.functions.is_empty() {
            self.functions = vec![None; NUMBERS];
        }
        *self.functions[i].get_or_insert_with(|| lookup(nr))
    }

    /// Writes the last pages and puts the files in place.
    pub(super) fn finish(mut self) -> anyhow::Result<()> {
        for out in &mut self.outputs {
            let pages = std::mem::replace(&mut out.pages, PageWriter::new(0)).finish();
            std::io::Write::write_all(&mut out.file, &pages)
                .with_context(|| format!("cannot write {}", out.path.display()))?;
        }
        for (i, out) in self.outputs.iter().enumerate() {
            if let Err(e) = std::fs::rename(&out.tmp, &out.path) {
                for placed in &self.outputs[..i] {
                    let _ = std::fs::remove_file(&placed.path);
                }
                return Err(e).with_context(|| format!("cannot write {}", out.path.display()));
            }
        }
        // In place: nothing is left to remove.
        self.outputs.clear();
        Ok(())
    }
}

impl Drop for Grapher<'_> {
    /// A conversion left half-way leaves no kernel file behind.
    fn drop(&mut self) {
        for out in &self.outputs {
            let _ = std::fs::remove_file(&out.tmp);
        }
    }
}
