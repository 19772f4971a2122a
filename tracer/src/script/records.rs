//! The records of a data directory still being written, handed to a script thread by thread
//! in record order ([`super::live`]): each thread's `<tid>.dat` is read up to where the pump
//! has written it in order, its records decoded (entries, exits with their durations from a
//! thread's entries, events; arguments and return values by the recorded specs), and every
//! entry and exit of a function `UFTRACE_FUNCS` selects, and every event, is given to the
//! script. The depth is the recorded one: the recorder applied the filters.
//!
//! Names come from replay's [`Symbolizer`] and the specs from replay's [`Specs`], over a
//! snapshot of the directory ([`TraceDir::open_recording`]: `task.txt`, the session maps, the
//! `.dbg` files). libmcount writes a session's map and `SESS` line, a thread's `TASK` line and
//! a library's `DLOP` line before any record that needs them, so a record that arrived after
//! `task.txt` grew is named in a snapshot taken after it arrived ([`Outcome::Refresh`],
//! [`fresh`]); an address still unknown there is named by its address, as replay names it.
//! Each address is resolved once per session. A data file is open only while it is read.

mod fork;
mod fresh;

use super::walk::{event_parts, value, Selection};
use super::{Ctx, Kind, Script, Value};
use fork::Fork;
pub use fresh::with_all_tasks;
use record_format::argspec::{decode_payload, payload_len, ArgItem};
use record_format::dat::{event_payload_len, read_header, BadRecord};
use record_format::raw::{RecordKind, RECORD_SIZE};
use record_format::task::TaskLine;
use record_format::TraceDir;
use replay::specs::{FuncSpec, Specs};
use replay::symbols::Symbolizer;
use replay::{Demangle, MatchType};
use std::collections::HashMap;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// Most bytes read from a data file at once.
const PIECE: u64 = 4 << 20;

/// What the script runs with.
#[derive(Debug, Clone)]
pub struct Setup {
    pub demangle: Demangle,
    pub match_type: MatchType,
    /// `--no-args`: no arguments or return values.
    pub no_args: bool,
}

/// One thread's records.
#[derive(Default)]
struct Thread {
    /// Bytes of the data file read into `buf`.
    read: u64,
    /// Bytes read and not yet decoded (from `pos`).
    buf: Vec<u8>,
    pos: usize,
    /// The number of the last arrival that added bytes.
    arrived: u64,
    /// How far the data file is known to be written in order.
    upto: Option<u64>,
    /// The recording ended: the data file is whole.
    whole: bool,
    /// The time of the last entry of each function at each depth: an exit's duration is from
    /// there (also the second return of a `setjmp`, after a `longjmp`).
    entered: HashMap<(u16, u64), u64>,
    /// The records cannot be followed further (no spec for a payload, bad magic).
    broken: bool,
    /// Whether it is a fork child, decided at its first record.
    fork: Fork,
    /// The time of the last record decoded.
    last_time: u64,
    /// The data file could not be read at the end (said once).
    unreadable: bool,
}

/// A function as the script sees it.
struct Func {
    name: String,
    wanted: bool,
    spec: FuncSpec,
}

/// A snapshot of the directory and what resolves names in it.
pub struct Names<'d> {
    sym: Symbolizer<'d>,
    specs: Specs,
    /// Fork children by pid: their parent and the time of the fork.
    forks: HashMap<u32, (u32, u64)>,
    /// The threads it was taken for (those it has sessions for).
    tids: std::collections::HashSet<u32>,
}

impl<'d> Names<'d> {
    pub fn new(dir: &'d TraceDir, demangle: Demangle) -> Names<'d> {
        Names {
            sym: Symbolizer::new(dir, demangle),
            specs: Specs::new(dir),
            tids: dir.info.tids.iter().copied().collect(),
            forks: dir
                .tasks
                .iter()
                .filter_map(|t| match t {
                    TaskLine::Fork { time, pid, ppid } => Some((*pid, (*ppid, *time))),
                    _ => None,
                })
                .collect(),
        }
    }
}

/// Why decoding stopped.
#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Everything read so far was decoded.
    Done,
    /// A record needs a snapshot taken after it arrived.
    Refresh,
}

/// Every thread's records, and the functions met.
pub struct Threads {
    dir: PathBuf,
    setup: Setup,
    threads: HashMap<u32, Thread>,
    funcs: Vec<Func>,
    by_addr: HashMap<(Option<usize>, u64), usize>,
    select: Selection,
    /// Messages taken so far.
    pub arrivals: u64,
    events: Option<HashMap<u64, String>>,
    values: Vec<Value>,
    /// Fork children waiting, by parent.
    waiting: HashMap<u32, Vec<u32>>,
    /// Some were released: they have records to decode.
    pub released: bool,
    /// The last snapshot (opened or not): the size `task.txt` had before it was taken.
    snapshot: Option<u64>,
    /// Records of arrivals up to this count are as known to the last snapshot as they can be
    /// (`task.txt` had not grown since it was taken when they had arrived).
    fresh_upto: u64,
    /// Threads started since the snapshot, by their process (`TASK` lines read alone).
    joined: HashMap<u32, u32>,
}

impl Threads {
    pub fn new(dir: &Path, setup: Setup, funcs: Option<Vec<String>>) -> Threads {
        Threads {
            dir: dir.to_path_buf(),
            select: Selection::new(funcs, setup.match_type),
            setup,
            threads: HashMap::new(),
            funcs: Vec::new(),
            by_addr: HashMap::new(),
            arrivals: 0,
            events: None,
            values: Vec::new(),
            waiting: HashMap::new(),
            released: false,
            snapshot: None,
            fresh_upto: 0,
            joined: HashMap::new(),
        }
    }
    /// The threads met, for a snapshot.
    pub fn tids(&self) -> Vec<u32> {
        let mut tids: Vec<u32> = self.threads.keys().copied().collect();
        tids.sort_unstable();
        tids
    }

    /// The directory recorded into.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn demangle(&self) -> Demangle {
        self.setup.demangle
    }

    /// The threads met and those with a data file, in order (for the final pass).
    pub fn all_tids(&self) -> Vec<u32> {
        let mut tids = self.tids();
        if let Ok(entries) = std::fs::read_dir(&self.dir) {
            for e in entries.flatten() {
                let name = e.file_name();
                if let Some(tid) = name.to_str().and_then(record_format::dir::task_file) {
                    tids.push(tid);
                }
            }
        }
        tids.sort_unstable();
        tids.dedup();
        tids
    }

    /// `<tid>.dat` is written in order up to `upto` (whole when `None`): runs the script
    /// over its records.
    pub fn feed(
        &mut self,
        tid: u32,
        upto: Option<u64>,
        names: &mut Option<Names<'_>>,
        script: &mut Script,
    ) -> anyhow::Result<Outcome> {
        self.arrivals += 1;
        let t = self.threads.entry(tid).or_default();
        t.upto = upto;
        t.whole |= upto.is_none();
        self.pump(tid, names, script)
    }

    /// Decodes what every thread has been told of (after a refresh).
    pub fn resume(
        &mut self,
        names: &mut Option<Names<'_>>,
        script: &mut Script,
    ) -> anyhow::Result<Outcome> {
        self.released = false;
        for tid in self.tids() {
            if self.pump(tid, names, script)? == Outcome::Refresh {
                return Ok(Outcome::Refresh);
            }
        }
        Ok(Outcome::Done)
    }

    /// Reads `<tid>.dat` as far as it is known to be written, a piece at a time, and runs the
    /// script over its records.
    fn pump(
        &mut self,
        tid: u32,
        names: &mut Option<Names<'_>>,
        script: &mut Script,
    ) -> anyhow::Result<Outcome> {
        if self.decode(tid, names, script)? == Outcome::Refresh {
            return Ok(Outcome::Refresh);
        }
        let path = self.dir.join(format!("{tid}.dat"));
        // Opened for this read only: a recording of many threads must not hold a descriptor
        // per thread.
        let mut file: Option<std::fs::File> = None;
        loop {
            let arrival = self.arrivals;
            let Some(t) = self.threads.get_mut(&tid) else {
                return Ok(Outcome::Done);
            };
            if t.broken || matches!(t.fork, Fork::Waiting(..)) {
                return Ok(Outcome::Done);
            }
            if !t.whole && t.upto.is_some_and(|u| u <= t.read) {
                return Ok(Outcome::Done);
            }
            if file.is_none() {
                match std::fs::File::open(&path) {
                    Ok(f) => file = Some(f),
                    // Read again at the next arrival or at the end; at the end, said once.
                    Err(e) => {
                        if t.whole && !t.unreadable {
                            t.unreadable = true;
                            eprintln!(
                                "utrace: script: cannot read {}: {e}; its records are not given to the script",
                                path.display()
                            );
                        }
                        return Ok(Outcome::Done);
                    }
                }
            }
            let Some(file) = &file else {
                return Ok(Outcome::Done);
            };
            let end = match (t.whole, t.upto) {
                (false, Some(u)) => u,
                _ => file.metadata().map(|m| m.len()).unwrap_or(t.read),
            };
            if end <= t.read {
                return Ok(Outcome::Done);
            }
            let n = (end - t.read).min(PIECE) as usize;
            t.buf.drain(..t.pos);
            t.pos = 0;
            let old = t.buf.len();
            t.buf.resize(old + n, 0);
            if let Err(e) = file.read_exact_at(&mut t.buf[old..], t.read) {
                t.buf.truncate(old);
                if t.whole && !t.unreadable {
                    t.unreadable = true;
                    eprintln!("utrace: script: cannot read {}: {e}", path.display());
                }
                return Ok(Outcome::Done);
            }
            t.read += n as u64;
            t.arrived = arrival;
            if self.decode(tid, names, script)? == Outcome::Refresh {
                return Ok(Outcome::Refresh);
            }
        }
    }

    /// The id of the function at `addr` of `tid`'s session at `time`; `None` when a fresher
    /// snapshot may know it.
    fn func(
        &mut self,
        names: &mut Option<Names<'_>>,
        (tid, time, addr): (u32, u64, u64),
        arrived: u64,
    ) -> Option<usize> {
        // A task may have changed sessions (an exec) since the snapshot: its session there,
        // and the names cached for it, are trusted only when nothing was added since.
        if self.stale(names, tid, arrived) {
            return None;
        }
        let session = names.as_ref().and_then(|n| {
            let pid = self.joined.get(&tid).copied();
            (n.sym.session_at(tid, time)).or_else(|| n.sym.session_at(pid?, time))
        });
        if let Some(&i) = self.by_addr.get(&(session.map(|s| s.0), addr)) {
            return Some(i);
        }
        let func = match names {
            Some(n) => {
                let id = n.sym.resolve(session.map(|s| s.0), time, addr);
                let info = n.sym.func(id);
                Func {
                    name: info.name.clone(),
                    wanted: false,
                    spec: n.specs.get(id, info).clone(),
                }
            }
            // The snapshot could not be opened: named by its address, as replay names it.
            None => Func {
                name: format!("<{addr:x}>"),
                wanted: false,
                spec: FuncSpec::default(),
            },
        };
        let i = self.funcs.len();
        let wanted = self.select.wants(i, &func.name);
        self.funcs.push(Func { wanted, ..func });
        self.by_addr.insert((session.map(|s| s.0), addr), i);
        Some(i)
    }

    /// The names of the user events (`events.txt`, written before the program started).
    fn event_text(&mut self, id: u64, data: &[u8]) -> Option<String> {
        let dir = &self.dir;
        let names = self.events.get_or_insert_with(|| {
            std::fs::read_to_string(dir.join("events.txt"))
                .map(|t| {
                    record_format::sdt::parse_events_txt(&t)
                        .into_iter()
                        .collect()
                })
                .unwrap_or_default()
        });
        replay::payload::events::text(id, data, names)
    }

    /// Runs the script over the whole records `tid` has read.
    fn decode(
        &mut self,
        tid: u32,
        names: &mut Option<Names<'_>>,
        script: &mut Script,
    ) -> anyhow::Result<Outcome> {
        loop {
            let Some(t) = self.threads.get_mut(&tid) else {
                return Ok(Outcome::Done);
            };
            if t.broken {
                return Ok(Outcome::Done);
            }
            let pos = t.pos;
            let raw = match read_header(&t.buf, pos) {
                None | Some(Err(BadRecord::Truncated)) => return Ok(Outcome::Done),
                Some(Err(BadRecord::Magic)) => {
                    t.broken = true;
                    return Ok(Outcome::Done);
                }
                Some(Ok(r)) => r,
            };
            let arrived = t.arrived;
            match t.fork {
                Fork::Decided => {}
                Fork::Waiting(..) => return Ok(Outcome::Done),
                Fork::Unknown => match self.fork_of(tid, names, arrived) {
                    None => return Ok(Outcome::Refresh),
                    Some(Fork::Waiting(..)) => return Ok(Outcome::Done),
                    Some(_) => {}
                },
            }
            if self.waiting.contains_key(&tid) {
                self.release(tid, Some(raw.time));
            }
            let Some(t) = self.threads.get_mut(&tid) else {
                return Ok(Outcome::Done);
            };
            t.last_time = raw.time;
            let pstart = pos + RECORD_SIZE;
            match raw.kind {
                RecordKind::Lost => {
                    t.entered.clear();
                    t.pos = pstart;
                }
                RecordKind::Event => {
                    let (len, data) = match raw.more {
                        false => (0, 0..0),
                        true => match event_payload_len(&t.buf, pstart) {
                            Err(_) => return Ok(Outcome::Done),
                            Ok(len) => {
                                let n = u16::from_le_bytes([t.buf[pstart], t.buf[pstart + 1]]);
                                (len, pstart + 2..pstart + 2 + n as usize)
                            }
                        },
                    };
                    let data = t.buf[data].to_vec();
                    t.pos = pstart + len;
                    let Some(text) = self.event_text(raw.addr, &data) else {
                        continue;
                    };
                    let (name, body) = event_parts(&text);
                    let values: Vec<Value> = body.into_iter().map(Value::Str).collect();
                    let ctx = Ctx {
                        kind: Kind::Event,
                        tid: i64::from(tid),
                        depth: i64::from(raw.depth),
                        timestamp: raw.time,
                        duration: 0,
                        address: raw.addr,
                        name,
                        values: (!values.is_empty()).then_some(&values[..]),
                        record: false,
                    };
                    script.call(&ctx)?;
                }
                RecordKind::Entry | RecordKind::Exit => {
                    let Some(fi) = self.func(names, (tid, raw.time, raw.addr), arrived) else {
                        return Ok(Outcome::Refresh);
                    };
                    let exit = raw.kind == RecordKind::Exit;
                    let f = &self.funcs[fi];
                    let items: Vec<&ArgItem> = match exit {
                        true => f.spec.ret.iter().collect(),
                        false => f.spec.args.iter().collect(),
                    };
                    let t = self.threads.get_mut(&tid).expect("met above");
                    let mut plen = 0;
                    if raw.more {
                        if items.is_empty() {
                            // The payload's length is unknown: the rest cannot be read.
                            t.broken = true;
                            return Ok(Outcome::Done);
                        }
                        match payload_len(&items, &t.buf[pstart.min(t.buf.len())..]) {
                            Some(n) => plen = n,
                            None => return Ok(Outcome::Done),
                        }
                    }
                    t.pos = pstart + plen;
                    let depth = raw.depth;
                    let mut duration = 0;
                    if exit {
                        // An exit without its entry (a fork child's return from `fork`) has
                        // no duration.
                        if let Some(time) = t.entered.get(&(depth, raw.addr)) {
                            duration = raw.time.saturating_sub(*time);
                        }
                    } else {
                        t.entered.insert((depth, raw.addr), raw.time);
                    }
                    if !f.wanted {
                        continue;
                    }
                    self.values.clear();
                    let recorded = !self.setup.no_args
                        && raw.more
                        && decode_payload(&items, &t.buf[pstart..pstart + plen])
                            .map(|vals| {
                                let items = items.iter().zip(&vals);
                                self.values.extend(items.map(|(i, v)| value(i, v)));
                            })
                            .is_some();
                    let ctx = Ctx {
                        kind: if exit { Kind::Exit } else { Kind::Entry },
                        tid: i64::from(tid),
                        depth: i64::from(depth),
                        timestamp: raw.time,
                        duration,
                        address: raw.addr,
                        name: &f.name,
                        values: recorded.then_some(&self.values[..]),
                        record: false,
                    };
                    script.call(&ctx)?;
                }
            }
        }
    }
}
