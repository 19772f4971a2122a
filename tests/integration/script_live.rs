//! `record -S` while the program runs, where it can go wrong: a task that execs another
//! program must have the new program's names (not the old snapshot's), and a program of many
//! threads must not run the recorder out of file descriptors (nor loop on a snapshot that
//! cannot be opened). Each is checked against `utrace script -S` over the same data.

use crate::util;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

/// Counts the entries of each function; prints them sorted at the end.
const NAMES_PY: &str = "counts = {}\n\
def uftrace_entry(ctx):\n\
\x20   counts[ctx[\"name\"]] = counts.get(ctx[\"name\"], 0) + 1\n\
def uftrace_end():\n\
\x20   for k in sorted(counts):\n\
\x20       print(k, counts[k])\n";

/// The first program: many calls (several chunks, read before the exec), then it execs the
/// second one (`argv[1]`), whose functions are at addresses of the first's (both `-no-pie`).
const FIRST_C: &str = "#include <unistd.h>\n\
int a_work(int x) { return x + 1; }\n\
int a_other(int x) { return x * 3; }\n\
int main(int argc, char **argv) {\n\
  int s = 0;\n\
  for (int i = 0; i < 20000; i++) s += a_work(i) + a_other(i);\n\
  usleep(300000);\n\
  if (argc > 1) execl(argv[1], argv[1], (char *)0);\n\
  return s == 1;\n\
}\n";

const SECOND_C: &str = "int b_first(int x) { return x + 7; }\n\
int b_second(int x) { return x * 5 + b_first(x); }\n\
int b_third(int x) { return b_second(x) - 1; }\n\
int main(void) { int s = 0; for (int i = 0; i < 3; i++) s += b_third(i); return s > 1000; }\n";

/// Short threads, one after the other (`argv[1]` of them).
const MANY_C: &str = "#include <pthread.h>\n\
#include <stdlib.h>\n\
int leaf(int x) { return x * 2; }\n\
void *worker(void *a) { long s = 0; for (long i = 0; i < (long)a; i++) s += leaf(i); return (void *)s; }\n\
int main(int argc, char **argv) {\n\
  int n = atoi(argv[1]);\n\
  for (int i = 0; i < n; i++) { pthread_t t; pthread_create(&t, 0, worker, (void *)100L); pthread_join(t, 0); }\n\
  return 0;\n\
}\n";

fn build(dir: &Path, name: &str, src: &str, opts: &[&str]) -> String {
    let c = dir.join(format!("{name}.c"));
    std::fs::write(&c, src).unwrap();
    let exe = dir.join(name);
    let built = Command::new("gcc")
        .args(["-pg", "-O0", "-no-pie"])
        .args(opts)
        .arg("-o")
        .arg(&exe)
        .arg(&c)
        .status()
        .unwrap();
    assert!(built.success(), "cannot build {name}.c");
    exe.to_string_lossy().into_owned()
}

/// `record -S` (under `sh -c PREFIX; exec ...`), then `utrace script -S` over the same data:
/// their outputs.
fn record_then_script(dir: &Path, prefix: &str, prog: &[&str]) -> (String, String) {
    let py = dir.join("names.py");
    std::fs::write(&py, NAMES_PY).unwrap();
    let data = dir.join("data");
    let line = format!(
        "{prefix}; exec {} record --no-event --no-sched -S {} -d {} {}",
        util::utrace_bin().display(),
        py.display(),
        data.display(),
        prog.join(" ")
    );
    let mut cmd = Command::new("sh");
    cmd.args(["-c", &line]);
    let live = util::run_for(cmd, Duration::from_secs(120));
    live.assert_success();
    let mut cmd = Command::new(util::utrace_bin());
    cmd.args(["script", "--no-event", "-S"])
        .arg(&py)
        .arg("-d")
        .arg(&data);
    let after = util::run(cmd);
    after.assert_success();
    (live.stdout, after.stdout)
}

#[test]
fn record_script_names_the_program_an_exec_started() {
    let tmp = tempfile::tempdir().unwrap();
    let second = build(tmp.path(), "second", SECOND_C, &[]);
    let first = build(tmp.path(), "first", FIRST_C, &[]);
    let (live, after) = record_then_script(tmp.path(), "true", &[&first, &second]);
    assert!(
        after.contains("b_first 3") && after.contains("a_work 20000"),
        "{after}"
    );
    assert_eq!(live, after, "record -S, then script -S");
}

#[test]
fn record_script_of_many_threads_under_few_descriptors() {
    let tmp = tempfile::tempdir().unwrap();
    let many = build(tmp.path(), "many", MANY_C, &["-pthread"]);
    let (live, after) = record_then_script(tmp.path(), "ulimit -n 64", &[&many, "150"]);
    assert!(after.contains("leaf 15000"), "{after}");
    assert_eq!(live, after, "record -S, then script -S");
}
