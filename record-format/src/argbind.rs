//! The one binder of argument specs to functions: which items of the `-A`/`-R` lists (and of
//! the automatic specs, with `-a`) an ENTRY or EXIT payload of a function holds.
//!
//! libmcount binds them when it writes the payloads and the analysis side when it reads them
//! back; both call [`bind`] here, each with its own storage of the entries (compiled
//! matchers, symbol tables, `.dbg` contents), so that payload and spec agree item for item.
//!
//! A function's items are gathered the way uftrace's reader does:
//! 1. every entry of the `-A` list, then of the `-R` list, whose pattern names the function
//!    adds its items ([`ItemSet`]: a later item for the same argument replaces the format,
//!    except that a regex match never overrides an exact one); an entry without items asks
//!    for the function's automatic spec;
//! 2. with auto-args, a kind that step 1 gave no items takes the automatic spec of that kind.
//!
//! An automatic spec is the `A:`/`R:` line of the function in its module's `.dbg` file
//! ([`auto_items`]), else the built-in `argauto`/`retauto` entry of its name: where each
//! comes from is the caller's to find.

use crate::argspec::{items_of_kind, ArgItem, ItemError, ItemKind, ItemSet};
use crate::pattern::is_literal;

/// One `PATTERN@items` entry of a spec list, read for one kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpecEntry {
    /// The entry as written (`fib@arg1/x`).
    pub text: String,
    /// The function pattern as written.
    pub name: String,
    /// The module it is restricted to (`fib@arg1,libfoo`; `PLT` for library calls).
    pub module: Option<String>,
    /// A plain name: its items win over those of regex matches.
    pub exact: bool,
    /// The items of the entry's kind; none: the function's automatic spec.
    pub items: Vec<ArgItem>,
}

/// The entries of a `;`-separated list (`PATTERN@items;...`) for one kind, in order. An entry
/// with an item that does not parse comes back as that item's error: uftrace drops it whole.
pub fn parse_list(
    list: &str,
    kind: ItemKind,
    long_size: usize,
) -> Vec<Result<SpecEntry, ItemError>> {
    list.split(';')
        .filter(|e| !e.trim().is_empty())
        .map(|entry| {
            let (name, items) = entry.split_once('@').unwrap_or((entry, ""));
            let (items, module) = items_of_kind(items, kind, long_size).map_err(|(_, e)| e)?;
            Ok(SpecEntry {
                text: entry.to_string(),
                name: name.to_string(),
                module: module.map(str::to_string),
                exact: is_literal(name),
                items,
            })
        })
        .collect()
}

/// The items of an automatic spec line (`.dbg` `A:`/`R:` text). Items before one that does
/// not parse still count, as in uftrace.
pub fn auto_items(text: &str, kind: ItemKind, long_size: usize) -> Vec<ArgItem> {
    let (Ok((items, _)) | Err((items, _))) = items_of_kind(text, kind, long_size);
    items
}

/// The items of one function: `args` and `rets` are the entries of the `-A` and `-R` lists
/// whose patterns name it, in list order; `auto` gives its automatic spec of a kind (called
/// only when needed); `all_auto` is `-a`. Returns the arguments in payload order and the
/// return value.
pub fn bind<'e>(
    args: impl IntoIterator<Item = &'e SpecEntry>,
    rets: impl IntoIterator<Item = &'e SpecEntry>,
    all_auto: bool,
    mut auto: impl FnMut(ItemKind) -> Vec<ArgItem>,
) -> (Vec<ArgItem>, Option<ArgItem>) {
    let mut set = ItemSet::default();
    gather(&mut set, args, ItemKind::Args, all_auto, &mut auto);
    gather(&mut set, rets, ItemKind::Ret, all_auto, &mut auto);
    set.into_parts()
}

/// Step 1 and 2 of the module docs for one kind.
fn gather<'e>(
    set: &mut ItemSet,
    entries: impl IntoIterator<Item = &'e SpecEntry>,
    kind: ItemKind,
    all_auto: bool,
    auto: &mut impl FnMut(ItemKind) -> Vec<ArgItem>,
) {
    let mut named = false;
    for e in entries {
        let auto_items;
        let new = if e.items.is_empty() {
            auto_items = auto(kind);
            &auto_items
        } else {
            &e.items
        };
        named |= !new.is_empty();
        set.add(new, e.exact);
    }
    if all_auto && !named {
        set.add(&auto(kind), false);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(items: &[ArgItem]) -> Vec<&str> {
        items.iter().map(|i| i.text.as_str()).collect()
    }

    fn ok(list: &str, kind: ItemKind) -> Vec<SpecEntry> {
        parse_list(list, kind, 8)
            .into_iter()
            .map(Result::unwrap)
            .collect()
    }

    #[test]
    fn lists_parse_per_kind_with_modules_and_errors() {
        let a = ok("fib@arg1/x,retval;main@arg2,libfoo;^f.*@", ItemKind::Args);
        assert_eq!(a.len(), 3);
        assert_eq!((a[0].name.as_str(), a[0].exact), ("fib", true));
        assert_eq!(texts(&a[0].items), ["arg1/x"]);
        assert_eq!(a[1].module.as_deref(), Some("libfoo"));
        assert!(!a[2].exact && a[2].items.is_empty());
        let r = ok("fib@arg1/x,retval", ItemKind::Ret);
        assert_eq!(texts(&r[0].items), ["retval"]);
        let bad = parse_list("f@arg1/q;g@arg1", ItemKind::Args, 8);
        assert!(bad[0].is_err() && bad[1].is_ok());
    }

    #[test]
    fn exact_entries_win_and_auto_fills_what_is_missing() {
        let args = ok("fib@arg1/x;f.*@arg1/d,arg2", ItemKind::Args);
        let (got, ret) = bind(&args, &[], false, |_| Vec::new());
        assert_eq!(texts(&got), ["arg1/x", "arg2"]);
        assert!(ret.is_none());
        let auto = |k| match k {
            ItemKind::Args => auto_items("arg1/s", k, 8),
            ItemKind::Ret => auto_items("retval", k, 8),
        };
        // An entry without items asks for the automatic spec; -a fills the other kind.
        let empty = ok("fib", ItemKind::Args);
        let (got, ret) = bind(&empty, &[], true, auto);
        assert_eq!(texts(&got), ["arg1/s"]);
        assert_eq!(ret.map(|r| r.text), Some("retval".to_string()));
    }
}
