//! The spool files: the kernel's ring-buffer pages of each CPU buffer, appended to a file of
//! the data directory per buffer as they are read, and read back at the end.
//!
//! While the program runs, a reader thread ([`read_cpus`]) reads the pages from each CPU's
//! `trace_pipe_raw` and appends them to the spools: nothing is kept in memory, however long
//! the program runs the recorder holds one page. At the end, in function_graph mode, the
//! spool files become the kernel files; in event mode they are read back a page at a time,
//! one after the other ([`each_event`]) or merged into one stream in time order ([`Merge`]),
//! each CPU's events being in time order already: the recorder holds one page per spool.

use record_format::kernel::{Lost, Page};
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use super::Stats;

/// Creates the spool file `path` (empty) in the data directory, as every data file is made.
pub(super) fn create_spool(path: &Path) -> std::io::Result<File> {
    let f = record_format::create::open_data_file(path)?;
    f.set_len(0)?;
    Ok(f)
}

/// Reads every CPU's sub-buffers from `files` until `stop`, then drains them, appending each
/// CPU's pages to its spool file in `out`. It waits in `poll`, which the kernel ends when a
/// CPU's buffer is `buffer_percent` full, so that pages are read whole rather than while the
/// traced tasks fill them. Stops at the first failed write (a full disk).
pub(super) fn read_cpus(
    mut files: Vec<File>,
    mut out: Vec<File>,
    size: usize,
    stop: &AtomicBool,
) -> std::io::Result<()> {
    let mut buf = vec![0u8; size];
    let mut drain = |files: &mut [File], only: Option<&[libc::pollfd]>| -> std::io::Result<()> {
        for (cpu, f) in files.iter_mut().enumerate() {
            if only.is_some_and(|p| p[cpu].revents & libc::POLLIN == 0) {
                continue;
            }
            while let Ok(n) = f.read(&mut buf) {
                if n == 0 {
                    break;
                }
                // A short read is a partial sub-buffer: pad it to a whole one.
                buf[n..].fill(0);
                out[cpu].write_all(&buf)?;
            }
        }
        Ok(())
    };
    let mut fds: Vec<libc::pollfd> = files
        .iter()
        .map(|f| libc::pollfd {
            fd: f.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    // Relaxed: the flag only ends the loop; the files are handed over by the thread's join.
    while !stop.load(Ordering::Relaxed) {
        // SAFETY: `fds` holds `len` initialized pollfd entries of open files.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, 100) };
        if n > 0 {
            drain(&mut files, Some(&fds))?;
        }
    }
    drain(&mut files, None)
}

/// Opens the spool file `path` to read it back.
fn open_spool(path: &Path) -> std::io::Result<File> {
    OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
}

/// Calls `f` with each `page_size` page of the spool file `path`, in order, until the file
/// ends or `f` returns false. The last page may be short.
pub(super) fn each_page(
    path: &Path,
    page_size: usize,
    mut f: impl FnMut(&[u8]) -> bool,
) -> std::io::Result<()> {
    let mut file = open_spool(path)?;
    let mut page = vec![0u8; page_size];
    loop {
        let len = read_page(&mut file, &mut page)?;
        if len == 0 || !f(&page[..len]) || len < page.len() {
            return Ok(());
        }
    }
}

/// Fills `page` from `file`: the bytes read, fewer than the page at the end of the file.
fn read_page(file: &mut File, page: &mut [u8]) -> std::io::Result<usize> {
    let mut len = 0;
    while len < page.len() {
        match file.read(&mut page[len..])? {
            0 => break,
            n => len += n,
        }
    }
    Ok(len)
}

/// Calls `f` with the time, CPU and payload of each event of the spool files `cpus` (one per
/// CPU buffer), a CPU after the other, counting them and the events the kernel lost in
/// `stats`.
pub(super) fn each_event(
    cpus: &[PathBuf],
    page_size: usize,
    stats: &mut Stats,
    mut f: impl FnMut(u64, usize, &[u8]),
) -> std::io::Result<()> {
    for (cpu, path) in cpus.iter().enumerate() {
        let mut spool = Spool::open(path, page_size, stats)?;
        while let Some((time, payload)) = spool.current() {
            f(time, cpu, payload);
            spool.step(stats)?;
        }
    }
    Ok(())
}

/// One spool file read an event at a time: its current page and where its events are.
struct Spool {
    file: File,
    page: Vec<u8>,
    /// The current page's events: time and the payload's bounds in `page`.
    events: Vec<(u64, usize, usize)>,
    /// The current event in `events`.
    at: usize,
    /// No page follows the current one: the file ended or a page was bad.
    ended: bool,
}

impl Spool {
    /// Opens `path` at its first event, counting in `stats` the events of each page loaded
    /// and those the kernel lost before it.
    fn open(path: &Path, page_size: usize, stats: &mut Stats) -> std::io::Result<Spool> {
        let mut spool = Spool {
            file: open_spool(path)?,
            page: vec![0; page_size],
            events: Vec::new(),
            at: 0,
            ended: false,
        };
        spool.fill(stats)?;
        Ok(spool)
    }

    /// The current event's time and payload; none once the spool is read.
    fn current(&self) -> Option<(u64, &[u8])> {
        let &(time, from, to) = self.events.get(self.at)?;
        Some((time, self.page.get(from..to)?))
    }

    /// Moves to the next event, loading pages as needed.
    fn step(&mut self, stats: &mut Stats) -> std::io::Result<()> {
        self.at += 1;
        self.fill(stats)
    }

    /// Loads pages until one has an event at `at` or the spool ends.
    fn fill(&mut self, stats: &mut Stats) -> std::io::Result<()> {
        while self.at >= self.events.len() && self.load(stats)? {}
        Ok(())
    }

    /// Reads the next page and indexes its events (until the first bad one): false when no
    /// page is left or the page is bad, which ends the spool.
    fn load(&mut self, stats: &mut Stats) -> std::io::Result<bool> {
        self.events.clear();
        self.at = 0;
        if self.ended {
            return Ok(false);
        }
        let len = read_page(&mut self.file, &mut self.page)?;
        self.ended = len < self.page.len();
        let raw = &self.page[..len];
        let page = match Page::parse(raw) {
            Ok(page) if len > 0 => page,
            _ => {
                self.ended = true;
                return Ok(false);
            }
        };
        stats.lost += page.lost.map_or(0, Lost::events);
        let base = raw.as_ptr() as usize;
        for ev in page.events().map_while(Result::ok) {
            stats.events += 1;
            // The payload lies in `raw`: its place there.
            let from = ev.payload.as_ptr() as usize - base;
            self.events.push((ev.time, from, from + ev.payload.len()));
        }
        Ok(true)
    }
}

/// The events of several spool files in time order: at equal times, those of the file
/// given first. Each file's events must be in time order (the kernel's per-CPU buffers are);
/// where one's are not, the stream keeps that file's order.
pub(super) struct Merge {
    spools: Vec<Spool>,
    /// The spools with an event left, by the time of their current event.
    heap: BinaryHeap<Reverse<(u64, usize)>>,
    /// The spool whose event [`next`](Self::next) gave last: it moves on at the next call.
    last: Option<usize>,
    /// What the pages held (counted as they are read).
    pub(super) stats: Stats,
}

impl Merge {
    /// Opens the spool files `paths`, of `page_size` pages.
    pub(super) fn open(paths: &[PathBuf], page_size: usize) -> std::io::Result<Merge> {
        let mut stats = Stats::default();
        let mut spools = Vec::with_capacity(paths.len());
        let mut heap = BinaryHeap::with_capacity(paths.len());
        for (i, path) in paths.iter().enumerate() {
            let spool = Spool::open(path, page_size, &mut stats)?;
            if let Some((time, _)) = spool.current() {
                heap.push(Reverse((time, i)));
            }
            spools.push(spool);
        }
        Ok(Merge {
            spools,
            heap,
            last: None,
            stats,
        })
    }

    /// The next event: its time, the index of its file in the paths given, its payload.
    pub(super) fn next(&mut self) -> std::io::Result<Option<(u64, usize, &[u8])>> {
        if let Some(i) = self.last.take() {
            let spool = &mut self.spools[i];
            spool.step(&mut self.stats)?;
            if let Some(time) = spool.current().map(|e| e.0) {
                // Still first (the usual case: a CPU's events come in runs): no reordering.
                if self.heap.peek().is_none_or(|&Reverse(top)| (time, i) < top) {
                    self.last = Some(i);
                    return Ok(self.spools[i].current().map(|(time, p)| (time, i, p)));
                }
                self.heap.push(Reverse((time, i)));
            }
        }
        let Some(Reverse((_, i))) = self.heap.pop() else {
            return Ok(None);
        };
        self.last = Some(i);
        Ok(self.spools[i].current().map(|(time, p)| (time, i, p)))
    }
}
