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

mod builder;
use builder::*;

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
                let n = &g.tree.nodes[id as usize];
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

/// One node of a [`CallGraph`]: a distinct call path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GraphNode {
    pub name: String,
    pub calls: u64,
    /// Total time of its calls (ns).
    pub total: u64,
    /// Total time minus its callees' (ns).
    pub self_time: u64,
    /// Address of its first call's entry.
    pub addr: u64,
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
            .tree
            .nodes
            .iter()
            .enumerate()
            .map(|(i, n)| GraphNode {
                name: if i == 0 {
                    root.clone()
                } else {
                    func_name(sym, n.func).to_string()
                },
                calls: n.calls,
                total: n.time,
                self_time: n.time.saturating_sub(n.child_time),
                addr: n.addr,
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
    // `--srcline`: ` [file:line]` after every name but the root's (and the switches').
    let name_of = |f: FuncId| {
        let name = func_name(sym, f);
        let loc = (cfg.srcline && !builder::SCHED_FUNCS.contains(&f))
            .then(|| sym.srcline(f))
            .flatten();
        match loc {
            Some(loc) => format!("{name} [{}]", loc.text()),
            None => name.to_string(),
        }
    };
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
        if g.tree.nodes[0].time == 0 && g.tree.nodes[0].children.is_empty() {
            continue;
        }
        p.s.push_str("========== FUNCTION CALL GRAPH ==========\n");
        if !opts.fields.is_empty() {
            p.s.push_str("# ");
            let heads: Vec<&str> = opts.fields.iter().map(|f| f.header()).collect();
            p.s.push_str(&heads.join("  "));
            p.s.push_str("   FUNCTION");
            p.s.push_str(if cfg.srcline { " [SOURCE]\n" } else { "\n" });
        }
        p.mask.clear();
        print_tree(g, &root_name, &name_of, &mut p, out)?;
        p.s.push('\n');
    }
    out.write_all(p.s.as_bytes())?;
    Ok(warnings)
}
