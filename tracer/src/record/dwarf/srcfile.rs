//! The source file of each function, as the `L:` lines of a `.dbg` file name it (data-format
//! §8): the declaring file from the unit's line-program file table, relative to the module's
//! common compile directory, as uftrace 0.13 writes it (measured with gcc 12, DWARF 5):
//!
//! * a file given to the compiler by a relative path keeps it (`sub/lib.c`, whatever the
//!   unit's compile directory);
//! * a file the line program names by an absolute directory (the compile directory itself for
//!   `gcc -c lib.c`, or the directory of an absolute path) loses the directory all the units'
//!   compile directories share: units compiled in `/src` and `/src/a/b` give `main.c` and
//!   `a/b/lib.c`; `gcc /src/x/p.c` run in `/src` gives `x/p.c`.

use super::{Ctx, Func, R};
use gimli::{AttributeValue, DebuggingInformationEntry};

/// The source file of a DIE's `decl_file`, as the line program names it (directory joined).
pub(super) fn file_name(ctx: &Ctx<'_, '_>, e: &DebuggingInformationEntry<R<'_>>) -> Option<String> {
    let index = match e.attr_value(gimli::DW_AT_decl_file).ok()?? {
        AttributeValue::FileIndex(i) => i,
        v => v.udata_value()?,
    };
    let header = ctx.unit.line_program.as_ref()?.header();
    let file = header.file(index)?;
    let text = |v| {
        ctx.dwarf
            .attr_string(ctx.unit, v)
            .ok()
            .map(|s| s.to_string_lossy().into_owned())
    };
    let name = text(file.path_name())?;
    if name.starts_with('/') {
        return Some(name);
    }
    match file.directory(header).and_then(text) {
        Some(dir) if !dir.is_empty() => Some(format!("{dir}/{name}")),
        _ => Some(name),
    }
}

/// The directory every one of `dirs` is in (by whole components); `None` for none, or when
/// only `/` is shared.
fn common_dir(dirs: &[String]) -> Option<String> {
    let mut common: Vec<&str> = dirs.first()?.trim_end_matches('/').split('/').collect();
    for d in &dirs[1..] {
        let parts: Vec<&str> = d.trim_end_matches('/').split('/').collect();
        let same = common
            .iter()
            .zip(&parts)
            .take_while(|(a, b)| a == b)
            .count();
        common.truncate(same);
    }
    let dir = common.join("/");
    (dir.starts_with('/') && dir.len() > 1).then_some(dir)
}

/// Makes the absolute files of `funcs` relative to the common compile directory of the units
/// (`comp_dirs`).
pub(super) fn relative_to(funcs: &mut [Func], comp_dirs: &[String]) {
    let Some(common) = common_dir(comp_dirs) else {
        return;
    };
    let prefix = format!("{common}/");
    for f in funcs {
        if let Some((_, file)) = &mut f.line {
            if let Some(rest) = file.strip_prefix(&prefix) {
                *file = rest.to_string();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dirs(d: &[&str]) -> Vec<String> {
        d.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn common_compile_directory() {
        assert_eq!(common_dir(&dirs(&["/tmp/sl"])).as_deref(), Some("/tmp/sl"));
        assert_eq!(
            common_dir(&dirs(&["/tmp/sl", "/tmp/sl/alpha/beta"])).as_deref(),
            Some("/tmp/sl")
        );
        assert_eq!(
            common_dir(&dirs(&["/tmp/slow", "/tmp/sl/"])).as_deref(),
            Some("/tmp")
        );
        assert_eq!(common_dir(&dirs(&["/a", "/b"])), None);
        assert_eq!(common_dir(&[]), None);
    }

    #[test]
    fn files_lose_the_common_directory() {
        let func = |file: &str| Func {
            addr: 0,
            name: String::new(),
            line: Some((1, file.to_string())),
            path: Some(file.to_string()),
            args: String::new(),
            ret: None,
        };
        let mut funcs = [
            func("/tmp/sl/p2.c"),
            func("/tmp/sl/alpha/beta/gamma.c"),
            func("beta/gamma.c"),
            func("/usr/include/stdio.h"),
        ];
        relative_to(&mut funcs, &dirs(&["/tmp/sl", "/tmp/sl/alpha/beta"]));
        let files: Vec<&str> = funcs
            .iter()
            .map(|f| f.line.as_ref().unwrap().1.as_str())
            .collect();
        assert_eq!(
            files,
            [
                "p2.c",
                "alpha/beta/gamma.c",
                "beta/gamma.c",
                "/usr/include/stdio.h"
            ]
        );
    }
}
