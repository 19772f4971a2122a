//! C++ name demangling in uftrace's three modes (shared by the analysis commands and by
//! libmcount's record-time filters, so that patterns match the same names at both times).
//!
//! `full` is the demangler's complete text. `simple` (uftrace's default) keeps the qualified
//! name only: no parameter lists, template arguments, return type, cv-qualifiers or ABI tags
//! (`int ns::twice<int>(int)` → `ns::twice`).

mod gnu;

/// `--demangle`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Demangle {
    #[default]
    Simple,
    Full,
    No,
}

/// Demangles `raw` according to `mode`; names that are not mangled come back unchanged.
pub fn demangle(raw: &str, mode: Demangle) -> String {
    if mode == Demangle::Full && gnu::available() {
        // Not `_Z...`: libstdc++ would read `f` as the type `float`. Static initializers stay
        // raw in full mode, as in uftrace.
        if !raw.starts_with("_Z") {
            return raw.to_string();
        }
        return gnu::demangle(raw).unwrap_or_else(|| raw.to_string());
    }
    // gcc's static initializers carry the mangled name of their translation unit's first
    // function: `_GLOBAL__sub_I__ZN3ns17compareEii` is `_GLOBAL__sub_I_ns1::compare`.
    const INIT: &str = "_GLOBAL__sub_I_";
    if let Some(rest) = raw.strip_prefix(INIT).filter(|r| r.starts_with("_Z")) {
        if mode != Demangle::No {
            return format!("{INIT}{}", demangle(rest, mode));
        }
    }
    if mode == Demangle::No || !raw.starts_with("_Z") {
        return raw.to_string();
    }
    if mode == Demangle::Simple {
        if let Some(target) = thunk_target(raw) {
            return demangle(&format!("_Z{target}"), mode);
        }
    }
    // Clone suffixes such as `.constprop.0` are not part of the mangling grammar.
    let base = raw.split('.').next().unwrap_or(raw);
    let parsed = cpp_demangle::Symbol::new(base)
        .ok()
        .and_then(|sym| sym.demangle(&cpp_demangle::DemangleOptions::default()).ok());
    match (mode, parsed) {
        (Demangle::Full, Some(full)) => full,
        (_, Some(full)) => inheriting_constructor(raw, simplify(&full)),
        // The name alone is all simple mode needs: cpp_demangle stops at some types that gcc
        // writes, e.g. `sr` with template arguments in a return type
        // (`std::enable_if<std::__is_bitwise_relocatable<char*, void>::value, ...>::type`).
        (Demangle::Simple, None) => {
            name_only(base).map_or_else(|| raw.to_string(), |n| simplify(&n))
        }
        _ => raw.to_string(),
    }
}

/// The demangled `<name>` at the start of a mangled function name, without the function type
/// that follows it.
fn name_only(base: &str) -> Option<String> {
    // A symbol version (`_ZTISt13runtime_error@GLIBCXX_3.4`) stays raw, as in uftrace; so do
    // special names (`_ZT`: typeinfo, vtables), which have no function type.
    if base.contains('@') || base.starts_with("_ZT") {
        return None;
    }
    let (sym, function_type) = cpp_demangle::BorrowedSymbol::with_tail(base.as_bytes()).ok()?;
    if function_type.is_empty() {
        return None;
    }
    sym.demangle(&cpp_demangle::DemangleOptions::default()).ok()
}

/// An inheriting constructor (`CI1`/`CI2` and the base class) is named by its class, as other
/// constructors are: `std::__uniq_ptr_data::__uniq_ptr_data`, where the demangler prints the
/// base class's name (`__uniq_ptr_impl`).
fn inheriting_constructor(raw: &str, simple: String) -> String {
    let Some((class_path, last)) = simple.rsplit_once("::") else {
        return simple;
    };
    let class = class_path.rsplit("::").next().unwrap_or(class_path);
    if last == class {
        return simple;
    }
    // The base class follows `CI1`/`CI2`, possibly after `N` and a scope (`St`, `S0_`).
    let base = format!("{}{last}", last.len());
    let inherits = ["CI1", "CI2"].iter().any(|ci| {
        raw.match_indices(ci).any(|(at, _)| {
            let after = &raw[at + ci.len()..];
            let after = after.strip_prefix('N').unwrap_or(after);
            let after = match after.strip_prefix("St") {
                Some(std) => std,
                None => after
                    .strip_prefix('S')
                    .and_then(|sub| {
                        let u = sub.find('_')?;
                        let id = &sub[..u];
                        id.bytes()
                            .all(|b| b.is_ascii_digit() || b.is_ascii_uppercase())
                            .then(|| &sub[u + 1..])
                    })
                    .unwrap_or(after),
            };
            after.starts_with(&base)
        })
    });
    if inherits {
        format!("{class_path}::{class}")
    } else {
        simple
    }
}

const ANON: &str = "(anonymous namespace)";

/// The mangled target of a thunk (`_ZThn16_NSdD0Ev` → `NSdD0Ev`): uftrace shows a thunk under
/// its target's name.
fn thunk_target(raw: &str) -> Option<&str> {
    // <call-offset> ::= h <number> _ | v <number> _ <number> _ ; a number may start with `n`.
    fn number(s: &str) -> Option<&str> {
        let s = s.strip_prefix('n').unwrap_or(s);
        let digits = s.bytes().take_while(u8::is_ascii_digit).count();
        (digits > 0).then(|| &s[digits..])?.strip_prefix('_')
    }
    fn call_offset(s: &str) -> Option<&str> {
        if let Some(r) = s.strip_prefix('h') {
            number(r)
        } else {
            number(s.strip_prefix('v')?).and_then(number)
        }
    }
    let rest = raw.strip_prefix("_ZT")?;
    match rest.as_bytes().first()? {
        b'h' | b'v' => call_offset(rest),
        b'c' => call_offset(&rest[1..]).and_then(call_offset),
        _ => None,
    }
}

/// Reduces a fully demangled name to its qualified name, spelled as uftrace 0.13's simple
/// demangler spells it (measured on every function of libstdc++): thunks named by their
/// target, `[abi:TAG]` as a `::TAG` scope (a constructor after it named `TAG`), anonymous
/// namespaces as `_GLOBAL__N_1`, lambdas as `$_N` (counted from 0), conversion operators as
/// `operator(cast)`, and `std::ostream`/`istream`/
/// `iostream` as `basic_ostream` … (`std::string` as `basic_string<>`).
pub fn simplify(full: &str) -> String {
    let full = uftrace_spelling(full);
    let (s, tags) = qualified_name(&full);
    let s = tagged_constructors(&s, &tags);
    let s = standard_abbreviations(&s);
    s.replace(ANON, "_GLOBAL__N_1")
}

/// The rewrites of [`simplify`] that need the full text: thunks, lambdas, ABI tags.
fn uftrace_spelling(full: &str) -> String {
    let mut s = full;
    for thunk in [
        "virtual thunk to ",
        "non-virtual thunk to ",
        "covariant return thunk to ",
    ] {
        if let Some(rest) = s.strip_prefix(thunk) {
            s = rest;
        }
    }
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(at) = rest.find("{lambda(") {
        out.push_str(&rest[..at]);
        let tail = &rest[at..];
        // `{lambda(PARAMS)#N}`: the parameters may nest parentheses.
        let mut depth = 0i32;
        let mut close = None;
        for (i, c) in tail.char_indices() {
            match c {
                '(' => depth += 1,
                ')' => depth -= 1,
                '}' if depth == 0 => {
                    close = Some(i);
                    break;
                }
                _ => {}
            }
        }
        let Some(close) = close else {
            out.push_str(tail);
            rest = "";
            break;
        };
        let n = tail[..close]
            .rsplit_once('#')
            .and_then(|(_, n)| n.parse::<u32>().ok())
            .unwrap_or(1);
        out.push_str(&format!("$_{}", n.saturating_sub(1)));
        rest = &tail[close + 1..];
    }
    out.push_str(rest);
    out.replace("[abi:", "::[abi:")
}

/// A constructor or destructor named after a class with an ABI tag takes the tag's name
/// (`failure::cxx11::failure` → `failure::cxx11::cxx11`), as uftrace's demangler repeats the
/// last name it read.
fn tagged_constructors(s: &str, tags: &[String]) -> String {
    let parts: Vec<&str> = s.split("::").collect();
    if parts.len() < 3 {
        return s.to_string();
    }
    let n = parts.len();
    let (class, tag, last) = (parts[n - 3], parts[n - 2], parts[n - 1]);
    if !tags.iter().any(|t| t == tag) {
        return s.to_string();
    }
    let renamed = if last == class {
        tag.to_string()
    } else if last.strip_prefix('~') == Some(class) {
        format!("~{tag}")
    } else {
        return s.to_string();
    };
    let mut out = parts[..n - 1].join("::");
    out.push_str("::");
    out.push_str(&renamed);
    out
}

/// The standard abbreviations as uftrace spells them.
fn standard_abbreviations(s: &str) -> String {
    let mut s = s.to_string();
    for (short, long, ctor) in [
        ("std::string", "std::basic_string<>", "basic_string<>"),
        ("std::istream", "std::basic_istream", "basic_istream"),
        ("std::ostream", "std::basic_ostream", "basic_ostream"),
        ("std::iostream", "std::basic_iostream", "basic_iostream"),
    ] {
        let Some(rest) = s.strip_prefix(short).and_then(|r| r.strip_prefix("::")) else {
            continue;
        };
        let short_name = &short[5..];
        let rest = if rest == short_name {
            ctor.to_string()
        } else if rest.strip_prefix('~') == Some(short_name) {
            format!("~{ctor}")
        } else {
            rest.to_string()
        };
        s = format!("{long}::{rest}");
        break;
    }
    s
}

/// The qualified name of a full demangled name: no parameters, template arguments, return
/// type or qualifiers; `[abi:TAG]` kept as `TAG`. Also the tags met.
fn qualified_name(full: &str) -> (String, Vec<String>) {
    let mut tags = Vec::new();
    let bytes = full.as_bytes();
    let mut out = String::with_capacity(full.len());
    let (mut angle, mut paren, mut square) = (0i32, 0i32, 0i32);
    // Where the last top-level parameter list began: qualifiers after it are not part of the
    // name, an `&` before it may be (`std::operator&`).
    let mut params_at = 0;
    let mut i = 0;
    while i < bytes.len() {
        let rest = &full[i..];
        if angle == 0 && paren == 0 && square == 0 {
            if rest.starts_with(ANON) {
                out.push_str(ANON);
                i += ANON.len();
                continue;
            }
            if let Some(tag) = rest.strip_prefix("[abi:") {
                if let Some(end) = tag.find(']') {
                    out.push_str(&tag[..end]);
                    tags.push(tag[..end].to_string());
                    i += 5 + end + 1;
                    continue;
                }
            }
            if let Some(op) = operator_at(rest) {
                let conversion = op.starts_with("operator ")
                    && ![" new", " delete"].iter().any(|k| op[8..].starts_with(k));
                out.push_str(if conversion { "operator(cast)" } else { op });
                i += op.len();
                continue;
            }
        }
        let c = bytes[i];
        match c {
            b'<' if paren == 0 && square == 0 => angle += 1,
            b'>' if paren == 0 && square == 0 && angle > 0 => angle -= 1,
            b'(' if angle == 0 && square == 0 => {
                if paren == 0 {
                    params_at = out.len();
                }
                paren += 1;
            }
            b')' if angle == 0 && square == 0 && paren > 0 => paren -= 1,
            b'[' if angle == 0 && paren == 0 => square += 1,
            b']' if angle == 0 && paren == 0 && square > 0 => square -= 1,
            _ if angle == 0 && paren == 0 && square == 0 => {
                let ch = rest.chars().next().unwrap_or(' ');
                out.push(ch);
                i += ch.len_utf8();
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    // Trailing qualifiers left after the parameter list.
    let qualifiers = |t: &str| {
        t.split_whitespace()
            .all(|w| ["const", "volatile", "&&", "&"].contains(&w))
    };
    if params_at > 0 && qualifiers(&out[params_at..]) {
        out.truncate(params_at);
    }
    let mut s = out.trim_end().to_string();
    // The return type ends at the last top-level space before the name (and before any
    // `operator` keyword, whose own text may contain spaces).
    let limit = s.find("operator").unwrap_or(s.len());
    let anon_free = s[..limit].replace(ANON, &"_".repeat(ANON.len()));
    if let Some(sp) = anon_free.rfind(' ') {
        s = s[sp + 1..].to_string();
    }
    (s, tags)
}

/// The operator token at the start of `s` (`operator()`, `operator<<`, `operator new[]`, ...).
fn operator_at(s: &str) -> Option<&str> {
    let rest = s.strip_prefix("operator")?;
    const OPS: [&str; 45] = [
        "()",
        "[]",
        "<<=",
        ">>=",
        "<=>",
        "->*",
        "->",
        "<<",
        ">>",
        "<=",
        ">=",
        "==",
        "!=",
        "&&",
        "||",
        "++",
        "--",
        "+=",
        "-=",
        "*=",
        "/=",
        "%=",
        "&=",
        "|=",
        "^=",
        " new[]",
        " delete[]",
        " new",
        " delete",
        "+",
        "-",
        "*",
        "/",
        "%",
        "^",
        "&",
        "|",
        "~",
        "!",
        "=",
        "<",
        ">",
        ",",
        "\"\" ",
        " ",
    ];
    for op in OPS {
        if rest.starts_with(op) {
            if op == " " {
                // Conversion operator: `operator int`, `operator char const*`: keep the type word.
                let end = rest[1..].find(['(', '<']).map_or(rest.len(), |e| e + 1);
                return Some(&s[..8 + end]);
            }
            return Some(&s[..8 + op.len()]);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn simple(raw: &str) -> String {
        demangle(raw, Demangle::Simple)
    }

    #[test]
    fn simple_mode() {
        assert_eq!(simple("_ZN2ns5inner3FooC2Ei"), "ns::inner::Foo::Foo");
        assert_eq!(simple("_ZNK2ns5inner3Foo3getEv"), "ns::inner::Foo::get");
        assert_eq!(simple("_ZN2ns5inner5twiceIiEET_S2_"), "ns::inner::twice");
        assert_eq!(
            simple("_ZNSt11char_traitsIcE6lengthEPKc"),
            "std::char_traits::length"
        );
        assert_eq!(
            simple("_ZNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEED1Ev"),
            "std::__cxx11::basic_string::~basic_string"
        );
        assert_eq!(
            simple("_ZNSs4_Rep9_S_createEmmRKSaIcE"),
            "std::basic_string<>::_Rep::_S_create"
        );
        assert_eq!(simple("_ZNSo5flushEv"), "std::basic_ostream::flush");
        assert_eq!(simple("_ZN12_GLOBAL__N_13fooEv"), "_GLOBAL__N_1::foo");
        assert_eq!(simple("_ZN3FooclEv"), "Foo::operator()");
        assert_eq!(simple("_ZN3FooltERKS_"), "Foo::operator<");
        assert_eq!(simple("main"), "main");
        assert_eq!(
            simple("_ZThn16_NSdD0Ev"),
            "std::basic_iostream::~basic_iostream"
        );
        assert_eq!(
            simple("_ZTv0_n24_NSoD1Ev"),
            "std::basic_ostream::~basic_ostream"
        );
        assert_eq!(
            simple("_GLOBAL__sub_I__ZN3ns17compareEii"),
            "_GLOBAL__sub_I_ns1::compare"
        );
        assert_eq!(
            simple("_ZN7leveldb12_GLOBAL__N_122BytewiseComparatorImpl7CompareERKNS_5SliceES4_"),
            "leveldb::_GLOBAL__N_1::BytewiseComparatorImpl::Compare"
        );
        assert_eq!(
            simple("_ZNKSt6locale4nameB5cxx11Ev"),
            "std::locale::name::cxx11"
        );
        assert_eq!(
            simple("_ZNSt8ios_base7failureB5cxx11C1EPKcRKSt10error_code"),
            "std::ios_base::failure::cxx11::cxx11"
        );
        assert_eq!(
            simple("_ZNKSi6sentrycvbEv"),
            "std::basic_istream::sentry::operator(cast)"
        );
        assert_eq!(simple("_ZZ4mainENKUliE_clEi"), "main::$_0::operator()");
        assert_eq!(simple("_ZNSolsEi"), "std::basic_ostream::operator<<");
        assert_eq!(simple("_ZNSoC1Ev"), "std::basic_ostream::basic_ostream");
        assert_eq!(simple("_ZNSsC1EOSs"), "std::basic_string<>::basic_string<>");
        assert_eq!(simple("_Z3fibi.constprop.0"), "fib");
        assert_eq!(simple("_ZStanSt13_Ios_FmtflagsS_"), "std::operator&");
        assert_eq!(
            simple("_ZTISt13runtime_error@GLIBCXX_3.4"),
            "_ZTISt13runtime_error@GLIBCXX_3.4"
        );
        assert_eq!(simple("_ZNKSt6vectorIiSaIiEE4sizeEv"), "std::vector::size");
        assert_eq!(
            simple("_ZSt14__relocate_a_1IPcS0_ENSt9enable_ifIXsrSt24__is_bitwise_relocatableIT_vE5valueEPS3_E4typeES5_S5_S5_RSaIT0_E"),
            "std::__relocate_a_1"
        );
        assert_eq!(
            simple("_ZNSt15__uniq_ptr_dataINSt6thread6_StateESt14default_deleteIS1_ELb1ELb1EECI1St15__uniq_ptr_implIS1_S3_EEPS1_"),
            "std::__uniq_ptr_data::__uniq_ptr_data"
        );
    }

    #[test]
    fn full_and_no() {
        assert_eq!(
            demangle("_ZN2ns5inner3FooC2Ei", Demangle::Full),
            "ns::inner::Foo::Foo(int)"
        );
        assert_eq!(
            demangle("_ZN2ns5inner3FooC2Ei", Demangle::No),
            "_ZN2ns5inner3FooC2Ei"
        );
    }
}
