//! `utrace record`: run a program and write its trace into the data directory (cli.md §3).
//! Only the program lookup exists so far.

use crate::cli::Subcommand;
use crate::invocation::Invocation;
use crate::notice::Notices;
use std::ffi::OsStr;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

pub fn run(inv: &Invocation, notices: &mut Notices) -> anyhow::Result<ExitCode> {
    let Some(program) = inv.program.first() else {
        return Ok(super::missing_program(notices));
    };
    let _exe = find_program(program)?;
    Err(super::not_implemented(Subcommand::Record))
}

fn is_executable_file(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Finds the executable to trace: `name` itself if it is an executable regular file (relative
/// to the current directory even without a `/`), otherwise, unless it is absolute, the first
/// match in `$PATH`.
pub fn find_program(name: &OsStr) -> anyhow::Result<PathBuf> {
    let path = Path::new(name);
    if is_executable_file(path) {
        return Ok(path.to_path_buf());
    }
    if !path.is_absolute() {
        if let Some(dirs) = std::env::var_os("PATH") {
            for dir in std::env::split_paths(&dirs) {
                let candidate = dir.join(path);
                if is_executable_file(&candidate) {
                    return Ok(candidate);
                }
            }
        }
    }
    anyhow::bail!(
        "Cannot trace '{}': No such executable file.",
        path.display()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn program_lookup() {
        assert_eq!(
            find_program(OsStr::new("sh")).unwrap().file_name(),
            Some(OsStr::new("sh"))
        );
        let err = find_program(OsStr::new("./no-such-program")).unwrap_err();
        assert_eq!(
            err.to_string(),
            "Cannot trace './no-such-program': No such executable file."
        );
        assert!(find_program(OsStr::new("/etc/passwd")).is_err());
        assert!(find_program(OsStr::new("/")).is_err());
    }
}
