//! Location filters, `-L LOC[@hide]` (cli.md §3.1): functions chosen by the source file of
//! their `.dbg` block (the `L:` line), at record time by the recorder (which turns them into
//! hide triggers for the runtime) and at replay time by the analysis, with one rule.
//!
//! As uftrace 0.13 measured on this machine:
//!
//! * `-L LOC` shows only the functions whose file matches (every other function, library
//!   calls and functions without a location included, is hidden as `-H` hides: its callees
//!   stay, one level up); `-L LOC@hide` hides the matching ones. Of several patterns
//!   (repeated options or `;`-separated), the last one that matches a file decides
//!   (`-L net -L tcp.c@hide` hides `net/tcp.c`, `-L tcp.c@hide -L net` shows it); a file
//!   none matches is hidden when some pattern shows.
//! * A pattern with regex metacharacters (cli.md §2.4) is searched, unanchored, in the file
//!   path (`'prog.c$'`, `lib\.c`, `^src/`); a glob (`--match=glob`) must match it whole.
//! * A plain word (one leading and one trailing `/` aside) matches when the file path, or the
//!   path of a directory above it (`a` and `a/b` for `a/b/c.c`), ends with it: `-L sub`,
//!   `-L /sub`, `-L ub/` and `-L b` all match `sub/lib.c`, `-L lib` does not; so does `-L c`
//!   (every `.c` file), as uftrace 0.13 matches them.
//! * A pattern that matches no function's file is dropped (the `Usage: failed to set filter
//!   or trigger` notice names it, as `!LOC` for `@hide`); when no pattern of a command matches,
//!   nothing is filtered.

use crate::pattern::{compile, is_literal, MatchType};
use regex::Regex;

/// How one pattern compares with a file path.
#[derive(Debug, Clone)]
enum Matcher {
    /// A suffix of the path or of a directory above (a plain word).
    Suffix(String),
    Regex(Regex),
}

/// One `-L` pattern.
#[derive(Debug, Clone)]
pub struct LocPattern {
    matcher: Matcher,
    /// `LOC@hide`.
    pub hide: bool,
    /// As the `failed to set filter` notice names it: `LOC`, or `!LOC` for `@hide`.
    pub text: String,
}

impl LocPattern {
    /// Parses `LOC` or `LOC@hide`.
    pub fn parse(spec: &str, ty: MatchType) -> LocPattern {
        let (loc, hide) = match spec.strip_suffix("@hide") {
            Some(l) => (l, true),
            None => (spec, false),
        };
        let compiled = if is_literal(loc) {
            None
        } else {
            compile(loc, ty).ok()
        };
        let matcher = match compiled {
            Some(r) => Matcher::Regex(r),
            None => {
                let word = loc.strip_prefix('/').unwrap_or(loc);
                Matcher::Suffix(word.strip_suffix('/').unwrap_or(word).to_string())
            }
        };
        LocPattern {
            matcher,
            hide,
            text: if hide {
                format!("!{loc}")
            } else {
                loc.to_string()
            },
        }
    }

    /// Whether the source file `file` (as an `L:` line has it) matches.
    pub fn matches(&self, file: &str) -> bool {
        match &self.matcher {
            Matcher::Regex(r) => r.is_match(file),
            Matcher::Suffix(word) => {
                // The path and every directory above the file: `a`, `a/b` for `a/b/c.c`.
                let dirs = file.match_indices('/').map(|(i, _)| &file[..i]);
                std::iter::once(file)
                    .chain(dirs)
                    .any(|path| path.ends_with(word.as_str()))
            }
        }
    }
}

/// The `-L` patterns of a command.
#[derive(Debug, Clone, Default)]
pub struct LocFilter {
    patterns: Vec<LocPattern>,
}

impl LocFilter {
    /// Compiles the `-L` values (each may hold `;`-separated patterns).
    pub fn new(specs: &[String], ty: MatchType) -> LocFilter {
        LocFilter {
            patterns: specs
                .iter()
                // An empty piece (`-L ''`, `-L 'a;'`) matches every file, as in uftrace.
                .flat_map(|s| s.split(';'))
                .map(|s| LocPattern::parse(s, ty))
                .collect(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.patterns.is_empty()
    }

    /// The patterns as the notice names them, `;`-joined.
    pub fn text(&self) -> String {
        let texts: Vec<&str> = self.patterns.iter().map(|p| p.text.as_str()).collect();
        texts.join(";")
    }

    /// Keeps the patterns that match one of `files` (the source files of every function the
    /// command can meet); `false` when there were patterns and none matched.
    pub fn retain_matching<'a>(&mut self, files: impl IntoIterator<Item = &'a str>) -> bool {
        let mut hit = vec![false; self.patterns.len()];
        for f in files {
            for (h, p) in hit.iter_mut().zip(&self.patterns) {
                *h = *h || p.matches(f);
            }
            if hit.iter().all(|&h| h) {
                break;
            }
        }
        let ok = hit.is_empty() || hit.iter().any(|&h| h);
        let mut hits = hit.into_iter();
        self.patterns.retain(|_| hits.next().unwrap_or(false));
        ok
    }

    /// Whether a function with source file `file` (`None`: no location) is hidden: as the
    /// last pattern that matches it says, else whether some pattern shows.
    pub fn hides(&self, file: Option<&str>) -> bool {
        match self.last_match(file) {
            Some(p) => p.hide,
            None => self.patterns.iter().any(|p| !p.hide),
        }
    }

    /// Whether `file` is hidden by a matching `@hide` pattern (rather than for matching no
    /// shown one).
    pub fn hidden_by_pattern(&self, file: Option<&str>) -> bool {
        self.last_match(file).is_some_and(|p| p.hide)
    }

    fn last_match(&self, file: Option<&str>) -> Option<&LocPattern> {
        let f = file?;
        self.patterns.iter().rev().find(|p| p.matches(f))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn filter(specs: &[&str]) -> LocFilter {
        let specs: Vec<String> = specs.iter().map(|s| s.to_string()).collect();
        LocFilter::new(&specs, MatchType::Regex)
    }

    #[test]
    fn plain_words_name_directories() {
        let p = |s| LocPattern::parse(s, MatchType::Regex);
        for (pat, file, want) in [
            ("sub", "sub/lib.c", true),
            ("ub", "sub/lib.c", true),
            ("sub/", "sub/lib.c", true),
            ("su", "sub/lib.c", false),
            ("lib", "sub/lib.c", false),
            ("alpha", "alpha/beta/gamma.c", true),
            ("pha/beta", "alpha/beta/gamma.c", true),
            ("gamma", "alpha/beta/gamma.c", false),
            ("prog", "prog.c", false),
            ("/", "prog.c", true),
            ("/sub", "sub/lib.c", true),
            ("c", "zq.c", true),
            ("/c", "zq.c", true),
            ("c/", "zq.c", true),
            ("//", "zq.c", true),
            ("///", "zq.c", false),
            ("c//", "zq.c", false),
            ("q", "zq.c", false),
            ("e", "dd/ee.c", false),
            ("d/", "dd/ee.c", true),
        ] {
            assert_eq!(p(pat).matches(file), want, "{pat} {file}");
        }
    }

    #[test]
    fn regexes_search_the_path() {
        let p = |s| LocPattern::parse(s, MatchType::Regex);
        assert!(p("prog.c$").matches("prog.c"));
        assert!(p(r"lib\.c").matches("sub/lib.c"));
        assert!(!p("^lib").matches("sub/lib.c"));
        assert!(!p("d$").matches("dd/ee.c"));
        let g = LocPattern::parse("*.c", MatchType::Glob);
        assert!(g.matches("sub/lib.c"));
        assert!(!LocPattern::parse("lib*", MatchType::Glob).matches("sub/lib.c"));
    }

    #[test]
    fn shown_and_hidden_patterns_add_up() {
        let f = filter(&["prog.c$"]);
        assert!(!f.hides(Some("prog.c")));
        assert!(f.hides(Some("sub/lib.c")));
        assert!(f.hides(None));
        let f = filter(&["prog.c@hide"]);
        assert!(f.hides(Some("prog.c")));
        assert!(!f.hides(Some("sub/lib.c")) && !f.hides(None));
        let f = filter(&["prog.c@hide;lib.c"]);
        assert!(f.hides(Some("prog.c")) && f.hides(None));
        assert!(!f.hides(Some("sub/lib.c")));
        assert_eq!(f.text(), "!prog.c;lib.c");
        let f = filter(&["net", "tcp.c@hide"]);
        assert!(f.hides(Some("net/tcp.c")) && !f.hides(Some("net/socket.c")));
        let f = filter(&["tcp.c@hide", "net"]);
        assert!(!f.hides(Some("net/tcp.c")) && f.hides(Some("ui/w.c")));
        let f = filter(&["ui", "socket.c@hide"]);
        assert!(f.hidden_by_pattern(Some("net/socket.c")));
        assert!(f.hides(Some("net/tcp.c")) && !f.hidden_by_pattern(Some("net/tcp.c")));
    }

    #[test]
    fn patterns_that_match_nothing_are_dropped() {
        let mut f = filter(&["nomatch.c", "prog.c$"]);
        assert!(f.retain_matching(["prog.c", "sub/lib.c"]));
        assert_eq!(f.text(), "prog.c$");
        let mut f = filter(&["nomatch.c"]);
        assert!(!f.retain_matching(["prog.c"]));
        assert!(f.is_empty() && !f.hides(None));
        assert!(filter(&[]).retain_matching(["prog.c"]));
    }
}
