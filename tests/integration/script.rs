//! `utrace script -S FILE` (and `record -S`, `live -S`, `script --record`) against uftrace
//! 0.13's script engines: the same scripts, run by both tools over the same data directory
//! (recorded by utrace, and one recorded by uftrace), must print the same lines: every ctx
//! field with its Python or Lua type, `UFTRACE_FUNCS`, script options, the analysis filters,
//! events, and the example scripts of `scripts/`. Script errors stop with the interpreter's
//! message and one error line.

use crate::util::{self, Mode};
use std::io::BufRead;
use std::path::Path;
use std::process::{Command, Stdio};

/// Prints every ctx field with its value's repr and type, sorted by key (the version only
/// by its shape: it names the tool).
const DUMP_PY: &str = r#"
def show(tag, ctx):
    items = []
    for k, v in sorted(ctx.items()):
        if k == "version":
            v = v.startswith("v") and v.endswith(")")
        items.append("%s=%r:%s" % (k, v, type(v).__name__))
    print(tag, " ".join(items))

def uftrace_begin(ctx):
    show("begin", ctx)

def uftrace_entry(ctx):
    show("entry", ctx)

def uftrace_exit(ctx):
    show("exit", ctx)

def uftrace_event(ctx):
    show("event", ctx)

def uftrace_end():
    print("end")
"#;

/// The same in Lua (`tostring` of LuaJIT numbers and the table fields).
const DUMP_LUA: &str = r#"
local function show(tag, ctx)
  local keys = {}
  for k in pairs(ctx) do keys[#keys + 1] = k end
  table.sort(keys)
  local out = {}
  for _, k in ipairs(keys) do
    local v = ctx[k]
    if k == "version" then v = (v:sub(1, 1) == "v") end
    if type(v) == "table" then
      local items = {}
      for _, x in ipairs(v) do items[#items + 1] = tostring(x) .. ":" .. type(x) end
      out[#out + 1] = k .. "=[" .. table.concat(items, ",") .. "]"
    else
      out[#out + 1] = k .. "=" .. tostring(v) .. ":" .. type(v)
    end
  end
  print(tag .. " " .. table.concat(out, " "))
end
function uftrace_begin(ctx) show("begin", ctx) end
function uftrace_entry(ctx) show("entry", ctx) end
function uftrace_exit(ctx) show("exit", ctx) end
function uftrace_event(ctx) show("event", ctx) end
function uftrace_end() print("end") end
"#;

/// Depth and name only, with `UFTRACE_FUNCS` (single-letter names) appended when asked.
const TREE_PY: &str = r#"
def uftrace_entry(ctx):
    print("entry", ctx["tid"], ctx["depth"], ctx["name"])
def uftrace_exit(ctx):
    print("exit", ctx["tid"], ctx["depth"], ctx["name"], ctx["duration"] > 0)
def uftrace_event(ctx):
    print("event", ctx["name"], ctx.get("args"))
"#;

const TREE_LUA: &str = r#"
function uftrace_entry(ctx) print("entry", ctx.tid, ctx.depth, ctx.name) end
function uftrace_exit(ctx) print("exit", ctx.tid, ctx.depth, ctx.name, ctx.duration > 0) end
function uftrace_event(ctx) print("event", ctx.name, ctx.args) end
"#;

/// Writes `text` as `dir/name` and returns its path.
fn script(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.to_str().unwrap().to_string()
}

/// `TOOL script -d DATA -S FILE OPTS...` (options after the script name are its own).
fn run_script(uftrace: bool, data: &Path, file: &str, opts: &[&str]) -> util::Output {
    let bin = if uftrace {
        util::uftrace_bin()
    } else {
        util::utrace_bin()
    };
    let mut cmd = Command::new(bin);
    cmd.arg("script")
        .arg("-d")
        .arg(data)
        .args(opts)
        .args(["-S", file]);
    util::run(cmd)
}

/// Runs `file` with `opts` (and script options `script_args`) by both tools over `data`;
/// returns a failure message when the outputs differ.
fn compare(data: &Path, file: &str, opts: &[&str], script_args: &[&str]) -> Option<String> {
    let mut all: Vec<&str> = opts.to_vec();
    let with_args = |uftrace| {
        let bin = if uftrace {
            util::uftrace_bin()
        } else {
            util::utrace_bin()
        };
        let mut cmd = Command::new(bin);
        cmd.arg("script")
            .arg("-d")
            .arg(data)
            .args(&all)
            .args(["-S", file])
            .args(script_args);
        util::run(cmd)
    };
    let want = with_args(true);
    let got = with_args(false);
    all.clear();
    if !got.status.success() || got.stdout != want.stdout || got.stdout.is_empty() {
        return Some(format!(
            "{file} {opts:?} {script_args:?} (- uftrace, + utrace):\n{}\n{got}",
            crate::normalize::diff(&want.stdout, &got.stdout)
        ));
    }
    None
}

/// testprogs/args recorded with argument and return value specs of every kind.
const ARG_SPECS: &[&str] = &[
    "-A",
    "add_int@arg1,arg2",
    "-R",
    "add_int@retval",
    "-A",
    "pick@arg1/s,arg2",
    "-R",
    "pick@retval/s",
    "-A",
    "to_upper@arg1/c",
    "-R",
    "to_upper@retval/c",
    "-A",
    "half@fparg1",
    "-R",
    "half@retval/f",
    "-A",
    "twice_unsigned@arg1/u",
    "-A",
    "mul_long@arg1/x",
    "-R",
    "mul_long@retval/x",
];

#[test]
fn script_ctx_fields_match_uftrace() {
    if !util::need_uftrace("script_ctx_fields_match_uftrace") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let exe = util::testprog("args", Mode::Pg);
    let ours = tmp.path().join("utrace.data");
    let theirs = tmp.path().join("uftrace.data");
    util::record_with(false, &ours, &exe, &[], ARG_SPECS).assert_success();
    util::uftrace_record(&theirs, ARG_SPECS, &exe, &[]);
    let py = script(tmp.path(), "dump.py", DUMP_PY);
    let lua = script(tmp.path(), "dump.lua", DUMP_LUA);
    let mut failures = Vec::new();
    for data in [&ours, &theirs] {
        for file in [&py, &lua] {
            failures.extend(compare(data, file, &[], &[]));
            failures.extend(compare(data, file, &["--no-args"], &["one", "-x", "2"]));
        }
    }
    // The values themselves, as Python sees them (a guard against both tools agreeing on
    // nothing).
    let out = run_script(false, &ours, &py, &[]);
    for want in [
        "args=(1, 4294967294):tuple",
        "retval=4294967295:int",
        "args=('q',):tuple",
        "retval='Q':str",
        "args=('utrace', 1):tuple",
        "args=('NULL', 0):tuple",
        "retval=2.5:float",
        "args=(18446744073709551613,):tuple",
    ] {
        if !out.stdout.contains(want) {
            failures.push(format!("no `{want}` in\n{out}"));
        }
    }
    util::assert_no_failures(&failures);
}

#[test]
fn script_filters_funcs_and_events_match_uftrace() {
    if !util::need_uftrace("script_filters_funcs_and_events_match_uftrace") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let abc = util::testprog("abc", Mode::Pg);
    let ours = tmp.path().join("abc.data");
    // read:/diff: events around a().
    util::record_with(false, &ours, &abc, &[], &["-T", "a@read=proc/statm"]).assert_success();
    let thread = util::testprog("thread", Mode::Pg);
    let threads = tmp.path().join("thread.data");
    util::record_with(false, &threads, &thread, &[], &[]).assert_success();

    let py = script(tmp.path(), "tree.py", TREE_PY);
    let lua = script(tmp.path(), "tree.lua", TREE_LUA);
    let funcs_py = script(
        tmp.path(),
        "funcs.py",
        &format!("{TREE_PY}\nUFTRACE_FUNCS = [ \"^.$\", \"getpid\" ]\n"),
    );
    let funcs_lua = script(
        tmp.path(),
        "funcs.lua",
        &format!("{TREE_LUA}\nUFTRACE_FUNCS = {{ \"^.$\", \"getpid\" }}\n"),
    );
    let mut failures = Vec::new();
    let filters: &[&[&str]] = &[
        &[],
        &["-F", "b"],
        &["-N", "b"],
        &["-H", "a"],
        &["-D", "2"],
        &["-t", "2us"],
        &["--no-libcall"],
        &["-F", "c", "-F", "a"],
        &["-C", "getpid"],
        &["-T", "b@depth=1"],
        &["--disable", "-T", "b@trace_on"],
        // A pattern matching nothing: uftrace's `Usage:` line after the script's output.
        &["-F", "nosuch"],
    ];
    for opts in filters {
        for file in [&py, &lua] {
            failures.extend(compare(&ours, file, opts, &[]));
        }
    }
    // Every field of the events too.
    let dump_py = script(tmp.path(), "dump.py", DUMP_PY);
    let dump_lua = script(tmp.path(), "dump.lua", DUMP_LUA);
    for file in [&dump_py, &dump_lua] {
        failures.extend(compare(&ours, file, &[], &[]));
    }
    for file in [&funcs_py, &funcs_lua] {
        failures.extend(compare(&ours, file, &[], &[]));
        failures.extend(compare(&ours, file, &["--match", "glob"], &[]));
    }
    // Several tasks: the records of all threads in time order, --tid, -r.
    let tids = util::utrace_replay(&threads, &["-f", "tid"]).stdout;
    let second = tids
        .lines()
        .filter_map(|l| l.trim_start().strip_prefix('['))
        .filter_map(|l| l.split(']').next())
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .nth(1)
        .expect("thread.data holds two tasks")
        .to_string();
    for opts in [&[][..], &["--tid", &second], &["-r", "~20us"]] {
        for file in [&py, &lua] {
            failures.extend(compare(&threads, file, opts, &[]));
        }
    }
    util::assert_no_failures(&failures);
}

#[test]
fn example_scripts_match_uftrace() {
    if !util::need_uftrace("example_scripts_match_uftrace") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let fib = util::testprog("fib", Mode::Pg);
    let data = tmp.path().join("fib.data");
    util::record_with(false, &data, &fib, &["12"], &[]).assert_success();
    let scripts = util::workspace_root().join("scripts");
    let mut failures = Vec::new();
    for (name, args) in [
        ("latency.py", &["5"][..]),
        ("latency.lua", &["5"][..]),
        ("callers.py", &[][..]),
        ("callers.lua", &["fib"][..]),
    ] {
        let file = scripts.join(name);
        failures.extend(compare(&data, file.to_str().unwrap(), &[], args));
    }
    let out = run_script(
        false,
        &data,
        scripts.join("callers.py").to_str().unwrap(),
        &[],
    );
    if !out
        .stdout
        .contains("  fib                             fib\n")
    {
        failures.push(format!("callers.py counts no fib -> fib call:\n{out}"));
    }
    util::assert_no_failures(&failures);
}

#[test]
fn record_and_live_run_the_script() {
    if !util::need_uftrace("record_and_live_run_the_script") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let abc = util::testprog("abc", Mode::Pg);
    let py = script(tmp.path(), "tree.py", TREE_PY);
    let lua = script(
        tmp.path(),
        "opts.lua",
        &format!(
            "-- uftrace-option: -F b\nfunction uftrace_begin(ctx) print(ctx.record, #ctx.cmds) end\n{TREE_LUA}"
        ),
    );
    let mut failures = Vec::new();
    for file in [&py, &lua] {
        let mut outs = Vec::new();
        for uftrace in [true, false] {
            let dir = tmp.path().join(if uftrace { "u.data" } else { "t.data" });
            let mut cmd = Command::new(if uftrace {
                util::uftrace_bin()
            } else {
                util::utrace_bin()
            });
            cmd.args(["record", "--no-event", "--no-sched", "-S", file, "-d"])
                .arg(&dir)
                .arg(&abc);
            let out = util::run(cmd);
            out.assert_success();
            // The trace data is written too.
            assert!(dir.join("info").is_file(), "{out}");
            outs.push(out);
        }
        // Timestamps and tids differ between two runs; the lines do not.
        let strip = |s: &str| -> String {
            s.lines()
                .map(|l| {
                    l.split_whitespace()
                        .enumerate()
                        .filter(|(i, _)| *i != 1 || l.starts_with("event"))
                        .map(|(_, w)| w)
                        .collect::<Vec<_>>()
                        .join(" ")
                })
                .collect::<Vec<_>>()
                .join("\n")
        };
        if strip(&outs[0].stdout) != strip(&outs[1].stdout) || outs[1].stdout.is_empty() {
            failures.push(format!(
                "record -S {file}:\n{}",
                crate::normalize::diff(&strip(&outs[0].stdout), &strip(&outs[1].stdout))
            ));
        }
    }
    // The option comment filtered the recording: only b and below.
    let t = util::utrace_replay(&tmp.path().join("t.data"), &[]).stdout;
    if t.contains("main") || !t.contains("b() {") {
        failures.push(format!("uftrace-option: -F b was not applied:\n{t}"));
    }
    // live -S: the script's lines, then the replay.
    let mut cmd = Command::new(util::utrace_bin());
    cmd.args(["live", "--no-event", "--no-sched", "--no-pager", "-S", &py])
        .arg(&abc);
    let out = util::run(cmd);
    out.assert_success();
    let script_at = out.stdout.find("entry ").unwrap_or(usize::MAX);
    let replay_at = out.stdout.find("# DURATION").unwrap_or(0);
    if script_at > replay_at {
        failures.push(format!(
            "live -S: no script output before the replay:\n{out}"
        ));
    }
    // --keep-pid: the recorder goes on in a forked copy of utrace, without the script's
    // thread: the script runs over the data once the program ended.
    let mut cmd = Command::new(util::utrace_bin());
    cmd.args([
        "record",
        "--keep-pid",
        "--no-event",
        "--no-sched",
        "-S",
        &py,
        "-d",
    ])
    .arg(tmp.path().join("k.data"))
    .arg(&abc);
    let out = util::run(cmd);
    if !out.status.success() || !out.stdout.contains("exit ") || out.stderr.contains("panicked") {
        failures.push(format!("record --keep-pid -S:\n{out}"));
    }
    // script --record COMMAND: records, then runs the script with the command as cmds.
    let mut cmd = Command::new(util::utrace_bin());
    cmd.current_dir(tmp.path())
        .args(["script", "--no-event", "-S", &lua, "--record"])
        .arg(&abc);
    let out = util::run(cmd);
    out.assert_success();
    if !out.stdout.starts_with("false\t1\n") || !out.stdout.contains("entry") {
        failures.push(format!("script --record:\n{out}"));
    }
    util::assert_no_failures(&failures);
}

/// `record -S` runs the script while the program runs: `agent_phases` runs phase1(), then
/// waits until the test lets it go on. The script (writing each entry's name to a file) has seen
/// phase1() by then: with 4 KB buffers, the library calls of the program's polling fill the
/// chunk that holds phase1's records, which the recorder then writes and hands to the script.
#[test]
fn record_script_runs_while_the_program_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let prog = util::testprog("agent_phases", Mode::Pg);
    let seen = tmp.path().join("seen.txt");
    let sig = tmp.path().join("sig");
    std::fs::create_dir(&sig).unwrap();
    let lua = script(
        tmp.path(),
        "seen.lua",
        &format!(
            "local f = io.open(\"{}\", \"a\")\n\
             function uftrace_entry(ctx) f:write(ctx.name, \"\\n\") f:flush() end\n\
             function uftrace_end() f:write(\"end\\n\") f:close() end\n",
            seen.display()
        ),
    );
    let mut cmd = Command::new(util::utrace_bin());
    cmd.args([
        "record",
        "--no-event",
        "--no-sched",
        "-b",
        "4k",
        "-S",
        &lua,
        "-d",
    ])
    .arg(tmp.path().join("data"))
    .arg(&prog)
    .arg(&sig)
    .arg("1")
    .stdout(std::process::Stdio::null());
    let mut child = util::ChildGuard::new(cmd.spawn().unwrap());
    let read = || std::fs::read_to_string(&seen).unwrap_or_default();
    let started = std::time::Instant::now();
    let limit = std::time::Duration::from_secs(20);
    while !sig.join("ready1").exists() && started.elapsed() < limit {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    while !read().contains("phase1\n") && started.elapsed() < limit {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let early = read();
    let waiting = sig.join("ready1").exists() && !sig.join("go1").exists();
    std::fs::write(sig.join("go1"), "").unwrap();
    let status = child.child_mut().wait().unwrap();
    let after = read();
    assert!(status.success(), "record -S failed: {status}");
    assert!(
        waiting && early.contains("phase1\n") && !early.contains("end"),
        "the script did not see phase1() while the program waited:\n{early}"
    );
    assert!(
        after.contains("main\n") && after.ends_with("end\n"),
        "the script did not run to its end:\n{after}"
    );
}

/// `record -S` over fork children: each task's calls as uftrace's record-time script gives
/// them, durations too (a child starts with its parent's open calls: its exits from `fork` and
/// `main` have theirs). Each task's lines go to a file of its own (uftrace runs the script in
/// each process: their prints would mix).
#[test]
fn record_script_fork_children_match_uftrace() {
    if !util::need_uftrace("record_script_fork_children_match_uftrace") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let mut failures = Vec::new();
    for prog in ["fork", "vfork"] {
        let exe = util::testprog(prog, Mode::Pg);
        let mut tasks = Vec::new();
        for uftrace in [true, false] {
            let out_dir = tmp.path().join(format!("{prog}-{uftrace}"));
            std::fs::create_dir(&out_dir).unwrap();
            let py = script(
                &out_dir,
                "tasks.py",
                &format!(
                    "def line(ctx, text):\n\
                     \x20   with open(\"{}/%d.txt\" % ctx[\"tid\"], \"a\") as f:\n\
                     \x20       f.write(text + \"\\n\")\n\
                     def uftrace_entry(ctx):\n\
                     \x20   line(ctx, \"entry %d %s\" % (ctx[\"depth\"], ctx[\"name\"]))\n\
                     def uftrace_exit(ctx):\n\
                     \x20   line(ctx, \"exit %d %s %s\" % (ctx[\"depth\"], ctx[\"name\"], ctx[\"duration\"] > 0))\n",
                    out_dir.display()
                ),
            );
            let mut cmd = Command::new(if uftrace {
                util::uftrace_bin()
            } else {
                util::utrace_bin()
            });
            cmd.args(["record", "--no-event", "--no-sched", "-S", &py, "-d"])
                .arg(out_dir.join("data"))
                .arg(&exe);
            util::run(cmd).assert_success();
            let mut lines: Vec<String> = std::fs::read_dir(&out_dir)
                .unwrap()
                .filter_map(|e| e.ok())
                .filter(|e| e.file_name().to_string_lossy().ends_with(".txt"))
                .map(|e| std::fs::read_to_string(e.path()).unwrap())
                .collect();
            lines.sort();
            tasks.push(lines);
        }
        if tasks[0] != tasks[1] || tasks[1].len() < 2 {
            failures.push(format!(
                "{prog} (uftrace, then utrace):\n{:#?}\n{:#?}",
                tasks[0], tasks[1]
            ));
        }
    }
    util::assert_no_failures(&failures);
}

#[test]
fn script_errors_stop_with_the_interpreters_message() {
    let tmp = tempfile::tempdir().unwrap();
    let abc = util::testprog("abc", Mode::Pg);
    let data = tmp.path().join("abc.data");
    util::record_with(false, &data, &abc, &[], &[]).assert_success();
    let cases = [
        ("missing.py", None, "cannot open script"),
        ("x.rb", Some("puts 1\n"), "unsupported script type"),
        (
            "syntax.py",
            Some("def uftrace_entry(ctx:\n"),
            "syntax.py\", line 1",
        ),
        (
            "raise.py",
            Some("def uftrace_entry(ctx):\n    1/0\n"),
            "ZeroDivisionError",
        ),
        (
            "syntax.lua",
            Some("function uftrace_entry(ctx\n"),
            "syntax.lua:2:",
        ),
        (
            "raise.lua",
            Some("function uftrace_exit(ctx)\n  error('boom')\nend\n"),
            "raise.lua:2: boom",
        ),
    ];
    let mut failures = Vec::new();
    for (name, text, want) in cases {
        let path = match text {
            Some(t) => script(tmp.path(), name, t),
            None => tmp.path().join(name).to_str().unwrap().to_string(),
        };
        let out = run_script(false, &data, &path, &[]);
        let errors = out.stderr.matches("ERROR:").count();
        if out.status.success()
            || !out.stderr.contains(want)
            || errors != 1
            || out.stderr.contains("panicked")
        {
            failures.push(format!("{name}: want a failure naming `{want}`:\n{out}"));
        }
        if name == "raise.py" && !out.stderr.contains("raise.py\", line 2, in uftrace_entry") {
            failures.push(format!("{name}: no traceback:\n{out}"));
        }
    }
    // record -S with a broken script stops before the program runs.
    let bad = tmp.path().join("syntax.py");
    let mut cmd = Command::new(util::utrace_bin());
    cmd.args(["record", "-S"])
        .arg(&bad)
        .arg("-d")
        .arg(tmp.path().join("r.data"));
    cmd.arg(&abc);
    let out = util::run(cmd);
    if out.status.success() || tmp.path().join("r.data").exists() {
        failures.push(format!("record -S with a syntax error:\n{out}"));
    }
    util::assert_no_failures(&failures);
}

/// `utrace script ... | head -1`: once standard output is a pipe closed at the other end the
/// run stops there, quietly and successfully, as `replay | head` does (a Python script's
/// BrokenPipeError is no script error; Lua's `print` ignores write errors, the walk sees
/// them on the stream): no traceback, no error line, no further record.
#[test]
fn script_stops_quietly_when_its_output_is_closed() {
    let tmp = tempfile::tempdir().unwrap();
    let abc = util::testprog("abc", Mode::Pg);
    let data = tmp.path().join("abc.data");
    util::record_with(false, &data, &abc, &[], &[]).assert_success();
    // Far more than a pipe holds before the first record; each entry marks stderr.
    let py = script(
        tmp.path(),
        "flood.py",
        "import sys\ndef uftrace_begin(ctx):\n    for i in range(200000):\n        \
         print('line', i)\ndef uftrace_entry(ctx):\n    sys.stderr.write('entry\\n')\n",
    );
    let lua = script(
        tmp.path(),
        "flood.lua",
        "function uftrace_begin(ctx)\n  for i = 0, 199999 do print('line ' .. i) end\nend\n\
         function uftrace_entry(ctx) io.stderr:write('entry\\n') end\n",
    );
    let mut failures = Vec::new();
    for file in [&py, &lua] {
        let mut child = Command::new(util::utrace_bin())
            .args(["script", "-d"])
            .arg(&data)
            .args(["-S", file])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut first = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut first)
            .unwrap();
        // The reading end is closed here, as `head -1` exits.
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        if first != "line 0\n"
            || !out.status.success()
            || stderr.contains("Traceback")
            || stderr.contains("Error")
            || stderr.contains("ERROR")
            || stderr.contains("entry")
        {
            failures.push(format!(
                "{file} | head -1: {:?}, first line {first:?}, stderr:\n{stderr}",
                out.status
            ));
        }
    }
    util::assert_no_failures(&failures);
}

#[test]
fn utrace_needs_no_libpython_to_run() {
    let out = util::run({
        let mut cmd = Command::new("ldd");
        cmd.arg(util::utrace_bin());
        cmd
    });
    assert!(out.status.success(), "{out}");
    for lib in ["libpython", "luajit", "liblua"] {
        assert!(!out.stdout.contains(lib), "utrace links {lib}:\n{out}");
    }
    let version = util::run({
        let mut cmd = Command::new(util::utrace_bin());
        cmd.arg("--version");
        cmd
    });
    assert!(version.stdout.contains(" python3 luajit "), "{version}");
}
