//! Where the displaced instructions of each fully patched function run: the dynamic entry
//! handler (`entry::dyn_entry`) looks its `child_ip` (the return address of the patched
//! `call`) up here on every call, so the lookup takes no lock and allocates nothing.
//!
//! Each patched module publishes one sorted table, never changed or freed afterwards (a
//! thread may be between the patched `call` and the lookup at any time, even after the
//! function was reverted): the slot is written first, then the count is raised with
//! `Release`, which pairs with the `Acquire` load in [`lookup`].

use core::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};
use std::sync::Mutex;

/// Most modules with fully patched functions (a module past it is not patched).
pub const MAX_TABLES: usize = 256;

/// One module's `(child_ip, out_of_line)` pairs, sorted by `child_ip`.
struct Table {
    lo: usize,
    hi: usize,
    entries: Box<[(usize, usize)]>,
}

static TABLES: [AtomicPtr<Table>; MAX_TABLES] =
    [const { AtomicPtr::new(core::ptr::null_mut()) }; MAX_TABLES];
static COUNT: AtomicUsize = AtomicUsize::new(0);
/// Serialises the writers (the constructor, `dlopen`s of several threads).
static WRITER: Mutex<()> = Mutex::new(());

/// Publishes `entries` (unsorted) of the module loaded at `[lo, hi)`, in the slot of a
/// withdrawn table if there is one; `false` when the table of tables is full. Older tables of that range (a library unloaded, then another
/// loaded there) are withdrawn: nothing runs their code any more, and their entries would
/// shadow the new ones.
pub fn publish(mut entries: Vec<(usize, usize)>, (lo, hi): (usize, usize)) -> bool {
    if entries.is_empty() {
        return true;
    }
    entries.sort_unstable();
    let table = Box::new(Table {
        lo: entries[0].0,
        hi: entries[entries.len() - 1].0,
        entries: entries.into_boxed_slice(),
    });
    let _held = WRITER.lock().unwrap_or_else(|e| e.into_inner());
    let n = COUNT.load(Ordering::Relaxed);
    let mut free = None;
    for (i, slot) in TABLES.iter().enumerate().take(n) {
        // SAFETY: published tables are leaked boxes, never freed or changed.
        let old = unsafe { slot.load(Ordering::Relaxed).as_ref() };
        if old.is_some_and(|t| t.lo < hi && t.hi >= lo) {
            // Withdrawn, not freed: a reader may still hold it.
            slot.store(core::ptr::null_mut(), Ordering::Release);
        }
        if free.is_none() && slot.load(Ordering::Relaxed).is_null() {
            free = Some(i);
        }
    }
    // Leaked on purpose: readers may hold it for the rest of the process.
    let table = Box::into_raw(table);
    match free {
        // A withdrawn table's slot (libraries loaded and unloaded again and again): the
        // Release store pairs with the Acquire load of the slot in `lookup`.
        Some(i) => TABLES[i].store(table, Ordering::Release),
        None if n < MAX_TABLES => {
            TABLES[n].store(table, Ordering::Release);
            // Pairs with the Acquire load in `lookup`: the slot and the table are visible first.
            COUNT.store(n + 1, Ordering::Release);
        }
        None => {
            // SAFETY: `table` was just made by Box::into_raw and never shared.
            drop(unsafe { Box::from_raw(table) });
            return false;
        }
    }
    true
}

/// The out-of-line address of the patched function whose `call` returns to `child_ip`.
#[inline]
pub fn lookup(child_ip: usize) -> Option<usize> {
    let n = COUNT.load(Ordering::Acquire);
    for slot in TABLES.iter().take(n) {
        let t = slot.load(Ordering::Acquire);
        // SAFETY: published tables are leaked boxes, never freed or changed.
        let Some(t) = (unsafe { t.as_ref() }) else {
            continue;
        };
        if child_ip < t.lo || child_ip > t.hi {
            continue;
        }
        let found = t.entries.binary_search_by_key(&child_ip, |e| e.0).ok();
        if let Some(e) = found.and_then(|i| t.entries.get(i)) {
            return Some(e.1);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn published_entries_are_found() {
        assert!(publish(
            vec![(0x5000, 0x9000), (0x1000, 0x8000)],
            (0x1000, 0x6000)
        ));
        assert!(publish(vec![(0x7_0000, 0x7_1000)], (0x7_0000, 0x7_8000)));
        assert_eq!(lookup(0x1000), Some(0x8000));
        assert_eq!(lookup(0x5000), Some(0x9000));
        assert_eq!(lookup(0x7_0000), Some(0x7_1000));
        assert_eq!(lookup(0x3000), None);
        assert_eq!(lookup(0x6_0000), None);
        // Another module loaded where the first one was.
        assert!(publish(vec![(0x2000, 0xa000)], (0x1000, 0x6000)));
        assert_eq!(lookup(0x1000), None);
        assert_eq!(lookup(0x2000), Some(0xa000));
        assert_eq!(lookup(0x7_0000), Some(0x7_1000));
    }

    #[test]
    fn a_library_loaded_again_and_again_reuses_its_slot() {
        let range = (0x100_0000, 0x100_8000);
        for k in 0..(MAX_TABLES + 50) {
            assert!(publish(vec![(0x100_0010, 0x200_0000 + k)], range), "{k}");
            assert_eq!(lookup(0x100_0010), Some(0x200_0000 + k));
        }
        assert!(COUNT.load(Ordering::Relaxed) < MAX_TABLES);
    }
}
