//! Event mode's converter (kernel.md §5.3): reads the spooled pages back, turns the system
//! call and scheduler events of the traced tasks into their steps, and the steps into
//! function-graph records in uftrace's kernel files; block requests are paired with their
//! completions and kept, like the other events kept, as events of the task that issued them.
//! In graph mode the spooled pages are the kernel files already.

use anyhow::{bail, Context};
use record_format::kernel::{EventFormat, KernelHeader, Lost, Page, PageWriter};
use std::collections::{HashMap, HashSet};
use std::fs;
use std::path::{Path, PathBuf};

use super::reader::{each_event, each_page};
use super::tracefs::{format_path, BLOCK_COMPLETE, BLOCK_ISSUE};
use super::{Mode, Session, Stats};
use crate::record::syscalls;

/// What a kernel event means for one traced task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    /// Enters system call `nr`.
    Enter(u64),
    /// Returns from its system call.
    Exit,
    /// Leaves the CPU.
    Out,
    /// Runs again.
    In,
    /// An event kept as it is: the record of this index.
    Event(usize),
}

impl Session {
    /// Writes the kernel files: the function_graph tracer's pages as they are, or the system
    /// call and scheduler events turned into function-graph records, with the events kept.
    pub(super) fn write(&self, dir: &Path) -> anyhow::Result<Stats> {
        if self.mode == Mode::Graph {
            return self.write_graph(dir);
        }
        let formats: Vec<EventFormat> = self
            .formats
            .iter()
            .filter_map(|(rel, text)| {
                let sys = rel.split('/').nth(1).unwrap_or("");
                EventFormat::parse(sys, text)
            })
            .collect();
        let kallsyms = fs::read_to_string("/proc/kallsyms").unwrap_or_default();
        let (main, block) = self.spool.split_at(self.cpus.min(self.spool.len()));
        let mut found = Found::default();
        let conv = Converter::new(&formats, &self.kept, &kallsyms)?;
        let unspool = |e: std::io::Error| {
            anyhow::Error::new(e).context("cannot read the spooled kernel pages")
        };
        conv.scan(main, self.page_size, &mut found)
            .map_err(unspool)?;
        // Scheduler events name both tasks, traced or not; the traced ones are those whose
        // own system calls were recorded (set_event_pid).
        let tasks: HashSet<u32> = found
            .steps
            .iter()
            .filter(|s| matches!(s.3, Step::Enter(_) | Step::Exit))
            .map(|s| s.2)
            .collect();
        found.steps.retain(|s| tasks.contains(&s.2));
        conv.pair_block(block, self.page_size, &tasks, &mut found)
            .map_err(unspool)?;
        found.steps.sort_by_key(|e| e.0);
        let writers = conv.graph(&found, self.cpus.max(1), self.page_size);
        let header = self.header();
        let put = |name: &str, bytes: &[u8]| crate::record::write_file(dir, name, bytes);
        put("kernel_header", &header.to_bytes())?;
        for (cpu, w) in writers.into_iter().enumerate() {
            put(&format!("kernel-cpu{cpu}.dat"), &w.finish())?;
        }
        put("kallsyms", kallsyms.as_bytes())?;
        Ok(found.stats)
    }
}

/// What the event-mode buffers held for the traced tasks.
#[derive(Default)]
struct Found {
    /// Every step of every traced task: (time, cpu, pid, step).
    steps: Vec<(u64, usize, u32, Step)>,
    /// The records of the events kept as they are ([`Step::Event`]).
    events: Vec<Vec<u8>>,
    stats: Stats,
}

impl Found {
    fn event(&mut self, time: u64, cpu: usize, pid: u32, record: Vec<u8>) {
        self.events.push(record);
        let i = self.events.len() - 1;
        self.steps.push((time, cpu, pid, Step::Event(i)));
    }
}

/// Turns event-mode records into the steps of the traced tasks, then into function-graph
/// records (kernel.md §5.3).
struct Converter<'a> {
    fentry: &'a EventFormat,
    fexit: &'a EventFormat,
    enter: &'a EventFormat,
    exit: &'a EventFormat,
    switch: Option<&'a EventFormat>,
    /// The events kept as they are in the traced tasks' context.
    kept: Vec<&'a EventFormat>,
    issue: Option<&'a EventFormat>,
    complete: Option<&'a EventFormat>,
    addr_of: HashMap<&'a str, u64>,
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
        let block = |ev: &str| {
            let (sys, name) = ev.split_once(':').unwrap_or(("", ev));
            find(sys, name).filter(|_| kept.iter().any(|k| k == ev))
        };
        let kept = formats
            .iter()
            .filter(|f| {
                let name = format!("{}:{}", f.system, f.name);
                kept.contains(&name) && name != BLOCK_ISSUE && name != BLOCK_COMPLETE
            })
            .collect();
        Ok(Converter {
            fentry,
            fexit,
            enter,
            exit,
            switch: find("sched", "sched_switch"),
            kept,
            issue: block(BLOCK_ISSUE),
            complete: block(BLOCK_COMPLETE),
            addr_of: kernel_functions(kallsyms),
        })
    }

    /// The steps of the tasks other than this process in the main buffer's `cpus` pages.
    fn scan(&self, cpus: &[PathBuf], page_size: usize, found: &mut Found) -> std::io::Result<()> {
        let me = std::process::id();
        let traced = |pid: u64| pid != 0 && pid != u64::from(me) && pid < u64::from(u32::MAX);
        let (enter, exit) = (self.enter, self.exit);
        let mut stats = Stats::default();
        each_event(cpus, page_size, &mut stats, |time, cpu, p| {
            let ty = enter.value("common_type", p).unwrap_or(0) as u16;
            let pid = enter.value("common_pid", p).unwrap_or(0);
            let mut step = |pid: u64, step: Step| {
                found.steps.push((time, cpu, pid as u32, step));
            };
            if ty == enter.id || ty == exit.id {
                if traced(pid) {
                    step(
                        pid,
                        match ty == enter.id {
                            true => Step::Enter(enter.value("id", p).unwrap_or(u64::MAX)),
                            false => Step::Exit,
                        },
                    );
                }
            } else if let Some(sw) = self.switch.filter(|f| f.id == ty) {
                // Recorded when either side is traced, in the context of the task
                // that leaves the CPU.
                let prev = sw.value("prev_pid", p).unwrap_or(0);
                let next = sw.value("next_pid", p).unwrap_or(0);
                if traced(prev) {
                    step(prev, Step::Out);
                }
                if traced(next) {
                    step(next, Step::In);
                }
            } else if self.kept.iter().any(|f| f.id == ty) && traced(pid) {
                found.event(time, cpu, pid as u32, p.to_vec());
            }
        })?;
        found.stats.events += stats.events;
        found.stats.lost += stats.lost;
        Ok(())
    }

    /// The block requests that `tasks` issued, from the instance's `cpus` pages: the issue
    /// and, paired by device and sector, the completion, rewritten as the issuer's.
    fn pair_block(
        &self,
        cpus: &[PathBuf],
        page_size: usize,
        tasks: &HashSet<u32>,
        found: &mut Found,
    ) -> std::io::Result<()> {
        let (Some(issue), Some(complete)) = (self.issue, self.complete) else {
            return Ok(());
        };
        let mut all = Vec::new();
        each_event(cpus, page_size, &mut found.stats, |time, cpu, p| {
            all.push((time, cpu, p.to_vec()));
        })?;
        all.sort_by_key(|e| e.0);
        // Requests in flight: (dev, sector) → (issuer, its CPU).
        let mut issued: HashMap<(u64, u64), (u32, usize)> = HashMap::new();
        for (time, cpu, rec) in all {
            let p = &rec[..];
            let ty = issue.value("common_type", p).unwrap_or(0) as u16;
            let fmt = if ty == issue.id { issue } else { complete };
            let key = (
                fmt.value("dev", p).unwrap_or(0),
                fmt.value("sector", p).unwrap_or(0),
            );
            if ty == issue.id {
                let pid = issue.value("common_pid", p).unwrap_or(0) as u32;
                if tasks.contains(&pid) {
                    issued.insert(key, (pid, cpu));
                    found.event(time, cpu, pid, p.to_vec());
                }
            } else if ty == complete.id {
                if let Some((pid, cpu)) = issued.remove(&key) {
                    let mut rec = p.to_vec();
                    if let Some(f) = complete.field("common_pid") {
                        if let Some(b) = rec.get_mut(f.offset..f.offset + 4) {
                            b.copy_from_slice(&pid.to_le_bytes());
                        }
                    }
                    found.event(time, cpu, pid, rec);
                }
            }
        }
        Ok(())
    }

    /// The function-graph records (and kept events) of `found`'s steps, in time order, in
    /// `cpus` page writers.
    fn graph(&self, found: &Found, cpus: usize, page_size: usize) -> Vec<PageWriter> {
        let schedule = self.addr_of.get("schedule").copied();
        let mut writers: Vec<PageWriter> = (0..cpus).map(|_| PageWriter::new(page_size)).collect();
        // The count of events the kernel dropped, on the first page (records are regrouped
        // by task, so where they were dropped no longer says anything).
        if found.stats.lost > 0 {
            writers[0].lose(Lost::Count(found.stats.lost));
        }
        // Per task: the function of the system call it is in, and the kernel depth of the
        // `schedule` it is off the CPU in.
        let mut open: HashMap<u32, u64> = HashMap::new();
        let mut off: HashMap<u32, u32> = HashMap::new();
        // A task's records all go to the file of the CPU it was first seen on: uftrace's
        // reader loses calls whose entry and exit lie in different CPU files (a task that
        // migrated while off the CPU).
        let mut home: HashMap<u32, usize> = HashMap::new();
        for &(time, cpu, pid, step) in &found.steps {
            let cpu = *home.entry(pid).or_insert(cpu);
            let w = &mut writers[cpu];
            let mut record = |id: u16, func: u64, depth: u32, exit: bool| {
                let mut p = Vec::with_capacity(40);
                p.extend_from_slice(&id.to_le_bytes());
                p.extend_from_slice(&[0, 0]);
                p.extend_from_slice(&pid.to_le_bytes());
                p.extend_from_slice(&func.to_le_bytes());
                p.extend_from_slice(&depth.to_le_bytes());
                p.extend_from_slice(&0u32.to_le_bytes());
                if exit {
                    p.extend_from_slice(&0u64.to_le_bytes());
                    p.extend_from_slice(&0u64.to_le_bytes());
                }
                w.push(time, &p);
            };
            let (fentry, fexit) = (self.fentry.id, self.fexit.id);
            match step {
                Step::Enter(nr) => {
                    let name = syscalls::name(nr).map_or_else(
                        || "__x64_sys_ni_syscall".to_string(),
                        |n| format!("__x64_sys_{n}"),
                    );
                    let Some(&func) = self.addr_of.get(name.as_str()) else {
                        continue;
                    };
                    if let Some(prev) = open.insert(pid, func) {
                        // An enter without an exit (a lost event): close the old call first.
                        record(fexit, prev, 0, true);
                    }
                    record(fentry, func, 0, false);
                }
                Step::Exit => {
                    if let (Some(depth), Some(s)) = (off.remove(&pid), schedule) {
                        record(fexit, s, depth, true);
                    }
                    // Exits of calls entered before the task was traced (a new thread
                    // returning from clone) have no enter and are left out.
                    if let Some(func) = open.remove(&pid) {
                        record(fexit, func, 0, true);
                    }
                }
                Step::Out => {
                    if let Some(s) = schedule.filter(|_| !off.contains_key(&pid)) {
                        let depth = u32::from(open.contains_key(&pid));
                        off.insert(pid, depth);
                        record(fentry, s, depth, false);
                    }
                }
                Step::In => {
                    if let (Some(depth), Some(s)) = (off.remove(&pid), schedule) {
                        record(fexit, s, depth, true);
                    }
                }
                Step::Event(i) => w.push(time, &found.events[i]),
            }
        }
        writers
    }
}

impl Session {
    /// Graph mode: the spooled pages are the kernel files, renamed into place.
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
        for (cpu, path) in self.spool.iter().enumerate() {
            let to = dir.join(format!("kernel-cpu{cpu}.dat"));
            fs::rename(path, &to).with_context(|| format!("cannot write {}", to.display()))?;
        }
        let kallsyms = fs::read("/proc/kallsyms").unwrap_or_default();
        put("kallsyms", &kallsyms)?;
        Ok(stats)
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
mod tests {
    use super::*;

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
