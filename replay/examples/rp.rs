//! Minimal driver for development: `cargo run -p replay --example rp -- DIR`.
fn main() {
    let dir = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "uftrace.data".into());
    let d = record_format::TraceDir::open(std::path::Path::new(&dir)).expect("open");
    let cfg = replay::Config::default();
    let opts = replay::ReplayOptions::default();
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    replay::replay(&d, &cfg, &opts, &mut out, &mut |w| eprintln!("WARN: {w}")).expect("replay");
}
