//! `graph`: the call graph of each session (cli.md §6): the whole program, or the merged
//! subtrees of one function with the call stacks that led to it (`graph FUNC`), and the task
//! tree (`graph --task`).
//!
//! Each task keeps a cursor on the node of its innermost reported call. An entry moves the
//! cursor to the child of that name (created on first call, so children keep first-call
//! order); an exit adds the call's times to the cursor's node and moves it to the parent. The
//! cursor does not follow stack fix-ups (longjmp), exactly like uftrace's graph. A forked
//! child starts at its parent's cursor.

use crate::symbols::FuncId;
use crate::timeval::push_duration;
use crate::walk::{Call, Entry, View, Visitor, Walker};
use crate::{Config, Result};
use record_format::task::TaskLine;
use record_format::TraceDir;
use std::collections::HashMap;
use std::fmt::Write as _;
use std::io::Write;

/// Graph columns (`-f`), in the order they are printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GraphField {
    Total,
    SelfTime,
    Addr,
    TotalAvg,
    TotalMax,
    TotalMin,
    SelfAvg,
    SelfMax,
    SelfMin,
}

impl GraphField {
    pub const ALL: [GraphField; 9] = [
        GraphField::Total,
        GraphField::SelfTime,
        GraphField::Addr,
        GraphField::TotalAvg,
        GraphField::TotalMax,
        GraphField::TotalMin,
        GraphField::SelfAvg,
        GraphField::SelfMax,
        GraphField::SelfMin,
    ];

    /// The `-f` names (the first is the one listed in the error message).
    pub fn names(self) -> &'static [&'static str] {
        match self {
            GraphField::Total => &["total-time", "total"],
            GraphField::SelfTime => &["self-time", "self"],
            GraphField::Addr => &["address", "addr"],
            GraphField::TotalAvg => &["total-avg"],
            GraphField::TotalMax => &["total-max"],
            GraphField::TotalMin => &["total-min"],
            GraphField::SelfAvg => &["self-avg"],
            GraphField::SelfMax => &["self-max"],
            GraphField::SelfMin => &["self-min"],
        }
    }

    pub fn from_name(s: &str) -> Option<GraphField> {
        GraphField::ALL.into_iter().find(|f| f.names().contains(&s))
    }

    fn header(self) -> &'static str {
        match self {
            GraphField::Total => "TOTAL TIME",
            GraphField::SelfTime => " SELF TIME",
            GraphField::Addr => "   ADDRESS  ",
            GraphField::TotalAvg => " TOTAL AVG",
            GraphField::TotalMax => " TOTAL MAX",
            GraphField::TotalMin => " TOTAL MIN",
            GraphField::SelfAvg => "  SELF AVG",
            GraphField::SelfMax => "  SELF MAX",
            GraphField::SelfMin => "  SELF MIN",
        }
    }

    fn width(self) -> usize {
        if self == GraphField::Addr {
            12
        } else {
            10
        }
    }
}

/// How `graph` prints.
#[derive(Debug, Clone)]
pub struct GraphOptions {
    /// Columns; empty for `-f none`.
    pub fields: Vec<GraphField>,
    /// `graph FUNC`: the function whose calls are graphed.
    pub func: Option<String>,
}

#[derive(Debug, Clone)]
struct Node {
    func: FuncId,
    addr: u64,
    calls: u64,
    time: u64,
    child_time: u64,
    total_min: u64,
    total_max: u64,
    self_min: u64,
    self_max: u64,
    parent: Option<u32>,
    children: Vec<u32>,
    /// The child entered last (0: none; the root is never a child).
    last_child: u32,
}

impl Node {
    fn new(func: FuncId, addr: u64, parent: Option<u32>) -> Node {
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

/// One distinct call stack leading to FUNC.
#[derive(Debug)]
struct Backtrace {
    /// (address, name) of each frame, outermost first.
    frames: Vec<(u64, String)>,
    hits: u64,
    time: u64,
}

/// The graph of one session.
#[derive(Debug)]
struct SessionGraph {
    session: Option<usize>,
    nodes: Vec<Node>,
    backtraces: Vec<Backtrace>,
    /// Nodes of `fork` calls, newest last, with the pid of the calling process: a forked
    /// child's return from `fork` continues from there.
    forks: Vec<(u32, u32)>,
}

impl SessionGraph {
    fn new(session: Option<usize>) -> SessionGraph {
        SessionGraph {
            session,
            nodes: vec![Node::new(0, 0, None)],
            backtraces: Vec::new(),
            forks: Vec::new(),
        }
    }
}

#[derive(Debug, Clone, Copy, Default)]
struct TaskCursor {
    graph: Option<usize>,
    /// The session of the task's last record.
    session: Option<usize>,
    /// The next entry starts at the root of a new session's graph.
    new_session: bool,
    /// The node of the innermost graphed call: (graph, node).
    node: Option<(usize, u32)>,
    /// Nesting of graphed calls (full graph: 1 once the task started).
    enabled: u32,
    /// The backtrace of the current FUNC call: (graph, index).
    backtrace: Option<(usize, usize)>,
}

struct Builder<'a> {
    /// `graph FUNC`; `None` for the whole program.
    func: Option<&'a str>,
    graphs: Vec<SessionGraph>,
    by_session: HashMap<Option<usize>, usize>,
    tasks: Vec<TaskCursor>,
    /// Per function: 0 unknown, 1 FUNC, 2 another function.
    targets: Vec<u8>,
    /// Minimum and maximum times are kept (a min/max column is shown).
    minmax: bool,
    /// `--no-libcall`: unfinished library calls are not graphed either.
    no_libcall: bool,
    /// Per task: its process id and its parent process id (0 if unknown).
    pids: Vec<(u32, u32)>,
}

impl Builder<'_> {
    fn graph_of(&mut self, session: Option<usize>) -> usize {
        if let Some(&g) = self.by_session.get(&session) {
            return g;
        }
        self.graphs.push(SessionGraph::new(session));
        let g = self.graphs.len() - 1;
        self.by_session.insert(session, g);
        g
    }

    /// The task's cursor on the graph of its current session (uftrace's task graph).
    fn cursor(&mut self, view: &View<'_, '_>, task: usize, addr: u64) -> TaskCursor {
        let session = view.session(task);
        let mut c = self.tasks[task];
        let graph = match c.graph {
            Some(g) if c.session == session => g,
            _ => self.graph_of(session),
        };
        c.session = session;
        if c.graph.is_some_and(|g| g != graph) {
            c.new_session = true;
        }
        c.graph = Some(graph);
        if self.func.is_none() && c.node.is_none() && c.enabled == 0 {
            c = self.start(view, task, addr, None, c);
        }
        c
    }

    /// Starts graphing a task (full graph) or a FUNC call: the cursor goes to the root.
    fn start(
        &mut self,
        view: &View<'_, '_>,
        task: usize,
        addr: u64,
        depth: Option<usize>,
        mut c: TaskCursor,
    ) -> TaskCursor {
        c.enabled += 1;
        if c.enabled > 1 {
            return c;
        }
        let Some(gi) = c.graph else { return c };
        let g = &mut self.graphs[gi];
        if let Some(depth) = depth {
            let frames: Vec<(u64, String)> = view
                .stack(task)
                .iter()
                .take(depth + 1)
                .map(|f| {
                    let name = match f.func {
                        Some(id) if f.addr != 0 => view.name(id).to_string(),
                        _ => format!("<{:x}>", f.addr),
                    };
                    (f.addr, name)
                })
                .collect();
            let same = |b: &Backtrace| b.frames.iter().map(|f| f.0).eq(frames.iter().map(|f| f.0));
            let bt = match g.backtraces.iter().position(same) {
                Some(i) => i,
                None => {
                    g.backtraces.push(Backtrace {
                        frames,
                        hits: 0,
                        time: 0,
                    });
                    g.backtraces.len() - 1
                }
            };
            g.backtraces[bt].hits += 1;
            c.backtrace = Some((gi, bt));
        }
        let root = &mut g.nodes[0];
        root.addr = addr;
        root.calls += 1;
        c.node = c.graph.map(|g| (g, 0));
        c
    }

    fn add_entry(&mut self, view: &View<'_, '_>, task: usize, e: &Entry, c: &mut TaskCursor) {
        let curr = if c.new_session {
            c.new_session = false;
            c.graph.map(|g| (g, 0))
        } else {
            c.node
        };
        let Some((g, curr)) = curr else { return };
        let id = self.enter_node(view, task, e, g, curr);
        c.node = Some((g, id));
    }

    /// The child of node `curr` of graph `g` for the call `e` (created on first call), with
    /// its call count raised.
    #[inline(always)]
    fn enter_node(
        &mut self,
        view: &View<'_, '_>,
        task: usize,
        e: &Entry,
        g: usize,
        curr: u32,
    ) -> u32 {
        let nodes = &mut self.graphs[g].nodes;
        // The child entered last from this node is the usual one (loops, recursion).
        let last = nodes[curr as usize].last_child;
        if last != 0 {
            if let Some(n) = nodes.get_mut(last as usize).filter(|n| n.func == e.func) {
                n.calls += 1;
                return last;
            }
        }
        self.enter_new(view, task, e, g, curr)
    }

    /// [`Builder::enter_node`] when the last child entered is not the one.
    #[inline(never)]
    fn enter_new(
        &mut self,
        view: &View<'_, '_>,
        task: usize,
        e: &Entry,
        g: usize,
        curr: u32,
    ) -> u32 {
        let nodes = &self.graphs[g].nodes;
        let children = &nodes[curr as usize].children;
        // Children are matched by name; the function id is a shortcut for the same name.
        let found = children
            .iter()
            .copied()
            .find(|&k| nodes[k as usize].func == e.func)
            .or_else(|| {
                let name = view.name(e.func);
                children
                    .iter()
                    .copied()
                    .find(|&k| view.name(nodes[k as usize].func) == name)
            });
        let id = match found {
            Some(k) => k,
            None => {
                let name = view.name(e.func);
                let graph = &mut self.graphs[g];
                graph.nodes.push(Node::new(e.func, e.addr, Some(curr)));
                let id = (graph.nodes.len() - 1) as u32;
                graph.nodes[curr as usize].children.push(id);
                if matches!(name, "fork" | "vfork" | "daemon") {
                    graph.forks.push((id, self.pids[task].0));
                }
                id
            }
        };
        let nodes = &mut self.graphs[g].nodes;
        nodes[curr as usize].last_child = id;
        nodes[id as usize].calls += 1;
        id
    }

    fn add_exit(&mut self, task: usize, call: &Call, c: &mut TaskCursor) {
        let Some((g, n)) = c.node else {
            return;
        };
        c.node = self.exit_node(task, call, g, n).map(|p| (g, p));
    }

    /// Adds the call's times to node `n` of graph `g` (or to the `fork` a forked child
    /// returns from); returns the parent node.
    #[inline(always)]
    fn exit_node(&mut self, task: usize, call: &Call, g: usize, mut n: u32) -> Option<u32> {
        let graph = &mut self.graphs[g];
        if graph.nodes[n as usize].addr != call.addr {
            // A forked child returning from the fork its parent called.
            let ppid = self.pids[task].1;
            if let Some(i) = graph.forks.iter().rposition(|&(k, pid)| {
                graph.nodes[k as usize].addr == call.exit_addr && pid == ppid
            }) {
                n = graph.forks.remove(i).0;
            }
        }
        let node = &mut graph.nodes[n as usize];
        node.time += call.total;
        node.child_time += call.child;
        if self.minmax {
            let selft = call.self_time();
            node.total_min = node.total_min.min(call.total);
            node.total_max = node.total_max.max(call.total);
            node.self_min = node.self_min.min(selft);
            node.self_max = node.self_max.max(selft);
        }
        node.parent
    }

    /// Whether `f` is the FUNC of `graph FUNC` (cached per function; never in a full graph).
    #[inline(always)]
    fn is_target(&mut self, view: &View<'_, '_>, f: FuncId) -> bool {
        let Some(func) = self.func else { return false };
        let i = f as usize;
        if self.targets.len() <= i {
            self.targets.resize(i + 1, 0);
        }
        if self.targets[i] == 0 {
            self.targets[i] = if view.name(f) == func { 1 } else { 2 };
        }
        self.targets[i] == 1
    }

    /// The common case of a call that is not FUNC: the task is being graphed in the graph of
    /// its current session and has a node; returns it (no cursor copy needed).
    #[inline]
    fn fast_node(&self, view: &View<'_, '_>, task: usize) -> Option<(usize, u32)> {
        let c = &self.tasks[task];
        if c.new_session || c.enabled == 0 || c.graph.is_none() {
            return None;
        }
        if c.session != view.session(task) {
            return None;
        }
        c.node
    }
}

impl Visitor for Builder<'_> {
    fn entry(&mut self, view: &View<'_, '_>, e: &Entry) {
        let target = self.func.is_some() && self.is_target(view, e.func);
        if !target {
            if self.func.is_some() && self.tasks[e.task].enabled == 0 {
                // Outside FUNC nothing is graphed (the cursor catches up at FUNC).
                return;
            }
            if let Some((g, n)) = self.fast_node(view, e.task) {
                let id = self.enter_node(view, e.task, e, g, n);
                self.tasks[e.task].node = Some((g, id));
                return;
            }
        }
        if target {
            // A nested FUNC call (recursion): a child node and one more level.
            if let Some((g, n)) = self.fast_node(view, e.task) {
                let id = self.enter_node(view, e.task, e, g, n);
                let c = &mut self.tasks[e.task];
                c.node = Some((g, id));
                c.enabled += 1;
                return;
            }
        }
        let mut c = self.cursor(view, e.task, e.addr);
        if c.enabled > 0 {
            self.add_entry(view, e.task, e, &mut c);
        }
        if target {
            c = self.start(view, e.task, e.addr, Some(e.depth), c);
        }
        self.tasks[e.task] = c;
    }

    fn exit(&mut self, view: &View<'_, '_>, call: &Call) {
        if call.unfinished && self.no_libcall && view.func(call.func).is_plt {
            return;
        }
        let target = self.func.is_some() && self.is_target(view, call.func);
        if !target {
            if self.func.is_some() && self.tasks[call.task].enabled == 0 {
                return;
            }
            if let Some((g, n)) = self.fast_node(view, call.task) {
                let parent = self.exit_node(call.task, call, g, n);
                self.tasks[call.task].node = parent.map(|p| (g, p));
                return;
            }
        }
        if target && self.tasks[call.task].enabled > 1 {
            if let Some((g, n)) = self.fast_node(view, call.task) {
                let parent = self.exit_node(call.task, call, g, n);
                let c = &mut self.tasks[call.task];
                c.node = parent.map(|p| (g, p));
                c.enabled -= 1;
                return;
            }
        }
        let mut c = self.cursor(view, call.task, call.exit_addr);
        if c.enabled > 0 {
            self.add_exit(call.task, call, &mut c);
        }
        if c.enabled > 0 && target {
            c.enabled -= 1;
            if c.enabled == 0 {
                if let Some((g, b)) = c.backtrace.take() {
                    self.graphs[g].backtraces[b].time += call.total;
                }
            }
        }
        self.tasks[call.task] = c;
    }
}

/// For each task: its process id and the id of the process that forked it (task.txt).
fn task_pids(dir: &TraceDir) -> Vec<(u32, u32)> {
    dir.data
        .iter()
        .map(|d| {
            let pid = dir
                .tasks
                .iter()
                .find_map(|t| match t {
                    TaskLine::Task { tid, pid, .. } if *tid == d.tid => Some(*pid),
                    _ => None,
                })
                .unwrap_or(d.tid);
            let ppid = dir
                .tasks
                .iter()
                .find_map(|t| match t {
                    TaskLine::Fork { pid: p, ppid, .. } if *p == pid => Some(*ppid),
                    _ => None,
                })
                .unwrap_or(0);
            (pid, ppid)
        })
        .collect()
}

/// One line of the tree: the field columns (or their blank), ` : `, the prefix.
struct Printer<'a> {
    fields: &'a [GraphField],
    mask: Vec<bool>,
    s: String,
}

impl Printer<'_> {
    fn fields_of(&mut self, node: Option<&Node>, root: bool) {
        for f in self.fields {
            self.s.push_str("  ");
            let Some(n) = node else {
                let _ = write!(self.s, "{:w$}", "", w = f.width());
                continue;
            };
            let avg = |sum: u64| sum.checked_div(n.calls).unwrap_or(0);
            let min = |m: u64| if m == u64::MAX { 0 } else { m };
            let v = match f {
                GraphField::Addr => {
                    let _ = write!(self.s, "{:>12x}", n.addr);
                    continue;
                }
                GraphField::Total => n.time,
                GraphField::SelfTime => n.time.saturating_sub(n.child_time),
                _ if root => 0,
                GraphField::TotalAvg => avg(n.time),
                GraphField::TotalMax => n.total_max,
                GraphField::TotalMin => min(n.total_min),
                GraphField::SelfAvg => avg(n.time.saturating_sub(n.child_time)),
                GraphField::SelfMax => n.self_max,
                GraphField::SelfMin => min(n.self_min),
            };
            push_duration(&mut self.s, v, false);
        }
        if !self.fields.is_empty() {
            self.s.push_str(" : ");
        }
    }

    fn indent(&mut self, indent: usize, line: bool) {
        if self.mask.len() < indent {
            self.mask.resize(indent, false);
        }
        let last = if line {
            (0..indent).rev().find(|&i| self.mask[i]).unwrap_or(0)
        } else {
            0
        };
        for i in 0..indent {
            let open = self.mask[i];
            self.s.push_str(match (!line || i < last, open) {
                (true, true) => " | ",
                (true, false) => "   ",
                (false, true) => " +-",
                (false, false) => "---",
            });
        }
    }
}

enum Work {
    Node {
        id: u32,
        indent: usize,
        line: bool,
        /// Last child of a multi-child node: closes level `indent - 1` after its line.
        last: bool,
    },
    Separator(usize),
}

/// Prints the tree of `g` (root first) into `p.s`.
fn print_tree(
    g: &SessionGraph,
    root_name: &str,
    view_name: &dyn Fn(FuncId) -> String,
    p: &mut Printer<'_>,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    let mut work = vec![Work::Node {
        id: 0,
        indent: 0,
        line: false,
        last: false,
    }];
    while let Some(w) = work.pop() {
        match w {
            Work::Separator(indent) => {
                p.fields_of(None, false);
                p.indent(indent, false);
                p.s.push('\n');
            }
            Work::Node {
                id,
                indent,
                line,
                last,
            } => {
                let n = &g.nodes[id as usize];
                p.fields_of(Some(n), id == 0);
                p.indent(indent, line);
                let name = if id == 0 {
                    root_name.to_string()
                } else {
                    view_name(n.func)
                };
                let _ = writeln!(p.s, "({}) {name}", n.calls);
                if last && indent > 0 {
                    p.mask[indent - 1] = false;
                }
                let multi = n.children.len() > 1;
                let child_indent = if multi { indent + 1 } else { indent };
                if multi {
                    if p.mask.len() <= indent {
                        p.mask.resize(indent + 1, false);
                    }
                    p.mask[indent] = true;
                }
                let k = n.children.len();
                for (i, &c) in n.children.iter().enumerate().rev() {
                    work.push(Work::Node {
                        id: c,
                        indent: child_indent,
                        line: multi,
                        last: multi && i + 1 == k,
                    });
                    if multi && i > 0 {
                        work.push(Work::Separator(child_indent));
                    }
                }
            }
        }
        if p.s.len() > 1 << 16 {
            out.write_all(p.s.as_bytes())?;
            p.s.clear();
        }
    }
    Ok(())
}

fn has_filter(cfg: &Config) -> bool {
    !(cfg.filters.is_empty()
        && cfg.notrace.is_empty()
        && cfg.hide.is_empty()
        && cfg.caller.is_empty()
        && cfg.triggers.is_empty())
}

/// The graphs of `dir`'s sessions, newest first, with nothing-to-show ones left out.
struct Built<'d> {
    graphs: Vec<SessionGraph>,
    walker: Walker<'d>,
    notices: Vec<String>,
    warnings: Vec<String>,
}

/// Walks `dir` into one graph per session (`func`: the graphs of FUNC's calls).
fn build<'d>(dir: &'d TraceDir, cfg: &Config, opts: &GraphOptions) -> Result<Built<'d>> {
    // `-D` counts from FUNC (uftrace adds a depth trigger on FUNC).
    let mut cfg = cfg.clone();
    if let (Some(f), Some(d)) = (&opts.func, cfg.depth) {
        // A FUNC found in no symbol table is looked for in the kernel (as uftrace does).
        let mut sym = crate::symbols::Symbolizer::new(dir, cfg.demangle);
        let ids = sym.all_functions();
        let known = ids.iter().any(|&i| sym.func(i).name == *f);
        let kernel = if known { "" } else { "kernel," };
        cfg.triggers.push(format!("{f}@{kernel}depth={d}"));
    }
    let cfg = &cfg;
    let mut walker = Walker::new(dir, cfg)?;
    let notices = walker.notices().to_vec();
    // Children keep first-call order across tasks, so only one task can be read directly.
    if dir.data.iter().filter(|d| !d.is_empty()).count() <= 1 {
        walker = walker.task_order();
    }
    let mut b = Builder {
        func: opts.func.as_deref(),
        graphs: Vec::new(),
        by_session: HashMap::new(),
        tasks: vec![TaskCursor::default(); dir.data.len()],
        pids: task_pids(dir),
        no_libcall: cfg.no_libcall,
        targets: Vec::new(),
        minmax: opts.fields.iter().any(|f| {
            matches!(
                f,
                GraphField::TotalMax
                    | GraphField::TotalMin
                    | GraphField::SelfMax
                    | GraphField::SelfMin
            )
        }),
    };
    let warnings = walker.run(&mut b)?;
    let mut graphs = b.graphs;
    if opts.func.is_none() {
        // The root adds up its children (on top of what calls returning to it added).
        for g in &mut graphs {
            let sum: u64 = g.nodes[0]
                .children
                .iter()
                .map(|&c| g.nodes[c as usize].time)
                .sum();
            g.nodes[0].time += sum;
            g.nodes[0].child_time += sum;
            g.nodes[0].calls = 1;
        }
    }
    // Graphs with nothing to show are left out.
    graphs.retain(|g| {
        !g.backtraces.is_empty() || g.nodes[0].time != 0 || !g.nodes[0].children.is_empty()
    });
    // Newest session first.
    let start = |g: &SessionGraph| {
        g.session
            .and_then(|s| dir.sessions.get(s))
            .map_or(0, |s| s.time)
    };
    graphs.sort_by_key(|g| std::cmp::Reverse(start(g)));

    Ok(Built {
        graphs,
        walker,
        notices,
        warnings,
    })
}

/// One node of a [`CallGraph`]: a distinct call path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GraphNode {
    pub name: String,
    pub calls: u64,
    /// Total time of its calls (ns).
    pub total: u64,
    /// Total time minus its callees' (ns).
    pub self_time: u64,
    pub parent: Option<u32>,
    /// In first-call order.
    pub children: Vec<u32>,
}

/// The whole-program call graph of one session, as `graph` prints it; node 0 is the
/// program.
#[derive(Debug, Clone)]
pub struct CallGraph {
    pub sid: String,
    /// The session's executable.
    pub exe: String,
    pub nodes: Vec<GraphNode>,
}

/// The call graph of each session of `dir`, newest session first, and the `Usage:` notices
/// and warnings met.
pub fn call_graphs(dir: &TraceDir, cfg: &Config) -> Result<(Vec<CallGraph>, Vec<String>)> {
    let opts = GraphOptions {
        fields: Vec::new(),
        func: None,
    };
    let built = build(dir, cfg, &opts)?;
    let sym = built.walker.symbols();
    let mut out = Vec::new();
    for g in &built.graphs {
        let sess = g.session.and_then(|s| dir.sessions.get(s));
        let root = g
            .session
            .map_or_else(String::new, |s| sym.session_comm(s).to_string());
        let nodes = g
            .nodes
            .iter()
            .enumerate()
            .map(|(i, n)| GraphNode {
                name: if i == 0 {
                    root.clone()
                } else {
                    sym.func(n.func).name.clone()
                },
                calls: n.calls,
                total: n.time,
                self_time: n.time.saturating_sub(n.child_time),
                parent: n.parent,
                children: n.children.clone(),
            })
            .collect();
        out.push(CallGraph {
            sid: sess.map_or_else(String::new, |s| s.sid.clone()),
            exe: sess.map_or_else(String::new, |s| s.exename.clone()),
            nodes,
        });
    }
    let mut messages = built.notices;
    messages.extend(built.warnings);
    Ok((out, messages))
}

/// Prints the call graph of `dir`; returns the warnings.
pub fn graph(
    dir: &TraceDir,
    cfg: &Config,
    opts: &GraphOptions,
    out: &mut dyn Write,
) -> Result<Vec<String>> {
    let Built {
        graphs,
        walker,
        notices,
        warnings,
    } = build(dir, cfg, opts)?;
    for n in notices {
        writeln!(out, "Usage: {n}")?;
    }
    if graphs.is_empty() {
        let name = opts.func.as_deref().unwrap_or("_start");
        writeln!(out, "utrace: cannot find graph for '{name}'")?;
        if has_filter(cfg) {
            writeln!(out, "\t please check your filter settings.")?;
        }
        return Ok(warnings);
    }
    let sym = walker.symbols();
    let name_of = |f: FuncId| sym.func(f).name.clone();
    let mut p = Printer {
        fields: &opts.fields,
        mask: Vec::new(),
        s: String::new(),
    };
    for g in &graphs {
        let sess = g.session.and_then(|s| dir.sessions.get(s));
        let sid = sess.map_or("", |s| s.sid.as_str());
        let root_name = match &opts.func {
            Some(f) => f.clone(),
            None => g
                .session
                .map_or_else(String::new, |s| sym.session_comm(s).to_string()),
        };
        let _ = writeln!(
            p.s,
            "# Function Call Graph for '{root_name}' (session: {sid})"
        );
        if opts.func.is_some() && !g.backtraces.is_empty() {
            p.s.push_str("=============== BACKTRACE ===============\n");
            for (i, bt) in g.backtraces.iter().rev().enumerate() {
                let _ = write!(p.s, " backtrace #{i}: hit {}, time ", bt.hits);
                push_duration(&mut p.s, bt.time, false);
                p.s.push('\n');
                for (k, (addr, name)) in bt.frames.iter().enumerate() {
                    if *addr == 0 {
                        let _ = writeln!(p.s, "   [{k}] {name} (0)");
                    } else {
                        let _ = writeln!(p.s, "   [{k}] {name} ({addr:#x})");
                    }
                }
                p.s.push('\n');
            }
        }
        if g.nodes[0].time == 0 && g.nodes[0].children.is_empty() {
            continue;
        }
        p.s.push_str("========== FUNCTION CALL GRAPH ==========\n");
        if !opts.fields.is_empty() {
            p.s.push_str("# ");
            let heads: Vec<&str> = opts.fields.iter().map(|f| f.header()).collect();
            p.s.push_str(&heads.join("  "));
            p.s.push_str("   FUNCTION\n");
        }
        p.mask.clear();
        print_tree(g, &root_name, &name_of, &mut p, out)?;
        p.s.push('\n');
    }
    out.write_all(p.s.as_bytes())?;
    Ok(warnings)
}
