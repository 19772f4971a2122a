//! The state of `utrace tui` and what each key does to it, apart from any terminal: the call
//! graph with folding, the report, the info text, search and jumps (cli.md §9).

use record_format::timeval::push_duration;
use replay::output::graph::{CallGraph, GraphField};

use super::tree::Tree;

/// One row of the report view.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    pub name: String,
    pub total: u64,
    pub self_time: u64,
    pub calls: u64,
}

/// The report's sort columns, in the order `s` cycles through them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sort {
    Total,
    Self_,
    Calls,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Graph,
    Report,
    Info,
}

/// A key, as the terminal layer reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Key {
    Char(char),
    Up,
    Down,
    PageUp,
    PageDown,
    Home,
    End,
    Enter,
    Backspace,
    Esc,
}

/// The whole state.
#[derive(Debug)]
pub struct App {
    pub mode: Mode,
    /// The full graph.
    pub full: Tree,
    /// The tree shown: the full graph or a function's (`g`).
    pub tree: Tree,
    /// `Some(name)` while a function's graph is shown.
    pub graph_of: Option<String>,
    pub visible: Vec<usize>,
    /// Position in `visible` (graph), `rows` (report) or the info lines.
    pub cursor: usize,
    pub top: usize,
    /// Rows the body shows (set by the view).
    pub height: usize,
    pub rows: Vec<Row>,
    pub sort: Sort,
    pub report_cursor: usize,
    pub report_top: usize,
    pub info: Vec<String>,
    pub info_top: usize,
    /// The search being typed (`/`), if any.
    pub prompt: Option<String>,
    /// The last search.
    pub search: String,
    pub help: bool,
    /// One-line message for the status bar (search results).
    pub message: String,
    /// Session ids and executables, by session graph.
    pub sessions: Vec<(String, String)>,
    /// The data directory's name (report status).
    pub data: String,
    /// The graph's columns (`-f`; empty for `none`).
    pub fields: Vec<GraphField>,
}

impl App {
    pub fn new(graphs: &[CallGraph], rows: Vec<Row>, info: String, data: String) -> App {
        let full = Tree::from_graphs(graphs);
        let mut app = App {
            mode: Mode::Graph,
            tree: full.clone(),
            full,
            graph_of: None,
            visible: Vec::new(),
            cursor: 0,
            top: 0,
            height: 20,
            rows,
            sort: Sort::Total,
            report_cursor: 0,
            report_top: 0,
            info: info.lines().map(str::to_string).collect(),
            info_top: 0,
            prompt: None,
            search: String::new(),
            help: false,
            message: String::new(),
            sessions: graphs
                .iter()
                .map(|g| (g.sid.clone(), g.exe.clone()))
                .collect(),
            data,
            fields: vec![GraphField::Total],
        };
        app.sort_rows();
        app.refresh();
        app
    }

    /// The graph's columns (`-f`).
    pub fn with_fields(mut self, fields: Vec<GraphField>) -> App {
        self.fields = fields;
        self
    }

    fn refresh(&mut self) {
        self.visible = self.tree.visible();
        self.cursor = self.cursor.min(self.visible.len().saturating_sub(1));
    }

    /// The node under the cursor.
    pub fn current(&self) -> Option<usize> {
        self.visible.get(self.cursor).copied()
    }

    fn sort_rows(&mut self) {
        let key = self.sort;
        self.rows.sort_by(|a, b| {
            let v = |r: &Row| match key {
                Sort::Total => r.total,
                Sort::Self_ => r.self_time,
                Sort::Calls => r.calls,
            };
            v(b).cmp(&v(a)).then_with(|| a.name.cmp(&b.name))
        });
    }

    fn move_to(&mut self, node: usize) {
        self.tree.reveal(node);
        self.refresh();
        if let Some(p) = self.visible.iter().position(|&v| v == node) {
            self.cursor = p;
        }
    }

    /// Handles a key; `false` when the tui should end.
    pub fn key(&mut self, k: Key) -> bool {
        if let Some(p) = &mut self.prompt {
            match k {
                Key::Char(c) => p.push(c),
                Key::Backspace => {
                    p.pop();
                }
                Key::Enter => {
                    self.search = self.prompt.take().unwrap_or_default();
                    self.find(true, true);
                }
                Key::Esc => self.prompt = None,
                _ => {}
            }
            return true;
        }
        if self.help {
            self.help = false;
            return true;
        }
        self.message.clear();
        match k {
            Key::Char('q') => {
                if self.mode != Mode::Graph {
                    self.mode = Mode::Graph;
                } else if self.graph_of.is_some() {
                    self.show_full();
                } else {
                    return false;
                }
            }
            Key::Char('h' | '?') => self.help = true,
            Key::Char('R') => self.mode = Mode::Report,
            Key::Char('I') => self.mode = Mode::Info,
            Key::Char('G') => {
                self.mode = Mode::Graph;
                self.show_full();
            }
            _ => match self.mode {
                Mode::Graph => self.graph_key(k),
                Mode::Report => self.report_key(k),
                Mode::Info => self.info_key(k),
            },
        }
        true
    }

    fn show_full(&mut self) {
        let node = self.current().map(|i| self.tree.nodes[i].name.clone());
        self.tree = self.full.clone();
        self.graph_of = None;
        self.cursor = 0;
        self.refresh();
        if let Some(name) = node {
            if let Some(i) = (0..self.tree.nodes.len()).find(|&i| self.tree.nodes[i].name == name) {
                self.move_to(i);
            }
        }
    }

    fn show_function(&mut self, name: &str) {
        let t = Tree::of_function(&self.full, name);
        if t.nodes.is_empty() {
            self.message = format!("no graph for {name}");
            return;
        }
        self.tree = t;
        self.graph_of = Some(name.to_string());
        self.mode = Mode::Graph;
        self.cursor = 0;
        self.top = 0;
        self.refresh();
    }

    fn page(&self) -> usize {
        self.height.max(2) - 1
    }

    fn graph_key(&mut self, k: Key) {
        let last = self.visible.len().saturating_sub(1);
        let cur = self.current();
        match k {
            Key::Up | Key::Char('k') => self.cursor = self.cursor.saturating_sub(1),
            Key::Down | Key::Char('j') => self.cursor = (self.cursor + 1).min(last),
            Key::PageUp => self.cursor = self.cursor.saturating_sub(self.page()),
            Key::PageDown => self.cursor = (self.cursor + self.page()).min(last),
            Key::Home => self.cursor = 0,
            Key::End => self.cursor = last,
            Key::Enter => {
                if let Some(i) = cur.filter(|&i| !self.tree.nodes[i].children.is_empty()) {
                    self.tree.nodes[i].folded = !self.tree.nodes[i].folded;
                    self.refresh();
                }
            }
            Key::Char(c @ ('c' | 'e' | 'C' | 'E')) => {
                if let Some(i) = cur {
                    let fold = c == 'c' || c == 'C';
                    self.tree.nodes[i].folded = false;
                    if c.is_ascii_uppercase() {
                        self.tree.set_folded_below(i, fold);
                    } else {
                        for k in self.tree.nodes[i].children.clone() {
                            let n = &mut self.tree.nodes[k];
                            n.folded = fold && !n.children.is_empty();
                        }
                    }
                    self.refresh();
                }
            }
            Key::Char('u') => {
                if let Some(p) = cur.and_then(|i| self.tree.nodes[i].parent) {
                    self.move_to(p);
                }
            }
            Key::Char(c @ ('n' | 'p')) => {
                if let Some(i) = cur {
                    let sibs = match self.tree.nodes[i].parent {
                        Some(p) => self.tree.nodes[p].children.clone(),
                        None => self.tree.roots.clone(),
                    };
                    let at = sibs.iter().position(|&s| s == i).unwrap_or(0);
                    let to = if c == 'n' {
                        sibs.get(at + 1)
                    } else {
                        at.checked_sub(1).and_then(|a| sibs.get(a))
                    };
                    if let Some(&to) = to {
                        self.move_to(to);
                    }
                }
            }
            Key::Char('l') => {
                if let Some(i) = cur {
                    self.tree.nodes[i].folded = false;
                    let longest = self.tree.nodes[i]
                        .children
                        .iter()
                        .copied()
                        .max_by_key(|&c| self.tree.nodes[c].total);
                    if let Some(c) = longest {
                        self.move_to(c);
                    }
                }
            }
            Key::Char('g') => {
                if let Some(i) = cur.filter(|&i| self.tree.nodes[i].parent.is_some()) {
                    let name = self.tree.nodes[i].name.clone();
                    self.show_function(&name);
                }
            }
            Key::Char('z') => {
                self.top = self.cursor.saturating_sub(self.height / 2);
                return;
            }
            Key::Char('/') => self.prompt = Some(String::new()),
            Key::Char('>' | 'N') => self.find(true, false),
            Key::Char('<' | 'P') => self.find(false, false),
            _ => {}
        }
        self.scroll();
    }

    /// Moves to the next (or previous) node whose name contains the search text, in tree
    /// order over every node, folded or not; `here` includes the current node.
    fn find(&mut self, forward: bool, here: bool) {
        if self.search.is_empty() {
            return;
        }
        if self.mode == Mode::Report {
            let n = self.rows.len();
            let start = self.report_cursor;
            let hit = (0..n)
                .map(|k| {
                    let off = if here { k } else { k + 1 };
                    if forward {
                        (start + off) % n
                    } else {
                        (start + n * 2 - off) % n
                    }
                })
                .find(|&r| self.rows[r].name.contains(&self.search));
            match hit {
                Some(r) => self.report_cursor = r,
                None => self.message = format!("not found: {}", self.search),
            }
            self.scroll();
            return;
        }
        // Tree order over all nodes: the visible order with everything unfolded.
        let mut all = self.tree.clone();
        for n in &mut all.nodes {
            n.folded = false;
        }
        let order = all.visible();
        let n = order.len();
        if n == 0 {
            return;
        }
        let start = self
            .current()
            .and_then(|c| order.iter().position(|&o| o == c))
            .unwrap_or(0);
        let hit = (0..n)
            .map(|k| {
                let off = if here { k } else { k + 1 };
                if forward {
                    (start + off) % n
                } else {
                    (start + n * 2 - off) % n
                }
            })
            .map(|k| order[k])
            .find(|&i| self.tree.nodes[i].name.contains(&self.search));
        match hit {
            Some(i) => {
                self.move_to(i);
                self.scroll();
            }
            None => self.message = format!("not found: {}", self.search),
        }
    }

    fn report_key(&mut self, k: Key) {
        let last = self.rows.len().saturating_sub(1);
        match k {
            Key::Up | Key::Char('k') => self.report_cursor = self.report_cursor.saturating_sub(1),
            Key::Down | Key::Char('j') => self.report_cursor = (self.report_cursor + 1).min(last),
            Key::PageUp => self.report_cursor = self.report_cursor.saturating_sub(self.page()),
            Key::PageDown => self.report_cursor = (self.report_cursor + self.page()).min(last),
            Key::Home => self.report_cursor = 0,
            Key::End => self.report_cursor = last,
            Key::Char('s') => {
                self.sort = match self.sort {
                    Sort::Total => Sort::Self_,
                    Sort::Self_ => Sort::Calls,
                    Sort::Calls => Sort::Total,
                };
                let name = self.rows.get(self.report_cursor).map(|r| r.name.clone());
                self.sort_rows();
                self.report_cursor = name
                    .and_then(|n| self.rows.iter().position(|r| r.name == n))
                    .unwrap_or(0);
            }
            // Jump to the function: its first call path in the full graph.
            Key::Enter => {
                if let Some(name) = self.rows.get(self.report_cursor).map(|r| r.name.clone()) {
                    self.mode = Mode::Graph;
                    if self.graph_of.is_some() {
                        self.tree = self.full.clone();
                        self.graph_of = None;
                    }
                    match (0..self.tree.nodes.len()).find(|&i| self.tree.nodes[i].name == name) {
                        Some(i) => self.move_to(i),
                        None => self.message = format!("{name} is not in the graph"),
                    }
                }
            }
            Key::Char('g') => {
                if let Some(name) = self.rows.get(self.report_cursor).map(|r| r.name.clone()) {
                    self.show_function(&name);
                }
            }
            Key::Char('/') => self.prompt = Some(String::new()),
            Key::Char('>' | 'N') => self.find(true, false),
            Key::Char('<' | 'P') => self.find(false, false),
            _ => {}
        }
        self.scroll();
    }

    fn info_key(&mut self, k: Key) {
        let last = self.info.len().saturating_sub(self.height.max(1));
        self.info_top = match k {
            Key::Up | Key::Char('k') => self.info_top.saturating_sub(1),
            Key::Down | Key::Char('j') => (self.info_top + 1).min(last),
            Key::PageUp => self.info_top.saturating_sub(self.page()),
            Key::PageDown => (self.info_top + self.page()).min(last),
            Key::Home => 0,
            Key::End => last,
            _ => self.info_top,
        };
    }

    /// Keeps the cursor inside the shown rows.
    pub fn scroll(&mut self) {
        let h = self.height.max(1);
        let (cur, top) = match self.mode {
            Mode::Report => (self.report_cursor, &mut self.report_top),
            _ => (self.cursor, &mut self.top),
        };
        if cur < *top {
            *top = cur;
        } else if cur >= *top + h {
            *top = cur + 1 - h;
        }
    }

    /// The status line's text: what is shown, and where the cursor is.
    pub fn status(&self) -> (String, String) {
        let pct = |at: usize, n: usize| {
            if n <= 1 {
                "100%".to_string()
            } else {
                format!("{}%", at * 100 / (n - 1))
            }
        };
        match self.mode {
            Mode::Graph => {
                let s = self
                    .current()
                    .map_or(0, |i| self.tree.nodes[i].session)
                    .min(self.sessions.len().saturating_sub(1));
                let (sid, exe) = self.sessions.get(s).cloned().unwrap_or_default();
                let what = match &self.graph_of {
                    Some(f) => format!("utrace graph: {f} (session {sid})"),
                    None => format!("utrace graph: session {sid} ({exe})"),
                };
                (what, pct(self.cursor, self.visible.len()))
            }
            Mode::Report => (
                format!(
                    "utrace report: {} ({} sessions, {} functions)",
                    self.data,
                    self.sessions.len(),
                    self.rows.len()
                ),
                pct(self.report_cursor, self.rows.len()),
            ),
            Mode::Info => (
                format!("utrace info: {}", self.data),
                pct(
                    self.info_top,
                    self.info.len().saturating_sub(self.height) + 1,
                ),
            ),
        }
    }

    /// The report line of row `r`.
    pub fn report_line(&self, r: usize) -> String {
        let row = &self.rows[r];
        let mut s = String::from("  ");
        push_duration(&mut s, row.total, false);
        s.push_str("  ");
        push_duration(&mut s, row.self_time, false);
        s.push_str(&format!("  {:>10}  {}", row.calls, row.name));
        s
    }

    /// The report header, `*` on the sort column.
    pub fn report_header(&self) -> String {
        let mark = |k: Sort| if self.sort == k { '*' } else { ' ' };
        format!(
            " {}TOTAL TIME  {}SELF TIME       {}CALLS  FUNCTION",
            mark(Sort::Total),
            mark(Sort::Self_),
            mark(Sort::Calls)
        )
    }
}

/// What the help box lists.
pub const HELP: &[&str] = &[
    "ARROW, j/k     move the cursor",
    "PgUp/PgDn      move a page",
    "Home/End       first / last line",
    "ENTER          fold/unfold (graph), show in the graph (report)",
    "G              full graph",
    "g              graph of the current function",
    "R              report",
    "I              info",
    "c / e          collapse / expand the direct children",
    "C / E          collapse / expand all descendants",
    "n / p          next / previous sibling",
    "u              parent",
    "l              longest child",
    "z              center the cursor line",
    "s              next sort column (report)",
    "/              search",
    "> or N         next match",
    "< or P         previous match",
    "h or ?         this help",
    "q              back / quit",
];

#[cfg(test)]
mod tests {
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
}
