//! `dump --mermaid` (cli.md §8.5): an HTML page drawing the merged call tree with mermaid.js.
//! The flowchart lines are uftrace's (`DEPTH_ID["caller"] -->|CALLS| DEPTH_ID["callee"];`,
//! depth first, ids in creation order from 0 at the root, the executable's basename); the
//! page around them is utrace's own.

use super::calltree::NameTree;
use super::dump::{exe_basename, write_notices, DumpOptions};
use crate::config::Config;
use crate::walk::timed::Walk;
use crate::Result;
use record_format::TraceDir;
use std::io::Write;

const PAGE_HEAD: &str = "<meta charset=\"utf-8\">
<title>utrace call graph</title>
<style>
body { font-family: sans-serif; }
.mermaid { overflow: auto; }
</style>
<p>Function call graph recorded by utrace: each arrow is labelled with the number of calls.</p>
";

const PAGE_TAIL: &str =
    "<script src=\"https://cdn.jsdelivr.net/npm/mermaid@9/dist/mermaid.min.js\"></script>
<script>
mermaid.initialize({ startOnLoad: true, maxTextSize: 99999999, securityLevel: 'loose',
                     flowchart: { useMaxWidth: false, curve: 'basis' } });
</script>
</body>
</html>
";

/// Writes the mermaid page of `dir`; returns the warnings.
pub fn dump(
    dir: &TraceDir,
    cfg: &Config,
    _opts: &DumpOptions,
    out: &mut dyn Write,
) -> Result<Vec<String>> {
    let walk = Walk::new(dir, cfg, true);
    write_notices(out, &walk.notices)?;
    let exe = exe_basename(dir);
    write!(out, "<html>\n<body>\n")?;
    let mut tree = NameTree::new(&exe, dir.data.len(), 0);
    let warnings = walk.run(&mut tree)?;
    let root = tree.node(0);
    if root.time == 0 && root.children.is_empty() {
        // Nothing was called: uftrace stops after the opening tags.
        return Ok(warnings);
    }
    writeln!(
        out,
        "<h2>Function Call Graph for <span style=\"color:blue\" id=\"baseName\">{exe}</span></h2>"
    )?;
    out.write_all(PAGE_HEAD.as_bytes())?;
    out.write_all(b"<div class=\"mermaid\" id=\"meraid_graph\">\nflowchart TB\n")?;
    let mut err = Ok(());
    // Each edge is printed when its callee is visited: depth first, in first-call order.
    tree.walk(|n, depth| {
        let node = tree.node(n);
        let Some(p) = node.parent else { return };
        if err.is_err() {
            return;
        }
        err = writeln!(
            out,
            "  {}_{}[\"{}\"] -->|{}| {depth}_{}[\"{}\"];",
            depth - 1,
            p,
            tree.name(p),
            node.calls,
            n,
            tree.name(n)
        );
    });
    err?;
    out.write_all(b"</div>\n")?;
    out.write_all(PAGE_TAIL.as_bytes())?;
    Ok(warnings)
}
