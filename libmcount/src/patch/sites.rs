//! Each function's patch site: which functions of a module are patched and how (per module
//! kind, see the parent module), the code written for them, and their original bytes, kept
//! for [`revert`].

use super::module::{self, Analysis, Func, Kind, Loaded};
use super::{debug, reloc, table, text, Pattern, Settings, Stats, MIN_SIZE};
use std::sync::Mutex;

/// A patched site, its original bytes, what was written over them, and the length of the
/// instruction written at its head.
struct Original {
    site: usize,
    bytes: Vec<u8>,
    written: Vec<u8>,
    head_len: usize,
}

static ORIGINALS: Mutex<Vec<Original>> = Mutex::new(Vec::new());
/// The decision of the last pattern matching one of `f`'s names.
pub(super) fn decide(pats: &[&Pattern], f: &Func) -> Option<bool> {
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

pub(super) fn patch_module(
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
                .filter(|w| !holds_stopped_thread(s, w.site, w.head.len()))
                .collect();
            write_all(m, writes, concurrent, &mut stats);
            // NOPed calls are not counted as patched functions.
            stats.patched = 0;
            return stats;
        }
        Kind::None | Kind::Patchable | Kind::FentryNop => {}
    }
    let min = s.min_size.max(MIN_SIZE) as usize;
    // Each chosen function with its index in `a.funcs`.
    let mut chosen: Vec<(usize, &Func)> = Vec::new();
    let has_nop = |f: &Func| {
        let b = f.bytes().get(f.skip()..).unwrap_or_default();
        module::NOPS5.iter().any(|n| b.starts_with(n))
    };
    // Start-up code, and in the NOP kinds functions built without the NOP, are not counted
    // (uftrace's totals leave them out).
    let counted = a
        .funcs
        .iter()
        .enumerate()
        .filter(|(_, f)| !module::excluded(f.name()) && (a.kind == Kind::None || has_nop(f)));
    for (i, f) in counted {
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
            Some(true) => chosen.push((i, f)),
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
    // Full dynamic patching: one linear decode of every function, for the branches into
    // other functions and into the displaced bytes of its own.
    let decoder = (a.kind == Kind::None).then(reloc::Decoder::new).flatten();
    let scans: Vec<reloc::Scan> = match &decoder {
        Some(d) => a
            .funcs
            .iter()
            .map(|f| d.scan(f.bytes(), f.addr as u64))
            .collect(),
        None => Vec::new(),
    };
    let mut jumped_into: Vec<u64> = scans
        .iter()
        .zip(&a.funcs)
        .flat_map(|(scan, f)| scan.leaving(f.addr as u64, f.size))
        .collect();
    // A function that starts inside another's first bytes (assembly falling through into a
    // second entry point) is reached through its own address, by pointer or by name: the
    // other's displaced bytes are off limits as for a jump.
    if !scans.is_empty() {
        jumped_into.extend(a.funcs.iter().map(|f| f.addr as u64));
    }
    jumped_into.sort_unstable();
    let mut writes = Vec::new();
    let mut entries = Vec::new();
    for (i, f) in chosen {
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
            let r = match &decoder {
                Some(d) => d.relocate(f.bytes(), f.addr as u64, skip, dest as u64, scans.get(i)),
                None => Err(reloc::Refusal::Unsupported("no disassembler".into())),
            };
            let r = match r {
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
    if !near.freeze() {
        stats.failed += writes.len();
        return stats;
    }
    if !table::publish(entries, (m.lo, m.hi)) {
        crate::log::error(
            b"too many modules patched at once: a library is left unpatched (-P)",
            0,
        );
        stats.failed += writes.len();
        return stats;
    }
    write_all(m, writes, concurrent, &mut stats);
    stats
}

/// Whether a stopped thread's instruction pointer lies in `[site, site + len)`.
fn holds_stopped_thread(s: &Settings<'_>, site: usize, len: usize) -> bool {
    s.avoid
        .iter()
        .any(|&ip| ip as usize >= site && (ip as usize) < site + len)
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
                let mut written = w.head.clone();
                written.extend_from_slice(&w.tail);
                originals.push(Original {
                    site: w.site,
                    bytes: before,
                    written,
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

/// Puts every site written back as it was (see `super::revert_all`).
pub(super) fn revert() {
    let mut originals = ORIGINALS.lock().unwrap_or_else(|e| e.into_inner());
    let loaded = module::loaded();
    for o in originals.drain(..).rev() {
        // A library unloaded since (`dlclose`) has nothing to put back, and another one loaded
        // at its address since must be left alone: the site must still hold what was written.
        if !loaded.iter().any(|m| m.in_text(o.site, o.bytes.len())) {
            continue;
        }
        // SAFETY: the range lies in the text of a module loaded now (readable).
        let now = unsafe { core::slice::from_raw_parts(o.site as *const u8, o.written.len()) };
        if now != o.written.as_slice() {
            continue;
        }
        let Some(open) = text::Writable::open(o.site, o.site + o.bytes.len()) else {
            continue;
        };
        // SAFETY: the site was written by `write_all` in a module still loaded, its pages
        // made writable again.
        let _ = unsafe { text::restore_site(o.site, &o.bytes, o.head_len, false) };
        drop(open);
    }
}
