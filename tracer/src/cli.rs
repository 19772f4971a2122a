//! The option table (cli.md §1.1, §1.3): one set of options shared by every subcommand, in
//! clap `#[command(flatten)]` groups; options that do not apply to a subcommand are ignored by
//! it, as uftrace does. How argv is split into options, subcommand and program is
//! [`crate::invocation`]'s job; turning the values into `replay::Config` is [`crate::config`]'s.

use clap::{ArgAction, Args, Parser};
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

/// The subcommands, in the order the banner lists them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Subcommand {
    Record,
    Replay,
    Report,
    Live,
    Info,
    Dump,
    Recv,
    Graph,
    Script,
    Tui,
}

impl Subcommand {
    pub const ALL: [Subcommand; 10] = [
        Subcommand::Record,
        Subcommand::Replay,
        Subcommand::Report,
        Subcommand::Live,
        Subcommand::Info,
        Subcommand::Dump,
        Subcommand::Recv,
        Subcommand::Graph,
        Subcommand::Script,
        Subcommand::Tui,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Subcommand::Record => "record",
            Subcommand::Replay => "replay",
            Subcommand::Report => "report",
            Subcommand::Live => "live",
            Subcommand::Info => "info",
            Subcommand::Dump => "dump",
            Subcommand::Recv => "recv",
            Subcommand::Graph => "graph",
            Subcommand::Script => "script",
            Subcommand::Tui => "tui",
        }
    }

    pub fn from_word(word: &OsStr) -> Option<Subcommand> {
        Subcommand::ALL
            .into_iter()
            .find(|s| s.name().as_bytes() == word.as_bytes())
    }
}

/// Every option utrace knows, whatever the subcommand; options that do not apply to a
/// subcommand are ignored by it (as uftrace does).
#[derive(Debug, Clone, Parser)]
#[command(
    name = "utrace",
    disable_help_flag = true,
    disable_version_flag = true,
    args_override_self = true,
    infer_long_args = true
)]
pub struct Cli {
    #[command(flatten)]
    pub common: CommonArgs,
    #[command(flatten)]
    pub data: DataArgs,
    #[command(flatten)]
    pub filter: FilterArgs,
    #[command(flatten)]
    pub replay: ReplayArgs,
    #[command(flatten)]
    pub analysis: AnalysisArgs,
    #[command(flatten)]
    pub record: RecordArgs,
    /// The first non-option word and everything after it.
    #[arg(trailing_var_arg = true, value_name = "PROGRAM", hide = true)]
    pub rest: Vec<OsString>,
}

/// Options of every subcommand: help, messages, pager, colors, name matching.
#[derive(Debug, Clone, Args)]
pub struct CommonArgs {
    /// Print this help and exit
    #[arg(short = 'h', long)]
    pub help: bool,
    /// Print the short usage banner and exit
    #[arg(long)]
    pub usage: bool,
    /// Print the version and supported features and exit
    #[arg(short = 'V', long)]
    pub version: bool,
    /// Print debug messages (repeat for more)
    #[arg(short = 'v', long, action = ArgAction::Count)]
    pub verbose: u8,
    /// Same as -v
    #[arg(long, action = ArgAction::Count)]
    pub debug: u8,
    /// Debug messages of selected domains only
    #[arg(long, value_name = "DOMAIN")]
    pub debug_domain: Option<String>,
    /// Write warnings and debug messages to FILE
    #[arg(long, value_name = "FILE")]
    pub logfile: Option<String>,
    /// Read more options from FILE
    #[arg(long, value_name = "FILE")]
    pub opt_file: Option<String>,
    /// Never send the output through a pager
    #[arg(long)]
    pub no_pager: bool,
    /// Colored output: auto, yes or no (default: auto)
    #[arg(long, value_name = "SET")]
    pub color: Option<String>,
    /// C++ names: full, simple or no (default: simple)
    #[arg(long, value_name = "TYPE")]
    pub demangle: Option<String>,
    /// Pattern syntax: regex or glob (default: regex)
    #[arg(long = "match", value_name = "TYPE")]
    pub match_type: Option<String>,
    /// Output format: normal or html (default: normal)
    #[arg(hide = true, long, value_name = "FORMAT")]
    pub format: Option<String>,
    /// Directory holding the runtime library
    #[arg(long, value_name = "PATH")]
    pub libmcount_path: Option<PathBuf>,
}

/// Where the trace data lives.
#[derive(Debug, Clone, Args)]
pub struct DataArgs {
    /// Data directory (default: uftrace.data)
    #[arg(short = 'd', long = "data", value_name = "DIR")]
    pub data: Option<PathBuf>,
}

/// The data directory name used when `-d` is not given.
pub const DEFAULT_DATA_DIR: &str = "uftrace.data";

impl DataArgs {
    /// The directory `record` writes: `-d DIR` (one trailing `/` removed) or `uftrace.data`.
    pub fn record_dir(&self) -> PathBuf {
        match &self.data {
            Some(dir) => strip_one_slash(dir),
            None => PathBuf::from(DEFAULT_DATA_DIR),
        }
    }

    /// The directory analysis commands read: like [`DataArgs::record_dir`], except that without
    /// `-d` the current directory is used when it holds an `info` file (so `utrace replay`
    /// works inside `uftrace.data/`).
    pub fn analysis_dir(&self) -> PathBuf {
        if self.data.is_none() && std::path::Path::new("info").exists() {
            return PathBuf::from(".");
        }
        self.record_dir()
    }
}

fn strip_one_slash(dir: &std::path::Path) -> PathBuf {
    let bytes = dir.as_os_str().as_bytes();
    match bytes.strip_suffix(b"/") {
        Some(stripped) if !stripped.is_empty() => PathBuf::from(OsStr::from_bytes(stripped)),
        _ => dir.to_path_buf(),
    }
}

/// Which functions, tasks and times are shown (record and analysis alike).
#[derive(Debug, Clone, Args)]
pub struct FilterArgs {
    /// Only show FUNC and the functions it calls
    #[arg(short = 'F', long, value_name = "FUNC")]
    pub filter: Vec<String>,
    /// Do not show FUNC nor anything it calls
    #[arg(short = 'N', long, value_name = "FUNC")]
    pub notrace: Vec<String>,
    /// Do not show FUNC but show what it calls
    #[arg(short = 'H', long, value_name = "FUNC")]
    pub hide: Vec<String>,
    /// Only show the call paths leading to FUNC
    #[arg(short = 'C', long = "caller-filter", value_name = "FUNC")]
    pub caller: Vec<String>,
    /// Act on FUNC: FUNC@depth=N,time=T,backtrace,trace_on,...; record --flight-recorder:
    /// FUNC@dump (at its entry), FUNC@time=T,dump (after a call of at least T)
    #[arg(short = 'T', long, value_name = "FUNC@ACT")]
    pub trigger: Vec<String>,
    /// Show arguments of FUNC: FUNC@arg1,arg2/s,...
    #[arg(short = 'A', long, value_name = "FUNC@ARG")]
    pub argument: Vec<String>,
    /// Show the return value of FUNC: FUNC@retval[/FMT]
    #[arg(short = 'R', long, value_name = "FUNC@RET")]
    pub retval: Vec<String>,
    /// Show arguments and return values of known functions
    #[arg(short = 'a', long)]
    pub auto_args: bool,
    /// Show at most DEPTH nested calls
    // A hyphen value is the option's value, as getopt takes it: `-D -1` is an invalid depth
    // (ignored with a notice by `config::parse_depth`, as uftrace does), not an option `-1`.
    #[arg(short = 'D', long, value_name = "DEPTH", allow_hyphen_values = true)]
    pub depth: Option<String>,
    /// Hide functions that ran for less than TIME
    #[arg(short = 't', long, value_name = "TIME")]
    pub time_filter: Option<String>,
    /// Only show records between START and STOP
    #[arg(short = 'r', long, value_name = "START~STOP")]
    pub time_range: Option<String>,
    /// Only show these threads
    #[arg(long, value_name = "TID[,TID...]")]
    pub tid: Vec<String>,
    /// Only show functions whose code is at least SIZE bytes
    #[arg(short = 'Z', long, value_name = "SIZE")]
    pub size_filter: Option<String>,
    /// Only show functions from source location LOC
    #[arg(hide = true, short = 'L', long, value_name = "LOC")]
    pub loc_filter: Vec<String>,
    /// Do not show library calls
    #[arg(long)]
    pub no_libcall: bool,
    /// Do not show events
    #[arg(long)]
    pub no_event: bool,
    /// Do not show scheduling events
    #[arg(long)]
    pub no_sched: bool,
    /// Do not show pre-emption scheduling events
    #[arg(long)]
    pub no_sched_preempt: bool,
    /// Also show events outside of any function
    #[arg(long)]
    pub event_full: bool,
    /// Start with tracing on or off
    #[arg(long, value_name = "STATE")]
    pub trace: Option<String>,
    /// Start with tracing off (old spelling of --trace=off)
    #[arg(long, hide = true)]
    pub disable: bool,
}

/// How `replay` lays out its lines.
#[derive(Debug, Clone, Args)]
pub struct ReplayArgs {
    /// Columns: duration,tid,addr,time,delta,elapsed,task,module,none (+ adds)
    #[arg(short = 'f', long, value_name = "FIELD")]
    pub output_fields: Option<String>,
    /// Do not print the name comment after a closing brace
    #[arg(long)]
    pub no_comment: bool,
    /// Do not print arguments and return values
    #[arg(long)]
    pub no_args: bool,
    /// One line per record, no call tree
    #[arg(long)]
    pub flat: bool,
    /// Do not merge the entry and exit of leaf functions
    #[arg(long)]
    pub no_merge: bool,
    /// Append the library name to library calls
    #[arg(long)]
    pub libname: bool,
    /// Print an empty line whenever the thread changes
    #[arg(long)]
    pub task_newline: bool,
    /// Indent each thread in its own column
    #[arg(long)]
    pub column_view: bool,
    /// Indentation between columns of --column-view (default: 8)
    #[arg(long, value_name = "DEPTH")]
    pub column_offset: Option<String>,
    /// Width of the TID column: 7 (default) or 6 (older layout)
    #[arg(long, value_name = "N", hide = true)]
    pub tid_width: Option<String>,
    /// Record and show source locations (file and line)
    #[arg(long)]
    pub srcline: bool,
}

/// Options of `report`, `graph`, `info` and `dump`; interpreted by those commands.
#[derive(Debug, Clone, Args)]
pub struct AnalysisArgs {
    /// Sort report rows by KEY[,KEY...]
    #[arg(short = 's', long, value_name = "KEY")]
    pub sort: Vec<String>,
    /// Report average, min and max of total times
    #[arg(long)]
    pub avg_total: bool,
    /// Report average, min and max of self times
    #[arg(long)]
    pub avg_self: bool,
    /// Per-thread summary (report, graph, info)
    #[arg(long)]
    pub task: bool,
    /// Compare with the data in DIR
    #[arg(long, value_name = "DIR")]
    pub diff: Option<String>,
    /// How --diff sorts and shows: abs, no-abs, percent, no-percent, compact, full
    #[arg(long, value_name = "POLICY")]
    pub diff_policy: Option<String>,
    /// Column used for the diff percentage
    #[arg(long, value_name = "N")]
    pub sort_column: Option<String>,
    /// Print the symbol tables (info)
    #[arg(long)]
    pub symbols: bool,
    /// Log2 histogram of FUNC's durations (report)
    #[arg(long, value_name = "FUNC")]
    pub histogram: Option<String>,
    /// I/O requests of a -k trace: latency per layer by kind, device and function (report)
    #[arg(long)]
    pub io: bool,
    /// Dump as Chrome trace-event JSON
    #[arg(long)]
    pub chrome: bool,
    /// Dump as a Perfetto protobuf trace, to a file or pipe (utrace only)
    #[arg(long)]
    pub perfetto: bool,
    /// Dump as folded stacks for flame graphs
    #[arg(long)]
    pub flame_graph: bool,
    /// Dump as a graphviz graph
    #[arg(long)]
    pub graphviz: bool,
    /// Dump as a mermaid graph
    #[arg(long)]
    pub mermaid: bool,
    /// Sampling period of --flame-graph
    #[arg(long, value_name = "TIME")]
    pub sample_time: Option<String>,
    /// Render --flame-graph as an SVG image (utrace only)
    #[arg(long)]
    pub svg: bool,
}

/// Options of `record` and `live` (and `recv`); interpreted by those commands.
#[derive(Debug, Clone, Args)]
pub struct RecordArgs {
    /// Per-thread buffer size (default: 128K)
    #[arg(short = 'b', long, value_name = "SIZE")]
    pub buffer: Option<String>,
    /// Flight recorder: keep only the newest SIZE of records per thread (e.g. 16M; at least 32
    /// pages) in memory, and write them when asked (--signal SIG@dump, -T FUNC@dump,
    /// -T FUNC@time=T,dump), when the program crashes, and at exit
    #[arg(long, value_name = "SIZE")]
    pub flight_recorder: Option<String>,
    /// Also trace kernel functions
    #[arg(short = 'k', long)]
    pub kernel: bool,
    /// Kernel call depth
    #[arg(short = 'K', long, value_name = "DEPTH")]
    pub kernel_depth: Option<String>,
    /// Kernel buffer size
    #[arg(long, value_name = "SIZE")]
    pub kernel_buffer: Option<String>,
    /// Trace every kernel function, not only those called from the program
    #[arg(long)]
    pub kernel_full: bool,
    /// Trace kernel functions only
    #[arg(long)]
    pub kernel_only: bool,
    /// Hide kernel functions outside of user functions (the default)
    #[arg(long)]
    pub kernel_skip_out: bool,
    /// Enable EVENT
    #[arg(short = 'E', long, value_name = "EVENT")]
    pub event: Vec<String>,
    /// Report changes of POINT (cpu: the CPU a task runs on)
    #[arg(short = 'W', long, value_name = "POINT")]
    pub watch: Vec<String>,
    /// Apply dynamic patching for FUNCs (FUNC@MODULE for a library's)
    #[arg(short = 'P', long, value_name = "FUNC")]
    pub patch: Vec<String>,
    /// Do not apply dynamic patching for FUNCs
    #[arg(short = 'U', long, value_name = "FUNC")]
    pub unpatch: Vec<String>,
    /// Record entries only and estimate the returns
    #[arg(hide = true, short = 'e', long)]
    pub estimate_return: bool,
    /// Also trace calls between libraries
    #[arg(short = 'l', long)]
    pub nest_libcall: bool,
    /// Do not bind library symbols eagerly
    #[arg(long)]
    pub no_pltbind: bool,
    /// Deepest nesting recorded (default: 1024)
    #[arg(long, value_name = "DEPTH")]
    pub max_stack: Option<String>,
    /// Number of recorder threads (default: CPUs / 4)
    #[arg(long, value_name = "N")]
    pub num_thread: Option<String>,
    /// Print the elapsed time of the program
    #[arg(long)]
    pub time: bool,
    /// The traced program keeps the pid of utrace (the recorder forks)
    #[arg(long)]
    pub keep_pid: bool,
    /// Clock source: mono, mono_raw or boot
    #[arg(long, value_name = "CLOCK")]
    pub clock: Option<String>,
    /// Run with a runtime that records nothing
    #[arg(long)]
    pub nop: bool,
    /// Single-thread runtime (accepted: the runtime takes no locks already)
    #[arg(long)]
    pub libmcount_single: bool,
    /// Trace even if the checks fail
    #[arg(long)]
    pub force: bool,
    /// Disable address space randomization
    #[arg(long)]
    pub no_randomize_addr: bool,
    /// Real-time (FIFO) priority of the recorder threads
    #[arg(long, value_name = "PRIO")]
    pub rt_prio: Option<String>,
    /// Send trace data to HOST (a `recv` server) instead of writing files
    #[arg(long, value_name = "HOST")]
    pub host: Option<String>,
    /// Port of --host and recv (default: 8090)
    #[arg(long, value_name = "PORT")]
    pub port: Option<String>,
    /// recv: run CMD in the receiving directory after each session
    #[arg(long, value_name = "CMD")]
    pub run_cmd: Option<String>,
    /// Run a Python or Lua SCRIPT on every function entry and exit
    #[arg(short = 'S', long, value_name = "SCRIPT")]
    pub script: Option<String>,
    /// Start an agent in the traced program: `live -p PID` then changes --trace, -D, -t,
    /// -F, -N, -C, -T while it runs (every call takes the slower full hooks)
    #[arg(short = 'g', long)]
    pub agent: bool,
    /// Attach to the running process PID (record, live): trace it until Ctrl-C, --duration
    /// or its end, then detach. If PID runs an agent (-g): send it --trace, -D, -t, -F, -N,
    /// -C, -T (FUNC@clear removes) and exit, recording nothing
    #[arg(short = 'p', long, value_name = "PID")]
    pub pid: Option<String>,
    /// With -p: detach after TIME (a bare number is seconds; or 500ms, 2m, ...)
    #[arg(long, value_name = "TIME")]
    pub duration: Option<String>,
    /// Read symbols from DIR
    #[arg(long, value_name = "DIR")]
    pub with_syms: Option<String>,
    /// Act when SIG arrives: SIG@trace_on, trace_off, finish or dump (--flight-recorder)
    #[arg(long, value_name = "SIG@ACT")]
    pub signal: Vec<String>,
    /// live: keep the recorded data
    #[arg(long)]
    pub record: bool,
    /// live: print a report before the replay
    #[arg(long)]
    pub report: bool,
    /// List the available events
    #[arg(long)]
    pub list_event: bool,
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn option_table_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn data_dir_strips_one_slash() {
        let dir = |d: &str| DataArgs {
            data: Some(PathBuf::from(d)),
        };
        assert_eq!(dir("/").record_dir(), PathBuf::from("/"));
        assert_eq!(dir("x//").record_dir(), PathBuf::from("x/"));
        assert_eq!(dir("d.abc/").record_dir(), PathBuf::from("d.abc"));
        let none = DataArgs { data: None };
        assert_eq!(none.record_dir(), PathBuf::from("uftrace.data"));
    }
}
