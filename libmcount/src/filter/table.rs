//! Building the filter table: the `-F -N -H -C -T` patterns parsed, resolved against the
//! symbol tables of every module in the session map (and the PLT entries), and merged into
//! the sorted address ranges the hooks look up.

use super::{size32, Filters, Range, NO_RULE};
use record_format::demangle::{demangle, Demangle};
use record_format::maps::MapEntry;
use record_format::pattern::{MatchType, NameMatcher};
use record_format::trigger::{parse_trigger, Actions};

/// One pattern with its actions (`-F x` is `x@filter`, and so on).
#[derive(Debug)]
pub(super) struct Spec {
    pub(super) matcher: NameMatcher,
    pub(super) module: Option<String>,
    pub(super) actions: Actions,
}

/// Parses the recorder's `;`-separated trigger list (`UTRACE_TRIGGER`).
pub(super) fn parse_specs(list: &str, ty: MatchType) -> Vec<Spec> {
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
pub(super) fn build(
    modules: &[MapEntry],
    plt: &[(usize, &str)],
    specs: &[Spec],
    set: &Settings,
) -> Filters {
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
