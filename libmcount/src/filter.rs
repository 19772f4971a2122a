//! Record-time filters: `-F` (only these functions and their callees), `-N` (not these
//! subtrees), `-D` (depth, counted from the `-F` function) and `-t` (drop calls shorter than a
//! threshold). cli.md §3.1: the semantics are replay's, applied while recording, so that
//! `uftrace replay` of the data shows what it shows for uftrace's own filtered recording.
//!
//! The session constructor resolves the patterns once against the symbol tables of every
//! module in the session map (the same demangled names the analysis commands match) into a
//! sorted table of address ranges. Hooks then only look addresses up. Functions that are
//! neither recorded nor change a filter counter are not hooked at all, which keeps filtered
//! recordings cheap.
//!
//! Per-thread state ([`FilterState`]) counts the `-F` and `-N` functions on the shadow stack
//! and the recorded frames (the depth written into records, as uftrace does: a `-F` function
//! is at depth 0). With `-t`, ENTRY records wait in their frames (`PENDING`) until a call
//! turns out long enough: then the pending entries of its ancestors, its own and its EXIT are
//! written in order.

use record_format::demangle::{demangle, Demangle};
use record_format::maps::MapEntry;
use record_format::pattern::{split_module, MatchType, NameMatcher};
use std::sync::OnceLock;

/// `Frame::flags` bits set by the filters.
pub mod flags {
    /// Hooked only to keep a filter counter: no records.
    pub const NORECORD: u16 = 1;
    /// A `-F` function: decrements `in_count` on exit.
    pub const IN: u16 = 2;
    /// A `-N` function: decrements `out_count` on exit.
    pub const OUT: u16 = 4;
    /// ENTRY record not written yet (`-t`).
    pub const PENDING: u16 = 8;
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    In,
    Out,
}

/// The session's filters.
#[derive(Debug, Default)]
pub struct Filters {
    /// Sorted, non-overlapping `[start, end)` ranges of matched functions.
    ranges: Vec<(u64, u64, Kind)>,
    /// Any `-F`: functions outside an `-F` subtree are not recorded.
    pub has_in: bool,
    /// `-D`, counted from the innermost `-F` function (or from the top).
    pub depth: u32,
    /// `-t` in nanoseconds (0: none).
    pub threshold: u64,
}

static FILTERS: OnceLock<Filters> = OnceLock::new();

/// The session's filters, if any are active.
#[inline]
pub fn get() -> Option<&'static Filters> {
    FILTERS.get()
}

impl Filters {
    /// The filter kind of the function containing `addr`.
    pub fn lookup(&self, addr: u64) -> Option<Kind> {
        let i = self.ranges.partition_point(|r| r.0 <= addr);
        let r = self.ranges.get(i.checked_sub(1)?)?;
        (addr < r.1).then_some(r.2)
    }
}

/// One `-F`/`-N` pattern (`!` prefix = `-N`, as in the `UTRACE_FILTER` list).
#[derive(Debug)]
struct Spec {
    matcher: NameMatcher,
    module: Option<String>,
    kind: Kind,
}

fn parse_specs(list: &str, ty: MatchType) -> Vec<Spec> {
    list.split(';')
        .filter(|s| !s.is_empty())
        .map(|s| {
            let (kind, s) = match s.strip_prefix('!') {
                Some(rest) => (Kind::Out, rest),
                None => (Kind::In, s),
            };
            // A trailing `@depth=N` style suffix is not part of -F/-N.
            let (name, module) = split_module(s);
            Spec {
                matcher: NameMatcher::new(name, ty),
                module: module.map(str::to_string),
                kind,
            }
        })
        .collect()
}

fn basename(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// Function symbols of the ELF file `path` loaded at `start`: `(address, size, name)`.
fn module_functions(module: &MapEntry) -> Vec<(u64, u64, String)> {
    use goblin::elf::{header::ET_DYN, program_header::PT_LOAD, sym::STT_FUNC, Elf};
    let Ok(bytes) = std::fs::read(&module.path) else {
        return Vec::new();
    };
    let Ok(elf) = Elf::parse(&bytes) else {
        return Vec::new();
    };
    let bias = if elf.header.e_type == ET_DYN {
        let first = elf
            .program_headers
            .iter()
            .filter(|p| p.p_type == PT_LOAD)
            .map(|p| p.p_vaddr & !0xfff)
            .min()
            .unwrap_or(0);
        module.start.wrapping_sub(first)
    } else {
        0
    };
    let mut out = Vec::new();
    for (syms, strtab) in [(&elf.syms, &elf.strtab), (&elf.dynsyms, &elf.dynstrtab)] {
        for sym in syms.iter() {
            if sym.st_type() != STT_FUNC || sym.st_value == 0 || sym.st_size == 0 {
                continue;
            }
            if let Some(name) = strtab.get_at(sym.st_name) {
                out.push((
                    bias.wrapping_add(sym.st_value),
                    sym.st_size,
                    name.to_string(),
                ));
            }
        }
    }
    out
}

/// Builds the session's filters from the recorder's settings (library constructor; `std`
/// and allocation are fine there). `modules` are the session map's entries.
pub fn init(modules: &[MapEntry], list: &str, ty: MatchType, depth: u32, threshold: u64) {
    let specs = parse_specs(list, ty);
    let mut ranges = Vec::new();
    if !specs.is_empty() {
        for m in modules.iter().filter(|m| !m.is_stack()) {
            let base = basename(&m.path);
            let wanted: Vec<&Spec> = specs
                .iter()
                .filter(|s| {
                    s.module
                        .as_deref()
                        .is_none_or(|want| base.starts_with(want))
                })
                .collect();
            if wanted.is_empty() {
                continue;
            }
            for (addr, size, raw) in module_functions(m) {
                let name = demangle(&raw, Demangle::Simple);
                // The last matching pattern wins, as on the command line.
                if let Some(s) = wanted.iter().rev().find(|s| s.matcher.matches(&name)) {
                    ranges.push((addr, addr + size, s.kind));
                }
            }
        }
        ranges.sort_by_key(|r| r.0);
        ranges.dedup_by_key(|r| r.0);
    }
    let _ = FILTERS.set(Filters {
        has_in: specs.iter().any(|s| s.kind == Kind::In),
        ranges,
        depth,
        threshold,
    });
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
    /// `recorded` when the innermost `-F` function was entered (where `-D` counts from).
    pub base: u32,
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
    /// The decision for a function at `addr`.
    pub fn decide(&self, f: &Filters, addr: u64) -> Decision {
        let kind = f.lookup(addr);
        let in_count = self.in_count + (kind == Some(Kind::In)) as u32;
        let out_count = self.out_count + (kind == Some(Kind::Out)) as u32;
        let base = if kind == Some(Kind::In) {
            self.recorded
        } else {
            self.base
        };
        let record = (!f.has_in || in_count > 0)
            && out_count == 0
            && self.recorded.saturating_sub(base) < f.depth;
        let mut fl = match kind {
            Some(Kind::In) => flags::IN,
            Some(Kind::Out) => flags::OUT,
            None => 0,
        };
        if !record {
            if fl == 0 {
                return Decision::Skip;
            }
            fl |= flags::NORECORD;
        } else if f.threshold > 0 {
            fl |= flags::PENDING;
        }
        Decision::Hook(fl)
    }

    /// Counts a frame pushed with `fl`; returns the value to keep in the frame's `base` field
    /// and the record depth.
    pub fn push(&mut self, fl: u16) -> (u16, u32) {
        let saved = self.base as u16;
        if fl & flags::IN != 0 {
            self.in_count += 1;
            self.base = self.recorded;
        }
        if fl & flags::OUT != 0 {
            self.out_count += 1;
        }
        let depth = self.recorded;
        if fl & flags::NORECORD == 0 {
            self.recorded += 1;
        }
        (saved, depth)
    }

    /// Uncounts a frame popped with `fl` and `saved` base.
    pub fn pop(&mut self, fl: u16, saved: u16) {
        if fl & flags::NORECORD == 0 {
            self.recorded = self.recorded.saturating_sub(1);
        }
        if fl & flags::IN != 0 {
            self.in_count = self.in_count.saturating_sub(1);
            self.base = saved as u32;
        }
        if fl & flags::OUT != 0 {
            self.out_count = self.out_count.saturating_sub(1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn filters(ranges: Vec<(u64, u64, Kind)>, depth: u32, threshold: u64) -> Filters {
        Filters {
            has_in: ranges.iter().any(|r| r.2 == Kind::In),
            ranges,
            depth,
            threshold,
        }
    }

    #[test]
    fn lookup_by_range() {
        let f = filters(vec![(10, 20, Kind::In), (30, 40, Kind::Out)], 99, 0);
        assert_eq!(f.lookup(9), None);
        assert_eq!(f.lookup(10), Some(Kind::In));
        assert_eq!(f.lookup(19), Some(Kind::In));
        assert_eq!(f.lookup(20), None);
        assert_eq!(f.lookup(35), Some(Kind::Out));
    }

    #[test]
    fn filter_in_out_and_depth() {
        // main(0) -> b(10: -F) -> c(50) -> d(60) -> e(70), and x(30: -N) under b.
        let f = filters(vec![(10, 20, Kind::In), (30, 40, Kind::Out)], 2, 0);
        let mut s = FilterState::default();
        assert_eq!(s.decide(&f, 0), Decision::Skip); // main: outside -F
        let Decision::Hook(fb) = s.decide(&f, 10) else {
            panic!()
        };
        assert_eq!(fb, flags::IN);
        let (saved_b, depth_b) = s.push(fb);
        assert_eq!(depth_b, 0);
        let Decision::Hook(fc) = s.decide(&f, 50) else {
            panic!()
        };
        let (saved_c, depth_c) = s.push(fc);
        assert_eq!(depth_c, 1);
        assert_eq!(s.decide(&f, 60), Decision::Skip); // -D 2 from b
        s.pop(fc, saved_c);
        let Decision::Hook(fx) = s.decide(&f, 30) else {
            panic!()
        };
        assert_eq!(fx, flags::OUT | flags::NORECORD);
        let (saved_x, _) = s.push(fx);
        assert_eq!(s.decide(&f, 50), Decision::Skip); // under -N
        s.pop(fx, saved_x);
        s.pop(fb, saved_b);
        assert_eq!((s.in_count, s.out_count, s.recorded, s.base), (0, 0, 0, 0));
    }

    #[test]
    fn threshold_marks_entries_pending() {
        let f = filters(vec![], u32::MAX, 1000);
        assert_eq!(
            FilterState::default().decide(&f, 5),
            Decision::Hook(flags::PENDING)
        );
    }

    #[test]
    fn specs_and_symbols_of_this_test_binary() {
        let specs = parse_specs("main;!fo.*@libc;x@", MatchType::Regex);
        assert_eq!(specs.len(), 3);
        assert_eq!(specs[1].kind, Kind::Out);
        assert_eq!(specs[1].module.as_deref(), Some("libc"));
        assert!(specs[2].module.is_none());
        let exe = std::fs::read_link("/proc/self/exe").unwrap();
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        let start = maps
            .lines()
            .find(|l| l.ends_with(exe.to_str().unwrap()))
            .and_then(|l| u64::from_str_radix(l.split('-').next()?, 16).ok())
            .unwrap();
        let m = MapEntry {
            start,
            end: u64::MAX,
            perms: "r-xp".into(),
            path: exe.to_string_lossy().into_owned(),
            build_id: None,
        };
        let funcs = module_functions(&m);
        let me = specs_and_symbols_of_this_test_binary as *const () as u64;
        assert!(
            funcs.iter().any(|&(a, s, _)| a <= me && me < a + s),
            "this function's address {me:#x} not found among {} symbols",
            funcs.len()
        );
    }
}
