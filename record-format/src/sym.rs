//! `<module>.sym`: the symbol table of one module, addresses relative to its first mapping (its
//! link base, [`crate::elf::load`]); the recorder writes it from [`crate::elf::read_sym_table`].
//!
//! Two layouts exist. v4 (uftrace 0.13, written by utrace): `<addr %016x> <type> <name>`, sizes
//! implicit (a symbol ends where the next line starts; `?` lines only terminate). v0.14+
//! (`SYM_SIZE`): `<addr %016x> <size %08x> <type> <name>`. Both are read.

use std::fmt::Write as _;

/// One symbol. `kind` is uftrace's type letter: `T t w P K D d v u`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Symbol {
    pub addr: u64,
    pub size: u64,
    pub kind: char,
    pub name: String,
}

impl Symbol {
    pub fn is_function(&self) -> bool {
        matches!(self.kind, 'T' | 't' | 'w' | 'W' | 'P' | 'K' | 'i')
    }

    pub fn is_plt(&self) -> bool {
        self.kind == 'P'
    }
}

/// A parsed `.sym` file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SymFile {
    pub path_name: Option<String>,
    pub build_id: Option<String>,
    /// Sorted by address.
    pub symbols: Vec<Symbol>,
}

const END_MARKERS: [&str; 3] = ["__sym_end", "__dynsym_end", "__func_end"];
const ACCEPTED: &str = "TtwPKDdvu";

/// Parses a `.sym` file of either layout. Malformed lines are skipped, as uftrace does.
pub fn parse_sym(text: &str) -> SymFile {
    let mut out = SymFile::default();
    // (addr, kind) of the last accepted line, for the duplicate rule.
    let mut prev: Option<(u64, char)> = None;
    for line in text.lines() {
        if let Some(c) = line.strip_prefix('#') {
            let c = c.trim_start();
            if let Some(p) = c.strip_prefix("path name:") {
                out.path_name = Some(p.trim().to_string());
            } else if let Some(b) = c.strip_prefix("build-id:") {
                out.build_id = Some(b.trim().to_string());
            }
            continue;
        }
        let line = line.split('\t').next().unwrap_or("");
        let Some((addr, rest)) = line.split_once(' ') else {
            continue;
        };
        let Ok(addr) = u64::from_str_radix(addr, 16) else {
            continue;
        };
        // v0.14+ layout has an 8-digit hex size before the type.
        let (size, rest) = match rest.split_once(' ') {
            Some((sz, r)) if sz.len() > 1 && sz.bytes().all(|b| b.is_ascii_hexdigit()) => {
                (u64::from_str_radix(sz, 16).ok(), r)
            }
            _ => (None, rest),
        };
        let mut chars = rest.chars();
        let Some(kind) = chars.next() else { continue };
        let name = chars.as_str().strip_prefix(' ').unwrap_or("");
        // A new line closes the previous symbol of the implicit-size layout.
        if size.is_none() {
            if let Some(last) = out.symbols.last_mut() {
                if last.size == 0 && addr >= last.addr {
                    last.size = addr - last.addr;
                }
            }
        }
        if kind == '?' || END_MARKERS.contains(&name) {
            prev = Some((addr, kind));
            continue;
        }
        if !ACCEPTED.contains(kind) || prev == Some((addr, kind)) {
            continue;
        }
        prev = Some((addr, kind));
        out.symbols.push(Symbol {
            addr,
            size: size.unwrap_or(0),
            kind,
            name: name.to_string(),
        });
    }
    out.symbols.sort_by_key(|s| s.addr);
    out
}

/// The names the `.sym` file of the module at `path` may have, in the order readers try them:
/// `<basename>.sym`; for a second module of the same base name (the writer takes the second
/// name when the first is taken), `<basename>-<build-id's first 4 digits>.sym` when the session
/// map gives the module a build id, else `<basename>-<byte sum of the path, %04x>.sym`; then
/// that last form in any case, as uftrace also names them.
pub fn file_names(path: &str, build_id: Option<&str>) -> Vec<String> {
    let base = path.rsplit('/').next().unwrap_or(path);
    let mut names = vec![format!("{base}.sym")];
    if let Some(id) = build_id {
        // A damaged map may hold any text: the first four characters, not bytes.
        let short: String = id.chars().take(4).collect();
        names.push(format!("{base}-{short}.sym"));
    }
    let sum = path.bytes().fold(0u16, |a, b| a.wrapping_add(u16::from(b)));
    names.push(format!("{base}-{sum:04x}.sym"));
    names
}

/// Writes the v4 layout (readable by every uftrace version), closing gaps with `?` markers.
/// `symbols` need not be sorted; zero-size symbols are dropped.
pub fn write_sym(path_name: &str, build_id: Option<&str>, symbols: &[Symbol]) -> String {
    let mut syms: Vec<&Symbol> = symbols.iter().filter(|s| s.size > 0).collect();
    syms.sort_by(|a, b| {
        a.addr
            .cmp(&b.addr)
            .then(a.name.starts_with('_').cmp(&b.name.starts_with('_')))
    });
    syms.dedup_by_key(|s| s.addr);
    let mut out = String::with_capacity(syms.len() * 40 + 128);
    let _ = writeln!(out, "# symbols: {}", syms.len());
    let _ = writeln!(out, "# path name: {path_name}");
    if let Some(id) = build_id {
        let _ = writeln!(out, "# build-id: {id}");
    }
    for (i, s) in syms.iter().enumerate() {
        let _ = writeln!(out, "{:016x} {} {}", s.addr, s.kind, s.name);
        let end = s.addr + s.size;
        let next = syms.get(i + 1);
        // Alignment padding (up to 16 bytes) holds no code: no end marker for it, which
        // halves a library's file (sizes read back then include the padding, as uftrace's).
        let gap = next.is_none_or(|n| n.addr > end.next_multiple_of(16));
        let switch =
            next.is_some_and(|n| n.is_plt() != s.is_plt() || n.is_function() != s.is_function());
        if gap || switch {
            let marker = if s.is_plt() {
                "__dynsym_end"
            } else if s.is_function() {
                "__func_end"
            } else {
                "__sym_end"
            };
            let at = next.map_or(end, |n| end.min(n.addr));
            let _ = writeln!(out, "{at:016x} ? {marker}");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_names_of_a_damaged_build_id() {
        let names = file_names("/x/lib.so", Some("72\u{fffd}44fc"));
        assert_eq!(names[1], "lib.so-72\u{fffd}4.sym");
    }

    #[test]
    fn v4_implicit_sizes() {
        let text = "# symbols: 3\n# path name: /x/fib\n# build-id: abcd\n\
                    0000000000001050 P printf\n0000000000001060 P atoi\n0000000000001070 ? __dynsym_end\n\
                    00000000000011e9 T fib\n000000000000122a T main\n0000000000001308 ? __func_end\n";
        let f = parse_sym(text);
        assert_eq!(f.path_name.as_deref(), Some("/x/fib"));
        assert_eq!(f.build_id.as_deref(), Some("abcd"));
        let sizes: Vec<_> = f
            .symbols
            .iter()
            .map(|s| (s.name.as_str(), s.size))
            .collect();
        assert_eq!(
            sizes,
            [("printf", 16), ("atoi", 16), ("fib", 0x41), ("main", 0xde)]
        );
    }

    #[test]
    fn v014_explicit_sizes() {
        let f =
            parse_sym("000000000000037c 00000020 d __abi_tag\n00000000000011e9 00000041 T fib\n");
        assert_eq!(f.symbols[1].size, 0x41);
        assert_eq!(f.symbols[0].kind, 'd');
    }

    #[test]
    fn file_names_of_a_module() {
        assert_eq!(
            file_names("/usr/lib/libfoo.so", Some("abcdef12")),
            ["libfoo.so.sym", "libfoo.so-abcd.sym", "libfoo.so-06a9.sym"]
        );
        assert_eq!(file_names("/bin/true", None), ["true.sym", "true-0357.sym"]);
    }

    #[test]
    fn write_then_read() {
        let syms = vec![
            Symbol {
                addr: 0x11e9,
                size: 0x41,
                kind: 'T',
                name: "fib".into(),
            },
            Symbol {
                addr: 0x1050,
                size: 16,
                kind: 'P',
                name: "printf".into(),
            },
            Symbol {
                addr: 0x122a,
                size: 0x20,
                kind: 'T',
                name: "main".into(),
            },
            Symbol {
                addr: 0x4040,
                size: 4,
                kind: 'd',
                name: "x".into(),
            },
        ];
        let text = write_sym("/x/fib", None, &syms);
        let back = parse_sym(&text);
        let mut sorted = syms.clone();
        sorted.sort_by_key(|s| s.addr);
        assert_eq!(back.symbols, sorted);
    }
}
