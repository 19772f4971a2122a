//! The call-tree builder on crafted calls.

use super::*;

#[test]
fn merges_paths_and_counts_calls() {
    let mut t = NameTree::new("prog", 2, 0);
    for task in 0..2 {
        t.enter(task, "main");
        t.enter(task, "f");
        t.exit(task, 5, 0);
        t.exit(task, 10, 5);
    }
    let mut seen = Vec::new();
    t.walk(|n, d| seen.push((t.name(n).to_string(), d, t.node(n).calls)));
    assert_eq!(
        seen,
        vec![
            ("prog".to_string(), 0, 0),
            ("main".to_string(), 1, 2),
            ("f".to_string(), 2, 2)
        ]
    );
}

#[test]
fn many_children_keep_first_call_order() {
    let mut t = NameTree::new("prog", 1, 0);
    let names: Vec<String> = (0..20).map(|i| format!("f{i}")).collect();
    for _ in 0..2 {
        for n in &names {
            t.enter(0, n);
            t.exit(0, 1, 0);
        }
    }
    assert_eq!(t.tree.nodes.len(), 21);
    assert!(t.tree.nodes[1..].iter().all(|n| n.calls == 2));
    let order: Vec<&str> = t.tree.nodes[0]
        .children
        .iter()
        .map(|&c| t.name(c))
        .collect();
    assert_eq!(order, names.iter().map(String::as_str).collect::<Vec<_>>());
}

#[test]
fn exit_at_the_root_stays_at_the_root() {
    let mut t = NameTree::new("prog", 1, 0);
    t.exit(0, 7, 0);
    t.enter(0, "child_work");
    assert_eq!(t.tree.nodes[1].parent, Some(ROOT));
}

#[test]
fn sampling_leaves_remainders_to_the_parent() {
    let mut t = NameTree::new("", 1, 1000);
    t.enter(0, "main");
    t.enter(0, "foo");
    t.exit(0, 4789, 0);
    t.enter(0, "bar");
    t.exit(0, 4987, 0);
    t.exit(0, 10567, 4789 + 4987);
    let main = &t.tree.nodes[1];
    // 10567 - (4000 + 4000) = 2567: two periods stay with main.
    assert_eq!(main.time.wrapping_sub(main.child_time) / 1000, 2);
}

#[test]
fn ids_of_one_name_are_one_node() {
    // Function ids 1 and 2 name the same function (say, resolved in two sessions).
    let same = |a: FuncId, b: FuncId| a > 0 && b > 0;
    let mut t = Tree::new(0);
    let (a, new_a) = t.enter(ROOT, 1, 0x10, same);
    let (b, new_b) = t.enter(ROOT, 2, 0x20, same);
    assert!(new_a && !new_b);
    assert_eq!(a, b);
    assert_eq!(t.nodes[a as usize].calls, 2);
    assert_eq!(t.exit(a, 10, 4, true), Some(ROOT));
    let n = &t.nodes[a as usize];
    assert_eq!((n.total_min, n.self_max), (10, 6));
}
