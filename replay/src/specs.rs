//! Argument specs bound to functions: which items an ENTRY or EXIT payload holds, and the enum
//! definitions its values are shown with.
//!
//! A function's items are gathered the way uftrace's reader does:
//! 1. every entry of the recorded `-A`/`-R` lists (`argspec`/`retspec`) whose pattern matches
//!    adds its items; an entry without items asks for the function's automatic spec;
//! 2. with `auto-args:1`, a function that step 1 gave no arguments (or no return value) takes
//!    its automatic arguments (or return value).
//!
//! The automatic spec is the `A:`/`R:` line of the function's block in its module's `.dbg`
//! file, found by module-relative address (feature DEBUG_INFO), else the built-in
//! `argauto`/`retauto` entry of the same name (feature AUTO_ARGS). Items keep the position of
//! their first appearance; a later item for the same argument replaces the format, except that
//! a regex match never overrides an exact one.

use crate::config::{Demangle, MatchType};
use crate::filter::Pattern;
use crate::symbols::demangle::demangle;
use crate::symbols::{FuncId, FuncInfo};
use record_format::argspec::{
    items_of_kind as parse_items, ArgFormat, ArgItem, ArgSlot, ItemKind as Kind, ItemSet,
};
use record_format::dbg::{parse_dbg, parse_enums, DbgFile, EnumDefs, EnumValues};
use record_format::info::{feat, ArgSpecInfo};
use record_format::task::TaskLine;
use record_format::TraceDir;
use std::collections::HashMap;
use std::sync::Arc;

/// The items recorded for one function.
#[derive(Debug, Clone, Default)]
pub struct FuncSpec {
    /// The ENTRY payload's items, in payload order.
    pub args: Vec<ArgItem>,
    /// The EXIT payload's item.
    pub ret: Option<ArgItem>,
    /// Enum definitions for `e:NAME` items.
    pub enums: EnumScope,
    /// Replay-time `-A` selection: the recorded arguments to show, in this order and format
    /// (`None` shows every recorded argument as recorded).
    pub shown_args: Option<Vec<Shown>>,
    /// Replay-time `-R` selection of the return value (`Some(None)` hides it).
    pub shown_ret: Option<Option<Shown>>,
}

/// A recorded item picked for display by a replay-time `-A`/`-R`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shown {
    /// Position of the value among the payload's items.
    pub index: usize,
    /// How the value is shown.
    pub item: ArgItem,
}

/// The enum definitions visible to one function: its module's (from `.dbg`), then the built-in
/// `enumauto` list.
#[derive(Debug, Clone, Default)]
pub struct EnumScope {
    /// `None` when the function's module is unknown.
    module: Option<Arc<EnumDefs>>,
    builtin: Arc<EnumDefs>,
}

impl EnumScope {
    /// Whether the function's module is known (uftrace shows `<ENUM?>` values otherwise).
    pub fn has_module(&self) -> bool {
        self.module.is_some()
    }

    /// The enumerators of `name`, in definition order.
    pub fn get(&self, name: &str) -> Option<&EnumValues> {
        self.module
            .as_ref()
            .and_then(|m| m.get(name))
            .or_else(|| self.builtin.get(name))
    }
}

/// One `PATTERN@items` entry of a recorded list, read for one kind.
#[derive(Debug)]
struct Entry {
    /// The entry as written (`fib@arg1/x`).
    text: String,
    /// The function pattern as written.
    name: String,
    pattern: Pattern,
    /// A plain name (its items win over those of regex matches).
    exact: bool,
    items: Vec<ArgItem>,
}

/// Reads a `;`-separated list for one kind. Like uftrace, an entry with an item that does not
/// parse is dropped whole, with a notice.
fn parse_entries(
    list: &str,
    kind: Kind,
    long: usize,
    ty: MatchType,
    notices: &mut Vec<String>,
) -> Vec<Entry> {
    let mut out = Vec::new();
    for entry in list.split(';').filter(|e| !e.trim().is_empty()) {
        let (name, items) = entry.split_once('@').unwrap_or((entry, ""));
        let (items, module) = match parse_items(items, kind, long) {
            Ok(parsed) => parsed,
            Err((_, e)) => {
                notices.push(e.to_string());
                continue;
            }
        };
        out.push(Entry {
            text: entry.to_string(),
            name: name.to_string(),
            pattern: Pattern::new(name, module, ty),
            exact: record_format::pattern::is_literal(name),
            items,
        });
    }
    out
}

/// The built-in automatic specs of one function name.
#[derive(Debug, Default)]
struct Builtin {
    args: Vec<ArgItem>,
    ret: Vec<ArgItem>,
}

/// What a module's `.dbg` file says, by module-relative address.
#[derive(Debug, Default)]
struct ModuleDebug {
    /// `None`: the address is described twice and has no usable spec.
    args: HashMap<u64, Option<String>>,
    rets: HashMap<u64, Option<String>>,
    enums: Arc<EnumDefs>,
}

impl ModuleDebug {
    fn from_dbg(f: DbgFile) -> ModuleDebug {
        let owned = |m: HashMap<u64, Option<&str>>| {
            m.into_iter()
                .map(|(a, s)| (a, s.map(str::to_string)))
                .collect()
        };
        ModuleDebug {
            args: owned(f.specs_by_addr(false)),
            rets: owned(f.specs_by_addr(true)),
            enums: Arc::new(f.enums),
        }
    }
}

/// Where a module was loaded in some session (or by `dlopen`).
#[derive(Debug)]
struct Mapping {
    start: u64,
    end: u64,
    /// Basename of the module, as in [`FuncInfo::module`].
    name: String,
    module: usize,
}

fn basename(p: &str) -> &str {
    p.rsplit('/').next().unwrap_or(p)
}

/// Reads the `.dbg` file of a module: `<name>.dbg` if its header names this module, else the
/// suffixed name used for colliding basenames (`<name>-<build-id:4>.dbg`, or a checksum of the
/// path without build id).
fn load_dbg(dir: &TraceDir, path: &str, build_id: Option<&str>) -> DbgFile {
    let base = basename(path);
    if let Some(f) = dir.read_text(&format!("{base}.dbg")).map(|t| parse_dbg(&t)) {
        if f.matches(path, build_id) {
            return f;
        }
    }
    let alt = match build_id.filter(|b| !b.is_empty()) {
        Some(id) => format!("{base}-{}.dbg", id.get(..4).unwrap_or(id)),
        None => {
            // uftrace sums the path's (signed) chars.
            let sum = path
                .bytes()
                .fold(0u16, |a, b| a.wrapping_add(b as i8 as i16 as u16));
            format!("{base}-{sum:04x}.dbg")
        }
    };
    dir.read_text(&alt)
        .map(|t| parse_dbg(&t))
        .unwrap_or_default()
}

/// Recorded argument specs of a data directory, resolved per function on demand.
#[derive(Debug)]
pub struct Specs {
    long: usize,
    arg_entries: Vec<Entry>,
    ret_entries: Vec<Entry>,
    /// Built-in specs by name (raw and demangled both ways).
    builtin: HashMap<String, Builtin>,
    builtin_enums: Arc<EnumDefs>,
    all_auto: bool,
    mappings: Vec<Mapping>,
    modules: Vec<ModuleDebug>,
    cache: Vec<Option<FuncSpec>>,
    /// Replay-time `-A` and `-R` entries (selection among the recorded items).
    select_args: Vec<Entry>,
    select_rets: Vec<Entry>,
    pub empty: bool,
    /// `Usage:` notices for recorded items that do not parse, in uftrace's order (the built-in
    /// lists once, then the recorded lists once per session).
    pub notices: Vec<String>,
}

impl Specs {
    pub fn new(dir: &TraceDir) -> Specs {
        let long = dir.long_size();
        let ty = match dir.info.pattern_type.as_deref() {
            Some("glob") => MatchType::Glob,
            _ => MatchType::Regex,
        };
        let mut arg_entries = Vec::new();
        let mut ret_entries = Vec::new();
        let mut builtin = HashMap::new();
        let mut builtin_enums = EnumDefs::new();
        let mut all_auto = false;
        let mut notices = Vec::new();
        if let Some(a) = &dir.info.argspec {
            if dir.info.has_feature(feat::AUTO_ARGS) {
                builtin = Self::builtin_specs(a, long, &mut notices);
                for (name, values) in parse_enums(&a.enumauto).unwrap_or_default() {
                    builtin_enums.entry(name).or_insert(values);
                }
                all_auto = a.auto_args;
            }
            let argspec = a.argspec.as_deref().unwrap_or("");
            // (list, kind, entries kept): the recorded lists, then (auto-args without
            // DEBUG_INFO) the built-in ones, which only matter here for their notices.
            let mut passes = vec![
                (argspec, Kind::Args, true),
                (a.retspec.as_deref().unwrap_or(""), Kind::Ret, true),
            ];
            // Old data kept return values in the argspec list.
            if argspec.contains("retval") {
                passes.push((argspec, Kind::Ret, true));
            }
            if all_auto && !dir.info.has_feature(feat::DEBUG_INFO) {
                passes.push((&a.argauto, Kind::Args, false));
                passes.push((&a.retauto, Kind::Ret, false));
            }
            // uftrace sets each list up once per session, and warns each time.
            let sessions = dir.sessions.len().max(1);
            for (list, kind, keep) in passes {
                let mut notes = Vec::new();
                let entries = parse_entries(list, kind, long, ty, &mut notes);
                match kind {
                    _ if !keep => {}
                    Kind::Args => arg_entries = entries,
                    Kind::Ret => ret_entries.extend(entries),
                }
                let n = notes.len() * sessions;
                notices.extend(notes.iter().cycle().take(n).cloned());
            }
        }
        let (mappings, modules) = Self::load_modules(dir);
        let no_auto = builtin.is_empty() && modules.iter().all(|m| m.args.is_empty());
        Specs {
            empty: arg_entries.is_empty() && ret_entries.is_empty() && (!all_auto || no_auto),
            long,
            arg_entries,
            ret_entries,
            builtin,
            builtin_enums: Arc::new(builtin_enums),
            all_auto,
            mappings,
            modules,
            cache: Vec::new(),
            select_args: Vec::new(),
            select_rets: Vec::new(),
            notices,
        }
    }

    /// Takes the replay-time `-A` (`args`) and `-R` (`rets`) options: matching functions show
    /// only the named recorded items, in the formats given. Items that do not parse become
    /// notices. Either option may name arguments and return values alike.
    pub fn select(&mut self, args: &[String], rets: &[String], ty: MatchType) {
        for list in args.iter().chain(rets) {
            let a = parse_entries(list, Kind::Args, self.long, ty, &mut self.notices);
            let r = parse_entries(list, Kind::Ret, self.long, ty, &mut self.notices);
            self.select_args
                .extend(a.into_iter().filter(|e| !e.items.is_empty()));
            self.select_rets
                .extend(r.into_iter().filter(|e| !e.items.is_empty()));
        }
        self.cache.clear();
    }

    /// Whether a replay-time selection was given.
    pub fn has_selection(&self) -> bool {
        !(self.select_args.is_empty() && self.select_rets.is_empty())
    }

    /// One line per selected item that no matching function of `funcs` recorded in a form it
    /// can be shown in, naming the record option that would capture it; and one per
    /// selection that matches no function at all.
    pub fn selection_hints(&self, funcs: &[&FuncInfo]) -> Vec<String> {
        let mut out = Vec::new();
        for (entries, kind) in [
            (&self.select_args, Kind::Args),
            (&self.select_rets, Kind::Ret),
        ] {
            let opt = match kind {
                Kind::Args => "-A",
                Kind::Ret => "-R",
            };
            for e in entries {
                let matched: Vec<&FuncInfo> = funcs
                    .iter()
                    .copied()
                    .filter(|f| e.pattern.matches(f))
                    .collect();
                if matched.is_empty() {
                    out.push(format!(
                        "{opt} {}: no function matches {}",
                        e.text, e.pattern.text
                    ));
                    continue;
                }
                let recorded: Vec<(&FuncInfo, FuncSpec)> =
                    matched.iter().map(|f| (*f, self.recorded(f))).collect();
                for want in &e.items {
                    let mut missing = Vec::new();
                    let mut unfit = Vec::new();
                    for (f, spec) in &recorded {
                        let items: Vec<&ArgItem> = match kind {
                            Kind::Args => spec.args.iter().collect(),
                            Kind::Ret => spec.ret.iter().collect(),
                        };
                        match items.iter().find(|r| r.slot == want.slot) {
                            None => missing.push(f.name.as_str()),
                            Some(r) if shown_item(r, want).is_none() => {
                                unfit.push((f.name.as_str(), r.text.clone()));
                            }
                            Some(_) => {}
                        }
                    }
                    // A pattern matching many functions is satisfied by those that recorded
                    // the item.
                    if missing.len() + unfit.len() < recorded.len() {
                        continue;
                    }
                    let capture = format!("record with {opt} {}@{}", e.pattern.text, want.text);
                    if !missing.is_empty() {
                        out.push(format!(
                            "{} of {} was not recorded: {capture} to see it",
                            slot_name(want),
                            name_list(&missing)
                        ));
                    }
                    if !unfit.is_empty() {
                        let names: Vec<&str> = unfit.iter().map(|(n, _)| *n).collect();
                        out.push(format!(
                            "{} of {} was recorded as {}, which cannot be shown as {}: \
                             {capture} to see it so",
                            slot_name(want),
                            name_list(&names),
                            unfit[0].1,
                            want.text
                        ));
                    }
                }
            }
        }
        out
    }

    /// The built-in `argauto`/`retauto` specs by function name. Symbol names are demangled in
    /// the replay's mode, so each name is keyed raw and demangled both ways.
    fn builtin_specs(
        a: &ArgSpecInfo,
        long: usize,
        notices: &mut Vec<String>,
    ) -> HashMap<String, Builtin> {
        let mut out: HashMap<String, Builtin> = HashMap::new();
        for (list, kind) in [(&a.argauto, Kind::Args), (&a.retauto, Kind::Ret)] {
            for e in parse_entries(list, kind, long, MatchType::Regex, notices) {
                let mut names = vec![e.name.clone()];
                for mode in [Demangle::Simple, Demangle::Full] {
                    names.push(demangle(&e.name, mode));
                }
                names.dedup();
                for n in names {
                    let b = out.entry(n).or_default();
                    let slot = match kind {
                        Kind::Args => &mut b.args,
                        Kind::Ret => &mut b.ret,
                    };
                    if slot.is_empty() {
                        slot.clone_from(&e.items);
                    }
                }
            }
        }
        out
    }

    /// The modules of every session and `dlopen`, with their `.dbg` contents (DEBUG_INFO only).
    fn load_modules(dir: &TraceDir) -> (Vec<Mapping>, Vec<ModuleDebug>) {
        let debug_info = dir.info.has_feature(feat::DEBUG_INFO);
        let mut mappings = Vec::new();
        let mut modules = Vec::new();
        let mut index: HashMap<(String, Option<String>), usize> = HashMap::new();
        let mut add = |start: u64, end: u64, path: &str, build_id: Option<&str>| {
            let key = (path.to_string(), build_id.map(str::to_string));
            let module = *index.entry(key).or_insert_with(|| {
                let dbg = if debug_info {
                    load_dbg(dir, path, build_id)
                } else {
                    DbgFile::default()
                };
                modules.push(ModuleDebug::from_dbg(dbg));
                modules.len() - 1
            });
            mappings.push(Mapping {
                start,
                end,
                name: basename(path).to_string(),
                module,
            });
        };
        for s in &dir.sessions {
            for m in s.maps.iter().filter(|m| !m.is_stack()) {
                add(m.start, m.end, &m.path, m.build_id.as_deref());
            }
        }
        for t in &dir.tasks {
            if let TaskLine::Dlop { base, libname, .. } = t {
                add(*base, u64::MAX, libname, None);
            }
        }
        (mappings, modules)
    }

    /// The module holding `f`, and `f`'s address relative to it.
    fn module_of(&self, f: &FuncInfo) -> Option<(&ModuleDebug, u64)> {
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

    /// The automatic items of `kind` for `f`: its `.dbg` line, else the built-in entry.
    fn auto_items(
        &self,
        f: &FuncInfo,
        module: Option<(&ModuleDebug, u64)>,
        kind: Kind,
    ) -> Vec<ArgItem> {
        if let Some((m, rel)) = module {
            let table = match kind {
                Kind::Args => &m.args,
                Kind::Ret => &m.rets,
            };
            if let Some(Some(text)) = table.get(&rel) {
                // Items before one that does not parse still count, as in uftrace.
                let (Ok((items, _)) | Err((items, _))) = parse_items(text, kind, self.long);
                if !items.is_empty() {
                    return items;
                }
            }
        }
        match (self.builtin.get(&f.name), kind) {
            (Some(b), Kind::Args) => b.args.clone(),
            (Some(b), Kind::Ret) => b.ret.clone(),
            (None, _) => Vec::new(),
        }
    }

    /// The recorded items of `f` with its replay-time selection.
    fn build(&self, f: &FuncInfo) -> FuncSpec {
        let mut spec = self.recorded(f);
        spec.shown_args = view(&self.select_args, f, &spec.args, false);
        spec.shown_ret =
            view(&self.select_rets, f, spec.ret.as_slice(), true).map(|v| v.into_iter().next());
        spec
    }

    /// The items recorded for `f` (what its payloads hold).
    fn recorded(&self, f: &FuncInfo) -> FuncSpec {
        let module = self.module_of(f);
        let mut items = ItemSet::default();
        for (entries, kind) in [
            (&self.arg_entries, Kind::Args),
            (&self.ret_entries, Kind::Ret),
        ] {
            let mut named = false;
            for e in entries.iter().filter(|e| e.pattern.matches(f)) {
                let auto;
                let new = if e.items.is_empty() {
                    auto = self.auto_items(f, module, kind);
                    &auto
                } else {
                    &e.items
                };
                named |= !new.is_empty();
                items.add(new, e.exact);
            }
            if self.all_auto && !named {
                items.add(&self.auto_items(f, module, kind), false);
            }
        }
        let (args, ret) = items.into_parts();
        FuncSpec {
            args,
            ret,
            enums: EnumScope {
                module: module.map(|(m, _)| m.enums.clone()),
                builtin: self.builtin_enums.clone(),
            },
            shown_args: None,
            shown_ret: None,
        }
    }

    /// Whether a recorded spec names any of `funcs` (with auto-args: gives any of them items).
    pub fn binds_any(&self, funcs: &[&FuncInfo]) -> bool {
        let named = self
            .arg_entries
            .iter()
            .chain(&self.ret_entries)
            .any(|e| funcs.iter().any(|f| e.pattern.matches(f)));
        named
            || (self.all_auto
                && funcs.iter().any(|f| {
                    let m = self.module_of(f);
                    !self.auto_items(f, m, Kind::Args).is_empty()
                        || !self.auto_items(f, m, Kind::Ret).is_empty()
                }))
    }

    /// The spec of `id` (computed once).
    pub fn get(&mut self, id: FuncId, f: &FuncInfo) -> &FuncSpec {
        let i = id as usize;
        if self.cache.len() <= i {
            self.cache.resize(i + 1, None);
        }
        if self.cache[i].is_none() {
            self.cache[i] = Some(self.build(f));
        }
        self.cache[i].as_ref().expect("filled above")
    }
}

/// `arg2`, `fparg1` or `the return value` for messages.
fn slot_name(item: &ArgItem) -> String {
    match item.slot {
        ArgSlot::Arg(n) => format!("arg{n}"),
        ArgSlot::FpArg(n) => format!("fparg{n}"),
        ArgSlot::Retval => "the return value".to_string(),
    }
}

/// `a`, `a, b` or `a, b, c and 4 more`.
fn name_list(names: &[&str]) -> String {
    let mut uniq: Vec<&str> = Vec::new();
    for n in names {
        if !uniq.contains(n) {
            uniq.push(n);
        }
    }
    match uniq.len() {
        0..=3 => uniq.join(", "),
        n => format!("{} and {} more", uniq[..3].join(", "), n - 3),
    }
}

/// The items of `entries` that name `f`, each mapped onto the recorded item of its slot;
/// `None` when no entry names `f`. Items `f` did not record, or recorded in a form they
/// cannot be shown in, are left out (see [`Specs::selection_hints`]).
fn view(entries: &[Entry], f: &FuncInfo, recorded: &[ArgItem], ret: bool) -> Option<Vec<Shown>> {
    let mut set = ItemSet::default();
    for e in entries.iter().filter(|e| e.pattern.matches(f)) {
        set.add(&e.items, e.exact);
    }
    if set.is_empty() {
        return None;
    }
    let (args, r) = set.into_parts();
    let wanted: Vec<ArgItem> = if ret { r.into_iter().collect() } else { args };
    Some(
        wanted
            .iter()
            .filter_map(|want| {
                let index = recorded.iter().position(|r| r.slot == want.slot)?;
                let item = shown_item(&recorded[index], want)?;
                Some(Shown { index, item })
            })
            .collect(),
    )
}

/// How a recorded item shows when a replay-time item asks for `want`: `want`'s format when
/// the recorded bytes can be shown that way, at no more than the recorded size; the recorded
/// item when `want` names no format. `None` when they cannot (a string from an integer).
pub fn shown_item(rec: &ArgItem, want: &ArgItem) -> Option<ArgItem> {
    let core = want.text.split('%').next().unwrap_or("");
    let Some((_, fmt)) = core.split_once('/') else {
        return Some(rec.clone());
    };
    #[derive(PartialEq)]
    enum Class {
        Int,
        Float,
        Str,
        Struct,
    }
    let class = |f: &ArgFormat| match f {
        ArgFormat::Float => Class::Float,
        ArgFormat::Str | ArgFormat::StdString => Class::Str,
        ArgFormat::Struct(_) => Class::Struct,
        _ => Class::Int,
    };
    if class(&rec.format) != class(&want.format) {
        return None;
    }
    let size = match want.format {
        ArgFormat::Char => 1,
        // The bits after the format letter (`x32`) ask for a narrower view.
        _ if fmt.len() > 1 && fmt[1..].bytes().all(|b| b.is_ascii_digit()) => {
            want.size.min(rec.size)
        }
        ArgFormat::Float | ArgFormat::Str | ArgFormat::StdString => rec.size,
        _ if rec.format == ArgFormat::Char => 1,
        _ => rec.size,
    };
    Some(ArgItem {
        size,
        ..want.clone()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use record_format::argspec::ArgFormat;
    use record_format::info::{ArgSpecInfo, Info, InfoHeader};
    use record_format::maps::MapEntry;
    use record_format::{RawRecord, RecordKind, TraceWriter};

    const DBG: &str = "# path name: /x/prog\n# build-id: abcd1234\n\
                       E: enum color {RED,GREEN=5,BLUE}\n\
                       F: 100 paint\nL: 5 st.c\nA: @arg1/e:color\nR: @retval\n\
                       F: 200 sum\nA: @arg1,arg2\nR: @retval\n\
                       F: 300 main\nA: @arg1,arg2/p\n\
                       F: 400 ctor\nA: @arg1/p\nF: 400 ctor2\nA: @arg1/p\n";

    /// A data directory of `/x/prog` mapped at 0x10000 with `prog.dbg`.
    fn trace(argspec: &str, retspec: &str, auto_args: bool) -> (tempfile::TempDir, TraceDir) {
        let tmp = tempfile::tempdir().expect("tempdir");
        let path = tmp.path().join("t.data");
        let mut w = TraceWriter::create(&path).expect("create");
        let sess = TaskLine::Sess {
            time: 1,
            pid: 7,
            sid: "s1".into(),
            exename: "/x/prog".into(),
        };
        w.task_line(&sess).expect("sess");
        w.task_line(&TaskLine::Task {
            time: 1,
            tid: 7,
            pid: 7,
        })
        .expect("task");
        let map = MapEntry {
            start: 0x10000,
            end: 0x20000,
            perms: "r-xp".into(),
            path: "/x/prog".into(),
            build_id: Some("abcd1234".into()),
        };
        w.session_map("s1", &[map]).expect("map");
        std::fs::write(path.join("prog.dbg"), DBG).expect("dbg");
        let rec = RawRecord {
            time: 2,
            kind: RecordKind::Entry,
            more: false,
            depth: 0,
            addr: 0x10300,
        };
        w.func_record(7, rec, &[], &[]).expect("record");
        let info = Info {
            header: InfoHeader {
                feat_mask: InfoHeader::default().feat_mask | feat::AUTO_ARGS | feat::DEBUG_INFO,
                ..InfoHeader::default()
            },
            tids: vec![7],
            argspec: Some(ArgSpecInfo {
                argspec: Some(argspec.into()).filter(|s: &String| !s.is_empty()),
                retspec: Some(retspec.into()).filter(|s: &String| !s.is_empty()),
                argauto: "malloc@arg1/u;_Znwm@arg1/u".into(),
                retauto: "malloc@retval/p".into(),
                enumauto: "enum uft_prot {NONE, READ, WRITE, EXEC = 4}".into(),
                auto_args,
            }),
            ..Info::default()
        };
        w.finish(&info).expect("finish");
        let dir = TraceDir::open(&path).expect("open");
        (tmp, dir)
    }

    fn func(name: &str, addr: u64) -> FuncInfo {
        FuncInfo {
            name: name.into(),
            module: "prog".into(),
            addr,
            size: 16,
            is_plt: false,
            in_exe: true,
            known: true,
        }
    }

    fn texts(s: &FuncSpec) -> (Vec<&str>, Option<&str>) {
        (
            s.args.iter().map(|a| a.text.as_str()).collect(),
            s.ret.as_ref().map(|r| r.text.as_str()),
        )
    }

    #[test]
    fn auto_args_take_the_dbg_spec_of_every_function() {
        let (_tmp, dir) = trace("", "", true);
        let mut specs = Specs::new(&dir);
        let paint = specs.get(0, &func("paint", 0x10100)).clone();
        assert_eq!(texts(&paint), (vec!["arg1/e:color"], Some("retval")));
        assert_eq!(paint.args[0].format, ArgFormat::Enum("color".into()));
        assert_eq!(paint.enums.get("color").map(Vec::len), Some(3));
        assert_eq!(paint.enums.get("uft_prot").map(Vec::len), Some(4));
        assert!(paint.enums.has_module());
        // No dbg block at this address: the built-in list by name (demangled too).
        let malloc = specs.get(1, &func("malloc", 0x10050)).clone();
        assert_eq!(texts(&malloc), (vec!["arg1/u"], Some("retval/p")));
        let new = specs.get(2, &func("operator new", 0x10060)).clone();
        assert_eq!(texts(&new), (vec!["arg1/u"], None));
        // Two blocks at one address: no usable spec.
        assert!(specs.get(3, &func("ctor", 0x10400)).args.is_empty());
        // Not in any map: no module.
        let mut lost = func("paint", 0x100);
        lost.module = "[unknown]".into();
        lost.known = false;
        let lost = specs.get(4, &lost);
        assert!(lost.args.is_empty() && !lost.enums.has_module());
        assert!(specs.binds_any(&[&func("paint", 0x10100)]));
    }

    #[test]
    fn explicit_specs_override_auto_ones() {
        let (_tmp, dir) = trace("sum@arg2/x;s.m@arg1/c,arg2/c", "paint@retval/x", true);
        let mut specs = Specs::new(&dir);
        // Explicit arguments replace the automatic ones; the return value stays automatic.
        let sum = specs.get(0, &func("sum", 0x10200)).clone();
        assert_eq!(texts(&sum), (vec!["arg2/x", "arg1/c"], Some("retval")));
        let paint = specs.get(1, &func("paint", 0x10100)).clone();
        assert_eq!(texts(&paint), (vec!["arg1/e:color"], Some("retval/x")));
    }

    #[test]
    fn exact_patterns_win_over_regex_ones() {
        let (_tmp, dir) = trace("sum@arg1/x;s.m@arg1/c,arg2/u;sum@arg2/i32", "", false);
        let mut specs = Specs::new(&dir);
        let sum = specs.get(0, &func("sum", 0x10200)).clone();
        assert_eq!(texts(&sum), (vec!["arg1/x", "arg2/i32"], None));
    }

    #[test]
    fn entries_without_items_ask_for_auto_specs() {
        let (_tmp, dir) = trace("main;paint@arg1/q,arg2", "main;malloc", false);
        let mut specs = Specs::new(&dir);
        assert_eq!(specs.notices, ["unsupported argument type: arg1/q"]);
        let main = specs.get(0, &func("main", 0x10300)).clone();
        assert_eq!(texts(&main), (vec!["arg1", "arg2/p"], None));
        let malloc = specs.get(1, &func("malloc", 0x10050)).clone();
        assert_eq!(texts(&malloc), (vec![], Some("retval/p")));
        // An entry with a bad item is dropped whole; without auto-args nothing else applies.
        assert!(specs.get(2, &func("paint", 0x10100)).args.is_empty());
        assert!(specs.get(3, &func("sum", 0x10200)).args.is_empty());
    }

    #[test]
    fn replay_selection_maps_onto_recorded_items() {
        let (_tmp, dir) = trace("sum@arg1,arg2/i32;paint@arg1/s", "sum@retval", false);
        let mut specs = Specs::new(&dir);
        let sel = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        specs.select(
            &sel(&["sum@arg2/x16,arg1/c,arg3", "paint@arg1/x"]),
            &sel(&["s.m@retval/u"]),
            MatchType::Regex,
        );
        assert!(specs.has_selection());
        let sum = specs.get(0, &func("sum", 0x10200)).clone();
        // Recorded items stay (they lay out the payload); the view picks and reformats.
        assert_eq!(texts(&sum), (vec!["arg1", "arg2/i32"], Some("retval")));
        let shown: Vec<(usize, &str, usize)> = sum
            .shown_args
            .as_ref()
            .unwrap()
            .iter()
            .map(|s| (s.index, s.item.text.as_str(), s.item.size))
            .collect();
        assert_eq!(shown, [(1, "arg2/x16", 2), (0, "arg1/c", 1)]);
        let ret = sum.shown_ret.clone().unwrap().unwrap();
        assert_eq!((ret.index, ret.item.format), (0, ArgFormat::Unsigned));
        // A string cannot show as an integer; unnamed functions show what they recorded.
        let paint = specs.get(1, &func("paint", 0x10100)).clone();
        assert_eq!(paint.shown_args, Some(vec![]));
        assert!(specs.get(2, &func("main", 0x10300)).shown_args.is_none());
        let hints = specs.selection_hints(&[&func("sum", 0x10200), &func("paint", 0x10100)]);
        assert_eq!(
            hints,
            [
                "arg3 of sum was not recorded: record with -A sum@arg3 to see it",
                "arg1 of paint was recorded as arg1/s, which cannot be shown as arg1/x: \
                 record with -A paint@arg1/x to see it so",
                // `s.m@retval` is satisfied by sum, which recorded its return value.
            ]
        );
    }
}
