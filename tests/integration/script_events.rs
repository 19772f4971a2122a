//! Where user events show, in `script` and `replay`, against uftrace 0.13 on the same data:
//! an event shows only inside a call entered in the data, so not at the top level, nor inside
//! a call entered before `-r`'s start (also when the event lies exactly at the range's
//! edge), nor only inside calls `-Z` hides; `replay` also leaves out the events below the
//! `-D` depth, a script gets them; a library call `--no-libcall` hides leaves no trace on the
//! events after it. A Python script gets an event without data with an empty `args` string
//! (Lua: none).

use crate::util::{self, Mode};
use std::path::Path;
use std::process::Command;

const TREE_PY: &str = r#"
def uftrace_entry(ctx):
    print("entry", ctx["depth"], ctx["name"])
def uftrace_exit(ctx):
    print("exit", ctx["depth"], ctx["name"])
def uftrace_event(ctx):
    print("event", ctx["name"], repr(ctx.get("args")), ctx["timestamp"])
"#;

const TREE_LUA: &str = r#"
function uftrace_entry(ctx) print("entry", ctx.depth, ctx.name) end
function uftrace_exit(ctx) print("exit", ctx.depth, ctx.name) end
function uftrace_event(ctx) print("event", ctx.name, ctx.args, ctx.timestamp) end
"#;

/// Nanoseconds of a `-f time` timestamp (`75603.830214217`).
fn ns(text: &str) -> u64 {
    let (s, n) = text.trim().split_once('.').expect("a timestamp");
    s.parse::<u64>().unwrap() * 1_000_000_000 + n.parse::<u64>().unwrap()
}

/// A timestamp as `-r` takes it.
fn at(ns: u64) -> String {
    format!("{}.{:09}", ns / 1_000_000_000, ns % 1_000_000_000)
}

/// The times of the lines of `utrace replay -f time` of `data` whose text ends with `what`.
fn times_of(data: &Path, what: &str) -> Vec<u64> {
    let out = util::utrace_replay(data, &["-f", "time"]);
    let times: Vec<u64> = out
        .stdout
        .lines()
        .filter_map(|l| {
            let (time, text) = l.split_once('|')?;
            text.trim_end().ends_with(what).then(|| ns(time))
        })
        .collect();
    assert!(!times.is_empty(), "no `{what}` in\n{out}");
    times
}

/// `TOOL CMD -d DATA OPTS...` (with `-S FILE` for a script).
fn run(uftrace: bool, cmd: &str, data: &Path, opts: &[String], file: Option<&str>) -> util::Output {
    let bin = if uftrace {
        util::uftrace_bin()
    } else {
        util::utrace_bin()
    };
    let mut c = Command::new(bin);
    c.arg(cmd).arg("-d").arg(data).args(opts);
    match file {
        Some(f) => c.args(["-S", f]),
        None => c.args(["--no-pager", "-f", "none"]),
    };
    util::run(c)
}

/// Compares both tools' scripts and replays of `data` with each option list of `cases`.
fn compare(data: &Path, scripts: &[&str], cases: &[Vec<String>], failures: &mut Vec<String>) {
    for opts in cases {
        let files = scripts.iter().map(|f| Some(*f)).chain([None]);
        for file in files {
            let cmd = if file.is_some() { "script" } else { "replay" };
            let want = run(true, cmd, data, opts, file);
            let got = run(false, cmd, data, opts, file);
            if !got.status.success() || got.stdout != want.stdout {
                failures.push(format!(
                    "{cmd} {opts:?} {file:?} of {} (- uftrace, + utrace):\n{}\n{got}",
                    data.display(),
                    crate::normalize::diff(&want.stdout, &got.stdout)
                ));
            }
        }
    }
}

fn opts(words: &[&str]) -> Vec<String> {
    words.iter().map(|w| w.to_string()).collect()
}

#[test]
fn events_at_the_data_edges_match_uftrace() {
    if !util::need_uftrace("events_at_the_data_edges_match_uftrace") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let py = tmp.path().join("tree.py");
    std::fs::write(&py, TREE_PY).unwrap();
    let lua = tmp.path().join("tree.lua");
    std::fs::write(&lua, TREE_LUA).unwrap();
    let scripts = [py.to_str().unwrap(), lua.to_str().unwrap()];
    let mut failures = Vec::new();

    // SDT probes inside work(), without data.
    let sdt = tmp.path().join("sdt.data");
    let exe = util::testprog("sdt", Mode::Pg);
    let probes = ["-E", "myapp:work_start", "-E", "myapp:work_end"];
    util::record_with(false, &sdt, &exe, &[], &probes).assert_success();
    let work = times_of(&sdt, "work() {")[0];
    let start = times_of(&sdt, "/* myapp:work_start */")[0];
    let end = times_of(&sdt, "/* myapp:work_end */")[0];
    let mut cases = vec![
        opts(&[]),
        opts(&["-D", "1"]),
        opts(&["-D", "2"]),
        opts(&["-Z", "1000"]),
    ];
    for r in [
        format!("{}~", at(work + 1)),
        format!("{}~", at(start)),
        format!("{}~", at(start + 1)),
        format!("~{}", at(start)),
        format!("~{}", at(end - 1)),
        format!("{}~{}", at(start), at(end)),
        format!("{}~{}", at(work), at(start)),
    ] {
        cases.push(opts(&["-r", &r]));
    }
    compare(&sdt, &scripts, &cases, &mut failures);

    // read:/diff: events at a()'s entry and exit, at the same times.
    let abc = tmp.path().join("abc.data");
    let exe = util::testprog("abc", Mode::Pg);
    util::record_with(false, &abc, &exe, &[], &["-T", "a@read=proc/statm"]).assert_success();
    let a = times_of(&abc, "a() {")[0];
    let diff = times_of(&abc, "} /* a */")[0];
    let mut cases = vec![opts(&["-D", "1"]), opts(&["-Z", "1000"])];
    for r in [
        format!("{}~", at(a)),
        format!("{}~", at(a + 1)),
        format!("{}~", at(diff)),
        format!("~{}", at(diff)),
        format!("~{}", at(a)),
    ] {
        cases.push(opts(&["-r", &r]));
    }
    compare(&abc, &scripts, &cases, &mut failures);

    // The diff: event at c()'s exit, right after the library call getpid() that
    // `--no-libcall` hides.
    let libcall = tmp.path().join("libcall.data");
    util::record_with(false, &libcall, &exe, &[], &["-T", "c@read=proc/statm"]).assert_success();
    let cases = [opts(&["--no-libcall"]), opts(&["--no-libcall", "-D", "3"])];
    compare(&libcall, &scripts, &cases, &mut failures);
    util::assert_no_failures(&failures);
}
