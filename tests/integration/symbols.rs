//! Symbol sources: without `.sym` files utrace reads the ELF files named in the session map,
//! as uftrace does on the recording machine.

use crate::normalize;
use crate::util::{self, Mode};
use std::fs;

/// Removes every `.sym` file of a uftrace recording and checks that `utrace replay` still
/// prints what uftrace printed with them (names now come from the program and libraries).
#[test]
fn elf_fallback_without_sym_files() {
    if !util::need_uftrace("elf_fallback_without_sym_files") {
        return;
    }
    for (prog, args) in [("abc", &[][..]), ("cxx", &[][..]), ("libcall", &[][..])] {
        let exe = util::testprog(prog, Mode::Pg);
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("data");
        util::uftrace_record(&dir, &[], &exe, args);
        let expected = util::uftrace_replay(&dir, &[]);
        expected.assert_success();
        for e in fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            if p.extension().is_some_and(|x| x == "sym") {
                fs::remove_file(p).unwrap();
            }
        }
        let actual = util::utrace_replay(&dir, &[]);
        actual.assert_success();
        let want = normalize::whole(&expected.stdout);
        let got = normalize::whole(&actual.stdout);
        assert_eq!(
            want,
            got,
            "{prog}: replay without .sym files differs:\n{}",
            normalize::diff(&want, &got)
        );
    }
}

/// `--with-syms DIR`: a program recorded once, its `.sym` file kept, then stripped. Replaying a
/// recording of the stripped program with `--with-syms DIR`, and recording it with
/// `--with-syms DIR`, give the names back, in utrace's replay as in uftrace's.
#[test]
fn with_syms_names_a_stripped_program() {
    let tmp = tempfile::tempdir().unwrap();
    let exe = tmp.path().join("prog");
    // A copy by `cp`: a descriptor left open for writing would make running it fail (ETXTBSY).
    let cp = std::process::Command::new("cp")
        .arg(util::testprog("abc", Mode::Pg))
        .arg(&exe)
        .status()
        .unwrap();
    assert!(cp.success());
    let first = tmp.path().join("first");
    util::record_with(false, &first, &exe, &[], &[]).assert_success();
    let syms = tmp.path().join("syms");
    fs::create_dir(&syms).unwrap();
    fs::copy(first.join("prog.sym"), syms.join("prog.sym")).unwrap();
    let strip = std::process::Command::new("strip")
        .arg(&exe)
        .status()
        .unwrap();
    assert!(strip.success());
    let with_syms = format!("--with-syms={}", syms.display());
    let stripped = tmp.path().join("stripped");
    util::record_with(false, &stripped, &exe, &[], &[]).assert_success();
    let plain = util::utrace_replay(&stripped, &[]);
    assert!(!plain.stdout.contains("main() {"), "{plain}");
    let kept = tmp.path().join("kept");
    util::record_with(false, &kept, &exe, &[], &[&with_syms]).assert_success();
    let mut replays = vec![
        util::utrace_replay(&stripped, &[&with_syms]),
        util::utrace_replay(&kept, &[]),
    ];
    if util::uftrace_available() {
        replays.push(util::uftrace_replay(&stripped, &[&with_syms]));
        replays.push(util::uftrace_replay(&kept, &[]));
    }
    for r in replays {
        assert!(
            r.stdout.contains("main() {\n") && r.stdout.contains("|       c() {\n"),
            "{r}"
        );
    }
}
