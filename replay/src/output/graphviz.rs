//! `dump --graphviz` (cli.md §8.4): the merged call tree as a DOT digraph, one edge per call
//! path (depth first, in first-call order) labelled with its call count. The root is the
//! executable's basename.

use super::calltree::NameTree;
use super::dump::{exe_basename, write_notices, DumpOptions};
use crate::config::Config;
use crate::walk::timed::Walk;
use crate::Result;
use record_format::TraceDir;
use std::io::Write;

/// Writes the DOT graph of `dir`; returns the warnings.
pub fn dump(
    dir: &TraceDir,
    cfg: &Config,
    opts: &DumpOptions,
    out: &mut dyn Write,
) -> Result<Vec<String>> {
    let walk = Walk::new(dir, cfg, true);
    write_notices(out, &walk.notices)?;
    let exe = exe_basename(dir);
    // uftrace's header line, odd quote included.
    writeln!(out, "# version\":\"{}\"", opts.version)?;
    if let Some(cmd) = &dir.info.cmdline {
        writeln!(out, "# command_line \"{cmd}\"")?;
    }
    write!(out, "\ndigraph \"{exe}\" {{ \n")?;
    let mut tree = NameTree::new(&exe, dir.data.len(), 0);
    let warnings = walk.run(&mut tree)?;
    let mut err = Ok(());
    tree.walk(|n, _| {
        let node = tree.node(n);
        if node.calls == 0 || err.is_err() {
            return;
        }
        let parent = node.parent.map(|p| tree.name(p));
        err = match parent {
            Some(p) => writeln!(
                out,
                "    \"{p}\" -> \"{}\" [xlabel = \"{}\"]",
                tree.name(n),
                node.calls
            ),
            None => writeln!(
                out,
                "    \"{}\" [xlabel = \"{}\"]",
                tree.name(n),
                node.calls
            ),
        };
    });
    err?;
    writeln!(out, "}}")?;
    Ok(warnings)
}
