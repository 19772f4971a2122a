//! Data directories written with record-format's `TraceWriter` (no program runs): cases that
//! are hard to provoke for real, such as lost records, checked against uftrace's replay of the
//! very same directory. [`write_dir`] is the one writer of such directories, also used by
//! `analysis_dump` and `analysis_histogram`.

use crate::normalize;
use crate::util;
use record_format::info::{feat, Info, InfoHeader};
use record_format::maps::MapEntry;
use record_format::sym::Symbol;
use record_format::task::TaskLine;
use record_format::{RawRecord, RecordKind, TraceWriter};
use std::path::Path;

/// Where the program is mapped.
const BASE: u64 = 0x5555_5555_4000;

/// The one-thread program of a crafted directory: its path (nothing is there), task, session
/// id, first timestamp and functions (offset in the program, name).
#[derive(Clone, Copy)]
pub(crate) struct Program {
    pub exe: &'static str,
    pub tid: u32,
    pub sid: &'static str,
    pub t0: u64,
    pub funcs: &'static [(u64, &'static str)],
}

/// `/nonexistent/prog` with functions main/a/b/c.
pub(crate) const PROG: Program = Program {
    exe: "/nonexistent/prog",
    tid: 4242,
    sid: "0123456789abcdef",
    t0: 1_000_000_000_000,
    funcs: &[
        (0x1100, "main"),
        (0x1140, "a"),
        (0x1180, "b"),
        (0x11c0, "c"),
    ],
};

/// A record of a crafted directory: kind, time after the first timestamp, depth and function
/// index; a LOST record carries its count as time.
pub(crate) type Rec = (RecordKind, u64, u16, usize);

/// Writes the data directory `dir` of `prog` with `records` (the one writer of crafted
/// directories: `.sym` file, session map with a stack, task.txt and info included).
pub(crate) fn write_dir(dir: &Path, prog: &Program, records: &[Rec]) {
    let exe = prog.exe;
    let tid = prog.tid;
    let t0 = prog.t0;
    let mut w = TraceWriter::create(dir).unwrap();
    w.task_line(&TaskLine::Sess {
        time: t0,
        pid: tid,
        sid: prog.sid.into(),
        exename: exe.into(),
    })
    .unwrap();
    w.task_line(&TaskLine::Task {
        time: t0 + 1,
        tid,
        pid: tid,
    })
    .unwrap();
    let map = |start, end, path: &str| MapEntry {
        start,
        end,
        perms: if path == exe { "r-xp" } else { "rw-p" }.into(),
        path: path.into(),
        build_id: None,
    };
    w.session_map(
        prog.sid,
        &[
            map(BASE, BASE + 0x5000, exe),
            map(0x7ffc_0000_0000, 0x7ffc_0002_1000, "[stack]"),
        ],
    )
    .unwrap();
    let syms: Vec<Symbol> = prog
        .funcs
        .iter()
        .map(|&(addr, name)| Symbol {
            addr,
            size: 0x40,
            kind: 'T',
            name: name.into(),
        })
        .collect();
    let base_name = exe.rsplit('/').next().unwrap_or(exe);
    w.sym_file(&format!("{base_name}.sym"), exe, None, &syms)
        .unwrap();
    for &(kind, time, depth, f) in records {
        if kind == RecordKind::Lost {
            w.lost_record(tid, time).unwrap();
            continue;
        }
        let rec = RawRecord {
            time: t0 + time,
            kind,
            more: false,
            depth,
            addr: BASE + prog.funcs[f].0 + 8,
        };
        w.func_record(tid, rec, &[], &[]).unwrap();
    }
    let info = Info {
        header: InfoHeader {
            feat_mask: feat::TASK_SESSION | feat::SYM_REL_ADDR | feat::MAX_STACK,
            ..InfoHeader::default()
        },
        exename: Some(exe.into()),
        tids: vec![tid],
        ..Info::default()
    };
    w.finish(&info).unwrap();
}

fn compare(name: &str, records: &[Rec], opts: &[&str], must: &str) {
    if !util::need_uftrace(name) {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("data");
    write_dir(&dir, &PROG, records);
    let expected = util::uftrace_replay(&dir, opts);
    let actual = util::utrace_replay(&dir, opts);
    assert_eq!(
        expected.status.code(),
        actual.status.code(),
        "{name}: exit status\n{actual}"
    );
    let want = normalize::whole(&expected.stdout);
    assert!(
        want.contains(must),
        "{name}: uftrace's output lacks {must:?}:\n{expected}"
    );
    let got = normalize::whole(&actual.stdout);
    assert_eq!(want, got, "{name}:\n{}", normalize::diff(&want, &got));
}

use RecordKind::{Entry as E, Exit as X, Lost as L};

/// A LOST record in the middle of a call: uftrace prints `/* LOST N records!! */` and
/// resynchronises its stack from the depth of the next record.
#[test]
fn lost_records() {
    let recs = [
        (E, 10, 0, 0),
        (E, 20, 1, 1),
        (E, 30, 2, 2),
        (L, 5, 0, 0),
        (E, 60, 2, 3),
        (X, 70, 2, 3),
        (X, 80, 1, 1),
        (X, 90, 0, 0),
    ];
    compare("lost_records", &recs, &[], "/* LOST 5 records!! */");
    compare(
        "lost_records",
        &recs,
        &["-D", "2"],
        "/* LOST 5 records!! */",
    );
}

/// Functions that never return (the program was killed): the remaining-functions block.
#[test]
fn unfinished_functions() {
    let recs = [
        (E, 10, 0, 0),
        (E, 20, 1, 1),
        (E, 30, 2, 2),
        (X, 40, 2, 2),
        (E, 50, 2, 3),
    ];
    compare("unfinished_functions", &recs, &[], "[2] c");
    compare("unfinished_functions", &recs, &["-F", "a"], "a() {");
}
