//! The uftrace-compatible data directory, read and written.
//!
//! This crate is the only code shared by the runtime (libmcount), the recorder and the analysis
//! commands. Data flow on the reading side: [`TraceDir::open`] parses `info`, `task.txt` and the
//! session maps, and maps every `<tid>.dat`; the analysis engine then walks records in place with
//! [`dat::read_header`], sizing payloads through [`argspec`]. Every file of the directory is
//! opened through [`file`](mod@file): regular files only (a FIFO or a symlink to `/dev/zero` is
//! refused without blocking), each kind read within its limit, record files mapped.
//!
//! The models the three programs share, each written once: [`elf`] (load bias, PLT slots, symbol
//! selection, used by libmcount to hook, by the recorder to write `.sym` files and by the
//! analysis to read binaries without them), [`libcall`] (the exec/fork/setjmp/longjmp family the
//! runtime hooks specially and the analysis fixes the stack up for), [`argbind`] (which `-A`/`-R`
//! specs a function's payloads hold), [`env`](mod@env) (the recorder-runtime environment contract) and
//! [`ring`] (the per-thread staging rings). On the writing side [`create`] makes every file of a
//! directory safely and [`writer::TraceWriter`] writes a whole directory (crafted tests, imports).
//!
//! | file | module | layout |
//! |---|---|---|
//! | `info` | [`info`] | 40-byte header (`Ftrace!\0`, version 4, endian, class, feat, info mask, max stack) + `key:value` sections in bit order |
//! | `<tid>.dat` | [`raw`], [`dat`] | 16-byte records: u64 time, u64 `type:2 more:1 magic:3=5 depth:10 addr:48`, payload if `more` |
//! | `task.txt` | [`task`] | `SESS`/`TASK`/`FORK`/`DLOP` lines, timestamps `SEC.NSEC9` |
//! | `sid-<SID>.map` | [`maps`] | `/proc/self/maps` lines of the modules and `[stack]` |
//! | `<module>.sym` | [`sym`], [`elf`] | `%016x TYPE NAME`, implicit sizes closed by `?` lines |
//! | `perf-cpu<N>.dat` | [`perf`] | the kernel's perf records (COMM, FORK, EXIT, SWITCH) with a TID/TIME trailer |
//!
//! Compatibility rule: utrace writes what uftrace 0.13 reads (v4 `.sym`, no `SYM_SIZE`) and reads
//! what 0.13 and 0.19 write.

pub mod agent;
pub mod aio;
pub mod argbind;
pub mod argspec;
pub mod autoargs;
pub mod create;
pub mod dat;
pub mod dbg;
pub mod demangle;
pub mod dir;
pub mod elf;
pub mod env;
pub mod error;
pub mod file;
pub mod flight;
pub mod info;
pub mod kernel;
pub mod libcall;
pub mod location;
pub mod maps;
pub mod pattern;
pub mod perf;
pub mod printfmt;
pub mod raw;
pub mod ring;
pub mod sdt;
pub mod sym;
pub mod task;
pub mod timeval;
pub mod trigger;
pub mod writer;

pub use dir::{SessionInfo, TraceDir};
pub use error::{FormatError, Result};
pub use info::Info;
pub use raw::{RawRecord, RecordKind};
pub use writer::TraceWriter;

/// Event ids with built-in names and payload sizes (data-format §3.6).
pub mod event {
    /// `-W cpu`: the CPU the task runs on changed (payload: i32 cpu).
    pub const WATCH_CPU: u64 = 100011;
    /// Payload length of [`WATCH_CPU`].
    pub const WATCH_CPU_LEN: usize = 4;
    /// The first id of user SDT events (`-E`), numbered in `events.txt` order.
    pub const SDT_FIRST: u64 = 1_000_000;

    /// Name and expected payload length of a built-in user event id.
    pub fn builtin(id: u64) -> Option<(&'static str, usize)> {
        Some(match id {
            100001 => ("read:proc/statm", 24),
            100002 => ("read:page-fault", 16),
            100003 => ("diff:proc/statm", 24),
            100004 => ("diff:page-fault", 16),
            100005 => ("read:pmu-cycle", 16),
            100006 => ("diff:pmu-cycle", 16),
            100007 => ("read:pmu-cache", 16),
            100008 => ("diff:pmu-cache", 16),
            100009 => ("read:pmu-branch", 16),
            100010 => ("diff:pmu-branch", 16),
            WATCH_CPU => ("watch:cpu", WATCH_CPU_LEN),
            100012 => ("watch:var", 0),
            200001 => ("linux:sched-in", 0),
            200002 => ("linux:sched-out", 0),
            200003 => ("linux:schedule", 0),
            200004 => ("linux:task-new", 0),
            200005 => ("linux:task-exit", 0),
            200006 => ("linux:task-name", 0),
            200007 => ("linux:sched-out (pre-empted)", 0),
            200008 => ("linux:schedule (pre-empted)", 0),
            _ => return None,
        })
    }

    /// A `read=` counter event (ids 100001..=100010): whether it is a `read:` one (else a
    /// `diff:`, holding differences), the names of its values and their unit.
    pub fn counter(id: u64) -> Option<(bool, &'static [&'static str], &'static str)> {
        let is_read = matches!(id, 100001 | 100002 | 100005 | 100007 | 100009);
        let (fields, unit): (&'static [&'static str], &'static str) = match id {
            100001 | 100003 => (&["vmsize", "vmrss", "shared"], "KB"),
            100002 | 100004 => (&["major", "minor"], ""),
            100005 | 100006 => (&["cycles", "instructions"], ""),
            100007 | 100008 => (&["refers", "misses"], ""),
            100009 | 100010 => (&["branch", "misses"], ""),
            _ => return None,
        };
        Some((is_read, fields, unit))
    }
}
