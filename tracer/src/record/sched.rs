//! Scheduling events (data-format §10): the `perf-cpu<N>.dat` files, one per online CPU, each
//! the byte stream of a perf ring buffer that sees the traced process tree's context
//! switches, task names, forks and exits.
//!
//! As uftrace 0.13 (measured with strace): a `PERF_COUNT_SW_DUMMY` software event per CPU with
//! `comm`, `task`, `context_switch` (off with `--no-sched`), `sample_id_all` and `sample_type =
//! TID|TIME`, the record clock (`use_clockid`), user space only, `inherit` (the program's
//! threads and children write into the same rings), opened disabled with `enable_on_exec`, a
//! ring of 32 data pages per CPU woken at 8 KiB. The events are opened in the recorder's main
//! thread, which then spawns the program: the child inherits them, and its exec turns them on
//! (the recorder's own copies never exec and stay off). With `--keep-pid` they are opened on
//! the program's process before it is let go.
//!
//! A drain thread copies what the kernel wrote, as it is, into the files: when a ring fills
//! past the watermark, and every 50 ms. Once the program has ended the recorder makes the last
//! pass itself (the rings are shared under a mutex) rather than wait for the thread to be
//! scheduled, and wakes the thread through an eventfd it polls with the rings so that it leaves
//! (the events never hang up by themselves: the recorder's own thread holds them too).

use record_format::perf::file_name;
use std::fs::File;
use std::io::Write;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Data pages of each ring (a power of two, as the kernel requires).
const DATA_PAGES: usize = 32;
/// Bytes written before the drain thread is woken.
const WATERMARK: u32 = 8192;
/// Longest wait of the drain thread.
const POLL_MS: i32 = 50;

/// `struct perf_event_attr` up to `clockid` (`PERF_ATTR_SIZE_VER3`, Linux 4.1+).
#[repr(C)]
#[derive(Default)]
struct PerfEventAttr {
    kind: u32,
    size: u32,
    config: u64,
    sample_period: u64,
    sample_type: u64,
    read_format: u64,
    flags: u64,
    wakeup_watermark: u32,
    bp_type: u32,
    config1: u64,
    config2: u64,
    branch_sample_type: u64,
    sample_regs_user: u64,
    sample_stack_user: u32,
    clockid: i32,
}
const _: () = assert!(std::mem::size_of::<PerfEventAttr>() == 96);

const PERF_TYPE_SOFTWARE: u32 = 1;
const PERF_COUNT_SW_DUMMY: u64 = 9;
const PERF_SAMPLE_TID: u64 = 1 << 1;
const PERF_SAMPLE_TIME: u64 = 1 << 2;
const PERF_FLAG_FD_NO_GROUP: libc::c_ulong = 1 << 0;
const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 1 << 3;
/// Bits of `flags`.
const DISABLED: u64 = 1 << 0;
const INHERIT: u64 = 1 << 1;
const EXCLUDE_KERNEL: u64 = 1 << 5;
const COMM: u64 = 1 << 9;
const ENABLE_ON_EXEC: u64 = 1 << 12;
const TASK: u64 = 1 << 13;
const WATERMARK_BIT: u64 = 1 << 14;
const SAMPLE_ID_ALL: u64 = 1 << 18;
const USE_CLOCKID: u64 = 1 << 25;
const CONTEXT_SWITCH: u64 = 1 << 26;
/// Offsets in `struct perf_event_mmap_page`.
const DATA_HEAD: usize = 1024;
const DATA_TAIL: usize = 1032;

/// Whose scheduling is recorded.
#[derive(Debug, Clone, Copy)]
pub enum Watch {
    /// The calling thread's children to come (the program is spawned by this thread next).
    Spawned,
    /// The process `pid`, which has not exec'd the program yet.
    Process(libc::pid_t),
}

/// What to record.
#[derive(Debug, Clone, Copy)]
pub struct Request {
    /// Context switches; task names, forks and exits only when false (`--no-sched`).
    pub switches: bool,
    /// The record clock (`--clock`).
    pub clock: libc::clockid_t,
}

/// One CPU's event and its ring, mapped.
struct Ring {
    fd: OwnedFd,
    base: *mut u8,
    len: usize,
    page: usize,
    file: File,
    /// The event hung up (its task ended): not polled any more.
    hung_up: bool,
}

// SAFETY: the mapping belongs to this Ring alone; it is used by one thread at a time (under
// the mutex of the session's shared rings).
unsafe impl Send for Ring {}

impl Ring {
    fn open(cpu: u32, attr: &PerfEventAttr, watch: Watch, dir: &Path) -> std::io::Result<Ring> {
        let pid = match watch {
            Watch::Spawned => 0,
            Watch::Process(pid) => pid,
        };
        // SAFETY: `attr` is a valid perf_event_attr whose `size` field says its size; the
        // other arguments are integers.
        let fd = unsafe {
            libc::syscall(
                libc::SYS_perf_event_open,
                attr as *const PerfEventAttr,
                pid,
                cpu as libc::c_int,
                -1 as libc::c_int,
                PERF_FLAG_FD_NO_GROUP | PERF_FLAG_FD_CLOEXEC,
            )
        };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: a fresh descriptor owned by nobody else.
        let fd = unsafe { OwnedFd::from_raw_fd(fd as i32) };
        let file = record_format::create::open_data_file(&dir.join(file_name(cpu)))?;
        // SAFETY: sysconf only returns a value.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize;
        let len = page * (1 + DATA_PAGES);
        // SAFETY: a new shared mapping of the event's ring; the kernel checks `len`.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        Ok(Ring {
            fd,
            base: base.cast(),
            len,
            page,
            file,
            hung_up: false,
        })
    }

    /// The control word at `offset` of the first page.
    fn word(&self, offset: usize) -> &AtomicU64 {
        // SAFETY: `offset` is one of the 8-aligned u64 fields of the mmap page, which stays
        // mapped as long as `self`; the kernel and this thread access it atomically.
        unsafe { AtomicU64::from_ptr(self.base.add(offset).cast()) }
    }

    /// Appends what the kernel wrote since the last call to the file; returns the bytes.
    fn drain(&mut self) -> std::io::Result<usize> {
        // Acquire: pairs with the kernel's barrier before it publishes data_head, so the
        // records before it are visible.
        let head = self.word(DATA_HEAD).load(Ordering::Acquire);
        let tail = self.word(DATA_TAIL).load(Ordering::Relaxed);
        let size = (self.len - self.page) as u64;
        let new = head.wrapping_sub(tail).min(size) as usize;
        if new == 0 {
            return Ok(0);
        }
        let start = (tail % size) as usize;
        let first = new.min(size as usize - start);
        let data = self.base.wrapping_add(self.page);
        // SAFETY: [tail, head) of the data area (the `size` bytes after the first page) is
        // written and left alone by the kernel until data_tail moves past it: these two
        // slices, the part up to the end of the area and the part wrapped to its start.
        let (a, b) = unsafe {
            (
                std::slice::from_raw_parts(data.add(start), first),
                std::slice::from_raw_parts(data, new - first),
            )
        };
        self.file.write_all(a)?;
        self.file.write_all(b)?;
        // Release: the bytes are copied before the kernel may overwrite them.
        self.word(DATA_TAIL).store(head, Ordering::Release);
        Ok(new)
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        // SAFETY: `base`/`len` are the mapping made in `open`, unmapped once here.
        unsafe { libc::munmap(self.base.cast(), self.len) };
    }
}

/// The CPUs in `/sys/devices/system/cpu/online` (`0-3,6`).
fn online_cpus() -> Vec<u32> {
    let text = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap_or_default();
    let mut cpus = Vec::new();
    for part in text.trim().split(',').filter(|p| !p.is_empty()) {
        let (lo, hi) = part.split_once('-').unwrap_or((part, part));
        if let (Ok(lo), Ok(hi)) = (lo.parse::<u32>(), hi.parse::<u32>()) {
            cpus.extend(lo..=hi);
        }
    }
    cpus
}

/// The scheduling rings while the program runs.
pub struct SchedSession {
    shared: Arc<Shared>,
}

/// What the drain thread and [`SchedSession::finish`] share.
struct Shared {
    rings: Mutex<Rings>,
    /// An eventfd in the drain thread's poll set: written to make it leave at once.
    wake: OwnedFd,
}

/// The rings, and whether the session has finished (no drain after that).
struct Rings {
    rings: Vec<Ring>,
    finished: bool,
    /// The drain thread's error: it stopped draining.
    error: Option<std::io::Error>,
}

impl SchedSession {
    /// Opens the events of every online CPU and starts draining them into `dir`. An error
    /// (perf_event_open refused: `perf_event_paranoid`, a container) leaves no file behind.
    pub fn start(req: Request, watch: Watch, dir: &Path) -> std::io::Result<SchedSession> {
        let mut flags = DISABLED
            | INHERIT
            | EXCLUDE_KERNEL
            | COMM
            | ENABLE_ON_EXEC
            | TASK
            | WATERMARK_BIT
            | SAMPLE_ID_ALL
            | USE_CLOCKID;
        if req.switches {
            flags |= CONTEXT_SWITCH;
        }
        let attr = PerfEventAttr {
            kind: PERF_TYPE_SOFTWARE,
            size: std::mem::size_of::<PerfEventAttr>() as u32,
            config: PERF_COUNT_SW_DUMMY,
            sample_period: 1,
            sample_type: PERF_SAMPLE_TID | PERF_SAMPLE_TIME,
            flags,
            wakeup_watermark: WATERMARK,
            clockid: req.clock,
            ..PerfEventAttr::default()
        };
        let cpus = online_cpus();
        let mut rings = Vec::new();
        for &cpu in &cpus {
            match Ring::open(cpu, &attr, watch, dir) {
                Ok(r) => rings.push(r),
                Err(e) => {
                    drop(rings);
                    for cpu in &cpus {
                        let _ = std::fs::remove_file(dir.join(file_name(*cpu)));
                    }
                    return Err(e);
                }
            }
        }
        if rings.is_empty() {
            return Err(std::io::Error::other("no online CPU"));
        }
        // SAFETY: eventfd takes integer arguments only.
        let wake = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        if wake < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let shared = Arc::new(Shared {
            rings: Mutex::new(Rings {
                rings,
                finished: false,
                error: None,
            }),
            // SAFETY: a fresh descriptor owned by nobody else.
            wake: unsafe { OwnedFd::from_raw_fd(wake) },
        });
        let theirs = Arc::clone(&shared);
        // Not joined: `finish` makes the last pass itself and the thread leaves when it
        // wakes (or with the process).
        std::thread::Builder::new()
            .name("utrace-sched".into())
            .spawn(move || drain_until(&theirs))?;
        Ok(SchedSession { shared })
    }

    /// Makes the last pass over the rings (the program has ended) and stops the drain
    /// thread, without waiting for it to be scheduled.
    pub fn finish(self) -> std::io::Result<()> {
        let mut state = self.shared.lock();
        state.finished = true;
        if let Some(e) = state.error.take() {
            return Err(e);
        }
        let drained = state.rings.iter_mut().try_for_each(|r| r.drain().map(drop));
        // Closed here, not when the thread next runs: a child started meanwhile (the pager of
        // `live`) must not inherit live perf events.
        let rings = std::mem::take(&mut state.rings);
        drop(state);
        drop(rings);
        let one = 1u64.to_ne_bytes();
        // SAFETY: writes 8 bytes from a live array to the eventfd this session owns.
        unsafe { libc::write(self.shared.wake.as_raw_fd(), one.as_ptr().cast(), one.len()) };
        drained
    }
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, Rings> {
        self.rings.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The drain thread: copies the rings into their files until the session finishes.
fn drain_until(shared: &Shared) {
    let mut fds = Vec::new();
    loop {
        {
            let mut state = shared.lock();
            if state.finished {
                return;
            }
            if let Err(e) = state.rings.iter_mut().try_for_each(|r| r.drain().map(drop)) {
                state.error = Some(e);
                return;
            }
            fds.clear();
            fds.extend(state.rings.iter().map(|r| libc::pollfd {
                fd: if r.hung_up { -1 } else { r.fd.as_raw_fd() },
                events: libc::POLLIN,
                revents: 0,
            }));
        }
        fds.push(libc::pollfd {
            fd: shared.wake.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        });
        // Rings that hung up are left out (fd -1); the eventfd stays, so the wait ends at
        // once when the session finishes. `finish` may close the ring descriptors while this
        // waits: its eventfd write that follows ends the wait, and the thread then returns.
        // SAFETY: `fds` is a valid array of `fds.len()` pollfd structs.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, POLL_MS) };
        if n > 0 {
            let mut state = shared.lock();
            for (r, p) in state.rings.iter_mut().zip(&fds) {
                r.hung_up |= p.revents & (libc::POLLHUP | libc::POLLERR) != 0;
            }
        }
    }
}

/// [`SchedSession::start`] when `req` asks for the events (`kept`: the `--keep-pid` program,
/// else this thread's next child), or nothing when the system refuses perf events: as
/// uftrace, the recording goes on without them and says why with `-v` only.
pub fn start_or_skip(
    req: Option<Request>,
    kept: Option<libc::pid_t>,
    dir: &Path,
) -> Option<SchedSession> {
    let watch = kept.map_or(Watch::Spawned, Watch::Process);
    match SchedSession::start(req?, watch, dir) {
        Ok(s) => Some(s),
        Err(e) => {
            super::debug(format!(
                "skipping perf event due to error: {}",
                crate::error::without_os_error_code(&e.to_string())
            ));
            super::debug("please check /proc/sys/kernel/perf_event_paranoid".to_string());
            None
        }
    }
}

/// The `perf_event_attr.clockid` of a `--clock` choice.
pub fn clock_id(clock: Option<&str>) -> libc::clockid_t {
    match clock {
        Some("mono_raw") => libc::CLOCK_MONOTONIC_RAW,
        Some("boot") => libc::CLOCK_BOOTTIME,
        _ => libc::CLOCK_MONOTONIC,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clocks() {
        assert_eq!(clock_id(None), libc::CLOCK_MONOTONIC);
        assert_eq!(clock_id(Some("boot")), libc::CLOCK_BOOTTIME);
        assert_eq!(clock_id(Some("mono_raw")), libc::CLOCK_MONOTONIC_RAW);
    }
}
