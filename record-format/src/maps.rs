//! `sid-<SID>.map`: the modules of one process image, plus the `[stack]` line.

use std::fmt;

/// One (merged) mapping of a module.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MapEntry {
    pub start: u64,
    pub end: u64,
    pub perms: String,
    pub path: String,
    pub build_id: Option<String>,
}

impl MapEntry {
    pub fn contains(&self, addr: u64) -> bool {
        self.start <= addr && addr < self.end
    }

    pub fn is_stack(&self) -> bool {
        self.path.starts_with("[stack")
    }
}

impl fmt::Display for MapEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let head = format!(
            "{:x}-{:x} {} 00000000 00:00 0",
            self.start, self.end, self.perms
        );
        write!(f, "{head:<73}{}", self.path)?;
        if let Some(id) = &self.build_id {
            write!(f, " build-id:{id}")?;
        }
        Ok(())
    }
}

/// Parses a map file, merging consecutive lines of the same path as uftrace's reader does.
/// Lines that do not parse are skipped.
pub fn parse_maps(text: &str) -> Vec<MapEntry> {
    let mut out: Vec<MapEntry> = Vec::new();
    for line in text.lines() {
        let mut it = line.split_whitespace();
        let (Some(range), Some(perms), Some(_off), Some(_dev), Some(_inode)) =
            (it.next(), it.next(), it.next(), it.next(), it.next())
        else {
            continue;
        };
        let Some((s, e)) = range.split_once('-') else {
            continue;
        };
        let (Ok(start), Ok(end)) = (u64::from_str_radix(s, 16), u64::from_str_radix(e, 16)) else {
            continue;
        };
        let rest: Vec<&str> = it.collect();
        let mut build_id = None;
        let mut path_parts = Vec::new();
        for w in rest {
            match w.strip_prefix("build-id:") {
                Some(id) => build_id = Some(id.to_string()),
                None => path_parts.push(w),
            }
        }
        if path_parts.is_empty() {
            continue;
        }
        let path = path_parts.join(" ");
        if let Some(last) = out.last_mut() {
            if last.path == path {
                last.end = end;
                if perms.contains('x') {
                    last.perms = perms.to_string();
                }
                if build_id.is_some() {
                    last.build_id = build_id;
                }
                continue;
            }
        }
        out.push(MapEntry {
            start,
            end,
            perms: perms.to_string(),
            path,
            build_id,
        });
    }
    out
}

/// The kernel/user address split guessed from the `[stack]` mapping (0 without one).
pub fn kernel_base(maps: &[MapEntry]) -> u64 {
    let Some(stack) = maps.iter().find(|m| m.is_stack()) else {
        return 0;
    };
    match stack.start {
        a if a < 0x4000_0000 => 0x4000_0000,
        a if a < 0x8000_0000 => 0x8000_0000,
        a if a < 0xB000_0000 => 0xB000_0000,
        a if a < 0xC000_0000 => 0xC000_0000,
        a if a < 0x80_0000_0000 => 0xFFFF_FF80_0000_0000,
        a if a < 0x400_0000_0000 => 0xFFFF_FC00_0000_0000,
        a if a < 0x8000_0000_0000 => 0xFFFF_8000_0000_0000,
        _ => 0xFFFF_0000_0000_0000,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_merges_and_prints() {
        let text = "556679c7e000-556679c7f000 r--p 00000000 08:01 123  /home/user/src/fib\n\
                    556679c7f000-556679c83000 r-xp 00001000 08:01 123  /home/user/src/fib build-id:3a56\n\
                    7fdeca1de000-7fdeca3b3000 r-xp 00000000 00:00 0 /usr/lib/libc.so.6\n\
                    7fdeca3b3000-7fdeca3c3000 rw-p 00000000 00:00 0\n\
                    7ffd1032a000-7ffd1034b000 rw-p 00000000 00:00 0                          [stack]\n";
        let maps = parse_maps(text);
        assert_eq!(maps.len(), 3);
        assert_eq!(maps[0].start, 0x556679c7e000);
        assert_eq!(maps[0].end, 0x556679c83000);
        assert_eq!(maps[0].perms, "r-xp");
        assert_eq!(maps[0].build_id.as_deref(), Some("3a56"));
        assert_eq!(kernel_base(&maps), 0xFFFF_8000_0000_0000);
        let again = parse_maps(&maps.iter().map(|m| format!("{m}\n")).collect::<String>());
        assert_eq!(again, maps);
    }
}
