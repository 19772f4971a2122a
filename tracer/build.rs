//! Builds libmcount.so and the Python script engine (libutrace_python.so, `script-python`)
//! and puts them in `OUT_DIR` for `utrace` to embed (`record::embedded`, `script::python`).
//!
//! Both are cdylibs of this workspace; the runtime is a cdylib of this workspace, which cargo gives no way to depend on from a
//! binary on stable (artifact dependencies are unstable), and reusing the `libmcount.so` of
//! the outer cargo invocation is not sound: nothing orders the two units, and `cargo install
//! --path tracer` does not build libmcount at all. So this script runs a nested
//! `cargo build -p libmcount -p script-python` of the same workspace (its root `Cargo.toml` holds the profile
//! settings the library is built with) with the same cargo, rustc, flags and profile, in a
//! target directory of its own under `OUT_DIR`: a nested cargo on the outer target directory
//! would wait forever for the outer build's lock. The nested cargo shares the outer one's
//! jobserver (`CARGO_MAKEFLAGS`), so `-j` still bounds the whole build, and it only rebuilds
//! what changed; this script reruns only when the libraries' (or record-format's, script-abi's) sources, the
//! manifests, the lock file or the profile variables change.
//!
//! `UTRACE_EMBED_LIBMCOUNT=/path/to/libmcount.so` and
//! `UTRACE_EMBED_PYTHON=/path/to/libutrace_python.so` embed those files instead (a packager's
//! prebuilt libraries, or a build that must not run cargo twice): with both set, no nested
//! build runs.

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Profile settings a nested build reads from the environment (cargo's `CARGO_PROFILE_*`).
const PROFILE_KEYS: [&str; 9] = [
    "LTO",
    "CODEGEN_UNITS",
    "OPT_LEVEL",
    "DEBUG",
    "PANIC",
    "STRIP",
    "DEBUG_ASSERTIONS",
    "OVERFLOW_CHECKS",
    "INCREMENTAL",
];

/// The libraries embedded: (package, file built, variable naming a prebuilt one).
const LIBRARIES: [(&str, &str, &str); 2] = [
    ("libmcount", "libmcount.so", "UTRACE_EMBED_LIBMCOUNT"),
    (
        "script-python",
        "libutrace_python.so",
        "UTRACE_EMBED_PYTHON",
    ),
];

fn main() {
    let out_dir = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let mut to_build = Vec::new();
    println!("cargo:rerun-if-env-changed=PYO3_PYTHON");
    for (package, file, var) in LIBRARIES {
        println!("cargo:rerun-if-env-changed={var}");
        match env::var_os(var).filter(|v| !v.is_empty()) {
            Some(prebuilt) => {
                let prebuilt = PathBuf::from(prebuilt);
                println!("cargo:rerun-if-changed={}", prebuilt.display());
                copy(&prebuilt, &out_dir.join(file));
            }
            None => to_build.push((package, file)),
        }
    }
    if to_build.is_empty() {
        return;
    }

    let manifest_dir = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets it"));
    let root = manifest_dir
        .parent()
        .expect("tracer/ has a parent")
        .to_path_buf();
    if !root.join("libmcount/Cargo.toml").is_file() {
        panic!(
            "utrace embeds libmcount.so, built from {}: the workspace is not there (set \
             UTRACE_EMBED_LIBMCOUNT and UTRACE_EMBED_PYTHON to embed prebuilt libraries)",
            root.join("libmcount").display()
        );
    }
    for path in [
        "Cargo.toml",
        "Cargo.lock",
        "libmcount/Cargo.toml",
        "libmcount/src",
        "record-format/Cargo.toml",
        "record-format/src",
        "script-python/Cargo.toml",
        "script-python/src",
        "script-abi/Cargo.toml",
        "script-abi/src",
    ] {
        println!("cargo:rerun-if-changed={}", root.join(path).display());
    }
    for profile in ["RELEASE", "DEV"] {
        for key in PROFILE_KEYS {
            println!("cargo:rerun-if-env-changed=CARGO_PROFILE_{profile}_{key}");
        }
    }

    // `PROFILE` is "release" for the release profile and every profile inheriting from it
    // (`cargo install`, `bench`), "debug" otherwise.
    let release = env::var("PROFILE").as_deref() == Ok("release");
    let target = env::var("TARGET").expect("cargo sets TARGET");
    let host = env::var("HOST").expect("cargo sets HOST");
    let nested_dir = out_dir.join("libmcount-target");
    let cargo = env::var_os("CARGO").unwrap_or_else(|| "cargo".into());

    let mut cmd = Command::new(cargo);
    cmd.arg("build")
        .arg("--manifest-path")
        .arg(root.join("Cargo.toml"))
        .args(to_build.iter().flat_map(|(p, _)| ["-p", p]))
        .arg("--lib")
        .arg("--target-dir")
        .arg(&nested_dir);
    if release {
        cmd.arg("--release");
    }
    // Without `--target` the flags apply to build scripts and proc macros too, as they did in
    // the outer build; with a different target they must not.
    if target != host {
        cmd.args(["--target", &target]);
    }
    // `cargo clippy` runs rustc through clippy-driver for the workspace's crates: the nested
    // build compiles the library, it does not lint it again. The outer build's target
    // directory is not this one.
    cmd.env_remove("RUSTC_WORKSPACE_WRAPPER")
        .env_remove("CARGO_TARGET_DIR")
        .env_remove("CARGO_BUILD_TARGET_DIR");
    // The copy embedded keeps its symbols but not its debug information (which would double
    // the size of `utrace`), unless the environment says otherwise.
    let strip = format!(
        "CARGO_PROFILE_{}_STRIP",
        if release { "RELEASE" } else { "DEV" }
    );
    if env::var_os(&strip).is_none() {
        cmd.env(strip, "debuginfo");
    }
    // The Python engine links the system's libpython (Debian's), whatever `python3` comes
    // first in PATH, unless PYO3_PYTHON says otherwise.
    if env::var_os("PYO3_PYTHON").is_none() && Path::new("/usr/bin/python3").exists() {
        cmd.env("PYO3_PYTHON", "/usr/bin/python3");
    }
    // RUSTC, CARGO_ENCODED_RUSTFLAGS (the outer build's flags for this target), the
    // CARGO_PROFILE_* variables, RUSTC_WRAPPER and the jobserver pass through as they are.
    // Its stdout would be read as build script directives.
    cmd.stdout(std::io::stderr());
    let status = cmd
        .status()
        .unwrap_or_else(|e| panic!("cannot run cargo to build the embedded libraries: {e}"));
    assert!(status.success(), "building the embedded libraries failed");

    let mut built = nested_dir;
    if target != host {
        built.push(&target);
    }
    built.push(if release { "release" } else { "debug" });
    for (_, file) in to_build {
        copy(&built.join(file), &out_dir.join(file));
    }
}

/// Copies `from` to `to` unless `to` already holds the same bytes (so that an unchanged
/// library does not make rustc embed it again).
fn copy(from: &Path, to: &Path) {
    let bytes =
        std::fs::read(from).unwrap_or_else(|e| panic!("cannot read {}: {e}", from.display()));
    if std::fs::read(to).ok().as_deref() != Some(&bytes[..]) {
        std::fs::write(to, &bytes).unwrap_or_else(|e| panic!("cannot write {}: {e}", to.display()));
    }
}
