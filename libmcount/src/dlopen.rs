//! Libraries loaded with `dlopen` (runtime.md §6.10): `-pg` code in them binds to libmcount by
//! itself, so their functions are recorded at once; what the analysis needs is their load
//! address and path, written to `task.txt` as `DLOP` lines (data-format §4.1).
//!
//! `dlopen` is interposed by an assembly stub (`arch`) that calls [`prepare`] and then jumps
//! to the real `dlopen`, so glibc still sees the caller's return address (relative names,
//! `$ORIGIN` and `RUNPATH` are resolved for the caller, not for libmcount). [`prepare`] notes
//! the time of the call; the objects it added are found later by [`scan`], at the next
//! `dlopen` or `dlclose`, at thread exit and at process exit, and stamped with the time of the `dlopen`
//! before them, so that records of their constructors already resolve. With `--nest-libcall`,
//! a `dlopen` of a path (no search, no `$ORIGIN`: the caller glibc sees does not matter) goes
//! through [`open_and_hook`] instead, which hooks the new objects' PLTs as soon as it returns;
//! so does it when `-P FUNC@MODULE` patterns may select a library: the new objects are patched
//! before `dlopen` returns (`patch::loaded_later`), and when record-time filters name
//! functions: they are built again over the new objects (`filter::after_dlopen`). A library
//! loaded by a name that is not a path is patched, and the filters built over it, when the
//! program asks `dlsym` for one of its symbols ([`before_dlsym`], behind the interposed
//! `dlsym`), or at the next `dlopen`.

use crate::{clock, config, sys, tasklog};
use core::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;

/// glibc's `dlopen` and `dlclose`.
static REAL_DLOPEN: AtomicUsize = AtomicUsize::new(0);
static REAL_DLCLOSE: AtomicUsize = AtomicUsize::new(0);
static REAL_DLSYM: AtomicUsize = AtomicUsize::new(0);
/// `dlpi_adds` when the objects were last compared.
static SEEN_ADDS: AtomicU64 = AtomicU64::new(0);
/// Time of the latest `dlopen` call whose objects have not been scanned (0: none).
static CALL_TIME: AtomicU64 = AtomicU64::new(0);
/// Load addresses of the objects known so far (the session map's and the reported ones).
static KNOWN: Mutex<Vec<u64>> = Mutex::new(Vec::new());

/// One loaded object.
struct Object {
    base: u64,
    name: Vec<u8>,
    adds: u64,
    subs: u64,
    /// Where its lowest `PT_LOAD` segment's page is mapped (0: none).
    low: u64,
}

/// Every loaded object with a file name (`dl_iterate_phdr`).
fn objects() -> Vec<Object> {
    unsafe extern "C" fn each(
        info: *mut libc::dl_phdr_info,
        size: libc::size_t,
        data: *mut libc::c_void,
    ) -> libc::c_int {
        // SAFETY: `data` is the `Vec<Object>` passed below; `info` is valid for this call and
        // `size` says whether the `dlpi_adds` field exists.
        let (out, info) = unsafe { (&mut *(data as *mut Vec<Object>), &*info) };
        if info.dlpi_name.is_null() {
            return 0;
        }
        // SAFETY: a non-null `dlpi_name` is a NUL-terminated string owned by the loader.
        let name = unsafe { core::ffi::CStr::from_ptr(info.dlpi_name) }.to_bytes();
        let has_adds = size >= core::mem::offset_of!(libc::dl_phdr_info, dlpi_subs);
        let has_subs = size >= core::mem::offset_of!(libc::dl_phdr_info, dlpi_tls_modid);
        let phdrs: &[libc::Elf64_Phdr] = if info.dlpi_phdr.is_null() {
            &[]
        } else {
            // SAFETY: the loader's program headers of the object, `dlpi_phnum` of them.
            unsafe { core::slice::from_raw_parts(info.dlpi_phdr, info.dlpi_phnum as usize) }
        };
        let low = phdrs
            .iter()
            .filter(|p| p.p_type == libc::PT_LOAD)
            .map(|p| info.dlpi_addr.wrapping_add(p.p_vaddr & !4095))
            .min()
            .unwrap_or(0);
        out.push(Object {
            base: info.dlpi_addr,
            name: name.to_vec(),
            adds: if has_adds { info.dlpi_adds } else { 0 },
            subs: if has_subs { info.dlpi_subs } else { 0 },
            low,
        });
        0
    }
    let mut out: Vec<Object> = Vec::new();
    // SAFETY: the callback matches the expected signature and only uses `out` during the call.
    unsafe {
        libc::dl_iterate_phdr(
            Some(each),
            &mut out as *mut Vec<Object> as *mut libc::c_void,
        )
    };
    out
}

/// The objects the dynamic linker reports now (the executable too): how many loads and
/// unloads it has counted (`dlpi_adds + dlpi_subs`, which grows whenever the set changes;
/// 0 when the loader does not count), and where each object's lowest segment is mapped
/// (inside its first mapping in the session map).
pub(crate) fn loaded() -> (u64, Vec<u64>) {
    let objs = objects();
    let version = objs.first().map_or(0, |o| o.adds.wrapping_add(o.subs));
    (
        version,
        objs.iter().map(|o| o.low).filter(|&l| l != 0).collect(),
    )
}

/// Runs `body` (libmcount's own work inside the `dlopen`, `dlsym` and `dlclose` hooks: scans,
/// PLT hooks, patching, with their `open`, `mmap`, `mprotect` and `malloc` calls) with the
/// thread's recursion guard taken, so that no hook records those calls as the program's, and
/// with the program's `errno` kept.
fn quietly<T>(body: impl FnOnce() -> T) -> T {
    // SAFETY: `__errno_location` returns the calling thread's errno word.
    let errno = unsafe { *libc::__errno_location() };
    let td = crate::lifecycle::existing().filter(|td| !td.guard());
    let r = match td {
        Some(td) => {
            td.set_guard(true);
            let r = body();
            td.set_guard(false);
            r
        }
        None => body(),
    };
    // SAFETY: as above.
    unsafe { *libc::__errno_location() = errno };
    r
}

/// Session start: the objects loaded now are in the session map.
pub fn init() {
    let objs = objects();
    SEEN_ADDS.store(objs.first().map_or(0, |o| o.adds), Ordering::Relaxed);
    if let Ok(mut known) = KNOWN.lock() {
        known.clear();
        known.extend(objs.iter().map(|o| o.base));
    }
    resolve(&REAL_DLOPEN, c"dlopen");
    resolve(&REAL_DLCLOSE, c"dlclose");
}

/// The next definition of `name` after libmcount's, cached in `slot`.
fn resolve(slot: &AtomicUsize, name: &core::ffi::CStr) -> usize {
    let f = slot.load(Ordering::Relaxed);
    if f != 0 {
        return f;
    }
    // SAFETY: NUL-terminated name; RTLD_NEXT is a valid pseudo-handle.
    let f = unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr()) } as usize;
    slot.store(f, Ordering::Relaxed);
    if f == 0 {
        crate::log::fatal(b"cannot find the real dlopen/dlclose");
    }
    f
}

/// Called by the `dlopen` stub, with `dlopen`'s arguments, before it jumps to the returned
/// address: the real `dlopen`, or [`open_and_hook`] when the new libraries' PLTs are to be
/// hooked (`--nest-libcall`) and `file` is a path (with a `/` and no `$`), whose meaning does
/// not depend on the caller that glibc would see.
///
/// # Safety
/// `file` is null or a NUL-terminated string (as `dlopen` requires).
pub unsafe extern "C" fn prepare(file: *const libc::c_char) -> usize {
    // SAFETY: as the caller promises.
    quietly(|| unsafe { prepare_now(file) })
}

/// [`prepare`]'s work.
///
/// # Safety
/// As [`prepare`].
unsafe fn prepare_now(file: *const libc::c_char) -> usize {
    scan();
    crate::plt::after_dlopen();
    crate::patch::loaded_later();
    crate::filter::after_dlopen();
    if config::tracing() {
        CALL_TIME.store(clock::now(), Ordering::Relaxed);
    }
    let real = resolve(&REAL_DLOPEN, c"dlopen");
    let hook_now = crate::plt::get().is_some_and(|p| p.nests())
        || crate::patch::wants_libraries()
        || crate::filter::kept();
    if file.is_null() || !hook_now {
        return real;
    }
    // SAFETY: the caller passes dlopen's `file`: a NUL-terminated string when not null.
    let name = unsafe { core::ffi::CStr::from_ptr(file) }.to_bytes();
    if name.contains(&b'/') && !name.contains(&b'$') {
        open_and_hook as *const () as usize
    } else {
        real
    }
}

/// `dlopen`, then the `DLOP` lines and PLT hooks of the objects it loaded, at once, so that
/// the library calls of the library's code are recorded from `dlopen`'s return on (its
/// constructors run before). Objects loaded by a name that is not a path are hooked at the
/// next `dlopen`.
extern "C" fn open_and_hook(file: *const libc::c_char, flags: libc::c_int) -> *mut libc::c_void {
    let real = resolve(&REAL_DLOPEN, c"dlopen");
    // SAFETY: `real` is glibc's `dlopen` (resolved with RTLD_NEXT), called with the caller's
    // own arguments.
    let handle = unsafe {
        let f: unsafe extern "C" fn(*const libc::c_char, libc::c_int) -> *mut libc::c_void =
            core::mem::transmute(real);
        f(file, flags)
    };
    if !handle.is_null() {
        quietly(|| {
            scan();
            crate::plt::after_dlopen();
            crate::patch::loaded_later();
            crate::filter::after_dlopen();
        });
    }
    handle
}

/// Called by the `dlsym` stub before it jumps to the returned address (the real `dlsym`):
/// libraries a `-P FUNC@MODULE` pattern selects that were loaded since (by a `dlopen` of a
/// name that is not a path, which is not wrapped) are patched first.
pub extern "C" fn before_dlsym() -> usize {
    quietly(dlsym_now)
}

/// [`before_dlsym`]'s work.
fn dlsym_now() -> usize {
    if crate::patch::wants_libraries() {
        crate::patch::loaded_later();
    }
    // A library loaded by a name that is not a path (not wrapped): its functions in the
    // filters before the program can call one it looks up.
    crate::filter::after_dlopen();
    let f = REAL_DLSYM.load(Ordering::Relaxed);
    if f != 0 {
        return f;
    }
    // Not through `dlsym`, which is this very function: `dlvsym` of glibc's versions.
    let mut real = 0;
    for version in [c"GLIBC_2.34", c"GLIBC_2.2.5"] {
        // SAFETY: NUL-terminated strings; RTLD_NEXT is a valid pseudo-handle.
        real =
            unsafe { libc::dlvsym(libc::RTLD_NEXT, c"dlsym".as_ptr(), version.as_ptr()) } as usize;
        if real != 0 {
            break;
        }
    }
    if real == 0 {
        crate::log::fatal(b"cannot find the real dlsym");
    }
    REAL_DLSYM.store(real, Ordering::Relaxed);
    real
}

/// Called by the `dlclose` stub before it jumps to the returned address (the real
/// `dlclose`): the object may go away, so its `DLOP` line is due now.
pub extern "C" fn before_close() -> usize {
    quietly(|| {
        scan();
        resolve(&REAL_DLCLOSE, c"dlclose")
    })
}

/// Writes a `DLOP` line for each object loaded since the last scan.
pub fn scan() {
    let Some(cfg) = config::config() else {
        return;
    };
    let objs = objects();
    let adds = objs.first().map_or(0, |o| o.adds);
    if adds != 0 && adds == SEEN_ADDS.load(Ordering::Relaxed) {
        return;
    }
    let Ok(mut known) = KNOWN.lock() else {
        return;
    };
    SEEN_ADDS.store(adds, Ordering::Relaxed);
    let time = match CALL_TIME.swap(0, Ordering::Relaxed) {
        0 => clock::now(),
        t => t,
    };
    for o in objs.iter().skip(1) {
        if o.name.is_empty() || known.contains(&o.base) || o.name.starts_with(b"linux-vdso") {
            continue;
        }
        known.push(o.base);
        let line = tasklog::dlop_line(time, sys::gettid(), config::sid(), o.base, &o.name);
        if let Err(e) = tasklog::append(cfg.dirfd, &line) {
            crate::log::error(b"cannot append to task.txt", e);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quietly_keeps_the_programs_errno() {
        // SAFETY: the calling thread's errno word.
        let errno = || unsafe { &mut *libc::__errno_location() };
        *errno() = libc::EAGAIN;
        let r = quietly(|| {
            *errno() = libc::ENOENT;
            7
        });
        assert_eq!(r, 7);
        assert_eq!(*errno(), libc::EAGAIN);
    }
}
