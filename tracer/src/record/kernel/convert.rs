//! Event mode's converter (kernel.md §5.3): reads the spooled pages back, [`Merge`]d in time
//! order, and turns the system call and scheduler events of the traced tasks into their
//! steps, which the [`graph`] writer turns into function-graph records in uftrace's kernel
//! files as they come; block requests are paired with their completions and kept, like the
//! other events kept, as events of the task that issued them. In graph mode the spooled pages
//! are the kernel files already.
//!
//! [`graph`]: super::graph

use anyhow::{bail, Context};
use record_format::kernel::{EventFormat, KernelHeader, Lost, Page};
use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};

use super::block::{merge_graph, unspooled, Block, Flight};
use super::graph::{Functions, Grapher, PidSet, Step};
use super::spool::{each_event, each_page, Merge};
use super::tracefs::{format_path, BLOCK_BIO_QUEUE, BLOCK_COMPLETE, BLOCK_INSERT, BLOCK_ISSUE};
use super::{Mode, Session, Stats};

impl Session {
    /// Writes the kernel files: the function_graph tracer's pages as they are, or the system
    /// call and scheduler events turned into function-graph records, with the events kept.
    ///
    /// Event mode reads the spools twice, holding a page of each: first for the tasks traced
    /// and the count of events lost (said on the first page written), then merged in time
    /// order, each event converted and each page written as it fills.
    pub(super) fn write(&self, dir: &Path) -> anyhow::Result<Stats> {
        if self.mode == Mode::Graph {
            return self.write_graph(dir);
        }
        let formats = self.event_formats();
        let kallsyms = fs::read_to_string("/proc/kallsyms").unwrap_or_default();
        let (main, block) = self.spool.split_at(self.cpus.min(self.spool.len()));
        let spools = Spools {
            main,
            block,
            cpus: self.cpus,
            page_size: self.page_size,
        };
        let stats = convert(dir, &spools, &formats, &self.kept, &kallsyms)?;
        let put = |name: &str, bytes: &[u8]| crate::record::write_file(dir, name, bytes);
        put("kernel_header", &self.header().to_bytes())?;
        put("kallsyms", kallsyms.as_bytes())?;
        Ok(stats)
    }
}

/// Event mode's spool files.
struct Spools<'a> {
    /// The main buffer's, a file per CPU.
    main: &'a [PathBuf],
    /// The block instance's, a file per CPU.
    block: &'a [PathBuf],
    /// CPUs of the kernel files written (those of the main buffer).
    cpus: usize,
    page_size: usize,
}

/// Converts the events of `spools` (of the `formats` given, the `kept` events kept) into the
/// files `kernel-cpuN.dat` of `dir`, naming the kernel functions of `kallsyms`.
fn convert(
    dir: &Path,
    spools: &Spools,
    formats: &[EventFormat],
    kept: &[String],
    kallsyms: &str,
) -> anyhow::Result<Stats> {
    let conv = Converter::new(formats, kept, kallsyms)?;
    let (main, block, page_size) = (spools.main, spools.block, spools.page_size);
    let (tasks, stats) = conv.tasks(main, block, page_size).map_err(unspooled)?;
    let fns = Functions {
        entry: conv.fentry.id,
        exit: conv.fexit.id,
        addr_of: &conv.addr_of,
    };
    let layout = (spools.cpus, page_size);
    let mut graph = Grapher::create(dir, layout, &tasks, stats.lost, fns)?;
    conv.convert(main, block, page_size, &mut graph)?;
    graph.finish()?;
    Ok(stats)
}

/// An integer field of a record, found in its format once (as [`EventFormat::value`] reads
/// it).
#[derive(Clone, Copy)]
pub(super) struct Int {
    pub(super) offset: usize,
    size: usize,
    signed: bool,
}

impl Int {
    pub(super) fn of(format: &EventFormat, name: &str) -> Option<Int> {
        let f = format.field(name)?;
        Some(Int {
            offset: f.offset,
            size: if f.array.is_some() { 8 } else { f.size },
            signed: f.signed,
        })
    }

    /// The field's value in `p` (sign-extended when signed); none when it lies outside `p`
    /// or is wider than 8 bytes.
    fn get(self, p: &[u8]) -> Option<u64> {
        let bytes = p.get(self.offset..self.offset.checked_add(self.size)?)?;
        let mut raw = [0u8; 8];
        raw.get_mut(..self.size)?.copy_from_slice(bytes);
        let v = u64::from_le_bytes(raw);
        Some(match self.signed && self.size < 8 {
            true => {
                let shift = 64 - 8 * self.size as u32;
                (((v << shift) as i64) >> shift) as u64
            }
            false => v,
        })
    }

    /// The value of `field` in `p`, if it has one.
    pub(super) fn read(field: Option<Int>, p: &[u8]) -> Option<u64> {
        field.and_then(|f| f.get(p))
    }
}

/// Turns event-mode records into the steps of the traced tasks (kernel.md §5.3).
struct Converter<'a> {
    fentry: &'a EventFormat,
    fexit: &'a EventFormat,
    enter: &'a EventFormat,
    exit: &'a EventFormat,
    switch: Option<&'a EventFormat>,
    /// The events kept as they are in the traced tasks' context.
    kept: Vec<&'a EventFormat>,
    /// The block events, when issue and completion are kept (block requests are paired).
    block: Option<Block>,
    addr_of: HashMap<&'a str, u64>,
    /// This process, whose own events are left out.
    me: u32,
    /// The fields read from every main-buffer record: type and task (at the same places in
    /// every event), system call number, the tasks of a switch.
    ty: Option<Int>,
    pid: Option<Int>,
    nr: Option<Int>,
    prev: Option<Int>,
    next: Option<Int>,
}

impl<'a> Converter<'a> {
    fn new(
        formats: &'a [EventFormat],
        kept: &[String],
        kallsyms: &'a str,
    ) -> anyhow::Result<Converter<'a>> {
        let find =
            |sys: &str, name: &str| formats.iter().find(|f| f.system == sys && f.name == name);
        let (Some(fentry), Some(fexit), Some(enter), Some(exit)) = (
            find("ftrace", "funcgraph_entry"),
            find("ftrace", "funcgraph_exit"),
            find("raw_syscalls", "sys_enter"),
            find("raw_syscalls", "sys_exit"),
        ) else {
            bail!("tracefs lacks the formats of the function-graph or system call events");
        };
        let block = Block::of(formats, kept);
        let kept = formats
            .iter()
            .filter(|f| {
                let name = format!("{}:{}", f.system, f.name);
                kept.contains(&name)
                    && ![BLOCK_ISSUE, BLOCK_COMPLETE, BLOCK_INSERT, BLOCK_BIO_QUEUE]
                        .contains(&name.as_str())
            })
            .collect();
        let switch = find("sched", "sched_switch");
        Ok(Converter {
            ty: Int::of(enter, "common_type"),
            pid: Int::of(enter, "common_pid"),
            nr: Int::of(enter, "id"),
            prev: switch.and_then(|f| Int::of(f, "prev_pid")),
            next: switch.and_then(|f| Int::of(f, "next_pid")),
            me: std::process::id(),
            fentry,
            fexit,
            enter,
            exit,
            switch,
            kept,
            block,
            addr_of: kernel_functions(kallsyms),
        })
    }

    /// The steps a main-buffer record `p` makes, for tasks other than this process: at most
    /// two (a switch from one task to another).
    fn steps(&self, p: &[u8]) -> [Option<(u32, Step)>; 2] {
        let me = u64::from(self.me);
        let traced = |pid: u64| pid != 0 && pid != me && pid < u64::from(u32::MAX);
        let (enter, exit) = (self.enter, self.exit);
        let ty = Int::read(self.ty, p).unwrap_or(0) as u16;
        let pid = Int::read(self.pid, p).unwrap_or(0);
        let one = |pid: u64, step: Step| traced(pid).then_some((pid as u32, step));
        if ty == enter.id || ty == exit.id {
            let step = match ty == enter.id {
                true => Step::Enter(Int::read(self.nr, p).unwrap_or(u64::MAX)),
                false => Step::Exit,
            };
            [one(pid, step), None]
        } else if self.switch.is_some_and(|f| f.id == ty) {
            // Recorded when either side is traced, in the context of the task that leaves
            // the CPU.
            let prev = Int::read(self.prev, p).unwrap_or(0);
            let next = Int::read(self.next, p).unwrap_or(0);
            [one(prev, Step::Out), one(next, Step::In)]
        } else if self.kept.iter().any(|f| f.id == ty) {
            [one(pid, Step::Event), None]
        } else {
            [None, None]
        }
    }

    /// First pass: the traced tasks, those whose own system calls were recorded
    /// (set_event_pid; scheduler events name both tasks, traced or not), and what the
    /// buffers held.
    fn tasks(
        &self,
        main: &[PathBuf],
        block: &[PathBuf],
        page_size: usize,
    ) -> std::io::Result<(PidSet, Stats)> {
        let mut stats = Stats::default();
        let mut tasks = PidSet::default();
        // The task of the last system call seen (events come in runs of one task's).
        let mut last = None;
        each_event(main, page_size, &mut stats, |_, _, p| {
            for (pid, step) in self.steps(p).into_iter().flatten() {
                if matches!(step, Step::Enter(_) | Step::Exit) && last != Some(pid) {
                    tasks.insert(pid);
                    last = Some(pid);
                }
            }
        })?;
        if self.block.is_some() {
            each_event(block, page_size, &mut stats, |_, _, _| {})?;
        }
        Ok((tasks, stats))
    }

    /// Second pass: the events of all buffers in time order (at equal times, the main
    /// buffer's first, then by CPU), each turned into the steps it makes, given to `graph`
    /// (which keeps those of the traced tasks). Block requests that traced tasks queued,
    /// inserted or issued are kept ([`Block::owner`]): those records and, paired by device
    /// and sector, the later ones of other contexts, rewritten as the task's.
    fn convert(
        &self,
        main: &[PathBuf],
        block: &[PathBuf],
        page_size: usize,
        graph: &mut Grapher,
    ) -> anyhow::Result<()> {
        let spools: Vec<PathBuf> = match self.block {
            Some(_) => main.iter().chain(block).cloned().collect(),
            None => main.to_vec(),
        };
        let mut merge = Merge::open(&spools, page_size).map_err(unspooled)?;
        let mut flight = Flight::default();
        while let Some((time, i, p)) = merge.next().map_err(unspooled)? {
            if let Some(cpu) = i.checked_sub(main.len()) {
                if let Some(block) = &self.block {
                    block.keep((time, cpu, p), &mut flight, graph)?;
                }
                continue;
            }
            if let Some(block) = &self.block {
                block.note(p, &mut flight);
            }
            for (pid, step) in self.steps(p).into_iter().flatten() {
                graph.step(time, i, pid, step, p)?;
            }
        }
        Ok(())
    }
}

impl Session {
    /// Graph mode: the spooled pages of the main buffer are the kernel files, renamed into
    /// place, or merged with the block requests kept ([`merge_graph`]).
    fn write_graph(&self, dir: &Path) -> anyhow::Result<Stats> {
        let mut stats = Stats::default();
        for path in &self.spool {
            each_page(path, self.page_size, |page| {
                let Ok(page) = Page::parse(page) else {
                    return false;
                };
                stats.lost += page.lost.map_or(0, Lost::events);
                stats.events += page.events().map_while(Result::ok).count() as u64;
                true
            })
            .with_context(|| format!("cannot read {}", path.display()))?;
        }
        let put = |name: &str, bytes: &[u8]| crate::record::write_file(dir, name, bytes);
        put("kernel_header", &self.header().to_bytes())?;
        // With block requests kept, the kernel files are the main spools merged with them;
        // else the main spools as they are.
        let (main, block) = self.spool.split_at(self.cpus.min(self.spool.len()));
        let formats = self.event_formats();
        let spools = (main, block);
        if !merge_graph(dir, spools, self.page_size, &formats, &self.kept)? {
            for (cpu, path) in main.iter().enumerate() {
                let to = dir.join(format!("kernel-cpu{cpu}.dat"));
                fs::rename(path, &to).with_context(|| format!("cannot write {}", to.display()))?;
            }
        }
        let kallsyms = fs::read("/proc/kallsyms").unwrap_or_default();
        put("kallsyms", &kallsyms)?;
        Ok(stats)
    }

    /// The formats of the events recorded, parsed.
    fn event_formats(&self) -> Vec<EventFormat> {
        self.formats
            .iter()
            .filter_map(|(rel, text)| {
                let sys = rel.split('/').nth(1).unwrap_or("");
                EventFormat::parse(sys, text)
            })
            .collect()
    }

    /// `kernel_header`: the page layout and the function-graph formats.
    fn header(&self) -> KernelHeader {
        KernelHeader {
            page_size: self.page_size,
            long_size: 8,
            big_endian: false,
            files: std::iter::once(("events/header_page".to_string(), self.header_page.clone()))
                .chain(
                    self.formats
                        .iter()
                        .filter(|(rel, _)| {
                            rel.contains("/ftrace/")
                                || self.kept.iter().any(|k| format_path(k) == *rel)
                        })
                        .cloned(),
                )
                .collect(),
        }
    }
}

/// Text symbols of `/proc/kallsyms` by name (first address wins).
fn kernel_functions(kallsyms: &str) -> HashMap<&str, u64> {
    let mut out = HashMap::new();
    for line in kallsyms.lines() {
        let mut it = line.split_whitespace();
        let (Some(addr), Some(ty), Some(name)) = (it.next(), it.next(), it.next()) else {
            continue;
        };
        if !matches!(ty, "T" | "t") {
            continue;
        }
        if let Ok(a) = u64::from_str_radix(addr, 16) {
            if a != 0 {
                out.entry(name).or_insert(a);
            }
        }
    }
    out
}

#[cfg(test)]
#[path = "convert_tests.rs"]
mod stream_tests;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::syscalls;

    #[test]
    fn kallsyms_functions() {
        let k = "ffffffff81000000 T _stext\nffffffff81102a40 T __x64_sys_getpid\n\
                 0000000000000000 T zero\nffffffff81400c40 d data\n";
        let f = kernel_functions(k);
        assert_eq!(f.get("__x64_sys_getpid"), Some(&0xffff_ffff_8110_2a40));
        assert!(!f.contains_key("data") && !f.contains_key("zero"));
        assert_eq!(syscalls::name(39), Some("getpid"));
    }
}
