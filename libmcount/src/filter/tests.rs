//! Unit tests of the record-time filters: decisions, limits, live (agent) tables.
use super::*;
use record_format::pattern::MatchType;
use record_format::trigger::parse_trigger;

/// Filters over `(start, end, trigger)` ranges (`trigger` as `-T` actions, "" for none:
/// then the range is a `-Z` small function).
fn filters(ranges: &[(u64, u64, &str)], depth: u32, threshold: u64) -> Filters {
    let mut f = Filters {
        depth,
        threshold,
        size: 2,
        ..Filters::default()
    };
    for &(start, end, actions) in ranges {
        let a = parse_trigger(&format!("x@{actions}"), &mut Vec::new()).actions;
        f.has_in |= a.filter;
        f.has_caller |= a.caller;
        f.has_dump |= a.dump;
        let rule = if actions.is_empty() {
            NO_RULE
        } else {
            f.rules.push(a);
            (f.rules.len() - 1) as u32
        };
        // A range without actions is a 1-byte function (small under any -Z).
        f.ranges.push(Range {
            start,
            end,
            rule,
            size: if actions.is_empty() { 1 } else { u32::MAX },
        });
    }
    f
}

fn hook(s: &FilterState, f: &Filters, addr: u64) -> u16 {
    match s.decide(f, addr) {
        Decision::Hook(fl) => fl,
        Decision::Skip => panic!("{addr} skipped"),
    }
}

#[test]
fn lookup_by_range() {
    let f = filters(&[(10, 20, "filter"), (30, 40, "notrace")], 99, 0);
    assert_eq!(f.lookup(9), (None, u32::MAX));
    assert!(f.lookup(10).0.unwrap().filter);
    assert!(f.lookup(19).0.unwrap().filter);
    assert_eq!(f.lookup(20), (None, u32::MAX));
    assert!(f.lookup(35).0.unwrap().notrace);
}

#[test]
fn filter_in_out_and_depth() {
    // main(0) -> b(10: -F) -> c(50) -> d(60) -> e(70), and x(30: -N) under b.
    let f = filters(&[(10, 20, "filter"), (30, 40, "notrace")], 2, 0);
    let mut s = FilterState::new(&f);
    assert_eq!(s.decide(&f, 0), Decision::Skip); // main: outside -F
    let fb = hook(&s, &f, 10);
    assert_eq!(fb, flags::IN | flags::LIMITS);
    let (depth_b, saved_b) = s.push(&f, 10, fb);
    assert_eq!(depth_b, 0);
    let fc = hook(&s, &f, 50);
    let (depth_c, saved_c) = s.push(&f, 50, fc);
    assert_eq!(depth_c, 1);
    assert_eq!(s.decide(&f, 60), Decision::Skip); // -D 2 from b
    s.pop(fc, &saved_c);
    let fx = hook(&s, &f, 30);
    assert_eq!(fx, flags::OUT | flags::NORECORD);
    let (_, saved_x) = s.push(&f, 30, fx);
    assert_eq!(s.decide(&f, 50), Decision::Skip); // under -N
    s.pop(fx, &saved_x);
    s.pop(fb, &saved_b);
    assert_eq!((s.in_count, s.out_count, s.recorded, s.base), (0, 0, 0, 0));
    assert_eq!(s.depth, 2);
}

#[test]
fn depth_and_time_triggers_restore_the_limits() {
    // b(10) has depth=1 and time=5: it is recorded, pending; its callees are not.
    let f = filters(&[(10, 20, "depth=1,time=5ns")], u32::MAX, 0);
    let mut s = FilterState::new(&f);
    assert_eq!(hook(&s, &f, 0), 0); // main: plain
    let (_, saved_main) = s.push(&f, 0, 0);
    let fb = hook(&s, &f, 10);
    assert_eq!(fb, flags::LIMITS | flags::PENDING);
    let (depth_b, saved_b) = s.push(&f, 10, fb);
    assert_eq!((depth_b, s.depth, s.time, s.base), (1, 1, 5, 1));
    assert_eq!(s.decide(&f, 50), Decision::Skip);
    s.pop(fb, &saved_b);
    assert_eq!((s.depth, s.time, s.base), (u32::MAX, 0, 0));
    s.pop(0, &saved_main);
}

#[test]
fn hide_size_and_caller() {
    // h(10) hidden, s(30) smaller than -Z, c(50) a -C function.
    let f = filters(&[(10, 20, "hide"), (30, 40, ""), (50, 60, "caller")], 9, 0);
    let s = FilterState::new(&f);
    assert_eq!(s.decide(&f, 10), Decision::Skip);
    assert_eq!(s.decide(&f, 30), Decision::Skip);
    assert_eq!(hook(&s, &f, 0), flags::PENDING); // waits for a -C function
    assert_eq!(hook(&s, &f, 50), flags::CALLER);
}

/// `-Z 30 -T b@size=10`: b (20 bytes) and its 20-byte callee are recorded, the same
/// callee elsewhere is not; the limit comes back when b pops.
#[test]
fn size_trigger_sets_the_limit_below_its_function() {
    let mut f = filters(&[(10, 20, "size=10")], u32::MAX, 0);
    f.size = 30;
    f.ranges[0].size = 20;
    f.ranges.push(Range {
        start: 40,
        end: 60,
        rule: NO_RULE,
        size: 20,
    });
    let mut s = FilterState::new(&f);
    assert_eq!(s.decide(&f, 40), Decision::Skip);
    let fb = hook(&s, &f, 10);
    assert_eq!(fb, flags::LIMITS);
    let (_, saved) = s.push(&f, 10, fb);
    assert_eq!(hook(&s, &f, 40), 0);
    s.pop(fb, &saved);
    assert_eq!(s.size, 30);
    assert_eq!(s.decide(&f, 40), Decision::Skip);
}

/// Live filters (`-g`): threads keep `INHERIT` and follow a replaced table's depth and
/// threshold from their next decision; a `depth=` frame puts `INHERIT` back when it pops.
#[test]
fn live_limits_follow_replaced_filters() {
    let mut f = filters(&[(10, 20, "depth=1")], 1, 0);
    f.live = true;
    let mut s = FilterState::new(&f);
    assert_eq!((s.depth, s.time), (INHERIT, INHERIT_TIME));
    let fm = hook(&s, &f, 0);
    assert_eq!(fm, 0);
    let (_, saved_main) = s.push(&f, 0, fm);
    assert_eq!(s.decide(&f, 50), Decision::Skip); // -D 1
    let mut g = f.clone();
    g.depth = 5;
    g.threshold = 100;
    assert_eq!(hook(&s, &g, 50), flags::PENDING); // deeper now, and -t
    let fb = hook(&s, &g, 10);
    assert_eq!(fb, flags::LIMITS | flags::PENDING);
    let (_, saved_b) = s.push(&g, 10, fb);
    assert_eq!((s.depth, s.time_in_force(&g)), (1, 100));
    assert_eq!(s.decide(&g, 50), Decision::Skip); // b@depth=1
    s.pop(fb, &saved_b);
    assert_eq!(s.depth, INHERIT);
    s.pop(fm, &saved_main);
    assert_eq!((s.recorded, s.base), (0, 0));
}

proptest::proptest! {
    /// Whatever items an agent client sends, building the filters does not panic
    /// (libmcount aborts on panic).
    #[test]
    fn any_items_build(items in proptest::collection::vec(
        "[a-z.*()\\[\\]+?{}@=,:;_0-9^$|\\\\-]{0,24}", 0..6)
    ) {
        let items: Vec<(MatchType, String)> = items
            .into_iter()
            .flat_map(|i| [(MatchType::Regex, i.clone()), (MatchType::Glob, i)])
            .collect();
        let set = Settings { live: true, ..Settings::default() };
        let f = build_items(&[], &[(0x1000, "puts")], &items, &set);
        proptest::prop_assert!(f.live);
    }
}

#[test]
fn nasty_items_build() {
    let items = [
        "x@time=99999999999999999999999s",
        "x@depth=99999999999999",
        "x@size=-1,read=nope,color=zz",
        "(((@filter",
        "@",
        "@@@",
        "a@clear=+",
        "\\@notrace",
    ];
    let items: Vec<(MatchType, String)> = items
        .iter()
        .map(|i| (MatchType::Regex, i.to_string()))
        .collect();
    let set = Settings::default();
    build_items(&[], &[(0x1000, "x")], &items, &set);
}

#[test]
fn switches_and_threshold() {
    let f = filters(
        &[(10, 20, "trace_off"), (30, 40, "trace_on,trace")],
        9,
        1000,
    );
    let s = FilterState::new(&f);
    assert_eq!(hook(&s, &f, 5), flags::PENDING);
    assert_eq!(hook(&s, &f, 10), flags::TRACE_OFF | flags::PENDING);
    assert_eq!(hook(&s, &f, 30), flags::TRACE_ON);
}

#[test]
fn switches_only_inside_the_filters() {
    // b(10: -F), t(30: trace_off), n(50: -N): t switches only below b and not below n.
    let f = filters(
        &[
            (10, 20, "filter"),
            (30, 40, "trace_off"),
            (50, 60, "notrace"),
        ],
        9,
        0,
    );
    let mut s = FilterState::new(&f);
    assert_eq!(s.decide(&f, 30), Decision::Skip);
    let b = hook(&s, &f, 10);
    s.push(&f, 10, b);
    assert_eq!(hook(&s, &f, 30), flags::TRACE_OFF);
    let n = hook(&s, &f, 50);
    s.push(&f, 50, n);
    assert_eq!(s.decide(&f, 30), Decision::Skip);
}

#[test]
fn specs_and_symbols_of_this_test_binary() {
    let specs = parse_specs("main@filter;fo.*@libc,notrace;x@", MatchType::Regex);
    assert_eq!(specs.len(), 3);
    assert!(specs[1].actions.notrace);
    assert_eq!(specs[1].module.as_deref(), Some("libc"));
    assert!(specs[2].module.is_none());
    let exe = std::fs::read_link("/proc/self/exe").unwrap();
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    let start = maps
        .lines()
        .find(|l| l.ends_with(exe.to_str().unwrap()))
        .and_then(|l| u64::from_str_radix(l.split('-').next()?, 16).ok())
        .unwrap();
    let m = MapEntry {
        start,
        end: u64::MAX,
        perms: "r-xp".into(),
        path: exe.to_string_lossy().into_owned(),
        build_id: None,
    };
    let funcs = module_functions(&m);
    let me = specs_and_symbols_of_this_test_binary as *const () as u64;
    assert!(
        funcs.iter().any(|&(a, s, _)| a <= me && me < a + s),
        "this function's address {me:#x} not found among {} symbols",
        funcs.len()
    );
}
