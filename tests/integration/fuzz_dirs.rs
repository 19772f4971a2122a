//! A fuzzing run over damaged data directories, through every analysis command (ignored by
//! default: it takes minutes). Run it with
//!
//! ```sh
//! cargo build --release && UTRACE_FUZZ_INPUTS=2000 \
//!     cargo test --release -p utrace-tests -- --ignored --nocapture fuzz_dirs
//! ```
//!
//! Each input is a copy of one fixture (or of `abc` with kernel data) with one to three kinds of
//! damage: bytes flipped, a file truncated, extended with junk, replaced with junk, deleted, made
//! sparse and huge (past the read limits), or replaced by a special file (a symlink to
//! `/dev/zero` or `/dev/urandom`, a FIFO, a directory, a dangling symlink, a symlink to another
//! file of the directory). Every command runs with a time limit and an address-space limit
//! ([`crate::bounded`]); the run fails on any panic, signal, hang or exhausted memory, and prints
//! the numbers: inputs, runs, exit statuses, panics, hangs, peak RSS. `UTRACE_FUZZ_SEED` changes
//! the inputs (default 1); a failing input's directory is kept and its path printed.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use crate::bounded::{self, Bounded};
use crate::special_files::{copy_fixture, make_special, Special};
use crate::util;

const FIXTURES: &[&str] = &[
    "abc", "cxx", "exec", "exit", "fib-args", "fork", "longjmp", "signal", "thread",
];

const COMMANDS: &[&[&str]] = &[
    &["replay"],
    &["replay", "-a", "-f", "+addr"],
    &["report"],
    &["graph"],
    &["info"],
    &["info", "--task"],
    &["dump"],
    &["dump", "--chrome"],
];

/// A small deterministic generator (splitmix64), so an input is reproducible from its number.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }

    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
}

/// Damages one file of `dir`; returns what was done.
fn damage(dir: &Path, rng: &mut Rng) -> String {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("read dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    // Favour the files every command reads.
    let name = match rng.below(4) {
        0 => ["info", "task.txt"][rng.below(2)].to_string(),
        1 => names
            .iter()
            .filter(|n| n.ends_with(".dat") || n.ends_with(".map"))
            .nth(rng.below(4))
            .unwrap_or(&names[0])
            .clone(),
        _ => names[rng.below(names.len())].clone(),
    };
    let path = dir.join(&name);
    let kind = rng.below(9);
    let regular = std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_file());
    if kind >= 6 || !regular {
        let special = match rng.below(6) {
            0 => Special::Zero,
            1 => Special::Urandom,
            2 => Special::Fifo,
            3 => Special::Dir,
            4 => {
                let _ = std::fs::remove_dir_all(&path).or_else(|_| std::fs::remove_file(&path));
                std::os::unix::fs::symlink("/nonexistent", &path).expect("symlink");
                return format!("{name}: dangling symlink");
            }
            _ => {
                let other = &names[rng.below(names.len())];
                let _ = std::fs::remove_dir_all(&path).or_else(|_| std::fs::remove_file(&path));
                std::os::unix::fs::symlink(dir.join(other), &path).expect("symlink");
                return format!("{name}: symlink to {other}");
            }
        };
        make_special(&path, special);
        return format!("{name}: {special:?}");
    }
    let mut bytes = std::fs::read(&path).expect("read regular file");
    let what = match kind {
        0 | 1 if !bytes.is_empty() => {
            let n = 1 + rng.below(8);
            for _ in 0..n {
                let i = rng.below(bytes.len());
                bytes[i] ^= 1 << rng.below(8);
            }
            format!("{name}: {n} bits flipped")
        }
        2 => {
            let at = rng.below(bytes.len() + 1);
            bytes.truncate(at);
            format!("{name}: truncated at {at}")
        }
        3 => {
            let n = rng.below(512);
            bytes.extend(rng.bytes(n));
            format!("{name}: {n} junk bytes appended")
        }
        4 => {
            let n = rng.below(4096);
            bytes = rng.bytes(n);
            format!("{name}: replaced by {n} junk bytes")
        }
        5 => {
            // Sparse, past the largest read limit.
            let len = (1 << 20) * (64 + rng.below(300) as u64);
            std::fs::File::options()
                .write(true)
                .open(&path)
                .and_then(|f| f.set_len(len))
                .expect("set_len");
            return format!("{name}: sparse, {len} bytes");
        }
        _ => {
            std::fs::remove_file(&path).expect("remove");
            return format!("{name}: deleted");
        }
    };
    std::fs::write(&path, bytes).expect("write");
    what
}

/// What went wrong in one run, if anything.
fn failure(out: &Bounded) -> Option<&'static str> {
    if out.hung() {
        Some("hang")
    } else if out.panicked() {
        Some("panic")
    } else if out.out_of_memory() {
        Some("out of memory")
    } else if out.signal().is_some() {
        Some("signal")
    } else {
        None
    }
}

#[derive(Default)]
struct Tally {
    runs: usize,
    statuses: BTreeMap<String, usize>,
    failures: BTreeMap<&'static str, usize>,
    max_rss_kib: u64,
    max_rss_run: String,
    max_secs: f64,
    reports: Vec<String>,
}

fn fuzz_one(index: usize, seed: u64, tmp: &Path, tally: &Mutex<Tally>) {
    let mut rng = Rng(seed.wrapping_mul(1_000_003).wrapping_add(index as u64));
    // One in ten: abc with kernel data.
    let pick = rng.below(FIXTURES.len() + 1);
    let kernel = pick == FIXTURES.len();
    let fixture = FIXTURES[pick.min(FIXTURES.len() - 1)];
    let work = tmp.join(format!("input-{index}"));
    std::fs::create_dir(&work).expect("mkdir");
    let dir = copy_fixture(&work, if kernel { "abc" } else { fixture });
    if kernel {
        crate::kernel_replay::add_kernel_data(&dir, 20182);
    }
    let damages: Vec<String> = (0..1 + rng.below(3))
        .map(|_| damage(&dir, &mut rng))
        .collect();
    let mut failed = false;
    for cmd in COMMANDS {
        let mut c = Command::new(util::utrace_bin());
        c.args(*cmd).arg("-d").arg(&dir).arg("--no-pager");
        let out = bounded::run(c, Duration::from_secs(10), 2 << 30);
        let mut t = tally.lock().unwrap();
        t.runs += 1;
        let status = match (out.code(), out.signal()) {
            (Some(c), _) => format!("exit {c}"),
            (None, Some(s)) => format!("signal {s}"),
            _ => "hung".to_string(),
        };
        *t.statuses.entry(status).or_default() += 1;
        if out.max_rss_kib > t.max_rss_kib {
            t.max_rss_kib = out.max_rss_kib;
            t.max_rss_run = format!("input {index} ({}), {}", damages.join("; "), cmd.join(" "));
        }
        t.max_secs = t.max_secs.max(out.elapsed.as_secs_f64());
        if let Some(what) = failure(&out) {
            failed = true;
            *t.failures.entry(what).or_default() += 1;
            t.reports.push(format!(
                "{what}: input {index} ({}):\n{out}",
                damages.join("; ")
            ));
        }
    }
    if failed {
        let keep = tmp.join(format!("kept-{index}"));
        let _ = std::fs::rename(&work, &keep);
        tally
            .lock()
            .unwrap()
            .reports
            .push(format!("input {index} kept in {}", keep.display()));
    } else {
        let _ = std::fs::remove_dir_all(&work);
    }
}

#[test]
#[ignore = "a fuzzing run of minutes: see the module documentation"]
fn damaged_directories() {
    let env = |name: &str, default: u64| {
        std::env::var(name)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    };
    let inputs = env("UTRACE_FUZZ_INPUTS", 500) as usize;
    let seed = env("UTRACE_FUZZ_SEED", 1);
    let tmp: PathBuf = tempfile::tempdir().expect("tempdir").keep();
    let tally = Mutex::new(Tally::default());
    let next = AtomicUsize::new(0);
    let workers = std::thread::available_parallelism().map_or(2, |n| n.get());
    let start = std::time::Instant::now();
    std::thread::scope(|s| {
        for _ in 0..workers {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= inputs {
                    break;
                }
                fuzz_one(i, seed, &tmp, &tally);
            });
        }
    });
    let t = tally.into_inner().unwrap();
    eprintln!(
        "fuzz_dirs: seed {seed}: {inputs} inputs, {} runs in {:.0} s; statuses {:?}; \
         failures {:?}; max RSS {} KiB ({}); slowest run {:.2} s",
        t.runs,
        start.elapsed().as_secs_f64(),
        t.statuses,
        t.failures,
        t.max_rss_kib,
        t.max_rss_run,
        t.max_secs
    );
    if t.reports.is_empty() {
        let _ = std::fs::remove_dir_all(&tmp);
    }
    assert!(
        t.reports.is_empty(),
        "{}",
        t.reports
            .iter()
            .take(10)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n\n")
    );
}
