//! Where a module's segments land: its link base and load bias.
//!
//! The loader maps each `PT_LOAD` segment at `bias + p_vaddr`, page by page, so the module's
//! first mapping (the one a session map names first) starts at `bias + link_base`, where the
//! link base is the page of the lowest `PT_LOAD` segment. Addresses in `.sym` and `.dbg` files
//! are link-time addresses minus the link base: adding the start of that first mapping gives
//! the run-time address, for position-independent modules and fixed executables alike.

use goblin::elf::header::ET_EXEC;
use goblin::elf::program_header::{ProgramHeader, PT_GNU_RELRO, PT_LOAD};
use goblin::elf::Elf;

/// The page size the link base is aligned to (segments are at least page-aligned on x86-64).
pub const PAGE: u64 = 4096;

/// The page of the lowest `PT_LOAD` segment (0 when there is none): what `.sym` addresses are
/// relative to.
pub fn link_base(phdrs: &[ProgramHeader]) -> u64 {
    phdrs
        .iter()
        .filter(|p| p.p_type == PT_LOAD)
        .map(|p| p.p_vaddr & !(PAGE - 1))
        .min()
        .unwrap_or(0)
}

/// The load bias (run-time minus link-time address) of `elf` when its first mapping starts at
/// `map_start`: 0 for a fixed executable (`ET_EXEC`), which is loaded where it was linked.
pub fn load_bias(elf: &Elf<'_>, map_start: u64) -> u64 {
    if elf.header.e_type == ET_EXEC {
        0
    } else {
        map_start.wrapping_sub(link_base(&elf.program_headers))
    }
}

/// The link-time ranges `[start, end)` made read-only after relocation (`PT_GNU_RELRO`):
/// where `-z now` puts the GOT. Add the load bias and round out to pages to `mprotect` them.
pub fn relro_ranges<'e>(elf: &'e Elf<'_>) -> impl Iterator<Item = (u64, u64)> + 'e {
    elf.program_headers
        .iter()
        .filter(|p| p.p_type == PT_GNU_RELRO)
        .map(|p| (p.p_vaddr, p.p_vaddr + p.p_memsz))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::elf::testbin;

    fn load(vaddr: u64) -> ProgramHeader {
        ProgramHeader {
            p_type: PT_LOAD,
            p_vaddr: vaddr,
            p_memsz: 0x100,
            ..Default::default()
        }
    }

    #[test]
    fn link_base_is_the_lowest_load_page() {
        // Out of order, the lowest not page-aligned, and a non-load header lower still.
        let other = ProgramHeader {
            p_type: goblin::elf::program_header::PT_PHDR,
            p_vaddr: 0x40,
            ..Default::default()
        };
        let phdrs = [other, load(0x403df8), load(0x400238), load(0x401000)];
        assert_eq!(link_base(&phdrs), 0x400000);
        assert_eq!(link_base(&[load(0)]), 0);
        assert_eq!(link_base(&[]), 0);
    }

    #[test]
    fn bias_of_real_binaries() {
        // A PIE is linked at 0: its bias is where it was mapped.
        let pie = testbin::build("int main(void) { return 0; }\n", &["-pie", "-fPIE"]);
        let elf = crate::elf::parse(&pie).unwrap();
        assert_eq!(link_base(&elf.program_headers), 0);
        assert_eq!(load_bias(&elf, 0x5555_5555_4000), 0x5555_5555_4000);
        // A fixed executable is linked (and loaded) at 0x400000.
        let fixed = testbin::build("int main(void) { return 0; }\n", &["-no-pie"]);
        let elf = crate::elf::parse(&fixed).unwrap();
        assert_eq!(link_base(&elf.program_headers), 0x400000);
        assert_eq!(load_bias(&elf, 0x400000), 0);
        // A position-independent module linked above 0: its first mapping is its link base.
        let high = testbin::build(
            "int f(void) { return 1; }\n",
            &["-shared", "-fPIC", "-Wl,-Ttext-segment=0x200000"],
        );
        let elf = crate::elf::parse(&high).unwrap();
        assert_eq!(link_base(&elf.program_headers), 0x200000);
        assert_eq!(load_bias(&elf, 0x7f00_0020_0000), 0x7f00_0000_0000);
        // RELRO of `-z now`: inside the data segment.
        let now = testbin::build("int main(void) { return 0; }\n", &["-Wl,-z,now,-z,relro"]);
        let elf = crate::elf::parse(&now).unwrap();
        let (start, end) = relro_ranges(&elf).next().expect("a RELRO segment");
        assert!(start > 0 && end > start);
    }
}
