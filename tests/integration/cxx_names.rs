//! C++ names as uftrace 0.13's simple demangling spells them (issue 18): `testprogs/cxxnames.cc`
//! replayed by both tools, with regex filters on its names, and a corpus of mangled names
//! (`tests/data/mangled-names.txt`: functions of libstdc++ and C++ programs, among them every
//! form that once differed: ABI tags, thunks, anonymous namespaces, lambdas, `operator()`,
//! conversion operators, `std::ostream`/`std::string` members, `std::operator&`, inheriting
//! constructors, `sr` expressions in return types, function-pointer return types, templated
//! constructors) given to functions of a C program by assembler labels, recorded by uftrace and
//! replayed by both tools name by name, in simple and in full demangling.
//! `bench/leveldb.sh` makes the same comparison on leveldb's db_bench.

use crate::normalize::{self, Anchor};
use crate::util::{self, Mode};
use std::process::Command;

/// Whether a test here records `prog` (see `record_matrix::every_testprog_is_recorded`).
pub fn covers(prog: &str) -> bool {
    prog == "cxxnames"
}

#[test]
fn cxx_names_match_uftrace() {
    if !util::need_uftrace("cxx_names_match_uftrace") {
        return;
    }
    let exe = util::testprog("cxxnames", Mode::Pg);
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    util::uftrace_record(&data, &[], &exe, &[]);
    let mut failures = Vec::new();
    for opts in [
        &[][..],
        &["-N", ".*ns1::.*"],
        &["-F", "ns1::.*", "-N", "bar2$", "-F", "bar2$"],
        &["-F", "ns1::_GLOBAL__N_1::Impl::Compare"],
        &["-F", "ns1::KeyComparator::operator\\(\\)"],
        &["-F", "_GLOBAL__sub_I_.*"],
        &["--demangle=no", "-F", "_ZNK3ns113KeyComparatorclEii"],
    ] {
        let want = normalize::by_task(&util::uftrace_replay(&data, opts).stdout, Anchor::Start);
        let got = util::utrace_replay(&data, opts);
        let got_text = normalize::by_task(&got.stdout, Anchor::Start);
        if want != got_text {
            failures.push(format!(
                "replay {}:\n{}\n{got}",
                opts.join(" "),
                normalize::diff(&want, &got_text)
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn demangling_matches_uftrace_on_a_corpus() {
    if !util::need_uftrace("demangling_matches_uftrace_on_a_corpus") {
        return;
    }
    let list = std::fs::read_to_string(util::tests_dir().join("data/mangled-names.txt")).unwrap();
    let names: Vec<&str> = list.lines().filter(|l| !l.is_empty()).collect();
    let tmp = tempfile::tempdir().unwrap();
    let mut src = String::new();
    for (i, n) in names.iter().enumerate() {
        src.push_str(&format!(
            "void f{i}(void) __asm__(\"{n}\");\nvoid f{i}(void) {{}}\n"
        ));
    }
    src.push_str("int main(void) {\n");
    for i in 0..names.len() {
        src.push_str(&format!("f{i}();\n"));
    }
    src.push_str("return 0;\n}\n");
    let c = tmp.path().join("names.c");
    std::fs::write(&c, src).unwrap();
    let exe = tmp.path().join("names");
    let built = Command::new("gcc")
        .args(["-pg", "-O0", "-o"])
        .arg(&exe)
        .arg(&c)
        .status()
        .unwrap();
    assert!(built.success());
    let data = tmp.path().join("data");
    util::uftrace_record(&data, &["--no-libcall"], &exe, &[]);
    let lines = |out: &str| -> Vec<String> {
        out.lines()
            .filter(|l| l.starts_with("  "))
            .map(|l| l.trim().to_string())
            .collect()
    };
    let mut differ = Vec::new();
    // Full mode is libstdc++'s `__cxa_demangle` in uftrace; utrace calls the same function.
    for mode in ["--demangle=simple", "--demangle=full"] {
        let want = lines(&util::uftrace_replay(&data, &["-f", "none", mode]).stdout);
        let got = lines(&util::utrace_replay(&data, &["-f", "none", mode]).stdout);
        assert_eq!(
            want.len(),
            names.len(),
            "uftrace's replay {mode} has a line per function"
        );
        differ.extend(
            names
                .iter()
                .zip(want.iter().zip(&got))
                .filter(|(_, (w, g))| w != g)
                .map(|(n, (w, g))| format!("{mode} {n}: uftrace {w}, utrace {g}")),
        );
    }
    assert!(differ.is_empty(), "{}", differ.join("\n"));
}
