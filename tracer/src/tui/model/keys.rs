//! What a key does in each view, once the common keys (quit, help, view changes) are handled:
//! the graph's moves, folds and jumps, the search over it, the report's sort and jump to the
//! graph, and the info text's scrolling.

use super::{App, Key, Mode, Sort};

/// Where a moving key (up, down, a page, home, end; `k`/`j` too) takes a cursor at `cursor`
/// in a list whose last row is `last`; `None` for any other key.
fn moved(k: Key, cursor: usize, last: usize, page: usize) -> Option<usize> {
    Some(match k {
        Key::Up | Key::Char('k') => cursor.saturating_sub(1),
        Key::Down | Key::Char('j') => (cursor + 1).min(last),
        Key::PageUp => cursor.saturating_sub(page),
        Key::PageDown => (cursor + page).min(last),
        Key::Home => 0,
        Key::End => last,
        _ => return None,
    })
}

/// The `n` positions of a list of `n` rows after `start` (from `start` itself when `here`),
/// going forward or backward and wrapping around: the order a search visits them in.
fn cyclic(start: usize, n: usize, forward: bool, here: bool) -> impl Iterator<Item = usize> {
    (0..n).map(move |k| {
        let off = if here { k } else { k + 1 };
        if forward {
            (start + off) % n
        } else {
            (start + n * 2 - off) % n
        }
    })
}

impl App {
    pub(super) fn graph_key(&mut self, k: Key) {
        let last = self.visible.len().saturating_sub(1);
        let cur = self.current();
        if let Some(to) = moved(k, self.cursor, last, self.page()) {
            self.cursor = to;
            self.scroll();
            return;
        }
        match k {
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
    pub(super) fn find(&mut self, forward: bool, here: bool) {
        if self.search.is_empty() {
            return;
        }
        if self.mode == Mode::Report {
            let n = self.rows.len();
            let start = self.report_cursor;
            let hit =
                cyclic(start, n, forward, here).find(|&r| self.rows[r].name.contains(&self.search));
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
        let hit = cyclic(start, n, forward, here)
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

    pub(super) fn report_key(&mut self, k: Key) {
        let last = self.rows.len().saturating_sub(1);
        if let Some(to) = moved(k, self.report_cursor, last, self.page()) {
            self.report_cursor = to;
            self.scroll();
            return;
        }
        match k {
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

    pub(super) fn info_key(&mut self, k: Key) {
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
}
