//! Attach mode (`utrace record -p PID`): the unwinder's entry points through libmcount.
//!
//! A preloaded libmcount interposes `__cxa_throw`, `__cxa_rethrow`, `_Unwind_Resume`,
//! `__cxa_begin_catch`, `backtrace` and `_Unwind_Backtrace` by symbol precedence (see
//! [`crate::unwind`]). A `dlopen`ed one is not in the program's lookup scope, so without more
//! a throw through a hijacked frame ends in `std::terminate`. [`redirect`] therefore points the
//! GOT words (`R_X86_64_JUMP_SLOT` and `R_X86_64_GLOB_DAT` relocations) of those symbols, in
//! every loaded module that imports them, at libmcount's thunks, and tells [`crate::unwind`]
//! which definition each module was bound to (the thunks jump there). The redirection stays
//! after the detach: frames hijacked during the session may still be on the stacks, and the
//! thunks do nothing but jump to the real function without a session. A word the PLT hooks
//! (`backtrace`, `_Unwind_Backtrace`) keeps its stub, whose target becomes the thunk.
//!
//! Modules loaded after the attach keep their own bindings.

use core::ffi::CStr;
use std::sync::Once;

/// `R_X86_64_GLOB_DAT` and `R_X86_64_JUMP_SLOT`.
const GLOB_DAT: u32 = 6;
const JUMP_SLOT: u32 = 7;

/// The interposed names.
const NAMES: [&CStr; 6] = [
    c"__cxa_throw",
    c"__cxa_rethrow",
    c"_Unwind_Resume",
    c"__cxa_begin_catch",
    c"backtrace",
    c"_Unwind_Backtrace",
];

/// The interposed names and libmcount's thunks for them. Not `arch::__cxa_throw as usize`:
/// libmcount's own references to its exported symbols are bound in its lookup scope, where
/// the program and libstdc++ come first; `dlsym` on libmcount's own handle finds its own.
fn thunks() -> Vec<(&'static CStr, usize)> {
    // SAFETY: a zeroed Dl_info is valid; dladdr fills it for an address inside libmcount.
    let mut info: libc::Dl_info = unsafe { core::mem::zeroed() };
    // SAFETY: as above; `dli_fname` is then libmcount's path, NUL-terminated.
    let handle = unsafe {
        if libc::dladdr(redirect as *const libc::c_void, &mut info) == 0 {
            return Vec::new();
        }
        libc::dlopen(info.dli_fname, libc::RTLD_LAZY | libc::RTLD_NOLOAD)
    };
    if handle.is_null() {
        return Vec::new();
    }
    let out = NAMES
        .iter()
        // SAFETY: a handle from dlopen and NUL-terminated names.
        .map(|&n| (n, unsafe { libc::dlsym(handle, n.as_ptr()) } as usize))
        .filter(|&(_, f)| f != 0)
        .collect();
    // SAFETY: the handle opened above (libmcount stays loaded: the recorder's own handle).
    unsafe { libc::dlclose(handle) };
    out
}

/// One GOT word to point at a thunk.
struct Word {
    got: usize,
    thunk: usize,
    name: &'static CStr,
    /// Read-only after relocation (`-z relro`): the page range to unprotect for the write.
    relro: Option<(usize, usize)>,
    /// The module's lazy-binding stubs: a word pointing there is not bound yet.
    lazy: (usize, usize),
}

/// The GOT words of the interposed names in the module at `path` loaded at `bias`.
fn module_words(path: &str, bias: usize, table: &[(&'static CStr, usize)], out: &mut Vec<Word>) {
    use record_format::elf;
    let Ok(bytes) = std::fs::read(path) else {
        return;
    };
    let Some(elf) = elf::parse(&bytes) else {
        return;
    };
    let page = crate::sys::PAGE_SIZE;
    let relro: Vec<(usize, usize)> = elf::load::relro_ranges(&elf)
        .map(|(s, e)| {
            (
                (bias + s as usize) & !(page - 1),
                (bias + e as usize).next_multiple_of(page),
            )
        })
        .collect();
    let lazy = elf::section(&elf, ".plt").map_or((0, 0), |(a, size)| {
        (bias + a as usize, bias + (a + size) as usize)
    });
    let relocs = elf.pltrelocs.iter().chain(elf.dynrelas.iter());
    for r in relocs.filter(|r| r.r_type == GLOB_DAT || r.r_type == JUMP_SLOT) {
        let Some(sym) = elf.dynsyms.get(r.r_sym) else {
            continue;
        };
        // Defined here or not: a relocated word is interposable (libstdc++ throws through its
        // own GOT word of `__cxa_throw`), as a preloaded definition would interpose it.
        let Some(name) = elf.dynstrtab.get_at(sym.st_name) else {
            continue;
        };
        let Some(&(cname, thunk)) = table.iter().find(|(n, _)| n.to_bytes() == name.as_bytes())
        else {
            continue;
        };
        let got = bias + r.r_offset as usize;
        out.push(Word {
            got,
            thunk,
            name: cname,
            relro: relro.iter().copied().find(|&(s, e)| got >= s && got < e),
            lazy,
        });
    }
}

/// Points every loaded module's GOT words of the interposed names at libmcount's thunks
/// (once per process; later calls do nothing).
pub fn redirect() {
    static DONE: Once = Once::new();
    DONE.call_once(redirect_now);
}

fn redirect_now() {
    let own = own_base();
    let table = thunks();
    let mut words = Vec::new();
    for (path, bias) in crate::plt::loaded_objects() {
        if path.is_empty() || bias == own || path.contains("linux-vdso") {
            continue;
        }
        module_words(&path, bias, &table, &mut words);
    }
    // The definitions the thunks jump to: the global scope's (libmcount is not in it when
    // `dlopen`ed with RTLD_LOCAL), else what a module was bound to.
    for &(name, thunk) in &table {
        // SAFETY: NUL-terminated name; RTLD_DEFAULT is a valid pseudo-handle.
        let global = unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) } as usize;
        if global != 0 && global != thunk {
            crate::unwind::set_real(name, global);
        }
    }
    for w in &words {
        let bound = |old: usize| old != 0 && old != w.thunk && !(old >= w.lazy.0 && old < w.lazy.1);
        // A word the PLT hooks keeps its stub (the call is recorded), which then jumps to
        // the thunk.
        if let Some(plt) = crate::plt::get() {
            if let Some(old) = plt.retarget(w.got, w.thunk) {
                if bound(old) {
                    crate::unwind::set_real_if_unknown(w.name, old);
                }
                if !crate::unwind::has_real(w.name) {
                    plt.retarget(w.got, old);
                }
                continue;
            }
        }
        if let Some((s, e)) = w.relro {
            // SAFETY: the module's own RELRO range, mapped for its lifetime.
            unsafe {
                libc::mprotect(
                    s as *mut libc::c_void,
                    e - s,
                    libc::PROT_READ | libc::PROT_WRITE,
                )
            };
        }
        // SAFETY: `got` is a loaded module's GOT word of one of its relocations: mapped,
        // aligned, writable now (RELRO unprotected above).
        let word = unsafe { core::sync::atomic::AtomicUsize::from_ptr(w.got as *mut usize) };
        let old = word.load(core::sync::atomic::Ordering::Relaxed);
        if bound(old) {
            crate::unwind::set_real_if_unknown(w.name, old);
        }
        if crate::unwind::has_real(w.name) {
            word.store(w.thunk, core::sync::atomic::Ordering::Release);
        }
        if let Some((s, e)) = w.relro {
            // SAFETY: as above; back to read-only.
            unsafe { libc::mprotect(s as *mut libc::c_void, e - s, libc::PROT_READ) };
        }
    }
}

/// libmcount's own load bias (its GOT is left alone).
fn own_base() -> usize {
    // SAFETY: a zeroed Dl_info is valid; dladdr fills it for an address inside libmcount.
    let mut info: libc::Dl_info = unsafe { core::mem::zeroed() };
    // SAFETY: as above.
    let found = unsafe { libc::dladdr(redirect as *const libc::c_void, &mut info) } != 0;
    if !found {
        return usize::MAX;
    }
    // dladdr gives the lowest mapped address; the bias of a PIC library with its first
    // segment at 0 is the same.
    info.dli_fbase as usize
}
