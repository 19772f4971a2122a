//! The ELF model: how a module's file maps to the addresses in the data directory.
//!
//! One set of rules, used by every side that reads an ELF file:
//!
//! - **load bias** ([`load`]): a module's link-time addresses are relative to its *link base*,
//!   the page of its lowest `PT_LOAD` segment, which is where its first mapping starts. The
//!   runtime turns link-time addresses into run-time ones with [`load_bias`]; the `.sym` files
//!   hold link-time addresses minus the link base, which the analysis adds to the start of the
//!   module's first mapping in the session map.
//! - **PLT slots** ([`plt`]): one 16-byte entry per `R_X86_64_JUMP_SLOT` relocation, in
//!   `.plt.sec` when the program has one (IBT), else after the PLT's header entry in `.plt`.
//!   libmcount hooks each slot's GOT word; the `.sym` file names each entry with a `P` symbol.
//! - **symbol selection** ([`symbols`]): which symbols a `.sym` file lists and with which type
//!   letter ([`sym_table`]), and which name every function address answers to for the runtime's
//!   patterns ([`function_symbols`]).
//!
//! Data flow: libmcount (constructor, cold path) reads the executable and libraries with
//! [`parse`] and uses [`load_bias`], [`plt_slots`] and [`function_symbols`]; the recorder writes
//! `<module>.sym` from [`read_sym_table`] with [`crate::sym::write_sym`]; the analysis reads the
//! `.sym` files and, for modules without one, [`read_sym_table`] too.

pub mod load;
pub mod plt;
pub mod sdt;
pub mod symbols;

pub use goblin::elf::Elf;
pub use load::{link_base, load_bias, relro_ranges};
pub use plt::{plt_slots, PltSlot, PltSlots, PLT_ENTRY_SIZE};
pub use symbols::{function_symbols, read_sym_table, sym_table, FunctionSymbol};

/// Parses the ELF file `bytes`; `None` when it is not one goblin can read.
pub fn parse(bytes: &[u8]) -> Option<Elf<'_>> {
    Elf::parse(bytes).ok()
}

/// Parses what the dynamic linking of `bytes` needs, as [`parse`] does, but not the static
/// symbol table (`.symtab` and its strings, megabytes in a large program, which goblin reads
/// whole): the headers, the section names, the interpreter, the dynamic section, `.dynsym` and
/// its strings, and the dynamic relocations. For [`plt_slots`] and [`load`] at start-up; `None`
/// when it is not an ELF file goblin can read. A file without a `.dynsym` section header, or
/// with its section counts in section 0 (0xff00 sections or more), is parsed whole.
pub fn parse_dynamic(bytes: &[u8]) -> Option<Elf<'_>> {
    use goblin::elf::dynamic::{Dynamic, DT_RELA};
    use goblin::elf::program_header::{ProgramHeader, PT_INTERP};
    use goblin::elf::reloc::RelocSection;
    use goblin::elf::section_header::{SectionHeader, SHT_DYNSYM};
    use goblin::elf::sym::Symtab;
    use goblin::strtab::Strtab;

    let header = Elf::parse_header(bytes).ok()?;
    // 0xff00 sections or more (the counts live in section 0): the whole parse knows how.
    if header.e_shnum == 0 || header.e_shstrndx == goblin::elf::section_header::SHN_XINDEX as u16 {
        return parse(bytes);
    }
    let ctx = ctx_of(&header);
    let sections =
        SectionHeader::parse(bytes, header.e_shoff as usize, header.e_shnum as usize, ctx).ok()?;
    let Some(dynsym) = sections.iter().find(|s| s.sh_type == SHT_DYNSYM) else {
        return parse(bytes);
    };
    let mut elf = Elf::lazy_parse(header).ok()?;
    elf.program_headers =
        ProgramHeader::parse(bytes, header.e_phoff as usize, header.e_phnum as usize, ctx).ok()?;
    if let Some(names) = sections.get(header.e_shstrndx as usize) {
        elf.shdr_strtab =
            Strtab::parse(bytes, names.sh_offset as usize, names.sh_size as usize, 0).ok()?;
    }
    let count = dynsym.sh_size.checked_div(dynsym.sh_entsize).unwrap_or(0) as usize;
    elf.dynsyms = Symtab::parse(bytes, dynsym.sh_offset as usize, count, ctx).ok()?;
    elf.interpreter = elf
        .program_headers
        .iter()
        .find(|p| p.p_type == PT_INTERP && p.p_filesz != 0)
        .and_then(|p| {
            let at = p.p_offset as usize;
            let text = bytes.get(at..at.checked_add(p.p_filesz as usize - 1)?)?;
            std::str::from_utf8(text).ok()
        });
    elf.section_headers = sections;
    elf.dynamic = Dynamic::parse(bytes, &elf.program_headers, ctx).ok()?;
    if let Some(info) = elf.dynamic.as_ref().map(|d| &d.info) {
        elf.dynstrtab = Strtab::parse(bytes, info.strtab, info.strsz, 0).ok()?;
        elf.dynrelas = RelocSection::parse(bytes, info.rela, info.relasz, true, ctx).ok()?;
        elf.dynrels = RelocSection::parse(bytes, info.rel, info.relsz, false, ctx).ok()?;
        let rela = info.pltrel == DT_RELA;
        elf.pltrelocs = RelocSection::parse(bytes, info.jmprel, info.pltrelsz, rela, ctx).ok()?;
    }
    Some(elf)
}

/// How the file of `header` encodes its structures (word size and byte order).
pub fn ctx_of(header: &goblin::elf::Header) -> goblin::container::Ctx {
    use goblin::container::{Container, Ctx, Endian};
    use goblin::elf::header::{EI_CLASS, EI_DATA, ELFCLASS64, ELFDATA2LSB};
    let container = match header.e_ident[EI_CLASS] {
        ELFCLASS64 => Container::Big,
        _ => Container::Little,
    };
    let endian = match header.e_ident[EI_DATA] {
        ELFDATA2LSB => Endian::Little,
        _ => Endian::Big,
    };
    Ctx::new(container, endian)
}

/// The section called `name`, as `(address, size)`.
pub fn section(elf: &Elf<'_>, name: &str) -> Option<(u64, u64)> {
    elf.section_headers
        .iter()
        .find(|sh| elf.shdr_strtab.get_at(sh.sh_name) == Some(name))
        .map(|sh| (sh.sh_addr, sh.sh_size))
}

#[cfg(test)]
pub(crate) mod testbin {
    //! Small programs built with gcc for the model's tests.

    use std::path::PathBuf;
    use std::process::Command;

    /// Builds `source` (C) with `flags` into a fresh temporary directory; returns the binary's
    /// bytes. Panics when gcc is missing: the test suite needs it (README).
    pub fn build(source: &str, flags: &[&str]) -> Vec<u8> {
        let dir = tempfile::tempdir().expect("temporary directory");
        let src: PathBuf = dir.path().join("t.c");
        let out: PathBuf = dir.path().join("t");
        std::fs::write(&src, source).expect("write source");
        let status = Command::new("gcc")
            .args(flags)
            .arg("-o")
            .arg(&out)
            .arg(&src)
            .status()
            .expect("gcc must be installed to run these tests");
        assert!(status.success(), "gcc {flags:?} failed");
        std::fs::read(&out).expect("read binary")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What start-up reads of a module is the same from both parses.
    fn same_dynamic_view(bytes: &[u8], what: &str) {
        let whole = parse(bytes).unwrap();
        let light = parse_dynamic(bytes).unwrap();
        let slots = |e: &Elf<'_>| {
            plt_slots(e).map(|s| {
                (
                    s.lazy_stubs,
                    s.iter()
                        .map(|p| (p.index, p.entry, p.got, p.name.to_string()))
                        .collect::<Vec<_>>(),
                )
            })
        };
        assert_eq!(slots(&whole), slots(&light), "{what}");
        let relro = |e: &Elf<'_>| relro_ranges(e).collect::<Vec<_>>();
        assert_eq!(relro(&whole), relro(&light), "{what}");
        assert_eq!(whole.interpreter, light.interpreter, "{what}");
        assert_eq!(section(&whole, ".plt"), section(&light, ".plt"), "{what}");
        assert_eq!(whole.dynsyms.len(), light.dynsyms.len(), "{what}");
        assert!(
            light.syms.is_empty(),
            "{what}: the static symbols are not read"
        );
    }

    #[test]
    fn dynamic_parse_matches_the_whole_parse() {
        let src = "#include <stdio.h>\nint main(void) { puts(\"x\"); return 0; }\n";
        for flags in [
            &["-pg"][..],
            &["-pg", "-Wl,-z,now"],
            &["-pg", "-fcf-protection"],
            &["-finstrument-functions", "-fno-plt"],
            &["-no-pie"],
        ] {
            same_dynamic_view(&testbin::build(src, flags), &format!("{flags:?}"));
        }
        for path in ["/bin/true", "/lib/x86_64-linux-gnu/libc.so.6"] {
            if let Ok(bytes) = std::fs::read(path) {
                same_dynamic_view(&bytes, path);
            }
        }
    }
}
