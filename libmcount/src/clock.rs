//! Record timestamps: `CLOCK_MONOTONIC` nanoseconds, the clock uftrace uses by default.
//!
//! glibc's `clock_gettime` is served by the vDSO (no system call, ~22 ns here) and does not
//! touch `errno` on success. `rdtsc` with sync points is the planned optimisation
//! (runtime spec §10).

/// Current `CLOCK_MONOTONIC` time in nanoseconds (0 if the clock is unavailable).
#[inline]
pub fn now() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    (ts.tv_sec as u64)
        .wrapping_mul(1_000_000_000)
        .wrapping_add(ts.tv_nsec as u64)
}

#[cfg(test)]
mod tests {
    #[test]
    fn monotonic() {
        let a = super::now();
        let b = super::now();
        assert!(a > 0 && b >= a);
    }
}
