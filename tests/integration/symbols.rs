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
