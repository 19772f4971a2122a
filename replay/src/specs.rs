//! Argument specs bound to functions: which items an ENTRY or EXIT payload holds.

use crate::config::MatchType;
use crate::filter::Pattern;
use crate::symbols::{FuncId, FuncInfo};
use record_format::argspec::{parse_spec_list, ArgItem, ArgSlot, ArgSpec};
use record_format::info::feat;
use record_format::TraceDir;

/// The items recorded for one function.
#[derive(Debug, Clone, Default)]
pub struct FuncSpec {
    pub args: Vec<ArgItem>,
    pub ret: Option<ArgItem>,
}

/// Recorded argument specs of a data directory, resolved per function on demand.
#[derive(Debug)]
pub struct Specs {
    explicit: Vec<(Pattern, ArgSpec)>,
    auto: Vec<(Pattern, ArgSpec)>,
    all_auto: bool,
    cache: Vec<Option<FuncSpec>>,
    pub empty: bool,
}

fn compile(list: &[ArgSpec], ty: MatchType) -> Vec<(Pattern, ArgSpec)> {
    list.iter()
        .map(|s| (Pattern::new(&s.pattern, s.module.as_deref(), ty), s.clone()))
        .collect()
}

impl Specs {
    pub fn new(dir: &TraceDir) -> Specs {
        let long = dir.long_size();
        let ty = match dir.info.pattern_type.as_deref() {
            Some("glob") => MatchType::Glob,
            _ => MatchType::Regex,
        };
        let mut explicit = Vec::new();
        let mut auto = Vec::new();
        let mut all_auto = false;
        if let Some(a) = &dir.info.argspec {
            for l in [&a.argspec, &a.retspec].into_iter().flatten() {
                explicit.extend(parse_spec_list(l, long, |_| {}));
            }
            if dir.info.has_feature(feat::AUTO_ARGS) {
                auto.extend(parse_spec_list(&a.argauto, long, |_| {}));
                auto.extend(parse_spec_list(&a.retauto, long, |_| {}));
                all_auto = a.auto_args;
            }
        }
        Specs {
            empty: explicit.is_empty() && auto.is_empty(),
            explicit: compile(&explicit, ty),
            auto: compile(&auto, ty),
            all_auto,
            cache: Vec::new(),
        }
    }

    fn build(&self, f: &FuncInfo) -> FuncSpec {
        let mut out = FuncSpec::default();
        let mut want_auto = self.all_auto;
        let add = |out: &mut FuncSpec, items: &[ArgItem]| {
            for it in items {
                match it.slot {
                    ArgSlot::Retval => {
                        if out.ret.is_none() {
                            out.ret = Some(it.clone());
                        }
                    }
                    _ => {
                        if !out.args.iter().any(|a| a.slot == it.slot) {
                            out.args.push(it.clone());
                        }
                    }
                }
            }
        };
        for (p, s) in &self.explicit {
            if p.matches(f) {
                if s.items.is_empty() {
                    want_auto = true;
                }
                add(&mut out, &s.items);
            }
        }
        if want_auto {
            for (p, s) in &self.auto {
                if p.matches(f) {
                    add(&mut out, &s.items);
                }
            }
        }
        out
    }

    /// Whether an explicitly recorded spec names any of `funcs`.
    pub fn binds_any(&self, funcs: &[&FuncInfo]) -> bool {
        self.explicit
            .iter()
            .any(|(p, _)| funcs.iter().any(|f| p.matches(f)))
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
