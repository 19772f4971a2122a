//! `TraceDir`: a data directory opened for reading.

use crate::dat::DatFile;
use crate::error::{FormatError, Result};
use crate::file::{self, limit, Mapped};
use crate::info::{feat, Info};
use crate::maps::{parse_maps, MapEntry};
use crate::sym::{parse_sym, SymFile};
use crate::task::{parse_task_txt, TaskLine};
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// One process image: a SESS line and its map file.
#[derive(Debug, Clone)]
pub struct SessionInfo {
    pub sid: String,
    pub pid: u32,
    pub time: u64,
    pub exename: String,
    pub maps: Vec<MapEntry>,
}

/// A data directory: metadata parsed, per-thread data mapped.
#[derive(Debug)]
pub struct TraceDir {
    pub path: PathBuf,
    pub info: Info,
    pub tasks: Vec<TaskLine>,
    pub sessions: Vec<SessionInfo>,
    /// One per TASKINFO tid, in that order.
    pub data: Vec<DatFile>,
    /// Contents of `default.opts`, if any.
    pub default_opts: Option<String>,
    /// Contents of `extern.dat`, if any.
    pub extern_data: Option<String>,
    /// The kernel data of `-k` (feature KERNEL with a readable `kernel_header`).
    pub kernel: Option<KernelData>,
    /// Files left out because they could not be read (see [`TraceDir::take_warnings`]).
    warnings: Mutex<Vec<String>>,
    /// `--with-syms DIR`: `.sym` files are read from there first.
    sym_dir: Option<PathBuf>,
}

/// What `record -k` saved (data-format.md §9).
#[derive(Debug)]
pub struct KernelData {
    pub header: crate::kernel::KernelHeader,
    /// `kernel-cpuN.dat` by CPU number: whole sub-buffers (empty for a file left out).
    pub cpus: Vec<Mapped>,
    /// `kallsyms`.
    pub kallsyms: String,
}

/// One record of a `kernel-cpuN.dat` file: a function-graph entry or exit, or an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GraphRecord {
    pub time: u64,
    /// The task (thread id) it belongs to.
    pub tid: u32,
    pub exit: bool,
    /// Kernel graph depth (0: the system call).
    pub depth: u32,
    /// The kernel function, or the event ID of an event.
    pub func: u64,
    /// An event (a tracepoint other than the function graph's): its index in
    /// [`KernelRecords::events`].
    pub event: Option<u32>,
}

impl GraphRecord {
    /// The record as an ENTRY, EXIT or EVENT of the task's stream, `above` frames deep (the
    /// user functions it runs under); the address kept to the 48 bits records hold.
    pub fn raw(&self, above: u32) -> crate::RawRecord {
        crate::RawRecord {
            time: self.time,
            kind: if self.event.is_some() {
                crate::RecordKind::Event
            } else if self.exit {
                crate::RecordKind::Exit
            } else {
                crate::RecordKind::Entry
            },
            more: false,
            depth: (above + self.depth).min(u32::from(crate::raw::MAX_DEPTH)) as u16,
            addr: self.func & crate::raw::ADDR_MASK,
        }
    }
}

/// A tracepoint record of the kernel files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelEvent {
    /// Its format, in [`KernelRecords::formats`].
    pub format: usize,
    /// The record: common fields, then the event's.
    pub payload: Vec<u8>,
    /// The task it is about when it ran in another one's context (`next_pid` of
    /// `sched_switch`, `pid` of `sched_wakeup`), as uftrace's reader attributes it.
    pub about: Option<u32>,
}

/// Everything the kernel files hold, decoded.
#[derive(Debug, Default)]
pub struct KernelRecords {
    /// By CPU file, in file order.
    pub cpus: Vec<Vec<GraphRecord>>,
    pub events: Vec<KernelEvent>,
    /// The formats of `kernel_header`.
    pub formats: Vec<crate::kernel::EventFormat>,
    /// A message for each file cut short by a broken page or event.
    pub problems: Vec<String>,
}

impl KernelRecords {
    /// `system:name` of event `i`.
    pub fn event_name(&self, i: u32) -> String {
        self.events
            .get(i as usize)
            .and_then(|e| self.formats.get(e.format))
            .map_or_else(String::new, |f| format!("{}:{}", f.system, f.name))
    }

    /// The task record `r` belongs to: its own, or for an event that ran in the context of a
    /// task `traced` does not know, the task the event is about.
    pub fn owner(&self, r: &GraphRecord, traced: impl Fn(u32) -> bool) -> u32 {
        r.event
            .and_then(|i| self.events.get(i as usize)?.about)
            .filter(|_| !traced(r.tid))
            .unwrap_or(r.tid)
    }

    /// The text of event `i` from its print format; `sym` names kernel addresses.
    pub fn event_text(&self, i: u32, sym: &dyn Fn(u64) -> Option<(String, u64)>) -> String {
        let Some(e) = self.events.get(i as usize) else {
            return String::new();
        };
        self.formats
            .get(e.format)
            .map_or_else(String::new, |f| crate::printfmt::render(f, &e.payload, sym))
    }
}

impl KernelData {
    /// The records of each CPU file, in file order.
    pub fn graph_records(&self) -> KernelRecords {
        use crate::kernel::Page;
        let formats = self.header.formats();
        let mut out = KernelRecords {
            cpus: vec![Vec::new(); self.cpus.len()],
            ..KernelRecords::default()
        };
        let find = |name: &str| {
            formats
                .iter()
                .position(|f| f.system == "ftrace" && f.name == name)
        };
        let (entry, exit) = (find("funcgraph_entry"), find("funcgraph_exit"));
        for (cpu, bytes) in self.cpus.iter().enumerate() {
            'pages: for page in bytes.chunks(self.header.page_size.max(1)) {
                let page = match Page::parse(page) {
                    Ok(p) => p,
                    Err(e) => {
                        out.problems.push(format!("kernel-cpu{cpu}.dat: {e}"));
                        break;
                    }
                };
                for ev in page.events() {
                    let ev = match ev {
                        Ok(ev) => ev,
                        Err(e) => {
                            out.problems.push(format!("kernel-cpu{cpu}.dat: {e}"));
                            break 'pages;
                        }
                    };
                    let p = ev.payload;
                    let ty = p.get(..2).map_or(0, |b| u16::from_le_bytes([b[0], b[1]]));
                    let Some(fi) = formats.iter().position(|f| f.id == ty) else {
                        continue;
                    };
                    let fmt = &formats[fi];
                    let tid = fmt.value("common_pid", p).unwrap_or(0) as u32;
                    let graph = Some(fi) == entry || Some(fi) == exit;
                    let event = (!graph).then(|| {
                        let about = ["next_pid", "pid"]
                            .iter()
                            .find_map(|n| fmt.value(n, p))
                            .map(|v| v as u32);
                        out.events.push(KernelEvent {
                            format: fi,
                            payload: p.to_vec(),
                            about,
                        });
                        (out.events.len() - 1) as u32
                    });
                    out.cpus[cpu].push(GraphRecord {
                        time: ev.time,
                        tid,
                        exit: Some(fi) == exit,
                        depth: if graph {
                            fmt.value("depth", p).unwrap_or(0) as u32
                        } else {
                            0
                        },
                        func: if graph {
                            fmt.value("func", p).unwrap_or(0)
                        } else {
                            u64::from(ty)
                        },
                        event,
                    });
                }
            }
        }
        out.formats = formats;
        out
    }

    /// Events the kernel dropped, by the page marks of every CPU file.
    pub fn lost_events(&self) -> u64 {
        use crate::kernel::Page;
        let size = self.header.page_size.max(1);
        self.cpus
            .iter()
            .flat_map(|c| c.chunks(size))
            .filter_map(|p| Page::parse(p).ok()?.lost)
            .map(crate::kernel::Lost::events)
            .sum()
    }

    /// Reads the kernel files of `dir`; `None` when `kernel_header` is missing or broken. A
    /// file that cannot be read is left out with a message to `warn`.
    fn load(dir: &Path, warn: &mut dyn FnMut(String)) -> Option<KernelData> {
        let header = optional(dir, "kernel_header", warn)?;
        let header = crate::kernel::KernelHeader::parse(&header).ok()?;
        // Up to the highest CPU number present: a CPU none of the tasks ran on may have no
        // file (an empty one is never sent over the network), and the files after it count.
        let count = fs::read_dir(dir)
            .map(|entries| {
                entries
                    .filter_map(|e| cpu_file(e.ok()?.file_name().to_str()?, "kernel-cpu"))
                    .map(|cpu| cpu as usize + 1)
                    .max()
                    .unwrap_or(0)
            })
            .unwrap_or(0);
        let mut cpus = Vec::with_capacity(count);
        for cpu in 0..count {
            let path = dir.join(format!("kernel-cpu{cpu}.dat"));
            match file::map_regular(&path) {
                Ok(map) => cpus.push(map),
                Err(e) if e.is_not_found() => cpus.push(Mapped::default()),
                Err(e) => {
                    warn(format!("{e}; leaving it out"));
                    cpus.push(Mapped::default());
                }
            }
        }
        let kallsyms = optional(dir, "kallsyms", warn)
            .map(file::into_text)
            .unwrap_or_default();
        Some(KernelData {
            header,
            cpus,
            kallsyms,
        })
    }
}

/// The CPU of a per-CPU file's name: `{prefix}N.dat` (`kernel-cpu`, `perf-cpu`), N in decimal
/// digits (no sign), at most 4095.
pub fn cpu_file(name: &str, prefix: &str) -> Option<u32> {
    let digits = name.strip_prefix(prefix)?.strip_suffix(".dat")?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok().filter(|&cpu| cpu < 4096)
}

/// The task of a per-thread data file's name: `<tid>.dat`, the tid in decimal digits (no
/// sign), not 0.
pub fn task_file(name: &str) -> Option<u32> {
    let digits = name.strip_suffix(".dat")?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok().filter(|&tid| tid > 0)
}

/// Reads the file `name` of `dir` within its limit ([`file::limit::of`]).
fn read(dir: &Path, name: &str) -> Result<Vec<u8>> {
    file::read_regular(&dir.join(name), limit::of(name))
}

/// Reads the optional file `name` of `dir`: `None` when it does not exist, or (with a message
/// to `warn`) when it cannot be read.
fn optional(dir: &Path, name: &str, warn: &mut dyn FnMut(String)) -> Option<Vec<u8>> {
    match read(dir, name) {
        Ok(b) => Some(b),
        Err(e) if e.is_not_found() => None,
        Err(e) => {
            warn(format!("{e}; ignoring it"));
            None
        }
    }
}

/// `Err(Open)` with the error's source when `e` is a missing file (the directory then holds no
/// data, as uftrace says), else `e`.
fn missing_means_no_data(dir: &Path, e: FormatError) -> FormatError {
    match e {
        FormatError::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound => {
            FormatError::Open {
                path: dir.to_path_buf(),
                source,
            }
        }
        e => e,
    }
}

impl TraceDir {
    /// Opens and validates a data directory.
    pub fn open(dir: &Path) -> Result<TraceDir> {
        TraceDir::open_as(dir, None)
    }

    /// Opens a data directory that is still being recorded into, for its sessions, tasks and
    /// symbols: `tids` are the threads to know of (`info` does not list them yet); their data
    /// files are not read, nor the kernel's.
    pub fn open_recording(dir: &Path, tids: &[u32]) -> Result<TraceDir> {
        TraceDir::open_as(dir, Some(tids))
    }

    fn open_as(dir: &Path, recording: Option<&[u32]>) -> Result<TraceDir> {
        let meta = fs::metadata(dir).map_err(|source| FormatError::Open {
            path: dir.to_path_buf(),
            source,
        })?;
        if !meta.is_dir() {
            return Err(FormatError::Open {
                path: dir.to_path_buf(),
                source: std::io::Error::from_raw_os_error(libc_enotdir()),
            });
        }
        let info_path = dir.join("info");
        let bytes = match read(dir, "info") {
            Ok(b) => b,
            Err(e) if e.is_not_found() => {
                return Err(FormatError::NoData {
                    path: dir.to_path_buf(),
                    warnings: Vec::new(),
                })
            }
            Err(e) => return Err(e),
        };
        let mut info = Info::parse(&bytes, &info_path)?;
        if let Some(tids) = recording {
            info.tids = tids.to_vec();
        }
        if dir.join("task").exists() {
            return Err(FormatError::invalid(
                dir.join("task"),
                "legacy binary task file is not supported",
            ));
        }
        let task_path = dir.join("task.txt");
        let tasks = if info.has_feature(feat::TASK_SESSION) {
            // uftrace treats a directory without task.txt as holding no data.
            let text = read(dir, "task.txt").map_err(|e| missing_means_no_data(dir, e))?;
            parse_task_txt(&String::from_utf8_lossy(&text), &task_path)?
        } else {
            Vec::new()
        };
        let mut sessions = Vec::new();
        for t in &tasks {
            if let TaskLine::Sess {
                time,
                pid,
                sid,
                exename,
            } = t
            {
                if sessions.iter().any(|s: &SessionInfo| &s.sid == sid) {
                    continue;
                }
                if sid.contains('/') || sid.contains("..") {
                    return Err(FormatError::invalid(
                        &task_path,
                        format!("bad session id '{}'", crate::error::clip(sid)),
                    ));
                }
                let text = read(dir, &format!("sid-{sid}.map"))?;
                sessions.push(SessionInfo {
                    sid: sid.clone(),
                    pid: *pid,
                    time: *time,
                    exename: exename.clone(),
                    maps: parse_maps(&String::from_utf8_lossy(&text)),
                });
            }
        }
        let mut warnings = Vec::new();
        let mut warn = |msg: String| warnings.push(msg);
        let mut data = Vec::with_capacity(info.tids.len());
        for &tid in &info.tids {
            let path = dir.join(format!("{tid}.dat"));
            if recording.is_some() {
                data.push(DatFile::empty(&path, tid));
                continue;
            }
            // uftrace warns about a thread it cannot read and replays the others.
            data.push(DatFile::open(&path, tid).unwrap_or_else(|e| {
                warn(format!("{e}; leaving its thread out"));
                DatFile::empty(&path, tid)
            }));
        }
        if recording.is_none()
            && data.iter().all(DatFile::is_empty)
            && !info.has_feature(feat::KERNEL)
        {
            return Err(FormatError::NoData {
                path: dir.to_path_buf(),
                warnings,
            });
        }
        let mut text = |name: &str| optional(dir, name, &mut warn).map(file::into_text);
        let default_opts = text("default.opts").filter(|s| !s.trim().is_empty());
        let extern_data = text("extern.dat");
        let kernel = if info.has_feature(feat::KERNEL) && recording.is_none() {
            KernelData::load(dir, &mut warn)
        } else {
            None
        };
        Ok(TraceDir {
            path: dir.to_path_buf(),
            default_opts,
            extern_data,
            kernel,
            info,
            tasks,
            sessions,
            data,
            warnings: Mutex::new(warnings),
            sym_dir: None,
        })
    }

    /// Reads `<name>.sym` from the directory, if present; one that cannot be read is left out
    /// with a warning.
    pub fn read_sym(&self, file_name: &str) -> Option<SymFile> {
        if let Some(dir) = &self.sym_dir {
            if let Some(bytes) = optional(dir, file_name, &mut |msg| self.warn(msg)) {
                return Some(parse_sym(&file::into_text(bytes)));
            }
        }
        let text = self.read_text(file_name)?;
        Some(parse_sym(&text))
    }

    /// `--with-syms DIR`: read the `.sym` files from `dir` first (those of a recording of the
    /// program before it was stripped, say), then from the data directory.
    pub fn set_sym_dir(&mut self, dir: PathBuf) {
        self.sym_dir = Some(dir);
    }

    /// Reads an optional text file of the directory (within the limit of its kind); one that
    /// cannot be read is left out with a warning.
    pub fn read_text(&self, name: &str) -> Option<String> {
        let bytes = optional(&self.path, name, &mut |msg| self.warn(msg))?;
        Some(file::into_text(bytes))
    }

    /// Adds a warning (once) about a file of the directory that was left out.
    pub fn warn(&self, msg: String) {
        let mut w = self.warnings.lock().unwrap_or_else(|e| e.into_inner());
        if !w.contains(&msg) {
            w.push(msg);
        }
    }

    /// The warnings about files left out since the last call: unreadable threads, symbol and
    /// debug files, optional files. The caller prints them.
    pub fn take_warnings(&self) -> Vec<String> {
        std::mem::take(&mut *self.warnings.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// Default argument size in bytes (long) for this data.
    pub fn long_size(&self) -> usize {
        if self.info.header.elf_class == 1 {
            4
        } else {
            8
        }
    }
}

const fn libc_enotdir() -> i32 {
    20
}

#[cfg(test)]
mod tests {
    use super::cpu_file;

    fn kernel_file_cpu(name: &str) -> Option<u32> {
        cpu_file(name, "kernel-cpu")
    }

    #[test]
    fn kernel_file_names() {
        assert_eq!(kernel_file_cpu("kernel-cpu0.dat"), Some(0));
        assert_eq!(kernel_file_cpu("kernel-cpu13.dat"), Some(13));
        for other in [
            "kernel-cpu.dat",
            "kernel-cpu+1.dat",
            "kernel-cpu1.dat.new",
            "kernel-cpu1.raw",
            "kernel-block-cpu1.dat",
            "perf-cpu1.dat",
            "kernel-cpu99999.dat",
        ] {
            assert_eq!(kernel_file_cpu(other), None, "{other}");
        }
    }
}
