//! Source locations (`--srcline`, `-L`): the `L:` line of each function's block in its
//! module's `.dbg` file (data-format §8), found by module-relative address, as uftrace shows
//! it: `file:line`, the file relative to the module's compile directory as recorded.
//!
//! Loaded only when a command asks for locations: the `.dbg` files of every module of every
//! session map and `dlopen` (whether or not the DEBUG_INFO feature bit is set, as uftrace
//! 0.13 reads them). A function without a block, or whose block has no `L:` line (library
//! calls, code built without `-g`), has no location.

use super::FuncInfo;
use crate::specs::load_dbg;
use record_format::task::TaskLine;
use record_format::TraceDir;
use std::collections::HashMap;

/// One function's location.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Loc {
    /// `file:line`.
    text: String,
    /// Length of the file part of `text`.
    file_len: usize,
}

impl Loc {
    fn new(file: &str, line: u32) -> Loc {
        Loc {
            text: format!("{file}:{line}"),
            file_len: file.len(),
        }
    }

    /// `file:line`, as shown.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The source file, as `-L` matches it.
    pub fn file(&self) -> &str {
        &self.text[..self.file_len]
    }
}

/// Where a module was loaded in some session (or by `dlopen`: open-ended).
#[derive(Debug)]
struct Mapping {
    start: u64,
    end: u64,
    /// Basename, as in [`FuncInfo::module`].
    name: String,
    module: usize,
}

/// The locations of every module of a data directory.
#[derive(Debug, Default)]
pub struct SrcLines {
    mappings: Vec<Mapping>,
    /// Per module: module-relative address → location.
    modules: Vec<HashMap<u64, Loc>>,
}

fn basename(p: &str) -> &str {
    p.rsplit('/').next().unwrap_or(p)
}

impl SrcLines {
    pub fn new(dir: &TraceDir) -> SrcLines {
        let mut out = SrcLines::default();
        let mut index: HashMap<(String, Option<String>), usize> = HashMap::new();
        let mut add = |out: &mut SrcLines, start: u64, end: u64, path: &str, id: Option<&str>| {
            let key = (path.to_string(), id.map(str::to_string));
            let module = *index.entry(key).or_insert_with(|| {
                let locs = load_dbg(dir, path, id)
                    .functions
                    .into_iter()
                    .filter_map(|f| Some((f.addr, Loc::new(f.file.as_deref()?, f.line?))))
                    .collect();
                out.modules.push(locs);
                out.modules.len() - 1
            });
            out.mappings.push(Mapping {
                start,
                end,
                name: basename(path).to_string(),
                module,
            });
        };
        for s in &dir.sessions {
            for m in s.maps.iter().filter(|m| !m.is_stack()) {
                add(&mut out, m.start, m.end, &m.path, m.build_id.as_deref());
            }
        }
        for t in &dir.tasks {
            if let TaskLine::Dlop { base, libname, .. } = t {
                add(&mut out, *base, u64::MAX, libname, None);
            }
        }
        out
    }

    /// The location of `f`, if its module's `.dbg` file gives one.
    pub fn of(&self, f: &FuncInfo) -> Option<&Loc> {
        if !f.known || f.is_plt {
            return None;
        }
        let m = self
            .mappings
            .iter()
            .filter(|m| m.start <= f.addr && f.addr < m.end && m.name == f.module)
            // A dlopen base is open-ended: prefer the closest one.
            .max_by_key(|m| (m.end != u64::MAX, m.start))?;
        self.modules[m.module].get(&(f.addr - m.start))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn location_text_and_file() {
        let l = Loc::new("sub/lib.c", 12);
        assert_eq!(l.text(), "sub/lib.c:12");
        assert_eq!(l.file(), "sub/lib.c");
    }
}
