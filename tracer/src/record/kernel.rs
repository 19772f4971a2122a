//! `record -k` in event mode (kernel.md §3, §5.3): the kernel's `raw_syscalls` trace events
//! of the traced process tree, read from tracefs while the program runs, then turned into
//! function-graph records (`__x64_sys_write() { ... }` under the user function that made the
//! call) in uftrace's kernel files: `kernel_header`, `kernel-cpuN.dat`, `kallsyms`.
//!
//! Every tracefs setting touched is read first and written back when the session ends, also
//! when the recorder fails half-way ([`Session`]'s drop). Only the recorder's main thread and
//! the tasks it forks are traced (`set_event_pid` with `event-fork`); the recorder's own
//! system calls are left out when converting.

use anyhow::{bail, Context};
use record_format::kernel::{EventFormat, KernelHeader, Lost, Page, PageWriter};
use record_format::pattern::{MatchType, NameMatcher};
use std::collections::HashMap;
use std::fs::{self, File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use super::syscalls;

/// Settings written and restored in event mode, relative to tracefs (`tracing_on` last: it
/// is restored last).
const SAVED: &[&str] = &[
    "trace_clock",
    "set_event",
    "set_event_pid",
    "options/event-fork",
    "tracing_on",
];

/// Settings written and restored in graph mode (`current_tracer` first: it is restored first,
/// once the readers are closed).
const SAVED_GRAPH: &[&str] = &[
    "current_tracer",
    "trace_clock",
    "set_ftrace_pid",
    "set_event",
    "set_event_pid",
    "options/event-fork",
    "max_graph_depth",
    "set_ftrace_notrace",
    "set_graph_notrace",
    "options/function-fork",
    "tracing_on",
];

/// Settings that hold a list, one item per line (restored an item at a time).
const LISTS: &[&str] = &["set_event", "set_ftrace_notrace", "set_graph_notrace"];

/// Left out of the graphs (kernel.md §1.6, §5.2): the system call dispatcher, so that depth 0
/// is the `__x64_sys_*` function, and the work around every system call.
const NOTRACE: &[&str] = &["do_syscall_64", "x64_sys_call"];
const GRAPH_NOTRACE: &[&str] = &[
    "syscall_*",
    "exit_to_user_mode_prepare",
    "sys_clock_gettime",
    "smp_irq_work_interrupt",
];

/// The events recorded in event mode and turned into function-graph records.
const EVENTS: &[&str] = &[
    "raw_syscalls:sys_enter",
    "raw_syscalls:sys_exit",
    "sched:sched_switch",
];

/// Recorded in event mode when the kernel has them, and kept as events of the task.
const TASK_EVENTS: &[&str] = &["exceptions:page_fault_user"];

/// Block requests (event mode): recorded in a tracefs instance of their own without a pid
/// filter, as completions run in whatever task the interrupt hit; a request issued by a
/// traced task is paired with its completion by device and sector, and both are kept as
/// events of that task.
const BLOCK_ISSUE: &str = "block:block_rq_issue";
const BLOCK_COMPLETE: &str = "block:block_rq_complete";

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

/// Where tracefs is mounted, mounting it when it is not.
fn tracefs() -> anyhow::Result<PathBuf> {
    let has_trace = |p: &Path| p.join("trace").exists();
    match fs::metadata("/sys/kernel/tracing/trace") {
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
            bail!("-k needs root: tracefs at /sys/kernel/tracing is not accessible ({e})")
        }
        _ => {}
    }
    for p in ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"] {
        if has_trace(Path::new(p)) {
            return Ok(PathBuf::from(p));
        }
    }
    if let Ok(mounts) = fs::read_to_string("/proc/self/mountinfo") {
        for line in mounts.lines() {
            // `... MOUNT_POINT ... - FSTYPE SOURCE ...`
            let Some((left, right)) = line.split_once(" - ") else {
                continue;
            };
            if right.split_whitespace().next() == Some("tracefs") {
                if let Some(mp) = left.split_whitespace().nth(4) {
                    if has_trace(Path::new(mp)) {
                        return Ok(PathBuf::from(mp));
                    }
                }
            }
        }
    }
    let target = c"/sys/kernel/tracing";
    // SAFETY: both strings are NUL-terminated; mounting tracefs changes no memory of ours.
    let rc = unsafe {
        libc::mount(
            c"nodev".as_ptr(),
            target.as_ptr(),
            c"tracefs".as_ptr(),
            0,
            std::ptr::null(),
        )
    };
    if rc == 0 && has_trace(Path::new("/sys/kernel/tracing")) {
        return Ok(PathBuf::from("/sys/kernel/tracing"));
    }
    let err = std::io::Error::last_os_error();
    bail!(
        "-k needs tracefs: it is not mounted and mounting it on /sys/kernel/tracing failed ({err}); run as root"
    )
}

/// The value to write back for a setting read as `text` (`trace_clock` lists every clock
/// with the current one in brackets; `set_event_pid` may be empty).
fn restorable(name: &str, text: &str) -> String {
    // `7 (expanded: 1408)`: not allocated yet; 1408 is the size in effect.
    if name == "buffer_size_kb" {
        if let Some(n) = text.split("expanded: ").nth(1) {
            return n.trim_end_matches([')', '\n', ' ']).to_string();
        }
    }
    if name == "trace_clock" {
        if let Some(cur) = text
            .split_whitespace()
            .find_map(|w| w.strip_prefix('[')?.strip_suffix(']'))
        {
            return cur.to_string();
        }
    }
    if name == "set_ftrace_pid" && text.trim() == "no pid" {
        return String::new();
    }
    // Lists say `#### all functions enabled ####` when empty.
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .collect::<Vec<_>>()
        .join("\n")
        .trim()
        .to_string()
}

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
}

/// A recording session: tracefs set up for the traced tree and a reader thread per run.
pub struct Session {
    root: PathBuf,
    mode: Mode,
    saved: Vec<(&'static str, String)>,
    /// The instance recording block requests (event mode), removed at the end.
    instance: Option<PathBuf>,
    stop: Arc<AtomicBool>,
    reader: Option<JoinHandle<Vec<Vec<u8>>>>,
    /// CPU files of the main buffer; the instance's follow them in what the reader returns.
    cpus: usize,
    page_size: usize,
    /// What tracefs says of the events, for `kernel_header`.
    header_page: String,
    formats: Vec<(String, String)>,
    /// The events kept as events (`system:name`): their formats go into `kernel_header`.
    kept: Vec<String>,
}

fn write_file(root: &Path, name: &str, value: &str) -> anyhow::Result<()> {
    let path = root.join(name);
    let mut f = OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(&path)
        .with_context(|| format!("cannot open {}", path.display()))?;
    f.write_all(value.as_bytes())
        .with_context(|| format!("cannot write '{value}' to {}", path.display()))
}

/// Adds `item` to the list file `name` (one item per write).
fn append_file(root: &Path, name: &str, item: &str) -> anyhow::Result<()> {
    let path = root.join(name);
    let mut f = OpenOptions::new()
        .append(true)
        .open(&path)
        .with_context(|| format!("cannot open {}", path.display()))?;
    f.write_all(item.as_bytes())
        .with_context(|| format!("cannot add '{item}' to {}", path.display()))
}

/// Reads a tracefs file. Some (`events/header_page`) end their text after a short first read,
/// so the reads are large ones.
fn read_file(root: &Path, name: &str) -> anyhow::Result<String> {
    let path = root.join(name);
    let mut f = File::open(&path).with_context(|| format!("cannot read {}", path.display()))?;
    let mut out = Vec::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = f
            .read(&mut buf)
            .with_context(|| format!("cannot read {}", path.display()))?;
        if n == 0 {
            break;
        }
        out.extend_from_slice(&buf[..n]);
    }
    Ok(String::from_utf8_lossy(&out).into_owned())
}

/// Number of CPUs with a `per_cpu` directory.
fn cpus(root: &Path) -> usize {
    (0..)
        .take_while(|n| root.join(format!("per_cpu/cpu{n}")).exists())
        .count()
}

/// The tracepoints (`system:name`) of `available_events` that `-E` patterns name (globs
/// allowed); a pattern that names none is an error.
fn expand_events(root: &Path, patterns: &[String]) -> anyhow::Result<Vec<String>> {
    if patterns.is_empty() {
        return Ok(Vec::new());
    }
    let available = read_file(root, "available_events")?;
    let mut out = Vec::new();
    for pat in patterns {
        let re = NameMatcher::new(pat, MatchType::Glob);
        let before = out.len();
        for ev in available.lines().map(str::trim) {
            if re.matches(ev) && !out.iter().any(|o| o == ev) {
                out.push(ev.to_string());
            }
        }
        if out.len() == before {
            bail!(
                "no kernel event matches '{pat}@kernel' (see {}/available_events)",
                root.display()
            );
        }
    }
    Ok(out)
}

/// `events/<system>/<name>/format` of event `system:name`.
fn format_path(event: &str) -> String {
    let (sys, name) = event.split_once(':').unwrap_or(("", event));
    format!("events/{sys}/{name}/format")
}

impl Session {
    /// Saves the settings, starts the reader and turns tracing on for this process and the
    /// tasks it forks from now on: the function_graph tracer to `depth` when the kernel has
    /// it and lets us use it, else the system call and scheduler events.
    pub fn start(req: &Request) -> anyhow::Result<Session> {
        let root = tracefs()?;
        let tracers = read_file(&root, "available_tracers").unwrap_or_default();
        if tracers.split_whitespace().any(|t| t == "function_graph") {
            match Self::open(&root, Mode::Graph, req) {
                Ok(s) => return Ok(s),
                Err(e) => eprintln!(
                    "utrace: function_graph cannot be used ({e:#}): recording system call events"
                ),
            }
        }
        if req.depth > 1 {
            eprintln!(
                "utrace: without function_graph, -k records system calls only: -K {} shows no deeper kernel functions",
                req.depth
            );
        }
        Self::open(&root, Mode::Events, req)
    }

    fn open(root: &Path, mode: Mode, req: &Request) -> anyhow::Result<Session> {
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
            cpus: 0,
            page_size,
            header_page,
            formats,
            kept: Vec::new(),
        };
        match mode {
            Mode::Graph => s.setup_graph(req.buffer, req.depth)?,
            Mode::Events => {
                s.setup(req.buffer)?;
                s.setup_block(req.buffer);
            }
        }
        s.enable_kept(kept)?;
        // The reader thread starts before the pid lists are written: it is not traced
        // (function-fork and event-fork add only the tasks forked later).
        s.start_reader()?;
        let me = std::process::id().to_string();
        if mode == Mode::Graph {
            write_file(&s.root, "set_ftrace_pid", &me)?;
        }
        write_file(&s.root, "set_event_pid", &me)?;
        write_file(&s.root, "tracing_on", "1")?;
        Ok(s)
    }

    /// Enables the events kept as events for the traced tree; those of [`TASK_EVENTS`] only
    /// when this kernel has them.
    fn enable_kept(&mut self, asked: Vec<String>) -> anyhow::Result<()> {
        let root = self.root.clone();
        let defaults = TASK_EVENTS
            .iter()
            .filter(|_| self.mode == Mode::Events)
            .map(|e| (e.to_string(), false));
        for (ev, required) in defaults.chain(asked.into_iter().map(|e| (e, true))) {
            if self.kept.contains(&ev) {
                continue;
            }
            let format = read_file(&root, &format_path(&ev));
            let added = format.and_then(|f| append_file(&root, "set_event", &ev).map(|()| f));
            match added {
                Ok(text) => {
                    self.formats.push((format_path(&ev), text));
                    self.kept.push(ev);
                }
                Err(e) if required => return Err(e.context(format!("cannot enable {ev}"))),
                Err(_) => {}
            }
        }
        Ok(())
    }

    /// Starts the reader before this process is traced: its reads are not recorded.
    fn start_reader(&mut self) -> anyhow::Result<()> {
        let mut files = Vec::new();
        self.cpus = cpus(&self.root);
        let roots = std::iter::once(self.root.clone()).chain(self.instance.clone());
        for root in roots {
            for cpu in 0..self.cpus {
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
        self.reader = Some(std::thread::spawn(move || read_cpus(files, size, &stop)));
        Ok(())
    }

    /// kernel.md §1.2 and §5.2: the graph of this process's tree to `depth`, on the mono
    /// clock, without the system call dispatcher.
    fn setup_graph(&mut self, buffer: Option<u64>, depth: u32) -> anyhow::Result<()> {
        let root = self.root.clone();
        write_file(&root, "tracing_on", "0")?;
        write_file(&root, "current_tracer", "nop")?;
        if let Some(bytes) = buffer {
            write_file(&root, "buffer_size_kb", &(bytes / 1024).max(4).to_string())?;
        }
        write_file(&root, "trace", "")?;
        write_file(&root, "trace_clock", "mono")?;
        write_file(&root, "max_graph_depth", &depth.to_string())?;
        write_file(&root, "options/function-fork", "1")?;
        write_file(&root, "options/event-fork", "1")?;
        write_file(&root, "set_event", "")?;
        // Names this kernel does not have (or cannot trace) are refused: fine.
        for (list, names) in [
            ("set_ftrace_notrace", NOTRACE),
            ("set_graph_notrace", GRAPH_NOTRACE),
        ] {
            for name in names {
                let _ = append_file(&root, list, name);
            }
        }
        // The tracer cannot change while a reader is open (EBUSY): it goes before the
        // reader starts.
        write_file(&root, "current_tracer", "function_graph")
    }

    fn setup(&mut self, buffer: Option<u64>) -> anyhow::Result<()> {
        let root = self.root.clone();
        write_file(&root, "tracing_on", "0")?;
        if let Some(bytes) = buffer {
            write_file(&root, "buffer_size_kb", &(bytes / 1024).max(4).to_string())?;
        }
        write_file(&root, "set_event", "")?;
        write_file(&root, "set_event_pid", "")?;
        write_file(&root, "trace", "")?;
        write_file(&root, "trace_clock", "mono")?;
        write_file(&root, "options/event-fork", "1")?;
        for ev in EVENTS {
            append_file(&root, "set_event", ev)
                .with_context(|| format!("cannot enable the kernel event {ev}"))?;
        }
        Ok(())
    }

    /// Block requests in an instance of their own (see [`BLOCK_ISSUE`]); none when the
    /// kernel has no block events or no instances.
    fn setup_block(&mut self, buffer: Option<u64>) {
        let path = self
            .root
            .join(format!("instances/utrace-{}", std::process::id()));
        if fs::create_dir(&path).is_err() {
            return;
        }
        self.instance = Some(path.clone());
        let mut formats = Vec::new();
        let ok = (|| -> anyhow::Result<()> {
            write_file(&path, "trace_clock", "mono")?;
            if let Some(bytes) = buffer {
                write_file(&path, "buffer_size_kb", &(bytes / 1024).max(4).to_string())?;
            }
            for ev in [BLOCK_ISSUE, BLOCK_COMPLETE] {
                formats.push((format_path(ev), read_file(&self.root, &format_path(ev))?));
                append_file(&path, "set_event", ev)?;
            }
            Ok(())
        })();
        match ok {
            Ok(()) => {
                self.formats.extend(formats);
                self.kept
                    .extend([BLOCK_ISSUE.to_string(), BLOCK_COMPLETE.to_string()]);
            }
            Err(_) => self.remove_instance(),
        }
    }

    fn remove_instance(&mut self) {
        if let Some(path) = self.instance.take() {
            let _ = write_file(&path, "set_event", "");
            let _ = fs::remove_dir(&path);
        }
    }

    /// Stops the events, collects what the reader read and puts tracefs back as it was; then
    /// writes the kernel files into `dir` for the tasks of the recording (not this process).
    pub fn finish(mut self, dir: &Path) -> anyhow::Result<Stats> {
        let _ = write_file(&self.root, "tracing_on", "0");
        if let Some(path) = &self.instance {
            let _ = write_file(path, "tracing_on", "0");
        }
        self.stop.store(true, Ordering::Relaxed);
        let pages = self
            .reader
            .take()
            .and_then(|r| r.join().ok())
            .unwrap_or_default();
        self.restore();
        self.write(dir, &pages)
    }

    fn restore(&mut self) {
        if let Some(r) = self.reader.take() {
            self.stop.store(true, Ordering::Relaxed);
            let _ = r.join();
        }
        for (name, value) in std::mem::take(&mut self.saved) {
            // Lists take one item per write; an empty value clears them.
            if LISTS.contains(&name) && !value.is_empty() {
                let _ = write_file(&self.root, name, "");
                for ev in value.lines() {
                    if let Ok(mut f) = OpenOptions::new().append(true).open(self.root.join(name)) {
                        let _ = f.write_all(ev.as_bytes());
                    }
                }
                continue;
            }
            let _ = write_file(&self.root, name, &value);
        }
        self.remove_instance();
    }

    /// Writes the kernel files: the function_graph tracer's pages as they are, or the system
    /// call and scheduler events turned into function-graph records, with the events kept.
    fn write(&self, dir: &Path, raw: &[Vec<u8>]) -> anyhow::Result<Stats> {
        if self.mode == Mode::Graph {
            return self.write_graph(dir, raw);
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
        let (main, block) = raw.split_at(self.cpus.min(raw.len()));
        let mut found = Found::default();
        let conv = Converter::new(&formats, &self.kept, &kallsyms)?;
        conv.scan(main, self.page_size, &mut found);
        // Scheduler events name both tasks, traced or not; the traced ones are those whose
        // own system calls were recorded (set_event_pid).
        let tasks: std::collections::HashSet<u32> = found
            .steps
            .iter()
            .filter(|s| matches!(s.3, Step::Enter(_) | Step::Exit))
            .map(|s| s.2)
            .collect();
        found.steps.retain(|s| tasks.contains(&s.2));
        conv.pair_block(block, self.page_size, &tasks, &mut found);
        found.steps.sort_by_key(|e| e.0);
        let writers = conv.graph(&found, self.cpus.max(1), self.page_size);
        let header = self.header();
        let put = |name: &str, bytes: &[u8]| super::write_file(dir, name, bytes);
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
    fn scan(&self, cpus: &[Vec<u8>], page_size: usize, found: &mut Found) {
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
        });
        found.stats.events += stats.events;
        found.stats.lost += stats.lost;
    }

    /// The block requests that `tasks` issued, from the instance's `cpus` pages: the issue
    /// and, paired by device and sector, the completion, rewritten as the issuer's.
    fn pair_block(
        &self,
        cpus: &[Vec<u8>],
        page_size: usize,
        tasks: &std::collections::HashSet<u32>,
        found: &mut Found,
    ) {
        let (Some(issue), Some(complete)) = (self.issue, self.complete) else {
            return;
        };
        let mut all = Vec::new();
        each_event(cpus, page_size, &mut found.stats, |time, cpu, p| {
            all.push((time, cpu, p));
        });
        all.sort_by_key(|e| e.0);
        // Requests in flight: (dev, sector) → (issuer, its CPU).
        let mut issued: HashMap<(u64, u64), (u32, usize)> = HashMap::new();
        for (time, cpu, p) in all {
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
    fn write_graph(&self, dir: &Path, raw: &[Vec<u8>]) -> anyhow::Result<Stats> {
        let mut stats = Stats::default();
        for bytes in raw {
            for page in bytes.chunks(self.page_size) {
                let Ok(page) = Page::parse(page) else { break };
                stats.lost += page.lost.map_or(0, Lost::events);
                stats.events += page.events().map_while(Result::ok).count() as u64;
            }
        }
        let put = |name: &str, bytes: &[u8]| super::write_file(dir, name, bytes);
        put("kernel_header", &self.header().to_bytes())?;
        for (cpu, bytes) in raw.iter().enumerate() {
            put(&format!("kernel-cpu{cpu}.dat"), bytes)?;
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

impl Drop for Session {
    fn drop(&mut self) {
        if !self.saved.is_empty() || self.instance.is_some() {
            let _ = write_file(&self.root, "tracing_on", "0");
            self.restore();
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

/// Reads every CPU's sub-buffers until `stop`, then drains them; returns the pages by CPU.
/// It waits in `poll`, which the kernel ends when a CPU's buffer is `buffer_percent` full,
/// so that pages are read whole rather than while the traced tasks fill them.
fn read_cpus(mut files: Vec<File>, size: usize, stop: &AtomicBool) -> Vec<Vec<u8>> {
    use std::os::fd::AsRawFd;
    let mut out = vec![Vec::new(); files.len()];
    let mut buf = vec![0u8; size];
    let mut drain = |files: &mut [File], out: &mut [Vec<u8>], only: Option<&[libc::pollfd]>| {
        for (cpu, f) in files.iter_mut().enumerate() {
            if only.is_some_and(|p| p[cpu].revents & libc::POLLIN == 0) {
                continue;
            }
            while let Ok(n) = f.read(&mut buf) {
                if n == 0 {
                    break;
                }
                out[cpu].extend_from_slice(&buf[..n]);
                // A short read is a partial sub-buffer: pad it to a whole one.
                let len = out[cpu].len().next_multiple_of(size);
                out[cpu].resize(len, 0);
            }
        }
    };
    let mut fds: Vec<libc::pollfd> = files
        .iter()
        .map(|f| libc::pollfd {
            fd: f.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    while !stop.load(Ordering::Relaxed) {
        // SAFETY: `fds` holds `len` initialized pollfd entries of open files.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, 100) };
        if n > 0 {
            drain(&mut files, &mut out, Some(&fds));
        }
    }
    drain(&mut files, &mut out, None);
    out
}

/// Calls `f` with the time, CPU and payload of each event of the per-CPU ring-buffer `cpus`
/// pages, counting them and the events the kernel lost in `stats`.
fn each_event<'a>(
    cpus: &'a [Vec<u8>],
    page_size: usize,
    stats: &mut Stats,
    mut f: impl FnMut(u64, usize, &'a [u8]),
) {
    for (cpu, bytes) in cpus.iter().enumerate() {
        for page in bytes.chunks(page_size) {
            let Ok(page) = Page::parse(page) else { break };
            stats.lost += page.lost.map_or(0, Lost::events);
            for ev in page.events().map_while(Result::ok) {
                stats.events += 1;
                f(ev.time, cpu, ev.payload);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_read_back() {
        assert_eq!(
            restorable("trace_clock", "[local] global counter mono\n"),
            "local"
        );
        assert_eq!(restorable("tracing_on", "1\n"), "1");
        assert_eq!(restorable("set_event_pid", "\n"), "");
        assert_eq!(restorable("buffer_size_kb", "7 (expanded: 1408)\n"), "1408");
        assert_eq!(restorable("buffer_size_kb", "1410\n"), "1410");
    }

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
