//! Function-name patterns of `-F`, `-N`, `-T` and friends (cli.md §2.4): a name without regex
//! metacharacters (or a C++ `operator…`) matches exactly; anything else is a regular
//! expression, or a glob with `--match=glob`. Shared by the analysis commands and by
//! libmcount's record-time filters, so both select the same functions.

use regex::Regex;

/// `--match`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MatchType {
    #[default]
    Regex,
    Glob,
}

const REGEX_CHARS: &[char] = &[
    '.', '?', '*', '+', '-', '^', '$', '|', '(', ')', '[', ']', '{', '}',
];

/// A compiled name pattern (no `@MODULE` part).
#[derive(Debug, Clone)]
pub enum NameMatcher {
    Exact(String),
    Regex(Regex),
}

/// The anchored regular expression of a shell glob.
pub fn glob_to_regex(glob: &str) -> String {
    let mut re = String::from("^");
    let mut chars = glob.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '*' => re.push_str(".*"),
            '?' => re.push('.'),
            '[' => {
                re.push('[');
                if chars.peek() == Some(&'!') {
                    chars.next();
                    re.push('^');
                }
                for c in chars.by_ref() {
                    if c == ']' {
                        break;
                    }
                    if c == '\\' || c == '[' {
                        re.push('\\');
                    }
                    re.push(c);
                }
                re.push(']');
            }
            c => re.push_str(&regex::escape(&c.to_string())),
        }
    }
    re.push('$');
    re
}

/// Whether `name` is matched literally (no metacharacters, or a C++ operator name).
pub fn is_literal(name: &str) -> bool {
    !name.contains(REGEX_CHARS) || name.starts_with("operator ")
}

/// The expression of pattern `name` of match type `ty`.
pub fn compile(name: &str, ty: MatchType) -> Result<Regex, regex::Error> {
    match ty {
        MatchType::Regex => Regex::new(name),
        MatchType::Glob => Regex::new(&glob_to_regex(name)),
    }
}

/// Why `name` is not a valid pattern of match type `ty` (a regex that does not compile), in
/// one line; `None` when it is valid.
pub fn invalid(name: &str, ty: MatchType) -> Option<String> {
    if is_literal(name) {
        return None;
    }
    let err = compile(name, ty).err()?.to_string();
    // The regex crate's message spans lines (the pattern, a caret, the reason).
    let reason = err
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or(&err)
        .trim()
        .trim_start_matches("error: ")
        .to_string();
    Some(reason)
}

impl NameMatcher {
    /// Compiles `name`; a pattern that is not a valid expression matches literally.
    pub fn new(name: &str, ty: MatchType) -> NameMatcher {
        if is_literal(name) {
            return NameMatcher::Exact(name.to_string());
        }
        match compile(name, ty) {
            Ok(r) => NameMatcher::Regex(r),
            Err(_) => NameMatcher::Exact(name.to_string()),
        }
    }

    pub fn matches(&self, name: &str) -> bool {
        match self {
            NameMatcher::Exact(s) => s == name,
            NameMatcher::Regex(r) => r.is_match(name),
        }
    }
}

/// Splits `NAME[@MODULE]` (an empty module counts as none).
pub fn split_module(spec: &str) -> (&str, Option<&str>) {
    match spec.split_once('@') {
        Some((n, m)) if !m.is_empty() => (n, Some(m)),
        Some((n, _)) => (n, None),
        None => (spec, None),
    }
}

/// Whether a `@MODULE` restriction names the executable's PLT entries (library calls):
/// `PLT`, in any case (`usleep@plt,arg1`, as uftrace accepts it).
pub fn is_plt_module(module: &str) -> bool {
    module.eq_ignore_ascii_case("PLT")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plt_module_in_any_case() {
        assert!(is_plt_module("PLT") && is_plt_module("plt") && is_plt_module("Plt"));
        assert!(!is_plt_module("libplt.so") && !is_plt_module(""));
    }

    #[test]
    fn invalid_patterns_say_why_in_one_line() {
        assert_eq!(invalid("main", MatchType::Regex), None);
        assert_eq!(invalid("^ns1::.*", MatchType::Regex), None);
        let why = invalid("(", MatchType::Regex).unwrap();
        assert!(
            !why.contains('\n') && why.contains("unclosed group"),
            "{why}"
        );
        assert!(invalid("a[", MatchType::Regex).is_some());
    }

    #[test]
    fn exact_regex_and_glob() {
        assert!(matches!(
            NameMatcher::new("main", MatchType::Regex),
            NameMatcher::Exact(_)
        ));
        let re = NameMatcher::new("^f.b$", MatchType::Regex);
        assert!(re.matches("fib") && !re.matches("fibs"));
        let g = NameMatcher::new("f*", MatchType::Glob);
        assert!(g.matches("fib") && !g.matches("afib"));
        assert!(NameMatcher::new("[", MatchType::Regex).matches("["));
        assert_eq!(glob_to_regex("a?[!b]"), "^a.[^b]$");
        assert_eq!(split_module("fib@PLT"), ("fib", Some("PLT")));
        assert_eq!(split_module("fib@"), ("fib", None));
    }
}
