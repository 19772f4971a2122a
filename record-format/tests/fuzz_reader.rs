//! Property tests of the data-directory reader.
//!
//! 1. Round trip: a random trace (sessions, maps, tasks, symbols, records with argument and
//!    event payloads) written with `TraceWriter` reads back identically through `TraceDir` and a
//!    walk of every `<tid>.dat` with `dat::read_header`, `dat::event_payload_len` and `argspec`.
//! 2. Robustness: the same directories, damaged (bytes flipped, files truncated, replaced,
//!    extended or deleted, or replaced by a special file: a symlink to `/dev/zero` or
//!    `/dev/urandom`, a FIFO, a directory, a dangling symlink), must open and walk without a
//!    panic and without blocking. Errors are the expected outcome; only a panic or a hang fails.
//!    A special file in place of any file is refused, by an error or a warning naming it.
//!    (`fuzz_parsers.rs` feeds the parsers one by one.)
//!
//! The walker sizes an ENTRY/EXIT payload from the spec of the record's address, as the analysis
//! side does with the recorded argspec: `spec_of(addr)` picks one of `SPECS`.

use proptest::prelude::*;
use proptest::sample::{select, Index};
use record_format::argspec::{self, ArgFormat, ArgItem, ArgValue};
use record_format::dat;
use record_format::info::{Info, InfoHeader};
use record_format::maps::{self, MapEntry};
use record_format::raw::{RawRecord, RecordKind, ADDR_MASK, RECORD_SIZE};
use record_format::sym::{self, Symbol};
use record_format::task::{self, TaskLine};
use record_format::{FormatError, TraceDir, TraceWriter};
use std::collections::BTreeMap;
use std::fs;
use std::path::Path;
use std::sync::OnceLock;
use std::time::Duration;

/// Argument specs of the generated functions; every spec has at least one item, so a record
/// with a payload always has `more` set. (`f80` is left out: see
/// `long_double_round_trip` in `fuzz_parsers.rs`.)
const SPECS: &[&str] = &[
    "arg1/s,arg2/c,fparg1",
    "arg1/i32,arg2/x16,fparg1/32,arg3/t12,arg4/u8",
    "retval/i64",
    "retval/S",
    "arg1,arg2/p,arg3/o32,arg4/e:color",
];

fn spec_items() -> &'static [Vec<ArgItem>] {
    static ITEMS: OnceLock<Vec<Vec<ArgItem>>> = OnceLock::new();
    ITEMS.get_or_init(|| {
        SPECS
            .iter()
            .map(|s| {
                let list = argspec::parse_spec_list(&format!("f@{s}"), 8, |e| panic!("{s}: {e}"));
                list.into_iter().next().expect("one spec").items
            })
            .collect()
    })
}

/// The spec a function address uses (the address as stored, 48 bits).
fn spec_of(addr: u64) -> &'static [ArgItem] {
    let specs = spec_items();
    &specs[((addr & ADDR_MASK) % specs.len() as u64) as usize]
}

// --- the model ------------------------------------------------------------------------------

#[derive(Debug, Clone)]
enum Rec {
    Func {
        kind: RecordKind,
        time: u64,
        depth: u16,
        addr: u64,
        args: Option<Vec<ArgValue>>,
    },
    Event {
        time: u64,
        id: u64,
        data: Vec<u8>,
    },
    Lost {
        count: u64,
    },
}

#[derive(Debug, Clone)]
struct Session {
    pid: u32,
    time: u64,
    exename: String,
    maps: Vec<MapEntry>,
}

#[derive(Debug, Clone)]
struct Trace {
    /// By session id.
    sessions: BTreeMap<String, Session>,
    /// Records by tid.
    tasks: BTreeMap<u32, Vec<Rec>>,
    /// FORK and DLOP lines, after the SESS and TASK lines.
    other_lines: Vec<TaskLine>,
    sym_path: String,
    sym_build_id: Option<String>,
    syms: Vec<Symbol>,
    exit_status: Option<i32>,
    cmdline: Option<String>,
    opts: String,
}

/// A record as the walker reads it back.
#[derive(Debug, Clone, PartialEq)]
struct ReadRecord {
    raw: RawRecord,
    payload: Payload,
}

#[derive(Debug, Clone, PartialEq)]
enum Payload {
    None,
    Args(Vec<ArgValue>),
    Event(Vec<u8>),
}

/// The value the reader returns for `v` written for `item`: strings cut as libmcount does,
/// integers cut to their size.
fn read_back_value(item: &ArgItem, v: &ArgValue) -> ArgValue {
    match v {
        ArgValue::Str(s) if s.len() > 98 => {
            let mut s = s[..95].to_vec();
            s.extend_from_slice(b"...");
            ArgValue::Str(s)
        }
        ArgValue::Int { raw, .. } => {
            let size = item.size.min(8);
            let mask = if size == 8 {
                u64::MAX
            } else {
                (1u64 << (size * 8)) - 1
            };
            ArgValue::Int {
                raw: raw & mask,
                size,
            }
        }
        v => v.clone(),
    }
}

fn read_back(rec: &Rec) -> ReadRecord {
    match rec {
        Rec::Func {
            kind,
            time,
            depth,
            addr,
            args,
        } => {
            let items = spec_of(*addr);
            ReadRecord {
                raw: RawRecord {
                    time: *time,
                    kind: *kind,
                    more: args.is_some(),
                    depth: *depth,
                    addr: addr & ADDR_MASK,
                },
                payload: match args {
                    Some(vals) => Payload::Args(
                        items
                            .iter()
                            .zip(vals)
                            .map(|(i, v)| read_back_value(i, v))
                            .collect(),
                    ),
                    None => Payload::None,
                },
            }
        }
        Rec::Event { time, id, data } => ReadRecord {
            raw: RawRecord {
                time: *time,
                kind: RecordKind::Event,
                more: !data.is_empty(),
                depth: 0,
                addr: id & ADDR_MASK,
            },
            payload: if data.is_empty() {
                Payload::None
            } else {
                Payload::Event(data.clone())
            },
        },
        Rec::Lost { count } => ReadRecord {
            raw: RawRecord {
                time: 0,
                kind: RecordKind::Lost,
                more: false,
                depth: 0,
                addr: count & ADDR_MASK,
            },
            payload: Payload::None,
        },
    }
}

/// Walks one `<tid>.dat` image, stopping at the first bad or truncated record.
fn walk(bytes: &[u8]) -> Result<Vec<ReadRecord>, String> {
    let mut out = Vec::new();
    let mut pos = 0;
    while let Some(head) = dat::read_header(bytes, pos) {
        let raw = head.map_err(|e| format!("record at {pos}: {e:?}"))?;
        pos += RECORD_SIZE;
        let payload = if !raw.more {
            Payload::None
        } else {
            match raw.kind {
                RecordKind::Event => {
                    let len = dat::event_payload_len(bytes, pos)
                        .map_err(|e| format!("event at {pos}: {e:?}"))?;
                    let n = u16::from_le_bytes([bytes[pos], bytes[pos + 1]]) as usize;
                    let data = bytes[pos + 2..pos + 2 + n].to_vec();
                    pos += len;
                    Payload::Event(data)
                }
                RecordKind::Entry | RecordKind::Exit => {
                    let items: Vec<&ArgItem> = spec_of(raw.addr).iter().collect();
                    let rest = &bytes[pos..];
                    // Whatever the bytes, decoding the unsliced rest must not panic either.
                    let _ = argspec::decode_payload(&items, rest);
                    // payload_len does not check the total against the input: the caller does.
                    let len = argspec::payload_len(&items, rest)
                        .filter(|&len| len <= rest.len())
                        .ok_or_else(|| format!("payload at {pos} is truncated"))?;
                    let vals = argspec::decode_payload(&items, &rest[..len])
                        .ok_or_else(|| format!("payload at {pos} does not decode"))?;
                    pos += len;
                    Payload::Args(vals)
                }
                RecordKind::Lost => return Err(format!("LOST record with payload at {pos}")),
            }
        };
        out.push(ReadRecord { raw, payload });
    }
    Ok(out)
}

// --- strategies -----------------------------------------------------------------------------

fn value_for(item: &ArgItem) -> BoxedStrategy<ArgValue> {
    let not_nan = |f: &f64| !f.is_nan();
    match (&item.format, item.size) {
        (ArgFormat::Str | ArgFormat::StdString, _) => {
            proptest::collection::vec(any::<u8>(), 0..120)
                .prop_map(ArgValue::Str)
                .boxed()
        }
        (ArgFormat::Char, _) => any::<u8>().prop_map(ArgValue::Char).boxed(),
        (ArgFormat::Float, 4) => any::<f32>()
            .prop_map(f64::from)
            .prop_filter("NaN", not_nan)
            .prop_map(ArgValue::Float)
            .boxed(),
        (ArgFormat::Float, _) => any::<f64>()
            .prop_filter("NaN", not_nan)
            .prop_map(ArgValue::Float)
            .boxed(),
        (ArgFormat::Struct(_), size) => proptest::collection::vec(any::<u8>(), size)
            .prop_map(ArgValue::Bytes)
            .boxed(),
        (_, size) => any::<u64>()
            .prop_map(move |raw| ArgValue::Int { raw, size })
            .boxed(),
    }
}

fn func_record() -> impl Strategy<Value = Rec> {
    (
        select(vec![RecordKind::Entry, RecordKind::Exit]),
        any::<u64>(),
        0u16..=1023,
        any::<u64>(),
    )
        .prop_flat_map(|(kind, time, depth, addr)| {
            let values: Vec<_> = spec_of(addr).iter().map(value_for).collect();
            proptest::option::of(values).prop_map(move |args| Rec::Func {
                kind,
                time,
                depth,
                addr,
                args,
            })
        })
}

fn record() -> impl Strategy<Value = Rec> {
    prop_oneof![
        6 => func_record(),
        2 => (any::<u64>(), any::<u64>(), proptest::collection::vec(any::<u8>(), 0..40))
            .prop_map(|(time, id, data)| Rec::Event { time, id, data }),
        1 => any::<u64>().prop_map(|count| Rec::Lost { count }),
    ]
}

/// Mappings of distinct modules (the reader merges neighbours of the same path), maybe a stack.
fn map_entries() -> impl Strategy<Value = Vec<MapEntry>> {
    let entry = (
        0u64..1 << 47,
        1u64..1 << 24,
        select(vec!["r-xp", "r--p", "rw-p"]),
        "[a-z0-9_.+-]{1,20}",
        proptest::option::of("[0-9a-f]{40}"),
    );
    (proptest::collection::vec(entry, 0..5), any::<bool>()).prop_map(|(entries, stack)| {
        let mut out: Vec<MapEntry> = entries
            .into_iter()
            .enumerate()
            .map(|(i, (start, len, perms, name, build_id))| MapEntry {
                start,
                end: start + len,
                perms: perms.to_string(),
                path: format!("/lib{i}/{name}"),
                build_id,
            })
            .collect();
        if stack {
            out.push(MapEntry {
                start: 0x7ffd_1032_a000,
                end: 0x7ffd_1034_b000,
                perms: "rw-p".into(),
                path: "[stack]".into(),
                build_id: None,
            });
        }
        out
    })
}

/// Non-overlapping symbols of positive size at increasing addresses.
fn symbols() -> impl Strategy<Value = Vec<Symbol>> {
    let sym = (
        0u64..64,
        1u64..256,
        select(vec!['T', 't', 'w', 'P', 'd']),
        "[a-z_][a-z0-9_]{0,15}",
    );
    proptest::collection::vec(sym, 0..12).prop_map(|syms| {
        let mut addr = 0x1000;
        syms.into_iter()
            .map(|(gap, size, kind, name)| {
                addr += gap;
                let s = Symbol {
                    addr,
                    size,
                    kind,
                    name: format!("s{name}"),
                };
                addr += size;
                s
            })
            .collect()
    })
}

fn other_line() -> impl Strategy<Value = TaskLine> {
    prop_oneof![
        (any::<u64>(), any::<u32>(), any::<u32>()).prop_map(|(time, pid, ppid)| TaskLine::Fork {
            time,
            pid,
            ppid
        }),
        (
            any::<u64>(),
            any::<u32>(),
            "[0-9a-f]{16}",
            any::<u64>(),
            "\\PC{0,20}"
        )
            .prop_map(|(time, tid, sid, base, libname)| TaskLine::Dlop {
                time,
                tid,
                sid,
                base,
                libname,
            }),
    ]
}

fn trace() -> impl Strategy<Value = Trace> {
    let session = (any::<u32>(), any::<u64>(), "\\PC{0,24}", map_entries()).prop_map(
        |(pid, time, exename, maps)| Session {
            pid,
            time,
            exename,
            maps,
        },
    );
    (
        proptest::collection::btree_map("[0-9a-f]{16}", session, 1..3),
        proptest::collection::btree_map(
            1u32..1 << 22,
            proptest::collection::vec(record(), 0..40),
            1..4,
        ),
        proptest::collection::vec(other_line(), 0..3),
        (
            "/[a-z0-9/._-]{1,30}",
            proptest::option::of("[0-9a-f]{40}"),
            symbols(),
        ),
        proptest::option::of(any::<i32>()),
        proptest::option::of("\\PC{0,40}"),
        "[ -~]{0,20}",
    )
        .prop_map(
            |(
                sessions,
                tasks,
                other_lines,
                (sym_path, sym_build_id, syms),
                exit_status,
                cmdline,
                opts,
            )| Trace {
                sessions,
                tasks,
                other_lines,
                sym_path,
                sym_build_id,
                syms,
                exit_status,
                cmdline,
                opts,
            },
        )
}

// --- writing --------------------------------------------------------------------------------

fn task_lines(t: &Trace) -> Vec<TaskLine> {
    let (_, first) = t.sessions.iter().next().expect("at least one session");
    let sess = t.sessions.iter().map(|(sid, s)| TaskLine::Sess {
        time: s.time,
        pid: s.pid,
        sid: sid.clone(),
        exename: s.exename.clone(),
    });
    let tasks = t.tasks.keys().map(|&tid| TaskLine::Task {
        time: first.time,
        tid,
        pid: first.pid,
    });
    sess.chain(tasks)
        .chain(t.other_lines.iter().cloned())
        .collect()
}

fn info_of(t: &Trace) -> Info {
    Info {
        header: InfoHeader::default(),
        exename: t.sessions.values().next().map(|s| s.exename.clone()),
        exit_status: t.exit_status,
        cmdline: t.cmdline.clone(),
        tids: t.tasks.keys().copied().collect(),
        ..Info::default()
    }
}

fn write_trace(t: &Trace, dir: &Path) {
    let mut w = TraceWriter::create(dir).expect("create");
    for line in task_lines(t) {
        w.task_line(&line).expect("task line");
    }
    for (sid, s) in &t.sessions {
        w.session_map(sid, &s.maps).expect("map");
    }
    w.sym_file("prog.sym", &t.sym_path, t.sym_build_id.as_deref(), &t.syms)
        .expect("sym");
    w.default_opts(&t.opts).expect("opts");
    for (&tid, recs) in &t.tasks {
        for r in recs {
            match r {
                Rec::Func {
                    kind,
                    time,
                    depth,
                    addr,
                    args,
                } => {
                    let items: Vec<&ArgItem> = spec_of(*addr).iter().collect();
                    let values = args.as_deref().unwrap_or(&[]);
                    w.func_record(
                        tid,
                        RawRecord {
                            time: *time,
                            kind: *kind,
                            more: false,
                            depth: *depth,
                            addr: *addr,
                        },
                        &items,
                        values,
                    )
                }
                Rec::Event { time, id, data } => w.event_record(tid, *time, *id, data),
                Rec::Lost { count } => w.lost_record(tid, *count),
            }
            .expect("record");
        }
    }
    w.finish(&info_of(t)).expect("finish");
}

fn check_round_trip(t: &Trace) -> Result<(), TestCaseError> {
    let tmp = tempfile::tempdir().expect("tempdir");
    let path = tmp.path().join("t.data");
    write_trace(t, &path);

    let opened = TraceDir::open(&path);
    if t.tasks.values().all(Vec::is_empty) {
        prop_assert!(
            matches!(opened, Err(FormatError::NoData { .. })),
            "{opened:?}"
        );
        return Ok(());
    }
    let d = opened.map_err(|e| TestCaseError::fail(format!("open: {e}")))?;

    let info = info_of(t);
    prop_assert_eq!(d.info.header.info_mask, info.section_mask());
    let mut back = d.info.clone();
    back.header.info_mask = info.header.info_mask;
    prop_assert_eq!(&back, &info);

    prop_assert_eq!(&d.tasks, &task_lines(t));
    prop_assert_eq!(d.sessions.len(), t.sessions.len());
    for (got, (sid, s)) in d.sessions.iter().zip(&t.sessions) {
        prop_assert_eq!(&got.sid, sid);
        prop_assert_eq!(got.pid, s.pid);
        prop_assert_eq!(got.time, s.time);
        prop_assert_eq!(&got.exename, &s.exename);
        prop_assert_eq!(&got.maps, &s.maps);
    }

    let syms = d.read_sym("prog.sym").expect("prog.sym");
    prop_assert_eq!(syms.path_name.as_deref(), Some(t.sym_path.as_str()));
    prop_assert_eq!(&syms.build_id, &t.sym_build_id);
    prop_assert_eq!(&syms.symbols, &syms_read_back(&t.syms));

    let opts = Some(t.opts.clone()).filter(|o| !o.trim().is_empty());
    prop_assert_eq!(&d.default_opts, &opts);

    let tids: Vec<u32> = d.data.iter().map(|f| f.tid).collect();
    prop_assert_eq!(&tids, &info.tids);
    for (f, recs) in d.data.iter().zip(t.tasks.values()) {
        let got = walk(f.bytes()).map_err(|e| TestCaseError::fail(format!("{}: {e}", f.tid)))?;
        let want: Vec<ReadRecord> = recs.iter().map(read_back).collect();
        prop_assert_eq!(got, want, "tid {}", f.tid);
    }
    Ok(())
}

// --- damage ---------------------------------------------------------------------------------

#[derive(Debug, Clone)]
enum Damage {
    Flip(Index, Vec<(Index, u8)>),
    Truncate(Index, Index),
    Replace(Index, Vec<u8>),
    Append(Index, Vec<u8>),
    Delete(Index),
    /// Replaced by [`SPECIALS`]`[n]`.
    Special(Index, usize),
}

/// What a file can be replaced with; the last one (a dangling symlink) reads as a missing file.
const SPECIALS: [&str; 5] = ["/dev/zero", "/dev/urandom", "fifo", "dir", "dangling"];

fn make_special(path: &Path, special: &str) {
    if path.is_dir() {
        fs::remove_dir_all(path).expect("remove dir");
    } else {
        fs::remove_file(path).expect("remove");
    }
    match special {
        "fifo" => {
            let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).expect("path");
            // SAFETY: `c` is a NUL-terminated path that outlives the call.
            assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo");
        }
        "dir" => fs::create_dir(path).expect("mkdir"),
        "dangling" => std::os::unix::fs::symlink("/nonexistent/file", path).expect("symlink"),
        dev => std::os::unix::fs::symlink(dev, path).expect("symlink"),
    }
}

/// Runs `f` on a thread of its own; a run that does not end within a minute is a hang.
fn within_deadline<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)));
    });
    match rx.recv_timeout(Duration::from_secs(60)) {
        Ok(Ok(v)) => v,
        Ok(Err(panic)) => std::panic::resume_unwind(panic),
        Err(_) => panic!("{what} hung"),
    }
}

fn damage() -> impl Strategy<Value = Damage> {
    let bytes = || proptest::collection::vec(any::<u8>(), 0..200);
    prop_oneof![
        4 => (any::<Index>(), proptest::collection::vec((any::<Index>(), 1u8..), 1..8))
            .prop_map(|(f, at)| Damage::Flip(f, at)),
        2 => (any::<Index>(), any::<Index>()).prop_map(|(f, at)| Damage::Truncate(f, at)),
        1 => (any::<Index>(), bytes()).prop_map(|(f, b)| Damage::Replace(f, b)),
        1 => (any::<Index>(), bytes()).prop_map(|(f, b)| Damage::Append(f, b)),
        1 => any::<Index>().prop_map(Damage::Delete),
        2 => (any::<Index>(), 0..SPECIALS.len()).prop_map(|(f, k)| Damage::Special(f, k)),
    ]
}

fn apply(dir: &Path, d: &Damage) {
    let mut names: Vec<_> = fs::read_dir(dir)
        .expect("read_dir")
        .map(|e| e.expect("entry").path())
        .collect();
    if names.is_empty() {
        return;
    }
    names.sort();
    let (Damage::Flip(f, _)
    | Damage::Truncate(f, _)
    | Damage::Replace(f, _)
    | Damage::Append(f, _)
    | Damage::Delete(f)
    | Damage::Special(f, _)) = d;
    let path = &names[f.index(names.len())];
    if let Damage::Special(_, k) = d {
        make_special(path, SPECIALS[*k]);
        return;
    }
    if !fs::symlink_metadata(path).is_ok_and(|m| m.is_file()) {
        return; // already replaced by a special file
    }
    let mut bytes = fs::read(path).expect("read");
    match d {
        Damage::Flip(_, at) => {
            if !bytes.is_empty() {
                for (i, x) in at {
                    let n = bytes.len();
                    bytes[i.index(n)] ^= x;
                }
            }
        }
        Damage::Truncate(_, at) => bytes.truncate(at.index(bytes.len() + 1)),
        Damage::Replace(_, b) => bytes.clone_from(b),
        Damage::Append(_, b) => bytes.extend_from_slice(b),
        Damage::Delete(_) => {
            fs::remove_file(path).expect("remove");
            return;
        }
        Damage::Special(..) => unreachable!("made above"),
    }
    fs::write(path, bytes).expect("write");
}

/// Everything a reader does with a directory; any outcome but a panic is fine.
fn read_everything(path: &Path) {
    for entry in fs::read_dir(path).expect("read_dir") {
        let file = entry.expect("entry").path();
        let Ok(b) = record_format::file::read_regular(&file, 1 << 20) else {
            continue;
        };
        let text = String::from_utf8_lossy(&b);
        let _ = task::parse_task_txt(&text, &file);
        let _ = maps::parse_maps(&text);
        let _ = sym::parse_sym(&text);
    }
    if let Ok(b) = record_format::file::read_regular(&path.join("info"), 1 << 20) {
        if let Ok(info) = Info::parse(&b, Path::new("info")) {
            if let Some(spec) = info.argspec.and_then(|a| a.argspec) {
                let _ = argspec::parse_spec_list(&spec, 8, |_| {});
            }
        }
    }
    let Ok(d) = TraceDir::open(path) else { return };
    for f in &d.data {
        let _ = walk(f.bytes());
    }
    for s in &d.sessions {
        let _ = maps::kernel_base(&s.maps);
    }
    let _ = d.read_sym("prog.sym");
    let _ = d.read_text("default.opts");
    let _ = d.long_size();
    let _ = d.take_warnings();
}

/// Opens `path` and reads every optional file; returns the error or the warnings, and whether
/// the directory held no data (the optional files are then not read).
fn open_and_read_all(path: &Path) -> (Vec<String>, bool) {
    match TraceDir::open(path) {
        Ok(d) => {
            let _ = d.read_sym("prog.sym");
            (d.take_warnings(), false)
        }
        Err(FormatError::NoData { warnings, .. }) => (warnings, true),
        Err(e) => (vec![e.to_string()], false),
    }
}

// --- the properties -------------------------------------------------------------------------

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn write_then_read_round_trips(t in trace()) {
        check_round_trip(&t)?;
    }

    #[test]
    fn damaged_directory_never_panics(t in trace(), damages in proptest::collection::vec(damage(), 1..4)) {
        let tmp = tempfile::tempdir().expect("tempdir");
        let path = tmp.path().join("t.data");
        write_trace(&t, &path);
        for d in &damages {
            apply(&path, d);
        }
        within_deadline("reading a damaged directory", move || {
            read_everything(&path);
            drop(tmp);
        });
    }

    #[test]
    fn special_file_is_named(t in trace(), which in any::<Index>(), kind in 0..SPECIALS.len() - 1) {
        let tmp = tempfile::tempdir().expect("tempdir");
        let path = tmp.path().join("t.data");
        write_trace(&t, &path);
        let mut names: Vec<_> = fs::read_dir(&path)
            .expect("read_dir")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        let name = names[which.index(names.len())].clone();
        make_special(&path.join(&name), SPECIALS[kind]);
        let (said, no_data) = within_deadline("reading a special file", move || {
            let said = open_and_read_all(&path);
            drop(tmp);
            said
        });
        // An empty `<tid>.dat` reads as no records however it is replaced; without records, the
        // optional files are not read.
        let empty_dat = name.ends_with(".dat")
            && t.tasks.iter().any(|(tid, r)| r.is_empty() && name == format!("{tid}.dat"));
        let unread = no_data && !name.ends_with(".dat");
        prop_assert!(
            empty_dat || unread || said.iter().any(|m| m.contains(&name)),
            "{} as {}: {:?}", name, SPECIALS[kind], said
        );
    }
}

/// `syms` as a `.sym` file gives them back: a symbol followed by the next one within its
/// alignment padding (16 bytes) gets no end marker, so its size reaches the next one.
fn syms_read_back(syms: &[record_format::sym::Symbol]) -> Vec<record_format::sym::Symbol> {
    let mut out = syms.to_vec();
    for i in 0..out.len().saturating_sub(1) {
        let (s, n) = (&out[i], &out[i + 1]);
        let end = s.addr + s.size;
        let switch = n.is_plt() != s.is_plt() || n.is_function() != s.is_function();
        if !switch && n.addr > end && n.addr <= end.next_multiple_of(16) {
            out[i].size = n.addr - s.addr;
        }
    }
    out
}
