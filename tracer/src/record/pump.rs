//! The recorder's pump threads: while the traced process tree runs, they write the chunks the
//! traced threads sealed in their rings to the data files (`record_format::ring`), so the
//! traced threads do not pay for the file system. Each polls: quickly while there is data,
//! backing off to a millisecond when there is none, and looks for new rings every millisecond.
//! With several threads (`--num-thread`) each follows the rings of its share of the traced
//! threads (by thread id); `--rt-prio` runs them at a real-time (SCHED_FIFO) priority. In
//! flight mode (`--flight-recorder`) one pump follows every ring: it writes nothing until a dump
//! is asked for (a requester wakes it at once), then every ring's newest records, and the rings
//! of threads that ended.

use record_format::ring::Pump;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Shortest and longest pause between two passes.
const MIN_PAUSE: Duration = Duration::from_micros(50);
const MAX_PAUSE: Duration = Duration::from_millis(1);
/// How often the ring directory is listed.
const RESCAN: Duration = Duration::from_millis(1);

pub struct PumpThread {
    stop: Arc<AtomicBool>,
    handles: Vec<JoinHandle<std::io::Result<()>>>,
}

impl PumpThread {
    /// Starts `threads` pumps of the rings of `prefix` into `dir`, at real-time priority
    /// `rt_prio` when given (a warning when the system refuses it), telling `observer` of every
    /// chunk written.
    pub fn start(
        prefix: &str,
        dir: &Path,
        threads: usize,
        rt_prio: Option<i32>,
        observer: Option<record_format::ring::Observer>,
    ) -> std::io::Result<PumpThread> {
        let stop = Arc::new(AtomicBool::new(false));
        // Flight mode: one pump takes every ring's dump at once.
        let flight = record_format::flight::Control::open(prefix).is_some();
        let count = if flight { 1 } else { threads.max(1) as u32 };
        let mut handles = Vec::new();
        for index in 0..count {
            let mut pump = Pump::shared(prefix, dir, index, count);
            if let Some(o) = &observer {
                pump.observe(std::sync::Arc::clone(o));
            }
            let flag = Arc::clone(&stop);
            let spawned = std::thread::Builder::new()
                .name(format!("utrace-pump-{index}"))
                .spawn(move || {
                    if let Some(prio) = rt_prio {
                        set_rt_priority(prio, index == 0);
                    }
                    let mut pause = MIN_PAUSE;
                    let mut scanned = Instant::now() - RESCAN;
                    let mut warned = false;
                    while !flag.load(Ordering::Relaxed) {
                        let mut rescanned = Ok(());
                        if scanned.elapsed() >= RESCAN {
                            rescanned = pump.rescan();
                            scanned = Instant::now();
                        }
                        // A ring that cannot be followed does not stop the others' dumps.
                        let pumped = match rescanned {
                            Err(e) if !pump.is_flight() => Err(e),
                            rescanned => pump.pump().and_then(|n| rescanned.map(|()| n)),
                        };
                        pause = match pumped {
                            Ok(n) if n > 0 => MIN_PAUSE,
                            Ok(_) => (pause * 2).min(MAX_PAUSE),
                            // In flight mode nothing else writes the dumps: say it once and
                            // go on (the next dump may succeed, requesters must be answered).
                            Err(e) if pump.is_flight() => {
                                if !warned {
                                    crate::diag::warn(format!(
                                        "flight recorder: cannot write a dump: {e}"
                                    ));
                                    warned = true;
                                }
                                MAX_PAUSE
                            }
                            Err(e) => return Err(e),
                        };
                        // Parked, not asleep: `stop` unparks it at once. In flight mode a
                        // dump request ends the wait (a futex), and `stop` waits one pause.
                        match pump.is_flight() {
                            true => pump.idle(pause),
                            false => std::thread::park_timeout(pause),
                        }
                    }
                    Ok(())
                });
            match spawned {
                Ok(h) => handles.push(h),
                Err(e) => {
                    PumpThread { stop, handles }.stop_quietly();
                    return Err(e);
                }
            }
        }
        Ok(PumpThread { stop, handles })
    }

    /// Stops the pumps (what is left in the rings is for the salvage) and reports the first
    /// error.
    pub fn stop(self) -> std::io::Result<()> {
        self.stop.store(true, Ordering::Relaxed);
        for h in &self.handles {
            h.thread().unpark();
        }
        let mut result = Ok(());
        for h in self.handles {
            let r = match h.join() {
                Ok(r) => r,
                Err(_) => Err(std::io::Error::other("a pump thread panicked")),
            };
            if result.is_ok() {
                result = r;
            }
        }
        result
    }

    fn stop_quietly(self) {
        let _ = self.stop();
    }
}

/// Puts the calling thread in the SCHED_FIFO class at `prio`; `warn`: say so when refused.
pub fn set_rt_priority(prio: i32, warn: bool) {
    let param = libc::sched_param {
        sched_priority: prio,
    };
    // SAFETY: `param` is a valid sched_param; pid 0 is the calling thread.
    let ok = unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) } == 0;
    if !ok && warn {
        crate::diag::warn(format!(
            "cannot run the recorder at real-time priority {prio}: {}",
            std::io::Error::last_os_error()
        ));
    }
}
