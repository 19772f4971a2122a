//! The per-CPU reader: a thread that reads the kernel's ring-buffer pages from each CPU's
//! `trace_pipe_raw` while the program runs and appends them, as they are read, to a spool
//! file of the data directory per CPU buffer. Nothing is kept in memory: however long the
//! program runs, the recorder holds one page. At the end the pages are read back a page at a
//! time ([`each_event`]) or, in function_graph mode, the spool files become the kernel files.

use record_format::kernel::{Lost, Page};
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
/// ends or `f` returns false.
pub(super) fn each_page(
    path: &Path,
    page_size: usize,
    mut f: impl FnMut(&[u8]) -> bool,
) -> std::io::Result<()> {
    let mut file = open_spool(path)?;
    let mut page = vec![0u8; page_size];
    loop {
        let mut len = 0;
        while len < page_size {
            match file.read(&mut page[len..])? {
                0 => break,
                n => len += n,
            }
        }
        if len == 0 || !f(&page[..len]) || len < page_size {
            return Ok(());
        }
    }
}

/// Calls `f` with the time, CPU and payload of each event of the spool files `cpus` (one per
/// CPU buffer), counting them and the events the kernel lost in `stats`.
pub(super) fn each_event(
    cpus: &[PathBuf],
    page_size: usize,
    stats: &mut Stats,
    mut f: impl FnMut(u64, usize, &[u8]),
) -> std::io::Result<()> {
    for (cpu, path) in cpus.iter().enumerate() {
        each_page(path, page_size, |page| {
            let Ok(page) = Page::parse(page) else {
                return false;
            };
            stats.lost += page.lost.map_or(0, Lost::events);
            for ev in page.events().map_while(Result::ok) {
                stats.events += 1;
                f(ev.time, cpu, ev.payload);
            }
            true
        })?;
    }
    Ok(())
}
