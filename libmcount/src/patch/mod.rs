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
mod sites;
pub mod table;
pub mod text;

use core::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};
use module::{Kind, Loaded};
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

/// Sets the `dynamic` domain's debug level (1 to 3: what `-v` prints; 0: nothing), as
/// `UTRACE_PATCH_DEBUG` does for [`init`].
pub fn set_debug(level: i32) {
    DEBUG.store(level.clamp(0, 3), Ordering::Relaxed);
}

fn debug(level: i32, msg: impl FnOnce() -> String) {
    if DEBUG.load(Ordering::Relaxed) >= level {
        crate::log::raw(format!("dynamic: {}\n", msg()).as_bytes());
    }
}

/// Modules already handled (by load bias and path), so each is patched once.
static DONE: Mutex<Vec<(usize, String)>> = Mutex::new(Vec::new());
/// The constructor's settings, for modules loaded later.
static LATER: OnceLock<(String, MatchType, u64)> = OnceLock::new();
/// Some pattern names a library.
static WANTS_LIBRARIES: AtomicBool = AtomicBool::new(false);
/// [`module::generation`] when modules were last patched.
static SEEN: AtomicU64 = AtomicU64::new(0);

/// Session start: patches what `UTRACE_PATCH` selects. `var` reads the session's settings
/// (the environment, or an attach file); `avoid` as in [`Settings`].
pub fn init(var: &dyn Fn(&str) -> Option<String>, avoid: &[u64]) {
    let Some(patterns) = var(env::PATCH) else {
        return;
    };
    if let Some(level) = var(env::PATCH_DEBUG).and_then(|l| l.trim().parse::<i32>().ok()) {
        set_debug(level);
    }
    let match_type = match var(env::PATTERN).as_deref() {
        Some("glob") => MatchType::Glob,
        _ => MatchType::Regex,
    };
    let min_size = var(env::SIZE)
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(0);
    apply(&Settings {
        patterns: &patterns,
        match_type,
        min_size,
        avoid,
    });
}

/// Patches every loaded module the patterns select that was not patched before (no other
/// thread runs, or they are stopped outside of `settings.avoid`). The first settings given
/// are kept for the libraries loaded later ([`loaded_later`]).
pub fn apply(settings: &Settings<'_>) -> Stats {
    let later = LATER.get_or_init(|| {
        (
            settings.patterns.to_string(),
            settings.match_type,
            settings.min_size,
        )
    });
    let libraries = later.0.split(';').any(|i| split_module(i).1.is_some());
    WANTS_LIBRARIES.store(libraries, Ordering::Relaxed);
    SEEN.store(module::generation(), Ordering::Relaxed);
    apply_with(settings, false)
}

/// The `dlopen` hook: patches the modules loaded since, with the constructor's settings
/// (other threads may run).
pub fn loaded_later() {
    // Nothing loaded or unloaded since the last look: nothing to do (`dlsym` calls it often).
    let generation = module::generation();
    if SEEN.swap(generation, Ordering::AcqRel) == generation {
        return;
    }
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
    WANTS_LIBRARIES.load(Ordering::Relaxed)
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
        let stats = sites::patch_module(&m, &a, &mine, settings, concurrent);
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

/// Puts every patched function's original bytes back (each site's first instruction at
/// once, as it was written; a site that cannot be written so is written anyway: callers stop
/// the other threads first). Stubs, moved code and tables stay mapped: frames may still be
/// running them, and a thread stopped between a patched `call` and its table lookup still
/// finds its entry. The modules may be patched again by a later [`apply`].
pub fn revert_all() {
    let mut done = DONE.lock().unwrap_or_else(|e| e.into_inner());
    sites::revert();
    done.clear();
}

#[cfg(test)]
mod tests {
    use super::module::Func;
    use super::sites::decide;
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
