//! The loaded modules patching may touch, what their file says about them (runtime spec §11.1)
//! and their functions.
//!
//! Kinds, as uftrace names them in `-v` output: `fpatchable` (a `__patchable_function_entries`
//! section: gcc's `-fpatchable-function-entry`), `fentry-nop` (functions start with a 5-byte
//! NOP: `-pg -mfentry -mnop-mcount`), `fentry` / `pg` (calls to `__fentry__` / `mcount`
//! already there), `none` (ordinary code: full dynamic patching).

use record_format::elf;

/// One loaded object (`dl_iterate_phdr`).
#[derive(Debug, Clone)]
pub struct Loaded {
    /// File path (the executable's from `/proc/self/exe`).
    pub path: String,
    /// Load bias: run-time minus link-time address.
    pub bias: usize,
    /// Executable segments, run-time `[start, end)`.
    pub text: Vec<(usize, usize)>,
    /// Lowest and highest run-time address of its segments.
    pub lo: usize,
    pub hi: usize,
    pub is_exe: bool,
}

impl Loaded {
    /// File name, as patterns' `@MODULE` and `-v` lines name it.
    pub fn basename(&self) -> &str {
        self.path.rsplit('/').next().unwrap_or(&self.path)
    }

    /// Whether `[addr, addr + len)` lies in one executable segment.
    pub fn in_text(&self, addr: usize, len: usize) -> bool {
        self.text.iter().any(|&(s, e)| addr >= s && addr + len <= e)
    }
}

/// Every loaded object with a file, the executable first; libmcount itself and the vDSO left
/// out.
pub fn loaded() -> Vec<Loaded> {
    unsafe extern "C" fn each(
        info: *mut libc::dl_phdr_info,
        _size: libc::size_t,
        data: *mut libc::c_void,
    ) -> libc::c_int {
        // SAFETY: `data` is the Vec passed below; `info` is valid during the call, its
        // `dlpi_phdr` array has `dlpi_phnum` entries and `dlpi_name` is NUL-terminated.
        let (out, info) = unsafe { (&mut *(data as *mut Vec<Loaded>), &*info) };
        let name = if info.dlpi_name.is_null() {
            Vec::new()
        } else {
            // SAFETY: as above.
            unsafe { core::ffi::CStr::from_ptr(info.dlpi_name) }
                .to_bytes()
                .to_vec()
        };
        // SAFETY: as above.
        let phdrs =
            unsafe { core::slice::from_raw_parts(info.dlpi_phdr, info.dlpi_phnum as usize) };
        let bias = info.dlpi_addr as usize;
        let mut text = Vec::new();
        let (mut lo, mut hi) = (usize::MAX, 0);
        for p in phdrs.iter().filter(|p| p.p_type == libc::PT_LOAD) {
            let s = bias + p.p_vaddr as usize;
            let e = s + p.p_memsz as usize;
            lo = lo.min(s);
            hi = hi.max(e);
            if p.p_flags & libc::PF_X != 0 {
                text.push((s, e));
            }
        }
        out.push(Loaded {
            path: String::from_utf8_lossy(&name).into_owned(),
            bias,
            text,
            lo,
            hi,
            is_exe: out.is_empty(),
        });
        0
    }
    let mut out: Vec<Loaded> = Vec::new();
    // SAFETY: the callback matches the expected signature and only uses `out` during the call.
    unsafe {
        libc::dl_iterate_phdr(
            Some(each),
            &mut out as *mut Vec<Loaded> as *mut libc::c_void,
        )
    };
    let own = loaded as *const () as usize;
    if let Some(exe) = out.first_mut() {
        exe.path = std::fs::read_link("/proc/self/exe")
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or_default();
    }
    out.retain(|m| {
        !m.path.is_empty()
            && !m.text.is_empty()
            && !m.path.starts_with("linux-vdso")
            && !m.text.iter().any(|&(s, e)| own >= s && own < e)
    });
    out
}

/// A number that changes whenever an object is loaded or unloaded (glibc's `dlpi_adds` and
/// `dlpi_subs` counters).
pub fn generation() -> u64 {
    unsafe extern "C" fn first(
        info: *mut libc::dl_phdr_info,
        size: libc::size_t,
        data: *mut libc::c_void,
    ) -> libc::c_int {
        // SAFETY: `data` is the u64 passed below; `info` is valid during the call and `size`
        // says whether the counters exist.
        let (out, info) = unsafe { (&mut *(data as *mut u64), &*info) };
        if size >= core::mem::size_of::<libc::dl_phdr_info>() {
            *out = (info.dlpi_adds << 32) ^ info.dlpi_subs;
        }
        1
    }
    let mut g: u64 = 0;
    // SAFETY: the callback matches the expected signature and only uses `g` during the call.
    unsafe { libc::dl_iterate_phdr(Some(first), &mut g as *mut u64 as *mut libc::c_void) };
    g
}

/// How a module can be patched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    None,
    Pg,
    Fentry,
    FentryNop,
    Patchable,
}

impl Kind {
    /// uftrace's number and name for it (`dynamic patch type: <module>: N (name)`).
    pub fn describe(self) -> (u8, &'static str) {
        match self {
            Kind::None => (0, "none"),
            Kind::Pg => (1, "pg"),
            Kind::Fentry => (2, "fentry"),
            Kind::FentryNop => (3, "fentry-nop"),
            Kind::Patchable => (5, "fpatchable"),
        }
    }
}

/// The 5-byte NOPs a patchable or `-mnop-mcount` function starts with.
pub const NOPS5: [[u8; 5]; 4] = [
    [0x90; 5],
    [0x0f, 0x1f, 0x44, 0x00, 0x00],
    [0x0f, 0x1f, 0x44, 0x00, 0x08],
    [0x67, 0x0f, 0x1f, 0x04, 0x00],
];
pub const ENDBR64: [u8; 4] = [0xf3, 0x0f, 0x1e, 0xfa];

/// A function of the module, at its run-time address, with every name it has.
#[derive(Debug, Clone)]
pub struct Func {
    pub addr: usize,
    pub size: usize,
    pub names: Vec<String>,
}

impl Func {
    /// The function's bytes in memory.
    pub fn bytes(&self) -> &[u8] {
        // SAFETY: `functions` keeps only functions lying in an executable (so mapped and
        // readable) segment of a loaded module, which stays loaded while it is patched.
        unsafe { core::slice::from_raw_parts(self.addr as *const u8, self.size) }
    }

    /// Offset of the patch point: 4 after an `endbr64`, else 0.
    pub fn skip(&self) -> usize {
        if self.bytes().starts_with(&ENDBR64) {
            4
        } else {
            0
        }
    }

    pub fn name(&self) -> &str {
        self.names.first().map_or("?", |n| n.as_str())
    }
}

/// What patching needs of a module's file.
pub struct Analysis {
    pub kind: Kind,
    pub funcs: Vec<Func>,
}

/// Reads `m`'s symbols and classifies it; `None` when its file cannot be read.
pub fn analyse(m: &Loaded) -> Option<Analysis> {
    let bytes = record_format::file::map_regular(std::path::Path::new(&m.path)).ok()?;
    let elf = elf::parse(&bytes)?;
    let mut funcs: Vec<Func> = Vec::new();
    let mut syms: Vec<_> = elf::function_symbols(&elf).collect();
    syms.sort_by_key(|s| s.addr);
    for s in syms {
        let addr = m.bias + s.addr as usize;
        if !m.in_text(addr, s.size as usize) {
            continue;
        }
        match funcs.last_mut() {
            Some(f) if f.addr == addr => {
                if !f.names.iter().any(|n| n == s.name) {
                    f.names.push(s.name.to_string());
                }
            }
            _ => funcs.push(Func {
                addr,
                size: s.size as usize,
                names: vec![s.name.to_string()],
            }),
        }
    }
    let imports = |want: &[&str]| {
        elf.dynsyms.iter().any(|s| {
            s.st_shndx == 0
                && elf
                    .dynstrtab
                    .get_at(s.st_name)
                    .is_some_and(|n| want.contains(&n))
        })
    };
    let kind = if elf::section(&elf, "__patchable_function_entries").is_some() {
        Kind::Patchable
    } else if imports(&["__fentry__"]) {
        Kind::Fentry
    } else if imports(&["mcount", "_mcount"]) {
        Kind::Pg
    } else {
        let starts_nop = |f: &Func| {
            let b = f.bytes();
            let b = b.strip_prefix(&ENDBR64[..]).unwrap_or(b);
            NOPS5.iter().any(|n| b.starts_with(n))
        };
        let usable: Vec<&Func> = funcs
            .iter()
            .filter(|f| f.size >= 6 && !excluded(f.name()))
            .collect();
        let nops = usable.iter().filter(|f| starts_nop(f)).count();
        if !usable.is_empty() && nops * 2 > usable.len() {
            Kind::FentryNop
        } else {
            Kind::None
        }
    };
    Some(Analysis { kind, funcs })
}

/// Functions never patched: start-up code and the split-off cold parts of others.
pub fn excluded(name: &str) -> bool {
    matches!(
        name,
        "_start"
            | "_init"
            | "_fini"
            | "__libc_csu_init"
            | "__libc_csu_fini"
            | "_dl_relocate_static_pie"
            | "__gmon_start__"
            | "__stack_chk_fail_local"
            | "deregister_tm_clones"
            | "register_tm_clones"
            | "frame_dummy"
    ) || name.contains(".cold")
        || name.starts_with("__do_global_")
}

/// Functions whose return address must stay theirs (runtime spec §6.15): those that return
/// twice, read their caller from it (`dlopen`, `dlsym`), start stacks or contexts, unwind, or
/// are entered without a return address (`_dl_runtime_resolve`, `__restore_rt`); and the
/// hooks themselves. Skipped (and counted so) when a pattern selects them, e.g. in libc.
pub fn never_patched(name: &str) -> bool {
    const EXACT: &[&str] = &[
        "setjmp",
        "_setjmp",
        "sigsetjmp",
        "__sigsetjmp",
        "savectx",
        "vfork",
        "__vfork",
        "fork",
        "_Fork",
        "__libc_fork",
        "clone",
        "__clone",
        "__clone3",
        "__clone_internal",
        "start_thread",
        "getcontext",
        "setcontext",
        "swapcontext",
        "makecontext",
        "__start_context",
        "__restore_rt",
        "__libc_start_main",
        "__libc_start_call_main",
        "dlopen",
        "dlmopen",
        "dlsym",
        "dlvsym",
        "dladdr",
        "dladdr1",
        "dlclose",
        "__tls_get_addr",
        "mcount",
        "_mcount",
        "__fentry__",
        "__cyg_profile_func_enter",
        "__cyg_profile_func_exit",
        "__monstartup",
        "_mcleanup",
        "__cxa_throw",
        "__cxa_rethrow",
        "__cxa_begin_catch",
        "__cxa_end_catch",
        "__gxx_personality_v0",
        "backtrace",
    ];
    EXACT.contains(&name)
        || name.starts_with("_dl_runtime_")
        || name.starts_with("_Unwind_")
        || name.starts_with("_dl_start")
        || name.contains("longjmp")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn libmcount_is_left_out() {
        // Here libmcount's code is the test executable itself.
        let mods = loaded();
        assert!(mods.iter().any(|m| m.path.contains("libc.so")), "{mods:?}");
        let own = loaded as *const () as usize;
        assert!(mods.iter().all(|m| !m.in_text(own, 1)));
    }

    #[test]
    fn excluded_names() {
        assert!(excluded("_start") && excluded("main.cold") && excluded("frame_dummy"));
        assert!(!excluded("main") && !excluded("coldstart"));
        assert!(never_patched("_setjmp") && never_patched("_dl_runtime_resolve_xsavec"));
        assert!(never_patched("__longjmp_chk") && never_patched("_Unwind_RaiseException"));
        assert!(!never_patched("strlen") && !never_patched("main"));
    }
}
