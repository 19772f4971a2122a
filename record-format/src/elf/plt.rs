//! The PLT: one 16-byte entry per `R_X86_64_JUMP_SLOT` relocation, in relocation order.
//!
//! Without IBT the entries follow the 16-byte header entry (PLT0) in `.plt`; with IBT
//! (`-fcf-protection`, `.plt.sec`) the entries that calls reach are in `.plt.sec`, and `.plt`
//! holds the lazy-binding stubs an unbound GOT word points at. Calls to library function *i*
//! go to its entry, which jumps through GOT word `r_offset` of relocation *i*: the entry's
//! address is the function's address in the records (a `P` symbol in the `.sym` file).
//!
//! A module without `R_X86_64_JUMP_SLOT` relocations (built with `-fno-plt` and without a
//! PLT call of its own, as `-finstrument-functions` code is) calls library functions through
//! the GOT words of its `R_X86_64_GLOB_DAT` relocations of functions. Those words are its
//! slots then, bound at load time, and, as uftrace 0.13 names them, each function's address in
//! the records is that of its relocation entry in `.rela.dyn` (24 bytes each).

use super::{section, Elf};

/// Size of one PLT entry (and of PLT0) on x86-64.
pub const PLT_ENTRY_SIZE: u64 = 16;

/// One PLT entry, at link-time addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PltSlot<'a> {
    /// Index of the relocation (the number the lazy stub pushes).
    pub index: usize,
    /// Address of the PLT entry that calls reach.
    pub entry: u64,
    /// Address of the GOT word the entry jumps through.
    pub got: u64,
    /// The function's name (empty when the relocation names no symbol).
    pub name: &'a str,
}

/// The PLT entries of a module.
#[derive(Debug, Clone, Copy)]
pub struct PltSlots<'e, 'a> {
    elf: &'e Elf<'a>,
    /// Address of entry 0, or (GOT calls) of `.rela.dyn`.
    first: u64,
    /// No `JUMP_SLOT` relocation: the functions' `GLOB_DAT` GOT words are the slots.
    got_calls: bool,
    /// `.plt`, where unbound GOT words point (lazy binding): `[start, end)`.
    pub lazy_stubs: (u64, u64),
}

/// Size of one `Elf64_Rela` entry.
const RELA_SIZE: u64 = 24;

/// The PLT entries of `elf` (or its GOT calls, see the module documentation); `None` when it
/// has neither.
pub fn plt_slots<'e, 'a>(elf: &'e Elf<'a>) -> Option<PltSlots<'e, 'a>> {
    if elf.pltrelocs.is_empty() {
        let (rela_dyn, _) = section(elf, ".rela.dyn")?;
        return Some(PltSlots {
            elf,
            first: rela_dyn,
            got_calls: true,
            lazy_stubs: (0, 0),
        });
    }
    let plt = section(elf, ".plt");
    let first = match section(elf, ".plt.sec") {
        Some((addr, _)) => addr,
        None => plt?.0 + PLT_ENTRY_SIZE,
    };
    let lazy_stubs = plt.map_or((0, 0), |(addr, size)| (addr, addr + size));
    Some(PltSlots {
        elf,
        first,
        got_calls: false,
        lazy_stubs,
    })
}

impl<'e, 'a> PltSlots<'e, 'a> {
    /// Number of entries.
    pub fn len(&self) -> usize {
        self.iter().count()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn name(elf: &Elf<'a>, sym: usize) -> &'a str {
        elf.dynsyms
            .get(sym)
            .and_then(|s| elf.dynstrtab.get_at(s.st_name))
            .unwrap_or("")
    }

    /// Every entry, in relocation order.
    pub fn iter(&self) -> Box<dyn Iterator<Item = PltSlot<'a>> + 'e> {
        let elf = self.elf;
        let first = self.first;
        if self.got_calls {
            // The GLOB_DAT relocations of undefined functions, by their place in `.rela.dyn`.
            return Box::new(
                elf.dynrelas
                    .iter()
                    .enumerate()
                    .filter(move |(_, r)| {
                        r.r_type == goblin::elf::reloc::R_X86_64_GLOB_DAT
                            && elf.dynsyms.get(r.r_sym).is_some_and(|s| {
                                s.st_type() == goblin::elf::sym::STT_FUNC && s.st_shndx == 0
                            })
                    })
                    .enumerate()
                    .map(move |(index, (at, r))| PltSlot {
                        index,
                        entry: first + RELA_SIZE * at as u64,
                        got: r.r_offset,
                        name: Self::name(elf, r.r_sym),
                    }),
            );
        }
        Box::new(
            elf.pltrelocs
                .iter()
                .enumerate()
                .map(move |(index, r)| PltSlot {
                    index,
                    entry: first + PLT_ENTRY_SIZE * index as u64,
                    got: r.r_offset,
                    name: Self::name(elf, r.r_sym),
                }),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::elf::testbin;

    const PROGRAM: &str = "#include <stdio.h>\n#include <stdlib.h>\n\
        int main(int argc, char **argv) { puts(argv[0]); return abs(argc) + atoi(argv[0]); }\n";

    /// The GOT word the `jmp *disp(%rip)` of the entry at `entry` reads (`ff 25`, possibly
    /// after `endbr64` and a `bnd` prefix), decoded from the code itself.
    fn jump_target(bytes: &[u8], elf: &Elf<'_>, entry: u64) -> u64 {
        let text = elf
            .section_headers
            .iter()
            .find(|sh| sh.sh_addr <= entry && entry < sh.sh_addr + sh.sh_size)
            .expect("entry inside a section");
        let off = (text.sh_offset + entry - text.sh_addr) as usize;
        let code = &bytes[off..off + PLT_ENTRY_SIZE as usize];
        let at = code
            .windows(2)
            .position(|w| w == [0xff, 0x25])
            .expect("an indirect jump");
        let disp = i32::from_le_bytes(code[at + 2..at + 6].try_into().unwrap());
        (entry as i64 + at as i64 + 6 + disp as i64) as u64
    }

    fn check(flags: &[&str], with_plt_sec: bool) {
        let bytes = testbin::build(PROGRAM, flags);
        let elf = crate::elf::parse(&bytes).unwrap();
        assert_eq!(section(&elf, ".plt.sec").is_some(), with_plt_sec);
        let slots = plt_slots(&elf).expect("a PLT");
        let names: Vec<_> = slots.iter().map(|s| s.name).collect();
        for f in ["puts", "abs", "atoi"] {
            assert!(names.contains(&f), "{f} in {names:?} ({flags:?})");
        }
        for s in slots.iter() {
            assert_eq!(
                jump_target(&bytes, &elf, s.entry),
                s.got,
                "{s:?} ({flags:?})"
            );
        }
        // The lazy stubs are `.plt`, which starts with PLT0.
        let (plt, size) = section(&elf, ".plt").unwrap();
        assert_eq!(slots.lazy_stubs, (plt, plt + size));
        assert!(size >= PLT_ENTRY_SIZE * (slots.len() as u64 + 1));
    }

    /// `-fno-plt -finstrument-functions`: no JUMP_SLOT relocation; the functions' GLOB_DAT
    /// words are the slots, named at their relocation entries as uftrace names them.
    #[test]
    fn got_calls_without_a_plt() {
        let bytes = testbin::build(
            PROGRAM,
            &["-fno-builtin", "-fno-plt", "-finstrument-functions"],
        );
        let elf = crate::elf::parse(&bytes).unwrap();
        assert!(elf.pltrelocs.is_empty());
        let slots = plt_slots(&elf).expect("GOT calls");
        let (rela, _) = section(&elf, ".rela.dyn").unwrap();
        let names: Vec<_> = slots.iter().map(|s| s.name).collect();
        for f in ["puts", "abs", "atoi", "__cyg_profile_func_enter"] {
            assert!(names.contains(&f), "{f} in {names:?}");
        }
        for s in slots.iter() {
            assert_eq!((s.entry - rela) % RELA_SIZE, 0);
            let r = &elf
                .dynrelas
                .iter()
                .nth(((s.entry - rela) / RELA_SIZE) as usize);
            assert_eq!(r.as_ref().map(|r| r.r_offset), Some(s.got), "{s:?}");
        }
        assert_eq!(slots.lazy_stubs, (0, 0));
    }

    #[test]
    fn entries_jump_through_their_got_words() {
        check(&["-fno-builtin"], false);
        check(&["-fno-builtin", "-no-pie"], false);
        check(&["-fno-builtin", "-Wl,-z,now"], false);
        check(
            &["-fno-builtin", "-fcf-protection=full", "-Wl,-z,ibtplt"],
            true,
        );
    }
}
