//! The call tree `utrace tui` shows: the graphs of the engine's call-tree builder
//! ([`CallGraph`]) flattened into one tree with folding, or the merged calls of one function.

use record_format::timeval::push_duration;
use replay::output::graph::{CallGraph, GraphField};
/// One node of the shown tree.
#[derive(Debug, Clone)]
pub struct Node {
    pub name: String,
    pub calls: u64,
    pub total: u64,
    pub self_time: u64,
    /// Address of the first call (`-f addr`).
    pub addr: u64,
    pub parent: Option<usize>,
    pub children: Vec<usize>,
    pub folded: bool,
    /// The session graph the node belongs to.
    pub session: usize,
}

/// A tree of call paths: one root per session graph (full graph), or the merged calls of one
/// function (`g`).
#[derive(Debug, Clone, Default)]
pub struct Tree {
    pub nodes: Vec<Node>,
    pub roots: Vec<usize>,
}

impl Tree {
    /// The full graph of every session.
    pub fn from_graphs(graphs: &[CallGraph]) -> Tree {
        let mut t = Tree::default();
        for (s, g) in graphs.iter().enumerate() {
            let base = t.nodes.len();
            for n in &g.nodes {
                t.nodes.push(Node {
                    name: n.name.clone(),
                    calls: n.calls,
                    total: n.total,
                    self_time: n.self_time,
                    // The program (the root) has none in uftrace's tui.
                    addr: if n.parent.is_some() { n.addr } else { 0 },
                    parent: n.parent.map(|p| base + p as usize),
                    children: n.children.iter().map(|&c| base + c as usize).collect(),
                    folded: false,
                    session: s,
                });
            }
            if !g.nodes.is_empty() {
                t.roots.push(base);
            }
        }
        t
    }

    /// Every call path of `name` in `full` merged into one tree rooted at `name` (callees with
    /// the same name under the same merged parent add up).
    pub fn of_function(full: &Tree, name: &str) -> Tree {
        let mut t = Tree::default();
        let starts: Vec<usize> = (0..full.nodes.len())
            .filter(|&i| full.nodes[i].name == name && !full.has_ancestor_named(i, name))
            .collect();
        if starts.is_empty() {
            return t;
        }
        t.nodes.push(Node {
            name: name.to_string(),
            calls: 0,
            total: 0,
            self_time: 0,
            addr: full.nodes[starts[0]].addr,
            parent: None,
            children: Vec::new(),
            folded: false,
            session: full.nodes[starts[0]].session,
        });
        t.roots.push(0);
        for s in starts {
            t.merge_into(0, full, s);
        }
        t
    }

    pub(super) fn has_ancestor_named(&self, mut i: usize, name: &str) -> bool {
        while let Some(p) = self.nodes[i].parent {
            if self.nodes[p].name == name {
                return true;
            }
            i = p;
        }
        false
    }

    /// Adds `from`'s counts (a node of `full`) to `into`, and its children below it.
    pub(super) fn merge_into(&mut self, into: usize, full: &Tree, from: usize) {
        let f = &full.nodes[from];
        let n = &mut self.nodes[into];
        n.calls += f.calls;
        n.total += f.total;
        n.self_time += f.self_time;
        for &c in &f.children {
            let name = &full.nodes[c].name;
            let existing = self.nodes[into]
                .children
                .iter()
                .copied()
                .find(|&k| self.nodes[k].name == *name);
            let child = match existing {
                Some(k) => k,
                None => {
                    self.nodes.push(Node {
                        name: name.clone(),
                        calls: 0,
                        total: 0,
                        self_time: 0,
                        addr: full.nodes[c].addr,
                        parent: Some(into),
                        children: Vec::new(),
                        folded: false,
                        session: full.nodes[c].session,
                    });
                    let k = self.nodes.len() - 1;
                    self.nodes[into].children.push(k);
                    k
                }
            };
            self.merge_into(child, full, c);
        }
    }

    pub(super) fn depth(&self, mut i: usize) -> usize {
        let mut d = 0;
        while let Some(p) = self.nodes[i].parent {
            d += 1;
            i = p;
        }
        d
    }

    /// Whether `i` has a sibling after it.
    pub(super) fn has_next(&self, i: usize) -> bool {
        let sibs = match self.nodes[i].parent {
            Some(p) => &self.nodes[p].children,
            None => &self.roots,
        };
        sibs.last().is_some_and(|&l| l != i)
    }

    /// The nodes shown, in order: every node whose ancestors are all unfolded.
    pub fn visible(&self) -> Vec<usize> {
        let mut out = Vec::new();
        let mut stack: Vec<usize> = self.roots.iter().rev().copied().collect();
        while let Some(i) = stack.pop() {
            out.push(i);
            if !self.nodes[i].folded {
                stack.extend(self.nodes[i].children.iter().rev());
            }
        }
        out
    }

    /// The header of the graph lines with the columns `fields` (`-f`; none: a title).
    pub fn header(fields: &[GraphField]) -> String {
        if fields.is_empty() {
            return "uftrace graph TUI".to_string();
        }
        let mut s = String::new();
        for f in fields {
            s.push_str(match f {
                GraphField::Addr => "     ADDRESS  ",
                GraphField::SelfTime => "   SELF TIME",
                _ => "  TOTAL TIME",
            });
        }
        s.push_str(" : FUNCTION");
        s
    }

    /// The graph line of node `i` with the columns `fields`: `   10.121 ms :  └─(1) main`.
    pub fn line(&self, i: usize, fields: &[GraphField]) -> String {
        let n = &self.nodes[i];
        let mut s = String::new();
        for f in fields {
            s.push_str("  ");
            match f {
                GraphField::Addr => s.push_str(&format!("{:>12x}", n.addr)),
                GraphField::SelfTime => push_duration(&mut s, n.self_time, false),
                _ => push_duration(&mut s, n.total, false),
            }
        }
        s.push_str(if fields.is_empty() { " " } else { " : " });
        let depth = self.depth(i);
        if depth > 0 {
            // One column pair per ancestor below the root: a bar while it has siblings after.
            let mut chain = Vec::new();
            let mut a = n.parent;
            while let Some(p) = a {
                if self.nodes[p].parent.is_some() {
                    chain.push(self.has_next(p));
                }
                a = self.nodes[p].parent;
            }
            s.push(' ');
            for more in chain.iter().rev() {
                s.push_str(if *more { "│ " } else { "  " });
            }
            s.push_str(if self.has_next(i) { "├─" } else { "└─" });
        }
        if n.folded && !n.children.is_empty() {
            s.push('▶');
        }
        s.push_str(&format!("({}) {}", n.calls, n.name));
        s
    }

    /// Unfolds the ancestors of `i` so that it is shown.
    pub(super) fn reveal(&mut self, i: usize) {
        let mut a = self.nodes[i].parent;
        while let Some(p) = a {
            self.nodes[p].folded = false;
            a = self.nodes[p].parent;
        }
    }

    pub(super) fn set_folded_below(&mut self, i: usize, folded: bool) {
        let mut stack = self.nodes[i].children.clone();
        while let Some(c) = stack.pop() {
            self.nodes[c].folded = folded && !self.nodes[c].children.is_empty();
            stack.extend(self.nodes[c].children.iter().copied());
        }
    }
}
