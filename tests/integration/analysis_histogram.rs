//! `utrace report --histogram FUNC` on data written with record-format's `TraceWriter`, so the
//! durations are known exactly: the log2 buckets, counts and bars of BCC's `funclatency`.

use crate::crafted::{self, Program};
use crate::util;
use record_format::RecordKind;
use std::path::Path;
use std::process::Command;

/// `/nonexistent/histo`: `main`, `work`, `other`.
const HISTO: Program = Program {
    exe: "/nonexistent/histo",
    tid: 4343,
    sid: "fedcba9876543210",
    t0: 2_000_000_000_000,
    funcs: &[(0x1100, "main"), (0x1140, "work"), (0x1180, "other")],
};

/// A one-thread directory: `main` calls `work` once per duration (and `other` once).
fn write_dir(dir: &Path, durations: &[u64]) {
    use RecordKind::{Entry, Exit};
    let mut recs = Vec::new();
    let mut now = 100;
    recs.push((Entry, now, 0, 0));
    for &d in durations {
        now += 10;
        recs.push((Entry, now, 1, 1));
        now += d;
        recs.push((Exit, now, 1, 1));
    }
    recs.push((Entry, now + 5, 1, 2));
    recs.push((Exit, now + 100_000, 1, 2));
    recs.push((Exit, now + 100_010, 0, 0));
    crafted::write_dir(dir, &HISTO, &recs);
}

fn histogram(dir: &Path, func: &str) -> util::Output {
    let mut cmd = Command::new(util::utrace_bin());
    cmd.arg("report")
        .arg("--no-pager")
        .arg("-d")
        .arg(dir)
        .arg("--histogram")
        .arg(func);
    util::run(cmd)
}

#[test]
fn buckets_counts_and_bars() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("data");
    // 1 ns -> bucket 0..1; 2, 3 -> 2..3; 5 -> 4..7; 700 x4 -> 512..1023; 1500 -> 1024..2047.
    write_dir(&dir, &[1, 2, 3, 5, 700, 700, 700, 700, 1500]);
    let out = histogram(&dir, "work");
    out.assert_success();
    let want = [
        "     nsecs               : count     distribution",
        "         0 -> 1          : 1        |**********                              |",
        "         2 -> 3          : 2        |********************                    |",
        "         4 -> 7          : 1        |**********                              |",
        "         8 -> 15         : 0        |                                        |",
        "        16 -> 31         : 0        |                                        |",
        "        32 -> 63         : 0        |                                        |",
        "        64 -> 127        : 0        |                                        |",
        "       128 -> 255        : 0        |                                        |",
        "       256 -> 511        : 0        |                                        |",
        "       512 -> 1023       : 4        |****************************************|",
        "      1024 -> 2047       : 1        |**********                              |",
        "",
        "avg = 479 nsecs, total: 4311 nsecs, count: 9",
    ]
    .join("\n")
        + "\n";
    assert_eq!(out.stdout, want, "{out}");
}

#[test]
fn other_function_and_patterns() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("data");
    write_dir(&dir, &[10, 20]);
    // `other` runs 99995 ns: one call in the 65536 -> 131071 bucket, the last line.
    let out = histogram(&dir, "other");
    out.assert_success();
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(lines.len(), 1 + 17 + 2, "{out}");
    assert_eq!(
        lines[17],
        "     65536 -> 131071     : 1        |****************************************|"
    );
    // A regex pattern selects both functions: 3 calls.
    let out = histogram(&dir, "^(work|other)$");
    assert!(out.stdout.contains("count: 3"), "{out}");
    // Filters apply: with -N main nothing is left.
    let mut cmd = Command::new(util::utrace_bin());
    cmd.args([
        "report",
        "--no-pager",
        "-N",
        "main",
        "--histogram",
        "work",
        "-d",
    ])
    .arg(&dir);
    let out = util::run(cmd);
    out.assert_success();
    assert_eq!(out.stdout, "utrace: no finished calls of 'work'\n", "{out}");
}
