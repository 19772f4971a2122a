//! The recorder's pump thread: while the traced process tree runs, it writes the chunks the
//! traced threads sealed in their rings to the data files (`record_format::ring`), so the
//! traced threads do not pay for the file system. It polls: quickly while there is data,
//! backing off to a millisecond when there is none, and looks for new rings every millisecond.

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
    handle: JoinHandle<std::io::Result<()>>,
}

impl PumpThread {
    /// Starts pumping the rings of `prefix` into `dir`.
    pub fn start(prefix: &str, dir: &Path) -> std::io::Result<PumpThread> {
        let stop = Arc::new(AtomicBool::new(false));
        let mut pump = Pump::new(prefix, dir);
        let flag = Arc::clone(&stop);
        let handle = std::thread::Builder::new()
            .name("utrace-pump".into())
            .spawn(move || {
                let mut pause = MIN_PAUSE;
                let mut scanned = Instant::now() - RESCAN;
                while !flag.load(Ordering::Relaxed) {
                    if scanned.elapsed() >= RESCAN {
                        pump.rescan()?;
                        scanned = Instant::now();
                    }
                    pause = if pump.pump()? > 0 {
                        MIN_PAUSE
                    } else {
                        (pause * 2).min(MAX_PAUSE)
                    };
                    std::thread::sleep(pause);
                }
                Ok(())
            })?;
        Ok(PumpThread { stop, handle })
    }

    /// Stops the pump (what is left in the rings is for the salvage) and reports its error.
    pub fn stop(self) -> std::io::Result<()> {
        self.stop.store(true, Ordering::Relaxed);
        match self.handle.join() {
            Ok(r) => r,
            Err(_) => Err(std::io::Error::other("the pump thread panicked")),
        }
    }
}
