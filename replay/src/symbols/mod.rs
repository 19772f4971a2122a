//! Address → function resolution through the session maps and the modules' symbol tables.
//!
//! Every distinct function gets a small [`FuncId`]; everything per function (display name,
//! module, filter decisions, argument specs) is then looked up by that id, never by string.
//!
//! A module's symbols come from its `.sym` file in the data directory, else from its ELF file
//! ([`record_format::elf::read_sym_table`]); either way their addresses are relative to the
//! module's link base, so the run-time address is the start of the module's first mapping in
//! the session map plus the symbol's address ([`record_format::elf::load`]).

pub use record_format::demangle;

pub mod srcline;

use crate::config::Demangle;
use crate::modules::basename;
use record_format::maps::{kernel_base, MapEntry};
use record_format::sym::Symbol;
use record_format::task::TaskLine;
use record_format::TraceDir;
use std::collections::HashMap;
use std::path::Path;

/// Index into [`Symbolizer::func`].
pub type FuncId = u32;

/// A resolved function.
#[derive(Debug, Clone)]
pub struct FuncInfo {
    /// Name after demangling in the configured mode.
    pub name: String,
    /// Basename of the module (`[unknown]` when unresolved).
    pub module: String,
    /// Runtime start address (the raw address when unresolved).
    pub addr: u64,
    pub size: u64,
    /// A PLT entry (library call).
    pub is_plt: bool,
    /// Defined in the session's main executable.
    pub in_exe: bool,
    pub known: bool,
}

#[derive(Debug)]
struct Module {
    syms: Vec<Symbol>,
}

#[derive(Debug)]
struct Dlopen {
    time: u64,
    base: u64,
    libname: String,
}

#[derive(Debug)]
struct Session {
    pid: u32,
    comm: String,
    time: u64,
    exename: String,
    maps: Vec<MapEntry>,
    /// Per map: its loaded module (resolved on first use).
    map_modules: Vec<Option<Option<usize>>>,
    kernel_base: u64,
    dlopens: Vec<Dlopen>,
}

/// Slots of the direct-mapped address cache.
const CACHE_SLOTS: usize = 4096;

/// Resolves addresses of one data directory.
#[derive(Debug)]
pub struct Symbolizer<'d> {
    dir: &'d TraceDir,
    mode: Demangle,
    sessions: Vec<Session>,
    modules: Vec<Module>,
    module_by_path: HashMap<String, Option<usize>>,
    funcs: Vec<FuncInfo>,
    func_by_sym: HashMap<(usize, usize), FuncId>,
    func_by_addr: HashMap<u64, FuncId>,
    /// tid → its session timeline: (start time, session index), sorted by time.
    timelines: HashMap<u32, Vec<(u64, usize)>>,
    /// Each module's symbols by demangled name, with whether each is a PLT entry (for `--libname`).
    module_names: HashMap<usize, Vec<(String, bool)>>,
    libname_cache: HashMap<(usize, FuncId), Option<String>>,
    /// (addr, session + 1, func): resolutions of map-backed addresses.
    cache: Vec<(u64, usize, FuncId)>,
    /// Kernel functions from `kallsyms` (full addresses), sorted, and their ids once used.
    kernel_syms: Vec<(u64, String)>,
    kernel_ids: HashMap<usize, FuncId>,
    /// Source locations, when a command asks for them ([`Symbolizer::load_srclines`]).
    srclines: Option<srcline::SrcLines>,
}

/// The text symbols of a `kallsyms` file, sorted by address.
fn parse_kallsyms(text: &str) -> Vec<(u64, String)> {
    let mut out: Vec<(u64, String)> = text
        .lines()
        .filter_map(|l| {
            let mut it = l.split_whitespace();
            let addr = u64::from_str_radix(it.next()?, 16).ok()?;
            let ty = it.next()?;
            let name = it.next()?;
            (addr != 0 && matches!(ty, "T" | "t" | "W" | "w")).then(|| (addr, name.to_string()))
        })
        .collect();
    out.sort_by_key(|e| e.0);
    out
}

impl<'d> Symbolizer<'d> {
    pub fn new(dir: &'d TraceDir, mode: Demangle) -> Symbolizer<'d> {
        let mut sessions: Vec<Session> = dir
            .sessions
            .iter()
            .map(|s| Session {
                pid: s.pid,
                comm: basename(&s.exename).to_string(),
                time: s.time,
                exename: s.exename.clone(),
                kernel_base: kernel_base(&s.maps),
                map_modules: vec![None; s.maps.len()],
                maps: s.maps.clone(),
                dlopens: Vec::new(),
            })
            .collect();
        for t in &dir.tasks {
            if let TaskLine::Dlop {
                time,
                sid,
                base,
                libname,
                ..
            } = t
            {
                if let Some(i) = dir.sessions.iter().position(|s| &s.sid == sid) {
                    sessions[i].dlopens.push(Dlopen {
                        time: *time,
                        base: *base,
                        libname: libname.clone(),
                    });
                }
            }
        }
        let mut s = Symbolizer {
            dir,
            mode,
            sessions,
            modules: Vec::new(),
            module_by_path: HashMap::new(),
            funcs: Vec::new(),
            func_by_sym: HashMap::new(),
            func_by_addr: HashMap::new(),
            timelines: HashMap::new(),
            cache: vec![(0, 0, 0); CACHE_SLOTS],
            kernel_syms: dir
                .kernel
                .as_ref()
                .map(|k| parse_kallsyms(&k.kallsyms))
                .unwrap_or_default(),
            kernel_ids: HashMap::new(),
            module_names: HashMap::new(),
            libname_cache: HashMap::new(),
            srclines: None,
        };
        s.build_timelines();
        s
    }

    fn build_timelines(&mut self) {
        let mut pid_of: HashMap<u32, u32> = HashMap::new();
        let mut parent: HashMap<u32, (u32, u64)> = HashMap::new();
        for t in &self.dir.tasks {
            match t {
                TaskLine::Task { tid, pid, .. } => {
                    pid_of.insert(*tid, *pid);
                }
                TaskLine::Fork { time, pid, ppid } => {
                    pid_of.entry(*pid).or_insert(*pid);
                    parent.entry(*pid).or_insert((*ppid, *time));
                }
                _ => {}
            }
        }
        let tids: Vec<u32> = self.dir.info.tids.clone();
        for tid in tids {
            let tl = self.timeline_of(tid, &pid_of, &parent, 0);
            self.timelines.insert(tid, tl);
        }
    }

    fn timeline_of(
        &self,
        tid: u32,
        pid_of: &HashMap<u32, u32>,
        parent: &HashMap<u32, (u32, u64)>,
        level: u32,
    ) -> Vec<(u64, usize)> {
        let pid = pid_of.get(&tid).copied().unwrap_or(tid);
        let mut own: Vec<(u64, usize)> = self
            .sessions
            .iter()
            .enumerate()
            .filter(|(_, s)| s.pid == pid)
            .map(|(i, s)| (s.time, i))
            .collect();
        own.sort_by_key(|&(t, _)| t);
        let mut tl = Vec::new();
        // Before its own first session a process runs its parent's image (fork without exec).
        if let Some(&(ppid, fork_time)) = parent.get(&pid) {
            if level < 64 && own.first().is_none_or(|&(t, _)| t > fork_time) {
                let ptl = self.timeline_of(ppid, pid_of, parent, level + 1);
                if let Some(&(_, s)) = ptl
                    .iter()
                    .rev()
                    .find(|&&(t, _)| t <= fork_time)
                    .or(ptl.first())
                {
                    tl.push((0, s));
                }
            }
        }
        if tl.is_empty() {
            if let Some(&(_, first)) = own.first() {
                tl.push((0, first));
            } else if !self.sessions.is_empty() {
                tl.push((0, 0));
            }
        }
        tl.extend(own);
        tl
    }

    /// The session index of `tid` at `time`, and the time from which the next session starts.
    pub fn session_at(&self, tid: u32, time: u64) -> Option<(usize, u64)> {
        let tl = self.timelines.get(&tid)?;
        let i = tl.partition_point(|&(t, _)| t <= time);
        let idx = i.checked_sub(1)?;
        let next = tl.get(i).map_or(u64::MAX, |&(t, _)| t);
        Some((tl[idx].1, next))
    }

    /// Basename of the session's executable (the task name shown by replay and info).
    pub fn session_comm(&self, session: usize) -> &str {
        self.sessions.get(session).map_or("", |s| s.comm.as_str())
    }

    pub fn func(&self, id: FuncId) -> &FuncInfo {
        &self.funcs[id as usize]
    }

    /// Reads the modules' source locations (`--srcline`, `-L`).
    pub fn load_srclines(&mut self) {
        if self.srclines.is_none() {
            self.srclines = Some(srcline::SrcLines::new(self.dir));
        }
    }

    /// The source location of `id` (`None` unless [`Symbolizer::load_srclines`] ran).
    pub fn srcline(&self, id: FuncId) -> Option<&srcline::Loc> {
        self.srclines.as_ref()?.of(self.funcs.get(id as usize)?)
    }

    pub fn func_count(&self) -> usize {
        self.funcs.len()
    }

    fn load_module(&mut self, path: &str, build_id: Option<&str>) -> Option<usize> {
        if let Some(&m) = self.module_by_path.get(path) {
            return m;
        }
        let candidates = record_format::sym::file_names(path, build_id);
        let mut syms = None;
        for (i, name) in candidates.iter().enumerate() {
            let Some(f) = self.dir.read_sym(name) else {
                continue;
            };
            let path_ok = f.path_name.as_deref().is_none_or(|p| p == path);
            let id_ok = match (&f.build_id, build_id) {
                (Some(a), Some(b)) => a == b,
                _ => true,
            };
            let usable = (path_ok && id_ok) || (i == candidates.len() - 1 && syms.is_none());
            if usable && !f.symbols.is_empty() {
                syms = Some(f.symbols);
                break;
            }
        }
        let syms = syms.or_else(|| record_format::elf::read_sym_table(Path::new(path)));
        let idx = syms.map(|syms| {
            self.modules.push(Module { syms });
            self.modules.len() - 1
        });
        self.module_by_path.insert(path.to_string(), idx);
        idx
    }

    fn intern(
        &mut self,
        module: usize,
        sym: usize,
        base: u64,
        module_name: &str,
        in_exe: bool,
    ) -> FuncId {
        if let Some(&id) = self.func_by_sym.get(&(module, sym)) {
            return id;
        }
        let s = &self.modules[module].syms[sym];
        let info = FuncInfo {
            name: demangle::demangle(&s.name, self.mode),
            module: module_name.to_string(),
            addr: base + s.addr,
            size: s.size,
            is_plt: s.is_plt(),
            in_exe,
            known: true,
        };
        let id = self.funcs.len() as FuncId;
        self.funcs.push(info);
        self.func_by_sym.insert((module, sym), id);
        id
    }

    /// A kernel address (full, or the 48 bits records keep) as its `kallsyms` function.
    fn kernel(&mut self, addr: u64) -> FuncId {
        let full = if addr >> 48 == 0 {
            addr | 0xffff_0000_0000_0000
        } else {
            addr
        };
        let i = self.kernel_syms.partition_point(|s| s.0 <= full);
        let Some(k) = i.checked_sub(1) else {
            return self.unknown(addr, true);
        };
        self.kernel_func(k)
    }

    /// The kernel symbol at or before `addr` and the offset from it, for `%ps`/`%pS` in
    /// kernel event texts; `None` outside the kernel's text.
    pub fn kernel_symbol(&self, addr: u64) -> Option<(String, u64)> {
        let i = self.kernel_syms.partition_point(|s| s.0 <= addr);
        let (start, name) = self.kernel_syms.get(i.checked_sub(1)?)?;
        // The last symbol has no end: only addresses of the kernel's half count.
        (addr >> 63 == 1).then(|| (name.clone(), addr - start))
    }

    /// The id of kernel function `k` (of `kernel_syms`).
    fn kernel_func(&mut self, k: usize) -> FuncId {
        if let Some(&id) = self.kernel_ids.get(&k) {
            return id;
        }
        let (start, name) = self.kernel_syms[k].clone();
        let end = self.kernel_syms.get(k + 1).map_or(start, |n| n.0);
        let id = self.funcs.len() as FuncId;
        self.funcs.push(FuncInfo {
            name,
            module: "[kernel]".to_string(),
            addr: start,
            size: end - start,
            is_plt: false,
            in_exe: false,
            known: true,
        });
        self.kernel_ids.insert(k, id);
        id
    }

    fn unknown(&mut self, addr: u64, kernel: bool) -> FuncId {
        if let Some(&id) = self.func_by_addr.get(&addr) {
            return id;
        }
        let id = self.funcs.len() as FuncId;
        self.funcs.push(FuncInfo {
            name: format!("<{addr:x}>"),
            module: if kernel { "[kernel]" } else { "[unknown]" }.to_string(),
            addr,
            size: 0,
            is_plt: false,
            in_exe: false,
            known: false,
        });
        self.func_by_addr.insert(addr, id);
        id
    }

    fn lookup(syms: &[Symbol], rel: u64) -> Option<usize> {
        let i = syms.partition_point(|s| s.addr <= rel);
        // Overlapping entries (data and code) are rare: look back a few for a containing one.
        (i.saturating_sub(4)..i)
            .rev()
            .find(|&j| rel < syms[j].addr + syms[j].size)
    }

    /// Resolves `addr` recorded at `time` in session `session`.
    pub fn resolve(&mut self, session: Option<usize>, time: u64, addr: u64) -> FuncId {
        let Some(sidx) = session.filter(|&s| s < self.sessions.len()) else {
            return self.unknown(addr, false);
        };
        let kb = self.sessions[sidx].kernel_base;
        if kb != 0 && addr >= (kb & record_format::raw::ADDR_MASK) {
            return self.kernel(addr);
        }
        let slot = (addr ^ (addr >> 12)) as usize % CACHE_SLOTS;
        let (ca, cs, cf) = self.cache[slot];
        if ca == addr && cs == sidx + 1 {
            return cf;
        }
        let Some(mi) = self.sessions[sidx]
            .maps
            .iter()
            .position(|m| !m.is_stack() && m.contains(addr))
        else {
            return self.resolve_dlopen(sidx, time, addr);
        };
        let module = match self.sessions[sidx].map_modules[mi] {
            Some(m) => m,
            None => {
                let map = &self.sessions[sidx].maps[mi];
                let (path, id) = (map.path.clone(), map.build_id.clone());
                let m = self.load_module(&path, id.as_deref());
                self.sessions[sidx].map_modules[mi] = Some(m);
                m
            }
        };
        let start = self.sessions[sidx].maps[mi].start;
        let id = match module
            .and_then(|m| Self::lookup(&self.modules[m].syms, addr - start).map(|si| (m, si)))
        {
            Some((m, si)) => match self.func_by_sym.get(&(m, si)) {
                Some(&id) => id,
                None => {
                    let map = &self.sessions[sidx].maps[mi];
                    let in_exe = map.path == self.sessions[sidx].exename;
                    let name = basename(&map.path).to_string();
                    self.intern(m, si, start, &name, in_exe)
                }
            },
            None => self.unknown(addr, false),
        };
        self.cache[slot] = (addr, sidx + 1, id);
        id
    }

    fn resolve_dlopen(&mut self, sidx: usize, time: u64, addr: u64) -> FuncId {
        let dl: Vec<(u64, String)> = self.sessions[sidx]
            .dlopens
            .iter()
            .rev()
            .filter(|d| d.time <= time && addr >= d.base)
            .map(|d| (d.base, d.libname.clone()))
            .collect();
        for (base, lib) in dl {
            if let Some(m) = self.load_module(&lib, None) {
                if let Some(si) = Self::lookup(&self.modules[m].syms, addr - base) {
                    return self.intern(m, si, base, basename(&lib), false);
                }
            }
        }
        self.unknown(addr, false)
    }

    /// The library that defines the target of a PLT entry (for `--libname`): the first mapped
    /// library (besides the executable and libmcount) with a function of the same name. Like
    /// uftrace, a library that also imports that name through its own PLT counts only when
    /// the lookup lands on its definition ([`landing`]).
    pub fn library_of(&mut self, session: Option<usize>, func: FuncId) -> Option<String> {
        let sidx = session?;
        if let Some(v) = self.libname_cache.get(&(sidx, func)) {
            return v.clone();
        }
        let name = self.funcs.get(func as usize)?.name.clone();
        let maps = self.sessions.get(sidx)?.maps.clone();
        let exe = self.sessions[sidx].exename.clone();
        let skip = |m: &MapEntry| {
            m.is_stack() || m.path == exe || basename(&m.path).starts_with("libmcount")
        };
        let mut found = None;
        for map in maps.iter().filter(|m| !skip(m)) {
            let Some(m) = self.load_module(&map.path, map.build_id.as_deref()) else {
                continue;
            };
            let mode = self.mode;
            let index = self.module_names.entry(m).or_insert_with(|| {
                // Functions only, one per address and kind (the aliases a `.sym` file lists
                // after the first are not in uftrace's table).
                let mut prev = None;
                let mut v: Vec<(String, bool)> = Vec::new();
                for s in self.modules[m].syms.iter().filter(|s| s.is_function()) {
                    if prev.replace((s.addr, s.kind)) != Some((s.addr, s.kind)) {
                        v.push((demangle::demangle(&s.name, mode), s.is_plt()));
                    }
                }
                v.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
                v
            });
            // uftrace looks the name up by a binary search over the library's symbols sorted
            // by name: among a library's own definition and its PLT import of the same name,
            // the one the search lands on decides (an import: no library).
            let defined = matches!(landing(index, &name), Some((_, false)));
            if defined {
                found = Some(basename(&map.path).to_string());
                break;
            }
        }
        self.libname_cache.insert((sidx, func), found.clone());
        found
    }

    /// Every function symbol of every module mapped in any session, resolved to ids. Used to
    /// check whether a filter pattern matches anything.
    pub fn all_functions(&mut self) -> Vec<FuncId> {
        let mut out = Vec::new();
        for si in 0..self.sessions.len() {
            let maps = self.sessions[si].maps.clone();
            let exe = self.sessions[si].exename.clone();
            for map in maps.iter().filter(|m| !m.is_stack()) {
                if basename(&map.path).starts_with("libmcount") {
                    continue;
                }
                let Some(m) = self.load_module(&map.path, map.build_id.as_deref()) else {
                    continue;
                };
                for i in 0..self.modules[m].syms.len() {
                    if self.modules[m].syms[i].is_function() {
                        out.push(self.intern(
                            m,
                            i,
                            map.start,
                            basename(&map.path),
                            map.path == exe,
                        ));
                    }
                }
            }
        }
        // With kernel data, the kernel's functions too (patterns may name them).
        for k in 0..self.kernel_syms.len() {
            out.push(self.kernel_func(k));
        }
        out
    }
}

/// The entry of `sorted` (stably sorted by name) that a binary search for `name` lands on,
/// halving as C's `bsearch` does: the middle of [lo, hi) first.
fn landing<'a>(sorted: &'a [(String, bool)], name: &str) -> Option<&'a (String, bool)> {
    let (mut lo, mut hi) = (0, sorted.len());
    while lo < hi {
        let mid = (lo + hi) / 2;
        match name.as_bytes().cmp(sorted[mid].0.as_bytes()) {
            std::cmp::Ordering::Less => hi = mid,
            std::cmp::Ordering::Greater => lo = mid + 1,
            std::cmp::Ordering::Equal => return Some(&sorted[mid]),
        }
    }
    None
}
