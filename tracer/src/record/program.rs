//! Finding the program to trace and checking that preloading libmcount can trace it
//! (cli.md §3): an executable ELF file for x86-64, dynamically linked, that calls one of the
//! entry hooks libmcount provides.

use anyhow::bail;
use goblin::elf::program_header::{PT_DYNAMIC, PT_INTERP};
use goblin::elf::Elf;
use std::ffi::OsStr;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// The symbols gcc's instrumentation calls; a binary referencing none of them records nothing.
const HOOKS: [&str; 4] = [
    "mcount",
    "_mcount",
    "__fentry__",
    "__cyg_profile_func_enter",
];

/// `NT_GNU_BUILD_ID`.
const NT_GNU_BUILD_ID: u32 = 3;

/// The checked program.
#[derive(Debug, Clone)]
pub struct Program {
    /// The path as found (as given, or in `$PATH`), made absolute with symlinks resolved: what
    /// is run, and the `exename` of `info`.
    pub absolute: PathBuf,
    /// GNU build-id, 40 lowercase hex digits (or whatever length the note has).
    pub build_id: Option<String>,
    /// `e_ident[EI_CLASS]` and `e_ident[EI_DATA]`, copied into the `info` header.
    pub elf_class: u8,
    pub endian: u8,
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
    bail!(
        "Cannot trace '{}': No such executable file.",
        path.display()
    )
}

/// Looks `name` up and checks it. `force` skips the checks that only predict that nothing
/// would be recorded (script, no hook symbol), as uftrace's `--force` does; `patching` (`-P`
/// given) skips the hook-symbol check only, as uftrace does: the runtime writes the hooks.
pub fn check_program(name: &OsStr, force: bool, patching: bool) -> anyhow::Result<Program> {
    let path = find_program(name)?;
    let shown = path.display();
    // Mapped, not read: only the headers and the dynamic symbols are looked at.
    let bytes = record_format::file::map_regular(&path).map_err(|e| {
        let reason = std::fs::File::open(&path)
            .err()
            .map_or(e.to_string(), |e| e.to_string());
        anyhow::anyhow!("Cannot trace '{shown}': {reason}")
    })?;
    if bytes.starts_with(b"#!") {
        if force {
            return Ok(unchecked(path));
        }
        bail!(
            "Cannot trace script file: {shown}\n\
             \tTo trace binaries run by the script, use --force option."
        );
    }
    let elf = match headers_only(&bytes) {
        Some(elf) if bytes.starts_with(b"\x7fELF") => elf,
        _ => bail!(
            "Cannot trace '{shown}': Invalid file\n\
             \tThe file is neither an ELF executable nor a script.\n\
             \tOnly ELF programs built with -pg or -finstrument-functions can be traced."
        ),
    };
    if elf.header.e_machine != goblin::elf::header::EM_X86_64 {
        bail!("Cannot trace '{shown}': Unsupported machine");
    }
    let has = |kind: u32| elf.program_headers.iter().any(|p| p.p_type == kind);
    if !has(PT_INTERP) || !has(PT_DYNAMIC) {
        bail!(
            "Cannot trace '{shown}': it is statically linked.\n\
             \tutrace loads its runtime with LD_PRELOAD, which needs a dynamically linked program."
        );
    }
    if !force && !patching && !calls_a_hook(&bytes) {
        bail!(
            "Can't find 'mcount' symbol in the '{shown}'.\n\
             \tIt seems not to be compiled with -pg or -finstrument-functions flag.\n\
             \tRebuild the program with -pg (or -finstrument-functions) to trace it."
        );
    }
    Ok(Program {
        absolute: absolute(&path),
        build_id: build_id(&elf, &bytes),
        elf_class: elf.header.e_ident[goblin::elf::header::EI_CLASS],
        endian: elf.header.e_ident[goblin::elf::header::EI_DATA],
    })
}

/// Whether the dynamic symbols of the ELF file `bytes` name one of the [`HOOKS`] (its static
/// symbol table, megabytes in a large program, is not read).
fn calls_a_hook(bytes: &[u8]) -> bool {
    record_format::elf::parse_dynamic(bytes).is_some_and(|elf| {
        elf.dynsyms.iter().any(|s| {
            elf.dynstrtab
                .get_at(s.st_name)
                .is_some_and(|n| HOOKS.contains(&n))
        })
    })
}

/// A program traced with `--force` although it is not an ELF file (a script).
fn unchecked(path: PathBuf) -> Program {
    Program {
        absolute: absolute(&path),
        build_id: None,
        elf_class: 2,
        endian: 1,
    }
}

fn absolute(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
}

/// The GNU build-id note of a parsed ELF file, as lowercase hex.
pub fn build_id(elf: &Elf<'_>, bytes: &[u8]) -> Option<String> {
    let notes = elf.iter_note_headers(bytes)?;
    for note in notes.flatten() {
        if note.n_type == NT_GNU_BUILD_ID && note.name == "GNU" && !note.desc.is_empty() {
            return Some(note.desc.iter().map(|b| format!("{b:02x}")).collect());
        }
    }
    None
}

/// The GNU build-id of the ELF file at `path`, if it has one. The file is mapped and only its
/// header, program headers and notes are read: the recorder asks this of every module of the
/// session maps (libmcount with its debug information is 20 MB), and parsing a whole file
/// would read its symbol tables too.
pub fn build_id_of(path: &Path) -> Option<String> {
    let bytes = record_format::file::map_regular(path).ok()?;
    build_id(&headers_only(&bytes)?, &bytes)
}

/// `bytes` parsed as far as its program headers: what the notes and segments need.
fn headers_only(bytes: &[u8]) -> Option<Elf<'_>> {
    let header = Elf::parse_header(bytes).ok()?;
    let ctx = record_format::elf::ctx_of(&header);
    let phdrs = goblin::elf::ProgramHeader::parse(
        bytes,
        header.e_phoff as usize,
        header.e_phnum as usize,
        ctx,
    )
    .ok()?;
    let mut elf = Elf::lazy_parse(header).ok()?;
    elf.program_headers = phdrs;
    Some(elf)
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

    #[test]
    fn uninstrumented_binary_is_refused() {
        let err = check_program(OsStr::new("/bin/true"), false, false).unwrap_err();
        let text = err.to_string();
        assert!(
            text.starts_with("Can't find 'mcount' symbol in the '/bin/true'."),
            "{text}"
        );
        let forced = check_program(OsStr::new("/bin/true"), true, false).unwrap();
        assert!(check_program(OsStr::new("/bin/true"), false, true).is_ok());
        assert_eq!(forced.elf_class, 2);
        assert_eq!(forced.endian, 1);
    }

    /// The headers-only reading finds what goblin's whole parse finds.
    #[test]
    fn build_ids_and_hooks_from_the_headers() {
        for path in ["/bin/true", "/bin/sh"] {
            let bytes = std::fs::read(path).unwrap();
            let whole = Elf::parse(&bytes).unwrap();
            assert_eq!(
                build_id_of(Path::new(path)),
                build_id(&whole, &bytes),
                "{path}"
            );
            assert!(!calls_a_hook(&bytes), "{path}");
        }
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("p.c");
        std::fs::write(&src, "int main(void) { return 0; }\n").unwrap();
        let exe = dir.path().join("p");
        let built = std::process::Command::new("gcc")
            .args(["-pg", "-o"])
            .arg(&exe)
            .arg(&src)
            .status()
            .unwrap();
        assert!(built.success());
        assert!(calls_a_hook(&std::fs::read(&exe).unwrap()));
        let program = check_program(exe.as_os_str(), false, false).unwrap();
        assert_eq!(program.build_id, build_id_of(&exe));
        assert!(program.build_id.is_some());
    }

    #[test]
    fn scripts_and_other_files_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("t.sh");
        std::fs::write(&script, "#!/bin/sh\ntrue\n").unwrap();
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        let err = check_program(script.as_os_str(), false, false).unwrap_err();
        assert!(err.to_string().starts_with("Cannot trace script file: "));
        let data = dir.path().join("data");
        std::fs::write(&data, "just text\n").unwrap();
        std::fs::set_permissions(&data, std::fs::Permissions::from_mode(0o755)).unwrap();
        let err = check_program(data.as_os_str(), false, false).unwrap_err();
        assert!(err.to_string().contains("': Invalid file\n\t"), "{err}");
    }
}
