//! The state of `utrace tui` and what each key does to it, apart from any terminal: the call
//! graph with folding, the report, the info text, search and jumps (cli.md §9).

use record_format::timeval::push_duration;
use replay::output::graph::{CallGraph, GraphField};

use super::tree::Tree;

mod keys;

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
#[path = "model_tests.rs"]
mod tests;
