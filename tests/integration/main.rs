//! Integration tests: one test binary (ripgrep's layout) with a small helper module.
//!
//! * `replay_diff`: uftrace records the test programs, then `utrace replay` must print what
//!   `uftrace replay` prints (needs gcc and uftrace);
//! * `fixtures`: `utrace replay` on committed uftrace data against committed golden output
//!   (needs neither);
//! * `bad_input`: broken data directories must give an error, never a panic;
//! * `crafted`: directories written by record-format (lost records, unfinished calls),
//!   replayed by both tools;
//! * `symbols`: replay without `.sym` files reads the ELF files instead.
//!
//! Build the binary first: `cargo build --release && cargo test --release -p utrace-tests`.

mod bad_input;
mod crafted;
mod fixtures;
mod normalize;
mod record;
mod replay_diff;
mod symbols;
mod util;
