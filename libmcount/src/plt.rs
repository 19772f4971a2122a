//! Library calls: the executable's PLT slots are redirected through per-slot stubs to
//! [`crate::arch::plt_hook`] (runtime.md §7.4), so calls into shared libraries (`printf`,
//! `malloc`, `pthread_create`, …) are recorded like traced functions, at the address of their
//! PLT entry (the `P` symbols of the executable's `.sym` file, data-format §7).
//!
//! At session start, for each `R_X86_64_JUMP_SLOT` relocation *i* of the executable (read from
//! its file by the ELF model, [`record_format::elf::plt_slots`]): the GOT slot's current value
//! becomes `target[i]` (the real function if already bound, else the PLT's own lazy stub, in
//! `.plt` even when calls go through `.plt.sec`), and the slot is pointed at stub *i*
//! (`endbr64; push $i; jmp *hook`) in a page generated here; slots in the RELRO range
//! (`-z now`) are made writable for that moment. The hook records the call, hijacks the return
//! like `mcount` does, and jumps to `target[i]`. A call through the lazy stub makes ld.so bind
//! the symbol and write the real address into the slot, over the stub: such frames carry
//! [`crate::frame_flags::REARM`], and their exit takes the address learnt for `target[i]` and points the slot back
//! at the stub.
//!
//! Special functions (runtime.md §6.15): the hooks themselves and the unwinder's helpers are
//! not hooked; functions that return twice (`setjmp`) are recorded as a call of no duration without
//! touching their return, and so are `dlopen` and `dlsym` when their result depends on their
//! caller (a bare library name, `$ORIGIN`, `RTLD_NEXT`; see [`Kind::Dlopen`]); `vfork` is
//! hooked as usual, and its child gets a state of its own while it shares the parent's memory
//! (see `thread::vfork`). A slot called unbound by those, or by a call not traced (filtered
//! out, beyond the depth limit, tracing off), is left to the lazy binder and stays pending
//! until the calling thread is past the binder ([`Plt::rearm_later`]): meanwhile every PLT
//! call takes the hook's slow path, which re-arms the pending slots it finds bound.
//!
//! With `--nest-libcall` the libraries' PLTs are hooked too: those loaded at start-up, and
//! (beyond uftrace) those `dlopen` loads later ([`after_dlopen`]): the slot table and the stub
//! area are reserved up front and grow in place, each batch of stubs on pages of its own.

use core::sync::atomic::AtomicU8;
use core::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use record_format::libcall::{stack_effect, StackEffect};
use std::sync::{Mutex, OnceLock};

/// How a slot's calls are treated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Kind {
    /// Recorded, return hijacked.
    Hook,
    /// Recorded as a call of no duration; the return is left alone.
    Instant,
    /// As `Hook` (both processes return through the trampoline), and the state is marked so
    /// that the child's hooks get a state of their own (see `thread::vfork`).
    Vfork,
    /// `setjmp` family: as `Instant`, and the shadow stack's state is kept by `jmp_buf`.
    Setjmp,
    /// `longjmp` family: its ENTRY is recorded, then the frames it jumps over are dropped and
    /// the `setjmp` it lands in returns (an EXIT of `setjmp`, as uftrace records it).
    Longjmp,
    /// Recorded with its return slot left alone: `_Unwind_RaiseException` (reached from
    /// libstdc++'s PLT with `--nest-libcall`) returns only when no handler exists; its frame is
    /// closed where the exception lands, like the frames it unwinds.
    Unwind,
    /// The loader's `dlopen` (file in the first argument) and `dlmopen` (in the second), and
    /// `dlsym`/`dlvsym`: glibc looks at their return address to find the calling object
    /// (search paths, `$ORIGIN`, `RTLD_NEXT`, `RTLD_DEFAULT`'s namespace). A call whose result
    /// cannot depend on it (a path with a `/` and no `$`; a real handle) is a `Hook`; the
    /// others are `Instant` ([`Kind::for_call`]).
    Dlopen,
    Dlmopen,
    Dlsym,
}

impl Kind {
    /// The kind of this call: a loader call whose caller cannot matter is hooked as usual.
    #[inline]
    pub fn for_call(self, regs: &crate::cpu::EntryRegs) -> Kind {
        let free = match self {
            Kind::Dlopen => path_is_caller_free(regs.rdi),
            Kind::Dlmopen => path_is_caller_free(regs.rsi),
            // RTLD_DEFAULT (0) and RTLD_NEXT (-1) search from the caller.
            Kind::Dlsym => regs.rdi != 0 && regs.rdi != usize::MAX,
            k => return k,
        };
        if free {
            Kind::Hook
        } else {
            Kind::Instant
        }
    }
}

/// Whether the `dlopen` file name at `ptr` means the same file whoever calls: a path (with a
/// `/`) without `$` substitutions, read within 4 KiB (a longer one counts as caller-bound).
fn path_is_caller_free(ptr: usize) -> bool {
    let mut buf = [0u8; 256];
    let mut at = ptr;
    let mut slash = false;
    for _ in 0..16 {
        let n = crate::sys::read_self(at, &mut buf);
        let Some(chunk) = buf.get(..n) else {
            return false;
        };
        for &b in chunk {
            match b {
                0 => return slash,
                b'$' => return false,
                b'/' => slash = true,
                _ => {}
            }
        }
        if n < buf.len() {
            return false;
        }
        at += n;
    }
    false
}

/// One hooked GOT slot. `#[repr(C)]` with `fast` and `entry` first: the PLT hook's fast path
/// reads them from [`SLOTS`]. Every field is atomic and zero is a valid value of each, so the
/// table is zeroed memory that grows in place while other threads read it.
#[repr(C)]
#[derive(Debug)]
pub struct Slot {
    /// Where the call goes when the hook's fast path may handle it (a bound slot of kind
    /// [`Kind::Hook`]), else 0.
    pub fast: AtomicUsize,
    /// The PLT entry's address: the function's address in records.
    pub entry: AtomicUsize,
    /// The GOT slot.
    got: AtomicUsize,
    /// Where the call really goes.
    target: AtomicUsize,
    /// The slot's value before binding (the PLT lazy stub); 0 if it was bound already.
    lazy: AtomicUsize,
    /// A [`Kind`] as `u8`.
    kind: AtomicU8,
    /// Never on the fast path (see [`Plt::slow_down`]).
    no_fast: AtomicBool,
    /// Calls made unbound and not hooked at their return whose lazy binder may not have
    /// written the bound address over the stub yet (see [`Plt::rearm_later`]).
    pending: AtomicUsize,
}

impl Slot {
    /// The PLT entry's address.
    #[inline]
    pub fn entry(&self) -> usize {
        self.entry.load(Ordering::Relaxed)
    }

    #[inline]
    pub fn kind(&self) -> Kind {
        match self.kind.load(Ordering::Relaxed) {
            1 => Kind::Instant,
            2 => Kind::Vfork,
            3 => Kind::Setjmp,
            4 => Kind::Longjmp,
            5 => Kind::Unwind,
            6 => Kind::Dlopen,
            7 => Kind::Dlmopen,
            8 => Kind::Dlsym,
            _ => Kind::Hook,
        }
    }
}

/// The address of the hooked slots' array (0 before [`install`]), for the PLT hook's fast path.
pub static SLOTS: AtomicUsize = AtomicUsize::new(0);

/// The sum of the slots' [`Slot::pending`] calls (their slots are re-armed at the next calls
/// through the PLT hook's slow path, which every PLT call takes while this is not 0).
pub static PENDING: AtomicUsize = AtomicUsize::new(0);

/// Slots of every module together (the table and the stub area are reserved for this many).
const MAX_SLOTS: usize = 1 << 15;

#[derive(Debug)]
pub struct Plt {
    /// `MAX_SLOTS` slots; the first `len` are in use (gaps between batches are zero).
    slots: &'static [Slot],
    len: AtomicUsize,
    /// The hooked functions: PLT entry address and symbol name.
    names: Mutex<Vec<(usize, Box<str>)>>,
    /// The stub area.
    stubs: usize,
    /// The sum of the slots' [`Slot::pending`] ([`PENDING`] for the installed table).
    pending: &'static AtomicUsize,
    /// Load biases of the objects hooked so far; held while a batch is added.
    hooked: Mutex<Vec<usize>>,
    /// `--nest-libcall`: libraries are hooked too, those loaded by `dlopen` included.
    nest: bool,
    /// The RELRO ranges (page-aligned) of the objects hooked so far, for [`Plt::set_hooked`].
    relro: Mutex<Vec<(usize, usize)>>,
}

static PLT: OnceLock<Plt> = OnceLock::new();

/// Size of one stub.
const STUB: usize = 16;
/// The stubs start after the word holding the hook's address.
const STUBS_AT: usize = 16;

impl Plt {
    /// The hooked functions: PLT entry address and symbol name.
    pub fn functions(&self) -> Vec<(usize, Box<str>)> {
        self.names.lock().map(|n| n.clone()).unwrap_or_default()
    }

    /// Whether libraries are hooked too (`--nest-libcall`).
    pub fn nests(&self) -> bool {
        self.nest
    }

    /// The slots in use.
    fn used(&self) -> &[Slot] {
        &self.slots[..self.len.load(Ordering::Acquire).min(MAX_SLOTS)]
    }

    /// Sends the calls of the slots whose PLT entry satisfies `slow` to the Rust handler
    /// (functions with recorded arguments).
    pub fn slow_down(&self, slow: impl Fn(usize) -> bool) {
        for s in self.used().iter().filter(|s| slow(s.entry())) {
            s.fast.store(0, Ordering::Relaxed);
            s.no_fast.store(true, Ordering::Relaxed);
        }
    }

    /// Slot `i`, if hooked.
    pub fn slot(&self, i: usize) -> Option<&Slot> {
        self.used().get(i)
    }

    fn stub(&self, i: usize) -> usize {
        self.stubs + STUBS_AT + i * STUB
    }

    /// Where a call through slot `i` goes now; `REARM` is due when it is still unbound.
    pub fn target(&self, i: usize) -> (usize, bool) {
        self.rearm_now();
        let Some(s) = self.slot(i) else {
            return (0, false);
        };
        let t = s.target.load(Ordering::Relaxed);
        let lazy = s.lazy.load(Ordering::Relaxed);
        (t, lazy != 0 && t == lazy)
    }

    /// Slot `i` is called unbound and the call's return is not hooked (filtered out, tracing
    /// off, `Instant` kinds): it goes through the lazy binder, which writes the bound address
    /// over the stub. The slot stays pending (re-armed by every slow hook that sees it bound)
    /// until the calling thread is known to be past the binder: its next PLT call with the
    /// return slot `parent_loc` at or above this one's ([`Plt::settle`]), or its end. Without
    /// room in `claims` (calls nested in untraced calls), the slot stays pending for good.
    pub fn rearm_later(&self, i: usize, parent_loc: usize, claims: Option<&mut Claims>) {
        let Some(s) = self.slot(i) else {
            return;
        };
        s.pending.fetch_add(1, Ordering::SeqCst);
        self.pending.fetch_add(1, Ordering::SeqCst);
        if let Some(c) = claims.filter(|c| c.len < CLAIMS) {
            c.at[c.len] = (i, parent_loc);
            c.len += 1;
        }
    }

    /// At a PLT call whose return slot is `parent_loc`: the calls of `claims` made from there
    /// or from a caller are past the binder (a signal handler that interrupted the binder, or
    /// the function it called, would be below); their slots are re-armed and no longer
    /// pending on their account. `usize::MAX`: the thread ends.
    pub fn settle(&self, claims: &mut Claims, parent_loc: usize) {
        let mut k = 0;
        while k < claims.len {
            let (i, at) = claims.at[k];
            if at > parent_loc {
                k += 1;
                continue;
            }
            self.rearm_at(i);
            if let Some(s) = self.slot(i) {
                s.pending.fetch_sub(1, Ordering::SeqCst);
                self.pending.fetch_sub(1, Ordering::SeqCst);
            }
            claims.len -= 1;
            claims.at[k] = claims.at[claims.len];
        }
    }

    /// Whether any slot is pending (a cheap check).
    #[inline]
    pub fn any_pending(&self) -> bool {
        self.pending.load(Ordering::Relaxed) != 0
    }

    /// Re-arms the pending slots that were bound meanwhile (a cheap check when none is).
    #[inline]
    pub fn rearm_now(&self) {
        if self.any_pending() {
            self.rearm_pending();
        }
    }

    /// Re-arms the pending slots bound meanwhile (they stay pending: see [`Plt::settle`]).
    #[cold]
    fn rearm_pending(&self) {
        let mut left = self.pending.load(Ordering::SeqCst);
        for (i, s) in self.used().iter().enumerate() {
            if left == 0 {
                break;
            }
            let n = s.pending.load(Ordering::SeqCst);
            if n != 0 {
                left = left.saturating_sub(n);
                self.rearm_at(i);
            }
        }
    }

    /// After a call that went through the lazy binder: learn the bound address and put the
    /// stub back into the slot (8-byte aligned stores are atomic; racing threads converge).
    pub fn rearm(&self, entry: usize) {
        if let Some(i) = self.used().iter().position(|s| s.entry() == entry) {
            self.rearm_at(i);
        }
    }

    /// Re-arms slot `i` if the binder wrote its bound address.
    fn rearm_at(&self, i: usize) {
        let Some(s) = self.slot(i) else {
            return;
        };
        // SAFETY: `got` is the module's writable (lazy, non-RELRO) GOT slot for relocation i.
        let got = unsafe { AtomicUsize::from_ptr(s.got.load(Ordering::Relaxed) as *mut usize) };
        let cur = got.load(Ordering::SeqCst);
        let stub = self.stub(i);
        if cur != stub {
            s.target.store(cur, Ordering::Relaxed);
            if s.kind() == Kind::Hook && !s.no_fast.load(Ordering::Relaxed) {
                s.fast.store(cur, Ordering::Relaxed);
            }
            got.store(stub, Ordering::SeqCst);
        }
    }
}

/// Calls kept by [`Plt::rearm_later`] per thread, nested ones included.
const CLAIMS: usize = 4;

/// A thread's calls sent to the lazy binder whose binder may still be running: slot index and
/// the call's return slot ([`Plt::rearm_later`], [`Plt::settle`]).
#[derive(Debug)]
pub struct Claims {
    at: [(usize, usize); CLAIMS],
    len: usize,
}

impl Default for Claims {
    fn default() -> Claims {
        Claims::new()
    }
}

impl Claims {
    pub const fn new() -> Claims {
        Claims {
            at: [(0, 0); CLAIMS],
            len: 0,
        }
    }
}

/// The session's PLT hooks, if installed.
#[inline]
pub fn get() -> Option<&'static Plt> {
    PLT.get()
}

/// How calls of `name` are hooked; `None` for names never hooked: the hooks themselves, and
/// functions whose caller or return must not change (unwinding, start-up, exit handlers). The
/// setjmp and longjmp families are those of the one table, [`stack_effect`].
fn kind_of(name: &str) -> Option<Kind> {
    match name {
        "mcount"
        | "_mcount"
        | "__fentry__"
        | "__gnu_mcount_nc"
        | "__cyg_profile_func_enter"
        | "__cyg_profile_func_exit"
        | "_mcleanup"
        | "__libc_start_main"
        | "__cxa_throw"
        | "__cxa_rethrow"
        | "__cxa_begin_catch"
        | "__cxa_end_catch"
        | "__cxa_finalize"
        | "__gxx_personality_v0"
        | "_Unwind_Resume" => None,
        "_Unwind_RaiseException" => Some(Kind::Unwind),
        "dlopen" => Some(Kind::Dlopen),
        "dlmopen" => Some(Kind::Dlmopen),
        "dlsym" | "dlvsym" => Some(Kind::Dlsym),
        // `vfork`'s child shares the parent's memory: it must not write on the parent's
        // state. (`fork` and `daemon` return in two tasks with memories of their own.)
        "vfork" => Some(Kind::Vfork),
        // The dynamic loader's internals (reached from libraries' PLTs).
        n if n.starts_with("_dl_") => None,
        n => match stack_effect(n) {
            Some(StackEffect::Setjmp) => Some(Kind::Setjmp),
            Some(StackEffect::Longjmp) => Some(Kind::Longjmp),
            Some(StackEffect::Exec | StackEffect::Fork) | None => Some(Kind::Hook),
        },
    }
}

/// The loaded objects: path (`/proc/thread-self/exe` for the executable, the first one
/// `dl_iterate_phdr` reports) and load bias.
pub(crate) fn loaded_objects() -> Vec<(String, usize)> {
    unsafe extern "C" fn each(
        info: *mut libc::dl_phdr_info,
        _size: libc::size_t,
        data: *mut libc::c_void,
    ) -> libc::c_int {
        // SAFETY: `data` is the Vec below, `info` valid for this call; `dlpi_name` is a
        // NUL-terminated string or null.
        unsafe {
            let out = &mut *(data as *mut Vec<(String, usize)>);
            let name = (*info).dlpi_name;
            let name = if out.is_empty() {
                "/proc/thread-self/exe".to_string()
            } else if name.is_null() {
                String::new()
            } else {
                core::ffi::CStr::from_ptr(name)
                    .to_string_lossy()
                    .into_owned()
            };
            out.push((name, (*info).dlpi_addr as usize));
        }
        0
    }
    let mut out: Vec<(String, usize)> = Vec::new();
    // SAFETY: the callback matches and only touches `out` during the call.
    unsafe { libc::dl_iterate_phdr(Some(each), &mut out as *mut _ as *mut libc::c_void) };
    out
}

/// A GOT slot to hook.
struct Want {
    got: usize,
    entry: usize,
    kind: Kind,
    /// The module's PLT: an unbound slot points into it.
    plt: (usize, usize),
    name: Box<str>,
}

/// The slots of one module worth hooking, and its RELRO range (the PLT's layout and the
/// segments come from the ELF model, [`record_format::elf`]).
fn module_slots(path: &str, bias: usize, out: &mut Vec<Want>, relro: &mut Vec<(usize, usize)>) {
    use record_format::elf;
    // Mapped, and parsed without its static symbol table: only the PLT, the dynamic symbols
    // and relocations, and the segments are needed.
    let Ok(bytes) = record_format::file::map_regular(std::path::Path::new(path)) else {
        return;
    };
    let Some(elf) = elf::parse_dynamic(&bytes) else {
        return;
    };
    let Some(slots) = elf::plt_slots(&elf) else {
        return;
    };
    let at = |addr: u64| bias + addr as usize;
    let plt = (at(slots.lazy_stubs.0), at(slots.lazy_stubs.1));
    for slot in slots.iter() {
        if let Some(kind) = kind_of(slot.name).filter(|_| !slot.name.is_empty()) {
            out.push(Want {
                got: at(slot.got),
                entry: at(slot.entry),
                kind,
                plt,
                name: Box::from(slot.name),
            });
        }
    }
    let page = crate::sys::PAGE_SIZE;
    relro.extend(
        elf::relro_ranges(&elf)
            .map(|(start, end)| (at(start) & !(page - 1), at(end).next_multiple_of(page))),
    );
}

/// Objects whose PLT `--nest-libcall` leaves alone, as uftrace does: libmcount itself, the
/// dynamic loader, the vDSO, and the C runtime (libc, libpthread, libdl, libgcc_s), whose
/// internal calls run before and under everything else.
fn never_nested(path: &str) -> bool {
    let base = path.rsplit('/').next().unwrap_or(path);
    path.is_empty()
        || [
            "libmcount",
            "ld-linux",
            "linux-vdso",
            "libc.so",
            "libpthread.so",
            "libdl.so",
            "libgcc_s.so",
        ]
        .iter()
        .any(|p| base.starts_with(p))
}

/// Hooks the executable's PLT, and with `nest` (`--nest-libcall`) those of the libraries
/// loaded at start-up (library constructor, before tracing starts).
pub fn install(nest: bool) {
    let page = crate::sys::PAGE_SIZE;
    let table = (MAX_SLOTS * core::mem::size_of::<Slot>()).next_multiple_of(page);
    let area = (STUBS_AT + MAX_SLOTS * STUB).next_multiple_of(page);
    let rw = libc::PROT_READ | libc::PROT_WRITE;
    let anon = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE;
    let (Ok(slots), Ok(stubs)) = (
        crate::sys::mmap(table, rw, anon, -1, 0),
        crate::sys::mmap(area, rw, anon, -1, 0),
    ) else {
        return;
    };
    // SAFETY: `slots` is a fresh zeroed mapping of `MAX_SLOTS` slots, never unmapped; zero is
    // a valid value of every (atomic) field. `stubs` starts with the hook's address word.
    let slots = unsafe {
        (stubs as *mut usize).write(crate::cpu::plt_hook_addr());
        core::slice::from_raw_parts(slots as *const Slot, MAX_SLOTS)
    };
    let plt = PLT.get_or_init(|| Plt {
        slots,
        len: AtomicUsize::new(0),
        names: Mutex::new(Vec::new()),
        stubs: stubs as usize,
        pending: &PENDING,
        hooked: Mutex::new(Vec::new()),
        nest,
        relro: Mutex::new(Vec::new()),
    });
    SLOTS.store(plt.slots.as_ptr() as usize, Ordering::Release);
    plt.add(|k, path| k == 0 || (nest && !never_nested(path)), false);
}

/// After `dlopen`: with `--nest-libcall`, hooks the PLTs of the libraries it loaded, their
/// entries bound to the session's argument specs ([`crate::late_args`]).
pub fn after_dlopen() {
    if let Some(p) = get().filter(|p| p.nest) {
        p.add(|_, path| !never_nested(path), true);
    }
}

impl Plt {
    /// Hooks the slots of the loaded objects not hooked yet that `wanted(index, path)`
    /// accepts: their stubs go on fresh pages of the stub area, their slots after those in
    /// use, which are published before the GOT slots lead to them. `late` (after start-up, the
    /// session's argument table built): the entries get argument tables of their own,
    /// published first too, and those with items never take the fast path.
    fn add(&self, wanted: impl Fn(usize, &str) -> bool, late: bool) {
        let Ok(mut hooked) = self.hooked.lock() else {
            return;
        };
        let mut wants = Vec::new();
        let mut relro = Vec::new();
        for (k, (path, bias)) in loaded_objects().into_iter().enumerate() {
            if hooked.contains(&bias) || !wanted(k, &path) {
                continue;
            }
            hooked.push(bias);
            module_slots(&path, bias, &mut wants, &mut relro);
        }
        if wants.is_empty() {
            return;
        }
        let page = crate::sys::PAGE_SIZE;
        // The first batch shares the first page with the hook's address; later ones start
        // on a page of their own, so that no page in use changes its protection.
        let len = self.len.load(Ordering::Relaxed);
        let start = if len == 0 {
            0
        } else {
            (self.stub(len).next_multiple_of(page) - self.stubs - STUBS_AT) / STUB
        };
        if start + wants.len() > MAX_SLOTS {
            crate::log::error(b"too many PLT slots to hook", 0);
            return;
        }
        let slow = match late {
            true => {
                let named: Vec<(usize, &str)> = wants.iter().map(|w| (w.entry, &*w.name)).collect();
                crate::late_args::bind_plt(&named)
            }
            false => Vec::new(),
        };
        let first = self.stub(start) & !(page - 1);
        let end = self.stub(start + wants.len()).next_multiple_of(page);
        // SAFETY: [first, end) lies inside the stub area, and no stub in it is in use yet
        // (the first batch's page only holds the hook's address so far).
        unsafe {
            let at = first as *mut libc::c_void;
            libc::mprotect(at, end - first, libc::PROT_READ | libc::PROT_WRITE);
            for i in 0..wants.len() {
                let stub = self.stub(start + i);
                let code = stub_code(stub, self.stubs, (start + i) as u32);
                core::ptr::copy_nonoverlapping(code.as_ptr(), stub as *mut u8, STUB);
            }
            libc::mprotect(at, end - first, libc::PROT_READ | libc::PROT_EXEC);
        }
        // Slots inside a RELRO segment (`-z now`) are read-only by now.
        for &(start, end) in &relro {
            // SAFETY: the range is a loaded object's own RELRO segment, mapped for its lifetime.
            unsafe {
                libc::mprotect(
                    start as *mut libc::c_void,
                    end - start,
                    libc::PROT_READ | libc::PROT_WRITE,
                )
            };
        }
        let mut gots = Vec::with_capacity(wants.len());
        let mut names = self.names.lock().ok();
        for (i, w) in wants.into_iter().enumerate() {
            // SAFETY: `got` is a loaded object's GOT slot for one of its relocations: mapped,
            // aligned, and writable now.
            let got_word = unsafe { AtomicUsize::from_ptr(w.got as *mut usize) };
            let cur = got_word.load(Ordering::Relaxed);
            let in_plt = cur >= w.plt.0 && cur < w.plt.1;
            let s = &self.slots[start + i];
            let handler = slow.get(i).copied().unwrap_or(false);
            let fast = if w.kind == Kind::Hook && !in_plt && !handler {
                cur
            } else {
                0
            };
            s.no_fast.store(handler, Ordering::Relaxed);
            s.fast.store(fast, Ordering::Relaxed);
            s.entry.store(w.entry, Ordering::Relaxed);
            s.got.store(w.got, Ordering::Relaxed);
            s.target.store(cur, Ordering::Relaxed);
            s.lazy
                .store(if in_plt { cur } else { 0 }, Ordering::Relaxed);
            s.kind.store(w.kind as u8, Ordering::Relaxed);
            if let Some(n) = names.as_mut() {
                n.push((w.entry, w.name));
            }
            gots.push(got_word);
        }
        drop(names);
        self.len.store(start + gots.len(), Ordering::Release);
        for (i, got_word) in gots.into_iter().enumerate() {
            got_word.store(self.stub(start + i), Ordering::Release);
        }
        for &(start, end) in &relro {
            // SAFETY: as above; back to read-only.
            unsafe { libc::mprotect(start as *mut libc::c_void, end - start, libc::PROT_READ) };
        }
        if let Ok(mut all) = self.relro.lock() {
            all.extend(relro);
        }
    }

    /// Sends the calls through the hooked GOT word at `got` to `to` (attach mode: libmcount's
    /// thunk of an unwinder entry point, as a preloaded libmcount's definition would be);
    /// returns where they went before, or `None` when that word is not hooked.
    pub fn retarget(&self, got: usize, to: usize) -> Option<usize> {
        let s = self
            .used()
            .iter()
            .find(|s| s.got.load(Ordering::Relaxed) == got)?;
        let old = s.target.swap(to, Ordering::Relaxed);
        if s.fast.load(Ordering::Relaxed) != 0 {
            s.fast.store(to, Ordering::Relaxed);
        }
        Some(old)
    }

    /// An attached session ends (`false`: every hooked GOT slot gets back the address its
    /// calls go to, and the process's library calls no longer pass through libmcount) or a new
    /// one starts (`true`: the stubs again, with the addresses bound meanwhile learnt). Called
    /// while the process's other threads are stopped; if one of them holds the table's lock
    /// (hooking a `dlopen`ed library), nothing changes: calls still work through the hooks.
    pub fn set_hooked(&self, on: bool) {
        let (Ok(_hooked), Ok(relro)) = (self.hooked.try_lock(), self.relro.try_lock()) else {
            return;
        };
        let protect = |prot| {
            for &(start, end) in relro.iter() {
                // SAFETY: a hooked object's own RELRO segment, mapped for its lifetime.
                unsafe { libc::mprotect(start as *mut libc::c_void, end - start, prot) };
            }
        };
        protect(libc::PROT_READ | libc::PROT_WRITE);
        for (i, s) in self.used().iter().enumerate() {
            let at = s.got.load(Ordering::Relaxed);
            if at == 0 {
                continue;
            }
            // SAFETY: a hooked GOT slot of a loaded object, writable now.
            let got = unsafe { AtomicUsize::from_ptr(at as *mut usize) };
            let stub = self.stub(i);
            if on {
                let cur = got.load(Ordering::Relaxed);
                if cur != stub && cur != s.lazy.load(Ordering::Relaxed) {
                    // Bound while unhooked.
                    s.target.store(cur, Ordering::Relaxed);
                    if s.kind() == Kind::Hook && !s.no_fast.load(Ordering::Relaxed) {
                        s.fast.store(cur, Ordering::Relaxed);
                    }
                }
                got.store(stub, Ordering::Release);
            } else {
                got.store(s.target.load(Ordering::Relaxed), Ordering::Release);
            }
        }
        protect(libc::PROT_READ);
    }
}

/// `endbr64; push imm32 i; jmp *[rip - to word at page start]`, padded to 16 bytes.
fn stub_code(at: usize, page: usize, i: u32) -> [u8; STUB] {
    let mut c = [0x90u8; STUB];
    c[0..4].copy_from_slice(&[0xf3, 0x0f, 0x1e, 0xfa]);
    c[4] = 0x68;
    c[5..9].copy_from_slice(&i.to_le_bytes());
    c[9] = 0xff;
    c[10] = 0x25;
    let next = at + 15;
    let disp = (page as i64 - next as i64) as i32;
    c[11..15].copy_from_slice(&disp.to_le_bytes());
    c
}

#[cfg(test)]
mod tests;
