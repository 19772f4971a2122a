//! The one call-tree builder: a tree of calls merged by function (one node per distinct call
//! path, children in first-call order) with call counts and times. `graph` and the tui
//! build one [`Tree`] per session from the analysis walk (see `output/graph/builder.rs`,
//! which adds the FUNC subtrees, backtraces and forks on top); `dump --flame-graph`,
//! `--graphviz` and `--mermaid` build one [`NameTree`] of all tasks from the dump walk.
//!
//! A node is keyed by a function id; two ids of the same name (the same function in two
//! modules, or resolved in two sessions) are one node, as uftrace merges by name. Entering
//! a call moves a cursor to the child (created on first call, with the child entered last
//! from there tried first: loops and recursion); its exit adds the call's times and moves
//! the cursor back to the parent.

use crate::symbols::FuncId;
use crate::walk::timed::{Call, Sink};
use std::collections::HashMap;
use std::io;

/// Index of the root node.
pub const ROOT: u32 = 0;

/// One distinct call path. The fields a call touches come first, in one cache line (the
/// walk enters and leaves nodes once per record).
#[derive(Debug, Clone)]
#[repr(C, align(64))]
pub struct Node {
    /// The function (for a [`NameTree`], the id of its name).
    pub func: FuncId,
    /// The child entered last (0: none; the root is never a child).
    pub last_child: u32,
    pub calls: u64,
    pub time: u64,
    /// Time of callees (minus what the flame graph's sampling leaves to this node).
    pub child_time: u64,
    /// Address of the first call's entry (the root: of the call that started the tree).
    pub addr: u64,
    pub parent: Option<u32>,
    pub total_min: u64,
    pub total_max: u64,
    pub self_min: u64,
    pub self_max: u64,
    pub children: Vec<u32>,
}

impl Node {
    pub fn new(func: FuncId, addr: u64, parent: Option<u32>) -> Node {
        Node {
            func,
            addr,
            calls: 0,
            time: 0,
            child_time: 0,
            total_min: u64::MAX,
            total_max: 0,
            self_min: u64::MAX,
            self_max: 0,
            parent,
            children: Vec::new(),
            last_child: 0,
        }
    }
}

/// A call tree; node 0 is the root, the others are numbered in creation order.
#[derive(Debug, Clone)]
pub struct Tree {
    pub nodes: Vec<Node>,
}

impl Tree {
    pub fn new(root: FuncId) -> Tree {
        Tree {
            nodes: vec![Node::new(root, 0, None)],
        }
    }

    /// The child of node `cur` for a call of `func` at `addr` (created on first call), with
    /// its call count raised; whether it was created. `same`: whether two function ids have
    /// the same name (children are matched by name).
    #[inline(always)]
    pub fn enter(
        &mut self,
        cur: u32,
        func: FuncId,
        addr: u64,
        same: impl Fn(FuncId, FuncId) -> bool,
    ) -> (u32, bool) {
        // The child entered last from this node is the usual one (loops, recursion).
        if let Some(id) = self.enter_again(cur, func) {
            return (id, false);
        }
        self.enter_new(cur, func, addr, same)
    }

    /// [`Tree::enter`]'s common case alone: when the child entered last from `cur` is a call
    /// of `func`, its call count raised and its id; `None` otherwise (nothing changed).
    #[inline(always)]
    pub fn enter_again(&mut self, cur: u32, func: FuncId) -> Option<u32> {
        let last = self.nodes[cur as usize].last_child;
        if last == 0 {
            return None;
        }
        let n = self
            .nodes
            .get_mut(last as usize)
            .filter(|n| n.func == func)?;
        n.calls += 1;
        Some(last)
    }

    /// [`Tree::enter`] when the last child entered is not the one.
    #[inline(never)]
    fn enter_new(
        &mut self,
        cur: u32,
        func: FuncId,
        addr: u64,
        same: impl Fn(FuncId, FuncId) -> bool,
    ) -> (u32, bool) {
        let nodes = &self.nodes;
        let children = &nodes[cur as usize].children;
        // The function id is a shortcut for the same name.
        let found = children
            .iter()
            .copied()
            .find(|&k| nodes[k as usize].func == func)
            .or_else(|| {
                children
                    .iter()
                    .copied()
                    .find(|&k| same(nodes[k as usize].func, func))
            });
        let (id, created) = match found {
            Some(k) => (k, false),
            None => {
                self.nodes.push(Node::new(func, addr, Some(cur)));
                let id = (self.nodes.len() - 1) as u32;
                self.nodes[cur as usize].children.push(id);
                (id, true)
            }
        };
        self.nodes[cur as usize].last_child = id;
        self.nodes[id as usize].calls += 1;
        (id, created)
    }

    /// Adds a finished call's times to node `n` (and its minimum and maximum times with
    /// `minmax`); returns the parent.
    #[inline(always)]
    pub fn exit(&mut self, n: u32, total: u64, child: u64, minmax: bool) -> Option<u32> {
        let node = &mut self.nodes[n as usize];
        node.time = node.time.wrapping_add(total);
        node.child_time = node.child_time.wrapping_add(child);
        if minmax {
            let selft = total.saturating_sub(child);
            node.total_min = node.total_min.min(total);
            node.total_max = node.total_max.max(total);
            node.self_min = node.self_min.min(selft);
            node.self_max = node.self_max.max(selft);
        }
        node.parent
    }

    /// Visits node `root` and the nodes under it (depth first, children in first-call order).
    pub fn walk_from(&self, root: u32, mut visit: impl FnMut(u32)) {
        let mut stack = vec![root];
        while let Some(n) = stack.pop() {
            visit(n);
            stack.extend(self.nodes[n as usize].children.iter().rev());
        }
    }

    /// Visits the nodes depth first (children in first-call order) with their depth; the
    /// root is visited first at depth 0.
    pub fn walk(&self, mut visit: impl FnMut(u32, usize)) {
        let mut stack = vec![(ROOT, 0usize)];
        while let Some((n, depth)) = stack.pop() {
            visit(n, depth);
            for &c in self.nodes[n as usize].children.iter().rev() {
                stack.push((c, depth + 1));
            }
        }
    }
}

/// The merged call tree of the dump formats: all tasks in one [`Tree`], nodes keyed by
/// name, a cursor per task on the node of its innermost shown call. An exit at the root (a
/// fork child returning from calls it never entered) leaves the cursor at the root, so the
/// task's later calls start new top-level paths, as uftrace's graphs do.
#[derive(Debug)]
pub struct NameTree {
    pub tree: Tree,
    /// The name of each key, and the key of each name.
    names: Vec<String>,
    keys: HashMap<String, FuncId>,
    /// The key of each function id seen (`FuncId::MAX`: not yet).
    by_func: Vec<FuncId>,
    cursor: Vec<u32>,
    /// Flame-graph sampling period (0: none): a child's time counts in its parent's children
    /// only in whole periods.
    sample_time: u64,
}

impl NameTree {
    pub fn new(root_name: &str, tasks: usize, sample_time: u64) -> NameTree {
        let mut t = NameTree {
            tree: Tree::new(0),
            names: Vec::new(),
            keys: HashMap::new(),
            by_func: Vec::new(),
            cursor: vec![ROOT; tasks],
            sample_time,
        };
        t.key(root_name);
        t
    }

    fn key(&mut self, name: &str) -> FuncId {
        if let Some(&k) = self.keys.get(name) {
            return k;
        }
        let k = self.names.len() as FuncId;
        self.names.push(name.to_string());
        self.keys.insert(name.to_string(), k);
        k
    }

    /// The name of node `n`.
    pub fn name(&self, n: u32) -> &str {
        &self.names[self.tree.nodes[n as usize].func as usize]
    }

    pub fn node(&self, n: u32) -> &Node {
        &self.tree.nodes[n as usize]
    }

    pub fn enter(&mut self, task: usize, name: &str) {
        let key = self.key(name);
        self.enter_key(task, key);
    }

    /// [`NameTree::enter`] of a call of function `func` named `name` (the name's key is
    /// kept per function).
    pub fn enter_func(&mut self, task: usize, func: FuncId, name: &str) {
        let i = func as usize;
        if self.by_func.len() <= i {
            self.by_func.resize(i + 1, FuncId::MAX);
        }
        let key = match self.by_func[i] {
            FuncId::MAX => {
                let k = self.key(name);
                self.by_func[i] = k;
                k
            }
            k => k,
        };
        self.enter_key(task, key);
    }

    fn enter_key(&mut self, task: usize, key: FuncId) {
        let (node, _) = self.tree.enter(self.cursor[task], key, 0, |a, b| a == b);
        self.cursor[task] = node;
    }

    pub fn exit(&mut self, task: usize, total: u64, child: u64) {
        let node = self.cursor[task];
        let parent = self.tree.exit(node, total, child, false);
        if let (Some(p), true) = (parent, self.sample_time > 0) {
            let accounted = total / self.sample_time * self.sample_time;
            let p = &mut self.tree.nodes[p as usize];
            p.child_time = p.child_time.wrapping_sub(total).wrapping_add(accounted);
        }
        self.cursor[task] = parent.unwrap_or(ROOT);
    }

    /// See [`Tree::walk`].
    pub fn walk(&self, visit: impl FnMut(u32, usize)) {
        self.tree.walk(visit);
    }
}

impl Sink for NameTree {
    fn call(&mut self, call: &Call<'_>) -> io::Result<()> {
        match (call.exit, call.func) {
            (true, _) => self.exit(call.task, call.total, call.child),
            (false, Some(f)) => self.enter_func(call.task, f, call.name),
            (false, None) => self.enter(call.task, call.name),
        }
        Ok(())
    }
}

#[cfg(test)]
#[path = "calltree_tests.rs"]
mod tests;
