//! User SDT events (`-E PROVIDER:NAME`, data-format §3.6 and §11.1): which probes of a program
//! a pattern enables, the ids they are recorded under, and `events.txt`, which names them.
//!
//! A pattern is split at its first `:`; the provider part and the name part are each a name
//! pattern ([`crate::pattern`]: a plain word matches exactly, anything else is a regular
//! expression searched anywhere in the word, or a glob with `--match=glob`). A pattern without
//! `:` matches nothing, and neither does an invalid expression (`myapp:*` as a regex), as in
//! uftrace 0.13. Enabled events are numbered from [`SDT_FIRST`] in the order of the program's
//! notes; several sites of one `provider:name` (inlined code) share its id.
//!
//! The recorder reads the executable's notes, selects the events ([`select`]) and writes
//! `events.txt` before the program starts; libmcount enables the sites of the events that
//! `events.txt` lists ([`parse_events_txt`]), under those ids.

use crate::elf::sdt::SdtProbe;
use crate::event::SDT_FIRST;
use crate::pattern::{MatchType, NameMatcher};

/// One `-E` pattern for user events.
#[derive(Debug, Clone)]
pub struct EventPattern {
    provider: NameMatcher,
    name: NameMatcher,
}

impl EventPattern {
    /// `PROVIDER:NAME`; `None` without a `:`.
    pub fn new(spec: &str, ty: MatchType) -> Option<EventPattern> {
        let (provider, name) = spec.split_once(':')?;
        Some(EventPattern {
            provider: NameMatcher::new(provider, ty),
            name: NameMatcher::new(name, ty),
        })
    }

    pub fn matches(&self, provider: &str, name: &str) -> bool {
        self.provider.matches(provider) && self.name.matches(name)
    }
}

/// The events of `probes` that one of `patterns` enables, with their ids: `(id,
/// "provider:name")`, in note order, each name once.
pub fn select(probes: &[SdtProbe], patterns: &[EventPattern]) -> Vec<(u64, String)> {
    let mut out: Vec<(u64, String)> = Vec::new();
    for p in probes {
        if !patterns.iter().any(|pat| pat.matches(&p.provider, &p.name)) {
            continue;
        }
        let full = p.full_name();
        if !out.iter().any(|(_, n)| *n == full) {
            out.push((SDT_FIRST + out.len() as u64, full));
        }
    }
    out
}

/// The text of `events.txt`: `EVENT: <id> <provider>:<name>` lines.
pub fn events_txt(events: &[(u64, String)]) -> String {
    events
        .iter()
        .map(|(id, name)| format!("EVENT: {id} {name}\n"))
        .collect()
}

/// The `(id, name)` lines of an `events.txt`; other lines are skipped.
pub fn parse_events_txt(text: &str) -> Vec<(u64, String)> {
    text.lines()
        .filter_map(|l| {
            let mut it = l.split_whitespace();
            match (it.next(), it.next(), it.next()) {
                (Some("EVENT:"), Some(id), Some(name)) => {
                    Some((id.parse().ok()?, name.to_string()))
                }
                _ => None,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn probe(provider: &str, name: &str) -> SdtProbe {
        SdtProbe {
            provider: provider.into(),
            name: name.into(),
            pc: 0,
            semaphore: 0,
            args: String::new(),
        }
    }

    fn names(specs: &[&str], ty: MatchType) -> Vec<String> {
        let probes = [
            probe("myapp", "work_start"),
            probe("myapp", "work_end"),
            probe("myapp", "work_start"),
        ];
        let pats: Vec<EventPattern> = specs
            .iter()
            .filter_map(|s| EventPattern::new(s, ty))
            .collect();
        select(&probes, &pats).into_iter().map(|e| e.1).collect()
    }

    /// As measured with uftrace 0.13 (`events.txt` of each pattern).
    #[test]
    fn patterns_select_like_uftrace() {
        let both = ["myapp:work_start", "myapp:work_end"];
        assert_eq!(
            names(&["myapp:work_start"], MatchType::Regex),
            ["myapp:work_start"]
        );
        assert_eq!(names(&["myapp:.*"], MatchType::Regex), both);
        assert_eq!(names(&["myapp:ork_.*"], MatchType::Regex), both);
        assert_eq!(
            names(&["yap.:work_end"], MatchType::Regex),
            ["myapp:work_end"]
        );
        assert_eq!(
            names(&["myapp:^work_start$"], MatchType::Regex),
            ["myapp:work_start"]
        );
        for none in [
            "myapp:*",
            "myapp:work",
            "app:work_start",
            "work_start",
            ".*",
        ] {
            assert!(names(&[none], MatchType::Regex).is_empty(), "{none}");
        }
        assert_eq!(names(&["myapp:*"], MatchType::Glob), both);
        assert_eq!(names(&["*:work_end"], MatchType::Glob), ["myapp:work_end"]);
    }

    #[test]
    fn events_txt_round_trip() {
        let ev = vec![
            (1_000_000, "a:b".to_string()),
            (1_000_001, "a:c".to_string()),
        ];
        let text = events_txt(&ev);
        assert_eq!(text, "EVENT: 1000000 a:b\nEVENT: 1000001 a:c\n");
        assert_eq!(parse_events_txt(&text), ev);
        assert!(parse_events_txt("junk\nEVENT: x a:b\n").is_empty());
    }
}
