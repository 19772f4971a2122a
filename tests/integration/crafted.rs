//! Data directories written with record-format's `TraceWriter` (no program runs): cases that
//! are hard to provoke for real, such as lost records, checked against uftrace's replay of the
//! very same directory.

use crate::normalize;
use crate::util;
use record_format::info::{feat, Info, InfoHeader};
use record_format::maps::MapEntry;
use record_format::sym::Symbol;
use record_format::task::TaskLine;
use record_format::{RawRecord, RecordKind, TraceWriter};
use std::path::Path;

const BASE: u64 = 0x5555_5555_4000;
const TID: u32 = 4242;

fn sym(addr: u64, name: &str) -> Symbol {
    Symbol {
        addr,
        size: 0x40,
        kind: 'T',
        name: name.into(),
    }
}

/// Writes a one-thread directory with functions main/a/b/c and the given records
/// (kind, time, depth, function index).
fn write_dir(dir: &Path, records: &[(RecordKind, u64, u16, usize)]) {
    let exe = "/nonexistent/prog";
    let mut w = TraceWriter::create(dir).unwrap();
    let t0 = 1_000_000_000_000;
    w.task_line(&TaskLine::Sess {
        time: t0,
        pid: TID,
        sid: "0123456789abcdef".into(),
        exename: exe.into(),
    })
    .unwrap();
    w.task_line(&TaskLine::Task {
        time: t0 + 1,
        tid: TID,
        pid: TID,
    })
    .unwrap();
    w.session_map(
        "0123456789abcdef",
        &[
            MapEntry {
                start: BASE,
                end: BASE + 0x5000,
                perms: "r-xp".into(),
                path: exe.into(),
                build_id: None,
            },
            MapEntry {
                start: 0x7ffc_0000_0000,
                end: 0x7ffc_0002_1000,
                perms: "rw-p".into(),
                path: "[stack]".into(),
                build_id: None,
            },
        ],
    )
    .unwrap();
    let funcs = [0x1100, 0x1140, 0x1180, 0x11c0];
    let names = ["main", "a", "b", "c"];
    let syms: Vec<Symbol> = funcs.iter().zip(names).map(|(&a, n)| sym(a, n)).collect();
    w.sym_file("prog.sym", exe, None, &syms).unwrap();
    for &(kind, time, depth, f) in records {
        match kind {
            RecordKind::Lost => w.lost_record(TID, time).unwrap(),
            _ => {
                let rec = RawRecord {
                    time: t0 + time,
                    kind,
                    more: false,
                    depth,
                    addr: BASE + funcs[f] + 8,
                };
                w.func_record(TID, rec, &[], &[]).unwrap();
            }
        }
    }
    let info = Info {
        header: InfoHeader {
            feat_mask: feat::TASK_SESSION | feat::SYM_REL_ADDR | feat::MAX_STACK,
            ..InfoHeader::default()
        },
        exename: Some(exe.into()),
        tids: vec![TID],
        ..Info::default()
    };
    w.finish(&info).unwrap();
}

fn compare(name: &str, records: &[(RecordKind, u64, u16, usize)], opts: &[&str], must: &str) {
    if !util::need_uftrace(name) {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("data");
    write_dir(&dir, records);
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
