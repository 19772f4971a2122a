//! `report --io`: the I/O requests of a `record -k` trace ([`crate::io`]), grouped by kind,
//! device, interface and submitting user function, with their latency per layer.
//!
//! ```text
//! # I/O requests: 2 (of which 2 reaped), 1024 bytes
//!
//!   Requests     Bytes  Kind   Device  Via   Function       Call avg  Queue avg  Device avg   Reap avg  Total avg
//!   ========  ========  =====  ======  ====  ============  ========== ========== ========== ========== ==========
//!          2      1024  read   254,0   aio   submit_reads    8.551 us   1.203 us  300.120 us  10.301 us 320.175 us
//!
//! # latency per layer (p50 / p90 / p99 / max)
//! ## read 254,0 aio submit_reads
//!   call     :   8.102 us   9.000 us   9.000 us   9.000 us
//!   ...
//!
//! ## read 254,0 aio submit_reads: device latency
//!      usecs               : count     distribution
//!        256 -> 511        : 2        |****************************************|
//!
//! # worst requests (by total)
//!   1. 320.175 us  read 254,0 sector 248728936 + 1 (512 bytes, RS) tid 7049
//!        submitted: main > submit_reads > io_submit [io_submit] iomap dio ino 1234 offset 0 length 512
//!        path: syscall 0 > fs +2.100 us > insert +6.451 us > issue +1.203 us > complete +300.120 us > reap +10.301 us
//!        reaped by io_getevents in main > reap_reads > io_getevents (tid 7049)
//! ```
//!
//! Layers: in the submitting call (its entry to the request's insertion into the block
//! layer, or its issue when it was not inserted), queued (insertion to issue), on the device
//! (issue to completion), waiting to be reaped (completion to the return of the call that
//! reaped it). A request's layers sum to its total. Averages and percentiles of a layer count
//! the requests where both ends of it were seen (`-` when none).

use crate::io::{FsKind, Request, Via};
use crate::output::histogram::Histogram;
use record_format::aio::Iocb;
use record_format::timeval::push_duration;
use std::collections::BTreeMap;
use std::io::Write;

/// The layers' names, in [`Request::layers`] order.
const LAYERS: [&str; 4] = ["call", "queue", "device", "reap"];

/// How many of the slowest requests are listed.
pub const WORST: usize = 20;

/// A group of requests: kind, device, interface, submitting function.
type Key = (&'static str, u32, Via, String);

/// Time in ns as replay prints durations ([`push_duration`]: `12.345 us`, truncated), without
/// its left padding; 0 is `0.000 us`.
fn duration(ns: u64) -> String {
    if ns == 0 {
        return "0.000 us".to_string();
    }
    let mut s = String::with_capacity(16);
    push_duration(&mut s, ns, false);
    s.trim_start().to_string()
}

/// `major,minor` of a kernel `dev_t` (20-bit minor).
fn device(dev: u32) -> String {
    format!("{},{}", dev >> 20, dev & ((1 << 20) - 1))
}

fn via(v: Via) -> &'static str {
    match v {
        Via::Aio => "aio",
        Via::Uring => "uring",
        Via::Sync => "sync",
        Via::Writeback => "wb",
        Via::Journal => "jbd2",
    }
}

/// The `q`-quantile (0..=1) of sorted `v` (nearest rank).
fn quantile(v: &[u64], q: f64) -> u64 {
    if v.is_empty() {
        return 0;
    }
    let rank = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len());
    v[rank - 1]
}

/// Per group and layer, the latencies seen, sorted.
fn groups(reqs: &[Request]) -> BTreeMap<Key, (Vec<&Request>, [Vec<u64>; 5])> {
    let mut out: BTreeMap<Key, (Vec<&Request>, [Vec<u64>; 5])> = BTreeMap::new();
    for r in reqs {
        let key = (r.kind(), r.rq.dev, r.via, r.path.function().to_string());
        let g = out.entry(key).or_default();
        g.0.push(r);
        for (i, l) in r.layers().into_iter().enumerate() {
            g.1[i].extend(l);
        }
        g.1[4].push(r.total());
    }
    for g in out.values_mut() {
        for v in &mut g.1 {
            v.sort_unstable();
        }
    }
    out
}

fn avg(v: &[u64]) -> String {
    match v.len() {
        0 => "-".to_string(),
        n => duration(v.iter().sum::<u64>() / n as u64),
    }
}

/// Writes the report of `reqs` to `out`.
pub fn report(reqs: &[Request], out: &mut dyn Write) -> std::io::Result<()> {
    if reqs.is_empty() {
        writeln!(
            out,
            "# no I/O requests: record with -k as root (block, io_uring and libaio events) and \
             run a program that reaches a block device"
        )?;
        return Ok(());
    }
    let reaped = reqs.iter().filter(|r| r.reaper.is_some()).count();
    let bytes: u64 = reqs.iter().map(|r| r.rq.bytes).sum();
    writeln!(
        out,
        "# I/O requests: {} (of which {reaped} reaped), {bytes} bytes\n",
        reqs.len()
    )?;
    let groups = groups(reqs);
    let fw = groups.keys().map(|k| k.3.len()).max().unwrap_or(8).max(8);
    writeln!(
        out,
        "  Requests     Bytes  Kind     Device  Via    {:<fw$}  {:>11}{:>11}{:>11}{:>11}{:>11}",
        "Function", "Call avg", "Queue avg", "Device avg", "Reap avg", "Total avg"
    )?;
    writeln!(
        out,
        "  ========  ========  =======  ======  =====  {}  {}",
        "=".repeat(fw),
        [" =========="; 5].concat()
    )?;
    for (key, (list, lat)) in &groups {
        let bytes: u64 = list.iter().map(|r| r.rq.bytes).sum();
        write!(
            out,
            "  {:>8}  {:>8}  {:<7}  {:<6}  {:<5}  {:<fw$}  ",
            list.len(),
            bytes,
            key.0,
            device(key.1),
            via(key.2),
            key.3
        )?;
        for v in lat {
            write!(out, "{:>11}", avg(v))?;
        }
        writeln!(out)?;
    }
    writeln!(out, "\n# latency per layer (p50 / p90 / p99 / max)")?;
    for (key, (list, lat)) in &groups {
        writeln!(
            out,
            "## {} {} {} {} ({} requests)",
            key.0,
            device(key.1),
            via(key.2),
            key.3,
            list.len()
        )?;
        for (name, v) in LAYERS.iter().chain(&["total"]).zip(lat) {
            if v.is_empty() {
                writeln!(out, "  {name:<7}: -")?;
                continue;
            }
            let q = [0.5, 0.9, 0.99, 1.0].map(|q| format!("{:>12}", duration(quantile(v, q))));
            writeln!(out, "  {name:<7}:{}", q.concat())?;
        }
    }
    for (key, (_, lat)) in &groups {
        for (name, v) in LAYERS.iter().chain(&["total"]).zip(lat) {
            if v.is_empty() {
                continue;
            }
            let mut h = Histogram::default();
            for &ns in v {
                h.add(ns / 1000);
            }
            writeln!(
                out,
                "\n## {} {} {} {}: {name} latency",
                key.0,
                device(key.1),
                via(key.2),
                key.3
            )?;
            write!(out, "{}", h.render("usecs"))?;
        }
    }
    worst(reqs, out)
}

/// The slowest requests by total, each with its path.
fn worst(reqs: &[Request], out: &mut dyn Write) -> std::io::Result<()> {
    let mut order: Vec<&Request> = reqs.iter().collect();
    order.sort_by_key(|r| std::cmp::Reverse(r.total()));
    writeln!(out, "\n# worst requests (by total)")?;
    for (n, r) in order.iter().take(WORST).enumerate() {
        writeln!(
            out,
            "  {}. {}  {} {} sector {} + {} ({} bytes, {}) tid {}",
            n + 1,
            duration(r.total()),
            r.kind(),
            device(r.rq.dev),
            r.rq.sector,
            r.rq.nr_sector,
            r.rq.bytes,
            r.rq.rwbs,
            r.tid
        )?;
        let frames = match r.path.frames.is_empty() {
            true => "-".to_string(),
            false => r.path.frames.join(" > "),
        };
        let mut extra = String::new();
        if let Some(ud) = r.user_data {
            extra += &format!(" user_data {ud:#x}");
        }
        if let Some(res) = r.cqe_res {
            extra += &format!(" res {res}");
        }
        if let Some((ctx, iocbs)) = r.aio {
            extra += &format!(" aio ctx {ctx:#x} iocbs {iocbs:#x}");
        }
        if let Some(cb) = r.iocbs.first() {
            extra += &iocb_text(cb);
            if r.iocbs.len() > 1 {
                let more: Vec<String> = r.iocbs[1..]
                    .iter()
                    .map(|cb| format!("{:#x} offset {}", cb.ptr, cb.offset))
                    .collect();
                extra += &format!(" (merged with iocb {})", more.join(", "));
            }
        }
        if let Some(fs) = &r.fs {
            extra += &match fs.kind {
                FsKind::Journal => format!(" journal commit transaction {}", fs.ino),
                _ => format!(" {} ino {}", fs.kind.name(), fs.ino),
            };
            if let Some((offset, length)) = fs.range {
                extra += &format!(" offset {offset} length {length}");
            }
        }
        writeln!(
            out,
            "       submitted: {frames} [{}]{extra}",
            r.syscall.as_deref().unwrap_or("outside a system call")
        )?;
        let mut path = String::new();
        let mut last = None;
        for p in &r.points {
            if !path.is_empty() {
                path += " > ";
            }
            path += p.layer.name();
            match last {
                None => path += " 0",
                // Points come in time order; a negative step would be a linking error.
                Some(t) if p.time >= t => path += &format!(" +{}", duration(p.time - t)),
                Some(t) => path += &format!(" -{}", duration(t - p.time)),
            }
            last = Some(p.time);
        }
        writeln!(out, "       path: {path}")?;
        match &r.reaper {
            Some(rp) => writeln!(
                out,
                "       reaped by {} in {} (tid {})",
                rp.call,
                match rp.path.frames.is_empty() {
                    true => "-".to_string(),
                    false => rp.path.frames.join(" > "),
                },
                rp.tid
            )?,
            None => writeln!(out, "       not reaped by a traced call")?,
        }
    }
    Ok(())
}

/// An iocb, as the worst requests show it (a vectored iocb's `nbytes` counts its iovecs).
fn iocb_text(cb: &Iocb) -> String {
    let size = match (cb.reads(), cb.length()) {
        (Some(_), None) => "iovecs",
        _ => "length",
    };
    format!(
        " iocb {:#x} {} fd {} offset {} {size} {} data {:#x}",
        cb.ptr,
        cb.op_name(),
        cb.fd,
        cb.offset,
        cb.nbytes,
        cb.data
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use record_format::aio::{CMD_PREAD, CMD_PWRITEV};

    #[test]
    fn a_vectored_iocb_shows_its_iovec_count() {
        let cb = Iocb {
            ptr: 0x50,
            data: 2,
            opcode: CMD_PWRITEV,
            fd: 3,
            buf: 0x9000,
            nbytes: 4,
            offset: 8192,
        };
        assert_eq!(
            iocb_text(&cb),
            " iocb 0x50 pwritev fd 3 offset 8192 iovecs 4 data 0x2"
        );
        let cb = Iocb {
            opcode: CMD_PREAD,
            nbytes: 512,
            ..cb
        };
        assert!(iocb_text(&cb).contains(" pread fd 3 offset 8192 length 512 "));
    }
}
