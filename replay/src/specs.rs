//! Argument specs bound to functions: which items an ENTRY or EXIT payload holds, and the enum
//! definitions its values are shown with.
//!
//! The items are bound by `record_format::argbind`, the binder libmcount uses when it writes
//! the payloads; this module keeps the storage: the recorded `-A`/`-R` lists
//! (`argspec`/`retspec`) with their compiled patterns, and the automatic specs (with
//! `auto-args:1`): the `A:`/`R:` line of the function's block in its module's `.dbg` file,
//! found by module-relative address (feature DEBUG_INFO), else the built-in
//! `argauto`/`retauto` entry of the same name (feature AUTO_ARGS).

use crate::config::{Demangle, MatchType};
use crate::filter::Pattern;
use crate::modules::{basename, ModuleTable};
use crate::symbols::demangle::demangle;
use crate::symbols::{FuncId, FuncInfo};
use record_format::argbind::{self, SpecEntry};
use record_format::argspec::{ArgFormat, ArgItem, ArgSlot, ItemKind as Kind, ItemSet};
use record_format::dbg::{parse_dbg, parse_enums, DbgFile, EnumDefs, EnumValues};
use record_format::info::{feat, ArgSpecInfo};
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

/// One `PATTERN@items` entry of a recorded list, read for one kind, with its compiled pattern.
#[derive(Debug)]
struct Entry {
    spec: SpecEntry,
    pattern: Pattern,
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
    for parsed in argbind::parse_list(list, kind, long) {
        match parsed {
            Ok(spec) => out.push(Entry {
                pattern: Pattern::new(&spec.name, spec.module.as_deref(), ty),
                spec,
            }),
            Err(e) => notices.push(e.to_string()),
        }
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

/// Reads the `.dbg` file of a module: `<name>.dbg` if its header names this module, else the
/// suffixed name used for colliding basenames (`<name>-<build-id:4>.dbg`, or a checksum of the
/// path without build id).
pub(crate) fn load_dbg(dir: &TraceDir, path: &str, build_id: Option<&str>) -> DbgFile {
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
    modules: ModuleTable<ModuleDebug>,
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
        let debug_info = dir.info.has_feature(feat::DEBUG_INFO);
        // The modules' `.dbg` contents (DEBUG_INFO only).
        let modules = ModuleTable::load(dir, |path, build_id| {
            ModuleDebug::from_dbg(if debug_info {
                load_dbg(dir, path, build_id)
            } else {
                DbgFile::default()
            })
        });
        let no_auto = builtin.is_empty() && modules.modules().iter().all(|m| m.args.is_empty());
        Specs {
            empty: arg_entries.is_empty() && ret_entries.is_empty() && (!all_auto || no_auto),
            long,
            arg_entries,
            ret_entries,
            builtin,
            builtin_enums: Arc::new(builtin_enums),
            all_auto,
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
                .extend(a.into_iter().filter(|e| !e.spec.items.is_empty()));
            self.select_rets
                .extend(r.into_iter().filter(|e| !e.spec.items.is_empty()));
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
                        e.spec.text, e.pattern.text
                    ));
                    continue;
                }
                let recorded: Vec<(&FuncInfo, FuncSpec)> =
                    matched.iter().map(|f| (*f, self.recorded(f))).collect();
                for want in &e.spec.items {
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
                let mut names = vec![e.spec.name.clone()];
                for mode in [Demangle::Simple, Demangle::Full] {
                    names.push(demangle(&e.spec.name, mode));
                }
                names.dedup();
                for n in names {
                    let b = out.entry(n).or_default();
                    let slot = match kind {
                        Kind::Args => &mut b.args,
                        Kind::Ret => &mut b.ret,
                    };
                    if slot.is_empty() {
                        slot.clone_from(&e.spec.items);
                    }
                }
            }
        }
        out
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
                let items = argbind::auto_items(text, kind, self.long);
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
        let module = self.modules.of(f);
        let (args, ret) = argbind::bind(
            self.arg_entries
                .iter()
                .filter(|e| e.pattern.matches(f))
                .map(|e| &e.spec),
            self.ret_entries
                .iter()
                .filter(|e| e.pattern.matches(f))
                .map(|e| &e.spec),
            self.all_auto,
            |kind| self.auto_items(f, module, kind),
        );
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
                    let m = self.modules.of(f);
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
        set.add(&e.spec.items, e.spec.exact);
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
mod tests;
