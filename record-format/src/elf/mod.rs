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
