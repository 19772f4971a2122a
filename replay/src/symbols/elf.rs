//! Symbols read from an ELF file, for modules without a `.sym` file (and for the recorder,
//! which writes `.sym` files from the same table).

use record_format::sym::Symbol;
use std::path::Path;

/// Function and object symbols of `path`, relative to its first `PT_LOAD`, plus one `P` entry
/// per PLT slot. Returns `None` when the file cannot be read (or is not a regular file: the path
/// comes from the data directory) or parsed.
pub fn load_elf_symbols(path: &Path) -> Option<Vec<Symbol>> {
    let bytes = record_format::file::map_regular(path).ok()?;
    elf_symbols(&bytes)
}

/// As [`load_elf_symbols`], from bytes.
pub fn elf_symbols(bytes: &[u8]) -> Option<Vec<Symbol>> {
    use goblin::elf::{program_header::PT_LOAD, sym};
    let elf = goblin::elf::Elf::parse(bytes).ok()?;
    let base = elf
        .program_headers
        .iter()
        .find(|p| p.p_type == PT_LOAD)
        .map_or(0, |p| p.p_vaddr);
    let mut out = Vec::new();
    let (table, strtab) = if elf.syms.is_empty() {
        (&elf.dynsyms, &elf.dynstrtab)
    } else {
        (&elf.syms, &elf.strtab)
    };
    for s in table.iter() {
        let ty = s.st_type();
        if s.st_shndx == 0 || s.st_size == 0 || s.st_value < base {
            continue;
        }
        let func = ty == sym::STT_FUNC || ty == sym::STT_GNU_IFUNC;
        if !func && ty != sym::STT_OBJECT {
            continue;
        }
        let Some(name) = strtab.get_at(s.st_name).filter(|n| !n.is_empty()) else {
            continue;
        };
        let global = s.st_bind() != sym::STB_LOCAL;
        let kind = match (func, s.st_bind()) {
            (true, sym::STB_WEAK) => 'w',
            (true, _) if global => 'T',
            (true, _) => 't',
            (false, sym::STB_WEAK) => 'v',
            (false, _) if global => 'D',
            (false, _) => 'd',
        };
        out.push(Symbol {
            addr: s.st_value - base,
            size: s.st_size,
            kind,
            name: name.to_string(),
        });
    }
    // PLT slots in .rela.plt order: at .plt.sec if present, else after PLT0 in .plt.
    let section = |name: &str| {
        elf.section_headers
            .iter()
            .find(|sh| elf.shdr_strtab.get_at(sh.sh_name) == Some(name))
    };
    let plt_start = section(".plt.sec")
        .map(|s| s.sh_addr)
        .or_else(|| section(".plt").map(|s| s.sh_addr + 16));
    if let Some(start) = plt_start {
        for (i, r) in elf.pltrelocs.iter().enumerate() {
            let Some(name) = elf
                .dynsyms
                .get(r.r_sym)
                .and_then(|s| elf.dynstrtab.get_at(s.st_name))
                .filter(|n| !n.is_empty())
            else {
                continue;
            };
            out.push(Symbol {
                addr: start + 16 * i as u64 - base,
                size: 16,
                kind: 'P',
                name: name.to_string(),
            });
        }
    }
    out.sort_by(|a, b| {
        a.addr
            .cmp(&b.addr)
            .then(a.name.starts_with('_').cmp(&b.name.starts_with('_')))
    });
    out.dedup_by_key(|s| s.addr);
    Some(out)
}
