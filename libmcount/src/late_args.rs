//! Argument tables of the PLT entries hooked after start-up: with `--nest-libcall`, the PLTs
//! of the libraries `dlopen` loads ([`crate::plt::after_dlopen`]). The session's table
//! ([`crate::args`]) is built once and never changes; each batch of late entries gets a
//! table of its own, bound by the session's binder (`args::bind`) with the spec lists the
//! session's table was bound with (kept when it is built), and published at the head of a
//! list of immutable tables through an atomic pointer before any GOT slot leads to its
//! entries. [`lookup`] walks that list after the session's table missed: no lock, no
//! allocation. A table is never freed, not even when `dlclose` unloads its library (known
//! limit: a library loaded later at the same address is not hooked again, but its own traced
//! functions would take the items of an old entry whose 16 bytes they start in).

use crate::args::{self, Auto, Entry, FuncArgs};
use core::sync::atomic::{AtomicPtr, Ordering};
use record_format::demangle::{demangle, Demangle};
use std::sync::OnceLock;

/// The binder of the session's spec lists, once the session's table is built.
static BINDER: OnceLock<Binder> = OnceLock::new();

/// One batch's entries, sorted by address, and the batch published before it.
struct Table {
    funcs: Vec<(u64, FuncArgs)>,
    next: *mut Table,
}

/// The newest table (null: none). Tables are leaked: they live as long as the process.
static HEAD: AtomicPtr<Table> = AtomicPtr::new(core::ptr::null_mut());

/// Size of a PLT entry, the range a hooked entry's address covers.
const ENTRY: u64 = 16;

/// The spec lists and automatic specs the session's table was bound with.
pub(crate) struct Binder {
    lists: [Vec<Entry>; 2],
    auto: Auto,
    all_auto: bool,
}

impl Binder {
    /// The items of the PLT entry at `addr` of the function `raw` (demangled `name`), bound
    /// as [`args::init`] binds the session's functions.
    fn bind(&self, addr: u64, raw: &str, name: &str) -> FuncArgs {
        let sym = args::Sym {
            addr,
            raw,
            name,
            module: "PLT",
            plt: true,
        };
        args::bind(&self.lists, &self.auto, self.all_auto, &sym)
    }
}

/// Keeps the session's spec lists (`-A`, `-R`), automatic specs and `-a` for the entries
/// hooked later ([`args::init`], at session start).
pub(crate) fn keep(lists: [Vec<Entry>; 2], auto: Auto, all_auto: bool) {
    let _ = BINDER.set(Binder {
        lists,
        auto,
        all_auto,
    });
}

/// Whether any late table exists.
#[inline]
pub fn any() -> bool {
    !HEAD.load(Ordering::Relaxed).is_null()
}

/// Binds the PLT entries `entries` (address and symbol name) and publishes those with items
/// as one table; returns, per entry, whether it has items (its calls must reach the Rust
/// handler). Called with the PLT's batch lock held, before the entries can be called.
pub fn bind_plt(entries: &[(usize, &str)]) -> Vec<bool> {
    let Some(binder) = BINDER.get() else {
        return vec![false; entries.len()];
    };
    let (funcs, has) = bind_all(binder, entries);
    if !funcs.is_empty() {
        // Batches are added under the PLT's lock, so nobody else moves the head meanwhile;
        // the Release store publishes the table's contents to the hooks' Acquire loads.
        HEAD.store(link(funcs, HEAD.load(Ordering::Acquire)), Ordering::Release);
    }
    has
}

/// The items of each of `entries` that has some, sorted by address; and per entry whether
/// it has items.
fn bind_all(binder: &Binder, entries: &[(usize, &str)]) -> (Vec<(u64, FuncArgs)>, Vec<bool>) {
    let mut funcs = Vec::new();
    let mut has = Vec::with_capacity(entries.len());
    for &(entry, raw) in entries {
        let name = demangle(raw, Demangle::Simple);
        let f = binder.bind(entry as u64, raw, &name);
        let some = !f.args.is_empty() || f.ret.is_some();
        if some {
            funcs.push((entry as u64, f));
        }
        has.push(some);
    }
    funcs.sort_by_key(|(at, _)| *at);
    funcs.dedup_by_key(|(at, _)| *at);
    (funcs, has)
}

/// A new table of `funcs` in front of `next`, leaked (it lives as long as the process).
fn link(funcs: Vec<(u64, FuncArgs)>, next: *mut Table) -> *mut Table {
    Box::into_raw(Box::new(Table { funcs, next }))
}

/// The items of the late entry containing `addr`, if any (hot path: no lock, no allocation).
#[inline]
pub fn lookup(addr: u64) -> Option<&'static FuncArgs> {
    find(HEAD.load(Ordering::Acquire), addr)
}

/// The items of the entry containing `addr` in the list of tables starting at `t`.
#[inline]
fn find(mut t: *mut Table, addr: u64) -> Option<&'static FuncArgs> {
    while !t.is_null() {
        // SAFETY: a non-null pointer in the list is a leaked `Table`, never freed or changed
        // after its Release publication, which the caller's Acquire load of the head pairs
        // with.
        let table: &'static Table = unsafe { &*t };
        let i = table.funcs.partition_point(|(start, _)| *start <= addr);
        if let Some((start, f)) = i.checked_sub(1).and_then(|i| table.funcs.get(i)) {
            if addr < start + ENTRY {
                return Some(f);
            }
        }
        t = table.next;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use record_format::argspec::ItemKind;
    use record_format::pattern::MatchType;

    /// On a list of its own: the process's list stays empty for the other tests.
    #[test]
    fn late_entries_are_found_by_address() {
        let binder = Binder {
            lists: [
                args::entries(
                    "snprintf@arg1/p,arg2/u,arg3/s",
                    ItemKind::Args,
                    MatchType::Regex,
                ),
                args::entries("atoi@retval/d32", ItemKind::Ret, MatchType::Regex),
            ],
            auto: Auto::default(),
            all_auto: false,
        };
        let (funcs, has) = bind_all(
            &binder,
            &[(0x2000, "atoi"), (0x1010, "puts"), (0x1000, "snprintf")],
        );
        assert_eq!(has, [true, false, true]);
        let first = link(funcs, core::ptr::null_mut());
        assert_eq!(find(first, 0x1000).unwrap().args.len(), 3);
        assert_eq!(find(first, 0x100f).unwrap().args.len(), 3);
        assert!(find(first, 0x1010).is_none());
        assert!(find(first, 0x2008).unwrap().ret.is_some());
        // A second batch goes in front of the first; both are found.
        let (funcs, has) = bind_all(&binder, &[(0x3000, "snprintf")]);
        assert_eq!(has, [true]);
        let second = link(funcs, first);
        assert!(find(second, 0x3000).is_some() && find(second, 0x1000).is_some());
        assert!(find(second, 0x4000).is_none());
        assert!(find(core::ptr::null_mut(), 0x1000).is_none());
    }
}
