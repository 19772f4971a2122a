//! Replays randomly damaged copies of a real (uftrace-recorded) data directory: whatever the
//! damage, opening and replaying must end with output or an error, never a panic.

use proptest::prelude::*;
use std::fs;
use std::path::{Path, PathBuf};

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/fib-args")
}

fn copy_dir(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for e in fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        fs::copy(e.path(), to.join(e.file_name())).unwrap();
    }
}

/// Files worth damaging (large libc symbol tables only slow the test down).
fn targets(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            fs::metadata(p)
                .map(|m| m.len() < 64 * 1024)
                .unwrap_or(false)
        })
        .collect();
    v.sort();
    v
}

#[derive(Debug, Clone)]
enum Damage {
    Flip { file: usize, at: usize, xor: u8 },
    Truncate { file: usize, keep: usize },
    Garbage { file: usize, bytes: Vec<u8> },
    Delete { file: usize },
}

fn damage() -> impl Strategy<Value = Damage> {
    prop_oneof![
        4 => (any::<usize>(), any::<usize>(), 1u8..).prop_map(|(file, at, xor)| Damage::Flip { file, at, xor }),
        2 => (any::<usize>(), any::<usize>()).prop_map(|(file, keep)| Damage::Truncate { file, keep }),
        1 => (any::<usize>(), proptest::collection::vec(any::<u8>(), 0..64))
            .prop_map(|(file, bytes)| Damage::Garbage { file, bytes }),
        1 => any::<usize>().prop_map(|file| Damage::Delete { file }),
    ]
}

fn apply(dir: &Path, d: &Damage) {
    let files = targets(dir);
    if files.is_empty() {
        return;
    }
    let pick = |i: usize| &files[i % files.len()];
    match d {
        Damage::Flip { file, at, xor } => {
            let p = pick(*file);
            let mut b = fs::read(p).unwrap();
            if !b.is_empty() {
                let i = at % b.len();
                b[i] ^= xor;
                fs::write(p, b).unwrap();
            }
        }
        Damage::Truncate { file, keep } => {
            let p = pick(*file);
            let b = fs::read(p).unwrap();
            let n = if b.is_empty() { 0 } else { keep % b.len() };
            fs::write(p, &b[..n]).unwrap();
        }
        Damage::Garbage { file, bytes } => fs::write(pick(*file), bytes).unwrap(),
        Damage::Delete { file } => fs::remove_file(pick(*file)).unwrap(),
    }
}

fn replay_all(dir: &Path, cfg: &replay::Config, opts: &replay::ReplayOptions) {
    let Ok(data) = record_format::TraceDir::open(dir) else {
        return;
    };
    let mut out = Vec::new();
    let _ = replay::replay(&data, cfg, opts, &mut out, &mut |_| {});
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn damaged_data_never_panics(damages in proptest::collection::vec(damage(), 1..4), variant in 0usize..4) {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("data");
        copy_dir(&fixture(), &dir);
        for d in &damages {
            apply(&dir, d);
        }
        let mut cfg = replay::Config::default();
        let mut opts = replay::ReplayOptions::default();
        match variant {
            1 => cfg.depth = Some(2),
            2 => cfg.time_filter = Some(1),
            3 => { cfg.filters = vec!["fib".into()]; opts.flat = false; }
            _ => {}
        }
        replay_all(&dir, &cfg, &opts);
        opts.flat = true;
        replay_all(&dir, &replay::Config::default(), &opts);
    }
}
