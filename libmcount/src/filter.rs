//! Record-time filters and triggers: `-F` (only these functions and their callees), `-N` (not
//! these subtrees), `-H` (not these functions, their callees promoted), `-C` (only the call
//! paths leading to these functions, which become leaves), `-D` (depth, counted from the `-F`
//! function), `-t` (drop calls shorter than a threshold), `-Z` (drop functions smaller than a
//! size) and `-T FUNC@ACTIONS` (`depth=`, `time=`, `filter`, `notrace`, `hide`, `caller`,
//! `trace`, `trace_on`, `trace_off`, `finish`, `recover`, `dump`). cli.md §3.1–3.2: the semantics are
//! replay's, applied while recording, so that `uftrace replay` of the data shows what it shows
//! for uftrace's own filtered recording.
//!
//! The session constructor resolves the patterns once against the symbol tables of every
//! module in the session map (the same demangled names the analysis commands match) into a
//! sorted table of address ranges, each pointing at its merged actions. Hooks then only look
//! addresses up. Functions that are neither recorded nor change a filter counter are not hooked
//! at all, which keeps filtered recordings cheap.
//!
//! Per-thread state ([`FilterState`]) counts the `-F` and `-N` functions on the shadow stack and the recorded frames (the depth written into records, as uftrace does: a `-F`
//! function is at depth 0), and holds the depth and time limits in force. A frame that changes
//! them saves the previous values ([`Saved`]) and restores them when it pops. With `-t`, ENTRY
//! records wait in their frames (`PENDING`) until a call turns out long enough: then the
//! pending entries of its ancestors, its own and its EXIT are written in order. With `-C` they
//! wait until a caller function is entered. `trace_on`/`trace_off` switch recording for the
//! whole process, as uftrace does: frames stay hooked and keep their depths while it is off.

use record_format::maps::MapEntry;
use record_format::trigger::Actions;
use std::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, AtomicU8, Ordering};

/// The filters set the `NORECORD` … `FINISH` bits of the table.
use crate::frame_flags as flags;

/// One function's place in the table.
#[derive(Debug, Clone, Copy)]
struct Range {
    start: u64,
    end: u64,
    /// Index into `Filters::rules`, or `NO_RULE`.
    rule: u32,
    /// The function's size in bytes, for `-Z` and `size=`.
    size: u32,
}

const NO_RULE: u32 = u32::MAX;

/// The session's filters.
#[derive(Debug, Default, Clone)]
pub struct Filters {
    /// Sorted, non-overlapping function ranges.
    ranges: Vec<Range>,
    /// The distinct merged actions of the matched functions.
    rules: Vec<Actions>,
    /// Any `-F`: functions outside an `-F` subtree are not recorded.
    pub has_in: bool,
    /// Any `-C`: entries wait until a caller function shows they lead to it.
    pub has_caller: bool,
    /// `-D`, counted from the innermost `-F` function (or from the top).
    pub depth: u32,
    /// `-t` in nanoseconds (0: none).
    pub threshold: u64,
    /// `-Z` in bytes (0: none).
    pub size: u32,
    /// Any `dump` trigger (flight recorder).
    pub has_dump: bool,
    /// The agent may replace these filters (`-g`): threads then keep [`INHERIT`] in their
    /// depth and time limits where the global ones are in force, and read them from the
    /// filters current at each decision.
    pub live: bool,
}

/// A thread's depth or time limit that is the global one of the current [`Filters`] (`-g`).
pub const INHERIT: u32 = u32::MAX - 1;
/// [`INHERIT`] for time limits.
pub const INHERIT_TIME: u64 = u64::MAX;

/// The session's filters: null, or a `Box` leaked by [`install`] and never freed (a hook may
/// still read one that the agent has replaced). Stored with Release, loaded with Acquire.
static FILTERS: AtomicPtr<Filters> = AtomicPtr::new(core::ptr::null_mut());

/// `-t` in nanoseconds when it is the only record-time filter (no triggers, `-Z`,
/// `--trace=off` or signal triggers), else 0. Then the sessions stay on the trampolines' fast
/// paths (`config::Config::slow`), which apply it themselves: an entry pushes a `PENDING`
/// frame and counts it in `FilterState::recorded`, the exit of a call shorter than this only
/// pops it; everything else goes to the Rust handlers.
pub static FAST_THRESHOLD: AtomicU64 = AtomicU64::new(0);

/// A bit above a frame's 16 flag bits.
pub const FORCE_BIT: u32 = 1 << 16;

/// [`FORCE_BIT`] when [`FAST_THRESHOLD`] is set, else 0: the exit fast paths read a frame's
/// flags (and the zero padding above them) or'ed with it, so that one test sends every frame
/// of a `-t` session to the threshold check, and frames without flags of other sessions
/// straight to the EXIT record.
pub static EXIT_FORCE: AtomicU32 = AtomicU32::new(0);

/// Whether `-t` is the only record-time filter (see [`FAST_THRESHOLD`]).
#[inline]
pub fn time_only() -> bool {
    FAST_THRESHOLD.load(Ordering::Relaxed) != 0
}

/// The session's filters, if any are active.
#[inline]
pub fn get() -> Option<&'static Filters> {
    // Acquire pairs with the Release store of `install`: the table is complete.
    let p = FILTERS.load(Ordering::Acquire);
    // SAFETY: non-null values are leaked boxes, never freed (see `FILTERS`).
    (!p.is_null()).then(|| unsafe { &*p })
}

/// Makes `f` the filters hooks read. With `replace`, whatever was there is replaced (the
/// agent; the old table is leaked: hooks may still be reading it); without, only the first
/// call of the process installs (an attached process can see several sessions). Returns
/// whether `f` was installed.
pub fn install(f: Filters, replace: bool) -> bool {
    let p = Box::into_raw(Box::new(f));
    if replace {
        FILTERS.store(p, Ordering::Release);
        return true;
    }
    let fresh = FILTERS
        .compare_exchange(
            core::ptr::null_mut(),
            p,
            Ordering::Release,
            Ordering::Relaxed,
        )
        .is_ok();
    if !fresh {
        // SAFETY: `p` came from `Box::into_raw` above and was published nowhere.
        drop(unsafe { Box::from_raw(p) });
    }
    fresh
}

/// Turns recording on or off for the whole process (the agent's `--trace=on|off`); a
/// `finish` stays finished.
pub fn set_tracing(on: bool) {
    let (from, to) = if on { (OFF, ON) } else { (ON, OFF) };
    let _ = TRACING.compare_exchange(from, to, Ordering::Relaxed, Ordering::Relaxed);
}

/// Process-wide recording switch (`trace_on`/`trace_off`, `--trace=off`, `finish`).
static TRACING: AtomicU8 = AtomicU8::new(ON);
const OFF: u8 = 0;
const ON: u8 = 1;
const FINISHED: u8 = 2;

/// Whether records are written now.
#[inline]
pub fn tracing() -> bool {
    TRACING.load(Ordering::Relaxed) == ON
}

/// Applies the switches of an entry with `fl`: before its ENTRY record for `trace_on` and
/// `trace_off`, after it for `finish` (uftrace writes the finishing function's entry).
pub fn switch_before(fl: u16) {
    if fl & flags::TRACE_ON != 0 {
        let _ = TRACING.compare_exchange(OFF, ON, Ordering::Relaxed, Ordering::Relaxed);
    }
    if fl & flags::TRACE_OFF != 0 {
        let _ = TRACING.compare_exchange(ON, OFF, Ordering::Relaxed, Ordering::Relaxed);
    }
}

/// See [`switch_before`].
pub fn switch_after(fl: u16) {
    if fl & flags::FINISH != 0 {
        TRACING.store(FINISHED, Ordering::Relaxed);
    }
}

impl Filters {
    /// The depth limit a thread keeps where the global one is in force.
    #[inline]
    fn global_depth(&self) -> u32 {
        if self.live {
            INHERIT
        } else {
            self.depth
        }
    }

    /// Whether the entry of the function at `addr` dumps the flight recorder (`FUNC@dump`).
    /// Its frame carries `LIMITS`, which leads here.
    pub fn dumps_at_entry(&self, addr: u64) -> bool {
        self.has_dump
            && self
                .lookup(addr)
                .0
                .is_some_and(|a| a.dump && a.dump_time.is_none())
    }

    /// Whether a call of the function at `addr` that lasted `duration` ns dumps the flight
    /// recorder at its exit (`FUNC@time=T,dump`).
    pub fn dumps_at_exit(&self, addr: u64, duration: u64) -> bool {
        self.has_dump
            && self
                .lookup(addr)
                .0
                .and_then(|a| a.dump_time.filter(|_| a.dump))
                .is_some_and(|t| duration >= t)
    }

    /// The `read=` counters of the function containing `addr` (`trigger::read` bits).
    pub fn read_of(&self, addr: u64) -> u8 {
        self.lookup(addr).0.map_or(0, |a| a.read)
    }

    /// The actions of the function containing `addr` and its size (`u32::MAX` for a
    /// function the table does not hold: never smaller than a limit).
    #[inline]
    fn lookup(&self, addr: u64) -> (Option<&Actions>, u32) {
        let i = self.ranges.partition_point(|r| r.start <= addr);
        match i.checked_sub(1).and_then(|i| self.ranges.get(i)) {
            Some(r) if addr < r.end => (self.rules.get(r.rule as usize), r.size),
            _ => (None, u32::MAX),
        }
    }
}

fn size32(size: u64) -> u32 {
    u32::try_from(size).unwrap_or(u32::MAX)
}

/// Builds the session's filters (library constructor; `std` and allocation are fine there).
/// `modules` are the session map's entries; `plt` the hooked library calls (PLT entry and
/// name), which patterns without a module or with `@PLT` name too.
pub fn init(modules: &[MapEntry], plt: &[(usize, &str)], set: &Settings) {
    let specs = parse_specs(set.triggers, set.match_type);
    let filters = build(modules, plt, &specs, set);
    // uftrace 0.13 drops a `-F` that names no function and records everything; here it stays,
    // since a library loaded later by `dlopen` may have the function (see `after_dlopen`).
    // Either way a typo must not go unsaid.
    let unmatched = filters.has_in && !filters.rules.iter().any(|r| r.filter);
    if set.start_off {
        TRACING.store(OFF, Ordering::Relaxed);
    }
    let time_only =
        set.triggers.is_empty() && set.size == 0 && !set.start_off && !set.signals && !set.live;
    // The filters of the process's first session stay (an attached process can see several).
    let fresh = install(filters, false);
    if fresh && unmatched {
        crate::log::raw(
            b"WARN: no function matches the -F patterns: nothing is recorded until a library \
              loaded later has one\n",
        );
    }
    if fresh && time_only {
        FAST_THRESHOLD.store(set.threshold, Ordering::Relaxed);
        EXIT_FORCE.store(FORCE_BIT, Ordering::Relaxed);
    }
    if fresh && !set.live && (!specs.is_empty() || set.size > 0) {
        let kept = rebuild::Kept {
            triggers: set.triggers.to_string(),
            match_type: set.match_type,
            depth: set.depth,
            threshold: set.threshold,
            size: set.size,
        };
        rebuild::keep(kept, plt.len());
    }
}

/// The limits a frame with `LIMITS` replaced, restored when it pops.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Saved {
    pub base: u32,
    pub depth: u32,
    pub time: u64,
    pub size: u32,
}

/// Per-thread filter counters. `#[repr(C)]` because it is part of `ThreadState`.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub struct FilterState {
    /// `-F` functions on the shadow stack.
    pub in_count: u32,
    /// `-N` functions on the shadow stack.
    pub out_count: u32,
    /// Recorded frames on the shadow stack: the depth of the next recorded function.
    pub recorded: u32,
    /// `recorded` where the depth limit counts from (the innermost `-F` or `depth=` function).
    pub base: u32,
    /// The depth limit in force.
    pub depth: u32,
    /// The time threshold in force (ns; 0: none).
    pub time: u64,
    /// The size limit in force (`-Z`, or a `size=` trigger above; 0: none).
    pub size: u32,
}

/// How a new function is treated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Neither recorded nor counted: not hooked.
    Skip,
    /// Hooked with these frame flags (recorded unless `NORECORD`).
    Hook(u16),
}

impl FilterState {
    /// The state of a new thread.
    pub fn new(f: &Filters) -> FilterState {
        FilterState {
            depth: f.global_depth(),
            time: if f.live { INHERIT_TIME } else { f.threshold },
            size: f.size,
            ..FilterState::default()
        }
    }

    /// The depth limit in force (the global one where the thread inherits it).
    #[inline]
    fn depth_in_force(&self, f: &Filters) -> u32 {
        match self.depth {
            INHERIT => f.depth,
            d => d,
        }
    }

    /// The time threshold in force (ns; 0: none).
    #[inline]
    pub fn time_in_force(&self, f: &Filters) -> u64 {
        match self.time {
            INHERIT_TIME => f.threshold,
            t => t,
        }
    }

    /// The decision for a function at `addr`.
    pub fn decide(&self, f: &Filters, addr: u64) -> Decision {
        let (rule, size) = f.lookup(addr);
        let none = Actions::default();
        let a = rule.unwrap_or(&none);
        // A `size=` trigger's limit holds for its own function too.
        let small = size < a.size.map_or(self.size, size32);
        let in_count = self.in_count + a.filter as u32;
        let out_count = self.out_count + a.notrace as u32;
        let (base, depth) = match a.depth {
            Some(d) => (self.recorded, d),
            None if a.filter => (self.recorded, f.depth),
            None => (self.base, self.depth_in_force(f)),
        };
        let record = (!f.has_in || in_count > 0)
            && out_count == 0
            && self.recorded.saturating_sub(base) < depth
            && !a.hide
            && !small;
        let mut fl = 0;
        if a.filter {
            fl |= flags::IN;
        }
        if a.notrace {
            fl |= flags::OUT;
        }
        // A `dump` frame is looked up again at its entry and exit (its saved limits are the
        // ones in force, so restoring them changes nothing).
        if a.filter || a.depth.is_some() || a.time.is_some() || a.size.is_some() || a.dump {
            fl |= flags::LIMITS;
        }
        // As uftrace: `trace_on`/`trace_off` of a function outside every `-F` function, or
        // called from a `-N` one, switch nothing (uftrace's replay does the same).
        let switches = (!f.has_in || in_count > 0) && self.out_count == 0;
        if a.trace_on && switches {
            fl |= flags::TRACE_ON;
        }
        if a.trace_off && switches {
            fl |= flags::TRACE_OFF;
        }
        if a.finish {
            fl |= flags::FINISH;
        }
        if a.read != 0 {
            fl |= flags::READ;
        }
        if !record {
            if fl == 0 {
                return Decision::Skip;
            }
            fl |= flags::NORECORD;
        } else {
            if a.caller {
                fl |= flags::CALLER;
            }
            let time = a.time.unwrap_or(self.time_in_force(f));
            if !a.trace && !a.caller && (f.has_caller || time > 0) {
                fl |= flags::PENDING;
            }
        }
        Decision::Hook(fl)
    }

    /// Counts a frame pushed with `fl` at `addr` (as decided); returns the record depth and
    /// the limits to keep in the frame (meaningful with `LIMITS`).
    pub fn push(&mut self, f: &Filters, addr: u64, fl: u16) -> (u32, Saved) {
        let saved = Saved {
            base: self.base,
            depth: self.depth,
            time: self.time,
            size: self.size,
        };
        if fl & flags::LIMITS != 0 {
            let a = f.lookup(addr).0.copied().unwrap_or_default();
            if let Some(d) = a.depth {
                self.base = self.recorded;
                self.depth = d;
            } else if a.filter {
                self.base = self.recorded;
                self.depth = f.global_depth();
            }
            if let Some(t) = a.time {
                self.time = t;
            }
            if let Some(z) = a.size {
                self.size = size32(z);
            }
        }
        if fl & flags::IN != 0 {
            self.in_count += 1;
        }
        if fl & flags::OUT != 0 {
            self.out_count += 1;
        }
        let depth = self.recorded;
        if fl & flags::NORECORD == 0 {
            self.recorded += 1;
        }
        (depth, saved)
    }

    /// Uncounts a frame popped with `fl` and the limits it saved.
    pub fn pop(&mut self, fl: u16, saved: &Saved) {
        if fl & flags::NORECORD == 0 {
            self.recorded = self.recorded.saturating_sub(1);
        }
        if fl & flags::IN != 0 {
            self.in_count = self.in_count.saturating_sub(1);
        }
        if fl & flags::OUT != 0 {
            self.out_count = self.out_count.saturating_sub(1);
        }
        if fl & flags::LIMITS != 0 {
            self.base = saved.base;
            self.depth = saved.depth;
            self.time = saved.time;
            self.size = saved.size;
        }
    }
}

mod rebuild;
mod table;
pub use rebuild::{after_dlopen, fork_child, kept};

#[cfg(test)]
mod tests;
pub(crate) use table::{basename, module_functions};
use table::{build, parse_specs};
pub use table::{build_items, Settings};
