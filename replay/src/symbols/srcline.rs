//! Source locations (`--srcline`, `-L`): the `L:` line of each function's block in its
//! module's `.dbg` file (data-format §8), found by module-relative address, as uftrace shows
//! it: `file:line`, the file relative to the module's compile directory as recorded.
//!
//! Loaded only when a command asks for locations: the `.dbg` files of every module of every
//! session map and `dlopen` (whether or not the DEBUG_INFO feature bit is set, as uftrace
//! 0.13 reads them). A function without a block, or whose block has no `L:` line (library
//! calls, code built without `-g`), has no location.

use super::FuncInfo;
use crate::modules::ModuleTable;
use crate::specs::load_dbg;
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

/// The locations of every module of a data directory: per module, module-relative address
/// → location.
#[derive(Debug, Default)]
pub struct SrcLines {
    modules: ModuleTable<HashMap<u64, Loc>>,
}

impl SrcLines {
    pub fn new(dir: &TraceDir) -> SrcLines {
        let modules = ModuleTable::load(dir, |path, id| {
            load_dbg(dir, path, id)
                .functions
                .into_iter()
                .filter_map(|f| Some((f.addr, Loc::new(f.file.as_deref()?, f.line?))))
                .collect()
        });
        SrcLines { modules }
    }

    /// The location of `f`, if its module's `.dbg` file gives one.
    pub fn of(&self, f: &FuncInfo) -> Option<&Loc> {
        if f.is_plt {
            return None;
        }
        let (locs, addr) = self.modules.of(f)?;
        locs.get(&addr)
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
