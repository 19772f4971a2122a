//! Output formats: each module renders one format from the steps of the one walk
//! ([`crate::walk`]); [`calltree`] is the one call-tree builder of `graph`, the tui and the
//! dump graph formats. The walk never imports this module.

pub mod calltree;
pub mod chrome;
pub mod dump;
pub mod dump_raw;
pub mod flame;
pub mod graph;
pub mod graphviz;
pub mod histogram;
pub mod info;
pub mod io;
pub mod mermaid;
pub mod perfetto;
pub mod replay;
pub mod report;
pub mod task_graph;
