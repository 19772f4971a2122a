//! The merged call tree of `dump --flame-graph`, `--graphviz` and `--mermaid`: one node per
//! distinct call path (all tasks merged, children in first-call order), with call counts and
//! times, built from the calls of the dump walk ([`crate::walk::timed::Walk`]). Each task keeps a cursor on the node of its innermost shown call; an exit at the root
//! (a fork child returning from calls it never entered) leaves the cursor at the root, so the
//! task's later calls start new top-level paths, as uftrace's graphs do.

use crate::walk::timed::{Call, Sink};
use std::collections::HashMap;
use std::io;

/// Index of the root node.
pub const ROOT: usize = 0;

/// Up to this many children are found by scanning; more get a name index.
const SCAN: usize = 8;

#[derive(Debug, Clone)]
pub struct Node {
    pub name: String,
    pub parent: Option<usize>,
    pub children: Vec<usize>,
    /// Creation order: 0 for the root, then 1, 2, ... (mermaid node ids).
    pub id: u32,
    pub calls: u64,
    pub time: u64,
    /// Time of callees (minus what the flame graph's sampling leaves to this node).
    pub child_time: u64,
}

/// The tree, fed by the dump walk.
#[derive(Debug)]
pub struct CallTree {
    pub nodes: Vec<Node>,
    /// Per parent with many children: name -> child (few children are scanned instead).
    index: HashMap<usize, HashMap<String, usize>>,
    cursor: Vec<usize>,
    /// Flame-graph sampling period (0: none): a child's time counts in its parent's children
    /// only in whole periods.
    sample_time: u64,
}

impl CallTree {
    pub fn new(root_name: &str, tasks: usize, sample_time: u64) -> CallTree {
        CallTree {
            nodes: vec![Node {
                name: root_name.to_string(),
                parent: None,
                children: Vec::new(),
                id: 0,
                calls: 0,
                time: 0,
                child_time: 0,
            }],
            index: HashMap::new(),
            cursor: vec![ROOT; tasks],
            sample_time,
        }
    }

    pub fn enter(&mut self, task: usize, name: &str) {
        let cur = self.cursor[task];
        let children = &self.nodes[cur].children;
        let found = if children.len() <= SCAN {
            children
                .iter()
                .copied()
                .find(|&c| self.nodes[c].name == name)
        } else {
            self.index.get(&cur).and_then(|m| m.get(name)).copied()
        };
        let node = match found {
            Some(n) => n,
            None => self.add_child(cur, name),
        };
        self.nodes[node].calls += 1;
        self.cursor[task] = node;
    }

    fn add_child(&mut self, parent: usize, name: &str) -> usize {
        let n = self.nodes.len();
        self.nodes.push(Node {
            name: name.to_string(),
            parent: Some(parent),
            children: Vec::new(),
            id: n as u32,
            calls: 0,
            time: 0,
            child_time: 0,
        });
        let children = &mut self.nodes[parent].children;
        children.push(n);
        if children.len() > SCAN {
            let map = self.index.entry(parent).or_default();
            if map.is_empty() {
                for &c in &self.nodes[parent].children {
                    map.insert(self.nodes[c].name.clone(), c);
                }
            } else {
                map.insert(name.to_string(), n);
            }
        }
        n
    }

    pub fn exit(&mut self, task: usize, total: u64, child: u64) {
        let node = self.cursor[task];
        let n = &mut self.nodes[node];
        n.time = n.time.wrapping_add(total);
        n.child_time = n.child_time.wrapping_add(child);
        let parent = n.parent;
        if let (Some(p), true) = (parent, self.sample_time > 0) {
            let accounted = total / self.sample_time * self.sample_time;
            let p = &mut self.nodes[p];
            p.child_time = p.child_time.wrapping_sub(total).wrapping_add(accounted);
        }
        self.cursor[task] = parent.unwrap_or(ROOT);
    }

    /// Visits the nodes depth first (children in first-call order) with their depth; the
    /// root is visited first at depth 0.
    pub fn walk(&self, mut visit: impl FnMut(usize, usize)) {
        let mut stack = vec![(ROOT, 0usize)];
        while let Some((n, depth)) = stack.pop() {
            visit(n, depth);
            for &c in self.nodes[n].children.iter().rev() {
                stack.push((c, depth + 1));
            }
        }
    }
}

impl Sink for CallTree {
    fn call(&mut self, call: &Call<'_>) -> io::Result<()> {
        if call.exit {
            self.exit(call.task, call.total, call.child);
        } else {
            self.enter(call.task, call.name);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merges_paths_and_counts_calls() {
        let mut t = CallTree::new("prog", 2, 0);
        for task in 0..2 {
            t.enter(task, "main");
            t.enter(task, "f");
            t.exit(task, 5, 0);
            t.exit(task, 10, 5);
        }
        let mut seen = Vec::new();
        t.walk(|n, d| seen.push((t.nodes[n].name.clone(), d, t.nodes[n].calls)));
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
    fn many_children_are_indexed() {
        let mut t = CallTree::new("prog", 1, 0);
        let names: Vec<String> = (0..20).map(|i| format!("f{i}")).collect();
        for _ in 0..2 {
            for n in &names {
                t.enter(0, n);
                t.exit(0, 1, 0);
            }
        }
        assert_eq!(t.nodes.len(), 21);
        assert!(t.nodes[1..].iter().all(|n| n.calls == 2));
    }

    #[test]
    fn exit_at_the_root_stays_at_the_root() {
        let mut t = CallTree::new("prog", 1, 0);
        t.exit(0, 7, 0);
        t.enter(0, "child_work");
        assert_eq!(t.nodes[1].parent, Some(ROOT));
    }

    #[test]
    fn sampling_leaves_remainders_to_the_parent() {
        let mut t = CallTree::new("", 1, 1000);
        t.enter(0, "main");
        t.enter(0, "foo");
        t.exit(0, 4789, 0);
        t.enter(0, "bar");
        t.exit(0, 4987, 0);
        t.exit(0, 10567, 4789 + 4987);
        let main = &t.nodes[1];
        // 10567 - (4000 + 4000) = 2567: two periods stay with main.
        assert_eq!(main.time.wrapping_sub(main.child_time) / 1000, 2);
    }
}
