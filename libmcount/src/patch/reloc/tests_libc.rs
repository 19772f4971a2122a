//! The relocation applied to the C library of the test process: its real functions relocated
//! and run (the resolved IFUNC variants included), and every function of it relocated at a
//! fake address, counting refusals by reason.

use super::tests_crafted::{check_relocated, listing};
use super::tests_exec::{relocated_at, Page};
use super::*;
use record_format::elf::{function_symbols, load_bias, parse};
use std::collections::BTreeMap;
use std::ffi::{c_char, c_int, c_long, c_ulong, c_void, CStr};
use std::mem::transmute;
use std::ptr::null_mut;

/// `PT_LOAD` and `PF_X` of the ELF specification.
const PT_LOAD: u32 = 1;
const PF_X: u32 = 1;

/// The C library as loaded in this process.
struct Libc {
    /// Run-time `(start, size)` of every defined, sized function symbol, one per address.
    functions: BTreeMap<u64, (u64, String)>,
    /// Run-time `[start, end)` of its executable segments.
    text: Vec<(u64, u64)>,
}

impl Libc {
    fn load() -> Libc {
        let any = libc::strlen as *const c_void;
        // SAFETY: `info` is a plain C struct dladdr fills in; `any` is a libc function.
        let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
        // SAFETY: see above.
        assert_ne!(unsafe { libc::dladdr(any, &mut info) }, 0, "dladdr(strlen)");
        // SAFETY: dladdr succeeded, so dli_fname is a NUL-terminated path.
        let path = unsafe { CStr::from_ptr(info.dli_fname) }
            .to_str()
            .unwrap()
            .to_string();
        let bytes = std::fs::read(&path).expect("read the C library");
        let elf = parse(&bytes).expect("the C library parses");
        let bias = load_bias(&elf, info.dli_fbase as u64);
        let text = elf
            .program_headers
            .iter()
            .filter(|p| p.p_type == PT_LOAD && p.p_flags & PF_X != 0)
            .map(|p| (bias + p.p_vaddr, bias + p.p_vaddr + p.p_memsz))
            .collect();
        let functions = function_symbols(&elf)
            .map(|s| (bias + s.addr, (s.size, s.name.to_string())))
            .collect();
        Libc { functions, text }
    }

    fn in_text(&self, start: u64, end: u64) -> bool {
        self.text.iter().any(|&(s, e)| start >= s && end <= e)
    }

    /// The bytes of the function at `addr`: its symbol's size, or up to the next symbol (at
    /// most 512 bytes) for an implementation only the IFUNC resolver names.
    fn bytes(&self, addr: u64) -> Option<&'static [u8]> {
        let size = match self.functions.get(&addr) {
            Some(&(size, _)) => size,
            None => self
                .functions
                .range(addr + 1..)
                .next()
                .map(|(&next, _)| next - addr)?
                .min(512),
        };
        if !self.in_text(addr, addr + size) {
            return None;
        }
        // SAFETY: the range lies in an executable segment of the loaded C library, which
        // stays mapped (readable) for the life of the process.
        Some(unsafe { std::slice::from_raw_parts(addr as *const u8, size as usize) })
    }
}

/// The resolved address of `name` (an IFUNC gives the variant chosen for this CPU).
fn dlsym(name: &CStr) -> u64 {
    // SAFETY: dlsym with RTLD_DEFAULT and a NUL-terminated name.
    let addr = unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) };
    assert!(!addr.is_null(), "dlsym({name:?})");
    addr as u64
}

extern "C" fn by_value(a: *const c_void, b: *const c_void) -> c_int {
    // SAFETY: qsort passes pointers to two elements of the `c_int` array it sorts.
    let (a, b) = unsafe { (*a.cast::<c_int>(), *b.cast::<c_int>()) };
    a.cmp(&b) as c_int
}

/// A libc function and a call of it (at the given address) whose result can be compared.
type Case = (&'static CStr, fn(u64) -> String);

/// `addr` as a function pointer of type `$t`.
macro_rules! c_fn {
    ($addr:expr, $t:ty) => {{
        // SAFETY: the address is the libc function the case names, or its relocated copy,
        // and `$t` is that function's C signature (each case passes valid arguments).
        unsafe { transmute::<usize, $t>($addr as usize) }
    }};
}

fn cases() -> Vec<Case> {
    vec![
        (c"strtol", |f| {
            let f = c_fn!(
                f,
                extern "C" fn(*const c_char, *mut *mut c_char, c_int) -> c_long
            );
            let s = c"  -12345xyz";
            let mut end = null_mut();
            let v = f(s.as_ptr(), &mut end, 10);
            format!("{v} {}", end as usize - s.as_ptr() as usize)
        }),
        (c"strtoul", |f| {
            let f = c_fn!(
                f,
                extern "C" fn(*const c_char, *mut *mut c_char, c_int) -> c_ulong
            );
            format!("{}", f(c"0xdeadbeef".as_ptr(), null_mut(), 0))
        }),
        (c"atoi", |f| {
            let f = c_fn!(f, extern "C" fn(*const c_char) -> c_int);
            format!("{} {}", f(c"  42abc".as_ptr()), f(c"-7".as_ptr()))
        }),
        (c"strchr", |f| {
            let f = c_fn!(f, extern "C" fn(*const c_char, c_int) -> *const c_char);
            let s = c"hello, world";
            format!(
                "{} {:?}",
                f(s.as_ptr(), b'w' as c_int) as usize - s.as_ptr() as usize,
                f(s.as_ptr(), b'z' as c_int)
            )
        }),
        (c"strrchr", |f| {
            let f = c_fn!(f, extern "C" fn(*const c_char, c_int) -> *const c_char);
            let s = c"a/b/c/d";
            format!(
                "{}",
                f(s.as_ptr(), b'/' as c_int) as usize - s.as_ptr() as usize
            )
        }),
        (c"strlen", |f| {
            let f = c_fn!(f, extern "C" fn(*const c_char) -> usize);
            let long = std::ffi::CString::new("x".repeat(1000)).unwrap();
            format!(
                "{} {} {}",
                f(c"".as_ptr()),
                f(c"hello".as_ptr()),
                f(long.as_ptr())
            )
        }),
        (c"strcmp", |f| {
            let f = c_fn!(f, extern "C" fn(*const c_char, *const c_char) -> c_int);
            format!(
                "{} {}",
                f(c"abc".as_ptr(), c"abd".as_ptr()).signum(),
                f(c"x".as_ptr(), c"x".as_ptr())
            )
        }),
        (c"memcmp", |f| {
            let f = c_fn!(
                f,
                extern "C" fn(*const c_void, *const c_void, usize) -> c_int
            );
            let (a, b) = ([1u8, 2, 3, 4], [1u8, 2, 9, 4]);
            let r = f(a.as_ptr().cast(), b.as_ptr().cast(), 4).signum();
            format!("{r} {}", f(a.as_ptr().cast(), b.as_ptr().cast(), 2))
        }),
        (c"memcpy", |f| {
            let f = c_fn!(
                f,
                extern "C" fn(*mut c_void, *const c_void, usize) -> *mut c_void
            );
            let src: Vec<u8> = (0..100).collect();
            let mut dst = [0u8; 100];
            f(dst.as_mut_ptr().cast(), src.as_ptr().cast(), 100);
            format!("{:?}", &dst[95..])
        }),
        (c"memset", |f| {
            let f = c_fn!(f, extern "C" fn(*mut c_void, c_int, usize) -> *mut c_void);
            let mut dst = [0u8; 40];
            f(dst.as_mut_ptr().cast(), 7, 33);
            format!("{:?}", &dst[30..35])
        }),
        (c"abs", |f| {
            let f = c_fn!(f, extern "C" fn(c_int) -> c_int);
            format!("{} {}", f(-5), f(6))
        }),
        (c"labs", |f| {
            let f = c_fn!(f, extern "C" fn(c_long) -> c_long);
            format!("{}", f(-5_000_000_000))
        }),
        (c"toupper", |f| {
            let f = c_fn!(f, extern "C" fn(c_int) -> c_int);
            format!("{} {}", f(b'a' as c_int), f(b'1' as c_int))
        }),
        (c"qsort", |f| {
            type Cmp = extern "C" fn(*const c_void, *const c_void) -> c_int;
            let f = c_fn!(f, extern "C" fn(*mut c_void, usize, usize, Cmp));
            let mut v: [c_int; 8] = [5, -1, 9, 3, 3, 0, 12, -8];
            f(v.as_mut_ptr().cast(), v.len(), 4, by_value);
            format!("{v:?}")
        }),
        (c"snprintf", |f| {
            let f = c_fn!(
                f,
                unsafe extern "C" fn(*mut c_char, usize, *const c_char, ...) -> c_int
            );
            let mut buf = [0 as c_char; 64];
            // SAFETY: a 64-byte buffer, a format whose conversions match the arguments.
            let n = unsafe {
                f(
                    buf.as_mut_ptr(),
                    64,
                    c"%d-%s-%.2f".as_ptr(),
                    42,
                    c"x".as_ptr(),
                    1.5f64,
                )
            };
            // SAFETY: snprintf NUL-terminated the buffer.
            format!("{n} {:?}", unsafe { CStr::from_ptr(buf.as_ptr()) })
        }),
        // These two start with a call (after `sub rsp, 8`).
        (c"rand", |f| {
            let f = c_fn!(f, extern "C" fn() -> c_int);
            // SAFETY: srand only sets the generator's state.
            unsafe { libc::srand(7) };
            format!("{} {}", f(), f())
        }),
        (c"ctime", |f| {
            let f = c_fn!(f, extern "C" fn(*const libc::time_t) -> *const c_char);
            let t: libc::time_t = 86400 * 365;
            // SAFETY: ctime returns a NUL-terminated string in a static buffer.
            format!("{:?}", unsafe { CStr::from_ptr(f(&t)) })
        }),
        (c"strspn", |f| {
            let f = c_fn!(f, extern "C" fn(*const c_char, *const c_char) -> usize);
            format!("{}", f(c"aabbcxd".as_ptr(), c"abc".as_ptr()))
        }),
    ]
}

#[test]
fn reloc_exec_libc_functions() {
    let libc = Libc::load();
    let mut ran = Vec::new();
    let mut refused = Vec::new();
    for (name, call) in cases() {
        let addr = dlsym(name);
        let Some(func) = libc.bytes(addr) else {
            refused.push(format!("{name:?}: no bytes"));
            continue;
        };
        let page = Page::near(addr).expect("a page near the C library");
        match relocated_at(func, addr, &page) {
            Ok(dest) => {
                assert_eq!(call(dest), call(addr), "{name:?} relocated");
                // What was displaced, for the log.
                let skip = if func.starts_with(&[0xf3, 0x0f, 0x1e, 0xfa]) {
                    4
                } else {
                    0
                };
                let len = relocate(func, addr, skip, dest).map_or(0, |r| r.patch_len);
                let shown = listing(&func[skip..skip + len], addr).unwrap_or_default();
                let shown: Vec<&str> = shown.iter().map(|l| l.mnemonic.as_str()).collect();
                ran.push(format!("{name:?} ({})", shown.join(" ")));
            }
            Err(e) => refused.push(format!("{name:?}: {e:?}")),
        }
    }
    eprintln!("libc functions relocated and run: {ran:?}; refused: {refused:?}");
    let total = ran.len() + refused.len();
    assert!(ran.len() * 4 >= total * 3, "too many refused: {refused:?}");
}

/// Relocates every function of the C library to `dest`; counts the outcomes.
fn sweep(libc: &Libc, dest: u64) -> BTreeMap<String, usize> {
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for &addr in libc.functions.keys() {
        let Some(func) = libc.bytes(addr) else {
            continue;
        };
        let skip = if func.starts_with(&[0xf3, 0x0f, 0x1e, 0xfa]) {
            4
        } else {
            0
        };
        let key = match relocate(func, addr, skip, dest) {
            Ok(r) => {
                assert!(r.code.len() <= MAX_RELOCATED);
                let orig = check_relocated(func, addr, skip, dest, &r)
                    .unwrap_or_else(|e| panic!("{addr:#x}: {e}"));
                let mems: Vec<u64> = orig.iter().filter_map(|l| l.mem).collect();
                if !mems.is_empty() {
                    *counts
                        .entry("(with rip-relative operand)".into())
                        .or_default() += 1;
                }
                if orig.iter().any(|l| l.branch.is_some()) {
                    let kind = orig
                        .iter()
                        .find(|l| l.branch.is_some())
                        .map_or("", |l| &l.mnemonic);
                    *counts.entry(format!("(with {kind})")).or_default() += 1;
                }
                "relocated".to_string()
            }
            Err(Refusal::Unsupported(why)) => format!("unsupported: {why}"),
            Err(e) => format!("{e:?}"),
        };
        *counts.entry(key).or_default() += 1;
    }
    counts
}

#[test]
fn reloc_sweep_libc() {
    let libc = Libc::load();
    let text = libc.text[0].0;
    for (label, dest) in [
        ("near", text - (1 << 20)),
        ("far", text.wrapping_add(1 << 40)),
    ] {
        let counts = sweep(&libc, dest);
        let total: usize = counts
            .iter()
            .filter(|(k, _)| !k.starts_with('('))
            .map(|(_, n)| n)
            .sum();
        let ok = counts.get("relocated").copied().unwrap_or(0);
        eprintln!("libc sweep ({label} dest): {ok}/{total} relocated; {counts:?}");
        assert!(total > 1000, "the C library has thousands of functions");
        if label == "near" {
            assert!(ok * 100 >= total * 85, "success rate {ok}/{total}");
        }
    }
}

/// The patcher's way (one linear decode of each function, shared by its checks) decides as a
/// decode of the function's rest after the displaced bytes does, for every function of the
/// C library; some of them are refused for a jump into the patch.
#[test]
fn reloc_scan_shared_decides_as_a_fresh_decode() {
    let libc = Libc::load();
    let d = Decoder::new().expect("capstone");
    let dest = libc.text[0].0 - (1 << 20);
    let (mut compared, mut jumps_in) = (0, 0);
    for &addr in libc.functions.keys() {
        let Some(func) = libc.bytes(addr) else {
            continue;
        };
        let skip = if func.starts_with(&[0xf3, 0x0f, 0x1e, 0xfa]) {
            4
        } else {
            0
        };
        let scan = d.scan(func, addr);
        let (mut starts, mut branches) = (Vec::new(), Vec::new());
        let mut insns = d.plain.disasm_iter(func, addr).unwrap();
        while let Some(insn) = insns.next() {
            let at = (insn.address() - addr) as u32;
            starts.push(at);
            if let Some(b) = direct_branch(insn.bytes(), insn.address()) {
                branches.push((at, b.target));
            }
        }
        assert_eq!(
            (&scan.starts, &scan.branches),
            (&starts, &branches),
            "{addr:#x}"
        );
        let shared = d.relocate(func, addr, skip, dest, Some(&scan));
        assert_eq!(
            shared,
            d.relocate(func, addr, skip, dest, None),
            "{addr:#x}"
        );
        assert_eq!(shared, relocate(func, addr, skip, dest), "{addr:#x}");
        let mut leaving: Vec<u64> = scan.leaving(addr, func.len()).collect();
        leaving.sort_unstable();
        leaving.dedup();
        assert_eq!(leaving, direct_branch_targets(func, addr), "{addr:#x}");
        compared += 1;
        jumps_in += usize::from(shared == Err(Refusal::JumpIntoPatch));
    }
    eprintln!("libc: {compared} functions, {jumps_in} refused for a jump into the patch");
    assert!(compared > 1000 && jumps_in > 0);
}
