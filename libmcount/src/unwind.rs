//! C++ exceptions through hijacked frames (runtime spec §6.4).
//!
//! The unwinder finds each frame's caller through its return address; a hijacked slot points
//! into the exit trampoline, which has no unwind info, and the throw ends in
//! `std::terminate`. So libmcount interposes the entry points of unwinding:
//!
//! * `__cxa_throw`, `__cxa_rethrow`, `_Unwind_Resume` (the end of every cleanup landing pad):
//!   put the original return addresses back into every hijacked slot, mark the thread
//!   `in_exception`, and jump to the real function (the naked thunks in `arch` tail-jump, so
//!   no libmcount frame is on the stack while it unwinds);
//! * `__cxa_begin_catch` (called by every `catch` block, in the catching frame): call the
//!   real one, then pop the frames the unwinder removed — every frame whose return slot is at
//!   or below the thunk's own return slot — with EXIT records, and hijack the others again;
//! * an entry hook that finds `in_exception` set (traced code called from a landing pad) does
//!   the same with its own slot as the boundary (see `entry`);
//! * `backtrace` (glibc) and `_Unwind_Backtrace` (libgcc), the stack walkers: restore the
//!   slots, walk, hijack them again (the walker's own frame left out of what the program sees).

use crate::cpu::exit_trampoline_addr;
use crate::lifecycle;
use core::ffi::{c_void, CStr};
use core::sync::atomic::{AtomicUsize, Ordering};

/// The next definition of `name` after libmcount's (looked up once, then cached), or the one
/// [`set_real`] gave (attach mode, where RTLD_NEXT finds nothing for a `dlopen`ed libmcount).
fn real(cache: &AtomicUsize, name: &CStr) -> usize {
    // Relaxed: the value is a pure function of the loaded objects; racing lookups agree.
    let mut f = cache.load(Ordering::Relaxed);
    if f == 0 {
        // SAFETY: `name` is NUL-terminated; RTLD_NEXT is a valid pseudo-handle.
        f = unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr()) } as usize;
        if f == 0 {
            crate::log::fatal(b"cannot find the real unwinder function");
        }
        cache.store(f, Ordering::Relaxed);
    }
    f
}

/// The cache of the real definition of `name`, one of the interposed names.
fn cache_of(name: &CStr) -> Option<&'static AtomicUsize> {
    Some(match name.to_bytes() {
        b"__cxa_throw" => &CXA_THROW,
        b"__cxa_rethrow" => &CXA_RETHROW,
        b"_Unwind_Resume" => &UNWIND_RESUME,
        b"__cxa_begin_catch" => &CXA_BEGIN_CATCH,
        b"backtrace" => &BACKTRACE,
        b"_Unwind_Backtrace" => &UNWIND_BACKTRACE,
        _ => return None,
    })
}

/// Sets the definition the thunk of `name` jumps to (attach mode, see `unwind_got`).
pub fn set_real(name: &CStr, f: usize) {
    if let Some(c) = cache_of(name) {
        c.store(f, Ordering::Relaxed);
    }
}

/// As [`set_real`], unless a definition is known already.
pub fn set_real_if_unknown(name: &CStr, f: usize) {
    if let Some(c) = cache_of(name) {
        let _ = c.compare_exchange(0, f, Ordering::Relaxed, Ordering::Relaxed);
    }
}

/// Whether the thunk of `name` knows where to jump.
pub fn has_real(name: &CStr) -> bool {
    cache_of(name).is_some_and(|c| c.load(Ordering::Relaxed) != 0)
}

static CXA_THROW: AtomicUsize = AtomicUsize::new(0);
static CXA_RETHROW: AtomicUsize = AtomicUsize::new(0);
static UNWIND_RESUME: AtomicUsize = AtomicUsize::new(0);
static CXA_BEGIN_CATCH: AtomicUsize = AtomicUsize::new(0);

/// Restores the thread's return slots before unwinding starts or resumes. `sp` is the stack
/// pointer of the thunk's caller: frames with slots below it are already gone.
fn before_unwind(sp: usize) {
    let Some(td) = lifecycle::existing() else {
        return;
    };
    if td.guard() {
        return;
    }
    td.set_guard(true);
    td.prune(|slot| slot < sp);
    // SAFETY: every frame left has its slot at or above the caller's stack pointer, inside
    // frames that are live until the unwinder removes them (it reads, not writes, them).
    unsafe { td.restore_slots(exit_trampoline_addr()) };
    td.start_exception(sp);
    td.set_guard(false);
}

/// Called by the `__cxa_throw` thunk; returns the real function.
pub extern "C" fn prepare_throw(sp: usize) -> usize {
    before_unwind(sp);
    real(&CXA_THROW, c"__cxa_throw")
}

/// Called by the `__cxa_rethrow` thunk; returns the real function.
pub extern "C" fn prepare_rethrow(sp: usize) -> usize {
    before_unwind(sp);
    real(&CXA_RETHROW, c"__cxa_rethrow")
}

/// Called by the `_Unwind_Resume` thunk; returns the real function.
pub extern "C" fn prepare_resume(sp: usize) -> usize {
    before_unwind(sp);
    real(&UNWIND_RESUME, c"_Unwind_Resume")
}

/// Reached by a tail jump from the `__cxa_begin_catch` thunk, so it returns straight to the
/// catching function; `slot` is the address of that return address.
pub extern "C" fn begin_catch(exc: *mut c_void, slot: usize) -> *mut c_void {
    let f = real(&CXA_BEGIN_CATCH, c"__cxa_begin_catch");
    // SAFETY: `f` is libstdc++'s __cxa_begin_catch, which has this signature.
    let f: extern "C" fn(*mut c_void) -> *mut c_void = unsafe { core::mem::transmute(f) };
    let ret = f(exc);
    if let Some(td) = lifecycle::existing() {
        if !td.guard() && td.in_exception() {
            td.set_guard(true);
            td.set_in_exception(false);
            td.prune(|s| s <= slot);
            // SAFETY: the frames left have slots above the catching frame's stack pointer:
            // they are live.
            unsafe { td.rehijack_slots(exit_trampoline_addr()) };
            td.set_guard(false);
        }
    }
    ret
}

static BACKTRACE: AtomicUsize = AtomicUsize::new(0);

/// Reached by a tail jump from the `backtrace` thunk (so it returns straight to the caller);
/// `sp` is the caller's stack pointer.
pub extern "C" fn backtrace(buf: *mut *mut c_void, size: i32, sp: usize) -> i32 {
    let f = real(&BACKTRACE, c"backtrace");
    // SAFETY: `f` is glibc's backtrace, which has this signature.
    let f: extern "C" fn(*mut *mut c_void, i32) -> i32 = unsafe { core::mem::transmute(f) };
    drop_own_frame(buf, with_real_slots(sp, || f(buf, size)))
}

/// Runs the stack walk `walk` with the original return addresses in every hijacked slot of
/// the calling thread, then hijacks them again. `sp` is the stack pointer of the walker's
/// caller.
fn with_real_slots<T>(sp: usize, walk: impl FnOnce() -> T) -> T {
    let tramp = exit_trampoline_addr();
    let td = lifecycle::existing().filter(|td| !td.guard() && !td.in_exception());
    let Some(td) = td else {
        return walk();
    };
    td.set_guard(true);
    // `sp - 8` holds the return address of this very call: when the walker was called
    // through a hooked PLT slot, its frame is the innermost and that slot is hijacked too; it
    // is restored for the walk and hijacked again below, so the call returns through the exit
    // trampoline and gets its EXIT record.
    td.prune(|slot| slot < sp - 8);
    // SAFETY: every frame left has its slot at or above the return slot of this call: live.
    unsafe { td.restore_slots(tramp) };
    let result = walk();
    // SAFETY: the same frames are still live (a stack walk only reads the stack).
    unsafe { td.rehijack_slots(tramp) };
    td.set_guard(false);
    result
}

static UNWIND_BACKTRACE: AtomicUsize = AtomicUsize::new(0);

/// `_Unwind_Trace_Fn`: called by the unwinder for each frame; returns a reason code.
type TraceFn = extern "C" fn(ctx: *mut c_void, arg: *mut c_void) -> i32;

/// The program's callback, with the first frame (this wrapper's) still to be skipped.
struct Trace {
    user: TraceFn,
    arg: *mut c_void,
    skip: bool,
}

/// Forwards every frame but the first (the wrapper's own) to the program's callback.
extern "C" fn forward(ctx: *mut c_void, arg: *mut c_void) -> i32 {
    // SAFETY: `arg` is the `Trace` on `unwind_backtrace`'s stack, live during the walk.
    let t = unsafe { &mut *(arg as *mut Trace) };
    if t.skip {
        t.skip = false;
        return 0; // _URC_NO_REASON: go on
    }
    (t.user)(ctx, t.arg)
}

/// Reached by a tail jump from the `_Unwind_Backtrace` thunk (so it returns straight to the
/// caller); `sp` is the caller's stack pointer. The program's callback sees the frames it
/// would see without libmcount.
pub extern "C" fn unwind_backtrace(trace: TraceFn, arg: *mut c_void, sp: usize) -> i32 {
    let f = real(&UNWIND_BACKTRACE, c"_Unwind_Backtrace");
    // SAFETY: `f` is libgcc's _Unwind_Backtrace, which has this signature.
    let f: extern "C" fn(TraceFn, *mut c_void) -> i32 = unsafe { core::mem::transmute(f) };
    let mut t = Trace {
        user: trace,
        arg,
        skip: true,
    };
    with_real_slots(sp, || f(forward, &mut t as *mut Trace as *mut c_void))
}

/// Removes the first entry (this wrapper's own frame) so the caller sees what it would have
/// seen without libmcount.
fn drop_own_frame(buf: *mut *mut c_void, n: i32) -> i32 {
    if n <= 1 || buf.is_null() {
        return n;
    }
    let n = n as usize;
    // SAFETY: backtrace filled `n` entries of `buf`.
    let entries = unsafe { core::slice::from_raw_parts_mut(buf, n) };
    entries.copy_within(1.., 0);
    n as i32 - 1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_real_is_what_the_thunk_jumps_to() {
        assert!(!has_real(c"__cxa_rethrow"));
        set_real_if_unknown(c"__cxa_rethrow", 0x1234);
        assert!(has_real(c"__cxa_rethrow"));
        set_real_if_unknown(c"__cxa_rethrow", 0x5678);
        assert_eq!(real(&CXA_RETHROW, c"__cxa_rethrow"), 0x1234);
        set_real(c"__cxa_rethrow", 0x5678);
        assert_eq!(real(&CXA_RETHROW, c"__cxa_rethrow"), 0x5678);
        assert!(!has_real(c"nothing"));
    }
}
