//! `<module>.dbg`: what the recorder learned from a module's DWARF — argument specs for
//! auto-args, source locations and enum definitions (data-format §8).
//!
//! ```text
//! # path name: /home/user/src/st
//! # build-id: f43b85c24c01d691365bb9767c4277f98f61d696
//! E: enum color {RED,GREEN=5,BLUE}
//! F: 11b9 paint            <- starts a function block; module-relative address, as in `.sym`
//! L: 5 st.c                <- source line and file
//! A: @arg1/e:color         <- argument items (argspec grammar, §3.5)
//! R: @retval               <- return item
//! ```
//!
//! Every line other than `#` comments is `<letter>: <value>`. Like uftrace's reader, one line of
//! any other shape (an unknown letter, `A:` before any `F:`, a broken enum) invalidates the
//! whole file, which then describes nothing.

use std::collections::{BTreeMap, HashMap};

/// One `F:` block.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DbgFunc {
    /// Module-relative address (the same as in the module's `.sym`).
    pub addr: u64,
    pub name: String,
    /// The `A:` items: the text after `@` (`arg1,arg2/s`).
    pub args: Option<String>,
    /// The `R:` items: the text after `@` (`retval/f64`).
    pub ret: Option<String>,
    /// Source file of the `L:` line, relative to the module's common compile directory.
    pub file: Option<String>,
    pub line: Option<u32>,
}

/// Enumerators of one enum in definition order: (value, name).
pub type EnumValues = Vec<(i64, String)>;

/// Enum definitions by name. Only the first definition of a name counts.
pub type EnumDefs = BTreeMap<String, EnumValues>;

/// A parsed `.dbg` file (empty when the file was invalid).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DbgFile {
    pub path_name: Option<String>,
    pub build_id: Option<String>,
    /// In file order.
    pub functions: Vec<DbgFunc>,
    pub enums: EnumDefs,
}

impl DbgFile {
    /// Whether the header names this module (a missing header line matches anything), the rule
    /// that decides between `<name>.dbg` and its suffixed variant.
    pub fn matches(&self, path: &str, build_id: Option<&str>) -> bool {
        let path_ok = self.path_name.as_deref().is_none_or(|p| p == path);
        let id_ok = self
            .build_id
            .as_deref()
            .is_none_or(|b| b == build_id.unwrap_or(""));
        path_ok && id_ok
    }

    /// The `A:` (or, with `ret`, the `R:`) items by module-relative address. An address
    /// described by two blocks (aliases) maps to `None`: uftrace's reader drops such specs.
    pub fn specs_by_addr(&self, ret: bool) -> HashMap<u64, Option<&str>> {
        let mut out: HashMap<u64, Option<&str>> = HashMap::new();
        for f in &self.functions {
            let Some(spec) = (if ret { &f.ret } else { &f.args }) else {
                continue;
            };
            out.entry(f.addr)
                .and_modify(|s| *s = None)
                .or_insert(Some(spec.as_str()));
        }
        out
    }
}

/// Parses a `.dbg` file. Returns an empty [`DbgFile`] when any line is malformed.
pub fn parse_dbg(text: &str) -> DbgFile {
    parse_lines(text).unwrap_or_default()
}

fn parse_lines(text: &str) -> Option<DbgFile> {
    let mut out = DbgFile::default();
    let mut current: Option<DbgFunc> = None;
    for line in text.lines() {
        if let Some(c) = line.strip_prefix('#') {
            let c = c.strip_prefix(' ').unwrap_or(c);
            if let Some(p) = c.strip_prefix("path name: ") {
                out.path_name = Some(p.to_string());
            } else if let Some(b) = c.strip_prefix("build-id: ") {
                out.build_id = Some(b.to_string());
            }
            continue;
        }
        let bytes = line.as_bytes();
        if bytes.len() < 3 || bytes[1] != b':' || bytes[2] != b' ' {
            return None;
        }
        let value = &line[3..];
        match bytes[0] {
            b'F' => {
                let (addr, name) = value.split_once(' ').unwrap_or((value, ""));
                let addr = u64::from_str_radix(addr, 16).ok()?;
                out.functions.extend(current.take());
                current = Some(DbgFunc {
                    addr,
                    name: name.to_string(),
                    ..DbgFunc::default()
                });
            }
            b'L' => {
                // Only used for source lines: uftrace's reader does not check it otherwise.
                if let Some(f) = current.as_mut() {
                    let (num, file) = value.split_once(' ').unwrap_or((value, ""));
                    f.line = num.parse().ok();
                    f.file = Some(file.to_string()).filter(|f| !f.is_empty());
                }
            }
            b'A' | b'R' => {
                let is_args = bytes[0] == b'A';
                let f = current.as_mut()?;
                if (if is_args { &f.args } else { &f.ret }).is_some() {
                    // A second spec for one address: record it as a second block, so that
                    // `specs_by_addr` sees the conflict.
                    let again = DbgFunc {
                        args: None,
                        ret: None,
                        ..f.clone()
                    };
                    out.functions.extend(current.replace(again));
                }
                let f = current.as_mut()?;
                let slot = if is_args { &mut f.args } else { &mut f.ret };
                // Without '@' the line names no items.
                let items = value.split_once('@').map_or("", |(_, items)| items);
                *slot = Some(items.to_string());
            }
            b'E' => {
                for (name, values) in parse_enums(value)? {
                    out.enums.entry(name).or_insert(values);
                }
            }
            _ => return None,
        }
    }
    out.functions.extend(current);
    Some(out)
}

/// A token of the enum syntax.
#[derive(Debug, PartialEq)]
enum Token<'a> {
    /// An identifier, or a number (where a name is expected, uftrace takes either).
    Word(&'a str),
    /// One punctuation character (`{`, `}`, `=`, `,`).
    Sign(char),
}

/// Splits `s` into enum tokens; `None` at a character that starts no token.
fn next_token<'a>(s: &mut &'a str) -> Option<Option<Token<'a>>> {
    let t = s.trim_start();
    let Some(c) = t.chars().next() else {
        *s = t;
        return Some(None);
    };
    if c.is_ascii_punctuation() && c != '_' {
        *s = &t[1..];
        return Some(Some(Token::Sign(c)));
    }
    if !(c.is_ascii_alphanumeric() || c == '_') {
        return None;
    }
    let end = t
        .find([' ', '\n', '\t', '=', ',', '{', '}'])
        .unwrap_or(t.len());
    *s = &t[end..];
    Some(Some(Token::Word(&t[..end])))
}

/// Reads a C `strtol(s, &end, 0)` integer (decimal, `0x` hex, `0` octal, optional sign) from
/// the start of `s`; no digits give 0 and leave `s` alone.
fn read_integer(s: &mut &str) -> i64 {
    let t = s.trim_start();
    let (neg, rest) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    let (radix, digits) = if let Some(h) = rest
        .strip_prefix("0x")
        .or_else(|| rest.strip_prefix("0X"))
        .filter(|h| h.starts_with(|c: char| c.is_ascii_hexdigit()))
    {
        (16, h)
    } else if rest.starts_with('0') {
        (8, rest)
    } else {
        (10, rest)
    };
    let len = digits
        .find(|c: char| !c.is_digit(radix))
        .unwrap_or(digits.len());
    if len == 0 {
        return 0;
    }
    let mut v: i128 = 0;
    for c in digits[..len].chars() {
        v = (v * i128::from(radix) + i128::from(c.to_digit(radix).unwrap_or(0)))
            .min(i128::from(u64::MAX));
    }
    let v = if neg { -v } else { v };
    *s = &digits[len..];
    v.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64
}

/// Parses `enum NAME {A, B = 5, C};enum ...` (the `E:` value and the info's `enumauto` list).
/// Values count up from the previous one as in C; `=` takes a C integer (negative, hex,
/// octal). Returns `None` when a definition is malformed.
pub fn parse_enums(text: &str) -> Option<Vec<(String, EnumValues)>> {
    let mut out = Vec::new();
    for def in text.split(';') {
        let mut s = def;
        match next_token(&mut s)? {
            None => continue,
            Some(Token::Word("enum")) => {}
            Some(_) => return None,
        }
        let Some(Token::Word(name)) = next_token(&mut s)? else {
            return None;
        };
        if next_token(&mut s)? != Some(Token::Sign('{')) {
            return None;
        }
        let mut values = Vec::new();
        let mut value: i64 = 0;
        let mut tok = next_token(&mut s)?;
        loop {
            let label = match tok {
                None => return None,
                Some(Token::Sign('}')) => break,
                Some(Token::Word(w)) => w.to_string(),
                Some(Token::Sign(c)) => c.to_string(),
            };
            let mut sign = match next_token(&mut s)? {
                Some(Token::Sign(c)) => c,
                _ => return None,
            };
            if sign == '=' {
                value = read_integer(&mut s);
                sign = match next_token(&mut s)? {
                    Some(Token::Sign(c)) => c,
                    _ => return None,
                };
            }
            values.push((value, label));
            value = value.wrapping_add(1);
            tok = if sign == ',' {
                next_token(&mut s)?
            } else {
                Some(Token::Sign(sign))
            };
        }
        out.push((name.to_string(), values));
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const ST: &str = "# path name: /home/user/src/st\n\
                      # build-id: f43b85c24c01d691365bb9767c4277f98f61d696\n\
                      E: enum color {RED,GREEN=5,BLUE}\n\
                      F: 11b9 paint\n\
                      L: 5 st.c\n\
                      A: @arg1/e:color\n\
                      R: @retval\n\
                      F: 11cf sum\n\
                      L: 6 st.c\n\
                      A: @arg1/t16:pt%RDI+RSI\n\
                      F: 122b main\n";

    #[test]
    fn parses_blocks_and_header() {
        let f = parse_dbg(ST);
        assert_eq!(f.path_name.as_deref(), Some("/home/user/src/st"));
        assert!(f.matches(
            "/home/user/src/st",
            Some("f43b85c24c01d691365bb9767c4277f98f61d696")
        ));
        assert!(!f.matches("/home/user/src/st", None));
        assert_eq!(f.functions.len(), 3);
        assert_eq!(
            f.functions[0],
            DbgFunc {
                addr: 0x11b9,
                name: "paint".into(),
                args: Some("arg1/e:color".into()),
                ret: Some("retval".into()),
                file: Some("st.c".into()),
                line: Some(5),
            }
        );
        assert_eq!(f.functions[1].ret, None);
        assert_eq!(f.functions[2].args, None);
        assert_eq!(
            f.enums["color"],
            vec![
                (0, "RED".to_string()),
                (5, "GREEN".to_string()),
                (6, "BLUE".to_string())
            ]
        );
        let args = f.specs_by_addr(false);
        assert_eq!(args[&0x11cf], Some("arg1/t16:pt%RDI+RSI"));
        assert!(!args.contains_key(&0x122b));
    }

    #[test]
    fn header_only_is_empty_and_valid() {
        let f = parse_dbg("# path name: /usr/lib/libc.so.6\n# build-id: 93ac\n");
        assert_eq!(f.path_name.as_deref(), Some("/usr/lib/libc.so.6"));
        assert!(f.functions.is_empty());
    }

    #[test]
    fn malformed_lines_invalidate_everything() {
        for bad in [
            "X: what\n",
            "\n",
            "F:11b9 paint\n",
            "F: zz paint\n",
            "E: enum broken {A B}\n",
            "E: notenum x {A}\n",
        ] {
            let f = parse_dbg(&format!("{ST}{bad}"));
            assert_eq!(f, DbgFile::default(), "{bad:?}");
        }
        assert_eq!(parse_dbg("A: @arg1\nF: 10 f\n"), DbgFile::default());
        assert_eq!(parse_dbg("L: 3 a.c\nF: 10 f\n").functions.len(), 1);
    }

    #[test]
    fn aliases_lose_their_specs() {
        let f = parse_dbg("F: 10 C1\nA: @arg1/p\nF: 10 C2\nA: @arg1/p\nR: @retval\n");
        assert_eq!(f.specs_by_addr(false)[&0x10], None);
        assert_eq!(f.specs_by_addr(true)[&0x10], Some("retval"));
        let f = parse_dbg("F: 10 f\nA: @arg1\nA: @arg2\nR: @retval\nF: 20 g\nA: @arg1\n");
        assert_eq!(f.specs_by_addr(false)[&0x10], None);
        assert_eq!(f.specs_by_addr(false)[&0x20], Some("arg1"));
        assert_eq!(f.specs_by_addr(true)[&0x10], Some("retval"));
    }

    #[test]
    fn enum_values() {
        let e = parse_enums(
            " enum a { AAA, BBB = 1, CCC };enum u{record=100,replay=-23,report};\
             enum h {X = 0x10, Y, Z=010,};;",
        )
        .unwrap();
        let names: Vec<&str> = e.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["a", "u", "h"]);
        let vals = |i: usize| e[i].1.iter().map(|(v, _)| *v).collect::<Vec<_>>();
        assert_eq!(vals(0), [0, 1, 2]);
        assert_eq!(vals(1), [100, -23, -22]);
        assert_eq!(vals(2), [16, 17, 8]);
        assert_eq!(e[1].1[2].1, "report");
        assert_eq!(parse_enums(""), Some(vec![]));
        assert_eq!(parse_enums("enum a {A"), None);
        assert_eq!(parse_enums("enum a {A,"), None);
        assert_eq!(parse_enums("enum {A}"), None);
        assert_eq!(
            parse_enums("enum a {A=}"),
            Some(vec![("a".into(), vec![(0, "A".into())])])
        );
    }

    #[test]
    fn first_enum_definition_wins() {
        let f = parse_dbg("E: enum e {A}\nE: enum e {B}\n");
        assert_eq!(f.enums["e"], vec![(0, "A".to_string())]);
    }

    proptest::proptest! {
        #[test]
        fn never_panics(text in "(([FLARE#]: ?)?[ -~]{0,12}\n){0,8}") {
            let _ = parse_dbg(&text);
        }
    }

    #[test]
    fn never_panics_on_odd_input() {
        for s in [
            "F: \n",
            "E: enum e {A=-}\n",
            "E: enum e {A=0x}\n",
            "L: x\n",
            "É: x\n",
        ] {
            let _ = parse_dbg(s);
        }
        assert_eq!(
            parse_enums("enum e {A=99999999999999999999999}").unwrap()[0].1[0].0,
            i64::MAX
        );
    }
}
