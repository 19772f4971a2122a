//! User SDT events (`-E PROVIDER:NAME`): the executable's probe sites of the events that
//! `events.txt` lists (the recorder selected them, see `record_format::sdt`) are enabled at
//! start-up, and each time a thread passes one, an EVENT record with the event's id (no
//! payload) is written into its data file.
//!
//! A probe site is a one-byte `nop`: no call fits there. The constructor writes `int3` over
//! it (the page made writable for the moment, then given back `r-x`) and installs a `SIGTRAP`
//! handler. The trap stops the thread after the `int3`, which is where the `nop` ended, so the
//! handler records the event and returns: the program goes on as if the `nop` had run. Cost:
//! one signal delivery per probe hit: 3.5 to 5 µs per recorded hit on the measuring VM (a
//! loop of a million hits; uftrace 0.13 took 13 to 19 µs per hit there), against nothing for
//! the `nop`; sites of events not asked for stay `nop`s. Probes with a semaphore get it
//! incremented, so that code guarded by `PROVIDER_NAME_ENABLED()` runs, as under a tracer.
//!
//! The program keeps its own `SIGTRAP` handling: `sigaction`/`signal` for `SIGTRAP` are
//! interposed (`wrap`) while probes are enabled: the program's action is kept here, reported
//! back to it, and called by the handler for every trap that is not at an enabled site
//! (another `int3`, a `raise`); a default action is restored and the signal raised again, so
//! the program ends as it would have. The kept action's `sa_mask` is not applied.
//!
//! Only the executable's probes are enabled (a library's are not, see the recorder). After
//! the session ends the sites stay `int3`, and the handler keeps skipping them silently.

use crate::{config, lifecycle, sys};
use core::cell::UnsafeCell;
use core::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::OnceLock;

/// Enabled sites: (run-time address, event id), sorted by address.
static SITES: OnceLock<Box<[(usize, u64)]>> = OnceLock::new();

/// Set once the `SIGTRAP` handler is installed: `sigaction`/`signal` for `SIGTRAP` are then
/// answered from [`CHAINED`].
static OWNED: AtomicBool = AtomicBool::new(false);

/// The program's own `SIGTRAP` action, in two slots: a change writes the slot not in use,
/// then publishes its index (Release, paired with the handler's Acquire load), so the handler
/// never reads a half-written action. Concurrent changes by two threads are not ordered.
struct Chained([UnsafeCell<libc::sigaction>; 2]);
// SAFETY: written only through the slot protocol above.
unsafe impl Sync for Chained {}
static CHAINED: Chained = Chained([const { UnsafeCell::new(zeroed_action()) }; 2]);
static CHAINED_AT: AtomicUsize = AtomicUsize::new(0);

const fn zeroed_action() -> libc::sigaction {
    // SAFETY: sigaction is plain data; all-zero is SIG_DFL with an empty mask.
    unsafe { core::mem::zeroed() }
}

/// `si_code` of a trap raised by an instruction (`int3`).
const SI_KERNEL: i32 = 0x80;
const INT3: u8 = 0xcc;
const NOP: u8 = 0x90;

/// Enables the probes of the events in the data directory's `events.txt` (constructor only).
/// `exe` is the executable's path, `exe_start` the start of its first mapping.
pub fn init(dirfd: i32, exe: &std::path::Path, exe_start: u64) {
    let Some(text) = read_events(dirfd) else {
        crate::log::error(b"cannot read events.txt: SDT events are not recorded", 0);
        return;
    };
    let events = record_format::sdt::parse_events_txt(&text);
    let Ok(bytes) = std::fs::read(exe) else {
        return;
    };
    let Some(elf) = record_format::elf::parse(&bytes) else {
        return;
    };
    let bias = record_format::elf::load_bias(&elf, exe_start) as usize;
    let mut sites = Vec::new();
    for p in record_format::elf::sdt::sdt_probes(&elf, &bytes) {
        let full = p.full_name();
        let Some(&(id, _)) = events.iter().find(|(_, n)| *n == full) else {
            continue;
        };
        let at = bias.wrapping_add(p.pc as usize);
        if p.semaphore != 0 {
            let sem = bias.wrapping_add(p.semaphore as usize) as *mut u16;
            // SAFETY: the semaphore is a 2-byte, 2-aligned counter in the executable's
            // writable data (`.probes`), mapped at its link address plus the bias.
            let sem = unsafe { core::sync::atomic::AtomicU16::from_ptr(sem) };
            sem.fetch_add(1, Ordering::Relaxed);
        }
        sites.push((at, id));
    }
    sites.sort_unstable();
    sites.dedup();
    if sites.is_empty() {
        return;
    }
    let sites = SITES.get_or_init(|| sites.into_boxed_slice());
    if !install_handler() {
        return;
    }
    for &(at, _) in sites.iter() {
        if let Err(e) = patch(at) {
            crate::log::error(b"cannot enable an SDT probe", e);
        }
    }
    crate::log::debug(1, b"mcount", &[b"SDT probes enabled"]);
}

fn read_events(dirfd: i32) -> Option<String> {
    let fd = sys::openat(dirfd, c"events.txt", libc::O_RDONLY | libc::O_CLOEXEC, 0).ok()?;
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match sys::read(fd, &mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => out.extend_from_slice(&buf[..n]),
        }
    }
    sys::close(fd);
    String::from_utf8(out).ok()
}

/// Writes `int3` over the `nop` at `at`.
fn patch(at: usize) -> sys::SysResult<()> {
    let page = at & !(sys::PAGE_SIZE - 1);
    // SAFETY: `at` is a probe site inside the executable's mapped text (its note says so);
    // reading one byte of mapped memory has no other effect.
    if unsafe { (at as *const u8).read_volatile() } != NOP {
        return Err(libc::EINVAL);
    }
    let rwx = libc::PROT_READ | libc::PROT_WRITE | libc::PROT_EXEC;
    // SAFETY: the page holds mapped text; it stays executable while it is writable.
    if unsafe { libc::mprotect(page as *mut libc::c_void, sys::PAGE_SIZE, rwx) } != 0 {
        return Err(std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EPERM));
    }
    // SAFETY: the page is writable now; one byte of the site is replaced.
    unsafe { (at as *mut u8).write_volatile(INT3) };
    let rx = libc::PROT_READ | libc::PROT_EXEC;
    // SAFETY: as above: the text's own protections back.
    unsafe { libc::mprotect(page as *mut libc::c_void, sys::PAGE_SIZE, rx) };
    Ok(())
}

/// Installs the handler, keeping the action in place as the program's.
fn install_handler() -> bool {
    let mut old = zeroed_action();
    let mut act = zeroed_action();
    act.sa_sigaction = on_sigtrap as *const () as usize;
    act.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK | libc::SA_RESTART | libc::SA_NODEFER;
    if crate::wrap::real_sigaction(libc::SIGTRAP, &act, &mut old) != 0 {
        crate::log::error(
            b"cannot install the SIGTRAP handler: SDT events are not recorded",
            0,
        );
        return false;
    }
    set_chained(&old);
    OWNED.store(true, Ordering::Release);
    true
}

fn chained() -> libc::sigaction {
    let i = CHAINED_AT.load(Ordering::Acquire);
    // SAFETY: slot `i` is published and not written until another change publishes the other.
    unsafe { *CHAINED.0[i].get() }
}

fn set_chained(act: &libc::sigaction) {
    let next = 1 - CHAINED_AT.load(Ordering::Relaxed);
    // SAFETY: slot `next` is not the published one (see `Chained`).
    unsafe { *CHAINED.0[next].get() = *act };
    CHAINED_AT.store(next, Ordering::Release);
}

/// `sigaction(SIGTRAP, act, old)` as the program sees it while probes are enabled: `None`
/// when SIGTRAP is not libmcount's (the real call must be made).
pub fn program_sigaction(
    act: Option<&libc::sigaction>,
    old: Option<&mut libc::sigaction>,
) -> Option<i32> {
    if !OWNED.load(Ordering::Acquire) {
        return None;
    }
    if let Some(old) = old {
        *old = chained();
    }
    if let Some(act) = act {
        set_chained(act);
    }
    Some(0)
}

/// The event id of an enabled site at `at`.
fn site_id(at: usize) -> Option<u64> {
    let sites = SITES.get()?;
    let i = sites.binary_search_by_key(&at, |s| s.0).ok()?;
    Some(sites[i].1)
}

extern "C" fn on_sigtrap(sig: i32, info: *mut libc::siginfo_t, uctx: *mut libc::c_void) {
    // SAFETY: the kernel passes valid siginfo and ucontext pointers to SA_SIGINFO handlers.
    let (code, rip) = unsafe {
        let ctx = &*(uctx as *const libc::ucontext_t);
        (
            (*info).si_code,
            ctx.uc_mcontext.gregs[libc::REG_RIP as usize] as usize,
        )
    };
    if code == SI_KERNEL {
        if let Some(id) = site_id(rip.wrapping_sub(1)) {
            record(id);
            return;
        }
    }
    forward(sig, info, uctx);
}

/// Writes the EVENT of a probe hit on the calling thread.
fn record(id: u64) {
    if !config::tracing() || !crate::filter::tracing() {
        return;
    }
    let Some(td) = lifecycle::current() else {
        return;
    };
    if td.guard() || td.vfork_child() {
        return;
    }
    td.set_guard(true);
    // SAFETY: __errno_location has no preconditions; the value is put back below.
    let errno = unsafe { *libc::__errno_location() };
    td.event_now(id);
    // SAFETY: as above.
    unsafe { *libc::__errno_location() = errno };
    td.set_guard(false);
}

/// Hands a trap that is not a probe's to the program's action.
fn forward(sig: i32, info: *mut libc::siginfo_t, uctx: *mut libc::c_void) {
    let act = chained();
    match act.sa_sigaction {
        libc::SIG_IGN => {}
        libc::SIG_DFL => {
            // The default action (a core dump) once this handler returns.
            let dfl = zeroed_action();
            crate::wrap::real_sigaction(sig, &dfl, core::ptr::null_mut());
            set_chained(&dfl);
            OWNED.store(false, Ordering::Release);
            // SAFETY: plain system call without pointers.
            unsafe { libc::syscall(libc::SYS_tgkill, sys::getpid(), sys::gettid(), sig) };
        }
        h if act.sa_flags & libc::SA_SIGINFO != 0 => {
            if act.sa_flags & libc::SA_RESETHAND != 0 {
                set_chained(&zeroed_action());
            }
            // SAFETY: the program installed `h` with SA_SIGINFO: it has this signature.
            let f: extern "C" fn(i32, *mut libc::siginfo_t, *mut libc::c_void) =
                unsafe { core::mem::transmute(h) };
            f(sig, info, uctx);
        }
        h => {
            if act.sa_flags & libc::SA_RESETHAND != 0 {
                set_chained(&zeroed_action());
            }
            // SAFETY: the program installed `h` without SA_SIGINFO: it takes the number.
            let f: extern "C" fn(i32) = unsafe { core::mem::transmute(h) };
            f(sig);
        }
    }
}
