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

use record_format::demangle::{demangle, Demangle};
use record_format::maps::MapEntry;
use record_format::pattern::{MatchType, NameMatcher};
use record_format::trigger::{parse_trigger, Actions};
use std::sync::atomic::{AtomicPtr, AtomicU64, AtomicU8, Ordering};

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

/// One pattern with its actions (`-F x` is `x@filter`, and so on).
#[derive(Debug)]
struct Spec {
    matcher: NameMatcher,
    module: Option<String>,
    actions: Actions,
}

/// Parses the recorder's `;`-separated trigger list (`UTRACE_TRIGGER`).
fn parse_specs(list: &str, ty: MatchType) -> Vec<Spec> {
    list.split(';')
        .filter(|s| !s.is_empty())
        .map(|s| parse_spec(s, ty))
        .collect()
}

/// One `PATTERN@ACTIONS` item.
fn parse_spec(item: &str, ty: MatchType) -> Spec {
    let t = parse_trigger(item, &mut Vec::new());
    Spec {
        matcher: NameMatcher::new(t.name, ty),
        module: t.module.map(str::to_string),
        actions: t.actions,
    }
}

pub(crate) fn basename(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// Function symbols of the ELF file of `module`, whose first mapping starts at `module.start`:
/// `(run-time address, size, name)`, every alias included (see [`record_format::elf::symbols`]).
/// Only regular files that start with the ELF magic are read whole: not a device, a FIFO, nor
/// a data file the program maps (which may be huge).
pub(crate) fn module_functions(module: &MapEntry) -> Vec<(u64, u64, String)> {
    use record_format::elf;
    let Some(bytes) = read_elf(&module.path) else {
        return Vec::new();
    };
    let Some(elf) = elf::parse(&bytes) else {
        return Vec::new();
    };
    let bias = elf::load_bias(&elf, module.start);
    elf::function_symbols(&elf)
        .map(|f| (bias.wrapping_add(f.addr), f.size, f.name.to_string()))
        .collect()
}

/// The bytes of the file at `path` if it is a regular file with the ELF magic (checked with
/// a 4-byte read first).
fn read_elf(path: &str) -> Option<Vec<u8>> {
    use std::io::Read;
    if !std::fs::metadata(path).ok()?.is_file() {
        return None;
    }
    let mut file = std::fs::File::open(path).ok()?;
    let mut magic = [0u8; 4];
    file.read_exact(&mut magic).ok()?;
    if magic != *b"\x7fELF" {
        return None;
    }
    let len = file.metadata().ok()?.len();
    let mut bytes = Vec::with_capacity(usize::try_from(len).ok()?);
    bytes.extend_from_slice(&magic);
    file.read_to_end(&mut bytes).ok()?;
    Some(bytes)
}

/// Whether `module` (a session map entry) holds an object the dynamic linker reports, one of
/// whose lowest segments is mapped at an address of `lows` (see `dlopen::loaded`).
fn reported(module: &MapEntry, lows: &[u64]) -> bool {
    lows.iter().any(|&l| module.start <= l && l < module.end)
}

/// The recorder's settings for the filters (from the `UTRACE_*` variables).
#[derive(Debug, Default)]
pub struct Settings<'a> {
    /// `UTRACE_TRIGGER`: `PATTERN@ACTIONS` items, `;`-separated.
    pub triggers: &'a str,
    pub match_type: MatchType,
    /// `-D` (`u32::MAX`: none).
    pub depth: u32,
    /// `-t` in nanoseconds.
    pub threshold: u64,
    /// `-Z` in bytes (0: none).
    pub size: u64,
    /// `--trace=off`: start with recording off.
    pub start_off: bool,
    /// `--signal` triggers are installed (their actions are taken on the slow path).
    pub signals: bool,
    /// `-g`: the agent may replace the filters (see [`Filters::live`]).
    pub live: bool,
}

impl Settings<'_> {
    /// Whether anything needs the filters (otherwise the fast paths stay on).
    pub fn active(&self) -> bool {
        !self.triggers.is_empty()
            || self.threshold > 0
            || self.size > 0
            || self.start_off
            || self.signals
            || self.live
    }
}

/// The size of a PLT entry, the symbol of a library call.
const PLT_ENTRY_SIZE: u64 = 16;

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

/// The filters of the agent's `items` (each `PATTERN@ACTIONS` with its match type) and the
/// global limits of `set` (whose `triggers` are not read), for [`install`] (agent thread).
pub fn build_items(
    modules: &[MapEntry],
    plt: &[(usize, &str)],
    items: &[(MatchType, String)],
    set: &Settings,
) -> Filters {
    let specs: Vec<Spec> = items.iter().map(|(ty, s)| parse_spec(s, *ty)).collect();
    build(modules, plt, &specs, set)
}

/// The table of `specs` over the session's functions, with the limits of `set`.
fn build(modules: &[MapEntry], plt: &[(usize, &str)], specs: &[Spec], set: &Settings) -> Filters {
    let mut ranges = Vec::new();
    let mut rules: Vec<Actions> = Vec::new();
    let mut rule_of = |merged: Option<Actions>| match merged {
        None => NO_RULE,
        Some(a) => match rules.iter().position(|r| *r == a) {
            Some(i) => i as u32,
            None => {
                rules.push(a);
                (rules.len() - 1) as u32
            }
        },
    };
    // A `size=` trigger changes the limit below its function: then every function's size
    // must be known, not only those below `-Z`.
    let any_size = specs.iter().any(|s| s.actions.size.is_some());
    let sized = |size: u64| size < set.size || any_size;
    if !specs.is_empty() || set.size > 0 {
        let wanted: Vec<&Spec> = specs
            .iter()
            .filter(|s| {
                s.module
                    .as_deref()
                    .is_none_or(record_format::pattern::is_plt_module)
            })
            .collect();
        // A library call's symbol is its PLT entry, 16 bytes: `-Z` above that drops library
        // calls too, as uftrace does.
        for &(entry, raw) in plt {
            let name = demangle(raw, Demangle::Simple);
            let mut merged: Option<Actions> = None;
            for s in wanted.iter().filter(|s| s.matcher.matches(&name)) {
                merged
                    .get_or_insert_with(Actions::default)
                    .merge(&s.actions);
            }
            if merged.is_some() || sized(PLT_ENTRY_SIZE) {
                ranges.push(Range {
                    start: entry as u64,
                    end: entry as u64 + PLT_ENTRY_SIZE,
                    rule: rule_of(merged),
                    size: size32(PLT_ENTRY_SIZE),
                });
            }
        }
    }
    if !specs.is_empty() || set.size > 0 {
        // The executable and the libraries, not the other files the program maps.
        let lows = crate::dlopen::loaded().1;
        for m in modules.iter().filter(|m| reported(m, &lows)) {
            let base = basename(&m.path);
            let wanted: Vec<&Spec> = specs
                .iter()
                .filter(|s| {
                    s.module
                        .as_deref()
                        .is_none_or(|want| base.starts_with(want))
                })
                .collect();
            if wanted.is_empty() && set.size == 0 && !any_size {
                continue;
            }
            for (start, size, raw) in module_functions(m) {
                let name = demangle(&raw, Demangle::Simple);
                let mut merged: Option<Actions> = None;
                for s in wanted.iter().filter(|s| s.matcher.matches(&name)) {
                    merged
                        .get_or_insert_with(Actions::default)
                        .merge(&s.actions);
                }
                if merged.is_none() && !sized(size) {
                    continue;
                }
                ranges.push(Range {
                    start,
                    end: start + size,
                    rule: rule_of(merged),
                    size: size32(size),
                });
            }
        }
        ranges.sort_by_key(|r| r.start);
        ranges.dedup_by_key(|r| r.start);
    }
    Filters {
        has_in: specs.iter().any(|s| s.actions.filter),
        has_caller: specs.iter().any(|s| s.actions.caller),
        has_dump: specs.iter().any(|s| s.actions.dump),
        ranges,
        rules,
        depth: set.depth,
        threshold: set.threshold,
        size: size32(set.size),
        live: set.live,
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
pub use rebuild::{after_dlopen, fork_child, kept};

#[cfg(test)]
mod tests;
