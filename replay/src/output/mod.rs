//! Output formats. Each module renders one format.

pub mod args;
pub mod calltree;
pub mod chrome;
pub mod dump;
pub mod dump_raw;
pub mod events;
pub mod flame;
pub mod graph;
pub mod graphviz;
pub mod histogram;
pub mod info;
pub mod mermaid;
pub mod perf;
pub mod replay;
pub mod report;
pub mod task_graph;
