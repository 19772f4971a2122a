//! External data (`extern.dat`, lines of `<seconds>.<fraction> <message>` a user adds to a
//! data directory) in `replay`: each line shows as `/* external-data: MESSAGE */` where
//! uftrace 0.13 shows it. Placed at chosen points of a recording (before the first record, at
//! its time, inside a leaf call, just after a thread's last record, at and after the last
//! record), then replayed with time fields, `-r` ranges (absolute and elapsed), `--flat` and
//! filters, by both tools on the same directory; the outputs must be the same.

use std::path::Path;

use crate::util::{self, Mode};

/// The times of the records of `dir`, in order, with their tids (`uftrace dump` lines).
fn record_times(dir: &Path) -> Vec<(u64, String)> {
    let mut cmd = std::process::Command::new(util::uftrace_bin());
    cmd.args(["dump", "--no-pager", "-d"]).arg(dir);
    let out = util::run(cmd);
    out.assert_success();
    let mut times: Vec<(u64, String)> = out
        .stdout
        .lines()
        .filter_map(|l| {
            let mut words = l.split_whitespace();
            let (sec, frac) = words.next()?.split_once('.')?;
            let tid = words.next()?.trim_end_matches(':').to_string();
            let ns = sec.parse::<u64>().ok()? * 1_000_000_000 + frac.parse::<u64>().ok()?;
            Some((ns, tid))
        })
        .collect();
    times.sort();
    times
}

fn stamp(ns: u64) -> String {
    format!("{}.{:09}", ns / 1_000_000_000, ns % 1_000_000_000)
}

/// Writes `extern.dat` lines at the chosen points of `times` and returns the `-r` ranges
/// cutting through them.
fn place_lines(dir: &Path, times: &[(u64, String)]) -> Vec<String> {
    let (first, last) = (times[0].0, times[times.len() - 1].0);
    let mid = times[times.len() / 2].0;
    let mut lines = vec![
        (first - 1000, "before the first record".to_string()),
        (first, "at the first record".to_string()),
        (mid + 1, "just after a record in the middle".to_string()),
        (last, "at the last record".to_string()),
        (last + 1000, "after the last record".to_string()),
    ];
    // Between two records of the same task, a few times over the trace.
    for (i, w) in times.windows(2).enumerate().step_by(times.len() / 7 + 1) {
        if w[1].0 > w[0].0 + 1 {
            lines.push((w[0].0 + 1, format!("between records {i}")));
        }
    }
    // Just after each thread's last record.
    let mut tids: Vec<&String> = times.iter().map(|t| &t.1).collect();
    tids.sort();
    tids.dedup();
    for tid in tids {
        let end = times.iter().rev().find(|t| &t.1 == tid).unwrap().0;
        lines.push((end + 1, format!("after the last record of {tid}")));
    }
    lines.sort();
    let text: String = lines
        .iter()
        .map(|(t, m)| format!("{} {m}\n", stamp(*t)))
        .collect();
    std::fs::write(dir.join("extern.dat"), text).unwrap();
    let at = |k: usize| times[times.len() * k / 8].0;
    vec![
        format!("~{}", stamp(mid)),
        format!("{}~{}", stamp(at(2)), stamp(at(6) + 1)),
        format!("~{}", elapsed(at(4) - first)),
        format!("{}~", elapsed(at(3) - first)),
    ]
}

/// An elapsed time as `-r` takes it (at most 3 digits before and after the point).
fn elapsed(ns: u64) -> String {
    if ns < 1_000_000 {
        format!("{}us", ns / 1000)
    } else {
        format!("{}.{:03}ms", ns / 1_000_000, ns / 1000 % 1000)
    }
}

fn compare(dir: &Path, failures: &mut Vec<String>) {
    let times = record_times(dir);
    assert!(times.len() > 10, "{times:?}");
    let ranges = place_lines(dir, &times);
    let mut cases: Vec<Vec<String>> = [
        &[][..],
        &["-f", "time"],
        &["-f", "elapsed"],
        &["--flat"],
        &["-F", "main", "-N", "atoi"],
        &["-F", "fib"],
        &["--no-merge"],
    ]
    .iter()
    .map(|c| c.iter().map(|s| s.to_string()).collect())
    .collect();
    for r in &ranges {
        cases.push(vec![
            "-f".into(),
            "time,elapsed".into(),
            "-r".into(),
            r.clone(),
        ]);
    }
    for case in cases {
        let opts: Vec<&str> = case.iter().map(String::as_str).collect();
        let theirs = util::uftrace_replay(dir, &opts);
        let ours = util::utrace_replay(dir, &[&["--tid-width=6"][..], &opts].concat());
        ours.assert_success();
        assert!(
            ours.stdout.contains("external-data") || opts.contains(&"-F") || opts.contains(&"-r"),
            "{opts:?}: no external data shown:\n{ours}"
        );
        if ours.stdout != theirs.stdout {
            failures.push(format!(
                "{} replay {opts:?} (- uftrace, + utrace):\n{}",
                dir.display(),
                crate::normalize::diff(&theirs.stdout, &ours.stdout)
            ));
        }
    }
}

#[test]
fn external_data_shows_where_uftrace_shows_it() {
    if !util::need_uftrace("external_data_shows_where_uftrace_shows_it") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let mut failures = Vec::new();
    for (prog, args) in [("fib", &["6"][..]), ("thread", &[])] {
        let exe = util::testprog(prog, Mode::Pg);
        let theirs = tmp.path().join(format!("{prog}.uftrace"));
        util::uftrace_record(&theirs, &["--no-libcall"], &exe, args);
        compare(&theirs, &mut failures);
        let ours = tmp.path().join(format!("{prog}.utrace"));
        util::record_with(false, &ours, &exe, args, &["--no-libcall"]).assert_success();
        compare(&ours, &mut failures);
    }
    util::assert_no_failures(&failures);
}
