//! The record-time runner over the committed data directories of `tests/fixtures`, told of
//! each thread's data a few bytes at a time (records and payloads cut anywhere), gives the
//! script the same calls of each thread, in the same order and with the same values, as
//! `script` does over the finished directory.

use super::*;
use crate::script::walk;
use std::collections::BTreeMap;

/// Writes each call as a line to the file `OUT`: kind, tid, depth, name, values.
const LINES_LUA: &str = r#"
local f = io.open(OUT, "w")
local function show(kind, ctx)
  local vals = {}
  for _, v in ipairs(ctx.args or {}) do vals[#vals + 1] = tostring(v) end
  if ctx.retval ~= nil then vals[#vals + 1] = tostring(ctx.retval) end
  f:write(kind, " ", ctx.tid, " ", ctx.depth, " ", ctx.name, " ", table.concat(vals, ","), "\n")
end
function uftrace_entry(ctx) show("entry", ctx) end
function uftrace_exit(ctx) show("exit", ctx) end
function uftrace_event(ctx) show("event", ctx) end
function uftrace_end() f:close() end
"#;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures")
        .join(name)
}

/// A Lua script writing its lines to `out`.
fn lines_script(dir: &Path, out: &Path) -> Script {
    let path = dir.join(format!(
        "{}.lua",
        out.file_stem().unwrap().to_string_lossy()
    ));
    let text = format!("OUT = {:?}\n{LINES_LUA}", out.to_str().unwrap());
    std::fs::write(&path, text).unwrap();
    Script::open(path.to_str().unwrap()).unwrap()
}

/// Each thread's lines, in order.
fn by_thread(path: &Path) -> BTreeMap<String, Vec<String>> {
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for line in std::fs::read_to_string(path).unwrap().lines() {
        let tid = line.split(' ').nth(1).unwrap_or_default().to_string();
        out.entry(tid).or_default().push(line.to_string());
    }
    out
}

#[test]
fn threads_told_of_in_pieces_give_what_the_walk_gives() {
    for name in ["fib-args", "thread", "fork", "longjmp", "exec", "signal"] {
        let tmp = tempfile::tempdir().unwrap();
        let data = tmp.path().join("data");
        std::fs::create_dir(&data).unwrap();
        for e in std::fs::read_dir(fixture(name)).unwrap() {
            let e = e.unwrap();
            std::fs::copy(e.path(), data.join(e.file_name())).unwrap();
        }
        let dir = TraceDir::open(&data).unwrap();
        let cfg = replay::Config::default();
        let want = tmp.path().join("want.txt");
        let mut script = lines_script(tmp.path(), &want);
        walk::run(&dir, &cfg, &mut script, false, (false, &[])).unwrap();
        drop(script);

        let got = tmp.path().join("got.txt");
        let mut script = lines_script(tmp.path(), &got);
        let setup = Setup {
            demangle: cfg.demangle,
            match_type: cfg.match_type,
            no_args: false,
        };
        let (tx, rx) = mpsc::channel();
        let lens: Vec<(u32, u64)> = dir
            .data
            .iter()
            .map(|d| (d.tid, d.bytes().len() as u64))
            .collect();
        // The threads in turn, 40 bytes at a time (16-byte records, 8-byte payload units),
        // all but the last 24 bytes of each: the final pass reads those.
        let mut off = 0;
        while lens.iter().any(|&(_, len)| off < len.saturating_sub(24)) {
            off += 40;
            for &(tid, len) in &lens {
                if off < len.saturating_sub(24) {
                    tx.send(Msg::Upto(tid, off)).unwrap();
                }
            }
        }
        tx.send(Msg::End).unwrap();
        let threads = Threads::new(&data, setup, script.funcs());
        assert!(run(&rx, threads, &mut script).unwrap(), "{name}");
        script.end().unwrap();
        drop(script);
        assert_eq!(by_thread(&got), by_thread(&want), "{name}");
        assert!(!by_thread(&got).is_empty(), "{name}");
    }
}
