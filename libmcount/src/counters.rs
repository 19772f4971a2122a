//! The counters of `-T FUNC@read=...` (data-format §3.6): read when FUNC is entered and again
//! before it returns, recorded as a `read:` EVENT after its ENTRY and a `diff:` EVENT (the
//! differences) before its EXIT, which the readers show as comments inside the call.
//!
//! - `proc/statm`: the first three fields of `/proc/self/statm` (size, resident, shared) in KB;
//! - `page-fault`: the process's major and minor page faults (`getrusage`);
//! - `pmu-cycle`, `pmu-cache`, `pmu-branch`: hardware counters of the calling thread (cycles and
//!   instructions, cache references and misses, branches and misses), one `perf_event_open`
//!   group per kind opened on the thread's first use. Where the machine has no PMU (most VMs),
//!   opening fails: a `WARN:` line says so, in uftrace's words, and nothing is recorded. It is
//!   printed once per kind and process; uftrace 0.13 retries the open, and warns again, at
//!   every read (the entry and the exit of each call), which floods stderr for a hot function
//!   and costs a failing system call each time.
//!
//! Everything here runs in hook context: raw system calls, fixed buffers, no allocation.

use crate::sys::{self, PerfAttr};
use core::sync::atomic::{AtomicU8, Ordering};
use record_format::trigger::read::{COUNTERS, PAGE_FAULT, PMU_BRANCH, PMU_CACHE, PMU_CYCLE};

/// Values of one counter (at most three).
pub type Values = [u64; 3];

/// The hardware counter groups of a thread: two events each, fds (-1: not opened yet, -2:
/// opening failed).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct PmuFds {
    fds: [[i32; 2]; 3],
}

impl Default for PmuFds {
    fn default() -> PmuFds {
        PmuFds { fds: [[-1; 2]; 3] }
    }
}

impl PmuFds {
    /// Closes the thread's counters (thread exit, fork child).
    pub fn close(&mut self) {
        for fd in self.fds.iter_mut().flatten() {
            if *fd >= 0 {
                sys::close(*fd);
            }
            *fd = -1;
        }
    }
}

/// The PMU kinds: (read bit, perf names of the two events, their hardware config numbers).
const PMU: [(u8, [&str; 2], [u64; 2]); 3] = [
    (PMU_CYCLE, ["cycles", "instructions"], [0, 1]),
    (PMU_CACHE, ["cache-references", "cache-misses"], [2, 3]),
    (PMU_BRANCH, ["branches", "branch-misses"], [4, 5]),
];

/// The PMU kinds already warned about (bit `1 << k` for `PMU[k]`).
static PMU_WARNED: AtomicU8 = AtomicU8::new(0);

/// Reads the counter `bit` into `out`; `false` when it cannot be read.
pub fn read(bit: u8, pmu: &mut PmuFds, out: &mut Values) -> bool {
    *out = [0; 3];
    match bit {
        PAGE_FAULT => match sys::getrusage(libc::RUSAGE_SELF) {
            Ok(u) => {
                *out = [u.ru_majflt as u64, u.ru_minflt as u64, 0];
                true
            }
            Err(_) => false,
        },
        b if b & (PMU_CYCLE | PMU_CACHE | PMU_BRANCH) != 0 => read_pmu(b, pmu, out),
        _ => read_statm(out),
    }
}

/// `/proc/self/statm`'s size, resident and shared pages, in KB.
fn read_statm(out: &mut Values) -> bool {
    let Ok(fd) = sys::openat(libc::AT_FDCWD, c"/proc/self/statm", libc::O_RDONLY, 0) else {
        return false;
    };
    let mut buf = [0u8; 128];
    let n = sys::read(fd, &mut buf).unwrap_or(0);
    sys::close(fd);
    let kb = (sys::PAGE_SIZE / 1024) as u64;
    let mut fields = buf[..n]
        .split(|b| b.is_ascii_whitespace())
        .filter(|f| !f.is_empty());
    for v in out.iter_mut() {
        let Some(f) = fields.next() else {
            return false;
        };
        *v = f
            .iter()
            .take_while(|b| b.is_ascii_digit())
            .fold(0u64, |n, &d| {
                n.wrapping_mul(10).wrapping_add(u64::from(d - b'0'))
            })
            * kb;
    }
    true
}

fn read_pmu(bit: u8, pmu: &mut PmuFds, out: &mut Values) -> bool {
    let Some(k) = PMU.iter().position(|p| p.0 == bit) else {
        return false;
    };
    let fds = &mut pmu.fds[k];
    if fds[0] == -1 {
        *fds = open_group(k);
    }
    if fds[0] < 0 {
        return false;
    }
    // PERF_FORMAT_GROUP: { u64 nr; u64 values[nr] }.
    let mut buf = [0u8; 24];
    if sys::read(fds[0], &mut buf) != Ok(24) {
        return false;
    }
    let word = |i: usize| u64::from_le_bytes(buf[i * 8..i * 8 + 8].try_into().unwrap_or([0; 8]));
    *out = [word(1), word(2), 0];
    true
}

/// Opens a counting group of the two hardware events of `PMU[k]`; `[-2, -2]` (and one
/// warning per kind and process) when the machine cannot.
fn open_group(k: usize) -> [i32; 2] {
    let (_, names, configs) = PMU[k];
    const PERF_FORMAT_GROUP: u64 = 1 << 3;
    const EXCLUDE_KERNEL: u64 = 1 << 5;
    const EXCLUDE_HV: u64 = 1 << 6;
    let mut fds = [-2; 2];
    for i in 0..2 {
        let attr = PerfAttr {
            kind: 0, // PERF_TYPE_HARDWARE
            size: core::mem::size_of::<PerfAttr>() as u32,
            config: configs[i],
            read_format: PERF_FORMAT_GROUP,
            flags: EXCLUDE_KERNEL | EXCLUDE_HV,
            ..PerfAttr::default()
        };
        let leader = if i == 0 { -1 } else { fds[0] };
        match sys::perf_event_open(&attr, leader) {
            Ok(fd) => fds[i] = fd,
            Err(errno) => {
                if i == 1 {
                    sys::close(fds[0]);
                }
                warn_once(k, names[i], errno);
                return [-2; 2];
            }
        }
    }
    fds
}

fn warn_once(k: usize, name: &str, errno: i32) {
    // Relaxed: the flag only keeps a second line from being printed; it orders nothing.
    if PMU_WARNED.fetch_or(1 << k, Ordering::Relaxed) & (1 << k) != 0 {
        return;
    }
    let mut line = crate::tasklog::LineBuf::<160>::new();
    line.push_bytes(b"WARN: failed to open '");
    line.push_bytes(name.as_bytes());
    line.push_bytes(b"' perf event: ");
    // SAFETY: strerror returns a NUL-terminated string (read only, at once).
    let text = unsafe { core::ffi::CStr::from_ptr(libc::strerror(errno)) };
    line.push_bytes(text.to_bytes());
    line.push(b'\n');
    crate::log::raw(line.as_bytes());
}

/// The counters `bits` asks for, in record order: (bit, `read:` id, `diff:` id, values).
pub fn each(bits: u8) -> impl Iterator<Item = (u8, u32, u32, usize)> {
    COUNTERS
        .iter()
        .filter(move |c| bits & c.0 != 0)
        .map(|c| (c.0, c.2, c.3, c.4))
}

#[cfg(test)]
mod tests {
    use super::*;
    use record_format::trigger::read::PROC_STATM;

    #[test]
    fn statm_and_page_faults() {
        let mut pmu = PmuFds::default();
        let mut v = [0; 3];
        assert!(read(PROC_STATM, &mut pmu, &mut v));
        assert!(v[0] > 0 && v[1] > 0 && v[0] >= v[1], "{v:?}");
        assert!(read(PAGE_FAULT, &mut pmu, &mut v));
        assert!(v[1] > 0, "{v:?}");
        let ids: Vec<u32> = each(PROC_STATM | PMU_BRANCH).map(|c| c.1).collect();
        assert_eq!(ids, [100001, 100009]);
    }
}
