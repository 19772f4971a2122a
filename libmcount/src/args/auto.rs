//! Automatic specs for the binder (`-a`, and `-A`/`-R` entries without items): the `A:`/`R:`
//! lines of the executable's `.dbg` file by address, else the built-in prototype of the
//! function's name, found as the readers find it.

use record_format::argbind;
use record_format::argspec::{ArgItem, ItemKind};
use record_format::dbg::DbgFile;
use record_format::demangle::{demangle, Demangle};

/// Automatic specs: `.dbg` lines of the executable by address, built-in ones by name.
pub(super) struct Auto {
    /// The executable's load bias and its `.dbg` contents.
    pub exe: Option<(u64, DbgFile)>,
    pub builtin_args: Vec<Builtin>,
    pub builtin_rets: Vec<Builtin>,
}

/// One built-in prototype: the names it goes by and its items.
pub(super) struct Builtin {
    /// As written (`_Znwm`) and demangled as the readers demangle it (`operator new`): like
    /// the readers, a function takes the first prototype one of whose names is its own, raw
    /// or demangled.
    names: [String; 2],
    items: Vec<ArgItem>,
}

pub(super) fn builtins(list: &str, kind: ItemKind) -> Vec<Builtin> {
    argbind::parse_list(list, kind, 8)
        .into_iter()
        .flatten()
        .map(|spec| Builtin {
            names: [demangle(&spec.name, Demangle::Simple), spec.name],
            items: spec.items,
        })
        .collect()
}

impl Auto {
    pub fn items(&self, sym: &Sym, kind: ItemKind) -> Vec<ArgItem> {
        if let Some((bias, dbg)) = &self.exe {
            let rel = sym.addr.wrapping_sub(*bias);
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
            .find(|b| b.names.iter().any(|n| n == sym.name || n == sym.raw))
            .map(|b| b.items.clone())
            .unwrap_or_default()
    }
}

/// A function to bind: its address, raw and demangled names, and module (`PLT` for PLT
/// entries, `plt`).
pub(super) struct Sym<'s> {
    pub addr: u64,
    pub raw: &'s str,
    pub name: &'s str,
    pub module: &'s str,
    pub plt: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtins_by_exact_raw_or_demangled_name() {
        let auto = Auto {
            exe: None,
            builtin_args: builtins("_Znwm@arg1/u;strlen@arg1/s;strlen@arg1/x", ItemKind::Args),
            builtin_rets: Vec::new(),
        };
        let sym = |raw, name| Sym {
            addr: 0,
            raw,
            name,
            module: "PLT",
            plt: true,
        };
        let text = |s: &Sym| -> Vec<String> {
            let items = auto.items(s, ItemKind::Args);
            items.into_iter().map(|i| i.text).collect()
        };
        assert_eq!(text(&sym("_Znwm", "operator new")), ["arg1/u"]);
        // The first prototype of a name; no pattern matching.
        assert_eq!(text(&sym("strlen", "strlen")), ["arg1/s"]);
        assert!(text(&sym("strlen2", "strlen2")).is_empty());
        assert!(text(&sym("new", "new")).is_empty());
    }
}
