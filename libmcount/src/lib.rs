//! utrace's runtime, preloaded into the traced program. The recording hooks arrive with the
//! record issue; until then the library is empty so the workspace layout and the release
//! artifacts (`target/release/libmcount.so`) are in place.
