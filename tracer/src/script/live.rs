//! `record -S` and `live -S`: the script runs while the program runs, as uftrace's record-time
//! script does (uftrace runs it inside libmcount; utrace runs it in the recorder, so that the
//! traced threads pay nothing for it and utrace needs no interpreter in the program).
//!
//! ```text
//! pump threads ──Written──▶ observer ──(tid, bytes in order)──▶ script thread ──▶ Script
//!                 (DataStream: file order)      channel          (records::Threads: reads
//!                                                                 <tid>.dat, decodes, names)
//! ```
//!
//! The script thread opens the script (engines need not be `Send`) and calls `uftrace_begin`
//! before the program starts: a script that cannot be loaded stops the command first. The
//! observer runs on the pump threads and only sends how far each thread's data file is written
//! in order; the script thread reads the records from the file (memory stays flat when the
//! script is slower than the program). Each thread's records come in record order; threads
//! interleave as their chunks arrive (no global order, as in uftrace's). Once the recording
//! ended, a final pass reads every data file to its end (the salvage, what was written out of
//! order), then `uftrace_end` runs.
//!
//! A thread's records arrive a chunk at a time: libmcount seals a chunk when it is full or the
//! thread ends, never on a timer (its hot path stays as it is), so the script lags a thread by
//! up to one chunk (`-b`, 128 KB by default).

use super::records::{with_all_tasks, Names, Outcome, Setup, Threads};
use super::Script;
use crate::record::ordered::DataStream;
use crate::record::ChunkObserver;
use record_format::ring::Written;
use record_format::TraceDir;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

/// What the script thread is told.
enum Msg {
    /// `<tid>.dat` is written in order up to this offset.
    Upto(u32, u64),
    /// The recording ended: every data file is whole.
    End,
}

/// A script running over a recording.
pub struct LiveScript {
    tx: Option<Sender<Msg>>,
    stream: Arc<Mutex<(DataStream, Option<Sender<Msg>>)>>,
    dir: PathBuf,
    handle: Option<JoinHandle<anyhow::Result<()>>>,
}

impl LiveScript {
    /// Opens the script at `path` on its thread and calls `uftrace_begin` (`record` true,
    /// `cmds` the program's command line), to run over what is recorded into `dir`.
    pub fn start(
        path: &str,
        setup: Setup,
        cmds: Vec<String>,
        dir: &Path,
    ) -> anyhow::Result<LiveScript> {
        let (tx, rx) = mpsc::channel();
        let (ready_tx, ready_rx) = mpsc::sync_channel(1);
        let path = path.to_string();
        let at = dir.to_path_buf();
        let handle = std::thread::Builder::new()
            .name("utrace-script".into())
            .spawn(move || {
                let opened = Script::open(&path).and_then(|mut s| {
                    s.begin(true, &cmds)?;
                    Ok(s)
                });
                let mut script = match opened {
                    Ok(s) => s,
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                        return Ok(());
                    }
                };
                // Everything set up before the answer: from then on this thread waits for the
                // first message, holding nothing, while the recorder forks its guardian.
                let funcs = script.funcs();
                let threads = Threads::new(&at, setup, funcs);
                let _ = ready_tx.send(Ok(()));
                let ran = run(&rx, threads, &mut script);
                // Also after an error: what the script printed so far comes out.
                let ended = ran.and_then(|ended| match ended {
                    true => script.end(),
                    false => Ok(()),
                });
                super::flush_c_stdio();
                ended
            })?;
        match ready_rx.recv() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                let _ = handle.join();
                return Err(e);
            }
            Err(_) => {
                return Err(match handle.join() {
                    Ok(Err(e)) => e,
                    _ => anyhow::anyhow!("the script thread stopped"),
                })
            }
        }
        Ok(LiveScript {
            stream: Arc::new(Mutex::new((DataStream::offsets_only(), Some(tx.clone())))),
            tx: Some(tx),
            dir: dir.to_path_buf(),
            handle: Some(handle),
        })
    }

    /// The observer to give the pump (through the record target).
    pub fn observer(&self) -> ChunkObserver {
        let state = Arc::clone(&self.stream);
        let dir = self.dir.clone();
        ChunkObserver(Arc::new(move |written: Written<'_>| {
            let mut guard = state.lock().unwrap_or_else(|e| e.into_inner());
            let (stream, tx) = &mut *guard;
            let mut ready: Vec<u32> = match written {
                Written::Chunk { tid, off, bytes } => match stream.take(tid, off, bytes).len() {
                    0 => Vec::new(),
                    _ => vec![tid],
                },
                Written::Pass { index, count } => stream
                    .pass(index, count, &dir)
                    .into_iter()
                    .map(|(tid, _)| tid)
                    .collect(),
            };
            ready.dedup();
            for tid in ready {
                let sent = tx
                    .as_ref()
                    .map(|tx| tx.send(Msg::Upto(tid, stream.sent(tid))));
                // The script thread stopped (a script error): nothing more to tell it.
                if let Some(Err(_)) = sent {
                    *tx = None;
                }
            }
        }))
    }

    /// The recording ended: the script runs over the rest, then `uftrace_end`. Returns the
    /// script's error, if any.
    pub fn finish(mut self) -> anyhow::Result<()> {
        if let Some(tx) = self.tx.take() {
            let _ = tx.send(Msg::End);
        }
        self.join()
    }

    fn join(&mut self) -> anyhow::Result<()> {
        self.tx = None;
        self.stream.lock().unwrap_or_else(|e| e.into_inner()).1 = None;
        match self.handle.take().map(JoinHandle::join) {
            None => Ok(()),
            Some(Ok(r)) => r,
            Some(Err(_)) => anyhow::bail!("the script thread panicked"),
        }
    }
}

impl Drop for LiveScript {
    /// The recording failed: the script thread ends without `uftrace_end`.
    fn drop(&mut self) {
        let _ = self.join();
    }
}

/// Runs the script over the records as they come until the end message; `false` when the
/// recorder went away without one.
fn run(rx: &Receiver<Msg>, mut threads: Threads, script: &mut Script) -> anyhow::Result<bool> {
    // Messages taken but not yet done (a record needed a fresher snapshot).
    let mut pending: Option<Msg> = None;
    let mut resume = false;
    loop {
        // A snapshot of the directory as it is now; a record that it does not know of and
        // that came before it was taken is named by its address, as is every record while
        // the snapshot cannot be opened and `task.txt` does not grow (no retry in a loop).
        // None before the first records (nothing to read yet, and nothing done while the
        // recorder forks).
        let dir = match resume {
            true => {
                threads.snapshot_taken();
                let dir = TraceDir::open_recording(threads.dir(), &threads.tids());
                dir.ok().map(with_all_tasks)
            }
            false => None,
        };
        let mut names = dir.as_ref().map(|d| Names::new(d, threads.demangle()));
        if resume && threads.resume(&mut names, script)? == Outcome::Refresh {
            continue;
        }
        loop {
            let msg = match pending.take() {
                Some(m) => m,
                None => match rx.recv() {
                    Ok(m) => m,
                    Err(_) => return Ok(false),
                },
            };
            let mut outcome = match msg {
                Msg::Upto(tid, upto) => threads.feed(tid, Some(upto), &mut names, script)?,
                Msg::End => {
                    // The final pass: every data file to its end, in thread order, then the
                    // fork children still waiting.
                    let mut outcome = Outcome::Done;
                    for tid in threads.all_tids() {
                        outcome = threads.feed(tid, None, &mut names, script)?;
                        if outcome == Outcome::Refresh {
                            break;
                        }
                    }
                    if outcome == Outcome::Done {
                        outcome = threads.release_all(&mut names, script)?;
                    }
                    if outcome == Outcome::Done {
                        return Ok(true);
                    }
                    pending = Some(Msg::End);
                    outcome
                }
            };
            // Fork children whose parents passed their fork: their records.
            while outcome == Outcome::Done && threads.released {
                outcome = threads.resume(&mut names, script)?;
            }
            if outcome == Outcome::Refresh {
                resume = true;
                break;
            }
        }
    }
}

#[cfg(test)]
#[path = "live_tests.rs"]
mod tests;
