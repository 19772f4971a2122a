//! What an analysis command was asked to do, independent of how the command line spelled it.
//! The CLI (tracer/src/cli.rs) fills this in; nothing here knows about clap.

/// How function patterns are matched.
pub use record_format::pattern::MatchType;

pub use record_format::demangle::Demangle;

/// Output columns of replay (`-f`), always printed in this order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Field {
    Duration,
    Tid,
    Addr,
    Time,
    Delta,
    Elapsed,
    Task,
    Module,
}

impl Field {
    pub const ALL: [Field; 8] = [
        Field::Duration,
        Field::Tid,
        Field::Addr,
        Field::Time,
        Field::Delta,
        Field::Elapsed,
        Field::Task,
        Field::Module,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Field::Duration => "duration",
            Field::Tid => "tid",
            Field::Addr => "addr",
            Field::Time => "time",
            Field::Delta => "delta",
            Field::Elapsed => "elapsed",
            Field::Task => "task",
            Field::Module => "module",
        }
    }

    pub fn from_name(s: &str) -> Option<Field> {
        Field::ALL.into_iter().find(|f| f.name() == s)
    }
}

/// One end of `-r START~STOP`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimePoint {
    /// Nanoseconds since the first record (a value with a unit).
    Elapsed(u64),
    /// An absolute timestamp in nanoseconds (`SEC.NSEC`).
    Absolute(u64),
}

/// `-r START~STOP`; either side may be open.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TimeRange {
    pub start: Option<TimePoint>,
    pub stop: Option<TimePoint>,
}

/// Options shared by every analysis command (filters and display).
#[derive(Debug, Clone, Default)]
pub struct Config {
    /// `-F`, each a pattern (possibly with `@MODULE`).
    pub filters: Vec<String>,
    /// `-N`.
    pub notrace: Vec<String>,
    /// `-F` and `-N` in command-line order (is `-F`, index in its list): for a function both
    /// name, the later one decides, as in uftrace. Empty: `-N` wins.
    pub filter_order: Vec<(bool, usize)>,
    /// `-H`.
    pub hide: Vec<String>,
    /// `-C`.
    pub caller: Vec<String>,
    /// `-T FUNC@ACTION,...`, unparsed.
    pub triggers: Vec<String>,
    /// `-A` given at replay time (selection of recorded arguments).
    pub args: Vec<String>,
    /// `-R` given at replay time.
    pub retvals: Vec<String>,
    /// `-D`.
    pub depth: Option<u32>,
    /// `-t` in nanoseconds.
    pub time_filter: Option<u64>,
    /// `--tid`.
    pub tids: Vec<u32>,
    /// `-r`.
    pub time_range: Option<TimeRange>,
    pub no_libcall: bool,
    pub no_event: bool,
    pub no_sched: bool,
    /// Tracing starts off (`replay --disable`): a `trace_on` trigger turns it on.
    pub start_disabled: bool,
    /// `-Z`: functions smaller than this many bytes are hidden.
    pub size_filter: Option<u32>,
    /// `--no-sched-preempt`: pre-emptions are not shown (other switches are).
    pub no_sched_preempt: bool,
    /// `--event-full`: events outside every function shown too.
    pub event_full: bool,
    pub match_type: MatchType,
    pub demangle: Demangle,
    pub kernel: KernelView,
    /// `--srcline`: show source locations (read from the `.dbg` files).
    pub srcline: bool,
    /// `-L LOC[@hide]`, unparsed (see [`record_format::location`]).
    pub loc_filters: Vec<String>,
}

impl Config {
    /// Which `linux:schedule` rows or nodes the analysis shows: `[voluntary, pre-empted]`
    /// (none with `--no-sched` or `--no-event`, no pre-emptions with `--no-sched-preempt`).
    pub fn sched_shown(&self) -> [bool; 2] {
        let shown = !self.no_sched && !self.no_event;
        [shown, shown && !self.no_sched_preempt]
    }
}

/// Which kernel records (`record -k` data) show.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct KernelView {
    /// `--kernel-full`: also those outside every user function (hidden by default, as
    /// uftrace's `--kernel-skip-out` does).
    pub full: bool,
    /// `--kernel-only`: no user records.
    pub only: bool,
    /// `-K N`: kernel functions to depth N (events always show).
    pub depth: Option<u32>,
}

/// Display options of `replay`.
#[derive(Debug, Clone)]
pub struct ReplayOptions {
    /// Columns left of ` | `; empty for `-f none`.
    pub fields: Vec<Field>,
    pub no_comment: bool,
    pub no_args: bool,
    pub flat: bool,
    pub color: bool,
    pub no_merge: bool,
    pub libname: bool,
    pub task_newline: bool,
    /// `--column-view` offset (None = off).
    pub column_offset: Option<u32>,
    /// TID column width: 7 (uftrace 0.17+ layout, default) or 6 (0.13 layout).
    pub tid_width: usize,
    /// `--srcline`: ` [SOURCE]` in the header, `/* file:line */` after entries and leaves.
    pub srcline: bool,
}

impl Default for ReplayOptions {
    fn default() -> Self {
        ReplayOptions {
            fields: vec![Field::Duration, Field::Tid],
            no_comment: false,
            no_args: false,
            flat: false,
            color: false,
            no_merge: false,
            libname: false,
            task_newline: false,
            column_offset: None,
            tid_width: 7,
            srcline: false,
        }
    }
}
