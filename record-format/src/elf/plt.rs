//! The PLT: one 16-byte entry per `R_X86_64_JUMP_SLOT` relocation, in relocation order.
//!
//! Without IBT the entries follow the 16-byte header entry (PLT0) in `.plt`; with IBT
//! (`-fcf-protection`, `.plt.sec`) the entries that calls reach are in `.plt.sec`, and `.plt`
//! holds the lazy-binding stubs an unbound GOT word points at. Calls to library function *i*
//! go to its entry, which jumps through GOT word `r_offset` of relocation *i*: the entry's
//! address is the function's address in the records (a `P` symbol in the `.sym` file).

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
    /// Address of entry 0.
    first: u64,
    /// `.plt`, where unbound GOT words point (lazy binding): `[start, end)`.
    pub lazy_stubs: (u64, u64),
}

/// The PLT entries of `elf`; `None` when it has no PLT.
pub fn plt_slots<'e, 'a>(elf: &'e Elf<'a>) -> Option<PltSlots<'e, 'a>> {
    let plt = section(elf, ".plt");
    let first = match section(elf, ".plt.sec") {
        Some((addr, _)) => addr,
        None => plt?.0 + PLT_ENTRY_SIZE,
    };
    let lazy_stubs = plt.map_or((0, 0), |(addr, size)| (addr, addr + size));
    Some(PltSlots {
        elf,
        first,
        lazy_stubs,
    })
}

impl<'e, 'a> PltSlots<'e, 'a> {
    /// Number of entries.
    pub fn len(&self) -> usize {
        self.elf.pltrelocs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every entry, in relocation order.
    pub fn iter(&self) -> impl Iterator<Item = PltSlot<'a>> + 'e {
        let elf = self.elf;
        let first = self.first;
        elf.pltrelocs.iter().enumerate().map(move |(index, r)| {
            let name = elf
                .dynsyms
                .get(r.r_sym)
                .and_then(|s| elf.dynstrtab.get_at(s.st_name))
                .unwrap_or("");
            PltSlot {
                index,
                entry: first + PLT_ENTRY_SIZE * index as u64,
                got: r.r_offset,
                name,
            }
        })
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
