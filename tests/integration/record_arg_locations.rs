//! Argument locations (`arg7%stack+1`, `arg1%RDI`, `arg1/t16:ld%RDI+XMM0`), long doubles
//! (`fparg1/80`, `retval/f80`) and floats next to integers, on testprogs/locs.c.
//!
//! Each spec set is recorded by `utrace record` and by `uftrace record --no-event`, in every
//! build mode. `uftrace replay` and `utrace replay` of utrace's data must print, per task and
//! by function column, what `uftrace replay` of uftrace's data prints, once the values uftrace
//! 0.13 gets wrong ([`UFTRACE_WRONG`]) are replaced in its output by the right ones, which
//! utrace's output must then show.

use crate::normalize::{self, Anchor};
use crate::record_matrix::MODES;
use crate::util::{self, Mode};

/// Every location spelled explicitly: registers in any case, `%stackN` and `%stack+N`, `/i32`
/// on stack words, long doubles on the stack, register pairs of every kind, a struct on the
/// stack and one behind a pointer in a register.
const EXPLICIT: &[&str] = &[
    "-A",
    "many@arg1%RDI,arg2%Rsi,arg3%rcx,arg4%R8,arg5%r9,arg6%RDX,arg7%stack1,arg8%stack+2",
    "-A",
    "many_int@arg1/i32%rdi,arg7/i32%stack+1,arg8/i32%stack2,arg9/i32%stack+3",
    "-R",
    "many_int@retval/i32",
    "-A",
    "ldmul@fparg1/80%stack+1,fparg2/80%stack3",
    "-R",
    "ldmul@retval/f80",
    "-A",
    "ld_after@arg1,arg7%stack+1,fparg1/80%stack+3",
    "-R",
    "ld_after@retval/f80",
    "-A",
    "ld_mixed@arg1/i32,fparg1/80%stack+1,fparg2%XMM0,fparg3/80%stack+3",
    "-R",
    "ld_mixed@retval/f64",
    "-A",
    "fmix@arg1/i32,fparg1/32,arg2,fparg2/32",
    "-R",
    "fmix@retval/f32",
    "-A",
    "pair@arg1/i32%RDI,fparg1%xmm0,arg2/i32%rsi",
    "-R",
    "pair@retval/i32",
    "-A",
    "ld_sum@arg1/t16:ld%RDI+XMM0",
    "-R",
    "ld_sum@retval/f64",
    "-A",
    "dl_sum@arg1/t16:dl%XMM0+RDI",
    "-R",
    "dl_sum@retval/f64",
    "-A",
    "dd_sum@arg1/t16:dd%XMM0+XMM1",
    "-R",
    "dd_sum@retval/f64",
    "-A",
    "ll_sum@arg1/t16:ll%RDI+RSI",
    "-R",
    "ll_sum@retval",
    "-A",
    "big_sum@arg1/t24:big%stack+1,arg2%RDI",
    "-R",
    "big_sum@retval",
    "-A",
    "big_ref@arg1/t24:big%RDI",
    "-R",
    "big_ref@retval",
];

/// The same without locations: the convention's defaults (`argspec::locations`), which for
/// long doubles uftrace does not know.
const DEFAULTS: &[&str] = &[
    "-A",
    "many@arg1,arg2,arg3,arg4,arg5,arg6,arg7,arg8",
    "-R",
    "many@retval",
    "-A",
    "many_int@arg7/i32,arg9/i32",
    "-A",
    "ldmul@fparg1/80,fparg2/80",
    "-R",
    "ldmul@retval/f80",
    "-A",
    "ld_after@arg7,fparg1/80",
    "-A",
    "ld_mixed@arg1/i32,fparg1/80,fparg2,fparg3/80",
    "-A",
    "pair@arg1,fparg1,arg2",
    "-A",
    "fmix@fparg2/32,fparg1/32",
    "-A",
    "big_sum@arg1/t24:big",
];

const CASES: &[&[&str]] = &[EXPLICIT, DEFAULTS];

/// What uftrace 0.13 prints wrong on locs.c, and the right text: long doubles without a
/// location (it reads no stack word for them, and takes the double after one for `xmm1`),
/// and float return values of functions with float arguments.
const UFTRACE_WRONG: &[(&str, &str)] = &[
    ("ldmul(0.000000, 0.000000)", "ldmul(1.500000, 4.000000)"),
    ("ld_after(7, 0.000000)", "ld_after(7, 2.750000)"),
    (
        "ld_mixed(5, 0.000000, 0.000000, 0.000000)",
        "ld_mixed(5, 0.125000, 1.500000, -6.625000)",
    ),
    (
        "fmix(1, 2.500000, 3, 4.500000) = 0.000000;",
        "fmix(1, 2.500000, 3, 4.500000) = 11.000000;",
    ),
    ("ld_sum(ld{...}) = 0.000000;", "ld_sum(ld{...}) = 3.500000;"),
    ("dl_sum(dl{...}) = 0.000000;", "dl_sum(dl{...}) = 5.250000;"),
    ("dd_sum(dd{...}) = 0.000000;", "dd_sum(dd{...}) = 2.750000;"),
];

/// What utrace must show for each spec set (in builds where arguments are recorded), whatever
/// uftrace shows.
const RIGHT: &[(&[&str], &[&str])] = &[
    (
        EXPLICIT,
        &[
            "many(1, 2, 4, 5, 6, 3, 7, 8);",
            "many_int(-1, -7, -8, -9) = -45;",
            "ldmul(1.500000, 4.000000) = 6.000000;",
            "ld_after(1, 7, 2.750000) = 30.750000;",
            "ld_mixed(5, 0.125000, 1.500000, -6.625000) = 0.000000;",
            "fmix(1, 2.500000, 3, 4.500000) = 11.000000;",
            "pair(1, 2.000000, 3) = 6;",
            "ld_sum(ld{...}) = 3.500000;",
            "big_sum(big{...}, 9) = 609;",
        ],
    ),
    (
        DEFAULTS,
        &[
            "many(1, 2, 3, 4, 5, 6, 7, 8) = 36;",
            "many_int(-7, -9);",
            "ldmul(1.500000, 4.000000) = 6.000000;",
            "ld_after(7, 2.750000);",
            "ld_mixed(5, 0.125000, 1.500000, -6.625000);",
            "pair(1, 2.000000, 3);",
            "fmix(4.500000, 2.500000);",
        ],
    ),
];

/// uftrace's output with its known-wrong values replaced by the right ones.
fn correct_uftrace(text: &str) -> String {
    UFTRACE_WRONG
        .iter()
        .fold(text.to_string(), |t, (wrong, right)| {
            t.replace(wrong, right)
        })
}

fn reduce(out: &str) -> String {
    normalize::by_task(&util::mask_addresses(out), Anchor::Start)
}

fn compare(opts: &[&str], mode: Mode) -> Vec<String> {
    let what = format!("locs [{}] {}", mode.dir_name(), opts.join(" "));
    let exe = util::testprog("locs", mode);
    let tmp = tempfile::tempdir().unwrap();
    let (theirs, ours) = (
        tmp.path().join("uftrace.data"),
        tmp.path().join("utrace.data"),
    );
    let reference = util::record_with(true, &theirs, &exe, &[], opts);
    let recorded = util::record_with(false, &ours, &exe, &[], opts);
    let mut failures = Vec::new();
    // Exit 3: the program saw an x87 exception flag it did not raise itself.
    for (who, out) in [("uftrace", &reference), ("utrace", &recorded)] {
        if out.status.code() != Some(0) {
            failures.push(format!("{what}: {who} record failed:\n{out}"));
        }
    }
    let want = correct_uftrace(&reduce(&util::uftrace_replay(&theirs, &[]).stdout));
    failures.extend(util::compare_replays(&what, &want, &ours, reduce));
    if mode != Mode::Cyg {
        let got = util::utrace_replay(&ours, &[]).stdout;
        let right = RIGHT
            .iter()
            .find(|(o, _)| *o == opts)
            .map_or(&[][..], |r| r.1);
        for line in right {
            if !got.contains(line) {
                failures.push(format!("{what}: utrace's replay lacks `{line}`:\n{got}"));
            }
        }
    }
    failures
}

#[test]
fn locations_match_uftrace_and_are_right() {
    if !util::need_uftrace("locations_match_uftrace_and_are_right") {
        return;
    }
    let mut failures = Vec::new();
    for case in CASES {
        for mode in MODES {
            failures.extend(compare(case, mode));
        }
    }
    util::assert_no_failures(&failures);
}

/// The bytes of each struct argument, read by `uftrace dump` from utrace's data (replay shows
/// structs as `ld{...}`): register pairs of each kind, a struct on the stack and one behind
/// the pointer of an invisible reference.
#[test]
fn struct_arguments_hold_the_right_bytes() {
    if !util::need_uftrace("struct_arguments_hold_the_right_bytes") {
        return;
    }
    let words = |w: &[[u8; 8]]| w.concat();
    let want: &[(&str, Vec<u8>)] = &[
        ("ld_sum", words(&[3u64.to_le_bytes(), 0.5f64.to_le_bytes()])),
        (
            "dl_sum",
            words(&[1.25f64.to_le_bytes(), 4u64.to_le_bytes()]),
        ),
        (
            "dd_sum",
            words(&[2.5f64.to_le_bytes(), 0.25f64.to_le_bytes()]),
        ),
        ("ll_sum", words(&[10u64.to_le_bytes(), 20u64.to_le_bytes()])),
        ("big_sum", words(&[100u64, 200, 300].map(u64::to_le_bytes))),
        ("big_ref", words(&[100u64, 200, 300].map(u64::to_le_bytes))),
    ];
    // Only the struct items: uftrace 0.13's dump aborts on `f80` items.
    let opts: Vec<&str> = EXPLICIT
        .chunks(2)
        .filter(|o| o[0] == "-A" && o[1].contains("/t"))
        .flatten()
        .copied()
        .collect();
    for mode in [Mode::Pg, Mode::Fentry] {
        let exe = util::testprog("locs", mode);
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("utrace.data");
        util::record_with(false, &dir, &exe, &[], &opts).assert_success();
        let mut cmd = std::process::Command::new(util::uftrace_bin());
        cmd.arg("dump").arg("-d").arg(&dir);
        let dump = util::run(cmd);
        dump.assert_success();
        for (func, bytes) in want {
            let got = struct_bytes(&dump.stdout, func);
            assert_eq!(got.as_ref(), Some(bytes), "{func} [{mode:?}]:\n{dump}");
        }
    }
}

/// The hex bytes `uftrace dump` prints under `args[0] struct …:` for the entry of `func`.
fn struct_bytes(dump: &str, func: &str) -> Option<Vec<u8>> {
    let entry = format!("[entry] {func}(");
    let mut lines = dump.lines().skip_while(|l| !l.contains(&entry)).skip(1);
    lines.find(|l| l.trim_start().starts_with("args[0] struct"))?;
    let mut out = Vec::new();
    for line in lines.take_while(|l| l.starts_with('\t')) {
        for hex in line.split_whitespace() {
            out.push(u8::from_str_radix(hex, 16).ok()?);
        }
    }
    Some(out)
}

/// `retval/f80` on a function that returns no long double (x87 empty): utrace records 0 and
/// the program's x87 flags stay clear (locs exits 3 otherwise); uftrace 0.13 loads from the
/// empty register there, which changes the program's own results (it exits 1).
#[test]
fn long_double_spec_on_another_function_leaves_the_program_alone() {
    for mode in [Mode::Pg, Mode::Fentry] {
        let exe = util::testprog("locs", mode);
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("utrace.data");
        let opts = ["-R", "many@retval/f80", "-R", "ldmul@retval/f80"];
        util::record_with(false, &dir, &exe, &[], &opts).assert_success();
        let out = util::utrace_replay(&dir, &[]);
        assert!(out.stdout.contains("many() = 0.000000;"), "{out}");
        assert!(out.stdout.contains("ldmul() = 6.000000;"), "{out}");
    }
}

/// Locations the runtime cannot read are refused at record time with one `Usage:` line each
/// (uftrace records zeros for the stack offsets and reads garbage for the others); the entry
/// is left out and the program recorded.
#[test]
fn unreadable_locations_are_refused() {
    let exe = util::testprog("locs", Mode::Pg);
    for (spec, message) in [
        ("many@arg1%stack0", "invalid stack offset: arg1%stack0"),
        (
            "many@arg8%stack+2+1",
            "invalid stack offset: arg8%stack+2+1",
        ),
        ("many@arg1%rax", "unknown register name: arg1%rax"),
        ("many@arg1%STACK+1", "unknown register name: arg1%STACK+1"),
        (
            "ll_sum@arg1/t16%RDI+RAX",
            "unknown register name: arg1/t16%RDI+RAX",
        ),
        (
            "ldmul@fparg1/80%xmm0",
            "unsupported argument location: fparg1/80%xmm0",
        ),
    ] {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("utrace.data");
        let out = util::record_with(false, &dir, &exe, &[], &["-A", spec]);
        out.assert_success();
        // On stdout, as uftrace prints its `Usage:` lines.
        let text = format!("{}{}", out.stdout, out.stderr);
        let lines: Vec<&str> = text.lines().filter(|l| l.contains(message)).collect();
        assert_eq!(lines, [format!("Usage: {message}")], "{spec}:\n{out}");
        let replay = util::utrace_replay(&dir, &[]);
        replay.assert_success();
        assert!(replay.stdout.contains("main() {"), "{spec}:\n{replay}");
    }
}
