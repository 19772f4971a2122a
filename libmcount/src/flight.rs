//! The runtime's side of the flight recorder (`record --flight-recorder=SIZE`,
//! [`record_format::flight`]): whether this session's rings are flight rings, and asking the
//! recorder for a dump.
//!
//! The recorder creates the control page `/dev/shm/<prefix>/flight` in flight mode; its
//! presence next to a ring is the switch ([`ring_is_flight`], looked up once per session). The
//! first thread that asks for a dump maps it ([`control`]) and keeps the mapping for the
//! session. [`request_dump`] only uses raw system calls and atomics, so that a signal handler
//! (`--signal SIG@dump`, a crash) may call it: it increments the request word (unless a request
//! is outstanding already: it waits for that one), wakes the pump (a futex on the word) and
//! sleeps on the acknowledgement word (a futex the pump wakes) until the pump acknowledges that
//! it has claimed every ring's records (at most [`WAIT`] in all), so that the newest records
//! are not overwritten before they are taken.

use crate::sys;
use core::ffi::CStr;
use core::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicU64, Ordering};
use record_format::flight::{ACK_OFF, CONTROL_MAGIC, CONTROL_NAME, CONTROL_SIZE, REQ_OFF};
use record_format::ring::{flag, FLAGS_OFF, HEADER_SIZE};

/// Longest wait for the recorder to take a dump or an old ring, in nanoseconds.
const WAIT: u64 = 1_000_000_000;
/// Sleep between two looks at the acknowledgement (woken at once by the pump) or at an old
/// ring, in nanoseconds.
const STEP: u64 = 100_000;
/// Most futex waits for one acknowledgement (of [`ACK_STEP`] each: [`WAIT`] in all).
const WAITS: u32 = 100;
/// Longest futex wait for an acknowledgement, in nanoseconds.
const ACK_STEP: u64 = WAIT / WAITS as u64;

/// The mapped control page; null: not looked for yet; [`ABSENT`]: not flight mode.
static CONTROL: AtomicPtr<u8> = AtomicPtr::new(core::ptr::null_mut());
/// The ring prefix `CONTROL` was looked up for (a new session looks again).
static FOR_PREFIX: AtomicPtr<u8> = AtomicPtr::new(core::ptr::null_mut());

const ABSENT: *mut u8 = core::ptr::dangling_mut::<u8>();

/// Longest control path: `/dev/shm/` + prefix + `/flight` + NUL.
const PATH_MAX: usize = 160;

/// Maps the control page of `prefix`; null when there is none.
fn map_control(prefix: &CStr) -> *mut u8 {
    let mut path = [0u8; PATH_MAX];
    let parts: [&[u8]; 4] = [
        b"/dev/shm/",
        prefix.to_bytes(),
        b"/",
        CONTROL_NAME.as_bytes(),
    ];
    if !fill_path(&mut path, &parts) {
        return core::ptr::null_mut();
    }
    let Ok(path) = CStr::from_bytes_until_nul(&path) else {
        return core::ptr::null_mut();
    };
    let Ok(fd) = sys::openat(
        libc::AT_FDCWD,
        path,
        libc::O_RDWR | libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK,
        0,
    ) else {
        return core::ptr::null_mut();
    };
    let map = match sys::file_size(fd) {
        Ok(size) if size == CONTROL_SIZE as u64 => sys::mmap(
            CONTROL_SIZE,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            fd,
            0,
        )
        .unwrap_or(core::ptr::null_mut()),
        _ => core::ptr::null_mut(),
    };
    sys::close(fd);
    if map.is_null() {
        return map;
    }
    // SAFETY: `map` is a fresh mapping of CONTROL_SIZE bytes.
    let magic = unsafe { core::slice::from_raw_parts(map, CONTROL_MAGIC.len()) };
    if magic != CONTROL_MAGIC {
        // SAFETY: `map` was mapped above and is not used elsewhere.
        unsafe { sys::munmap(map, CONTROL_SIZE) };
        return core::ptr::null_mut();
    }
    map
}

/// The control page of this session, if it records in flight mode.
fn control() -> Option<*mut u8> {
    let prefix = crate::config::ring_prefix()?;
    let key = prefix.as_ptr() as *mut u8;
    let known = CONTROL.load(Ordering::Acquire);
    if !known.is_null() && FOR_PREFIX.load(Ordering::Acquire) == key {
        return (known != ABSENT).then_some(known);
    }
    let map = map_control(prefix);
    let value = if map.is_null() { ABSENT } else { map };
    // Two threads may race here: both mappings are of the same page, the loser's stays
    // mapped (one page, once per session).
    FOR_PREFIX.store(key, Ordering::Release);
    CONTROL.store(value, Ordering::Release);
    (value != ABSENT).then_some(value)
}

/// The session ring prefix (its pointer: a new session leaks a new one) that [`FLIGHT`]
/// answers for; null: none yet.
static FLIGHT_FOR: AtomicPtr<u8> = AtomicPtr::new(core::ptr::null_mut());
/// Whether the rings of the session [`FLIGHT_FOR`] are flight rings.
static FLIGHT: AtomicBool = AtomicBool::new(false);

/// Whether the ring at `ring_path` (`/dev/shm/<prefix>/<tid>`) is to be a flight ring: the
/// control page is next to it. Looked up once per session (each thread's ring asks).
pub fn ring_is_flight(ring_path: &CStr) -> bool {
    is_flight_cached(ring_path, crate::config::ring_prefix())
}

/// [`ring_is_flight`], the answer kept for the rings of `session` (the session's ring prefix,
/// never freed); other rings are looked up each time.
fn is_flight_cached(ring_path: &CStr, session: Option<&'static CStr>) -> bool {
    let key = session
        .filter(|p| in_ring_dir(ring_path.to_bytes(), p.to_bytes()))
        .map(|p| p.as_ptr() as *mut u8);
    // Acquire pairs with the Release store below: FLIGHT is stored before.
    if key.is_some_and(|k| FLIGHT_FOR.load(Ordering::Acquire) == k) {
        return FLIGHT.load(Ordering::Relaxed);
    }
    let found = control_next_to(ring_path);
    if let Some(k) = key {
        // Two threads may race here: they store the same answer.
        FLIGHT.store(found, Ordering::Relaxed);
        FLIGHT_FOR.store(k, Ordering::Release);
    }
    found
}

/// Whether `path` is `/dev/shm/<prefix>/<name>`.
fn in_ring_dir(path: &[u8], prefix: &[u8]) -> bool {
    path.strip_prefix(b"/dev/shm/".as_slice())
        .and_then(|rest| rest.strip_prefix(prefix))
        .and_then(|rest| rest.strip_prefix(b"/".as_slice()))
        .is_some_and(|name| !name.is_empty() && !name.contains(&b'/'))
}

/// Whether the control page is next to the ring at `ring_path`.
fn control_next_to(ring_path: &CStr) -> bool {
    let bytes = ring_path.to_bytes();
    let Some(slash) = bytes.iter().rposition(|&b| b == b'/') else {
        return false;
    };
    let mut path = [0u8; PATH_MAX];
    let parts: [&[u8]; 2] = [&bytes[..=slash], CONTROL_NAME.as_bytes()];
    if !fill_path(&mut path, &parts) {
        return false;
    }
    let Ok(path) = CStr::from_bytes_until_nul(&path) else {
        return false;
    };
    match sys::openat(
        libc::AT_FDCWD,
        path,
        libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK,
        0,
    ) {
        Ok(fd) => {
            sys::close(fd);
            true
        }
        Err(_) => false,
    }
}

/// Concatenates `parts` into `out`, NUL-terminated; `false` when they do not fit.
fn fill_path(out: &mut [u8; PATH_MAX], parts: &[&[u8]]) -> bool {
    let mut i = 0;
    for part in parts {
        for &b in *part {
            match out.get_mut(i) {
                // The last byte stays NUL.
                Some(slot) if i + 1 < PATH_MAX => *slot = b,
                _ => return false,
            }
            i += 1;
        }
    }
    true
}

fn word(page: *mut u8, off: usize) -> &'static AtomicU64 {
    // SAFETY: `page` is the control mapping (never unmapped once published), `off` + 8 lies in
    // it, 8-aligned; the word is only accessed atomically.
    unsafe { AtomicU64::from_ptr(page.add(off) as *mut u64) }
}

/// Asks the recorder to write the newest records of every thread and waits (bounded) until it
/// has taken them. Nothing happens outside flight mode. Async-signal-safe.
pub fn request_dump() {
    if let Some(page) = control() {
        request_on(page);
    }
}

/// [`request_dump`] through the control page mapped at `page`.
fn request_on(page: *mut u8) {
    let (req, ack) = (word(page, REQ_OFF), word(page, ACK_OFF));
    // A request not acknowledged yet covers this one too: wait for it rather than add one.
    // Acquire pairs with the pump's Release store of the acknowledgement, after its claims.
    let mut n = req.load(Ordering::Acquire);
    while n <= ack.load(Ordering::Acquire) {
        // AcqRel pairs with the pump's Acquire load of the request word.
        match req.compare_exchange_weak(n, n + 1, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => {
                n += 1;
                // The pump sleeps on the word's low half (x86_64: at the word's address).
                let _ = sys::futex(req.as_ptr() as *const u32, libc::FUTEX_WAKE, 1, 0);
                break;
            }
            Err(now) => n = now,
        }
    }
    for _ in 0..WAITS {
        let seen = ack.load(Ordering::Acquire);
        if seen >= n || crate::config::recorder_gone() {
            return;
        }
        // Returns at once if the pump acknowledged since `seen` (the low half changed).
        let low = ack.as_ptr() as *const u32;
        let _ = sys::futex(low, libc::FUTEX_WAIT, seen as u32, ACK_STEP);
    }
}

/// Sleeps one [`STEP`] (less if a signal comes). A raw system call: the signal handlers that
/// ask for dumps must not change the program's `errno`.
fn sleep_step() {
    let ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: STEP as i64,
    };
    let _ = sys::nanosleep(&ts);
}

/// Marks the flight ring mapped at `map` as ended: the pump writes what it holds (the records
/// of a thread that ended will not change) and removes it.
///
/// # Safety
/// `map` is null or the start of a mapped ring (its header page, writable).
pub unsafe fn mark_ended(map: *mut u8) {
    if map.is_null() {
        return;
    }
    // SAFETY: `map` is a ring mapping (header page first, by the caller's promise); the flags
    // word is aligned, in the header, and only accessed atomically.
    let flags = unsafe { AtomicU32::from_ptr(map.add(FLAGS_OFF) as *mut u32) };
    // Pairs with the pump's Acquire load: the sealed chunk's slot is stored before.
    flags.fetch_or(flag::ENDED, Ordering::Release);
}

/// Hands the flight ring an earlier image of this thread left at `path` (before exec) to the
/// pump and waits (bounded) until the pump has written and removed it; then the path is free
/// for the new ring.
pub fn retire(path: &CStr) {
    let flags = libc::O_RDWR | libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK;
    let Ok(fd) = sys::openat(libc::AT_FDCWD, path, flags, 0) else {
        return;
    };
    let ended = match sys::file_size(fd) {
        Ok(size) if size >= HEADER_SIZE as u64 => sys::mmap(
            HEADER_SIZE,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            fd,
            0,
        )
        .map(|map| {
            // SAFETY: `map` is the writable header page of the old ring, mapped just above.
            unsafe { mark_ended(map) };
            // SAFETY: `map` was mapped above and is not used afterwards.
            unsafe { sys::munmap(map, HEADER_SIZE) };
        })
        .is_ok(),
        _ => false,
    };
    sys::close(fd);
    let mut waited = 0;
    while ended && waited < WAIT && !crate::config::recorder_gone() {
        match sys::openat(libc::AT_FDCWD, path, flags, 0) {
            Ok(fd) => sys::close(fd),
            Err(_) => return,
        }
        sleep_step();
        waited += STEP;
    }
    // Not taken in time: the old records are lost.
    let _ = sys::unlink(path);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    /// A control page (only its words are used), for the whole test run.
    fn page() -> *mut u8 {
        let words: &'static mut [u64; CONTROL_SIZE / 8] =
            Box::leak(Box::new([0; CONTROL_SIZE / 8]));
        words.as_mut_ptr() as *mut u8
    }

    /// Waits (at most 5 s) while the low half of `w` is `val`, as the pump does; the time
    /// it took.
    fn futex_wait(w: &AtomicU64, val: u64) -> Duration {
        let t = Instant::now();
        let _ = sys::futex(
            w.as_ptr() as *const u32,
            libc::FUTEX_WAIT,
            val as u32,
            5_000_000_000,
        );
        t.elapsed()
    }

    #[test]
    fn the_flight_switch_is_looked_up_once_per_session() {
        let name = format!("utrace-flycache-{}", std::process::id());
        let session: &'static CStr = Box::leak(
            std::ffi::CString::new(name.clone())
                .unwrap()
                .into_boxed_c_str(),
        );
        record_format::ring::create_ring_dir(&name).unwrap();
        record_format::flight::create_control(&name).unwrap();
        let ring = std::ffi::CString::new(format!("/dev/shm/{name}/77")).unwrap();
        assert!(is_flight_cached(&ring, Some(session)));
        // The answer is kept: the control page is not looked for again.
        std::fs::remove_file(record_format::flight::control_path(&name)).unwrap();
        assert!(is_flight_cached(&ring, Some(session)));
        // Not for a ring of another prefix, nor without a session.
        assert!(!is_flight_cached(&ring, None));
        let other = c"/dev/shm/utrace-flycache-none/77";
        assert!(!is_flight_cached(other, Some(session)));
        assert!(!in_ring_dir(b"/dev/shm/pre/fix/1", b"pre"));
        assert!(in_ring_dir(b"/dev/shm/pre/1", b"pre"));
        record_format::ring::remove_ring_dir(&name);
    }

    #[test]
    fn a_request_wakes_the_pump_and_waits_for_its_acknowledgement() {
        let p = page() as usize;
        let (req, ack) = (word(p as *mut u8, REQ_OFF), word(p as *mut u8, ACK_OFF));
        // One request outstanding (5, acknowledged up to 4): a new one waits for it.
        req.store(5, Ordering::Relaxed);
        ack.store(4, Ordering::Relaxed);
        let asker = std::thread::spawn(move || request_on(p as *mut u8));
        std::thread::sleep(Duration::from_millis(30));
        assert_eq!(req.load(Ordering::Relaxed), 5);
        assert!(!asker.is_finished());
        ack.store(5, Ordering::Release);
        let _ = sys::futex(ack.as_ptr() as *const u32, libc::FUTEX_WAKE, 1, 0);
        asker.join().unwrap();

        // None outstanding: the request is added and wakes the pump sleeping on it at once.
        let pump = std::thread::spawn(move || futex_wait(word(p as *mut u8, REQ_OFF), 5));
        std::thread::sleep(Duration::from_millis(30));
        let asker = std::thread::spawn(move || request_on(p as *mut u8));
        let slept = pump.join().unwrap();
        assert!(slept < Duration::from_secs(2), "the pump slept {slept:?}");
        assert_eq!(req.load(Ordering::Relaxed), 6);
        ack.store(6, Ordering::Release);
        let _ = sys::futex(ack.as_ptr() as *const u32, libc::FUTEX_WAKE, 1, 0);
        asker.join().unwrap();
    }
}
