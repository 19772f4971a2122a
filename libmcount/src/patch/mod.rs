//! Dynamic patching (`-P`/`-U`, runtime spec §11): functions that were not built with a
//! profiling call get one written into their first bytes at run time.
//!
//! [`init`] (the session constructor, before `main`, one thread) reads `UTRACE_PATCH` and
//! [`apply`]s it to every loaded module a pattern selects: patterns without `@MODULE` select
//! the executable, `FUNC@MODULE` the library whose file name starts with MODULE (uftrace's
//! rule). Per function, the last pattern that matches one of its names decides (`-P` patches,
//! `-U` does not; "the option that comes later overrides"). Per module kind
//! ([`module::Kind`]):
//!
//! - `fpatchable`, `fentry-nop`: the 5-byte NOP at the function's start (after an `endbr64`)
//!   becomes `call stub`, the stub jumps to `__fentry__` (gcc disables IPA-RA for such code,
//!   so the ordinary hook and exit trampolines are right); `child_ip` = site + 5.
//! - `none` (plain `-O2` code): [`reloc`] moves the first instructions to the module's
//!   [`text::Near`] region, the site becomes `call stub` to the dynamic entry trampoline
//!   (`arch::dynamic`) plus NOP padding, and [`table`] maps `child_ip` to the moved code.
//! - `fentry` (`-pg -mfentry`): functions not selected (when some `-P` applies to the module,
//!   or a `-U` names them) get their `call *__fentry__` turned into a NOP, as uftrace does.
//! - `pg` (`-pg`): left alone (uftrace ignores `-P`/`-U` there too).
//!
//! Refused and counted: functions smaller than 6 bytes or `-Z`, those whose return address
//! must stay theirs (`setjmp`, `dlopen`, ...: [`module::never_patched`]), those [`reloc`]
//! refuses, those another function jumps into the middle of, sites that cannot be written
//! atomically while other threads run. Start-up code and `.cold` parts are never considered
//! (nor counted: uftrace's totals leave them out). `-v` (domain `dynamic`) prints the counts
//! per module as uftrace does; level 3 prints each function.
//!
//! Libraries `dlopen`ed later are patched by [`loaded_later`], from the `dlopen` hook.
//! [`revert_all`] puts the original bytes back (stubs, moved code and tables stay: frames may
//! still run them).

pub mod module;
pub mod reloc;
pub mod table;
pub mod text;

use core::sync::atomic::{AtomicI32, Ordering};
use module::{Analysis, Func, Kind, Loaded};
use record_format::env;
use record_format::pattern::{split_module, MatchType, NameMatcher};
use std::sync::{Mutex, OnceLock};

/// Smallest function patched (uftrace's), raised by `-Z`.
pub const MIN_SIZE: u64 = 6;

/// What to patch.
#[derive(Debug, Clone, Copy)]
pub struct Settings<'a> {
    /// `UTRACE_PATCH`'s syntax: `;`-separated `+PATTERN` / `-PATTERN`, command-line order.
    pub patterns: &'a str,
    pub match_type: MatchType,
    /// `-Z`: functions smaller than this are skipped (at least [`MIN_SIZE`]).
    pub min_size: u64,
    /// Instruction addresses of stopped threads: a function whose patched bytes hold one is
    /// skipped.
    pub avoid: &'a [u64],
}

/// Counts of one [`apply`] (uftrace's "dynamic patch stats").
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Stats {
    pub patched: usize,
    pub failed: usize,
    pub skipped: usize,
    pub no_match: usize,
}

impl Stats {
    fn add(&mut self, o: Stats) {
        self.patched += o.patched;
        self.failed += o.failed;
        self.skipped += o.skipped;
        self.no_match += o.no_match;
    }
}

/// One `-P`/`-U` item.
struct Pattern {
    patch: bool,
    name: NameMatcher,
    module: Option<String>,
}

fn parse(patterns: &str, ty: MatchType) -> Vec<Pattern> {
    patterns
        .split(';')
        .filter_map(|item| {
            let (patch, rest) = match item.as_bytes().first()? {
                b'+' => (true, &item[1..]),
                b'-' => (false, &item[1..]),
                _ => (true, item),
            };
            let (name, module) = split_module(rest.trim());
            (!name.is_empty()).then(|| Pattern {
                patch,
                name: NameMatcher::new(name, ty),
                module: module.map(str::to_string),
            })
        })
        .collect()
}

impl Pattern {
    fn applies_to(&self, m: &Loaded) -> bool {
        match &self.module {
            None => m.is_exe,
            Some(name) => m.basename().starts_with(name.as_str()),
        }
    }
}

/// The `dynamic` domain's debug level.
static DEBUG: AtomicI32 = AtomicI32::new(0);

fn debug(level: i32, msg: impl FnOnce() -> String) {
    if DEBUG.load(Ordering::Relaxed) >= level {
        crate::log::raw(format!("dynamic: {}\n", msg()).as_bytes());
    }
}

/// A patched site, its original bytes, and the length of the instruction written at its head.
struct Original {
    site: usize,
    bytes: Vec<u8>,
    head_len: usize,
}

static ORIGINALS: Mutex<Vec<Original>> = Mutex::new(Vec::new());
/// Modules already handled (by load bias and path), so each is patched once.
static DONE: Mutex<Vec<(usize, String)>> = Mutex::new(Vec::new());
/// The constructor's settings, for modules loaded later.
static LATER: OnceLock<(String, MatchType, u64)> = OnceLock::new();

/// Session constructor: patches what `UTRACE_PATCH` selects.
pub fn init() {
    let Ok(patterns) = std::env::var(env::PATCH) else {
        return;
    };
    if let Some(level) = std::env::var(env::PATCH_DEBUG)
        .ok()
        .and_then(|l| l.trim().parse::<i32>().ok())
    {
        DEBUG.store(level.min(3), Ordering::Relaxed);
    }
    let match_type = match std::env::var(env::PATTERN).as_deref() {
        Ok("glob") => MatchType::Glob,
        _ => MatchType::Regex,
    };
    let min_size = std::env::var(env::SIZE)
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(0);
    let _ = LATER.set((patterns.clone(), match_type, min_size));
    apply(&Settings {
        patterns: &patterns,
        match_type,
        min_size,
        avoid: &[],
    });
}

/// Patches every loaded module the patterns select that was not patched before (no other
/// thread runs, or they are stopped outside of `settings.avoid`).
pub fn apply(settings: &Settings<'_>) -> Stats {
    apply_with(settings, false)
}

/// The `dlopen` hook: patches the modules loaded since, with the constructor's settings
/// (other threads may run).
pub fn loaded_later() {
    if let Some((patterns, match_type, min_size)) = LATER.get() {
        apply_with(
            &Settings {
                patterns,
                match_type: *match_type,
                min_size: *min_size,
                avoid: &[],
            },
            true,
        );
    }
}

/// Whether a pattern names a library (then `dlopen`ed ones may need patching at once).
pub fn wants_libraries() -> bool {
    LATER
        .get()
        .is_some_and(|(p, ..)| p.split(';').any(|i| split_module(i).1.is_some()))
}

fn apply_with(settings: &Settings<'_>, concurrent: bool) -> Stats {
    let pats = parse(settings.patterns, settings.match_type);
    let mut total = Stats::default();
    if pats.is_empty() {
        return total;
    }
    let mut done = DONE.lock().unwrap_or_else(|e| e.into_inner());
    let loaded = module::loaded();
    // A module unloaded since (`dlclose`) is patched again if it comes back.
    done.retain(|(b, p)| loaded.iter().any(|m| m.bias == *b && m.path == *p));
    for m in loaded {
        let mine: Vec<&Pattern> = pats.iter().filter(|p| p.applies_to(&m)).collect();
        if mine.is_empty() || done.iter().any(|(b, p)| *b == m.bias && *p == m.path) {
            continue;
        }
        done.push((m.bias, m.path.clone()));
        let Some(a) = module::analyse(&m) else {
            debug(1, || format!("cannot read the symbols of '{}'", m.path));
            continue;
        };
        let (n, name) = a.kind.describe();
        debug(1, || {
            format!("dynamic patch type: {}: {n} ({name})", m.basename())
        });
        let stats = patch_module(&m, &a, &mine, settings, concurrent);
        if matches!(a.kind, Kind::None | Kind::Patchable | Kind::FentryNop) {
            print_stats(m.basename(), a.kind, &stats);
        }
        total.add(stats);
    }
    total
}

/// uftrace's summary lines for one module.
fn print_stats(module: &str, kind: Kind, s: &Stats) {
    let total = s.patched + s.failed + s.skipped;
    if kind != Kind::None && s.failed == 0 && s.skipped == 0 {
        debug(1, || {
            format!("patched all ({total}) functions in '{module}'")
        });
        return;
    }
    let pct = |n: usize| {
        if total == 0 {
            0.0
        } else {
            n as f64 * 100.0 / total as f64
        }
    };
    debug(1, || format!("dynamic patch stats for '{module}'"));
    debug(1, || format!("   total: {total:8}"));
    debug(1, || {
        format!(" patched: {:8} ({:5.2}%)", s.patched, pct(s.patched))
    });
    debug(1, || {
        format!("  failed: {:8} ({:5.2}%)", s.failed, pct(s.failed))
    });
    debug(1, || {
        format!(" skipped: {:8} ({:5.2}%)", s.skipped, pct(s.skipped))
    });
    debug(1, || format!("no match: {:8}", s.no_match));
}

/// The decision of the last pattern matching one of `f`'s names.
fn decide(pats: &[&Pattern], f: &Func) -> Option<bool> {
    pats.iter()
        .rev()
        .find(|p| f.names.iter().any(|n| p.name.matches(n)))
        .map(|p| p.patch)
}

/// A site to write: `head` at once, then `tail`.
struct Write {
    site: usize,
    head: Vec<u8>,
    tail: Vec<u8>,
    name: String,
}

fn patch_module(
    m: &Loaded,
    a: &Analysis,
    pats: &[&Pattern],
    s: &Settings<'_>,
    concurrent: bool,
) -> Stats {
    let mut stats = Stats::default();
    match a.kind {
        Kind::Pg => return stats,
        Kind::Fentry => {
            let any_patch = pats.iter().any(|p| p.patch);
            let writes: Vec<Write> = a
                .funcs
                .iter()
                .filter(|f| !decide(pats, f).unwrap_or(!any_patch))
                .filter_map(unpatch_fentry)
                .collect();
            write_all(m, writes, concurrent, &mut stats);
            // NOPed calls are not counted as patched functions.
            stats.patched = 0;
            return stats;
        }
        Kind::None | Kind::Patchable | Kind::FentryNop => {}
    }
    let min = s.min_size.max(MIN_SIZE) as usize;
    let mut chosen: Vec<&Func> = Vec::new();
    let has_nop = |f: &Func| {
        let b = f.bytes().get(f.skip()..).unwrap_or_default();
        module::NOPS5.iter().any(|n| b.starts_with(n))
    };
    // Start-up code, and in the NOP kinds functions built without the NOP, are not counted
    // (uftrace's totals leave them out).
    let counted = a
        .funcs
        .iter()
        .filter(|f| !module::excluded(f.name()) && (a.kind == Kind::None || has_nop(f)));
    for f in counted {
        match decide(pats, f) {
            None => stats.no_match += 1,
            Some(false) => {}
            Some(true) if f.size < min => {
                debug(3, || format!("skip {}: smaller than {min} bytes", f.name()));
                stats.skipped += 1;
            }
            Some(true) if f.names.iter().any(|n| module::never_patched(n)) => {
                debug(3, || {
                    format!("skip {}: must keep its return address", f.name())
                });
                stats.skipped += 1;
            }
            Some(true) => chosen.push(f),
        }
    }
    if chosen.is_empty() {
        return stats;
    }
    let per_func = if a.kind == Kind::None {
        reloc::MAX_RELOCATED
    } else {
        0
    };
    let Some(mut near) = text::Near::map(m.lo, m.hi, 2 * text::STUB + chosen.len() * per_func)
    else {
        debug(1, || {
            format!("no room for trampolines near '{}'", m.basename())
        });
        stats.failed += chosen.len();
        return stats;
    };
    let target = if a.kind == Kind::None {
        crate::cpu::dyn_entry_trampoline_addr()
    } else {
        crate::cpu::fentry_addr()
    };
    let Some(stub) = near.stub(target) else {
        stats.failed += chosen.len();
        return stats;
    };
    let jumped_into = if a.kind == Kind::None {
        let mut t: Vec<u64> = a
            .funcs
            .iter()
            .flat_map(|f| reloc::direct_branch_targets(f.bytes(), f.addr as u64))
            .collect();
        t.sort_unstable();
        t
    } else {
        Vec::new()
    };
    let mut writes = Vec::new();
    let mut entries = Vec::new();
    for f in chosen {
        let skip = f.skip();
        let site = f.addr + skip;
        let Some(rel) = text::rel32(site, stub) else {
            stats.failed += 1;
            continue;
        };
        let mut head = vec![0xe8];
        head.extend_from_slice(&rel.to_le_bytes());
        let mut tail = Vec::new();
        if a.kind == Kind::None {
            let Some(dest) = near.reserve(reloc::MAX_RELOCATED) else {
                stats.failed += 1;
                continue;
            };
            let r = match reloc::relocate(f.bytes(), f.addr as u64, skip, dest as u64) {
                Ok(r) => r,
                Err(why) => {
                    debug(3, || format!("  >> FAIL: {} ({why:?})", f.name()));
                    stats.failed += 1;
                    continue;
                }
            };
            let end = (site + r.patch_len) as u64;
            let lo = jumped_into.partition_point(|&t| t <= site as u64);
            if jumped_into.get(lo).is_some_and(|&t| t < end) {
                debug(3, || {
                    format!("  >> FAIL: {} (another function jumps into it)", f.name())
                });
                stats.failed += 1;
                continue;
            }
            debug(3, || {
                format!(
                    "force patch normal func: {} (patch size: {})",
                    f.name(),
                    r.patch_len
                )
            });
            near.put(dest, &r.code);
            entries.push((site + 5, dest));
            tail = vec![0x90; r.patch_len - 5];
        } else {
            debug(3, || format!("patch {}", f.name()));
        }
        let len = head.len() + tail.len();
        if s.avoid
            .iter()
            .any(|&ip| ip as usize >= site && (ip as usize) < site + len)
        {
            debug(3, || {
                format!("skip {}: a stopped thread is in it", f.name())
            });
            entries.retain(|e| e.0 != site + 5);
            stats.skipped += 1;
            continue;
        }
        writes.push(Write {
            site,
            head,
            tail,
            name: f.name().to_string(),
        });
    }
    // The moved code and its table first: a thread may take a patched call at once.
    if !near.freeze() || !table::publish(entries, (m.lo, m.hi)) {
        stats.failed += writes.len();
        return stats;
    }
    write_all(m, writes, concurrent, &mut stats);
    stats
}

/// The NOP write for a `-pg -mfentry` function's `call *__fentry__@GOTPCREL(%rip)`; `None`
/// when the function does not start with one (its GOT word must hold libmcount's
/// `__fentry__`: a function may well start with another indirect call).
fn unpatch_fentry(f: &Func) -> Option<Write> {
    let site = f.addr + f.skip();
    let b = f.bytes().get(f.skip()..f.skip() + 6)?;
    if b[..2] != [0xff, 0x15] {
        return None;
    }
    let disp = i32::from_le_bytes([b[2], b[3], b[4], b[5]]);
    let got = (site as i64 + 6 + disp as i64) as usize;
    let mut word = [0u8; 8];
    if crate::sys::read_self(got, &mut word) != 8
        || usize::from_le_bytes(word) != crate::cpu::fentry_addr()
    {
        return None;
    }
    debug(3, || format!("unpatch {}", f.name()));
    Some(Write {
        site,
        head: vec![0x66, 0x0f, 0x1f, 0x44, 0x00, 0x00],
        tail: Vec::new(),
        name: f.name().to_string(),
    })
}

/// Writes every site, keeping the original bytes for [`revert_all`].
fn write_all(m: &Loaded, writes: Vec<Write>, concurrent: bool, stats: &mut Stats) {
    if writes.is_empty() {
        return;
    }
    let lo = writes.iter().map(|w| w.site).min().unwrap_or(0);
    let hi = writes
        .iter()
        .map(|w| w.site + w.head.len() + w.tail.len())
        .max()
        .unwrap_or(0);
    let Some(open) = text::Writable::open(lo, hi) else {
        debug(1, || format!("cannot write the text of '{}'", m.basename()));
        stats.failed += writes.len();
        return;
    };
    let mut originals = ORIGINALS.lock().unwrap_or_else(|e| e.into_inner());
    for w in writes {
        let len = w.head.len() + w.tail.len();
        // SAFETY: the site lies in the module's text (its function was found there), made
        // writable by `open`.
        let before = unsafe { core::slice::from_raw_parts(w.site as *const u8, len) }.to_vec();
        // SAFETY: as above.
        match unsafe { text::write_site(w.site, &w.head, &w.tail, concurrent) } {
            Ok(()) => {
                originals.push(Original {
                    site: w.site,
                    bytes: before,
                    head_len: w.head.len(),
                });
                stats.patched += 1;
            }
            Err(e) => {
                debug(3, || format!("  >> FAIL: {} ({e:?})", w.name));
                stats.failed += 1;
            }
        }
    }
    drop(open);
}

/// Puts every patched function's original bytes back (each site's first instruction at
/// once, as it was written; a site that cannot be written so is written anyway: callers stop
/// the other threads first). Stubs, moved code and tables stay mapped: frames may still be
/// running them, and a thread stopped between a patched `call` and its table lookup still
/// finds its entry. The modules may be patched again by a later [`apply`].
pub fn revert_all() {
    let mut originals = ORIGINALS.lock().unwrap_or_else(|e| e.into_inner());
    let mut done = DONE.lock().unwrap_or_else(|e| e.into_inner());
    let loaded = module::loaded();
    for o in originals.drain(..).rev() {
        // A library unloaded since (`dlclose`) has nothing to put back.
        let end = o.site + o.bytes.len();
        if !loaded.iter().any(|m| m.in_text(o.site, o.bytes.len())) {
            continue;
        }
        let Some(open) = text::Writable::open(o.site, end) else {
            continue;
        };
        // SAFETY: the site was written by `write_all` in a module still loaded, its pages
        // made writable again.
        let _ = unsafe { text::restore_site(o.site, &o.bytes, o.head_len, false) };
        drop(open);
    }
    done.clear();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn later_patterns_override_earlier_ones() {
        let pats = parse("+.;-a;+ab", MatchType::Regex);
        let refs: Vec<&Pattern> = pats.iter().collect();
        let f = |n: &str| Func {
            addr: 0,
            size: 0,
            names: vec![n.to_string()],
        };
        assert_eq!(decide(&refs, &f("main")), Some(true));
        // A plain name matches exactly, a regex anywhere.
        assert_eq!(decide(&refs, &f("a")), Some(false));
        assert_eq!(decide(&refs, &f("ab")), Some(true));
        let pats = parse("+b;-a", MatchType::Glob);
        let refs: Vec<&Pattern> = pats.iter().collect();
        assert_eq!(decide(&refs, &f("a")), Some(false));
        assert_eq!(decide(&refs, &f("b")), Some(true));
        assert_eq!(decide(&refs, &f("c")), None);
    }

    #[test]
    fn module_patterns_select_libraries_by_name_start() {
        let pats = parse("+.@libfoo;-x", MatchType::Regex);
        let lib = Loaded {
            path: "/tmp/libfoo.so".into(),
            bias: 0,
            text: vec![],
            lo: 0,
            hi: 0,
            is_exe: false,
        };
        let exe = Loaded {
            path: "/tmp/a.out".into(),
            is_exe: true,
            ..lib.clone()
        };
        assert!(pats[0].applies_to(&lib) && !pats[0].applies_to(&exe));
        assert!(pats[1].applies_to(&exe) && !pats[1].applies_to(&lib));
    }
}
