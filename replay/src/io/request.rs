//! The data of the request model: the I/O events a [`Linker`](super::model::Linker) takes,
//! and the [`Request`]s it links them into, with their points and their latency per layer.

use std::rc::Rc;

pub use record_format::aio::{IoEvent, Iocb};

/// The user functions open at a point, outermost first, and the innermost library call.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UserPath {
    /// Names of the open user functions, outermost first.
    pub frames: Vec<String>,
    /// Index in `frames` of the submitting function: the innermost that is not a library
    /// call (PLT); `None` when every frame is one.
    pub function: Option<usize>,
}

impl UserPath {
    /// The submitting user function's name (`-` when unknown).
    pub fn function(&self) -> &str {
        self.function
            .and_then(|i| self.frames.get(i))
            .map_or("-", String::as_str)
    }
}

/// What an event says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum What {
    /// A system call begins (`name` without its `__x64_sys_` prefix) under the user functions
    /// of `path`; `None`: asked of the walk when a request needs it
    /// ([`Linker::push_with`](super::model::Linker::push_with)).
    SyscallEnter {
        name: Rc<str>,
        path: Option<Rc<UserPath>>,
    },
    /// The task's system call returns.
    SyscallExit,
    /// `block_bio_queue`, `block_rq_insert`, `block_rq_issue`, `block_rq_complete`.
    Block { stage: Stage, rq: BlockRq },
    /// `io_uring_submit_req` (`io_uring_submit_sqe` before Linux 6.4).
    UringSubmit { req: u64, user_data: u64 },
    /// `io_uring_queue_async_work`: the request goes to a worker thread.
    UringAsync { req: u64 },
    /// `io_uring_complete`: the CQE is posted; `path` is the user functions open then (the
    /// reaper's when it is posted outside a system call; [`decode`](super::decode) leaves it
    /// empty, [`requests`](super::requests) fills it in).
    UringComplete {
        req: u64,
        res: i64,
        path: Rc<UserPath>,
    },
    /// `sys_enter_io_submit`: iocbs at user address `iocbs` for aio context `ctx`.
    AioSubmit { ctx: u64, iocbs: u64 },
    /// `sys_enter_io_getevents` / `io_pgetevents` of aio context `ctx`.
    AioGetEvents { ctx: u64 },
    /// `sys_exit_io_getevents` / `io_pgetevents`: `ret` events reaped (negative: an error).
    AioGotEvents { ret: i64 },
    /// libmcount's marker after an `io_submit` of `ctx` returned: the iocbs it submitted,
    /// from index `first` of its array (`record_format::aio`).
    AioIocbs {
        ctx: u64,
        first: u64,
        iocbs: Vec<Iocb>,
    },
    /// libmcount's marker after an `io_getevents` / `io_pgetevents` of `ctx` returned: the
    /// events it returned.
    AioReaped { ctx: u64, events: Vec<IoEvent> },
    /// A filesystem event of the task: an operation on a file begins or ends.
    Fs { edge: FsEdge, op: FsOp },
    /// A buffered write dirties `len` bytes at `pos` of inode `ino` (`ext4_da_write_begin`,
    /// `ext4_write_begin`).
    Dirty { ino: u64, pos: u64, len: u64 },
    /// An untraced task begins or ends writing back inode `ino` for this task
    /// (`writeback_single_inode_start`, `writeback_single_inode`, kept by the recorder).
    Writeback { edge: FsEdge, ino: u64 },
    /// The journal thread begins (`jbd2_start_commit`, `jbd2_commit_logging`) or ends
    /// (`jbd2_end_commit`) committing `transaction` of device `dev` while this task waits in
    /// an fsync on it (kept by the recorder).
    Journal {
        edge: FsEdge,
        dev: u32,
        transaction: u64,
    },
}

/// Whether a filesystem event begins or ends its operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FsEdge {
    Begin,
    End,
}

/// The filesystem operations followed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FsKind {
    /// Direct I/O through iomap (`iomap_dio_rw_begin` / `iomap_dio_complete`).
    Dio,
    /// ext4's fsync, also run by an O_SYNC / O_DSYNC write (`ext4_sync_file_enter` / `_exit`).
    Fsync,
    /// ext4 writing a file's dirty pages out (`ext4_writepages`).
    Writepages,
    /// The same in a flusher thread, writing back pages a traced task dirtied.
    Writeback,
    /// The journal thread committing a transaction (its number in [`FsOp::ino`]).
    Journal,
}

impl FsKind {
    pub fn name(self) -> &'static str {
        match self {
            FsKind::Dio => "iomap dio",
            FsKind::Fsync => "ext4 fsync",
            FsKind::Writepages => "ext4 writepages",
            FsKind::Writeback => "writeback",
            FsKind::Journal => "journal commit",
        }
    }
}

/// A filesystem operation on a file: its device and inode, and the byte range when the
/// event gives it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FsOp {
    pub kind: FsKind,
    pub dev: u32,
    pub ino: u64,
    /// (offset, length) in the file.
    pub range: Option<(u64, u64)>,
}

/// The block layer stages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Stage {
    BioQueue,
    Insert,
    Issue,
    Complete,
}

/// What a block record says of a request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BlockRq {
    pub dev: u32,
    pub sector: u64,
    pub nr_sector: u32,
    /// Bytes (`bytes` field; `nr_sector` × 512 when the record has none).
    pub bytes: u64,
    pub rwbs: String,
    /// Completion error (0 when none).
    pub error: i32,
}

/// One I/O event of a traced task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    pub time: u64,
    /// The task it is about (for rewritten block records, the task that started the request).
    pub tid: u32,
    pub what: What,
}

/// The interface the request went through.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Via {
    /// Issued inside `io_submit` (libaio).
    Aio,
    /// Issued for an io_uring submission.
    Uring,
    /// Issued inside another system call, which waits for it (or leaves it to writeback).
    Sync,
    /// Issued by a flusher thread writing back pages a traced call dirtied.
    Writeback,
    /// Issued by the journal thread (jbd2) committing the transaction an fsync waits for.
    Journal,
}

/// The points of a request's path, in the order they happen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Layer {
    /// The system call that submitted it begins.
    Syscall,
    /// io_uring takes the SQE (`io_uring_submit_req`).
    Sqe,
    /// The filesystem operation that queued it begins (`iomap_dio_rw_begin`,
    /// `ext4_sync_file_enter`, `ext4_writepages`).
    Fs,
    /// A bio of it is queued (`block_bio_queue`).
    Bio,
    /// It enters the I/O scheduler (`block_rq_insert`).
    Insert,
    /// It goes to the device driver (`block_rq_issue`).
    Issue,
    /// The device completed it (`block_rq_complete`).
    Complete,
    /// io_uring posts its CQE (`io_uring_complete`).
    Cqe,
    /// The call that reaped it returns.
    Reap,
}

impl Layer {
    pub fn name(self) -> &'static str {
        match self {
            Layer::Syscall => "syscall",
            Layer::Sqe => "sqe",
            Layer::Fs => "fs",
            Layer::Bio => "bio",
            Layer::Insert => "insert",
            Layer::Issue => "issue",
            Layer::Complete => "complete",
            Layer::Cqe => "cqe",
            Layer::Reap => "reap",
        }
    }
}

/// One point of a request's path: the task it happened in (or is about), when, and which.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Point {
    pub tid: u32,
    pub time: u64,
    pub layer: Layer,
}

/// The call that reaped a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reaper {
    pub tid: u32,
    /// When it returned.
    pub time: u64,
    /// The system call.
    pub call: String,
    pub path: Rc<UserPath>,
}

/// One block request and what it is linked to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// The task that started it.
    pub tid: u32,
    pub rq: BlockRq,
    pub via: Via,
    /// The system call that submitted it and the user functions under which it was made.
    pub syscall: Option<String>,
    pub path: Rc<UserPath>,
    /// io_uring: the submission's `user_data` and the CQE's result.
    pub user_data: Option<u64>,
    pub cqe_res: Option<i64>,
    /// aio: the context and the iocb array of the `io_submit`.
    pub aio: Option<(u64, u64)>,
    /// aio, with libmcount's markers: the iocb it was submitted for, then those of the bios
    /// merged into it (in the order they were submitted).
    pub iocbs: Vec<Iocb>,
    /// The filesystem operation it was queued for (the file, and its range when known).
    pub fs: Option<FsOp>,
    pub reaper: Option<Reaper>,
    /// The path's points, in time order.
    pub points: Vec<Point>,
}

impl Request {
    /// The time of the first point of `layer`.
    pub fn at(&self, layer: Layer) -> Option<u64> {
        self.points
            .iter()
            .find(|p| p.layer == layer)
            .map(|p| p.time)
    }

    /// Read, write, flush, discard or other, from `rwbs`.
    pub fn kind(&self) -> &'static str {
        let r = self.rq.rwbs.as_str();
        if r.contains('R') {
            "read"
        } else if r.contains('W') {
            "write"
        } else if r.contains('D') {
            "discard"
        } else if r.contains('F') {
            "flush"
        } else {
            "other"
        }
    }

    /// Latency per layer, in ns: in the submitting call (its entry to the request's
    /// insertion, or issue when it was not inserted), queued in the block layer (insertion to
    /// issue), on the device (issue to completion), waiting to be reaped (completion to the
    /// reaping call's return). A layer whose ends were not both seen is `None`; the layers
    /// seen are consecutive differences of the same points, so they sum to [`total`].
    ///
    /// [`total`]: Request::total
    pub fn layers(&self) -> [Option<u64>; 4] {
        let sys = self.at(Layer::Syscall);
        let ins = self.at(Layer::Insert);
        let iss = self.at(Layer::Issue);
        let com = self.at(Layer::Complete);
        let reap = self.at(Layer::Reap);
        let span = |a: Option<u64>, b: Option<u64>| Some(b?.saturating_sub(a?));
        let queued = span(ins, iss).or(iss.map(|_| 0));
        [
            span(sys, ins.or(iss)),
            queued,
            span(iss, com),
            span(com, reap),
        ]
    }

    /// From the first of the layers' points seen to the last.
    pub fn total(&self) -> u64 {
        self.layers().iter().flatten().sum()
    }
}
