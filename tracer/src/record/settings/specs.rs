//! The record options that name functions, as the contract's lists: `-F -N -H -C -T` as one
//! trigger list, and the argument and return-value specs of `-A`, `-R`, `-a` and of the
//! triggers' actions (the ARG_SPEC section of `info` and the runtime's variables).

use crate::notice::Notices;
use record_format::argspec::{items_of_kind, ItemKind};
use record_format::env;
use record_format::info::ArgSpecInfo;

/// The `-A` or `-R` entries (`;`-separated lists split), without those whose items of `kind`
/// do not parse: they get uftrace's `Usage:` line and are left out, as readers leave them out.
/// So are those with an item whose location the runtime cannot read.
fn spec_entries(lists: &[String], kind: ItemKind, notices: &mut Notices) -> Vec<String> {
    let mut out = Vec::new();
    for entry in lists.iter().flat_map(|s| s.split(';')) {
        if entry.trim().is_empty() {
            continue;
        }
        let items = entry.split_once('@').map_or("", |(_, i)| i);
        // A location the runtime cannot read (`%stack0`, a long double in a register) is
        // refused here rather than recorded as zeros.
        match items_of_kind(items, kind, 8) {
            Ok((items, _)) => match items.iter().find_map(|i| i.location_error()) {
                None => out.push(entry.to_string()),
                Some(e) => notices.usage(e.to_string()),
            },
            Err((_, e)) => notices.usage(e.to_string()),
        }
    }
    out
}

/// The argument and return-value specs that `-T` values carry among their actions, as uftrace
/// records them (`-T main@filter,arg1/x,retval` adds `main@arg1/x` to the `-A` list and
/// `main@retval` to the `-R` list; `auto-args` adds `main` to both: the function's automatic
/// specs).
pub(super) fn trigger_specs(triggers: &[String]) -> (Vec<String>, Vec<String>) {
    let (mut args, mut rets) = (Vec::new(), Vec::new());
    for t in triggers.iter().flat_map(|s| s.split(';')) {
        let Some((name, words)) = t.split_once('@') else {
            continue;
        };
        let words: Vec<&str> = words.split(',').map(str::trim).collect();
        let lower = |w: &str| w.to_ascii_lowercase();
        let arg_items: Vec<&str> = words
            .iter()
            .copied()
            .filter(|w| lower(w).starts_with("arg") || lower(w).starts_with("fparg"))
            .collect();
        let ret_items: Vec<&str> = words
            .iter()
            .copied()
            .filter(|w| lower(w).starts_with("retval"))
            .collect();
        if !arg_items.is_empty() {
            args.push(format!("{name}@{}", arg_items.join(",")));
        }
        if !ret_items.is_empty() {
            rets.push(format!("{name}@{}", ret_items.join(",")));
        }
        if words.iter().any(|w| lower(w) == "auto-args") {
            args.push(name.to_string());
            rets.push(name.to_string());
        }
    }
    (args, rets)
}

/// The ARG_SPEC section and the runtime's variables for `-A`, `-R` and `-a`.
pub(super) fn arg_settings(
    f: &crate::cli::FilterArgs,
    set: &mut impl FnMut(&str, String),
    notices: &mut Notices,
) -> Option<ArgSpecInfo> {
    let (trigger_args, trigger_rets) = trigger_specs(&f.trigger);
    // The triggers' entries come first: a later `-A`/`-R` item for the same argument wins.
    let mut args = spec_entries(&trigger_args, ItemKind::Args, notices);
    args.extend(spec_entries(&f.argument, ItemKind::Args, notices));
    let mut rets = spec_entries(&trigger_rets, ItemKind::Ret, notices);
    rets.extend(spec_entries(&f.retval, ItemKind::Ret, notices));
    if args.is_empty() && rets.is_empty() && !f.auto_args {
        return None;
    }
    let argspec = (!args.is_empty()).then(|| args.join(";"));
    let retspec = (!rets.is_empty()).then(|| rets.join(";"));
    if let Some(a) = &argspec {
        set(env::ARGSPEC, a.clone());
    }
    if let Some(r) = &retspec {
        set(env::RETSPEC, r.clone());
    }
    if f.auto_args {
        set(env::AUTO_ARGS, "1".to_string());
    }
    Some(ArgSpecInfo {
        argspec,
        retspec,
        argauto: record_format::autoargs::ARGAUTO.to_string(),
        retauto: record_format::autoargs::RETAUTO.to_string(),
        enumauto: record_format::autoargs::ENUMAUTO.to_string(),
        auto_args: f.auto_args,
    })
}

/// `-F`, `-N`, `-H`, `-C` and `-T` as one `PATTERN@ACTIONS` list ([`env::TRIGGER`] items),
/// in command-line order of kinds: `-F x` is `x@filter`, `-N x@clear` is `x@clear,notrace`.
pub(in crate::record) fn trigger_items(f: &crate::cli::FilterArgs) -> Vec<String> {
    let as_trigger = |list: &[String], action: &'static str| -> Vec<String> {
        list.iter()
            .flat_map(|s| s.split(';'))
            .filter(|s| !s.is_empty())
            .map(move |s| match s.contains('@') {
                true => format!("{s},{action}"),
                false => format!("{s}@{action}"),
            })
            .collect()
    };
    let mut triggers = as_trigger(&f.filter, "filter");
    triggers.extend(as_trigger(&f.notrace, "notrace"));
    triggers.extend(as_trigger(&f.hide, "hide"));
    triggers.extend(as_trigger(&f.caller, "caller"));
    for t in f.trigger.iter().flat_map(|s| s.split(';')) {
        if !t.is_empty() {
            triggers.push(t.to_string());
        }
    }
    triggers
}
