//! Which symbols of a module the data directory and the runtime know it by.
//!
//! Two selections, for two uses:
//!
//! - [`sym_table`], the `.sym` file's table (and the analysis's, for modules without one):
//!   functions (`STT_FUNC`, `STT_GNU_IFUNC`) and objects of `.symtab` (of `.dynsym` when the file
//!   is stripped), defined and sized, one name per address, plus a `P` symbol per PLT entry;
//!   addresses relative to the link base.
//! - [`function_symbols`], for the runtime's name patterns (`-F`, `-T`, `-A`...): every defined
//!   `STT_FUNC` of both tables, aliases included, so that a pattern matches whichever name the
//!   user gives; link-time addresses.

use super::{link_base, plt_slots, Elf, PLT_ENTRY_SIZE};
use crate::sym::Symbol;
use goblin::elf::sym::{STB_LOCAL, STB_WEAK, STT_FUNC, STT_GNU_IFUNC, STT_OBJECT};
use std::path::Path;

/// The `.sym` table of the ELF file at `path`; `None` when it cannot be read or parsed.
pub fn read_sym_table(path: &Path) -> Option<Vec<Symbol>> {
    // Not a regular file (a path from a data directory may lead anywhere): no symbols.
    let bytes = crate::file::map_regular(path).ok()?;
    Some(sym_table(&super::parse(&bytes)?))
}

/// The `.sym` table of `elf`, sorted by address, one symbol per address (a name without a
/// leading `_` preferred).
pub fn sym_table(elf: &Elf<'_>) -> Vec<Symbol> {
    let base = link_base(&elf.program_headers);
    let (table, strtab) = if elf.syms.is_empty() {
        (&elf.dynsyms, &elf.dynstrtab)
    } else {
        (&elf.syms, &elf.strtab)
    };
    let mut out = Vec::new();
    for s in table.iter() {
        let ty = s.st_type();
        if s.st_shndx == 0 || s.st_size == 0 || s.st_value < base {
            continue;
        }
        let func = ty == STT_FUNC || ty == STT_GNU_IFUNC;
        if !func && ty != STT_OBJECT {
            continue;
        }
        let Some(name) = strtab.get_at(s.st_name).filter(|n| !n.is_empty()) else {
            continue;
        };
        out.push(Symbol {
            addr: s.st_value - base,
            size: s.st_size,
            kind: type_letter(func, s.st_bind()),
            name: name.to_string(),
        });
    }
    if let Some(slots) = plt_slots(elf) {
        out.extend(
            slots
                .iter()
                .filter(|s| !s.name.is_empty() && s.entry >= base)
                .map(|s| Symbol {
                    addr: s.entry - base,
                    size: PLT_ENTRY_SIZE,
                    kind: 'P',
                    name: s.name.to_string(),
                }),
        );
    }
    out.sort_by(|a, b| {
        a.addr
            .cmp(&b.addr)
            .then(a.name.starts_with('_').cmp(&b.name.starts_with('_')))
    });
    out.dedup_by_key(|s| s.addr);
    out
}

/// uftrace's type letter of a function or object symbol of binding `bind`.
fn type_letter(func: bool, bind: u8) -> char {
    match (func, bind) {
        (true, STB_WEAK) => 'w',
        (true, STB_LOCAL) => 't',
        (true, _) => 'T',
        (false, STB_WEAK) => 'v',
        (false, STB_LOCAL) => 'd',
        (false, _) => 'D',
    }
}

/// A function symbol at its link-time address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FunctionSymbol<'a> {
    pub addr: u64,
    pub size: u64,
    pub name: &'a str,
}

/// Every defined, sized `STT_FUNC` of `.symtab` then `.dynsym`, aliases and duplicates included.
pub fn function_symbols<'e, 'a>(elf: &'e Elf<'a>) -> impl Iterator<Item = FunctionSymbol<'a>> + 'e {
    [(&elf.syms, &elf.strtab), (&elf.dynsyms, &elf.dynstrtab)]
        .into_iter()
        .flat_map(|(syms, strtab)| {
            syms.iter().filter_map(move |s| {
                if s.st_type() != STT_FUNC || s.st_value == 0 || s.st_size == 0 {
                    return None;
                }
                Some(FunctionSymbol {
                    addr: s.st_value,
                    size: s.st_size,
                    name: strtab.get_at(s.st_name)?,
                })
            })
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::elf::testbin;

    const PROGRAM: &str = "#include <stdio.h>\n\
        int counter = 1;\n\
        static int hidden(int x) { return x + counter; }\n\
        __attribute__((weak)) int soft(int x) { return hidden(x) * 2; }\n\
        int _twin(int x) { return x; }\n\
        int twin(int x) __attribute__((alias(\"_twin\")));\n\
        int main(void) { printf(\"%d\\n\", soft(1)); return twin(0); }\n";

    fn find<'s>(syms: &'s [Symbol], name: &str) -> Option<&'s Symbol> {
        syms.iter().find(|s| s.name == name)
    }

    #[test]
    fn sym_table_selection_and_letters() {
        for flags in [&["-fno-inline"][..], &["-fno-inline", "-no-pie"][..]] {
            let bytes = testbin::build(PROGRAM, flags);
            let elf = crate::elf::parse(&bytes).unwrap();
            let syms = sym_table(&elf);
            let base = link_base(&elf.program_headers);
            let letter = |n: &str| find(&syms, n).map(|s| s.kind);
            assert_eq!(letter("main"), Some('T'), "{flags:?}");
            assert_eq!(letter("hidden"), Some('t'));
            assert_eq!(letter("soft"), Some('w'));
            assert_eq!(letter("counter"), Some('D'));
            assert_eq!(letter("printf"), Some('P'));
            // One name per address, without the leading underscore.
            assert_eq!(letter("twin"), Some('T'));
            assert_eq!(letter("_twin"), None);
            // Relative to the link base: `main` is where `.symtab` says, minus the base.
            let main = elf
                .syms
                .iter()
                .find(|s| elf.strtab.get_at(s.st_name) == Some("main"))
                .unwrap();
            assert_eq!(find(&syms, "main").unwrap().addr, main.st_value - base);
            assert!(syms.windows(2).all(|w| w[0].addr < w[1].addr));
            // The runtime's selection keeps both names of the alias, and no objects.
            let funcs: Vec<_> = function_symbols(&elf).map(|f| f.name).collect();
            assert!(funcs.contains(&"twin") && funcs.contains(&"_twin"));
            assert!(!funcs.contains(&"counter"));
        }
    }

    #[test]
    fn stripped_file_uses_dynsym() {
        let bytes = testbin::build(PROGRAM, &["-fno-inline", "-shared", "-fPIC", "-s"]);
        let elf = crate::elf::parse(&bytes).unwrap();
        assert!(elf.syms.is_empty());
        let syms = sym_table(&elf);
        // `soft` is preemptible in a library: called through its own PLT entry too.
        let soft: Vec<_> = syms
            .iter()
            .filter(|s| s.name == "soft")
            .map(|s| s.kind)
            .collect();
        assert_eq!(soft, ['P', 'w']);
        assert!(find(&syms, "hidden").is_none());
    }
}
