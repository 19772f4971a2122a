//! The tui's state driven by keys, apart from any terminal: the tree's lines and folding,
//! search, the report and a function's graph, and the graph's columns as uftrace's tui shows
//! them.

use super::*;
use replay::output::graph::GraphNode;

fn node(name: &str, total: u64, parent: Option<u32>, children: &[u32]) -> GraphNode {
    GraphNode {
        name: name.into(),
        calls: 1,
        total,
        self_time: total / 2,
        addr: 0x1000 + total,
        parent,
        children: children.to_vec(),
    }
}

/// prog -> main -> {a -> {b}, c -> {b}}
fn app() -> App {
    let g = CallGraph {
        sid: "abc".into(),
        exe: "/x/prog".into(),
        nodes: vec![
            node("prog", 10_000, None, &[1]),
            node("main", 10_000, Some(0), &[2, 4]),
            node("a", 6_000, Some(1), &[3]),
            node("b", 1_000, Some(2), &[]),
            node("c", 3_000, Some(1), &[5]),
            node("b", 2_000, Some(4), &[]),
        ],
    };
    let rows = vec![Row {
        name: "b".into(),
        total: 3_000,
        self_time: 3_000,
        calls: 2,
    }];
    App::new(&[g], rows, "# info\nline".into(), "d".into())
}

fn lines(a: &App) -> Vec<String> {
    a.visible
        .iter()
        .map(|&i| a.tree.line(i, &a.fields))
        .collect()
}

#[test]
fn tree_lines_and_folding() {
    let mut a = app();
    assert_eq!(
        lines(&a),
        [
            "   10.000 us : (1) prog",
            "   10.000 us :  └─(1) main",
            "    6.000 us :    ├─(1) a",
            "    1.000 us :    │ └─(1) b",
            "    3.000 us :    └─(1) c",
            "    2.000 us :      └─(1) b",
        ]
    );
    a.key(Key::Down);
    a.key(Key::Down);
    a.key(Key::Enter);
    assert_eq!(lines(&a)[2], "    6.000 us :    ├─▶(1) a");
    assert_eq!(a.visible.len(), 5);
    a.key(Key::Char('u'));
    a.key(Key::Char('C'));
    assert_eq!(a.visible.len(), 4);
    a.key(Key::Char('E'));
    assert_eq!(a.visible.len(), 6);
    a.key(Key::Char('l'));
    assert_eq!(a.tree.nodes[a.current().unwrap()].name, "a");
    a.key(Key::Char('n'));
    assert_eq!(a.tree.nodes[a.current().unwrap()].name, "c");
}

#[test]
fn search_report_and_function_graph() {
    let mut a = app();
    a.key(Key::Down);
    a.key(Key::Enter); // fold main
    for k in [Key::Char('/'), Key::Char('b'), Key::Enter] {
        a.key(k);
    }
    assert_eq!(a.current(), Some(3));
    a.key(Key::Char('N'));
    assert_eq!(a.current(), Some(5));
    a.key(Key::Char('P'));
    assert_eq!(a.current(), Some(3));
    a.key(Key::Char('g'));
    assert_eq!(lines(&a), ["    3.000 us : (2) b"]);
    assert!(a.status().0.starts_with("utrace graph: b"));
    a.key(Key::Char('q'));
    assert!(a.graph_of.is_none());
    a.key(Key::Char('R'));
    assert_eq!(a.mode, Mode::Report);
    assert_eq!(
        a.report_header(),
        " *TOTAL TIME   SELF TIME        CALLS  FUNCTION"
    );
    a.key(Key::Enter);
    assert_eq!(a.mode, Mode::Graph);
    assert_eq!(a.current(), Some(3));
    assert!(!a.key(Key::Char('q')), "q in the full graph quits");
}

#[test]
fn graph_columns_as_uftrace_tui() {
    let a = app().with_fields(vec![
        GraphField::Total,
        GraphField::SelfTime,
        GraphField::Addr,
    ]);
    assert_eq!(
        Tree::header(&a.fields),
        "  TOTAL TIME   SELF TIME     ADDRESS   : FUNCTION"
    );
    assert_eq!(
        lines(&a)[..2],
        [
            "   10.000 us    5.000 us             0 : (1) prog",
            "   10.000 us    5.000 us          3710 :  └─(1) main",
        ]
    );
    let a = a.with_fields(Vec::new());
    assert_eq!(Tree::header(&a.fields), "uftrace graph TUI");
    assert_eq!(lines(&a)[..2], [" (1) prog", "  └─(1) main"]);
}
