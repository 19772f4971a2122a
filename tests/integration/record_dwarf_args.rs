//! Argument specs from the program's DWARF (`-a`, and `-A .`/`-R .`: entries without items)
//! on testprogs/dtypes.cc, against uftrace 0.13.
//!
//! * the `.dbg` file's `A:`/`R:` lines are uftrace's, function by function, except the lines of
//!   [`KNOWN_DIFFERENCES`] (where uftrace reads the wrong registers), and so are its enums;
//! * in every build mode, `uftrace replay` and `utrace replay` of utrace's data print per task
//!   and by function column what `uftrace replay` of uftrace's data prints, with addresses
//!   masked, and with the return values uftrace gets wrong ([`WRONG_IN_UFTRACE`]) masked and
//!   checked apart.

use std::collections::BTreeMap;
use std::path::Path;

use crate::normalize::{self, Anchor};
use crate::record_matrix::MODES;
use crate::util::{self, Mode};

/// `.dbg` lines where utrace follows the SysV convention and uftrace 0.13 does not:
/// (function, uftrace's line, utrace's line).
const KNOWN_DIFFERENCES: &[(&str, &str, &str)] = &[
    // `struct { int v[3]; }` is two INTEGER eightbytes; uftrace counts the array as one.
    (
        "take_arr",
        "A: @arg1/t12:Arr%RDI",
        "A: @arg1/t12:Arr%RDI+RSI",
    ),
];

/// Functions whose return value uftrace 0.13 records wrong with automatic specs, with what
/// utrace shows (`mixf` returns a float: uftrace stores 0.0; `take_dd` takes a struct of
/// two doubles).
const WRONG_IN_UFTRACE: &[(&str, &str)] = &[
    ("mixf(1, 2.500000, 3, 4.500000)", "11.000000"),
    ("take_dd(DD{...})", "4.000000"),
];

/// Lines of a `.dbg` file: the `A:`/`R:` lines of each function by address (with its name),
/// and the `E:` lines in order.
struct Dbg {
    funcs: BTreeMap<String, (String, Vec<String>)>,
    enums: Vec<String>,
}

fn read_dbg(dir: &Path, exe: &Path) -> Dbg {
    let name = format!("{}.dbg", exe.file_name().unwrap().to_string_lossy());
    let text = std::fs::read_to_string(dir.join(&name))
        .unwrap_or_else(|e| panic!("{}: {e}", dir.join(&name).display()));
    let mut dbg = Dbg {
        funcs: BTreeMap::new(),
        enums: Vec::new(),
    };
    let mut current = None;
    for line in text.lines() {
        if let Some(f) = line.strip_prefix("F: ") {
            let (addr, name) = f.split_once(' ').unwrap_or((f, ""));
            dbg.funcs
                .insert(addr.to_string(), (name.to_string(), Vec::new()));
            current = Some(addr.to_string());
        } else if line.starts_with("A: ") || line.starts_with("R: ") {
            let addr = current.as_ref().expect("A:/R: after F:");
            dbg.funcs.get_mut(addr).unwrap().1.push(line.to_string());
        } else if line.starts_with("E: ") {
            dbg.enums.push(line.to_string());
        }
    }
    dbg
}

fn record_both(exe: &Path, opts: &[&str], tmp: &Path) -> (std::path::PathBuf, std::path::PathBuf) {
    let (theirs, ours) = (tmp.join("uftrace.data"), tmp.join("utrace.data"));
    util::record_with(true, &theirs, exe, &[], opts).assert_success();
    util::record_with(false, &ours, exe, &[], opts).assert_success();
    (theirs, ours)
}

/// `-a`: the specs of the `.dbg` file are uftrace's.
#[test]
fn dbg_specs_match_uftrace() {
    if !util::need_uftrace("dbg_specs_match_uftrace") {
        return;
    }
    let exe = util::testprog("dtypes", Mode::Pg);
    let tmp = tempfile::tempdir().unwrap();
    let (theirs, ours) = record_both(&exe, &["-a"], tmp.path());
    let (want, got) = (read_dbg(&theirs, &exe), read_dbg(&ours, &exe));
    let mut failures = Vec::new();
    for (addr, (name, lines)) in &want.funcs {
        let Some((_, ours)) = got.funcs.get(addr) else {
            failures.push(format!("{addr} {name}: not in utrace's .dbg"));
            continue;
        };
        let expected: Vec<String> = lines
            .iter()
            .map(|l| {
                KNOWN_DIFFERENCES
                    .iter()
                    .find(|(f, theirs, _)| f == name && theirs == l)
                    .map_or(l.clone(), |(_, _, ours)| ours.to_string())
            })
            .collect();
        if &expected != ours {
            failures.push(format!(
                "{addr} {name}:\n  uftrace: {lines:?}\n  utrace:  {ours:?}"
            ));
        }
    }
    for addr in got.funcs.keys().filter(|a| !want.funcs.contains_key(*a)) {
        failures.push(format!(
            "{addr} {}: not in uftrace's .dbg",
            got.funcs[addr].0
        ));
    }
    if want.enums != got.enums {
        failures.push(format!("enums: {:?} against {:?}", want.enums, got.enums));
    }
    // Every difference listed is still one (the list does not outlive the fix).
    for (f, theirs, _) in KNOWN_DIFFERENCES {
        let seen = want
            .funcs
            .values()
            .any(|(n, lines)| n == f && lines.iter().any(|l| l == theirs));
        if !seen {
            failures.push(format!("{f}: uftrace no longer writes {theirs}"));
        }
    }
    assert!(
        failures.is_empty(),
        "{} mismatch(es):\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// The value of each call of [`WRONG_IN_UFTRACE`] replaced by `?`.
fn mask_wrong_returns(text: &str) -> String {
    text.lines()
        .map(|line| {
            let func = line.rsplit(" | ").next().unwrap_or(line).trim_start();
            match WRONG_IN_UFTRACE
                .iter()
                .find(|(call, _)| func.starts_with(call))
            {
                Some((call, _)) => {
                    let head = &line[..line.len() - func.len()];
                    format!("{head}{call} = ?;\n")
                }
                None => format!("{line}\n"),
            }
        })
        .collect()
}

/// Records dtypes with `opts` by both tools in every build mode and compares the replays.
fn compare_all_modes(opts: &[&str]) {
    let mut failures = Vec::new();
    for mode in MODES {
        let exe = util::testprog("dtypes", mode);
        let what = format!("dtypes [{}] {}", mode.dir_name(), opts.join(" "));
        let tmp = tempfile::tempdir().unwrap();
        let (theirs, ours) = record_both(&exe, opts, tmp.path());
        let reduce = |out: &str| {
            normalize::by_task(
                &mask_wrong_returns(&util::mask_addresses(out)),
                Anchor::Start,
            )
        };
        let want = reduce(&util::uftrace_replay(&theirs, &[]).stdout);
        if mode != Mode::Cyg && !want.contains("take_point(Point{...})") {
            failures.push(format!(
                "{what}: uftrace's replay shows no arguments:\n{want}"
            ));
        }
        failures.extend(util::compare_replays(&what, &want, &ours, reduce));
        // In `-finstrument-functions` builds the hook runs after the arguments moved: neither
        // tool records them.
        if mode != Mode::Cyg {
            let out = util::utrace_replay(&ours, &[]);
            let masked = WRONG_IN_UFTRACE
                .iter()
                .filter(|(call, _)| want.contains(&format!("{call} = ?;")));
            for (call, value) in masked {
                let line = format!("{call} = {value};");
                if !out.stdout.contains(&line) {
                    failures.push(format!("{what}: no `{line}` in utrace's replay:\n{out}"));
                }
            }
        }
    }
    util::assert_no_failures(&failures);
}

#[test]
fn auto_args_replay_like_uftrace() {
    if util::need_uftrace("auto_args_replay_like_uftrace") {
        compare_all_modes(&["-a"]);
    }
}

/// `-A .` and `-R .`: every function with its automatic spec, from the `.dbg` file for the
/// program's functions and from the built-in prototypes for library calls.
#[test]
fn all_functions_replay_like_uftrace() {
    if util::need_uftrace("all_functions_replay_like_uftrace") {
        compare_all_modes(&["-A", ".", "-R", "."]);
    }
}

/// `-A PATTERN`/`-R PATTERN` without items: the automatic specs of the functions named only.
#[test]
fn some_functions_replay_like_uftrace() {
    if util::need_uftrace("some_functions_replay_like_uftrace") {
        compare_all_modes(&["-A", "^take_[pbe]", "-R", "^(make|give)_", "-A", "signal"]);
    }
}

#[test]
fn wrong_returns_are_masked() {
    let text = "   1.0 us [ 12] |   mixf(1, 2.500000, 3, 4.500000) = 0.000000;\n x | f(1) = 2;\n";
    assert_eq!(
        mask_wrong_returns(text),
        "   1.0 us [ 12] |   mixf(1, 2.500000, 3, 4.500000) = ?;\n x | f(1) = 2;\n"
    );
}
