//! Dynamic patching (`-P`/`-U`, runtime spec §11): functions that were not built with a
//! profiling call get one written into their first bytes at run time.
//!
//! [`reloc`] moves a function's first instructions out of the way (full dynamic patching of
//! code built without any compiler help).

pub mod reloc;
