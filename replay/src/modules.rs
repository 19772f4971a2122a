//! Per-module data of a data directory (what its `.dbg` files say), looked up by function.
//!
//! A module is known by its path and build id; it may be mapped in several sessions (and be
//! `dlopen`ed at a base of its own), each mapping pointing at the one copy of its data. A
//! function's address is made relative to the mapping that holds it.

use crate::symbols::FuncInfo;
use record_format::task::TaskLine;
use record_format::TraceDir;
use std::collections::HashMap;

/// Where a module was loaded in some session (or by `dlopen`).
#[derive(Debug)]
struct Mapping {
    start: u64,
    end: u64,
    /// Basename of the module, as in [`FuncInfo::module`].
    name: String,
    module: usize,
}

/// The base name of a path.
pub fn basename(p: &str) -> &str {
    p.rsplit('/').next().unwrap_or(p)
}

/// Data of type `T` for every module of a data directory.
#[derive(Debug)]
pub struct ModuleTable<T> {
    mappings: Vec<Mapping>,
    modules: Vec<T>,
}

impl<T> Default for ModuleTable<T> {
    fn default() -> Self {
        ModuleTable {
            mappings: Vec::new(),
            modules: Vec::new(),
        }
    }
}

impl<T> ModuleTable<T> {
    /// The modules of every session's maps and of every `dlopen`, each loaded once by
    /// `load(path, build_id)`.
    pub fn load(dir: &TraceDir, mut load: impl FnMut(&str, Option<&str>) -> T) -> Self {
        let mut table = ModuleTable::default();
        let mut index: HashMap<(String, Option<String>), usize> = HashMap::new();
        let mut add =
            |t: &mut ModuleTable<T>, start: u64, end: u64, path: &str, id: Option<&str>| {
                let key = (path.to_string(), id.map(str::to_string));
                let module = *index.entry(key).or_insert_with(|| {
                    t.modules.push(load(path, id));
                    t.modules.len() - 1
                });
                t.mappings.push(Mapping {
                    start,
                    end,
                    name: basename(path).to_string(),
                    module,
                });
            };
        for s in &dir.sessions {
            for m in s.maps.iter().filter(|m| !m.is_stack()) {
                add(&mut table, m.start, m.end, &m.path, m.build_id.as_deref());
            }
        }
        for t in &dir.tasks {
            if let TaskLine::Dlop { base, libname, .. } = t {
                add(&mut table, *base, u64::MAX, libname, None);
            }
        }
        table
    }

    /// Every module's data.
    pub fn modules(&self) -> &[T] {
        &self.modules
    }

    /// The data of the module holding `f`, and `f`'s address relative to it.
    pub fn of(&self, f: &FuncInfo) -> Option<(&T, u64)> {
        if !f.known {
            return None;
        }
        let m = self
            .mappings
            .iter()
            .filter(|m| m.name == f.module && m.start <= f.addr && f.addr < m.end)
            // A dlopen base is open-ended: prefer the closest one.
            .max_by_key(|m| (m.end != u64::MAX, m.start))?;
        Some((&self.modules[m.module], f.addr - m.start))
    }
}
