//! Record timestamps: `CLOCK_MONOTONIC` nanoseconds, the clock uftrace's readers expect, at the
//! cost of one `rdtsc` (runtime spec §10: ~10 ns here against ~22 ns for the vDSO's
//! `clock_gettime`).
//!
//! Each thread converts TSC ticks with a [`Clock`]: `ns = ns_base + ((tsc - tsc_base) * mult) >> 32`
//! from a sync point `(tsc_base, ns_base)` taken with `clock_gettime`. A thread takes a new sync
//! point whenever [`RESYNC_TICKS`] have passed since the last one (a few milliseconds), so
//! extrapolation errors cannot add up, and timestamps of different threads stay comparable.
//! `mult` comes from a short calibration in the library constructor and is refined from the
//! first sync point to every later one (a longer baseline is a better estimate). A new sync
//! point never moves a thread's time backwards.
//!
//! The TSC is used only when it is invariant (`constant_tsc` and `nonstop_tsc`) and the kernel
//! itself keeps time with it (clock source `tsc`, which means the kernel checked that all CPUs
//! agree); otherwise, and for the other `--clock` choices, every timestamp is a
//! `clock_gettime` call (`tsc_max == 0`).
//!
//! The trampolines' fast paths read [`Clock`] at fixed offsets: keep it `#[repr(C)]`.

use core::sync::atomic::{AtomicI32, AtomicU64, Ordering};

/// Ticks between sync points (about 6 ms at 2.6 GHz). Also bounds `delta * mult` below 2^64
/// for any TSC faster than 4 MHz.
pub const RESYNC_TICKS: u64 = 1 << 24;

/// Clock of `clock_gettime` fallbacks and sync points.
static CLOCK_ID: AtomicI32 = AtomicI32::new(libc::CLOCK_MONOTONIC);
/// ns per tick × 2^32; 0 while the TSC is not used.
static MULT: AtomicU64 = AtomicU64::new(0);
/// The first sync point, the origin of `MULT` refinements.
static ORIGIN_TSC: AtomicU64 = AtomicU64::new(0);
static ORIGIN_NS: AtomicU64 = AtomicU64::new(0);

/// A thread's TSC-to-nanoseconds conversion.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct Clock {
    pub tsc_base: u64,
    pub ns_base: u64,
    /// ns per tick × 2^32.
    pub mult: u64,
    /// A delta of this many ticks or more takes a new sync point; 0 = no TSC.
    pub tsc_max: u64,
}

#[inline(always)]
fn rdtsc() -> u64 {
    // SAFETY: rdtsc reads the time-stamp counter; it has no memory effects.
    unsafe { core::arch::x86_64::_rdtsc() }
}

/// `clock_gettime` of the session's clock, in nanoseconds (0 if unavailable).
#[inline]
pub fn gettime() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec. glibc serves it from the vDSO and does not
    // touch errno on success.
    unsafe { libc::clock_gettime(CLOCK_ID.load(Ordering::Relaxed), &mut ts) };
    (ts.tv_sec as u64)
        .wrapping_mul(1_000_000_000)
        .wrapping_add(ts.tv_nsec as u64)
}

/// A sync point: `(tsc, ns)` read as close together as possible (the best of three tries,
/// the TSC taken halfway through the `clock_gettime` call).
fn sync_point() -> (u64, u64) {
    let mut best = (u64::MAX, 0, 0);
    for _ in 0..3 {
        let t0 = rdtsc();
        let ns = gettime();
        let t1 = rdtsc();
        let width = t1.wrapping_sub(t0);
        if width < best.0 {
            best = (width, t0.wrapping_add(width / 2), ns);
        }
    }
    (best.1, best.2)
}

/// Whether the TSC can stand in for `CLOCK_MONOTONIC` on this machine.
fn tsc_usable() -> bool {
    let source =
        std::fs::read_to_string("/sys/devices/system/clocksource/clocksource0/current_clocksource")
            .unwrap_or_default();
    if source.trim() != "tsc" {
        return false;
    }
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    cpuinfo
        .lines()
        .find(|l| l.starts_with("flags"))
        .is_some_and(|l| {
            let has = |f: &str| l.split_whitespace().any(|x| x == f);
            has("constant_tsc") && has("nonstop_tsc")
        })
}

/// Session set-up (library constructor): chooses the clock and calibrates the TSC.
/// `clock_id` is the `--clock` choice; `allow_tsc` false forces `clock_gettime`.
pub fn init(clock_id: i32, allow_tsc: bool) {
    CLOCK_ID.store(clock_id, Ordering::Relaxed);
    MULT.store(0, Ordering::Relaxed);
    if !allow_tsc || clock_id != libc::CLOCK_MONOTONIC || !tsc_usable() {
        return;
    }
    let (t0, n0) = sync_point();
    // Calibrate over 200 µs: the estimate is refined by every later sync point.
    let (t1, n1) = loop {
        let (t, n) = sync_point();
        if n.wrapping_sub(n0) >= 200_000 {
            break (t, n);
        }
    };
    let Some(mult) = mult_of(t1.wrapping_sub(t0), n1.wrapping_sub(n0)) else {
        return;
    };
    ORIGIN_TSC.store(t0, Ordering::Relaxed);
    ORIGIN_NS.store(n0, Ordering::Relaxed);
    MULT.store(mult, Ordering::Relaxed);
}

/// ns per tick × 2^32 from a measured interval, if plausible (a TSC between 4 MHz and 100 GHz).
fn mult_of(ticks: u64, ns: u64) -> Option<u64> {
    if ticks == 0 || ticks > (1 << 62) || ns > (1 << 40) {
        return None;
    }
    let mult = ((ns as u128) << 32) / ticks as u128;
    (mult > (1 << 32) / 100 && mult < (1 << 40)).then_some(mult as u64)
}

impl Clock {
    /// A clock synchronised now (or a `clock_gettime` clock when the TSC is not used).
    pub fn new() -> Clock {
        let mut c = Clock::default();
        if MULT.load(Ordering::Relaxed) != 0 {
            let (tsc, ns) = sync_point();
            c.set_base(tsc, ns);
        }
        c
    }

    fn set_base(&mut self, tsc: u64, ns: u64) {
        self.tsc_base = tsc;
        self.ns_base = ns;
        self.mult = MULT.load(Ordering::Relaxed);
        self.tsc_max = if self.mult == 0 { 0 } else { RESYNC_TICKS };
    }

    /// The current time in nanoseconds; never less than an earlier result of this clock.
    #[inline]
    pub fn now(&mut self) -> u64 {
        if self.tsc_max == 0 {
            return gettime();
        }
        let delta = rdtsc().wrapping_sub(self.tsc_base);
        if delta < self.tsc_max {
            return self.ns_base + (delta.wrapping_mul(self.mult) >> 32);
        }
        self.resync(delta)
    }

    /// The time of TSC reading `tsc`, taken on this thread just before (as [`Clock::now`]).
    #[inline]
    pub fn at(&mut self, tsc: u64) -> u64 {
        if self.tsc_max == 0 {
            return gettime();
        }
        let delta = tsc.wrapping_sub(self.tsc_base);
        if delta < self.tsc_max {
            return self.ns_base + (delta.wrapping_mul(self.mult) >> 32);
        }
        self.resync(delta)
    }

    #[cold]
    #[inline(never)]
    fn resync(&mut self, delta: u64) -> u64 {
        let (tsc, ns) = sync_point();
        // What this clock would say now: a later sync point must not go below it. A delta
        // that large is a TSC that went backwards (other CPU): trust the new point.
        let at = tsc.wrapping_sub(self.tsc_base);
        let extrapolated = (delta < (1 << 50) && at < (1 << 50))
            .then(|| self.ns_base + ((at as u128 * self.mult as u128) >> 32) as u64);
        refine(tsc, ns);
        self.set_base(tsc, ns.max(extrapolated.unwrap_or(0)));
        self.ns_base
    }
}

/// Refines the global `MULT` from the origin to a new sync point (once the baseline is at
/// least 20 ms long).
fn refine(tsc: u64, ns: u64) {
    let (t0, n0) = (
        ORIGIN_TSC.load(Ordering::Relaxed),
        ORIGIN_NS.load(Ordering::Relaxed),
    );
    let dn = ns.wrapping_sub(n0);
    if MULT.load(Ordering::Relaxed) == 0 || !(20_000_000..1 << 40).contains(&dn) {
        return;
    }
    if let Some(m) = mult_of(tsc.wrapping_sub(t0), dn) {
        MULT.store(m, Ordering::Relaxed);
    }
}

/// The current time for code without a thread clock (task lines, session start).
pub fn now() -> u64 {
    gettime()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn monotonic_and_close_to_clock_gettime() {
        init(libc::CLOCK_MONOTONIC, true);
        let mut c = Clock::new();
        let mut last = 0;
        let start = gettime();
        // Long enough to cross several sync points when the TSC is used.
        while gettime() - start < 30_000_000 {
            let t = c.now();
            assert!(t >= last, "clock went back: {t} < {last}");
            last = t;
        }
        let real = gettime();
        let t = c.now();
        let diff = t.abs_diff(real);
        assert!(diff < 50_000, "off by {diff} ns (tsc_max {})", c.tsc_max);
    }

    #[test]
    fn fallback_uses_clock_gettime() {
        let mut c = Clock::default();
        let a = c.now();
        let b = gettime();
        assert!(a > 0 && b >= a);
    }

    #[test]
    fn mult_plausibility() {
        // 2.6 GHz: 1/2.6 ns per tick.
        let m = mult_of(2_600_000_000, 1_000_000_000).unwrap();
        assert_eq!(m, ((1u128 << 32) * 10 / 26) as u64);
        assert_eq!(mult_of(0, 5), None);
        assert_eq!(mult_of(1, 1_000_000), None); // 1 MHz
    }
}
