//! `utrace dump --perfetto`: the trace decoded with the protobuf definitions the `perfetto`
//! Python package ships (`perfetto.protos.perfetto.trace.perfetto_trace_pb2`, installed by
//! tests/setup.sh) and checked as Perfetto's trace processor reads it (the decoder below:
//! interned names per packet sequence after a cleared incremental state, every event on a
//! described thread track, ends matching begins, time never going back on a track, flows
//! chained by id), then compared with `utrace replay` of the same data:
//!
//! * slices per thread: depth, name, arguments and return value, as replay's lines;
//! * source locations (`--srcline`), thread states (the perf context switches), flows from
//!   each `pthread_create`/`fork` to the created task's first slice;
//! * `-k` (root and tracefs only): kernel functions nested under the user calls, with
//!   category `kernel`, kernel events as instants;
//! * refused on a terminal, with a one-line error.
//!
//! Without the Python package the tests print a line and pass, unless
//! `UTRACE_REQUIRE_UFTRACE=1` (CI), where that is a failure. The trace processor itself
//! (`trace_processor_shell`) is not in the package: its Python API downloads the prebuilt
//! binary from Perfetto's own storage at run time, which this machine and CI cannot reach, so
//! the decoder reproduces the rules it applies instead.

use std::collections::HashMap;
use std::path::Path;
use std::process::Command;

use serde_json::Value;

use crate::analysis_dump::fixture_dir;
use crate::util::{self, Mode};

/// Decodes a `--perfetto` file into JSON (`errors`, `tracks`, `threads` (slices per tid),
/// `instants`, `states`, `flows`), checking it as the trace processor would.
const DECODER: &str = r#"import json, sys
from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

TE = pb.TrackEvent
trace = pb.Trace()
trace.ParseFromString(open(sys.argv[1], "rb").read())
errors, tracks, seqs = [], {}, {}
threads, instants, states, last_ts = {}, {}, {}, {}
stacks, flows_open, flows = {}, {}, []
def link(n, te, here, strict):
    # Chains the flows of event `te` (packet n) at `here`; a flow ended at a slice begin or
    # an instant must have been started (strict).
    for f in te.flow_ids:
        if f in flows_open:
            flows.append([flows_open[f], here])
        flows_open[f] = here
    for f in te.terminating_flow_ids:
        if f in flows_open:
            flows.append([flows_open.pop(f), here])
        elif strict:
            errors.append(f"packet {n}: flow {f} ends without a start")
for n, p in enumerate(trace.packet):
    if p.HasField("track_descriptor"):
        d = p.track_descriptor
        t = {"pid": d.thread.pid, "tid": d.thread.tid, "name": d.thread.thread_name} if d.HasField("thread") else {"pid": d.process.pid, "name": d.process.process_name}
        tracks[d.uuid] = t
        continue
    if p.HasField("generic_kernel_task_state_event"):
        s = p.generic_kernel_task_state_event
        if not any(t.get("tid") == s.tid for t in tracks.values()):
            errors.append(f"packet {n}: state of unknown thread {s.tid}")
        states.setdefault(str(s.tid), []).append([p.timestamp, pb.GenericKernelTaskStateEvent.TaskStateEnum.Name(s.state), s.cpu])
        continue
    if not p.HasField("track_event"):
        errors.append(f"packet {n}: unexpected packet {p}")
        continue
    sid = p.trusted_packet_sequence_id
    if p.sequence_flags & 1:
        seqs[sid] = {"names": {}, "cats": {}, "anns": {}, "locs": {}, "track": None}
    seq = seqs.get(sid)
    if seq is None or not p.sequence_flags & 2:
        errors.append(f"packet {n}: sequence {sid} used before its state was cleared")
        continue
    if p.HasField("trace_packet_defaults"):
        seq["track"] = p.trace_packet_defaults.track_event_defaults.track_uuid
    i = p.interned_data
    for e in i.event_names: seq["names"][e.iid] = e.name
    for e in i.event_categories: seq["cats"][e.iid] = e.name
    for e in i.debug_annotation_names: seq["anns"][e.iid] = e.name
    for e in i.source_locations: seq["locs"][e.iid] = f"{e.file_name}:{e.line_number}"
    te = p.track_event
    uuid = te.track_uuid if te.HasField("track_uuid") else seq["track"]
    track = tracks.get(uuid)
    if track is None or "tid" not in track:
        errors.append(f"packet {n}: no thread track {uuid}")
        continue
    tid = str(track["tid"])
    if p.timestamp < last_ts.get(tid, 0):
        errors.append(f"packet {n}: time goes back on thread {tid}")
    last_ts[tid] = p.timestamp
    anns = {}
    for a in te.debug_annotations:
        if a.name_iid not in seq["anns"]:
            errors.append(f"packet {n}: annotation name {a.name_iid} not interned")
        anns[seq["anns"].get(a.name_iid)] = a.string_value
    cats = [seq["cats"].get(c) for c in te.category_iids]
    stack = stacks.setdefault(tid, [])
    if te.type in (TE.TYPE_SLICE_BEGIN, TE.TYPE_INSTANT):
        if te.name_iid not in seq["names"]:
            errors.append(f"packet {n}: name {te.name_iid} not interned in sequence {sid}")
        name = seq["names"].get(te.name_iid)
        loc = seq["locs"].get(te.source_location_iid) if te.HasField("source_location_iid") else None
        if te.HasField("source_location_iid") and loc is None:
            errors.append(f"packet {n}: location {te.source_location_iid} not interned")
        kernel = "kernel" in cats
        if te.type == TE.TYPE_SLICE_BEGIN:
            s = {"depth": len(stack), "name": name, "args": anns.get("args"), "retval": None, "ts": p.timestamp, "dur": None, "kernel": kernel, "srcline": loc}
            threads.setdefault(tid, []).append(s)
            stack.append(s)
        else:
            s = {"depth": len(stack), "name": name, "fields": anns.get("fields"), "ts": p.timestamp, "kernel": kernel}
            instants.setdefault(tid, []).append(s)
        link(n, te, [tid, name, p.timestamp], True)
    elif te.type == TE.TYPE_SLICE_END:
        if not stack:
            errors.append(f"packet {n}: slice end on an empty track {tid}")
            continue
        s = stack.pop()
        s["dur"] = p.timestamp - s["ts"]
        s["retval"] = anns.get("retval")
        link(n, te, [tid, s["name"], s["ts"]], False)
    else:
        errors.append(f"packet {n}: unexpected event type {te.type}")
for tid, st in stacks.items():
    if st:
        errors.append(f"thread {tid}: {len(st)} slices never end")
json.dump({"errors": errors, "tracks": list(tracks.values()), "threads": threads, "instants": instants, "states": states, "flows": flows}, sys.stdout)
"#;

/// Whether the `perfetto` Python package can be imported (see the module comment).
pub(crate) fn have_perfetto(test: &str) -> bool {
    let ok = Command::new("python3")
        .args([
            "-c",
            "import perfetto.protos.perfetto.trace.perfetto_trace_pb2",
        ])
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok && std::env::var("UTRACE_REQUIRE_UFTRACE").as_deref() == Ok("1") {
        panic!("{test}: python3 cannot import the perfetto package (tests/setup.sh installs it)");
    }
    if !ok {
        eprintln!("skipping {test}: python3 has no perfetto package (pip install perfetto)");
    }
    ok
}

/// `utrace dump --perfetto` of `dir` into a file, decoded; panics on decoder errors.
pub(crate) fn perfetto(dir: &Path, opts: &[&str]) -> Value {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("trace.pftrace");
    let mut cmd = Command::new(util::utrace_bin());
    cmd.args(["dump", "--perfetto", "-d"]).arg(dir).args(opts);
    cmd.stdout(std::fs::File::create(&file).unwrap());
    let status = cmd.status().unwrap();
    assert!(
        status.success(),
        "dump --perfetto of {} failed",
        dir.display()
    );
    let mut cmd = Command::new("python3");
    cmd.args(["-c", DECODER]).arg(&file);
    let out = util::run(cmd);
    out.assert_success();
    let v: Value = serde_json::from_str(&out.stdout).unwrap();
    let errors = v["errors"].as_array().unwrap();
    assert!(errors.is_empty(), "{}: {errors:#?}", dir.display());
    v
}

/// A call as both sides show it: depth (from the task's outermost call), `name(args)` and
/// the return value.
type Line = (u64, String, Option<String>);

/// The slices of each thread as [`Line`]s.
fn slices(v: &Value) -> HashMap<String, Vec<Line>> {
    let mut out = HashMap::new();
    for (tid, list) in v["threads"].as_object().unwrap() {
        let lines = list
            .as_array()
            .unwrap()
            .iter()
            .map(|s| {
                let args = s["args"].as_str().unwrap_or("()");
                let name = format!("{}{args}", s["name"].as_str().unwrap());
                let ret = s["retval"].as_str().map(String::from);
                (s["depth"].as_u64().unwrap(), name, ret)
            })
            .collect();
        out.insert(tid.clone(), lines);
    }
    out
}

/// The calls of `utrace replay` per tid as [`Line`]s (depths counted from the task's
/// shallowest call: a fork child's replay keeps its parent's calls open).
fn replay_calls(dir: &Path, opts: &[&str]) -> HashMap<String, Vec<Line>> {
    let out = util::utrace_replay(dir, opts);
    out.assert_success();
    let mut calls: HashMap<String, Vec<Line>> = HashMap::new();
    let mut open: HashMap<String, Vec<usize>> = HashMap::new();
    for l in out.stdout.lines().skip(1) {
        let (Some(a), Some(b), Some(bar)) = (l.find('['), l.find(']'), l.find("| ")) else {
            continue;
        };
        let tid = l[a + 1..b].trim().to_string();
        let text = &l[bar + 2..];
        let body = text.trim_start();
        let depth = ((text.len() - body.len()) / 2) as u64;
        // Source locations (`--srcline`) and events are comments.
        let body = match body.find(" /* ") {
            Some(i) if !body.starts_with('}') => &body[..i],
            _ => body,
        };
        if body.starts_with("/*") {
            continue;
        }
        let list = calls.entry(tid.clone()).or_default();
        let stack = open.entry(tid).or_default();
        if let Some(rest) = body.strip_prefix('}') {
            if let Some(i) = stack.pop() {
                list[i].2 = rest
                    .strip_prefix(" = ")
                    .and_then(|r| r.split(';').next())
                    .map(String::from);
            }
        } else if let Some(call) = body.strip_suffix(" {") {
            stack.push(list.len());
            list.push((depth, call.to_string(), None));
        } else if let Some(leaf) = body.strip_suffix(';') {
            let (call, ret) = match leaf.split_once(" = ") {
                Some((c, r)) => (c, Some(r.to_string())),
                None => (leaf, None),
            };
            list.push((depth, call.to_string(), ret));
        }
    }
    for list in calls.values_mut() {
        let min = list.iter().map(|c| c.0).min().unwrap_or(0);
        for c in list.iter_mut() {
            c.0 -= min;
        }
    }
    calls
}

/// Same tasks, and per task the same calls in the same order.
fn assert_same_calls(dir: &Path, got: &HashMap<String, Vec<Line>>, replay_opts: &[&str]) {
    let want = replay_calls(dir, replay_opts);
    let mut tids: Vec<&String> = want.keys().collect();
    tids.sort();
    let mut got_tids: Vec<&String> = got.keys().collect();
    got_tids.sort();
    assert_eq!(got_tids, tids, "{}: threads", dir.display());
    for tid in tids {
        let (w, g) = (&want[tid], &got[tid]);
        for (i, (a, b)) in w.iter().zip(g).enumerate() {
            assert_eq!(b, a, "{}: task {tid}, call {i}", dir.display());
        }
        assert_eq!(
            g.len(),
            w.len(),
            "{}: task {tid}: number of calls",
            dir.display()
        );
    }
}

/// Nesting, names, arguments and return values of a recursion, against replay.
#[test]
fn perfetto_slices_match_replay() {
    if !have_perfetto("perfetto_slices_match_replay") {
        return;
    }
    let dir = fixture_dir("fib-args");
    let v = perfetto(&dir, &[]);
    let got = slices(&v);
    assert_same_calls(&dir, &got, &[]);
    let fib5 = got
        .values()
        .next()
        .unwrap()
        .iter()
        .find(|c| c.1 == "fib(5)");
    assert_eq!(fib5.and_then(|c| c.2.as_deref()), Some("5"), "{got:?}");
    // The track of the one thread, in its process.
    let tracks = v["tracks"].as_array().unwrap();
    assert_eq!(tracks.len(), 2, "{tracks:?}");
    assert!(tracks
        .iter()
        .any(|t| t["name"] == "fib" && t["tid"].is_null()));
    // The slices nest: a child lies inside its parent.
    for list in v["threads"].as_object().unwrap().values() {
        let mut stack: Vec<(u64, u64)> = Vec::new();
        for s in list.as_array().unwrap() {
            let (ts, dur, depth) = (
                s["ts"].as_u64().unwrap(),
                s["dur"].as_u64().unwrap(),
                s["depth"].as_u64().unwrap() as usize,
            );
            stack.truncate(depth);
            if let Some(&(pts, pend)) = stack.last() {
                assert!(ts >= pts && ts + dur <= pend, "{s} outside its parent");
            }
            stack.push((ts, ts + dur));
        }
    }
    // --no-args leaves the annotations out.
    let bare = slices(&perfetto(&dir, &["--no-args"]));
    assert!(bare
        .values()
        .flatten()
        .all(|c| !c.1.contains("(5)") && c.2.is_none()));
}

/// Threads: one track each, the flows from `pthread_create` to the workers, the thread
/// states from the perf switches, source locations.
#[test]
fn perfetto_threads_states_flows_and_srclines() {
    if !have_perfetto("perfetto_threads_states_flows_and_srclines") {
        return;
    }
    let exe = util::testprog("thread", Mode::Pg);
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("data");
    let mut cmd = Command::new(util::utrace_bin());
    cmd.args(["record", "-A", "tiny@arg1", "-R", "tiny@retval", "-d"])
        .arg(&dir)
        .arg(&exe);
    util::run(cmd).assert_success();
    let v = perfetto(&dir, &[]);
    let got = slices(&v);
    assert_same_calls(&dir, &got, &["--no-sched"]);
    assert_eq!(got.len(), 3, "{got:?}");
    assert!(got
        .values()
        .flatten()
        .any(|c| c.1 == "tiny(1)" && c.2.as_deref() == Some("2")));

    // A flow from each pthread_create to a worker's first slice.
    let flows = v["flows"].as_array().unwrap();
    assert_eq!(flows.len(), 2, "{flows:?}");
    let main_tid = exe_main_tid(&v);
    for f in flows {
        assert_eq!(f[0][0], main_tid.as_str(), "{f}");
        assert_eq!(f[0][1], "pthread_create", "{f}");
        assert_eq!(f[1][1], "worker", "{f}");
        assert!(f[1][2].as_u64() > f[0][2].as_u64(), "{f}");
    }
    assert_ne!(flows[0][1][0], flows[1][1][0]);

    // main's location, as replay --srcline shows it.
    let replay = util::utrace_replay(&dir, &["--srcline", "--no-sched"]);
    let want = replay
        .stdout
        .lines()
        .find_map(|l| l.split_once("main() { /* ")?.1.strip_suffix(" */"))
        .unwrap_or_else(|| panic!("no location of main:\n{replay}"))
        .to_string();
    let main = &v["threads"][main_tid.as_str()]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "main")
        .unwrap()["srcline"];
    assert_eq!(main.as_str(), Some(want.as_str()));

    // One thread state per context switch of a traced task, as the raw dump lists them.
    let raw = crate::analysis_dump::utrace_dump(&dir, crate::analysis_dump::Format::Raw, &[]);
    raw.assert_success();
    let mut switches: HashMap<String, usize> = HashMap::new();
    for l in raw
        .stdout
        .lines()
        .filter(|l| l.contains("[event] linux:sched-"))
    {
        let tid = l.split_whitespace().nth(1).unwrap().trim_end_matches(':');
        *switches.entry(tid.to_string()).or_default() += 1;
    }
    let states = v["states"].as_object().unwrap();
    assert!(!switches.is_empty(), "no switches recorded:\n{raw}");
    for (tid, n) in &switches {
        let list = states[tid.as_str()].as_array().unwrap();
        assert_eq!(list.len(), *n, "task {tid}: {list:?}");
        for s in list {
            let state = s[1].as_str().unwrap();
            assert!(
                matches!(
                    state,
                    "TASK_STATE_RUNNING" | "TASK_STATE_RUNNABLE" | "TASK_STATE_INTERRUPTIBLE_SLEEP"
                ),
                "{s}"
            );
        }
    }
    // --no-sched leaves them out.
    let quiet = perfetto(&dir, &["--no-sched"]);
    assert!(quiet["states"].as_object().unwrap().is_empty());
}

/// The tid of the process's main thread.
fn exe_main_tid(v: &Value) -> String {
    let t = v["tracks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["tid"].is_u64() && t["tid"] == t["pid"])
        .unwrap();
    t["tid"].to_string()
}

/// A forked child: its own track and process, a flow from `fork` to its first slice.
#[test]
fn perfetto_fork_child_and_flow() {
    if !have_perfetto("perfetto_fork_child_and_flow") {
        return;
    }
    let dir = fixture_dir("fork");
    let v = perfetto(&dir, &[]);
    let got = slices(&v);
    assert_same_calls(&dir, &got, &[]);
    let processes = v["tracks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["tid"].is_null())
        .count();
    assert_eq!(processes, 2);
    let flows = v["flows"].as_array().unwrap();
    assert_eq!(flows.len(), 1, "{flows:?}");
    assert_eq!(flows[0][0][1], "fork");
    assert_ne!(flows[0][0][0], flows[0][1][0]);
}

/// Standard output on a terminal: a one-line error, nothing written.
#[test]
fn perfetto_refuses_a_terminal() {
    let (mut master, mut slave) = (0, 0);
    // SAFETY: openpty writes the two descriptors it opens into the two ints; the other
    // arguments may be null.
    let rc = unsafe {
        libc::openpty(
            &mut master,
            &mut slave,
            std::ptr::null_mut(),
            std::ptr::null(),
            std::ptr::null(),
        )
    };
    if rc != 0 {
        eprintln!("skipping perfetto_refuses_a_terminal: no pseudo-terminal");
        return;
    }
    use std::os::fd::FromRawFd;
    // SAFETY: both descriptors were just opened by openpty and are owned by nobody else.
    let (master, slave) = unsafe {
        (
            std::fs::File::from_raw_fd(master),
            std::fs::File::from_raw_fd(slave),
        )
    };
    let mut cmd = Command::new(util::utrace_bin());
    cmd.args(["dump", "--perfetto", "-d"])
        .arg(fixture_dir("fib-args"))
        .stdout(slave)
        .stderr(std::process::Stdio::piped());
    let out = cmd.output().unwrap();
    drop(master);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("--perfetto"), "{err}");
}

fn kernel_tracing_possible() -> bool {
    util::kernel_event_possible("raw_syscalls/sys_enter")
}

/// `-k`: system calls are slices nested under the user calls that made them, with category
/// `kernel`; kernel events are instants on the same track.
#[test]
fn perfetto_kernel_functions_and_events() {
    if !have_perfetto("perfetto_kernel_functions_and_events") {
        return;
    }
    if !kernel_tracing_possible() {
        eprintln!("perfetto_kernel_functions_and_events skipped: needs root and tracefs");
        return;
    }
    let exe = util::testprog("ksys", Mode::Pg);
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("data");
    let tracefs = util::tracefs_lock();
    let mut cmd = Command::new(util::utrace_bin());
    cmd.args(["record", "-k", "-d"])
        .arg(&dir)
        .arg(&exe)
        .arg(tmp.path().join("scratch"));
    util::run(cmd).assert_success();
    drop(tracefs);
    let v = perfetto(&dir, &[]);
    assert_same_calls(&dir, &slices(&v), &["--no-sched"]);
    let all: Vec<&Value> = v["threads"]
        .as_object()
        .unwrap()
        .values()
        .flat_map(|l| l.as_array().unwrap())
        .collect();
    let sys: Vec<&&Value> = all
        .iter()
        .filter(|s| s["name"].as_str().unwrap().starts_with("__x64_sys_"))
        .collect();
    assert!(!sys.is_empty());
    assert!(sys
        .iter()
        .all(|s| s["kernel"] == true && s["depth"].as_u64() > Some(0)));
    assert!(all
        .iter()
        .filter(|s| s["name"] == "main")
        .all(|s| s["kernel"] == false));
    let instants: Vec<&Value> = v["instants"]
        .as_object()
        .unwrap()
        .values()
        .flat_map(|l| l.as_array().unwrap())
        .collect();
    assert!(
        instants
            .iter()
            .any(|i| i["kernel"] == true && i["name"].as_str().unwrap().contains(':')),
        "{instants:?}"
    );
}
