//! The settings in which uftrace's readers differ, as named choices of the one walk
//! ([`super::core::Core`]).
//!
//! uftrace reads a trace with three loops — `replay`'s, the one of `report`/`graph`/`info`
//! and `dump`'s — that agree on pairing and durations but not on the special cases. Users
//! compare utrace's outputs with uftrace's line by line, so each difference is kept, but as
//! a setting of the one walk rather than as another loop:
//!
//! | setting                           | replay               | report, graph, tui     | report --task | dump (chrome, flame, dot, mermaid) |
//! |-----------------------------------|----------------------|------------------------|---------------|------------------------------------|
//! | [`Policy::fixups`]                | shown entries        | shown entries          | none          | every entry                        |
//! | [`Policy::exec_resets_filters`]   | no                   | no                     | no            | yes                                |
//! | [`Policy::setjmp`]                | global               | global                 | global        | per task                           |
//! | [`Policy::libcall`]               | hidden, exit dropped | seen by filters, not reported | ignored | hidden                           |
//! | [`Policy::triggers`]              | yes                  | yes                    | no            | no                                 |
//! | [`Policy::disabled_hides_exit`]   | no                   | yes                    | no            | no                                 |
//! | [`Policy::lost_aligns`]           | yes                  | yes                    | yes           | no                                 |
//! | [`Policy::filters`]               | yes                  | yes                    | no            | yes                                |
//! | [`Policy::unfinished`]            | not closed (listed)  | -r stop, else last entry/exit | last exit | last record, capped by -r stop |
//! | [`Policy::unfinished_shown_only`] | —                    | no                     | no            | yes                                |
//! | [`Policy::sched`]                 | no                   | no                     | no            | yes                                |
//!
//! `replay --flat` ([`Policy::FLAT`]) prints the records as they are: replay's settings
//! without filters and without fix-ups. `report` (and the tui's report) turn
//! [`Policy::sched`] on with [`Walker::with_sched`](super::Walker::with_sched).

/// Which entries of the exec, setjmp and longjmp families change the stack.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fixups {
    /// Only entries the filters show (uftrace's replay and report reader: a hidden `execl`
    /// leaves the stack as it is).
    Shown,
    /// Every entry, shown or not (uftrace's dump applies them while it reads).
    Every,
    /// None (the task report only counts exits).
    Off,
}

/// Where `longjmp` returns to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Setjmp {
    /// The level of the last `setjmp` of any task (one counter, as uftrace's replay keeps).
    Global,
    /// The level of the task's own last `setjmp` (uftrace's dump keeps one per task); a
    /// `longjmp` before any `setjmp` changes nothing.
    PerTask,
}

/// How `--no-libcall` hides library calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Libcall {
    /// Like `-H`: the entry is hidden (its fix-up not applied) and so is its exit.
    Hidden,
    /// Like `-H`, and the exit is dropped before any filter bookkeeping (uftrace's replay
    /// returns before restoring the counters of a library call's exit).
    HiddenExitDropped,
    /// The filters see the call as any other (an `exec` or `longjmp` still changes the
    /// stack); only its entry and exit are not reported (uftrace's report and graph).
    NotReported,
    /// Library calls are reported as any other.
    Ignored,
}

/// Where the calls still open at the end of a task's data are closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unfinished {
    /// Not closed by the walk (replay lists them by name).
    Open,
    /// At the `-r` stop when there is one, else at the task's last entry or exit
    /// (uftrace's report and graph).
    RangeStopOrLast,
    /// At the task's last exit (uftrace's task report).
    LastExit,
    /// At the task's last record of any kind (scheduling included), at most the `-r` stop
    /// (uftrace's dump).
    LastSeenCapped,
}

/// The settings of one walk; see the module's table for the readers they reproduce.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policy {
    pub fixups: Fixups,
    /// An `exec` also forgets the filter counters and the `-D` depth.
    pub exec_resets_filters: bool,
    pub setjmp: Setjmp,
    pub libcall: Libcall,
    /// `trace_on`/`trace_off` triggers switch the reported records (one switch for all
    /// tasks, as in uftrace).
    pub triggers: bool,
    /// An entry not shown because tracing was off keeps its exit hidden even when tracing
    /// is on again by then (uftrace's report reader marks it so; replay does not).
    pub disabled_hides_exit: bool,
    /// A LOST record starts a task that had no record yet (its stack aligned on it).
    pub lost_aligns: bool,
    /// The filters are applied at all (the task report counts every exit).
    pub filters: bool,
    pub unfinished: Unfinished,
    /// Unfinished calls whose entries were hidden are not reported.
    pub unfinished_shown_only: bool,
    /// The perf scheduling records are merged in as [`Step::Sched`](super::core::Step::Sched).
    pub sched: bool,
}

impl Policy {
    /// uftrace's `replay`.
    pub const REPLAY: Policy = Policy {
        fixups: Fixups::Shown,
        exec_resets_filters: false,
        setjmp: Setjmp::Global,
        libcall: Libcall::HiddenExitDropped,
        triggers: true,
        disabled_hides_exit: false,
        lost_aligns: true,
        filters: true,
        unfinished: Unfinished::Open,
        unfinished_shown_only: false,
        sched: false,
    };

    /// `replay --flat`: the records as they are (pairing only, no filter, no fix-up).
    pub const FLAT: Policy = Policy {
        fixups: Fixups::Off,
        libcall: Libcall::Ignored,
        triggers: false,
        filters: false,
        ..Policy::REPLAY
    };

    /// uftrace's `report`, `graph` and the tui (calls with durations).
    pub const ANALYSIS: Policy = Policy {
        fixups: Fixups::Shown,
        exec_resets_filters: false,
        setjmp: Setjmp::Global,
        libcall: Libcall::NotReported,
        triggers: true,
        disabled_hides_exit: true,
        lost_aligns: true,
        filters: true,
        unfinished: Unfinished::RangeStopOrLast,
        unfinished_shown_only: false,
        sched: false,
    };

    /// uftrace's `report --task`: every exit counts, entries are not looked at.
    pub const TASK_REPORT: Policy = Policy {
        fixups: Fixups::Off,
        libcall: Libcall::Ignored,
        triggers: false,
        disabled_hides_exit: false,
        filters: false,
        unfinished: Unfinished::LastExit,
        ..Policy::ANALYSIS
    };

    /// uftrace's `dump` readers (`--chrome`, `--flame-graph`, `--graphviz`, `--mermaid`).
    pub const DUMP: Policy = Policy {
        fixups: Fixups::Every,
        exec_resets_filters: true,
        setjmp: Setjmp::PerTask,
        libcall: Libcall::Hidden,
        triggers: false,
        disabled_hides_exit: false,
        lost_aligns: false,
        filters: true,
        unfinished: Unfinished::LastSeenCapped,
        unfinished_shown_only: true,
        sched: true,
    };
}
