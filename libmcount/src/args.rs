//! Arguments and return values (`-A`, `-R`, `-a`; runtime spec §8, data-format §3.4).
//!
//! The session constructor binds the recorder's spec lists to functions once: every function
//! symbol of every module in the session map, and every hooked PLT entry, whose name matches
//! an entry gets the items that entry names, bound by `record_format::argbind`, the binder the
//! readers use with the `info` file (so payload and spec agree item for item). With auto-args
//! (`-a`), functions the lists leave without items take the `A:`/`R:` lines of the
//! executable's `.dbg` file, or the built-in prototype of their name.
//!
//! Hooks then look the function up in a sorted table of address ranges. ENTRY payloads are
//! read from the registers the entry trampoline saved (and the caller's stack above the return
//! slot); EXIT payloads from those the exit trampoline saved. Memory behind pointers (strings)
//! is copied with `process_vm_readv`, so a bad pointer is recorded as `<0x…>` instead of
//! faulting. Nothing here allocates after start-up.

use crate::cpu::{EntryRegs, ExitRegs};
use crate::frame_flags::{RETVAL, RET_FP, RET_INT};
use core::sync::atomic::{AtomicU64, AtomicU8, AtomicUsize, Ordering};
use record_format::argbind::{self, SpecEntry};
use record_format::argspec::{ArgFormat, ArgItem, ItemKind, Location, MAX_STR};
use record_format::dbg::DbgFile;
use record_format::demangle::{demangle, Demangle};
use record_format::maps::MapEntry;
use record_format::pattern::{is_plt_module, MatchType, NameMatcher};
use record_format::raw::align;
use std::sync::OnceLock;

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
    let Some(plan) = Plan::of(f) else {
        return;
    };
    let e = &PLAN_CACHE[(child_ip >> 4) % CACHE_LEN];
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
            plan: args.iter().map(Cap::of).collect(),
            ret_plan: ret.as_ref().map(Cap::of),
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
    fn of(item: &ArgItem) -> Cap {
        Cap {
            loc: item.location(),
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

/// Automatic specs: `.dbg` lines of the executable by address, built-in ones by name.
#[derive(Default)]
pub(crate) struct Auto {
    /// The executable's load bias and its `.dbg` contents.
    exe: Option<(u64, DbgFile)>,
    builtin_args: Vec<Entry>,
    builtin_rets: Vec<Entry>,
}

impl Auto {
    fn items(&self, addr: u64, name: &str, kind: ItemKind) -> Vec<ArgItem> {
        if let Some((bias, dbg)) = &self.exe {
            let rel = addr.wrapping_sub(*bias);
            if let Some(f) = dbg.functions.iter().find(|f| f.addr == rel) {
                let text = match kind {
                    ItemKind::Args => f.args.as_deref(),
                    ItemKind::Ret => f.ret.as_deref(),
                };
                if let Some(text) = text {
                    let items = argbind::auto_items(text, kind, 8);
                    if !items.is_empty() {
                        return items;
                    }
                }
            }
        }
        let list = match kind {
            ItemKind::Args => &self.builtin_args,
            ItemKind::Ret => &self.builtin_rets,
        };
        list.iter()
            .find(|e| e.matcher.matches(name))
            .map(|e| e.spec.items.clone())
            .unwrap_or_default()
    }
}

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

/// The items of the function `name` at `addr` in module `module` (`PLT` for PLT entries),
/// bound as the readers bind them ([`argbind::bind`]).
pub(crate) fn bind(
    lists: &[Vec<Entry>; 2],
    auto: &Auto,
    all_auto: bool,
    addr: u64,
    name: &str,
    module: &str,
    plt: bool,
) -> FuncArgs {
    let [arg_list, ret_list] = lists;
    let (args, ret) = argbind::bind(
        arg_list
            .iter()
            .filter(|e| e.names(name, module, plt))
            .map(|e| &e.spec),
        ret_list
            .iter()
            .filter(|e| e.names(name, module, plt))
            .map(|e| &e.spec),
        all_auto,
        |kind| auto.items(addr, name, kind),
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
        exe: set.exe_dbg.clone(),
        builtin_args: entries(set.argauto, ItemKind::Args, MatchType::Regex),
        builtin_rets: entries(set.retauto, ItemKind::Ret, MatchType::Regex),
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
            let f = bind(&lists, &auto, set.auto, start, &name, base, false);
            add(start, start + size, f);
        }
    }
    for &(entry, raw) in plt {
        let name = demangle(raw, Demangle::Simple);
        let f = bind(&lists, &auto, set.auto, entry as u64, &name, "PLT", true);
        add(entry as u64, entry as u64 + 16, f);
    }
    table.ranges.sort_by_key(|r| r.start);
    table.ranges.dedup_by_key(|r| r.start);
    if !table.ranges.is_empty() {
        let _ = ARGS.set(table);
    }
    crate::late_args::keep(lists, auto, set.auto);
}

/// Writes payload items into ring memory (4-byte aligned items, zero padding). The caller
/// sized the buffer for the function's largest payload.
struct Payload<'a> {
    out: &'a mut [u8],
    len: usize,
}

impl Payload<'_> {
    fn put(&mut self, bytes: &[u8]) {
        let end = (self.len + bytes.len()).min(self.out.len());
        if let Some(dst) = self.out.get_mut(self.len..end) {
            dst.copy_from_slice(&bytes[..end - self.len]);
        }
        self.len = end;
    }

    /// Zero padding to the next multiple of `to` (4 or 8).
    #[inline]
    fn pad(&mut self, to: usize) {
        let end = align(self.len, to).min(self.out.len());
        if end == self.len {
            return;
        }
        // One 8-byte store covers any pad when there is room (no memset call).
        if let Some(dst) = self.out.get_mut(self.len..self.len + 8) {
            dst.copy_from_slice(&[0; 8]);
        } else if let Some(dst) = self.out.get_mut(self.len..end) {
            dst.fill(0);
        }
        self.len = end;
    }

    /// An integer of `size` bytes, padded to 4 (one 8-byte store when there is room).
    #[inline]
    fn int(&mut self, value: u64, size: usize) {
        let len = align(size.min(8), 4);
        let keep = match size {
            1 => 0xff,
            2 => 0xffff,
            4 => 0xffff_ffff,
            _ => u64::MAX,
        };
        if let Some(dst) = self.out.get_mut(self.len..self.len + 8) {
            dst.copy_from_slice(&(value & keep).to_le_bytes());
            self.len += len;
        } else {
            self.put(&(value & keep).to_le_bytes()[..len]);
        }
    }

    /// A string read from `ptr`: `NULL`, `<0x…>` when unreadable, cut at [`MAX_STR`].
    fn string(&mut self, ptr: usize, known_len: Option<usize>) {
        let mut buf = [0u8; MAX_STR + 1];
        let len = if ptr == 0 {
            buf[..4].copy_from_slice(b"NULL");
            4
        } else {
            let want = known_len.map_or(buf.len(), |n| n.min(buf.len()));
            let got = crate::sys::read_self(ptr, &mut buf[..want]);
            if got == 0 && want > 0 {
                hex_pointer(ptr, &mut buf)
            } else {
                let s = &buf[..got];
                let mut n = match known_len {
                    Some(n) => n.min(got),
                    None => s.iter().position(|&b| b == 0).unwrap_or(got),
                };
                if n > MAX_STR || known_len.is_some_and(|k| k > MAX_STR) {
                    buf[MAX_STR - 3..MAX_STR].copy_from_slice(b"...");
                    n = MAX_STR;
                }
                n
            }
        };
        self.put(&(len as u16).to_le_bytes());
        self.put(&buf[..len]);
        self.pad(4);
    }
}

/// `<0x…>` for an unreadable pointer; returns the length.
fn hex_pointer(ptr: usize, buf: &mut [u8; MAX_STR + 1]) -> usize {
    let mut n = 0;
    for &b in b"<0x" {
        buf[n] = b;
        n += 1;
    }
    let digits = (usize::BITS - ptr.leading_zeros()).div_ceil(4).max(1);
    for i in (0..digits).rev() {
        buf[n] = b"0123456789abcdef"[(ptr >> (i * 4)) & 0xf];
        n += 1;
    }
    buf[n] = b'>';
    n + 1
}

/// The 8 bytes of integer register `r` (0 = rdi … 5 = r9).
#[inline]
fn int_reg(regs: &EntryRegs, r: u8) -> u64 {
    (match r {
        0 => regs.rdi,
        1 => regs.rsi,
        2 => regs.rdx,
        3 => regs.rcx,
        4 => regs.r8,
        _ => regs.r9,
    }) as u64
}

/// The 8-byte word `k` words above the return slot (the caller's stack; `k` ≥ 1), read
/// directly when it lies in the stack page of the slot, else through `read_self`.
#[inline]
fn stack_word(parent_loc: usize, k: u32) -> u64 {
    let addr = parent_loc.wrapping_add(8 * k as usize);
    if parent_loc != 0 && addr / crate::sys::PAGE_SIZE == parent_loc / crate::sys::PAGE_SIZE {
        // SAFETY: `parent_loc` is a live return slot on this thread's stack, so its page is
        // mapped; `addr` is an aligned word of the same page.
        return unsafe { (addr as *const u64).read() };
    }
    let mut b = [0u8; 8];
    crate::sys::read_self(addr, &mut b);
    u64::from_le_bytes(b)
}

/// Writes one item whose first two register/stack words are `lo`, `hi` (the `xmm` bytes for
/// floats).
fn put_item(p: &mut Payload, cap: &Cap, lo: u64, hi: u64, struct_at: Option<usize>) {
    match cap.form {
        Form::Int => p.int(lo, cap.size),
        Form::Char => p.int(lo & 0xff, 1),
        Form::Str => p.string(lo as usize, None),
        Form::StdStr => {
            // libstdc++: `{ char *ptr; size_t len; ... }` at the address passed.
            let mut obj = [0u8; 16];
            if lo != 0 && crate::sys::read_self(lo as usize, &mut obj) == 16 {
                let ptr = u64::from_le_bytes(obj[..8].try_into().unwrap_or([0; 8]));
                let len = u64::from_le_bytes(obj[8..].try_into().unwrap_or([0; 8]));
                p.string(ptr as usize, Some(len as usize));
            } else {
                p.string(lo as usize, None);
            }
        }
        Form::Float => {
            let mut raw = [0u8; 16];
            raw[..8].copy_from_slice(&lo.to_le_bytes());
            raw[8..].copy_from_slice(&hi.to_le_bytes());
            p.put(&raw[..cap.size.min(16)]);
            p.pad(4);
        }
        Form::Struct => {
            let n = cap.size;
            match struct_at {
                Some(addr) => {
                    let mut chunk = [0u8; 64];
                    let mut done = 0;
                    while done < n {
                        let k = (n - done).min(chunk.len());
                        chunk[..k].fill(0);
                        crate::sys::read_self(addr + done, &mut chunk[..k]);
                        p.put(&chunk[..k]);
                        done += k;
                    }
                }
                None => {
                    let mut raw = [0u8; 16];
                    raw[..8].copy_from_slice(&lo.to_le_bytes());
                    raw[8..].copy_from_slice(&hi.to_le_bytes());
                    p.put(&raw[..n.min(16)]);
                }
            }
            p.pad(4);
        }
    }
}

/// Writes the ENTRY payload of `f` into `out` (at least `f.args_max` bytes); returns its
/// length (a multiple of 8).
#[inline]
pub fn entry_payload(f: &FuncArgs, regs: &EntryRegs, parent_loc: usize, out: &mut [u8]) -> usize {
    let mut p = Payload { out, len: 0 };
    for cap in &f.plan {
        let xmm = |x: u8| {
            let b = regs.xmm[x as usize % 8];
            (
                u64::from_le_bytes(b[..8].try_into().unwrap_or([0; 8])),
                u64::from_le_bytes(b[8..].try_into().unwrap_or([0; 8])),
            )
        };
        let (lo, hi) = match cap.loc {
            Some(Location::Reg(r)) => (int_reg(regs, r), 0),
            Some(Location::RegPair(a, b)) => (int_reg(regs, a), int_reg(regs, b)),
            Some(Location::Xmm(x)) => xmm(x),
            Some(Location::Stack(k)) => (stack_word(parent_loc, k), stack_word(parent_loc, k + 1)),
            Some(Location::Return) | None => (0, 0),
        };
        // A struct too large for registers is copied from the stack.
        let struct_at = match (cap.form, cap.loc) {
            (Form::Struct, Some(Location::Stack(k))) => {
                Some(parent_loc.wrapping_add(8 * k as usize))
            }
            (Form::Struct, None) if cap.size > 16 => Some(parent_loc + 8),
            _ => None,
        };
        put_item(&mut p, cap, lo, hi, struct_at);
    }
    p.pad(8);
    p.len
}

/// Writes the EXIT payload of `f` into `out` (at least `f.ret_max` bytes); returns its length
/// (a multiple of 8, 0 without a return item).
#[inline]
pub fn exit_payload(f: &FuncArgs, regs: &ExitRegs, out: &mut [u8]) -> usize {
    let Some(cap) = &f.ret_plan else {
        return 0;
    };
    let (lo, hi) = match cap.form {
        Form::Float => (
            u64::from_le_bytes(regs.xmm0[..8].try_into().unwrap_or([0; 8])),
            u64::from_le_bytes(regs.xmm0[8..].try_into().unwrap_or([0; 8])),
        ),
        _ => (regs.rax as u64, regs.rdx as u64),
    };
    // Returned in memory: rax holds the caller's buffer.
    let struct_at = (cap.form == Form::Struct && cap.size > 16).then_some(regs.rax);
    let mut p = Payload { out, len: 0 };
    put_item(&mut p, cap, lo, hi, struct_at);
    p.pad(8);
    p.len
}

#[cfg(test)]
mod tests {
    use super::*;
    use record_format::argspec::{decode_payload, parse_item, ArgValue};

    fn item(w: &str) -> ArgItem {
        parse_item(w, 8).unwrap().unwrap()
    }

    fn regs() -> EntryRegs {
        // SAFETY: EntryRegs is plain integers and byte arrays: all-zero is valid.
        let mut r: EntryRegs = unsafe { core::mem::zeroed() };
        r.rdi = 7;
        r.rsi = c"hello".as_ptr() as usize;
        r.rdx = 0;
        r.rcx = 0xdead_0000; // unmapped
        r.r8 = b'z' as usize;
        r.xmm[0][..8].copy_from_slice(&2.5f64.to_le_bytes());
        r.xmm[1][..4].copy_from_slice(&1.5f32.to_le_bytes());
        r
    }

    #[test]
    fn entry_payload_decodes_with_the_same_items() {
        let items: Vec<ArgItem> = [
            "arg1/i32",
            "arg2/s",
            "arg3/s",
            "arg4/s",
            "arg5/c",
            "fparg1",
            "fparg2/32",
            "arg1",
        ]
        .iter()
        .map(|w| item(w))
        .collect();
        let mut buf = [0u8; MAX_PAYLOAD + 8];
        let f = FuncArgs::new(items.clone(), None);
        let n = entry_payload(&f, &regs(), 0, &mut buf);
        assert_eq!(n % 8, 0);
        let refs: Vec<&ArgItem> = items.iter().collect();
        let v = decode_payload(&refs, &buf[..n]).unwrap();
        assert_eq!(v[0], ArgValue::Int { raw: 7, size: 4 });
        assert_eq!(v[1], ArgValue::Str(b"hello".to_vec()));
        assert_eq!(v[2], ArgValue::Str(b"NULL".to_vec()));
        assert_eq!(v[3], ArgValue::Str(b"<0xdead0000>".to_vec()));
        assert_eq!(v[4], ArgValue::Char(b'z'));
        assert_eq!(v[5], ArgValue::Float(2.5));
        assert_eq!(v[6], ArgValue::Float(1.5));
        assert_eq!(v[7], ArgValue::Int { raw: 7, size: 8 });
        assert_eq!(
            record_format::argspec::payload_len(&refs, &buf[..n]),
            Some(n)
        );
    }

    #[test]
    fn long_strings_are_cut_like_uftrace() {
        let long = [b'a'; 300];
        let mut s = long.to_vec();
        s.push(0);
        let mut r = regs();
        r.rdi = s.as_ptr() as usize;
        let mut buf = [0u8; MAX_PAYLOAD + 8];
        let it = item("arg1/s");
        let f = FuncArgs::new(vec![it.clone()], None);
        let n = entry_payload(&f, &r, 0, &mut buf);
        let v = decode_payload(&[&it], &buf[..n]).unwrap();
        let ArgValue::Str(text) = &v[0] else {
            panic!("{v:?}")
        };
        assert_eq!(text.len(), 98);
        assert!(text.ends_with(b"a..."));
    }

    #[test]
    fn return_values() {
        let regs = ExitRegs {
            rax: 42,
            rdx: 0,
            xmm0: {
                let mut x = [0u8; 16];
                x[..8].copy_from_slice(&0.75f64.to_le_bytes());
                x
            },
            xmm1: [0; 16],
        };
        let mut buf = [0u8; MAX_PAYLOAD + 8];
        for (w, want) in [
            ("retval", ArgValue::Int { raw: 42, size: 8 }),
            ("retval/i32", ArgValue::Int { raw: 42, size: 4 }),
            ("retval/f64", ArgValue::Float(0.75)),
        ] {
            let it = item(w);
            let f = FuncArgs::new(Vec::new(), Some(it.clone()));
            let n = exit_payload(&f, &regs, &mut buf);
            assert_eq!(n, 8, "{w}");
            assert_eq!(decode_payload(&[&it], &buf[..n]).unwrap()[0], want, "{w}");
        }
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
            builtin_args: entries("strlen@arg1/s", ItemKind::Args, MatchType::Regex),
            builtin_rets: entries("strlen@retval/u", ItemKind::Ret, MatchType::Regex),
        };
        let f = bind(&lists, &auto, false, 0, "fib", "prog", false);
        let texts: Vec<&str> = f.args.iter().map(|i| i.text.as_str()).collect();
        assert_eq!(texts, ["arg1/x", "arg2/s"]);
        assert_eq!(f.ret.unwrap().text, "retval/i32");
        let s = bind(&lists, &auto, true, 0, "strlen", "PLT", true);
        assert_eq!(s.args[0].text, "arg1/s");
        assert_eq!(s.ret.unwrap().text, "retval/u");
        let none = bind(&lists, &auto, false, 0, "strlen", "PLT", true);
        assert_eq!(none, FuncArgs::default());
    }
}
