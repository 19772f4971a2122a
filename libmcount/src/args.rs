//! Arguments and return values (`-A`, `-R`, `-a`; runtime spec §8, data-format §3.4).
//!
//! The session constructor binds the recorder's spec lists to functions once: every function
//! symbol of every module in the session map, and every hooked PLT entry, whose name matches
//! an entry gets the items that entry names, bound by `record_format::argbind`, the binder the
//! readers use with the `info` file (so payload and spec agree item for item). An entry
//! without items (`-A .`), and with auto-args (`-a`) every function the lists leave without
//! items, takes the function's automatic spec (`args/auto.rs`): the `A:`/`R:` lines of the
//! executable's `.dbg` file, or the built-in prototype of its name.
//!
//! Hooks then look the function up in a sorted table of address ranges. ENTRY payloads are
//! read from the registers the entry trampoline saved (and the caller's stack above the return
//! slot), each item where `record_format::argspec::locations` puts it; EXIT payloads from those
//! the exit trampoline saved, or x87 `st(0)` for a long double (`payload`). Memory behind
//! pointers (strings) is copied with `process_vm_readv`, so a bad pointer is recorded as
//! `<0x…>` instead of faulting. Nothing here allocates after start-up.

use crate::frame_flags::{RETVAL, RET_FP, RET_INT};
use core::sync::atomic::{AtomicU64, AtomicU8, AtomicUsize, Ordering};
use record_format::argbind::{self, SpecEntry};
use record_format::argspec::{self, ArgFormat, ArgItem, ItemKind, Location};
use record_format::dbg::DbgFile;
use record_format::demangle::{demangle, Demangle};
use record_format::maps::MapEntry;
use record_format::pattern::{is_plt_module, MatchType, NameMatcher};
use record_format::raw::align;
use std::sync::OnceLock;

mod payload;

pub use payload::{entry_payload, exit_payload};

/// Largest payload written; functions whose items could need more are not given any.
pub const MAX_PAYLOAD: usize = 1024;

/// Set when arguments are recorded without record-time filters: the entry trampolines' fast
/// paths then look each function up in [`PLAN_CACHE`].
pub static ARGS_ON: AtomicU8 = AtomicU8::new(0);

/// Entries of [`PLAN_CACHE`] (a power of two).
pub const CACHE_LEN: usize = 4096;

/// Bytes the entry fast path needs free in the ring: a record with [`PLAN_ITEMS`] 8-byte items.
pub const FAST_ROOM: usize = 64;

/// Items a fast-path plan holds.
const PLAN_ITEMS: usize = 5;

/// One cached function: `key` is its hook address (`child_ip`, what the trampoline sees),
/// `plan` how the trampoline records it (see [`Plan`]).
#[repr(C)]
pub struct CacheEntry {
    key: AtomicUsize,
    plan: AtomicU64,
}

/// Functions the entry trampolines may record without the Rust handler, indexed by
/// `(child_ip >> 4) % CACHE_LEN`; filled by the handler, lock-free. A function missing from
/// it (never seen, or colliding) takes the handler.
pub static PLAN_CACHE: [CacheEntry; CACHE_LEN] = [const {
    CacheEntry {
        key: AtomicUsize::new(0),
        plan: AtomicU64::new(0),
    }
}; CACHE_LEN];

/// A key being written.
const BUSY: usize = 1;

/// A fast-path capture plan: bytes 0–4 one item each (0 ends the list): bits 0–2 the saved
/// register's slot (`k` at `[rbp - 8k]` in the trampoline: rdi 5, rsi 4, rdx 3, rcx 2, r8 6;
/// 7 is r9, still live), bit 3 an 8-byte item (else 4 bytes: sizes 1, 2 and 4, whose padding
/// readers skip); byte 5 zero; bits 48–63 the frame flags (the return-value kind).
pub struct Plan;

impl Plan {
    /// The plan of `f`, if every item is an integer register argument of up to 8 bytes.
    fn of(f: Option<&FuncArgs>) -> Option<u64> {
        let Some(f) = f else {
            return Some(0);
        };
        if f.plan.len() > PLAN_ITEMS {
            return None;
        }
        let mut plan = u64::from(f.ret_flags()) << 48;
        for (i, cap) in f.plan.iter().enumerate() {
            let (Form::Int | Form::Char, Some(Location::Reg(r)), 1 | 2 | 4 | 8) =
                (cap.form, cap.loc, cap.size)
            else {
                return None;
            };
            let slot: u64 = [5, 4, 3, 2, 6, 7][r as usize % 6];
            let wide = if cap.size == 8 { 8 } else { 0 };
            plan |= (slot | wide) << (8 * i);
        }
        Some(plan)
    }
}

/// Puts the function hooked at `child_ip` (with items `f`) into [`PLAN_CACHE`] when the
/// trampolines can record it themselves.
pub fn remember(child_ip: usize, f: Option<&FuncArgs>) {
    if ARGS_ON.load(Ordering::Relaxed) == 0 || child_ip <= BUSY {
        return;
    }
    let e = &PLAN_CACHE[(child_ip >> 4) % CACHE_LEN];
    // Taken (by this function, whose calls with items come here every time, or by another):
    // a load, not a locked compare-exchange that would fail.
    if e.key.load(Ordering::Relaxed) != 0 {
        return;
    }
    let Some(plan) = Plan::of(f) else {
        return;
    };
    if e.key
        .compare_exchange(0, BUSY, Ordering::Acquire, Ordering::Relaxed)
        .is_ok()
    {
        e.plan.store(plan, Ordering::Relaxed);
        e.key.store(child_ip, Ordering::Release);
    }
}

/// The items recorded for one function.
#[derive(Debug, Default, PartialEq)]
pub struct FuncArgs {
    pub args: Vec<ArgItem>,
    pub ret: Option<ArgItem>,
    /// How each of `args` is read, worked out once.
    plan: Vec<Cap>,
    ret_plan: Option<Cap>,
    /// Most bytes the ENTRY and EXIT payloads can take.
    pub args_max: usize,
    pub ret_max: usize,
}

impl FuncArgs {
    /// The frame flags of a call: [`RET_INT`]/[`RET_FP`] when the trampoline can write the
    /// return value, [`RETVAL`] when the Rust handler must, else none.
    #[inline]
    pub fn ret_flags(&self) -> u16 {
        match self.ret_plan {
            None => 0,
            Some(Cap {
                form: Form::Int | Form::Char,
                size: ..=8,
                ..
            }) => RET_INT,
            Some(Cap {
                form: Form::Float,
                size: 4 | 8,
                ..
            }) => RET_FP,
            Some(_) => RETVAL,
        }
    }

    fn new(args: Vec<ArgItem>, ret: Option<ArgItem>) -> FuncArgs {
        FuncArgs {
            plan: args
                .iter()
                .zip(argspec::locations(&args))
                .map(|(item, loc)| Cap::of(item, loc))
                .collect(),
            ret_plan: ret.as_ref().map(|r| Cap::of(r, Some(Location::Return))),
            args_max: align(args.iter().map(ArgItem::max_len).sum::<usize>(), 8),
            ret_max: align(ret.as_ref().map_or(0, ArgItem::max_len), 8),
            args,
            ret,
        }
    }
}

/// How an item is stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Form {
    Int,
    Char,
    Str,
    StdStr,
    Float,
    Struct,
}

/// An item's capture plan: where its value is and how it is stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Cap {
    loc: Option<Location>,
    form: Form,
    size: usize,
}

impl Cap {
    /// The plan of `item`, read at `loc` ([`argspec::locations`]).
    fn of(item: &ArgItem, loc: Option<Location>) -> Cap {
        Cap {
            loc,
            form: match item.format {
                ArgFormat::Str => Form::Str,
                ArgFormat::StdString => Form::StdStr,
                ArgFormat::Char => Form::Char,
                ArgFormat::Float => Form::Float,
                ArgFormat::Struct(_) => Form::Struct,
                _ => Form::Int,
            },
            size: item.size,
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct Range {
    start: u64,
    end: u64,
    func: u32,
}

/// The session's argument table.
#[derive(Debug, Default)]
pub struct Args {
    ranges: Vec<Range>,
    funcs: Vec<FuncArgs>,
}

static ARGS: OnceLock<Args> = OnceLock::new();

/// The session's argument table, if any function has items.
#[inline]
pub fn get() -> Option<&'static Args> {
    // Without a session table, an empty one while late tables exist (`late_args`).
    static NONE: Args = Args {
        ranges: Vec::new(),
        funcs: Vec::new(),
    };
    ARGS.get()
        .or_else(|| crate::late_args::any().then_some(&NONE))
}

impl Args {
    /// The items of the function containing `addr`.
    #[inline]
    pub fn lookup(&self, addr: u64) -> Option<&FuncArgs> {
        let i = self.ranges.partition_point(|r| r.start <= addr);
        match i.checked_sub(1).and_then(|i| self.ranges.get(i)) {
            Some(r) if addr < r.end => self.funcs.get(r.func as usize),
            _ => crate::late_args::lookup(addr),
        }
    }
}

/// One entry of a spec list, for one kind, with its compiled pattern.
pub(crate) struct Entry {
    spec: SpecEntry,
    matcher: NameMatcher,
}

impl Entry {
    /// Whether the entry names the function `name` of module `module` (`plt`: a PLT entry).
    fn names(&self, name: &str, module: &str, plt: bool) -> bool {
        self.spec
            .module
            .as_deref()
            .is_none_or(|m| match is_plt_module(m) {
                true => plt,
                false => module.starts_with(m),
            })
            && self.matcher.matches(name)
    }
}

pub(crate) fn entries(list: &str, kind: ItemKind, ty: MatchType) -> Vec<Entry> {
    // The recorder validated the lists; an entry that does not parse is left out, as the
    // readers leave it out.
    argbind::parse_list(list, kind, 8)
        .into_iter()
        .flatten()
        .map(|spec| Entry {
            matcher: NameMatcher::new(&spec.name, ty),
            spec,
        })
        .collect()
}

mod auto;
pub(crate) use auto::{builtins, Auto, ExeSpecs, Sym};

/// The recorder's settings (from the `UTRACE_*` variables).
#[derive(Debug, Default)]
pub struct Settings<'a> {
    /// `-A` entries, `;`-separated.
    pub argspec: &'a str,
    /// `-R` entries.
    pub retspec: &'a str,
    /// `-a`.
    pub auto: bool,
    /// The built-in `argauto`/`retauto` lists.
    pub argauto: &'a str,
    pub retauto: &'a str,
    /// The executable's `.dbg` file, parsed, and where the executable is loaded.
    pub exe_dbg: Option<(u64, DbgFile)>,
    pub match_type: MatchType,
}

impl Settings<'_> {
    pub fn active(&self) -> bool {
        !self.argspec.is_empty() || !self.retspec.is_empty() || self.auto
    }
}

/// The items of the function `sym`, bound as the readers bind them ([`argbind::bind`]).
pub(crate) fn bind(lists: &[Vec<Entry>; 2], auto: &Auto, all_auto: bool, sym: &Sym) -> FuncArgs {
    let [arg_list, ret_list] = lists;
    let (args, ret) = argbind::bind(
        arg_list
            .iter()
            .filter(|e| e.names(sym.name, sym.module, sym.plt))
            .map(|e| &e.spec),
        ret_list
            .iter()
            .filter(|e| e.names(sym.name, sym.module, sym.plt))
            .map(|e| &e.spec),
        all_auto,
        |kind| auto.items(sym, kind),
    );
    let fits = args.iter().map(ArgItem::max_len).sum::<usize>() <= MAX_PAYLOAD;
    let args = if fits { args } else { Vec::new() };
    FuncArgs::new(args, ret)
}

/// Builds the table (library constructor). `modules` are the session map's entries, `plt`
/// the hooked PLT entries of the executable (address, name).
pub fn init(modules: &[MapEntry], plt: &[(usize, &str)], set: &Settings) {
    let lists = [
        entries(set.argspec, ItemKind::Args, set.match_type),
        entries(set.retspec, ItemKind::Ret, set.match_type),
    ];
    let auto = Auto {
        exe: set
            .exe_dbg
            .as_ref()
            .map(|(bias, dbg)| (*bias, ExeSpecs::new(dbg))),
        builtin_args: builtins(set.argauto, ItemKind::Args),
        builtin_rets: builtins(set.retauto, ItemKind::Ret),
    };
    let mut table = Args::default();
    let mut add = |start: u64, end: u64, f: FuncArgs| {
        if f.args.is_empty() && f.ret.is_none() {
            return;
        }
        let func = match table.funcs.iter().position(|g| *g == f) {
            Some(i) => i,
            None => {
                table.funcs.push(f);
                table.funcs.len() - 1
            }
        };
        table.ranges.push(Range {
            start,
            end,
            func: func as u32,
        });
    };
    for m in modules.iter().filter(|m| !m.is_stack()) {
        let base = crate::filter::basename(&m.path);
        for (start, size, raw) in crate::filter::module_functions(m) {
            let name = demangle(&raw, Demangle::Simple);
            let sym = Sym {
                addr: start,
                raw: &raw,
                name: &name,
                module: base,
                plt: false,
            };
            let f = bind(&lists, &auto, set.auto, &sym);
            add(start, start + size, f);
        }
    }
    for &(entry, raw) in plt {
        let name = demangle(raw, Demangle::Simple);
        let sym = Sym {
            addr: entry as u64,
            raw,
            name: &name,
            module: "PLT",
            plt: true,
        };
        let f = bind(&lists, &auto, set.auto, &sym);
        add(entry as u64, entry as u64 + 16, f);
    }
    table.ranges.sort_by_key(|r| r.start);
    table.ranges.dedup_by_key(|r| r.start);
    if !table.ranges.is_empty() {
        let _ = ARGS.set(table);
    }
    crate::late_args::keep(lists, auto, set.auto);
}

#[cfg(test)]
mod tests {
    use super::*;
    use record_format::argspec::parse_item;

    pub(super) fn item(w: &str) -> ArgItem {
        parse_item(w, 8).unwrap().unwrap()
    }

    #[test]
    fn fast_plans() {
        let f = |args: &[&str], ret: Option<&str>| {
            FuncArgs::new(args.iter().map(|w| item(w)).collect(), ret.map(item))
        };
        assert_eq!(Plan::of(None), Some(0));
        // rdi (slot 5) 8 bytes, rsi (4) 4 bytes, r9 (7) 1 byte; an int return value.
        let p = Plan::of(Some(&f(
            &["arg1", "arg2/i32", "arg6/c"],
            Some("retval/i32"),
        )));
        assert_eq!(p, Some((u64::from(RET_INT) << 48) | 0x07_04_0d));
        assert_eq!(Plan::of(Some(&f(&["arg1/s"], None))), None);
        assert_eq!(Plan::of(Some(&f(&["fparg1"], None))), None);
        assert_eq!(Plan::of(Some(&f(&["arg7"], None))), None);
        let six = ["arg1", "arg2", "arg3", "arg4", "arg5", "arg6"];
        assert_eq!(Plan::of(Some(&f(&six, None))), None);
    }

    #[test]
    fn binding_merges_like_the_reader() {
        let lists = [
            entries(
                "fib@arg1;f.*@arg2/s;fib@arg1/x",
                ItemKind::Args,
                MatchType::Regex,
            ),
            entries("fib@retval/i32", ItemKind::Ret, MatchType::Regex),
        ];
        let auto = Auto {
            exe: None,
            builtin_args: builtins("strlen@arg1/s", ItemKind::Args),
            builtin_rets: builtins("strlen@retval/u", ItemKind::Ret),
        };
        let sym = |raw, name, module, plt| Sym {
            addr: 0,
            raw,
            name,
            module,
            plt,
        };
        let f = bind(&lists, &auto, false, &sym("fib", "fib", "prog", false));
        let texts: Vec<&str> = f.args.iter().map(|i| i.text.as_str()).collect();
        assert_eq!(texts, ["arg1/x", "arg2/s"]);
        assert_eq!(f.ret.unwrap().text, "retval/i32");
        let s = bind(&lists, &auto, true, &sym("strlen", "strlen", "PLT", true));
        assert_eq!(s.args[0].text, "arg1/s");
        assert_eq!(s.ret.unwrap().text, "retval/u");
        let none = bind(&lists, &auto, false, &sym("strlen", "strlen", "PLT", true));
        assert_eq!(none, FuncArgs::default());
    }
}
