//! `record -k`: the kernel's part of a recording, in uftrace's kernel files of the data
//! directory: `kernel_header`, `kernel-cpuN.dat`, `kallsyms`.
//!
//! Data flow: [`tracefs`] saves every setting it touches and sets tracing up for the traced
//! process tree, in one of two modes: the function_graph tracer, whose pages are saved as
//! they are, or (event mode, kernel.md §3, §5.3) the `raw_syscalls` and scheduler trace
//! events. Both modes also record the events of I/O requests: io_uring's and libaio's in the
//! traced tasks (with libmcount's libaio markers, the iocbs submitted and the events reaped,
//! written into the `trace_marker_raw` named by [`Session::marker`]), block requests in a
//! tracefs instance of their own ([`block`]). While the
//! program runs, a [`spool`] reader thread appends each CPU's raw pages to a spool file in
//! the data directory as it reads them. At the end [`Session::finish`] puts tracefs back and
//! either renames the spool files into `kernel-cpuN.dat` (graph mode; merged with the block
//! requests of the traced tasks when there are some) or has
//! the [`convert`]er read them back, merged in time order, and turn the events into
//! function-graph records (`__x64_sys_write() { ... }` under the user function that made the
//! call), each page written as it fills ([`graph`]). The recorder's memory stays flat however
//! long the program runs: a page per CPU buffer, a page per output file, and what is open in
//! each traced task (its system call, its time off the CPU, its block requests in flight).
//!
//! Every tracefs setting touched is read first and written back when the session ends, also
//! when the recorder fails half-way ([`Session`]'s drop). Only the recorder's main thread and
//! the tasks it forks are traced (`set_event_pid` with `event-fork`); the recorder's own
//! system calls are left out when converting.

mod behalf;
mod block;
mod convert;
mod graph;
mod spool;
mod tracefs;
mod undo;

pub use undo::Undo;

use anyhow::Context;
use std::fs::OpenOptions;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use tracefs::{
    cpus, expand_events, format_path, read_file, restorable, write_file, EVENTS, SAVED, SAVED_GRAPH,
};

/// How the kernel is traced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// The function_graph tracer: its records are saved as they are.
    Graph,
    /// System call and scheduler events, turned into function-graph records.
    Events,
}

/// What a session recorded.
#[derive(Debug, Clone, Copy, Default)]
pub struct Stats {
    /// Events read.
    pub events: u64,
    /// Events the kernel dropped (its buffer was full).
    pub lost: u64,
}

/// What `record -k` asks of the kernel.
#[derive(Debug, Clone, Default)]
pub struct Request {
    /// `--kernel-buffer`: bytes of buffer per CPU.
    pub buffer: Option<u64>,
    /// `-K`: graph depth (function_graph mode).
    pub depth: u32,
    /// `-E SYSTEM:EVENT@kernel`: tracepoints kept as events (globs allowed).
    pub events: Vec<String>,
    /// `--rt-prio`: SCHED_FIFO priority of the reader thread.
    pub rt_prio: Option<i32>,
}

/// A recording session: tracefs set up for the traced tree and a reader thread per run.
pub struct Session {
    root: PathBuf,
    mode: Mode,
    saved: Vec<(&'static str, String)>,
    /// The instance recording block requests, removed at the end.
    instance: Option<PathBuf>,
    stop: Arc<AtomicBool>,
    reader: Option<JoinHandle<std::io::Result<()>>>,
    /// The spool files of the raw pages in the data directory: the main buffer's CPUs, then
    /// the instance's; removed (or renamed into the kernel files) at the end.
    spool: Vec<PathBuf>,
    /// CPU files of the main buffer.
    cpus: usize,
    page_size: usize,
    /// What tracefs says of the events, for `kernel_header`.
    header_page: String,
    formats: Vec<(String, String)>,
    /// The events kept as events (`system:name`): their formats go into `kernel_header`.
    kept: Vec<String>,
}

impl Session {
    /// Saves the settings, starts the reader and turns tracing on for this process and the
    /// tasks it forks from now on: the function_graph tracer to `depth` when the kernel has
    /// it and lets us use it, else the system call and scheduler events. The raw pages are
    /// spooled into the data directory `dir`.
    pub fn start(req: &Request, dir: &Path) -> anyhow::Result<Session> {
        let root = tracefs::root()?;
        let tracers = read_file(&root, "available_tracers").unwrap_or_default();
        // What event mode records, said once when the kernel's call graph is not available.
        const EVENT_MODE: &str =
            "-k records system calls, time off the CPU, page faults and block requests as events";
        if tracers.split_whitespace().any(|t| t == "function_graph") {
            match Self::open(&root, Mode::Graph, req, dir) {
                Ok(s) => return Ok(s),
                Err(e) => crate::diag::line(format!(
                    "utrace: the function_graph tracer cannot be used ({e:#}): {EVENT_MODE}"
                )),
            }
        } else {
            crate::diag::line(format!(
                "utrace: this kernel has no function_graph tracer: {EVENT_MODE}"
            ));
        }
        if req.depth > 1 {
            crate::diag::line(format!(
                "utrace: without function_graph, -K {} shows no deeper kernel functions",
                req.depth
            ));
        }
        Self::open(&root, Mode::Events, req, dir)
    }

    fn open(root: &Path, mode: Mode, req: &Request, dir: &Path) -> anyhow::Result<Session> {
        let root = root.to_path_buf();
        let mut saved = Vec::new();
        let list = match mode {
            Mode::Graph => SAVED_GRAPH,
            Mode::Events => SAVED,
        };
        // The buffer size before tracing_on, which comes last.
        let names = req
            .buffer
            .map(|_| &"buffer_size_kb")
            .into_iter()
            .chain(list.iter());
        for &name in names {
            let text = read_file(&root, name).with_context(|| {
                "-k needs read and write access to tracefs (run as root)".to_string()
            })?;
            saved.push((name, restorable(name, &text)));
        }
        let page_size = read_file(&root, "buffer_subbuf_size_kb")
            .ok()
            .and_then(|t| t.trim().parse::<usize>().ok())
            .map_or(4096, |kb| kb * 1024);
        let header_page = read_file(&root, "events/header_page")?;
        let mut formats = Vec::new();
        for name in ["funcgraph_entry", "funcgraph_exit"] {
            let rel = format!("events/ftrace/{name}/format");
            // Newer kernels end funcgraph_entry with a flexible `args[]` field, which older
            // readers (uftrace 0.13's libtraceevent) reject; the records written here have
            // no arguments.
            let text = read_file(&root, &rel)?;
            let text: String = text
                .lines()
                .filter(|l| !l.contains("[];"))
                .map(|l| format!("{l}\n"))
                .collect();
            formats.push((rel.clone(), text));
        }
        for ev in EVENTS.iter().filter(|_| mode == Mode::Events) {
            let rel = format_path(ev);
            formats.push((rel.clone(), read_file(&root, &rel)?));
        }
        let kept = expand_events(&root, &req.events)?;
        let mut s = Session {
            root,
            mode,
            saved,
            instance: None,
            stop: Arc::new(AtomicBool::new(false)),
            reader: None,
            spool: Vec::new(),
            cpus: 0,
            page_size,
            header_page,
            formats,
            kept: Vec::new(),
        };
        match mode {
            Mode::Graph => s.setup_graph(req.buffer, req.depth)?,
            Mode::Events => s.setup(req.buffer)?,
        }
        s.setup_block(req.buffer);
        s.enable_kept(kept)?;
        s.setup_behalf();
        // The reader thread starts before the pid lists are written: it is not traced
        // (function-fork and event-fork add only the tasks forked later).
        s.start_reader(dir, req.rt_prio)?;
        let me = std::process::id().to_string();
        if mode == Mode::Graph {
            write_file(&s.root, "set_ftrace_pid", &me)?;
        }
        write_file(&s.root, "set_event_pid", &me)?;
        write_file(&s.root, "tracing_on", "1")?;
        Ok(s)
    }

    /// Starts the reader before this process is traced: its reads are not recorded.
    fn start_reader(&mut self, dir: &Path, rt_prio: Option<i32>) -> anyhow::Result<()> {
        let mut files = Vec::new();
        let mut spools = Vec::new();
        self.cpus = cpus(&self.root);
        let roots = std::iter::once(self.root.clone()).chain(self.instance.clone());
        for (buffer, root) in roots.enumerate() {
            let name = ["kernel-cpu", "kernel-block-cpu"][buffer.min(1)];
            for cpu in 0..self.cpus {
                let spool = dir.join(format!("{name}{cpu}.raw"));
                spools.push(
                    spool::create_spool(&spool)
                        .with_context(|| format!("cannot create {}", spool.display()))?,
                );
                self.spool.push(spool);
                let path = root.join(format!("per_cpu/cpu{cpu}/trace_pipe_raw"));
                let f = OpenOptions::new()
                    .read(true)
                    .custom_flags(libc::O_NONBLOCK)
                    .open(&path)
                    .with_context(|| format!("cannot open {}", path.display()))?;
                files.push(f);
            }
        }
        let stop = self.stop.clone();
        let size = self.page_size;
        self.reader = Some(std::thread::spawn(move || {
            if let Some(prio) = rt_prio {
                super::pump::set_rt_priority(prio, false);
            }
            spool::read_cpus(files, spools, size, &stop)
        }));
        Ok(())
    }

    /// The `trace_marker_raw` file of the buffer holding the traced tasks' events (where
    /// libmcount writes its libaio markers, `env::AIO_MARKER`).
    pub fn marker(&self) -> PathBuf {
        self.root.join("trace_marker_raw")
    }

    /// Stops the events, waits for the reader to spool what is left and puts tracefs back as
    /// it was; then writes the kernel files into `dir` for the tasks of the recording (not
    /// this process).
    pub fn finish(mut self, dir: &Path) -> anyhow::Result<Stats> {
        let _ = write_file(&self.root, "tracing_on", "0");
        if let Some(path) = &self.instance {
            let _ = write_file(path, "tracing_on", "0");
        }
        let read = self.stop_reader();
        self.restore();
        read.with_context(|| format!("cannot spool the kernel pages into {}", dir.display()))?;
        let written = self.write(dir);
        self.remove_spool();
        written
    }

    /// Stops the reader and waits for it to spool what is left: what its writes gave.
    fn stop_reader(&mut self) -> std::io::Result<()> {
        // Relaxed: the join below orders everything the reader wrote.
        self.stop.store(true, Ordering::Relaxed);
        match self.reader.take().map(JoinHandle::join) {
            Some(Ok(read)) => read,
            Some(Err(_)) => Err(std::io::Error::other("the kernel reader thread panicked")),
            None => Ok(()),
        }
    }

    /// Removes the spool files that are left.
    fn remove_spool(&mut self) {
        for path in self.spool.drain(..) {
            let _ = std::fs::remove_file(path);
        }
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        if !self.saved.is_empty() || self.instance.is_some() {
            let _ = write_file(&self.root, "tracing_on", "0");
            self.restore();
        }
        self.remove_spool();
    }
}
