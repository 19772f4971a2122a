//! Output formats. Each module renders one format.

pub mod args;
pub mod events;
pub mod graph;
pub mod histogram;
pub mod replay;
pub mod report;
