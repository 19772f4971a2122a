//! Function patterns, filters (`-F -N -H -C`), and triggers (`-T FUNC@ACTION,...`), compiled
//! once and then decided per [`FuncId`](crate::symbols::FuncId).

use crate::config::{Config, MatchType};
use crate::symbols::FuncInfo;
use record_format::location::LocFilter;
use record_format::pattern::{split_module, NameMatcher};
use record_format::trigger;
pub use record_format::trigger::{color_code, Actions};

/// A function pattern with an optional `@MODULE` restriction.
#[derive(Debug, Clone)]
pub struct Pattern {
    matcher: NameMatcher,
    module: Option<String>,
    /// The pattern as the user wrote it.
    pub text: String,
}

impl Pattern {
    /// Compiles `name` (no `@`) with an optional module.
    pub fn new(name: &str, module: Option<&str>, ty: MatchType) -> Pattern {
        Pattern {
            matcher: NameMatcher::new(name, ty),
            module: module.map(str::to_string),
            text: match module {
                Some(m) => format!("{name}@{m}"),
                None => name.to_string(),
            },
        }
    }

    /// Parses `NAME[@MODULE]`.
    pub fn parse(spec: &str, ty: MatchType) -> Pattern {
        let (name, module) = split_module(spec);
        Pattern::new(name, module, ty)
    }

    pub fn matches_name(&self, name: &str) -> bool {
        self.matcher.matches(name)
    }

    pub fn matches(&self, f: &FuncInfo) -> bool {
        if let Some(m) = &self.module {
            let ok = match m.as_str() {
                m if record_format::pattern::is_plt_module(m) => f.is_plt && f.in_exe,
                "kernel" => f.module == "[kernel]",
                m => f.module.starts_with(m),
            };
            if !ok {
                return false;
            }
        }
        self.matches_name(&f.name)
    }
}

/// Parses one `-T` value (see [`record_format::trigger`]). Unknown words become the module
/// name; `notices` collects `Usage:` complaints.
pub fn parse_trigger(spec: &str, ty: MatchType, notices: &mut Vec<String>) -> (Pattern, Actions) {
    let t = trigger::parse_trigger(spec, notices);
    (Pattern::new(t.name, t.module, ty), t.actions)
}

/// Whether a `-F` value gives a depth as an action (`FUNC@depth=N`, among a module name or
/// other words).
fn has_depth(spec: &str) -> bool {
    spec.split_once('@').is_some_and(|(_, rest)| {
        rest.split(',')
            .any(|w| w.get(..6).is_some_and(|p| p.eq_ignore_ascii_case("depth=")))
    })
}

/// Everything the filters decide about one function.
#[derive(Debug, Clone, Copy)]
pub struct FuncFilter {
    pub filter: bool,
    pub notrace: bool,
    pub hide: bool,
    /// Hidden by `-L` where uftrace 0.13 hides when printing, not when reading: the
    /// function still keeps its caller from being a leaf (`f() {` and `}`). So are those a
    /// `LOC@hide` pattern hides, and, with `-F`, those no shown pattern matches.
    pub loc_hidden: bool,
    pub caller: bool,
    pub actions: Actions,
    /// The function's size in bytes, for `-Z` and `size=` (`u32::MAX` when unknown: never
    /// smaller than a limit).
    pub size: u32,
}

impl Default for FuncFilter {
    fn default() -> Self {
        FuncFilter {
            filter: false,
            notrace: false,
            hide: false,
            loc_hidden: false,
            caller: false,
            actions: Actions::default(),
            size: u32::MAX,
        }
    }
}

/// The compiled filters of a command.
#[derive(Debug, Default)]
pub struct Filters {
    filter: Vec<Pattern>,
    notrace: Vec<Pattern>,
    /// `-F` and `-N` in command-line order (is `-F`, index in its list).
    order: Vec<(bool, usize)>,
    hide: Vec<Pattern>,
    caller: Vec<Pattern>,
    triggers: Vec<(Pattern, Actions, String)>,
    pub no_libcall: bool,
    /// `-L`: functions hidden by their source file (decided by the caller, which has the
    /// locations).
    pub loc: LocFilter,
    /// The `-L` patterns as the `failed to set filter` notice names them, and whether none
    /// matched ([`Filters::check_locations`]).
    loc_text: String,
    loc_fail: bool,
    /// `-F` (or a `filter` trigger) is in use: only filtered regions are shown.
    pub has_filter: bool,
    /// `-C` (or a `caller` trigger) is in use.
    pub has_caller: bool,
    /// Some trigger turns tracing on: tracing starts off only with `--disable`, never here.
    pub notices: Vec<String>,
}

impl Filters {
    pub fn new(cfg: &Config) -> Filters {
        let ty = cfg.match_type;
        let pats = |v: &[String]| -> Vec<Pattern> {
            v.iter()
                .flat_map(|s| s.split(';'))
                .filter(|s| !s.is_empty())
                .map(|s| Pattern::parse(s, ty))
                .collect()
        };
        let mut notices = Vec::new();
        let triggers: Vec<(Pattern, Actions, String)> = cfg
            .triggers
            .iter()
            .flat_map(|s| s.split(';'))
            .filter(|s| !s.is_empty())
            .map(|s| {
                let (p, a) = parse_trigger(s, ty, &mut notices);
                (p, a, s.to_string())
            })
            .collect();
        // `-F FUNC@depth=N`: a filter with a depth, as the trigger `FUNC@filter,depth=N`.
        let (with_depth, plain): (Vec<&str>, Vec<&str>) = cfg
            .filters
            .iter()
            .flat_map(|s| s.split(';'))
            .filter(|s| !s.is_empty())
            .partition(|s| has_depth(s));
        let mut triggers = triggers;
        for s in with_depth {
            let (p, mut a) = parse_trigger(s, ty, &mut notices);
            a.filter = true;
            triggers.push((p, a, s.to_string()));
        }
        let filter: Vec<Pattern> = plain.iter().map(|s| Pattern::parse(s, ty)).collect();
        let caller = pats(&cfg.caller);
        Filters {
            has_filter: !filter.is_empty() || triggers.iter().any(|(_, a, _)| a.filter),
            has_caller: !caller.is_empty() || triggers.iter().any(|(_, a, _)| a.caller),
            filter,
            notrace: pats(&cfg.notrace),
            order: cfg.filter_order.clone(),
            hide: pats(&cfg.hide),
            caller,
            triggers,
            no_libcall: cfg.no_libcall,
            loc: LocFilter::new(&cfg.loc_filters, ty),
            loc_text: String::new(),
            loc_fail: false,
            notices,
        }
    }

    /// Some trigger sets a `time=` filter.
    pub fn has_time_trigger(&self) -> bool {
        self.triggers.iter().any(|(_, a, _)| a.time.is_some())
    }

    pub fn is_empty(&self) -> bool {
        self.filter.is_empty()
            && self.notrace.is_empty()
            && self.hide.is_empty()
            && self.caller.is_empty()
            && self.triggers.is_empty()
            && self.loc.is_empty()
    }

    /// Checks the `-L` patterns against the source files of every function of the trace
    /// (before [`Filters::check`], which reports them): those that match none are dropped.
    pub fn check_locations<'a>(&mut self, files: impl IntoIterator<Item = &'a str>) {
        self.loc_text = self.loc.text();
        self.loc_fail = !self.loc.retain_matching(files);
    }

    /// Decides everything for one function.
    pub fn decide(&self, f: &FuncInfo) -> FuncFilter {
        let any = |v: &[Pattern]| v.iter().any(|p| p.matches(f));
        let mut out = FuncFilter {
            filter: any(&self.filter),
            notrace: any(&self.notrace),
            hide: any(&self.hide) || (self.no_libcall && f.is_plt),
            loc_hidden: false,
            caller: any(&self.caller),
            actions: Actions::default(),
            size: if f.known {
                u32::try_from(f.size).unwrap_or(u32::MAX)
            } else {
                u32::MAX
            },
        };
        if out.filter && out.notrace {
            // Named by both: the later option decides.
            let last = self.order.iter().rev().find(|&&(is_filter, i)| {
                let list = if is_filter {
                    &self.filter
                } else {
                    &self.notrace
                };
                list.get(i).is_some_and(|p| p.matches(f))
            });
            if let Some(&(is_filter, _)) = last {
                out.filter = is_filter;
                out.notrace = !is_filter;
            }
        }
        for (p, a, _) in &self.triggers {
            if p.matches(f) {
                out.actions.merge(a);
            }
        }
        out.filter |= out.actions.filter;
        out.notrace |= out.actions.notrace;
        out.hide |= out.actions.hide;
        out.caller |= out.actions.caller;
        out
    }

    /// Checks the patterns against every function of the trace. Like uftrace, `-F` and `-C`
    /// patterns that match nothing are dropped (so they do not hide everything). The
    /// `failed to set filter or trigger: ...` notice is returned when the filter options
    /// together bound nothing (recorded argument specs count as bound, as in uftrace) or the
    /// triggers together bound nothing.
    pub fn check(&mut self, funcs: &[&FuncInfo], args_bound: bool) -> Option<String> {
        let hit = |p: &Pattern| funcs.iter().any(|f| p.matches(f));
        let filter_pats: Vec<(&Pattern, String)> = self
            .filter
            .iter()
            .map(|p| (p, p.text.clone()))
            .chain(self.notrace.iter().map(|p| (p, format!("!{}", p.text))))
            .chain(
                self.caller
                    .iter()
                    .chain(&self.hide)
                    .map(|p| (p, p.text.clone())),
            )
            .collect();
        let filter_text: Vec<String> = filter_pats.iter().map(|(_, t)| t.clone()).collect();
        let trigger_text: Vec<String> = self.triggers.iter().map(|(_, _, t)| t.clone()).collect();
        let filter_fail =
            !filter_pats.is_empty() && !args_bound && !filter_pats.iter().any(|(p, _)| hit(p));
        let trigger_fail =
            !self.triggers.is_empty() && !self.triggers.iter().any(|(p, _, _)| hit(p));
        self.filter.retain(|p| hit(p));
        self.caller.retain(|p| hit(p));
        self.triggers.retain(|(p, _, _)| hit(p));
        self.has_filter = !self.filter.is_empty() || self.triggers.iter().any(|(_, a, _)| a.filter);
        self.has_caller = !self.caller.is_empty() || self.triggers.iter().any(|(_, a, _)| a.caller);
        if !(filter_fail || trigger_fail || self.loc_fail) {
            return None;
        }
        let parts: Vec<String> = [filter_text.join(";"), trigger_text.join(";")]
            .into_iter()
            .chain([self.loc_text.clone()])
            .filter(|p| !p.is_empty())
            .collect();
        Some(format!(
            "failed to set filter or trigger: {}",
            parts.join(" or ")
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(name: &str) -> FuncInfo {
        FuncInfo {
            name: name.into(),
            module: "abc".into(),
            addr: 0,
            size: 1,
            is_plt: false,
            in_exe: true,
            known: true,
        }
    }

    #[test]
    fn exact_unless_meta() {
        let p = Pattern::parse("b", MatchType::Regex);
        assert!(p.matches(&f("b")));
        assert!(!p.matches(&f("abc")));
        let p = Pattern::parse("a|b", MatchType::Regex);
        assert!(p.matches(&f("__monstartup")));
        let p = Pattern::parse("_*", MatchType::Glob);
        assert!(p.matches(&f("__x")));
        assert!(!p.matches(&f("x_")));
        let p = Pattern::parse("b@abc", MatchType::Regex);
        assert!(p.matches(&f("b")));
        let p = Pattern::parse("b@libc", MatchType::Regex);
        assert!(!p.matches(&f("b")));
    }

    #[test]
    fn triggers() {
        let mut n = Vec::new();
        let (p, a) = parse_trigger(
            "b@filter,backtrace,depth=2,Trace_On,color=pink,mod",
            MatchType::Regex,
            &mut n,
        );
        assert!(a.filter && a.backtrace && a.trace_on);
        assert_eq!(a.depth, Some(2));
        assert_eq!(n, ["ignoring invalid color: pink"]);
        assert!(!p.matches(&f("b"))); // module "mod" does not match "abc"
    }
}
