//! Output formats. Each module renders one format.

pub mod calltree;
pub mod chrome;
pub mod dump;
pub mod dump_raw;
pub mod flame;
pub mod graph;
pub mod graphviz;
pub mod histogram;
pub mod info;
pub mod mermaid;
pub mod replay;
pub mod report;
pub mod task_graph;
