//! C++ name demangling in uftrace's three modes (shared by the analysis commands and by
//! libmcount's record-time filters, so that patterns match the same names at both times).
//!
//! `full` is the demangler's complete text. `simple` (uftrace's default) keeps the qualified
//! name only: no parameter lists, template arguments, return type, cv-qualifiers or ABI tags
//! (`int ns::twice<int>(int)` → `ns::twice`).

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
    if mode == Demangle::No || !raw.starts_with("_Z") {
        return raw.to_string();
    }
    // Clone suffixes such as `.constprop.0` are not part of the mangling grammar.
    let (base, _suffix) = match raw.find('.') {
        Some(i) => (&raw[..i], &raw[i..]),
        None => (raw, ""),
    };
    let Ok(sym) = cpp_demangle::Symbol::new(base) else {
        return raw.to_string();
    };
    let Ok(full) = sym.demangle(&cpp_demangle::DemangleOptions::default()) else {
        return raw.to_string();
    };
    match mode {
        Demangle::Full => full,
        _ => simplify(&full),
    }
}

const ANON: &str = "(anonymous namespace)";

/// Reduces a fully demangled name to its qualified name.
pub fn simplify(full: &str) -> String {
    let bytes = full.as_bytes();
    let mut out = String::with_capacity(full.len());
    let (mut angle, mut paren, mut square) = (0i32, 0i32, 0i32);
    let mut i = 0;
    while i < bytes.len() {
        let rest = &full[i..];
        if angle == 0 && paren == 0 && square == 0 {
            if rest.starts_with(ANON) {
                out.push_str(ANON);
                i += ANON.len();
                continue;
            }
            if let Some(op) = operator_at(rest) {
                out.push_str(op);
                i += op.len();
                continue;
            }
        }
        let c = bytes[i];
        match c {
            b'<' if paren == 0 && square == 0 => angle += 1,
            b'>' if paren == 0 && square == 0 && angle > 0 => angle -= 1,
            b'(' if angle == 0 && square == 0 => paren += 1,
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
    let mut s = out.trim_end().to_string();
    loop {
        let before = s.len();
        for q in [" const", " volatile", " &&", " &", "&&", "&"] {
            if let Some(t) = s.strip_suffix(q) {
                s = t.trim_end().to_string();
            }
        }
        if s.len() == before {
            break;
        }
    }
    // The return type ends at the last top-level space before the name (and before any
    // `operator` keyword, whose own text may contain spaces).
    let limit = s.find("operator").unwrap_or(s.len());
    let anon_free = s[..limit].replace(ANON, &"_".repeat(ANON.len()));
    if let Some(sp) = anon_free.rfind(' ') {
        s = s[sp + 1..].to_string();
    }
    // The standard abbreviations (`Ss`, `Si`, `So`, `Sd`) name class templates whose
    // arguments uftrace shows as `<>`: `std::basic_string<>::_Rep::_S_create`.
    for (short, long) in [
        ("std::string::", "std::basic_string<>::"),
        ("std::istream::", "std::basic_istream<>::"),
        ("std::ostream::", "std::basic_ostream<>::"),
        ("std::iostream::", "std::basic_iostream<>::"),
    ] {
        if let Some(rest) = s.strip_prefix(short) {
            s = format!("{long}{rest}");
        }
    }
    s
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
        assert_eq!(
            simple("_ZN12_GLOBAL__N_13fooEv"),
            "(anonymous namespace)::foo"
        );
        assert_eq!(simple("_ZN3FooclEv"), "Foo::operator()");
        assert_eq!(simple("_ZN3FooltERKS_"), "Foo::operator<");
        assert_eq!(simple("main"), "main");
        assert_eq!(simple("_Z3fibi.constprop.0"), "fib");
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
