//! I/O requests followed through every layer (`report --io`), from what `record -k` kept.
//!
//! ```text
//! TraceDir ──▶ walk::core::Core (time order, per-task stacks) ──▶ events() ──▶ model::Linker ──▶ Vec<Request>
//!              kernel syscall frames → SyscallEnter/Exit (+ the user functions open)
//!              kernel events: block_*, io_uring_*, sys_*_io_*getevents/io_submit,
//!                             utrace:aio_marker (libmcount's iocbs and io_events),
//!                             iomap_dio_*, ext4_sync_file_*, ext4_writepages,
//!                             ext4_*write_begin, writeback_single_inode*, jbd2_*commit* → What
//! ```
//!
//! [`requests`] walks the data directory once and links the events into [`Request`]s (see
//! [`model`] for the rules, [`request`] for the data). Each request carries its path as [`Point`]s (task, time, layer)
//! in time order: [`Request::points`] is what a flow-drawing output (Perfetto flows) needs.

pub mod model;
pub mod request;

#[cfg(test)]
mod aio_tests;
#[cfg(test)]
mod model_tests;
#[cfg(test)]
mod writeback_tests;

pub use model::Linker;
pub use request::{
    BlockRq, Event, FsEdge, FsKind, FsOp, IoEvent, Iocb, Layer, Point, Reaper, Request, Stage,
    UserPath, Via, What,
};

use crate::config::Config;
use crate::filter::Pattern;
use crate::walk::core::{Core, Step};
use crate::walk::policy::Policy;
use crate::Result;
use record_format::aio::Marker;
use record_format::kernel::EventFormat;
use record_format::TraceDir;
use std::rc::Rc;

/// The I/O requests of `dir`, in the order they started, and the warnings of the walk. Only
/// the tasks `cfg` selects (`--tid`) are looked at; function filters do not apply here (see
/// [`select`]).
pub fn requests(dir: &TraceDir, cfg: &Config) -> Result<(Vec<Request>, Vec<String>)> {
    let mut core = Core::new(dir, cfg, Policy::TASK_REPORT);
    let mut linker = Linker::new();
    // Per function id, once looked at: the system call it is the body of.
    let mut syscalls: Vec<Option<Option<Rc<str>>>> = Vec::new();
    while let Some(step) = core.next_step() {
        let (task, head, enter) = match step {
            Step::Entry(e) => (e.task, e.head, Some(true)),
            Step::Exit(x) => (x.task, x.head, Some(false)),
            Step::Event { task, head } => (task, head, None),
            _ => continue,
        };
        let tid = core.merge.tid(task);
        let time = head.raw.time;
        let what = match enter {
            Some(enter) => {
                let f = head.func as usize;
                if syscalls.len() <= f {
                    syscalls.resize(f + 1, None);
                }
                let name = syscalls[f].get_or_insert_with(|| {
                    let info = core.merge.sym.func(head.func);
                    syscall_name(&info.module, &info.name).map(Rc::from)
                });
                let Some(name) = name else {
                    continue;
                };
                match enter {
                    // The user functions are looked up only when a request needs them.
                    true => What::SyscallEnter {
                        name: name.clone(),
                        path: None,
                    },
                    false => What::SyscallExit,
                }
            }
            None => {
                let Some(i) = head.kernel_event else {
                    continue;
                };
                let Some((format, p)) = core.merge.kernel_event(i) else {
                    continue;
                };
                match decode(format, p) {
                    Some(What::UringComplete { req, res, .. }) => What::UringComplete {
                        req,
                        res,
                        path: Rc::new(user_path(&core, task)),
                    },
                    Some(what) => what,
                    None => continue,
                }
            }
        };
        linker.push_with(Event { time, tid, what }, &mut || user_path(&core, task));
    }
    let warnings = std::mem::take(&mut core.merge.warnings);
    Ok((linker.finish(), warnings))
}

/// The requests `cfg`'s `-F`/`-N` select by their submitting user functions (all of them
/// without either): with `-F`, those submitted under a function a `-F` pattern names; with
/// `-N`, not those submitted under a function a `-N` pattern names. Library calls (the
/// `io_submit` of `main > submit_reads > io_submit`) count as functions here.
pub fn select(reqs: Vec<Request>, cfg: &Config) -> Vec<Request> {
    if cfg.filters.is_empty() && cfg.notrace.is_empty() {
        return reqs;
    }
    let parse = |l: &[String]| -> Vec<Pattern> {
        l.iter()
            .map(|p| Pattern::parse(p, cfg.match_type))
            .collect()
    };
    let (wanted, unwanted) = (parse(&cfg.filters), parse(&cfg.notrace));
    let under = |r: &Request, pats: &[Pattern]| {
        r.path
            .frames
            .iter()
            .any(|f| pats.iter().any(|p| p.matches_name(f)))
    };
    reqs.into_iter()
        .filter(|r| wanted.is_empty() || under(r, &wanted))
        .filter(|r| !under(r, &unwanted))
        .collect()
}

/// The path of each I/O request of `dir`, for flows between tracks (Perfetto): one list per
/// request, in the order the requests started, of its points (task, time, layer) in time
/// order. The index of a request in the answer is a stable flow id within one data
/// directory.
pub fn flows(dir: &TraceDir, cfg: &Config) -> Result<Vec<Vec<Point>>> {
    let (reqs, _) = requests(dir, cfg)?;
    Ok(reqs.into_iter().map(|r| r.points).collect())
}

/// The system call a kernel function is the body of (`__x64_sys_io_submit` → `io_submit`).
fn syscall_name<'n>(module: &str, name: &'n str) -> Option<&'n str> {
    if module != "[kernel]" {
        return None;
    }
    kernel_syscall_name(name)
}

/// The system call a function of the kernel is the body of, by its name.
pub fn kernel_syscall_name(name: &str) -> Option<&str> {
    [
        "__x64_sys_",
        "__ia32_sys_",
        "__se_sys_",
        "__do_sys_",
        "sys_",
    ]
    .iter()
    .find_map(|p| name.strip_prefix(p))
}

/// The user functions open in `task` now (kernel frames left out).
fn user_path(core: &Core<'_>, task: usize) -> UserPath {
    let mut path = UserPath::default();
    for frame in core.tasks[task].stack.open() {
        let Some(id) = frame.func else {
            continue;
        };
        let info = core.merge.sym.func(id);
        if info.module == "[kernel]" {
            continue;
        }
        if !info.is_plt {
            path.function = Some(path.frames.len());
        }
        path.frames.push(info.name.clone());
    }
    path
}

/// The fixed-size string field `name` of record `p` (up to its NUL).
fn text(format: &EventFormat, name: &str, p: &[u8]) -> String {
    let Some(f) = format.field(name) else {
        return String::new();
    };
    let bytes = p.get(f.offset..f.offset + f.size).unwrap_or(&[]);
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    String::from_utf8_lossy(&bytes[..end]).into_owned()
}

/// What kernel record `p` (of `format`) says for the request model; `None` for other events.
pub fn decode(format: &EventFormat, p: &[u8]) -> Option<What> {
    let v = |name: &str| format.value(name, p);
    let stage = match (format.system.as_str(), format.name.as_str()) {
        ("block", "block_bio_queue") => Some(Stage::BioQueue),
        ("block", "block_rq_insert") => Some(Stage::Insert),
        ("block", "block_rq_issue") => Some(Stage::Issue),
        ("block", "block_rq_complete") => Some(Stage::Complete),
        _ => None,
    };
    if let Some(stage) = stage {
        let nr_sector = v("nr_sector").unwrap_or(0) as u32;
        return Some(What::Block {
            stage,
            rq: BlockRq {
                dev: v("dev")? as u32,
                sector: v("sector")?,
                nr_sector,
                bytes: v("bytes").unwrap_or(u64::from(nr_sector) * 512),
                rwbs: text(format, "rwbs", p),
                error: v("error").unwrap_or(0) as i32,
            },
        });
    }
    if let Some(fs) = decode_fs(format, p) {
        return Some(fs);
    }
    Some(match (format.system.as_str(), format.name.as_str()) {
        // libmcount's libaio markers (`ftrace:raw_data` records): the write from `id` on.
        ("utrace", "aio_marker") => {
            let at = format.field("id")?.offset;
            match record_format::aio::decode(p.get(at..)?)? {
                Marker::Submit { ctx, first, iocbs } => What::AioIocbs { ctx, first, iocbs },
                Marker::Reaped { ctx, events, .. } => What::AioReaped { ctx, events },
            }
        }
        // `io_uring_submit_sqe` before Linux 6.4.
        ("io_uring", "io_uring_submit_req" | "io_uring_submit_sqe") => What::UringSubmit {
            req: v("req")?,
            user_data: v("user_data")?,
        },
        ("io_uring", "io_uring_queue_async_work") => What::UringAsync { req: v("req")? },
        ("io_uring", "io_uring_complete") => What::UringComplete {
            req: v("req")?,
            res: v("res").unwrap_or(0) as i64,
            path: Rc::default(),
        },
        ("syscalls", "sys_enter_io_submit") => What::AioSubmit {
            ctx: v("ctx_id")?,
            iocbs: v("iocbpp").unwrap_or(0),
        },
        ("syscalls", "sys_enter_io_getevents" | "sys_enter_io_pgetevents") => {
            What::AioGetEvents { ctx: v("ctx_id")? }
        }
        ("syscalls", "sys_exit_io_getevents" | "sys_exit_io_pgetevents") => What::AioGotEvents {
            ret: v("ret")? as i64,
        },
        ("ext4", "ext4_da_write_begin" | "ext4_write_begin") => What::Dirty {
            ino: v("ino")?,
            pos: v("pos")?,
            len: v("len")?,
        },
        ("writeback", "writeback_single_inode_start") => What::Writeback {
            edge: FsEdge::Begin,
            ino: v("ino")?,
        },
        ("jbd2", "jbd2_start_commit" | "jbd2_commit_logging" | "jbd2_end_commit") => {
            What::Journal {
                edge: match format.name.as_str() {
                    "jbd2_end_commit" => FsEdge::End,
                    _ => FsEdge::Begin,
                },
                dev: v("dev")? as u32,
                transaction: v("transaction")?,
            }
        }
        ("writeback", "writeback_single_inode") => What::Writeback {
            edge: FsEdge::End,
            ino: v("ino")?,
        },
        _ => return None,
    })
}

/// The filesystem events of the request model (`iomap_dio_*`, `ext4_sync_file_*`,
/// `ext4_writepages`); `None` for other events.
fn decode_fs(format: &EventFormat, p: &[u8]) -> Option<What> {
    let v = |name: &str| format.value(name, p);
    let (edge, kind) = match (format.system.as_str(), format.name.as_str()) {
        ("iomap", "iomap_dio_rw_begin") => (FsEdge::Begin, FsKind::Dio),
        ("iomap", "iomap_dio_complete") => (FsEdge::End, FsKind::Dio),
        ("ext4", "ext4_sync_file_enter") => (FsEdge::Begin, FsKind::Fsync),
        ("ext4", "ext4_sync_file_exit") => (FsEdge::End, FsKind::Fsync),
        ("ext4", "ext4_writepages") => (FsEdge::Begin, FsKind::Writepages),
        _ => return None,
    };
    let range = match (edge, kind) {
        (FsEdge::Begin, FsKind::Dio) => Some((v("pos")?, v("count")?)),
        (FsEdge::Begin, FsKind::Writepages) => {
            let (start, end) = (v("range_start")?, v("range_end")?);
            // `range_end` is LLONG_MAX for the whole file.
            (end < i64::MAX as u64 && end >= start).then(|| (start, end - start + 1))
        }
        _ => None,
    };
    let op = FsOp {
        kind,
        dev: v("dev")? as u32,
        ino: v("ino")?,
        range,
    };
    Some(What::Fs { edge, op })
}
