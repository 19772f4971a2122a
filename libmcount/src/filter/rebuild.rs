//! The session's filters built again after a `dlopen` that changed the loaded objects, so
//! that patterns and `-Z` name the functions of the libraries loaded since start-up and, with
//! `--nest-libcall`, their library calls (beyond uftrace 0.13, whose filters hold the functions
//! of the modules loaded at start-up only).
//!
//! A rebuild happens only when the set of objects the dynamic linker reports changed (its
//! load and unload counts, `dlpi_adds + dlpi_subs`) or more PLT entries are hooked, and reads
//! only those objects' files (see `build`): never the other files the program maps. One
//! thread builds at a time; no lock is held that a `fork` could leave taken in the child.

use super::{build, install, parse_specs, Settings};
use core::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::SeqCst};
use record_format::pattern::MatchType;
use std::sync::OnceLock;

/// What the session's filters were built from, when they name functions (patterns, `-Z`):
/// kept to build them again over the libraries `dlopen` loads ([`after_dlopen`]).
pub(super) struct Kept {
    pub triggers: String,
    pub match_type: MatchType,
    pub depth: u32,
    pub threshold: u64,
    pub size: u64,
}

static KEPT: OnceLock<Kept> = OnceLock::new();

/// The loader's load and unload count (see `dlopen::loaded`) and the number of hooked PLT
/// entries the installed filters were built over.
static BUILT_VERSION: AtomicU64 = AtomicU64::new(0);
static BUILT_ENTRIES: AtomicUsize = AtomicUsize::new(0);
/// A thread is building (the others leave the work to it, see [`after_dlopen`]).
static BUSY: AtomicBool = AtomicBool::new(false);
/// A rebuild was asked for since the building thread last looked.
static ASKED: AtomicBool = AtomicBool::new(false);

/// The number of PLT entries hooked now.
fn entries() -> usize {
    crate::plt::get().map_or(0, |p| p.functions().len())
}

/// Session start: keeps what the filters were built from, and what they were built over.
pub(super) fn keep(k: Kept, plt_entries: usize) {
    BUILT_VERSION.store(crate::dlopen::loaded().0, SeqCst);
    BUILT_ENTRIES.store(plt_entries, SeqCst);
    let _ = KEPT.set(k);
}

/// After a `dlopen` (or before a `dlsym`): when the loaded objects or the hooked PLT entries
/// changed, the session's filters built again over the objects loaded now and installed in
/// place of the old ones (which stay allocated: hooks may be reading them). Nothing without
/// patterns or `-Z`, nor under the agent (`-g`), which installs filters of its own.
///
/// A thread that finds another one building only asks it to look again, and returns: the
/// builder looks at the objects loaded after the request. A `fork` in the middle leaves
/// `BUSY` set in the child, which [`fork_child`] clears.
pub fn after_dlopen() {
    let Some(k) = KEPT.get() else {
        return;
    };
    ASKED.store(true, SeqCst);
    loop {
        if BUSY.compare_exchange(false, true, SeqCst, SeqCst).is_err() {
            return;
        }
        while ASKED.swap(false, SeqCst) {
            rebuild(k);
        }
        BUSY.store(false, SeqCst);
        // A request made after the last look but before `BUSY` dropped found it set and left
        // the work here: look again.
        if !ASKED.load(SeqCst) {
            return;
        }
    }
}

/// Whether filters are built again after a `dlopen` (patterns or `-Z`, no agent).
pub fn kept() -> bool {
    KEPT.get().is_some()
}

/// In the child after `fork`: the thread that was building, if any, is not there.
pub fn fork_child() {
    BUSY.store(false, SeqCst);
}

/// [`after_dlopen`]'s work, by the one building thread.
fn rebuild(k: &Kept) {
    let (version, _) = crate::dlopen::loaded();
    let n = entries();
    if version != 0 && version == BUILT_VERSION.load(SeqCst) && n == BUILT_ENTRIES.load(SeqCst) {
        return;
    }
    let set = Settings {
        triggers: &k.triggers,
        match_type: k.match_type,
        depth: k.depth,
        threshold: k.threshold,
        size: k.size,
        ..Settings::default()
    };
    let specs = parse_specs(&k.triggers, k.match_type);
    let maps = crate::session::current_maps();
    let filters =
        crate::session::with_targets(&maps, |modules, plt| build(modules, plt, &specs, &set));
    install(filters, true);
    BUILT_VERSION.store(version, SeqCst);
    BUILT_ENTRIES.store(n, SeqCst);
}
