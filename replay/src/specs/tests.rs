//! Unit tests of [`super::Specs`]: recorded and automatic specs bound to functions, and the
//! replay-time selection among recorded items.

use super::*;
use record_format::argspec::ArgFormat;
use record_format::info::{ArgSpecInfo, Info, InfoHeader};
use record_format::maps::MapEntry;
use record_format::task::TaskLine;
use record_format::{RawRecord, RecordKind, TraceWriter};

const DBG: &str = "# path name: /x/prog\n# build-id: abcd1234\n\
                   E: enum color {RED,GREEN=5,BLUE}\n\
                   F: 100 paint\nL: 5 st.c\nA: @arg1/e:color\nR: @retval\n\
                   F: 200 sum\nA: @arg1,arg2\nR: @retval\n\
                   F: 300 main\nA: @arg1,arg2/p\n\
                   F: 400 ctor\nA: @arg1/p\nF: 400 ctor2\nA: @arg1/p\n";

/// A data directory of `/x/prog` mapped at 0x10000 with `prog.dbg`.
fn trace(argspec: &str, retspec: &str, auto_args: bool) -> (tempfile::TempDir, TraceDir) {
    let tmp = tempfile::tempdir().expect("tempdir");
    let path = tmp.path().join("t.data");
    let mut w = TraceWriter::create(&path).expect("create");
    let sess = TaskLine::Sess {
        time: 1,
        pid: 7,
        sid: "s1".into(),
        exename: "/x/prog".into(),
    };
    w.task_line(&sess).expect("sess");
    w.task_line(&TaskLine::Task {
        time: 1,
        tid: 7,
        pid: 7,
    })
    .expect("task");
    let map = MapEntry {
        start: 0x10000,
        end: 0x20000,
        perms: "r-xp".into(),
        path: "/x/prog".into(),
        build_id: Some("abcd1234".into()),
    };
    w.session_map("s1", &[map]).expect("map");
    std::fs::write(path.join("prog.dbg"), DBG).expect("dbg");
    let rec = RawRecord {
        time: 2,
        kind: RecordKind::Entry,
        more: false,
        depth: 0,
        addr: 0x10300,
    };
    w.func_record(7, rec, &[], &[]).expect("record");
    let info = Info {
        header: InfoHeader {
            feat_mask: InfoHeader::default().feat_mask | feat::AUTO_ARGS | feat::DEBUG_INFO,
            ..InfoHeader::default()
        },
        tids: vec![7],
        argspec: Some(ArgSpecInfo {
            argspec: Some(argspec.into()).filter(|s: &String| !s.is_empty()),
            retspec: Some(retspec.into()).filter(|s: &String| !s.is_empty()),
            argauto: "malloc@arg1/u;_Znwm@arg1/u".into(),
            retauto: "malloc@retval/p".into(),
            enumauto: "enum uft_prot {NONE, READ, WRITE, EXEC = 4}".into(),
            auto_args,
        }),
        ..Info::default()
    };
    w.finish(&info).expect("finish");
    let dir = TraceDir::open(&path).expect("open");
    (tmp, dir)
}

fn func(name: &str, addr: u64) -> FuncInfo {
    FuncInfo {
        name: name.into(),
        module: "prog".into(),
        addr,
        size: 16,
        is_plt: false,
        in_exe: true,
        known: true,
    }
}

fn texts(s: &FuncSpec) -> (Vec<&str>, Option<&str>) {
    (
        s.args.iter().map(|a| a.text.as_str()).collect(),
        s.ret.as_ref().map(|r| r.text.as_str()),
    )
}

#[test]
fn auto_args_take_the_dbg_spec_of_every_function() {
    let (_tmp, dir) = trace("", "", true);
    let mut specs = Specs::new(&dir);
    let paint = specs.get(0, &func("paint", 0x10100)).clone();
    assert_eq!(texts(&paint), (vec!["arg1/e:color"], Some("retval")));
    assert_eq!(paint.args[0].format, ArgFormat::Enum("color".into()));
    assert_eq!(paint.enums.get("color").map(Vec::len), Some(3));
    assert_eq!(paint.enums.get("uft_prot").map(Vec::len), Some(4));
    assert!(paint.enums.has_module());
    // No dbg block at this address: the built-in list by name (demangled too).
    let malloc = specs.get(1, &func("malloc", 0x10050)).clone();
    assert_eq!(texts(&malloc), (vec!["arg1/u"], Some("retval/p")));
    let new = specs.get(2, &func("operator new", 0x10060)).clone();
    assert_eq!(texts(&new), (vec!["arg1/u"], None));
    // Two blocks at one address: no usable spec.
    assert!(specs.get(3, &func("ctor", 0x10400)).args.is_empty());
    // Not in any map: no module.
    let mut lost = func("paint", 0x100);
    lost.module = "[unknown]".into();
    lost.known = false;
    let lost = specs.get(4, &lost);
    assert!(lost.args.is_empty() && !lost.enums.has_module());
    assert!(specs.binds_any(&[&func("paint", 0x10100)]));
}

#[test]
fn explicit_specs_override_auto_ones() {
    let (_tmp, dir) = trace("sum@arg2/x;s.m@arg1/c,arg2/c", "paint@retval/x", true);
    let mut specs = Specs::new(&dir);
    // Explicit arguments replace the automatic ones; the return value stays automatic.
    let sum = specs.get(0, &func("sum", 0x10200)).clone();
    assert_eq!(texts(&sum), (vec!["arg2/x", "arg1/c"], Some("retval")));
    let paint = specs.get(1, &func("paint", 0x10100)).clone();
    assert_eq!(texts(&paint), (vec!["arg1/e:color"], Some("retval/x")));
}

#[test]
fn exact_patterns_win_over_regex_ones() {
    let (_tmp, dir) = trace("sum@arg1/x;s.m@arg1/c,arg2/u;sum@arg2/i32", "", false);
    let mut specs = Specs::new(&dir);
    let sum = specs.get(0, &func("sum", 0x10200)).clone();
    assert_eq!(texts(&sum), (vec!["arg1/x", "arg2/i32"], None));
}

#[test]
fn entries_without_items_ask_for_auto_specs() {
    let (_tmp, dir) = trace("main;paint@arg1/q,arg2", "main;malloc", false);
    let mut specs = Specs::new(&dir);
    assert_eq!(specs.notices, ["unsupported argument type: arg1/q"]);
    let main = specs.get(0, &func("main", 0x10300)).clone();
    assert_eq!(texts(&main), (vec!["arg1", "arg2/p"], None));
    let malloc = specs.get(1, &func("malloc", 0x10050)).clone();
    assert_eq!(texts(&malloc), (vec![], Some("retval/p")));
    // An entry with a bad item is dropped whole; without auto-args nothing else applies.
    assert!(specs.get(2, &func("paint", 0x10100)).args.is_empty());
    assert!(specs.get(3, &func("sum", 0x10200)).args.is_empty());
}

#[test]
fn replay_selection_maps_onto_recorded_items() {
    let (_tmp, dir) = trace("sum@arg1,arg2/i32;paint@arg1/s", "sum@retval", false);
    let mut specs = Specs::new(&dir);
    let sel = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    specs.select(
        &sel(&["sum@arg2/x16,arg1/c,arg3", "paint@arg1/x"]),
        &sel(&["s.m@retval/u"]),
        MatchType::Regex,
    );
    assert!(specs.has_selection());
    let sum = specs.get(0, &func("sum", 0x10200)).clone();
    // Recorded items stay (they lay out the payload); the view picks and reformats.
    assert_eq!(texts(&sum), (vec!["arg1", "arg2/i32"], Some("retval")));
    let shown: Vec<(usize, &str, usize)> = sum
        .shown_args
        .as_ref()
        .unwrap()
        .iter()
        .map(|s| (s.index, s.item.text.as_str(), s.item.size))
        .collect();
    assert_eq!(shown, [(1, "arg2/x16", 2), (0, "arg1/c", 1)]);
    let ret = sum.shown_ret.clone().unwrap().unwrap();
    assert_eq!((ret.index, ret.item.format), (0, ArgFormat::Unsigned));
    // A string cannot show as an integer; unnamed functions show what they recorded.
    let paint = specs.get(1, &func("paint", 0x10100)).clone();
    assert_eq!(paint.shown_args, Some(vec![]));
    assert!(specs.get(2, &func("main", 0x10300)).shown_args.is_none());
    let hints = specs.selection_hints(&[&func("sum", 0x10200), &func("paint", 0x10100)]);
    assert_eq!(
        hints,
        [
            "arg3 of sum was not recorded: record with -A sum@arg3 to see it",
            "arg1 of paint was recorded as arg1/s, which cannot be shown as arg1/x: \
             record with -A paint@arg1/x to see it so",
            // `s.m@retval` is satisfied by sum, which recorded its return value.
        ]
    );
}
