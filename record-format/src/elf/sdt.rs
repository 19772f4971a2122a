//! User-space SDT probes (`<sys/sdt.h>`, `DTRACE_PROBE*`/`STAP_PROBE*`): each probe site is a
//! one-byte `nop` in the code, described by a note of type 3, owner `stapsdt`, in the
//! non-allocated section `.note.stapsdt`. The note's descriptor holds three addresses of the
//! ELF class's size (the site, the link-time address of the `.stapsdt.base` section, and the
//! probe's semaphore or 0), then three NUL-terminated strings: provider, name and the format
//! of the arguments (`-4@%edi` ...).
//!
//! When the file was prelinked, `.stapsdt.base` moved and the site with it: the site is
//! adjusted by the section's address minus the note's base, as the SDT convention says.

use goblin::elf::Elf;

/// Note type of an SDT probe.
const NT_STAPSDT: u32 = 3;

/// One probe of a file, with link-time addresses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SdtProbe {
    pub provider: String,
    pub name: String,
    /// The probe site (the `nop`).
    pub pc: u64,
    /// The `unsigned short` counting the probe's users (0: none): code guarded by
    /// `PROVIDER_NAME_ENABLED()` runs while it is non-zero.
    pub semaphore: u64,
    /// The arguments' format, as written by the compiler.
    pub args: String,
}

impl SdtProbe {
    /// `provider:name`, as `events.txt` and the readers name the event.
    pub fn full_name(&self) -> String {
        format!("{}:{}", self.provider, self.name)
    }
}

/// The SDT probes of the ELF file `bytes`, in note order (empty when it has none).
pub fn sdt_probes(elf: &Elf<'_>, bytes: &[u8]) -> Vec<SdtProbe> {
    let word = if elf.is_64 { 8 } else { 4 };
    let base_section = super::section(elf, ".stapsdt.base").map(|(addr, _)| addr);
    let Some(notes) = elf.iter_note_sections(bytes, Some(".note.stapsdt")) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for note in notes.flatten() {
        if note.n_type != NT_STAPSDT || note.name != "stapsdt" || note.desc.len() < 3 * word {
            continue;
        }
        let addr = |i: usize| {
            let b = &note.desc[i * word..(i + 1) * word];
            match (word, elf.little_endian) {
                (8, true) => u64::from_le_bytes(b.try_into().unwrap_or([0; 8])),
                (8, false) => u64::from_be_bytes(b.try_into().unwrap_or([0; 8])),
                (_, true) => u64::from(u32::from_le_bytes(b.try_into().unwrap_or([0; 4]))),
                (_, false) => u64::from(u32::from_be_bytes(b.try_into().unwrap_or([0; 4]))),
            }
        };
        let (mut pc, base, semaphore) = (addr(0), addr(1), addr(2));
        if let Some(actual) = base_section.filter(|_| base != 0) {
            pc = pc.wrapping_add(actual).wrapping_sub(base);
        }
        let mut strings = note.desc[3 * word..]
            .split(|&b| b == 0)
            .map(|s| String::from_utf8_lossy(s).into_owned());
        let (Some(provider), Some(name)) = (strings.next(), strings.next()) else {
            continue;
        };
        if provider.is_empty() || name.is_empty() {
            continue;
        }
        out.push(SdtProbe {
            provider,
            name,
            pc,
            semaphore,
            args: strings.next().unwrap_or_default(),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probes_of_a_built_program() {
        if !std::path::Path::new("/usr/include/x86_64-linux-gnu/sys/sdt.h").exists()
            && !std::path::Path::new("/usr/include/sys/sdt.h").exists()
        {
            eprintln!("skipped: <sys/sdt.h> is missing (systemtap-sdt-dev)");
            return;
        }
        let bytes = crate::elf::testbin::build(
            "#include <sys/sdt.h>\n\
             int work(int n) { DTRACE_PROBE1(app, start, n); DTRACE_PROBE(app, end); return n; }\n\
             int main(void) { return work(1); }\n",
            &["-O0"],
        );
        let elf = crate::elf::parse(&bytes).unwrap();
        let probes = sdt_probes(&elf, &bytes);
        let names: Vec<String> = probes.iter().map(SdtProbe::full_name).collect();
        assert_eq!(names, ["app:start", "app:end"]);
        assert_eq!(probes[1].args, "");
        assert!(!probes[0].args.is_empty());
        for p in &probes {
            // The site is a one-byte nop inside the text.
            let off = elf
                .program_headers
                .iter()
                .find(|h| {
                    h.p_type == goblin::elf::program_header::PT_LOAD
                        && (h.p_vaddr..h.p_vaddr + h.p_filesz).contains(&p.pc)
                })
                .map(|h| p.pc - h.p_vaddr + h.p_offset)
                .unwrap();
            assert_eq!(bytes[off as usize], 0x90, "{p:?}");
            assert_eq!(p.semaphore, 0);
        }
    }
}
