//! Building the call graphs of `graph`: a [`Visitor`] of the walk that keeps, per session, a
//! tree of calls merged by name (the whole program, or the subtrees of `graph FUNC` with the
//! call stacks that led to them) and, per task, a cursor on its innermost reported call.
//!
//! While the walk runs, the nodes of all sessions live in one arena (a cursor is then a node
//! index: entering or leaving a call reads the node without first finding its session's
//! tree); each session's tree is taken out of it at the end.

use super::*;
pub(super) use crate::output::calltree::{Node, Tree};
use crate::output::report::stats::SCHED_NAMES;
use crate::symbols::Symbolizer;

/// The function ids of the `linux:schedule` and `linux:schedule (pre-empted)` nodes (no
/// symbol has them: the symbolizer's ids count up from 0).
pub(super) const SCHED_FUNCS: [FuncId; 2] = [FuncId::MAX, FuncId::MAX - 1];

/// The name of a node's function id, the context switches' included.
pub(super) fn func_name<'s>(sym: &'s Symbolizer<'_>, id: FuncId) -> &'s str {
    match SCHED_FUNCS.iter().position(|&s| s == id) {
        Some(i) => SCHED_NAMES[i],
        None => &sym.func(id).name,
    }
}

/// One distinct call stack leading to FUNC.
#[derive(Debug)]
pub(super) struct Backtrace {
    /// (address, name) of each frame, outermost first.
    pub(super) frames: Vec<(u64, String)>,
    pub(super) hits: u64,
    pub(super) time: u64,
}

/// The graph of one session.
#[derive(Debug)]
pub(super) struct SessionGraph {
    pub(super) session: Option<usize>,
    /// The calls (the one call-tree builder; node 0 is the program or FUNC), filled from the
    /// arena when the walk is over.
    pub(super) tree: Tree,
    /// The root's node in the builder's arena.
    pub(super) root: u32,
    pub(super) backtraces: Vec<Backtrace>,
    /// Nodes of `fork` calls, newest last, with the pid of the calling process: a forked
    /// child's return from `fork` continues from there.
    pub(super) forks: Vec<(u32, u32)>,
}

impl SessionGraph {
    pub(super) fn new(session: Option<usize>, root: u32) -> SessionGraph {
        SessionGraph {
            session,
            tree: Tree::new(0),
            root,
            backtraces: Vec::new(),
            forks: Vec::new(),
        }
    }
}

#[derive(Debug, Clone, Copy, Default)]
pub(super) struct TaskCursor {
    pub(super) graph: Option<usize>,
    /// The session of the task's last record.
    pub(super) session: Option<usize>,
    /// The next entry starts at the root of a new session's graph.
    pub(super) new_session: bool,
    /// The node of the innermost graphed call: (graph, node in the arena).
    pub(super) node: Option<(usize, u32)>,
    /// Nesting of graphed calls (full graph: 1 once the task started).
    pub(super) enabled: u32,
    /// The backtrace of the current FUNC call: (graph, index).
    pub(super) backtrace: Option<(usize, usize)>,
}

pub(super) struct Builder<'a> {
    /// `graph FUNC`; `None` for the whole program.
    pub(super) func: Option<&'a str>,
    pub(super) graphs: Vec<SessionGraph>,
    /// The nodes of every session's graph (node 0 is unused: 0 means "no child").
    pub(super) arena: Tree,
    /// Some graph has a `fork` node (a forked child's exit may belong to it).
    pub(super) forks_seen: bool,
    pub(super) by_session: HashMap<Option<usize>, usize>,
    pub(super) tasks: Vec<TaskCursor>,
    /// Per function: 0 unknown, 1 FUNC, 2 another function.
    pub(super) targets: Vec<u8>,
    /// Minimum and maximum times are kept (a min/max column is shown).
    pub(super) minmax: bool,
    /// `--no-libcall`: unfinished library calls are not graphed either.
    pub(super) no_libcall: bool,
    /// Per task: its process id and its parent process id (0 if unknown).
    pub(super) pids: Vec<(u32, u32)>,
    /// Which context switches are nodes: other ones, pre-emptions (`--no-sched`,
    /// `--no-event`, `--no-sched-preempt`).
    pub(super) show_sched: [bool; 2],
}

impl Builder<'_> {
    pub(super) fn graph_of(&mut self, session: Option<usize>) -> usize {
        if let Some(&g) = self.by_session.get(&session) {
            return g;
        }
        self.arena.nodes.push(Node::new(0, 0, None));
        let root = (self.arena.nodes.len() - 1) as u32;
        self.graphs.push(SessionGraph::new(session, root));
        let g = self.graphs.len() - 1;
        self.by_session.insert(session, g);
        g
    }

    /// The task's cursor on the graph of its current session (uftrace's task graph).
    pub(super) fn cursor(&mut self, view: &View<'_, '_>, task: usize, addr: u64) -> TaskCursor {
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
    pub(super) fn start(
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
        let root = &mut self.arena.nodes[g.root as usize];
        root.addr = addr;
        root.calls += 1;
        c.node = Some((gi, g.root));
        c
    }

    pub(super) fn add_entry(
        &mut self,
        view: &View<'_, '_>,
        task: usize,
        e: &Entry,
        c: &mut TaskCursor,
    ) {
        let curr = if c.new_session {
            c.new_session = false;
            c.graph.map(|g| (g, self.graphs[g].root))
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
    pub(super) fn enter_node(
        &mut self,
        view: &View<'_, '_>,
        task: usize,
        e: &Entry,
        g: usize,
        curr: u32,
    ) -> u32 {
        let sym = view.symbols();
        let same = |a: FuncId, b: FuncId| func_name(sym, a) == func_name(sym, b);
        let (id, created) = self.arena.enter(curr, e.func, e.addr, same);
        if created && matches!(view.name(e.func), "fork" | "vfork" | "daemon") {
            self.graphs[g].forks.push((id, self.pids[task].0));
            self.forks_seen = true;
        }
        id
    }

    pub(super) fn add_exit(&mut self, task: usize, call: &Call, c: &mut TaskCursor) {
        let Some((g, n)) = c.node else {
            return;
        };
        c.node = self.exit_node(task, call, g, n).map(|p| (g, p));
    }

    /// Adds the call's times to node `n` of graph `g` (or to the `fork` a forked child
    /// returns from); returns the parent node.
    #[inline(always)]
    pub(super) fn exit_node(
        &mut self,
        task: usize,
        call: &Call,
        g: usize,
        mut n: u32,
    ) -> Option<u32> {
        let graph = &mut self.graphs[g];
        let nodes = &self.arena.nodes;
        if !graph.forks.is_empty() && nodes[n as usize].addr != call.addr {
            // A forked child returning from the fork its parent called.
            let ppid = self.pids[task].1;
            if let Some(i) = graph
                .forks
                .iter()
                .rposition(|&(k, pid)| nodes[k as usize].addr == call.exit_addr && pid == ppid)
            {
                n = graph.forks.remove(i).0;
            }
        }
        self.arena.exit(n, call.total, call.child, self.minmax)
    }

    /// Whether `f` is the FUNC of `graph FUNC` (cached per function; never in a full graph).
    #[inline(always)]
    pub(super) fn is_target(&mut self, view: &View<'_, '_>, f: FuncId) -> bool {
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
    pub(super) fn fast_node(&self, view: &View<'_, '_>, task: usize) -> Option<(usize, u32)> {
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
    /// A context switch inside a graphed call: a `linux:schedule` child of the task's
    /// innermost call, one call of `total` ns (uftrace's graph).
    fn sched(&mut self, view: &View<'_, '_>, task: usize, total: u64, preempted: bool) {
        if !self.show_sched[usize::from(preempted)] || self.tasks[task].enabled == 0 {
            return;
        }
        let Some((_, n)) = self.fast_node(view, task) else {
            return;
        };
        let sym = view.symbols();
        let same = |a: FuncId, b: FuncId| func_name(sym, a) == func_name(sym, b);
        let tree = &mut self.arena;
        let (id, _) = tree.enter(n, SCHED_FUNCS[usize::from(preempted)], 0, same);
        tree.exit(id, total, 0, self.minmax);
    }

    /// The graph does not tell recursive calls apart.
    fn wants_recursive(&self) -> bool {
        false
    }

    /// The common case inline (a whole-program graph, the task's cursor on a node, the call
    /// seen from there before); the rest in [`Builder::entry_general`].
    #[inline(always)]
    fn entry(&mut self, view: &View<'_, '_>, e: &Entry) {
        if self.func.is_none() {
            if let Some((g, n)) = self.fast_node(view, e.task) {
                if let Some(id) = self.arena.enter_again(n, e.func) {
                    self.tasks[e.task].node = Some((g, id));
                    return;
                }
            }
        }
        self.entry_general(view, e);
    }

    /// The common case inline (a whole-program graph without forks, the task's cursor on a
    /// node); the rest in [`Builder::exit_general`].
    #[inline(always)]
    fn exit(&mut self, view: &View<'_, '_>, call: &Call) {
        if self.func.is_none() && !call.unfinished {
            if let Some((g, n)) = self.fast_node(view, call.task) {
                if !self.forks_seen {
                    let parent = self.arena.exit(n, call.total, call.child, self.minmax);
                    self.tasks[call.task].node = parent.map(|p| (g, p));
                    return;
                }
            }
        }
        self.exit_general(view, call);
    }
}

impl Builder<'_> {
    #[inline(never)]
    fn entry_general(&mut self, view: &View<'_, '_>, e: &Entry) {
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

    #[inline(never)]
    fn exit_general(&mut self, view: &View<'_, '_>, call: &Call) {
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

/// The nodes of `arena` under `root` as a tree of their own (root first, the others in
/// creation order).
fn subtree(arena: &Tree, root: u32) -> Tree {
    let mut ids = Vec::new();
    arena.walk_from(root, |n| ids.push(n));
    ids.sort_unstable();
    let index: HashMap<u32, u32> = ids
        .iter()
        .enumerate()
        .map(|(new, &old)| (old, new as u32))
        .collect();
    let map = |old: u32| index.get(&old).copied().unwrap_or(0);
    let nodes = ids
        .iter()
        .map(|&old| {
            let mut n = arena.nodes[old as usize].clone();
            n.parent = if old == root { None } else { n.parent.map(map) };
            n.children = n.children.iter().map(|&c| map(c)).collect();
            n.last_child = map(n.last_child);
            n
        })
        .collect();
    Tree { nodes }
}

/// For each task: its process id and the id of the process that forked it (task.txt).
pub(super) fn task_pids(dir: &TraceDir) -> Vec<(u32, u32)> {
    dir.data
        .iter()
        .map(|d| {
            let pid = crate::walk::timed::task_pid(dir, d.tid);
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

pub(super) fn has_filter(cfg: &Config) -> bool {
    !(cfg.filters.is_empty()
        && cfg.notrace.is_empty()
        && cfg.hide.is_empty()
        && cfg.caller.is_empty()
        && cfg.triggers.is_empty()
        && cfg.size_filter.is_none()
        && cfg.time_filter.is_none())
}

/// The graphs of `dir`'s sessions, newest first, with nothing-to-show ones left out.
pub(super) struct Built<'d> {
    pub(super) graphs: Vec<SessionGraph>,
    pub(super) walker: Walker<'d>,
    pub(super) notices: Vec<String>,
    pub(super) warnings: Vec<String>,
}

/// Walks `dir` into one graph per session (`func`: the graphs of FUNC's calls).
pub(super) fn build<'d>(dir: &'d TraceDir, cfg: &Config, opts: &GraphOptions) -> Result<Built<'d>> {
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
    // Context switches are `linux:schedule` nodes, their time callee time of the call.
    let mut walker = Walker::new(dir, cfg)?.with_sched();
    let notices = walker.notices().to_vec();
    // Children keep first-call order across tasks, so only one task can be read directly.
    if dir.data.iter().filter(|d| !d.is_empty()).count() <= 1 {
        walker = walker.task_order();
    }
    let mut b = Builder {
        func: opts.func.as_deref(),
        graphs: Vec::new(),
        arena: Tree::new(0),
        forks_seen: false,
        by_session: HashMap::new(),
        tasks: vec![TaskCursor::default(); dir.data.len()],
        pids: task_pids(dir),
        no_libcall: cfg.no_libcall,
        show_sched: cfg.sched_shown(),
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
    for g in &mut graphs {
        g.tree = subtree(&b.arena, g.root);
    }
    if opts.func.is_none() {
        // The root adds up its children (on top of what calls returning to it added).
        for g in &mut graphs {
            let sum: u64 = g.tree.nodes[0]
                .children
                .iter()
                .map(|&c| g.tree.nodes[c as usize].time)
                .sum();
            g.tree.nodes[0].time += sum;
            g.tree.nodes[0].child_time += sum;
            g.tree.nodes[0].calls = 1;
        }
    }
    // Graphs with nothing to show are left out.
    graphs.retain(|g| {
        !g.backtraces.is_empty()
            || g.tree.nodes[0].time != 0
            || !g.tree.nodes[0].children.is_empty()
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
