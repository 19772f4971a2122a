//! Automatic specs for the binder (`-a`, and `-A`/`-R` entries without items): the `A:`/`R:`
//! lines of the executable's `.dbg` file by address, else the built-in prototype of the
//! function's name, found as the readers find it.

use record_format::argbind;
use record_format::argspec::{ArgItem, ItemKind};
use record_format::dbg::DbgFile;
use record_format::demangle::{demangle, Demangle};
use std::collections::HashMap;

/// Automatic specs: `.dbg` lines of the executable by address, built-in ones by name.
#[derive(Default)]
pub(crate) struct Auto {
    /// The executable's load bias and its `.dbg` specs.
    pub exe: Option<(u64, ExeSpecs)>,
    pub builtin_args: Vec<Builtin>,
    pub builtin_rets: Vec<Builtin>,
}

/// The `A:` and `R:` texts of a `.dbg` file by module-relative address; an address described
/// twice has none, as for the readers ([`DbgFile::specs_by_addr`]).
pub(crate) struct ExeSpecs {
    args: HashMap<u64, Option<String>>,
    rets: HashMap<u64, Option<String>>,
}

impl ExeSpecs {
    pub fn new(dbg: &DbgFile) -> ExeSpecs {
        let owned = |m: HashMap<u64, Option<&str>>| {
            m.into_iter()
                .map(|(a, s)| (a, s.map(str::to_string)))
                .collect()
        };
        ExeSpecs {
            args: owned(dbg.specs_by_addr(false)),
            rets: owned(dbg.specs_by_addr(true)),
        }
    }
}

/// One built-in prototype: the names it goes by and its items.
pub(crate) struct Builtin {
    /// As written (`_Znwm`) and demangled as the readers demangle it (`operator new`): like
    /// the readers, a function takes the first prototype one of whose names is its own, raw
    /// or demangled.
    names: [String; 2],
    items: Vec<ArgItem>,
}

pub(crate) fn builtins(list: &str, kind: ItemKind) -> Vec<Builtin> {
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
        if let Some((bias, specs)) = &self.exe {
            let table = match kind {
                ItemKind::Args => &specs.args,
                ItemKind::Ret => &specs.rets,
            };
            if let Some(Some(text)) = table.get(&sym.addr.wrapping_sub(*bias)) {
                let items = argbind::auto_items(text, kind, 8);
                if !items.is_empty() {
                    return items;
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
pub(crate) struct Sym<'s> {
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

    #[test]
    fn dbg_specs_by_address() {
        let dbg = record_format::dbg::parse_dbg(
            "F: 10 f\nA: @arg1/t8:Point%RDI\nR: @retval/f80\nF: 20 g\nA: @arg1\nF: 20 g2\nA: @arg2\n",
        );
        let auto = Auto {
            exe: Some((0x1000, ExeSpecs::new(&dbg))),
            builtin_args: builtins("g@arg1/s", ItemKind::Args),
            builtin_rets: Vec::new(),
        };
        let at = |addr| Sym {
            addr,
            raw: "g",
            name: "g",
            module: "exe",
            plt: false,
        };
        let args = auto.items(&at(0x1010), ItemKind::Args);
        assert_eq!(args[0].text, "arg1/t8:Point%RDI");
        assert_eq!(auto.items(&at(0x1010), ItemKind::Ret)[0].text, "retval/f80");
        // Described twice: no spec from the file, the built-in one of the name.
        assert_eq!(auto.items(&at(0x1020), ItemKind::Args)[0].text, "arg1/s");
    }
}
