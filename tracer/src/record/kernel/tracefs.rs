//! tracefs: where it is, the settings a session reads, writes and puts back, and the set-up
//! of each mode (the function_graph tracer, or the system call, scheduler and block events).

use anyhow::{bail, Context};
use record_format::pattern::{MatchType, NameMatcher};
use std::fs::{self, File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use super::behalf::{BEHALF_EVENTS, DIRTY_EVENTS};
use super::undo::Undo;
use super::{Mode, Session};

/// Settings written and restored in event mode, relative to tracefs (`tracing_on` last: it
/// is restored last).
pub(super) const SAVED: &[&str] = &[
    "trace_clock",
    "set_event",
    "set_event_pid",
    "options/event-fork",
    "tracing_on",
];

/// Settings written and restored in graph mode (`current_tracer` first: it is restored first,
/// once the readers are closed).
pub(super) const SAVED_GRAPH: &[&str] = &[
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

/// Left out of the graphs (kernel.md §1.6, §5.2): the system call dispatcher, so that depth 0
/// is the `__x64_sys_*` function, and the work around every system call.
pub(super) const NOTRACE: &[&str] = &["do_syscall_64", "x64_sys_call"];
pub(super) const GRAPH_NOTRACE: &[&str] = &[
    "syscall_*",
    "exit_to_user_mode_prepare",
    "sys_clock_gettime",
    "smp_irq_work_interrupt",
];

/// The events recorded in event mode and turned into function-graph records.
pub(super) const EVENTS: &[&str] = &[
    "raw_syscalls:sys_enter",
    "raw_syscalls:sys_exit",
    "sched:sched_switch",
];

/// Recorded in event mode when the kernel has them, and kept as events of the task: page
/// faults (the function_graph tracer shows their handlers).
pub(super) const TASK_EVENTS: &[&str] = &["exceptions:page_fault_user"];

/// Recorded in both modes when the kernel has them, and kept as events of the task: what
/// identifies an I/O request in the task's context (replay's `io` model): the io_uring
/// submissions, punts to its workers and completions (ring, request, user_data), and the
/// libaio system calls with their arguments (the context, the iocb array, the number of
/// events reaped), and the filesystem operations that queue block requests for a file
/// (iomap direct I/O, ext4's fsync and the writing out of a file's dirty pages).
pub(super) const IO_EVENTS: &[&str] = &[
    "io_uring:io_uring_submit_req",
    // Its name before Linux 6.4 (Debian 12's 6.1), with the same `req` and `user_data`.
    "io_uring:io_uring_submit_sqe",
    "io_uring:io_uring_queue_async_work",
    "io_uring:io_uring_complete",
    "syscalls:sys_enter_io_submit",
    "syscalls:sys_enter_io_getevents",
    "syscalls:sys_exit_io_getevents",
    "syscalls:sys_enter_io_pgetevents",
    "syscalls:sys_exit_io_pgetevents",
    "iomap:iomap_dio_rw_begin",
    "iomap:iomap_dio_complete",
    "ext4:ext4_sync_file_enter",
    "ext4:ext4_sync_file_exit",
    "ext4:ext4_writepages",
];

/// What a write into `trace_marker_raw` records (`ftrace:raw_data`): libmcount writes the
/// iocbs of each `io_submit` and the events each `io_getevents` returned there
/// (`record_format::aio`). Kept under this name of its own: uftrace 0.13 takes every
/// `ftrace` event for a function-graph record.
pub(super) const MARKER: &str = "utrace:aio_marker";
const RAW_DATA: &str = "ftrace:raw_data";

/// Block requests (both modes): recorded in a tracefs instance of their own without a pid
/// filter, as completions run in whatever task the interrupt hit; a request issued by a
/// traced task is paired with its completion by device and sector, and both are kept as
/// events of that task.
pub(super) const BLOCK_ISSUE: &str = "block:block_rq_issue";
pub(super) const BLOCK_COMPLETE: &str = "block:block_rq_complete";
/// Also recorded in the block instance when the kernel has them: a bio queued by a traced
/// task, and a request put into the I/O scheduler (before its issue; a request issued
/// directly has none). A request whose bio or insertion was the traced task's is kept as
/// that task's even when it is issued from another context (a kworker unplugging).
pub(super) const BLOCK_BIO_QUEUE: &str = "block:block_bio_queue";
pub(super) const BLOCK_INSERT: &str = "block:block_rq_insert";

/// Where tracefs is mounted, mounting it when it is not.
pub(super) fn root() -> anyhow::Result<PathBuf> {
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
pub(super) fn restorable(name: &str, text: &str) -> String {
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

pub(super) fn write_file(root: &Path, name: &str, value: &str) -> anyhow::Result<()> {
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
pub(super) fn append_file(root: &Path, name: &str, item: &str) -> anyhow::Result<()> {
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
pub(super) fn read_file(root: &Path, name: &str) -> anyhow::Result<String> {
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
pub(super) fn cpus(root: &Path) -> usize {
    (0..)
        .take_while(|n| root.join(format!("per_cpu/cpu{n}")).exists())
        .count()
}

/// The tracepoints (`system:name`) of `available_events` that `-E` patterns name (globs
/// allowed); a pattern that names none is an error.
pub(super) fn expand_events(root: &Path, patterns: &[String]) -> anyhow::Result<Vec<String>> {
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

/// [`MARKER`]'s format as the kernel files give it: `raw_data`'s, renamed, without its
/// flexible `buf[]` field and with a print format of the `id` alone, which uftrace 0.13's
/// event parser reads. The record's
/// bytes after `id` are the marker's (`record_format::aio`).
fn marker_format(text: &str) -> String {
    text.lines()
        .filter(|l| !l.contains("[];"))
        .map(|l| {
            if l.starts_with("print fmt:") {
                "print fmt: \"id=%#x\", REC->id\n".to_string()
            } else if l.starts_with("name:") {
                "name: aio_marker\n".to_string()
            } else {
                format!("{l}\n")
            }
        })
        .collect()
}

/// `events/<system>/<name>/format` of event `system:name`.
pub(super) fn format_path(event: &str) -> String {
    let (sys, name) = event.split_once(':').unwrap_or(("", event));
    format!("events/{sys}/{name}/format")
}

impl Session {
    /// Enables the events kept as events for the traced tree; those of [`TASK_EVENTS`]
    /// (event mode) and [`IO_EVENTS`] only when this kernel has them.
    pub(super) fn enable_kept(&mut self, asked: Vec<String>) -> anyhow::Result<()> {
        let root = self.root.clone();
        let events = match self.mode {
            Mode::Events => TASK_EVENTS,
            Mode::Graph => &[],
        };
        let defaults = events
            .iter()
            .chain(IO_EVENTS)
            .chain(DIRTY_EVENTS)
            .map(|e| (e.to_string(), false));
        self.enable_in(&root, defaults.chain(asked.into_iter().map(|e| (e, true))))?;
        self.keep_markers();
        Ok(())
    }

    /// Keeps libmcount's libaio markers ([`MARKER`]) as events of the task that wrote them,
    /// with their format: ftrace's own events are always recorded, nothing is enabled.
    fn keep_markers(&mut self) {
        if self.kept.iter().any(|k| k == MARKER) {
            return;
        }
        if let Ok(text) = read_file(&self.root, &format_path(RAW_DATA)) {
            self.formats
                .push((format_path(MARKER), marker_format(&text)));
            self.kept.push(MARKER.to_string());
        }
    }

    /// Enables `events` in the tracefs instance `dir` (tracefs itself, or the block one) and
    /// keeps them with their formats, those kept already left out. An event this kernel lacks
    /// or that cannot be enabled is an error when it is required (its flag), else skipped.
    fn enable_in(
        &mut self,
        dir: &Path,
        events: impl IntoIterator<Item = (String, bool)>,
    ) -> anyhow::Result<()> {
        for (ev, required) in events {
            if self.kept.contains(&ev) {
                continue;
            }
            let format = read_file(&self.root, &format_path(&ev));
            let added = format.and_then(|f| append_file(dir, "set_event", &ev).map(|()| f));
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

    /// kernel.md §1.2 and §5.2: the graph of this process's tree to `depth`, on the mono
    /// clock, without the system call dispatcher.
    pub(super) fn setup_graph(&mut self, buffer: Option<u64>, depth: u32) -> anyhow::Result<()> {
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

    pub(super) fn setup(&mut self, buffer: Option<u64>) -> anyhow::Result<()> {
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
    pub(super) fn setup_block(&mut self, buffer: Option<u64>) {
        let path = self
            .root
            .join(format!("instances/utrace-{}", std::process::id()));
        if fs::create_dir(&path).is_err() {
            return;
        }
        self.instance = Some(path.clone());
        let (formats, kept) = (self.formats.len(), self.kept.len());
        let required = [BLOCK_ISSUE, BLOCK_COMPLETE].map(|ev| (ev.to_string(), true));
        let mut ok = (|| -> anyhow::Result<()> {
            write_file(&path, "trace_clock", "mono")?;
            if let Some(bytes) = buffer {
                write_file(&path, "buffer_size_kb", &(bytes / 1024).max(4).to_string())?;
            }
            self.enable_in(&path, required)
        })();
        let optional = [BLOCK_BIO_QUEUE, BLOCK_INSERT].map(|ev| (ev.to_string(), false));
        if ok.is_ok() {
            // (Never an error: the events are optional.)
            ok = self.enable_in(&path, optional);
        }
        if ok.is_err() {
            self.formats.truncate(formats);
            self.kept.truncate(kept);
            self.remove_instance();
        }
    }

    /// Adds to the block instance, when there is one, the writeback events that tell the
    /// requests untraced tasks start for traced ones (see `behalf.rs`), those this kernel has;
    /// some are also kept from the traced tasks' own buffer.
    pub(super) fn setup_behalf(&mut self) {
        let Some(path) = self.instance.clone() else {
            return;
        };
        for ev in BEHALF_EVENTS {
            if append_file(&path, "set_event", ev).is_err() || self.kept.iter().any(|k| k == ev) {
                continue;
            }
            if let Ok(text) = read_file(&self.root, &format_path(ev)) {
                self.formats.push((format_path(ev), text));
                self.kept.push(ev.to_string());
            }
        }
    }

    pub(super) fn remove_instance(&mut self) {
        if let Some(path) = self.instance.take() {
            let _ = write_file(&path, "set_event", "");
            let _ = fs::remove_dir(&path);
        }
    }

    /// Writes back every setting saved, once the reader has stopped (graph mode's tracer
    /// cannot change while a reader is open), and removes the instance.
    pub(super) fn restore(&mut self) {
        let _ = self.stop_reader();
        let undo = Undo {
            spool: Vec::new(),
            ..self.undo()
        };
        self.saved.clear();
        self.instance = None;
        undo.apply();
    }

    /// What undoes this session now.
    pub fn undo(&self) -> Undo {
        Undo {
            root: self.root.clone(),
            saved: self
                .saved
                .iter()
                .map(|(n, v)| (n.to_string(), v.clone()))
                .collect(),
            instance: self.instance.clone(),
            spool: self.spool.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_marker_format_is_renamed_without_its_flexible_buffer() {
        let raw = "name: raw_data\nID: 19\nformat:\n\
                   \tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\
                   \tfield:unsigned int id;\toffset:8;\tsize:4;\tsigned:0;\n\
                   \tfield:char buf[];\toffset:12;\tsize:0;\tsigned:0;\n\n\
                   print fmt: \"id:%04x %08x\", REC->id, (int)REC->buf[0]\n";
        let text = marker_format(raw);
        assert!(text.starts_with("name: aio_marker\nID: 19\n"), "{text}");
        assert!(!text.contains("buf"), "{text}");
        assert!(text.ends_with("print fmt: \"id=%#x\", REC->id\n"), "{text}");
        let f = record_format::kernel::EventFormat::parse("utrace", &text).unwrap();
        assert_eq!((f.name.as_str(), f.id), ("aio_marker", 19));
        assert_eq!(f.field("id").map(|f| f.offset), Some(8));
    }

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
}
