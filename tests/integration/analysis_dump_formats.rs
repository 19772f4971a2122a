//! `utrace dump` output checked on its own (no uftrace needed; the fixtures of `tests/fixtures`):
//!
//! * `chrome_*`: the JSON parsed with serde_json: balanced B/E per thread, names, metadata,
//!   arguments and return values;
//! * `svg_*`: `--flame-graph --svg` parsed: one frame per call path, sample counts and widths
//!   proportional to the folded weights;
//! * `--tid` in the raw dump; missing or broken data (warnings or one-line errors, never a
//!   panic); `--kernel` refused.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use crate::analysis_dump::{fixture_dir, utrace_dump, Format, ALL};
/// `--tid` shows one task's records; the other task files are still listed (raw).
#[test]
fn tid_filter_keeps_file_headings() {
    let dir = fixture_dir("thread");
    let all = utrace_dump(&dir, Format::Raw, &[]);
    all.assert_success();
    let tids: Vec<&str> = all
        .stdout
        .lines()
        .filter_map(|l| l.strip_prefix("reading ")?.strip_suffix(".dat"))
        .collect();
    assert_eq!(tids.len(), 3, "{all}");
    let one = utrace_dump(&dir, Format::Raw, &["--tid", tids[1]]);
    one.assert_success();
    let headings = one
        .stdout
        .lines()
        .filter(|l| l.starts_with("reading "))
        .count();
    assert_eq!(headings, 3, "{one}");
    let records: Vec<&str> = one.stdout.lines().filter(|l| l.contains(": [")).collect();
    assert!(!records.is_empty(), "{one}");
    assert!(
        records
            .iter()
            .all(|l| l.contains(&format!(" {}: [", tids[1]))),
        "{one}"
    );
}

// ---------------------------------------------------------------------------------------
// Chrome JSON structure.

fn chrome_json(fixture: &str, opts: &[&str]) -> serde_json::Value {
    let out = utrace_dump(&fixture_dir(fixture), Format::Chrome, opts);
    out.assert_success();
    serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("invalid JSON ({e}):\n{out}"))
}

/// B/E events nest per (pid, tid) with matching names; returns the number of B events.
fn check_balanced(v: &serde_json::Value) -> usize {
    let events = v["traceEvents"].as_array().expect("traceEvents array");
    let mut stacks: HashMap<(i64, i64), Vec<String>> = HashMap::new();
    let mut begins = 0;
    let mut last_ts: HashMap<(i64, i64), f64> = HashMap::new();
    for e in events {
        let ph = e["ph"].as_str().expect("ph");
        let pid = e["pid"].as_i64().expect("pid");
        let tid = e["tid"].as_i64().unwrap_or(pid);
        let name = e["name"].as_str().expect("name").to_string();
        assert!(!name.is_empty(), "event without a name: {e}");
        if ph == "M" {
            continue;
        }
        let ts = e["ts"].as_f64().expect("ts");
        let last = last_ts.entry((pid, tid)).or_insert(0.0);
        assert!(ts >= *last, "time goes back on {pid}/{tid}: {e}");
        *last = ts;
        let stack = stacks.entry((pid, tid)).or_default();
        match ph {
            "B" => {
                begins += 1;
                stack.push(name);
            }
            // A fork child ends calls its parent began: an E without a B is allowed there.
            "E" => {
                if let Some(top) = stack.pop() {
                    assert_eq!(top, name, "E does not match the open B on {pid}/{tid}: {e}");
                }
            }
            other => panic!("unexpected phase {other}: {e}"),
        }
    }
    for ((pid, tid), stack) in &stacks {
        assert!(
            stack.is_empty(),
            "{pid}/{tid} ends with open calls {stack:?}"
        );
    }
    begins
}

#[test]
fn chrome_is_balanced_json_with_metadata() {
    // Not longjmp or exec: like uftrace's, their traces end calls that never began (the
    // exit of setjmp after a longjmp) or leave calls open (the program replaced by exec).
    for fixture in ["abc", "thread", "fork", "exit", "fib-args", "signal", "cxx"] {
        let v = chrome_json(fixture, &[]);
        assert!(check_balanced(&v) > 0, "{fixture}: no B events");
        assert_eq!(v["displayTimeUnit"], "ns", "{fixture}");
        let meta = &v["metadata"];
        assert!(meta["version"].as_str().unwrap().starts_with("utrace v"));
        assert!(meta["command_line"].as_str().unwrap().contains("record"));
        // Two metadata events per task, named "[TID] comm".
        let names: Vec<&str> = v["traceEvents"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["ph"] == "M")
            .map(|e| e["args"]["name"].as_str().unwrap())
            .collect();
        // process_name and thread_name of a task carry the same label.
        assert!(
            !names.is_empty() && names.chunks(2).all(|c| c.len() == 2 && c[0] == c[1]),
            "{fixture}: {names:?}"
        );
        assert!(names.iter().all(|n| n.starts_with('[')), "{names:?}");
    }
}

#[test]
fn chrome_threads_have_pid_and_tid() {
    let v = chrome_json("thread", &[]);
    let events = v["traceEvents"].as_array().unwrap();
    let workers: Vec<&serde_json::Value> = events
        .iter()
        .filter(|e| e["name"] == "worker" && e["ph"] == "B")
        .collect();
    assert_eq!(workers.len(), 2);
    for w in workers {
        assert_ne!(w["pid"], w["tid"], "a thread names its process: {w}");
    }
    let main = events
        .iter()
        .find(|e| e["name"] == "main" && e["ph"] == "B")
        .unwrap();
    assert!(
        main.get("tid").is_none(),
        "the main thread has only a pid: {main}"
    );
}

#[test]
fn chrome_carries_arguments_and_return_values() {
    let v = chrome_json("fib-args", &[]);
    let events = v["traceEvents"].as_array().unwrap();
    let fibs: Vec<&serde_json::Value> = events.iter().filter(|e| e["name"] == "fib").collect();
    assert!(!fibs.is_empty());
    for e in &fibs {
        match e["ph"].as_str().unwrap() {
            "B" => {
                let a = e["args"]["arguments"].as_str().expect("arguments");
                assert!(a.starts_with('(') && a.ends_with(')'), "{e}");
            }
            _ => {
                let r = e["args"]["retval"].as_str().expect("retval");
                r.parse::<i64>()
                    .unwrap_or_else(|_| panic!("retval not a number: {e}"));
            }
        }
    }
    assert_eq!(fibs[0]["args"]["arguments"], "(5)");
    let no_args = chrome_json("fib-args", &["--no-args"]);
    assert!(no_args["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .all(|e| e["ph"] == "M" || e.get("args").is_none()));
}

// ---------------------------------------------------------------------------------------
// SVG flame graph.

/// One `<g>` frame of inferno's SVG: name, sample count, width in percent.
#[derive(Debug)]
struct Frame {
    name: String,
    samples: u64,
    width: f64,
}

fn attr<'a>(tag: &'a str, name: &str) -> Option<&'a str> {
    let at = tag.find(&format!(" {name}=\""))? + name.len() + 3;
    let rest = &tag[at..];
    Some(&rest[..rest.find('"')?])
}

fn svg_frames(svg: &str) -> Vec<Frame> {
    let mut frames = Vec::new();
    for part in svg.split("<g><title>").skip(1) {
        let title = &part[..part.find("</title>").expect("title end")];
        let open = title.rfind(" (").expect("title has a count");
        let name = title[..open].to_string();
        let samples: u64 = title[open + 2..]
            .split(' ')
            .next()
            .unwrap()
            .replace(',', "")
            .parse()
            .expect("sample count");
        let rect = &part[part.find("<rect").expect("rect")..];
        let rect = &rect[..rect.find("/>").expect("rect end")];
        let width: f64 = attr(rect, "width")
            .expect("width")
            .trim_end_matches('%')
            .parse()
            .expect("width number");
        frames.push(Frame {
            name: name
                .replace("&lt;", "<")
                .replace("&gt;", ">")
                .replace("&amp;", "&"),
            samples,
            width,
        });
    }
    frames
}

/// The frames a folded profile draws: for every distinct path prefix, its last name and the
/// sum of the weights below it.
fn expected_frames(folded: &str) -> (Vec<(String, u64)>, u64) {
    let mut sums: HashMap<String, (String, u64)> = HashMap::new();
    let mut total = 0;
    for line in folded.lines() {
        let (path, w) = line.rsplit_once(' ').expect("folded line");
        let w: u64 = w.parse().expect("weight");
        total += w;
        let parts: Vec<&str> = path.split(';').collect();
        for i in 0..parts.len() {
            let key = parts[..=i].join(";");
            sums.entry(key)
                .or_insert_with(|| (parts[i].to_string(), 0))
                .1 += w;
        }
    }
    let mut v: Vec<(String, u64)> = sums.into_values().collect();
    v.sort();
    (v, total)
}

fn check_svg(fixture: &str, opts: &[&str]) {
    let dir = fixture_dir(fixture);
    let folded = utrace_dump(&dir, Format::Flame, opts);
    folded.assert_success();
    let mut svg_opts = vec!["--svg"];
    svg_opts.extend_from_slice(opts);
    let svg = utrace_dump(&dir, Format::Flame, &svg_opts);
    svg.assert_success();
    assert!(svg.stdout.starts_with("<?xml"), "{svg}");
    assert!(
        svg.stdout.trim_end().ends_with("</svg>"),
        "not a complete SVG"
    );
    let (want, total) = expected_frames(&folded.stdout);
    assert!(total > 0, "{fixture}: empty profile\n{folded}");
    let frames = svg_frames(&svg.stdout);
    let all = frames
        .iter()
        .find(|f| f.name == "all")
        .expect("the root frame");
    assert_eq!(all.samples, total);
    let mut got: Vec<(String, u64)> = frames
        .iter()
        .filter(|f| f.name != "all")
        .map(|f| (f.name.clone(), f.samples))
        .collect();
    got.sort();
    assert_eq!(got, want, "{fixture}: frames differ from the folded stacks");
    for f in &frames {
        let expect = f.samples as f64 * 100.0 / total as f64;
        assert!(
            (f.width - expect).abs() < 0.001,
            "{fixture}: frame {} is {}% wide for {} of {total} samples",
            f.name,
            f.width,
            f.samples
        );
    }
}

#[test]
fn svg_frames_follow_folded_weights() {
    check_svg("fib-args", &[]);
    check_svg("fib-args", &["--sample-time=100ns"]);
    check_svg("thread", &[]);
    check_svg("fork", &["--sample-time=100ns"]);
}

/// Bad data gives a one-line error, no panic and uftrace's status.
#[test]
fn missing_data_is_an_error() {
    let tmp = tempfile::tempdir().expect("tempdir");
    for format in ALL {
        let out = utrace_dump(&tmp.path().join("none"), format, &[]);
        assert_eq!(out.status.code(), Some(255), "{out}");
        assert!(out.stderr.contains("cannot open record data"), "{out}");
        assert!(!out.stderr.contains("panicked"), "{out}");
    }
}

/// A truncated or garbled task file ends that task with a warning; a damaged `info` is a
/// one-line error with status 1. Never a panic.
#[test]
fn broken_data_gives_warnings_not_panics() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let copy = |name: &str| -> PathBuf {
        let dst = tmp.path().join(name);
        std::fs::create_dir_all(&dst).expect("mkdir");
        for e in std::fs::read_dir(fixture_dir(name)).expect("fixture") {
            let e = e.expect("entry");
            std::fs::copy(e.path(), dst.join(e.file_name())).expect("copy");
        }
        dst
    };
    let dat = |dir: &Path| -> PathBuf {
        std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| p.extension().is_some_and(|x| x == "dat"))
            .expect("a .dat file")
    };
    let truncated = copy("fib-args");
    let f = dat(&truncated);
    let bytes = std::fs::read(&f).unwrap();
    std::fs::write(&f, &bytes[..100]).unwrap();
    let garbled = copy("abc");
    std::fs::write(dat(&garbled), b"garbage!garbage!garbage!").unwrap();
    let bad_info = copy("thread");
    let info = std::fs::read(bad_info.join("info")).unwrap();
    std::fs::write(bad_info.join("info"), &info[..30]).unwrap();
    for format in ALL {
        for (dir, status, message) in [
            (&truncated, 0, ".dat is truncated at offset"),
            (&garbled, 0, "WARN: invalid record"),
            (&bad_info, 1, "ERROR:"),
        ] {
            let out = utrace_dump(dir, format, &[]);
            assert!(!out.stderr.contains("panicked"), "{out}");
            assert_eq!(out.status.code(), Some(status), "{out}");
            assert!(out.stderr.contains(message), "{out}");
        }
    }
}

#[test]
fn kernel_options_on_user_data_change_nothing() {
    // As with uftrace: the kernel view options only matter when the data has kernel records.
    let plain = utrace_dump(&fixture_dir("abc"), Format::Raw, &[]);
    assert_eq!(plain.status.code(), Some(0), "{plain}");
    for opt in ["--kernel", "-k", "--kernel-only", "--kernel-full"] {
        let out = utrace_dump(&fixture_dir("abc"), Format::Raw, &[opt]);
        assert_eq!(out.status.code(), Some(0), "{out}");
        assert_eq!(out.stdout, plain.stdout, "{opt}");
    }
}
