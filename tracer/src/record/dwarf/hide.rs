//! `record -L LOC[@hide]`: location filters turned, before the program starts, into the hide
//! triggers the runtime already applies (`NAMES@MODULE,hide`), so that libmcount needs no
//! DWARF.
//!
//! The recorder reads the executable and the libraries it needs (`DT_NEEDED`, found as the
//! dynamic loader finds them: `RPATH`, `LD_LIBRARY_PATH`, `RUNPATH`, the system directories),
//! takes the source file of each function from its DWARF and decides each function with the
//! analysis' rule ([`record_format::location`]). As uftrace 0.13 does at record time, the
//! patterns see the file as the line program names it, the compile directory included
//! (`/src/prog.c` where the `.dbg` file says `prog.c`: `-L src` keeps it when recording, not
//! when replaying). Only modules that call the profiling hooks
//! (`mcount`, `__fentry__`, `__cyg_profile_func_enter`) can record functions; of those, a
//! module none of whose functions is shown gets one pattern for all of it, the others the
//! names to hide (one anchored regex per batch of names, or one exact name per trigger with
//! `--match=glob`). With a pattern that shows (no `@hide`), library calls have no location and
//! are hidden too (`@PLT`). A library loaded with `dlopen` is not known beforehand: its
//! functions are recorded, and replay's `-L` hides them.

use super::ModuleDebug;
use record_format::demangle::{demangle, Demangle};
use record_format::elf::{function_symbols, link_base, Elf};
use record_format::location::LocFilter;
use record_format::pattern::MatchType;
use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};

/// The imports of a module built with instrumentation.
const HOOKS: [&str; 5] = [
    "mcount",
    "_mcount",
    "__fentry__",
    "__cyg_profile_func_enter",
    "__cyg_profile_func_exit",
];

/// Names per anchored regex: keeps each expression well inside the regex crate's size limit.
const BATCH: usize = 200;

/// One instrumented module: its file's basename (as the session map will name it) and its
/// functions with their source files.
struct Module {
    base: String,
    funcs: Vec<(String, Option<String>)>,
}

/// The hide triggers for `specs` (the `-L` values) on the program `exe`, whose DWARF is
/// `exe_debug` (read already for its `.dbg` file). Empty when no pattern matches a function's
/// file: then, as uftrace does, everything is recorded.
pub fn hide_triggers(
    exe: &Path,
    exe_debug: Option<&ModuleDebug>,
    specs: &[String],
    ty: MatchType,
) -> Vec<String> {
    let mut filter = LocFilter::new(specs, ty);
    let modules = modules(exe, exe_debug);
    let files = modules
        .iter()
        .flat_map(|m| m.funcs.iter().filter_map(|f| f.1.as_deref()));
    if !filter.retain_matching(files) || filter.is_empty() {
        return Vec::new();
    }
    let mut out = Vec::new();
    for m in &modules {
        let mut hidden = BTreeSet::new();
        let mut shown = BTreeSet::new();
        for (name, file) in &m.funcs {
            if filter.hides(file.as_deref()) {
                hidden.insert(name.as_str());
            } else {
                shown.insert(name.as_str());
            }
        }
        if shown.is_empty() {
            out.push(format!("{}@{},hide", all(ty), m.base));
            continue;
        }
        // A name some function keeps (a static function of a shown file, say) stays.
        let names: Vec<&str> = hidden.difference(&shown).copied().collect();
        out.extend(name_patterns(&names, ty).map(|p| format!("{p}@{},hide", m.base)));
    }
    // Library calls have no location: only a hiding pattern leaves them.
    if filter.hides(None) {
        out.push(format!("{}@PLT,hide", all(ty)));
    }
    out
}

/// A pattern every name matches.
fn all(ty: MatchType) -> &'static str {
    match ty {
        MatchType::Regex => ".",
        MatchType::Glob => "*",
    }
}

/// Patterns matching exactly `names`, for a trigger list (`;`, `@` and, in a glob, `,` cannot
/// be written: a glob name with one is left out).
fn name_patterns<'a>(names: &'a [&str], ty: MatchType) -> Box<dyn Iterator<Item = String> + 'a> {
    match ty {
        MatchType::Regex => Box::new(names.chunks(BATCH).map(|chunk| {
            let alts: Vec<String> = chunk.iter().map(|n| regex_literal(n)).collect();
            format!("^(?:{})$", alts.join("|"))
        })),
        MatchType::Glob => Box::new(
            names
                .iter()
                .filter(|n| !n.contains([';', '@', ',']))
                .map(|n| glob_literal(n)),
        ),
    }
}

/// `name` as a regex matching it literally, written without `;`, `,` or `@`.
fn regex_literal(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + 8);
    for c in name.chars() {
        if c.is_ascii_alphanumeric() || c == '_' {
            out.push(c);
        } else {
            out.push_str(&format!("\\x{{{:x}}}", c as u32));
        }
    }
    out
}

/// `name` as a glob matching it literally.
fn glob_literal(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for c in name.chars() {
        match c {
            '*' | '?' | '[' => {
                out.push('[');
                out.push(c);
                out.push(']');
            }
            c => out.push(c),
        }
    }
    out
}

/// The executable and its instrumented libraries.
fn modules(exe: &Path, exe_debug: Option<&ModuleDebug>) -> Vec<Module> {
    let mut out = Vec::new();
    let mut seen = BTreeSet::new();
    let mut queue = vec![(exe.to_path_buf(), true)];
    while let Some((path, is_exe)) = queue.pop() {
        let path = std::fs::canonicalize(&path).unwrap_or(path);
        if !seen.insert(path.clone()) {
            continue;
        }
        let Ok(bytes) = std::fs::read(&path) else {
            continue;
        };
        let Ok(elf) = Elf::parse(&bytes) else {
            continue;
        };
        let origin = path.parent().unwrap_or(Path::new("/"));
        for lib in &elf.libraries {
            if let Some(found) = find_library(lib, &elf, origin) {
                queue.push((found, false));
            }
        }
        if !is_exe && !instrumented(&elf) {
            continue;
        }
        let own;
        let debug = match (is_exe, exe_debug) {
            (true, d) => d,
            (false, _) => {
                own = super::read(&bytes, false);
                own.as_ref()
            }
        };
        let files: HashMap<u64, &str> = debug.map(|d| d.files().collect()).unwrap_or_default();
        let base = link_base(&elf.program_headers);
        let funcs = function_symbols(&elf)
            .map(|f| {
                let file = files.get(&f.addr.wrapping_sub(base)).map(|s| s.to_string());
                (demangle(f.name, Demangle::Simple), file)
            })
            .collect();
        out.push(Module {
            base: path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
            funcs,
        });
    }
    out
}

/// Whether the module calls one of the profiling hooks.
fn instrumented(elf: &Elf<'_>) -> bool {
    elf.dynsyms.iter().any(|s| {
        s.is_import()
            && elf
                .dynstrtab
                .get_at(s.st_name)
                .is_some_and(|n| HOOKS.contains(&n))
    })
}

/// Where the dynamic loader finds `lib`, needed by `elf` (in the directory `origin`).
fn find_library(lib: &str, elf: &Elf<'_>, origin: &Path) -> Option<PathBuf> {
    if lib.contains('/') {
        return Some(PathBuf::from(lib));
    }
    let expand = |dirs: &[&str]| -> Vec<PathBuf> {
        dirs.iter()
            .flat_map(|d| d.split(':'))
            .filter(|d| !d.is_empty())
            .map(|d| {
                PathBuf::from(
                    d.replace("${ORIGIN}", &origin.to_string_lossy())
                        .replace("$ORIGIN", &origin.to_string_lossy()),
                )
            })
            .collect()
    };
    let mut dirs = Vec::new();
    if elf.runpaths.is_empty() {
        dirs.extend(expand(&elf.rpaths));
    }
    if let Ok(p) = std::env::var("LD_LIBRARY_PATH") {
        dirs.extend(expand(&[p.as_str()]));
    }
    dirs.extend(expand(&elf.runpaths));
    dirs.extend(
        [
            "/usr/local/lib/x86_64-linux-gnu",
            "/usr/local/lib",
            "/lib/x86_64-linux-gnu",
            "/usr/lib/x86_64-linux-gnu",
            "/lib64",
            "/usr/lib64",
            "/lib",
            "/usr/lib",
        ]
        .map(PathBuf::from),
    );
    dirs.into_iter().map(|d| d.join(lib)).find(|p| p.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;
    use record_format::pattern::NameMatcher;

    #[test]
    fn names_are_matched_literally() {
        let names = ["main", "ns::Foo::operator+", "a,b;c@d", "x.cold"];
        let pats: Vec<String> = name_patterns(&names, MatchType::Regex).collect();
        assert_eq!(pats.len(), 1);
        assert!(!pats[0].contains([';', '@', ',']));
        let m = NameMatcher::new(&pats[0], MatchType::Regex);
        for n in names {
            assert!(m.matches(n), "{n}");
        }
        assert!(!m.matches("mainx") && !m.matches("ns::Foo::operator++"));
        let globs: Vec<String> = name_patterns(&["f*", "g"], MatchType::Glob).collect();
        let m = NameMatcher::new(&globs[0], MatchType::Glob);
        assert!(m.matches("f*") && !m.matches("fx"));
    }

    #[test]
    fn batches_stay_small() {
        let names: Vec<String> = (0..450).map(|i| format!("f{i}")).collect();
        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
        let pats: Vec<String> = name_patterns(&refs, MatchType::Regex).collect();
        assert_eq!(pats.len(), 3);
        assert!(NameMatcher::new(&pats[2], MatchType::Regex).matches("f449"));
    }
}
