//! Each thread's life: its [`ThreadState`] is created by its first hook ([`current`]), found
//! through the thread pointer slot afterwards, closed at thread exit (the `pthread` key
//! destructor [`thread_exit`]) and at process end ([`finish_current`]), and taken over by the
//! child after `fork` ([`fork_child`]).
//!
//! The state lives in its own anonymous `mmap`: header, shadow-stack frames, then (with
//! filters) the limits each frame saved and (with filters and arguments) the pending argument
//! payloads.

use crate::buffer::DatWriter;
use crate::cpu::{tls_get, tls_set};
use crate::filter::{self, FilterState, Saved};
use crate::rstack::{Frame, ShadowStack};
use crate::thread::{block, ThreadState, VforkStep, DEAD, PENDING_ARGS};
use crate::{clock, config, sys, tasklog};
use core::sync::atomic::{AtomicU32, AtomicUsize, Ordering};

/// The calling thread's state, created on first use; `None` if the thread is not traced.
#[inline]
pub fn current() -> Option<&'static mut ThreadState> {
    let p = tls_get();
    let p = match p {
        0 => {
            // Hooks that fire from here on (the C library's functions are patched with
            // `-P .@libc`) see DEAD and return: `init_current` says so too, but
            // `__errno_location` runs before it.
            tls_set(DEAD);
            // Setting up calls the C library: the program's errno must survive it.
            // SAFETY: __errno_location returns this thread's errno address.
            let errno = unsafe { libc::__errno_location() };
            // SAFETY: as above.
            let saved = unsafe { *errno };
            let p = init_current(true);
            // SAFETY: as above.
            unsafe { *errno = saved };
            p
        }
        DEAD => return None,
        p => p,
    };
    // SAFETY: a value other than 0/DEAD in the slot is a live ThreadState mapping that belongs
    // to this thread only (each thread has its own slot).
    let td = (p > DEAD).then(|| unsafe { &mut *(p as *mut ThreadState) })?;
    if td.block & (block::STALE | block::VFORK) != 0 {
        return Some(settle(td));
    }
    Some(td)
}

/// The calling thread's state if it has one (including a disabled thread with live frames).
#[inline]
pub fn existing() -> Option<&'static mut ThreadState> {
    let p = tls_get();
    // SAFETY: as in `current`.
    let td = (p > DEAD).then(|| unsafe { &mut *(p as *mut ThreadState) })?;
    if td.block & (block::STALE | block::VFORK) != 0 {
        return Some(settle(td));
    }
    Some(td)
}

/// A state marked [`block::STALE`] or [`block::VFORK`]: the one to use now.
#[cold]
#[inline(never)]
fn settle(td: &'static mut ThreadState) -> &'static mut ThreadState {
    let td = match td.block & block::STALE {
        0 => td,
        _ => stale_settle(td),
    };
    match td.vfork_marked() {
        true => vfork_settle(td),
        false => td,
    }
}

/// Every thread state of this process (addresses; 0: free entry), for [`mark_stale`]. A
/// thread registers its state when it creates it and removes it before unmapping it.
static STATES: [AtomicUsize; MAX_STATES] = [const { AtomicUsize::new(0) }; MAX_STATES];
const MAX_STATES: usize = 4096;

fn register_state(td: usize) {
    let free = STATES.iter().find(|e| {
        // Relaxed: the entry only has to be claimed once; `mark_stale` runs while every other
        // thread is stopped (ptrace), after the kernel has ordered all their stores.
        e.compare_exchange(0, td, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
    });
    if free.is_none() {
        crate::log::error(
            b"too many threads: this one keeps tracing after a detach",
            0,
        );
    }
}

fn unregister_state(td: usize) {
    if let Some(e) = STATES.iter().find(|e| e.load(Ordering::Relaxed) == td) {
        e.store(0, Ordering::Relaxed);
    }
}

/// Marks every thread's state [`block::STALE`]: the session they write for has ended (detach)
/// or is being replaced (a new attach). Called by `attach` in the traced process while its
/// other threads are stopped outside libmcount's code (the recorder checks their `rip`), so
/// no one is between reading and writing a `block` word.
pub fn mark_stale() {
    for e in &STATES {
        let td = e.load(Ordering::Relaxed);
        if td > DEAD {
            // SAFETY: registered states stay mapped until unregistered; `block` is a u32
            // field of the live state, updated atomically here.
            let block = unsafe { AtomicU32::from_ptr(&raw mut (*(td as *mut ThreadState)).block) };
            block.fetch_or(block::STALE, Ordering::Relaxed);
        }
    }
}

/// A hook found its thread's state [`block::STALE`]: drop the old session's writer without
/// writing (the recorder salvaged its ring), keep the shadow stack (hijacked frames must
/// return) but mark its frames not to be recorded, and join the session that is on, if any
/// (else the bit stays: every hook takes the handlers, which record nothing).
#[cold]
#[inline(never)]
fn stale_settle(td: &'static mut ThreadState) -> &'static mut ThreadState {
    if td.guard() {
        return td;
    }
    td.set_guard(true);
    td.writer.drop_session();
    td.reads.close();
    for i in 0..td.rstack.len() {
        if let Some(f) = td.rstack.get_mut(i) {
            f.flags |= crate::frame_flags::NORECORD;
        }
    }
    if let Some(cfg) = config::config() {
        td.writer = DatWriter::new(cfg.dirfd, td.tid, cfg.window, config::ring_prefix());
        let line = tasklog::task_line(clock::now(), td.tid, sys::getpid());
        if let Err(e) = tasklog::append(cfg.dirfd, line.as_bytes()) {
            crate::log::error(b"cannot append to task.txt", e);
        }
        td.set_depth_limit(cfg.depth);
        td.block &= !(block::STALE | block::SLOW);
        if cfg.slow {
            td.block |= block::SLOW;
        }
    }
    td.set_guard(false);
    td
}

/// A hook found a state marked by `vfork` (see `thread::vfork`): the state of the process
/// that runs, switched in the thread pointer slot if needed.
#[cold]
#[inline(never)]
fn vfork_settle(td: &'static mut ThreadState) -> &'static mut ThreadState {
    if td.guard() {
        return td;
    }
    match td.vfork_step() {
        VforkStep::Same => td,
        VforkStep::ChildStarts => {
            // Hooks that fire while the child's state is set up (signals) return at once; the
            // parent's guard is put back as it was before the parent runs again.
            td.set_guard(true);
            let child = vfork_child_state(td);
            td.set_guard(false);
            child.unwrap_or(td)
        }
        VforkStep::ParentResumes(parent) => {
            let (map, len) = td.end_vfork_child();
            tls_set(parent as usize);
            // SAFETY: the child's mapping is no longer in the slot, and the child (exec'd or
            // exited) runs no more hooks on it.
            unsafe { sys::munmap(map, len) };
            // SAFETY: `parent` is this thread's own state, put back in its slot above.
            unsafe { &mut *parent }
        }
    }
}

/// The calling `vfork` child's own state, a copy of its parent's (see `thread::vfork`),
/// announced with `FORK` and put in the (shared) thread pointer slot; `None` if it cannot be
/// set up (the child's hooks then stay off).
fn vfork_child_state(parent: &mut ThreadState) -> Option<&'static mut ThreadState> {
    let cfg = config::config()?;
    let tid = sys::gettid();
    let td = alloc_state(&cfg, tid)?;
    // SAFETY: a fresh mapping holding an initialised state, owned by this child only.
    let child = unsafe { &mut *td };
    child.inherit_vfork(parent);
    let line = tasklog::fork_line(clock::now(), tid, sys::getppid());
    if let Err(e) = tasklog::append(cfg.dirfd, line.as_bytes()) {
        crate::log::error(b"cannot append to task.txt", e);
    }
    // Not registered with the thread-exit key: that lives in the parent's memory.
    tls_set(td as usize);
    Some(child)
}

/// Creates the calling thread's state; `announce` writes its `TASK` line. Returns the value
/// stored in the thread pointer slot.
#[cold]
#[inline(never)]
pub fn init_current(announce: bool) -> usize {
    // Hooks that fire while we set up (signals, interposed functions) see DEAD and return.
    tls_set(DEAD);
    let Some(cfg) = config::config() else {
        return DEAD;
    };
    let tid = sys::gettid();
    let Some(td) = alloc_state(&cfg, tid) else {
        return DEAD;
    };
    if announce {
        let line = tasklog::task_line(clock::now(), tid, sys::getpid());
        if let Err(e) = tasklog::append(cfg.dirfd, line.as_bytes()) {
            crate::log::error(b"cannot append to task.txt", e);
        }
    }
    config::register_thread(td as usize);
    register_state(td as usize);
    tls_set(td as usize);
    td as usize
}

/// A new state for thread `tid` in a mapping of its own; `None` if it cannot be mapped.
fn alloc_state(cfg: &config::Config, tid: i32) -> Option<*mut ThreadState> {
    let header = size_of::<ThreadState>().next_multiple_of(align_of::<Frame>());
    // The frames, after the sentinel (`rstack`).
    let frames_len = (cfg.max_stack + 1) * size_of::<Frame>();
    let saved_at = (header + frames_len).next_multiple_of(align_of::<Saved>());
    let saved_len = if filter::get().is_some() {
        cfg.max_stack * size_of::<Saved>()
    } else {
        0
    };
    let pending_at = saved_at + saved_len;
    let pending_len = if filter::get().is_some() && crate::args::get().is_some() {
        cfg.max_stack * PENDING_ARGS
    } else {
        0
    };
    let map_len = (pending_at + pending_len).next_multiple_of(sys::PAGE_SIZE);
    let mem = match sys::mmap(
        map_len,
        libc::PROT_READ | libc::PROT_WRITE,
        libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
        -1,
        0,
    ) {
        Ok(m) => m,
        Err(e) => {
            crate::log::error(b"cannot allocate thread state", e);
            return None;
        }
    };
    // SAFETY: the frames follow the header inside the fresh mapping, which is large enough for
    // `max_stack` of them and the sentinel, and belongs to this thread only.
    let rstack = unsafe { ShadowStack::from_raw(mem.add(header) as *mut Frame, cfg.max_stack) };
    let writer = DatWriter::new(cfg.dirfd, tid, cfg.window, config::ring_prefix());
    let mut state = ThreadState::new(rstack, writer, tid);
    state.map_len = map_len;
    // Relaxed: a level set once at start-up, read for a message only.
    if crate::log::DEBUG.load(Ordering::Relaxed) >= 2 {
        let mut id = tasklog::LineBuf::<16>::new();
        id.push_dec(tid as u64);
        crate::log::debug(2, b"mcount", &[b"preparing buffers: tid = ", id.as_bytes()]);
    }
    if let Some(f) = filter::get() {
        state.filt = FilterState::new(f);
        // SAFETY: `saved_len` bytes for `max_stack` entries follow the frames in the mapping.
        state.saved = unsafe { mem.add(saved_at) } as *mut Saved;
    }
    if pending_len != 0 {
        // SAFETY: `pending_len` bytes follow the saved limits in the mapping.
        state.pending = unsafe { mem.add(pending_at) };
    }
    // SAFETY: __errno_location has no preconditions; the address is this thread's for life.
    state.errno = unsafe { libc::__errno_location() };
    state.set_depth_limit(cfg.depth);
    if cfg.slow {
        state.block |= block::SLOW;
    }
    let td = mem as *mut ThreadState;
    // SAFETY: the mapping is page-aligned, writable and large enough for the header.
    unsafe { td.write(state) };
    Some(td)
}

/// Thread exit (`pthread` key destructor): close the data file; free the state unless frames
/// are still live (then only disable it: their returns still need it).
///
/// # Safety
/// `p` must be the calling thread's state pointer (registered by `init_current`).
pub unsafe extern "C" fn thread_exit(p: *mut libc::c_void) {
    if p.is_null() || p as usize != tls_get() {
        return;
    }
    // SAFETY: `p` is this thread's live state (checked against the slot above).
    let td = unsafe { &mut *(p as *mut ThreadState) };
    td.set_guard(true);
    if let Some(plt) = crate::plt::get() {
        // The thread's calls sent to the lazy binder are all past it.
        plt.settle(&mut td.plt_claims, usize::MAX);
    }
    crate::dlopen::scan();
    td.set_disabled(true);
    td.writer.close();
    td.reads.close();
    if td.rstack.is_empty() {
        unregister_state(p as usize);
        tls_set(DEAD);
        let len = td.map_len;
        // SAFETY: the slot no longer points at the state and no frame can return through it.
        unsafe { sys::munmap(p as *mut u8, len) };
    } else {
        td.set_guard(false);
    }
}

/// Process end (library destructor) for the calling thread: close its data file. Frames stay
/// on the shadow stack (replay shows them as unfinished) and can still return through it.
pub fn finish_current() {
    if let Some(td) = existing() {
        td.set_guard(true);
        td.set_disabled(true);
        td.writer.close();
        td.set_guard(false);
    }
}

/// The process that is forking (see [`fork_prepare`]).
static FORKING_PID: core::sync::atomic::AtomicI32 = core::sync::atomic::AtomicI32::new(0);

/// `pthread_atfork` prepare handler: remembers the forking process, the child's `FORK` line's
/// `ppid` (the child's `getppid` names another process once the parent has exited).
pub extern "C" fn fork_prepare() {
    FORKING_PID.store(sys::getpid(), core::sync::atomic::Ordering::Relaxed);
}

/// `pthread_atfork` child handler: the child keeps the parent's shadow stack (its hijacked
/// frames return in the child too) but writes its own `<pid>.dat`; announce it with `FORK`.
pub extern "C" fn fork_child() {
    crate::agent::after_fork();
    crate::filter::fork_child();
    let Some(cfg) = config::config() else {
        return;
    };
    let tid = sys::gettid();
    let ppid = match FORKING_PID.load(core::sync::atomic::Ordering::Relaxed) {
        0 => sys::getppid(),
        pid => pid,
    };
    let line = tasklog::fork_line(clock::now(), tid, ppid);
    if let Err(e) = tasklog::append(cfg.dirfd, line.as_bytes()) {
        crate::log::error(b"cannot append to task.txt", e);
    }
    match tls_get() {
        0 => {
            init_current(false);
        }
        DEAD => {}
        _ => {
            if let Some(td) = existing() {
                td.tid = tid;
                td.writer.abandon(tid, config::ring_prefix());
                // The parent thread's hardware counters: the child opens its own.
                td.reads.close();
                config::register_thread(td as *mut ThreadState as usize);
            }
        }
    }
}
