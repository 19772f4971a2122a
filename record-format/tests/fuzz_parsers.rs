//! Random and half-structured input for each parser of the data directory: `Info::parse`,
//! `task::parse_task_txt`, `maps::parse_maps`, `sym::parse_sym`, `argspec::parse_spec_list` and
//! the payload functions. Errors and odd results are fine; only a panic fails.
//!
//! Input is mostly lines of the right shape (known keys and edge numbers mixed with random
//! words), since pure noise rarely gets past the first check of a parser.

use proptest::prelude::*;
use proptest::sample::select;
use record_format::argspec::{self, ArgItem, ArgValue};
use record_format::info::{Info, INFO_MAGIC};
use record_format::{maps, sym, task};
use std::path::Path;

// --- inputs ---------------------------------------------------------------------------------

/// Text that is mostly lines of the right shape, with random words and characters mixed in.
fn lines_like(words: &'static [&'static str]) -> impl Strategy<Value = String> {
    let word = prop_oneof![
        3 => select(words).prop_map(str::to_string),
        2 => "[0-9a-fx.\"/ =:-]{0,12}",
        1 => "\\PC{0,8}",
    ];
    let line = proptest::collection::vec(word, 0..8).prop_map(|w| w.concat());
    proptest::collection::vec(line, 0..10).prop_map(|l| l.join("\n"))
}

const TASK_WORDS: &[&str] = &[
    "SESS",
    "TASK",
    "FORK",
    "DLOP",
    " timestamp=",
    " pid=",
    " tid=",
    " ppid=",
    " sid=",
    " base=",
    " exename=\"",
    " libname=\"",
    "\"",
    "1.000000001",
    "18446744073.709551615",
    "99999999999999999999.1",
];
const MAP_WORDS: &[&str] = &[
    "7f00-7fff",
    "ffffffffffffffff-0",
    " r-xp ",
    " 00000000 ",
    "00:00 ",
    "0 ",
    "/lib/x.so",
    " build-id:",
    "[stack]",
];
const SYM_WORDS: &[&str] = &[
    "# path name:",
    "# build-id:",
    "0000000000001000",
    "ffffffffffffffff",
    " 00000020",
    " T ",
    " P ",
    " ? ",
    " d ",
    "__func_end",
    "__dynsym_end",
    "\t",
    "main",
];
const INFO_WORDS: &[&str] = &[
    "exename:",
    "build_id:",
    "exit_status:",
    "cmdline:",
    "cpuinfo:",
    "meminfo:",
    "osinfo:",
    "taskinfo:",
    "usageinfo:",
    "loadinfo:",
    "argspec:",
    "record_date:",
    "elapsed_time:",
    "pattern_type:",
    "uftrace_version:",
    "utc_offset:",
    "lines=",
    "nr_tid=",
    "tids=",
    "nr_cpus=",
    "retspec:",
    "auto-args:",
    "99999999999999999999",
];

/// An info file with a plausible header (magic, version 3 or 4, random masks) and section text.
fn info_bytes() -> impl Strategy<Value = Vec<u8>> {
    (
        3u32..=4,
        any::<u64>(),
        0u64..1 << 15,
        any::<[u8; 8]>(),
        lines_like(INFO_WORDS),
    )
        .prop_map(|(version, feat, mask, rest, text)| {
            let mut b = INFO_MAGIC.to_vec();
            b.extend_from_slice(&version.to_le_bytes());
            b.extend_from_slice(&40u16.to_le_bytes());
            b.extend_from_slice(&[1, 2]);
            b.extend_from_slice(&feat.to_le_bytes());
            b.extend_from_slice(&mask.to_le_bytes());
            b.extend_from_slice(&rest);
            b.extend_from_slice(text.as_bytes());
            b
        })
}

/// An argspec item, with sizes that include the edges of `usize`.
fn spec_item() -> impl Strategy<Value = String> {
    let slot = prop_oneof![
        Just("arg1".to_string()),
        Just("fparg2".to_string()),
        Just("retval".to_string()),
        "(arg|fparg)[0-9]{0,3}",
        "[A-Za-z]{1,4}",
    ];
    let size = prop_oneof![
        3 => (0usize..130).prop_map(|n| n.to_string()),
        // Short of the sizes of `huge_struct_size_does_not_panic` (the payload is < 100 bytes);
        // extend to `usize::MAX` with its fix.
        1 => (usize::MAX - 4096..usize::MAX - 256).prop_map(|n| n.to_string()),
        1 => any::<usize>().prop_map(|n| n.to_string()),
        1 => "[0-9]{0,22}",
    ];
    let format = prop_oneof![
        Just(String::new()),
        (
            select(vec![
                "d", "i", "u", "x", "o", "p", "f", "c", "s", "S", "q", ""
            ]),
            size.clone()
        )
            .prop_map(|(c, n)| format!("/{c}{n}")),
        (size, proptest::option::of("[a-z]{0,4}")).prop_map(|(n, ty)| format!(
            "/t{n}{}",
            ty.map(|t| format!(":{t}")).unwrap_or_default()
        )),
        "/e:?[a-z]{0,4}",
    ];
    (slot, format, proptest::option::of("%[a-z0-9+]{0,6}"))
        .prop_map(|(s, f, loc)| format!("{s}{f}{}", loc.unwrap_or_default()))
}

fn spec_list() -> impl Strategy<Value = String> {
    let entry = ("[a-z]{0,4}", proptest::collection::vec(spec_item(), 0..5))
        .prop_map(|(p, items)| format!("{p}@{}", items.join(",")));
    proptest::collection::vec(entry, 0..3).prop_map(|e| e.join(";"))
}

fn garbage() -> impl Strategy<Value = String> {
    prop_oneof![
        "\\PC{0,200}",
        proptest::collection::vec(any::<u8>(), 0..200)
            .prop_map(|b| String::from_utf8_lossy(&b).into_owned()),
    ]
}

// --- the properties -------------------------------------------------------------------------

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn info_parse_never_panics(bytes in prop_oneof![info_bytes(), proptest::collection::vec(any::<u8>(), 0..300)]) {
        let _ = Info::parse(&bytes, Path::new("info"));
    }

    #[test]
    fn text_parsers_never_panic(
        task_txt in prop_oneof![lines_like(TASK_WORDS), garbage()],
        map_txt in prop_oneof![lines_like(MAP_WORDS), garbage()],
        sym_txt in prop_oneof![lines_like(SYM_WORDS), garbage()],
    ) {
        let _ = task::parse_task_txt(&task_txt, Path::new("task.txt"));
        let _ = maps::kernel_base(&maps::parse_maps(&map_txt));
        let _ = sym::parse_sym(&sym_txt);
    }

    #[test]
    fn argspec_never_panics(
        list in prop_oneof![3 => spec_list(), 1 => garbage()],
        long_size in prop_oneof![Just(4usize), Just(8usize), 0usize..17],
        payload in proptest::collection::vec(any::<u8>(), 0..96),
    ) {
        for spec in argspec::parse_spec_list(&list, long_size, |_| {}) {
            let items: Vec<&ArgItem> = spec.items.iter().collect();
            let _ = argspec::payload_len(&items, &payload);
            let _ = argspec::decode_payload(&items, &payload);
        }
    }
}

// --- reported bugs: un-ignore with the fix ----------------------------------------------------

/// Struct sizes near `usize::MAX` overflow the additions in `argspec`: `raw::align` called from
/// `ArgItem::stored_len`, and `payload_len`'s running sum and final padding. Debug builds panic
/// with "attempt to add with overflow" (raw.rs `align`); release builds wrap, so `payload_len`
/// returns a wrong length and `decode_payload` slices out of bounds (`data[..item.size]`). The
/// spec comes from the `info` file of the data being read, so damaged data can crash the reader.
#[test]
fn huge_struct_size_does_not_panic() {
    let cases = [
        (format!("f@retval/t{}", usize::MAX), 0),
        (format!("f@retval/t{}", usize::MAX - 3), 0),
        (format!("f@retval/t{}", usize::MAX - 10), 0),
        // The found case: the sum of two items overflows.
        ("f@arg1/t33,retval/t18446744073709551569".to_string(), 36),
    ];
    for (list, payload_len) in cases {
        let specs = argspec::parse_spec_list(&list, 8, |_| {});
        let items: Vec<&ArgItem> = specs[0].items.iter().collect();
        let payload = vec![0u8; payload_len];
        // Such sizes are rejected as invalid items; whatever remains must stay in bounds.
        let n = argspec::payload_len(&items, &payload);
        assert!(n.is_none_or(|n| n <= payload.len()), "{list}");
        let _ = argspec::decode_payload(&items, &payload);
    }
}

/// `encode_payload` writes a long double (`f80`) item as the 8 bytes of an f64, while
/// `decode_payload` reads 10 bytes of x87 extended precision, so the value does not survive.
#[test]
fn long_double_round_trip() {
    let specs = argspec::parse_spec_list("f@fparg1/80", 8, |_| {});
    let items: Vec<&ArgItem> = specs[0].items.iter().collect();
    for v in [ArgValue::LongDouble(1.5), ArgValue::Float(1.5)] {
        let mut buf = Vec::new();
        argspec::encode_payload(&items, &[v], &mut buf);
        assert_eq!(
            argspec::decode_payload(&items, &buf),
            Some(vec![ArgValue::LongDouble(1.5)])
        );
    }
}
