//! `record -k` + `report --io` on the I/O testprogs, on this machine's kernel (event mode, or
//! function_graph where the kernel has it): the two 512-byte O_DIRECT reads of
//! testprogs/aio_read linked to their io_submit and to the io_getevents that reaped them,
//! those of testprogs/uring_read to their SQEs (user_data 1 and 2) and to the io_uring_enter
//! that posted their CQEs (the writes: kernel_writes.rs); each
//! read at the sector FIEMAP gives for its file offset; every request's layers in time order
//! and summing to its total. Needs root, tracefs with block events, and a directory on a
//! block device: skipped (with a message) without.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::util::{self, Mode};

use util::TRACEFS;

/// The I/O testprogs: they need libaio / liburing (tests/setup.sh installs them) and are
/// covered here rather than by the record matrix or the slow-path comparison.
pub fn covers(name: &str) -> bool {
    [
        "aio_read",
        "aio_reapers",
        "aio_local",
        "uring_read",
        "sync_write",
        "flush_write",
    ]
    .contains(&name)
}

/// Whether the kernel's block (and `extra`) events can be recorded here.
pub(crate) fn possible(extra: &str) -> bool {
    util::kernel_event_possible("block/block_rq_issue") && util::kernel_event_possible(extra)
}

/// `major,minor` of a directory's filesystem when it is a block device's.
fn block_device(dir: &Path) -> Option<(u64, u64)> {
    let dev = std::fs::metadata(dir).ok()?.dev();
    let major = ((dev >> 8) & 0xfff) | ((dev >> 32) & !0xfff);
    let minor = (dev & 0xff) | ((dev >> 12) & !0xff);
    Path::new(&format!("/sys/dev/block/{major}:{minor}"))
        .exists()
        .then_some((major, minor))
}

/// A scratch directory on a block-backed filesystem (O_DIRECT and block requests need one;
/// /tmp is often a tmpfs): the first of /var/tmp, /tmp and the build directory that is.
fn block_dir() -> Option<tempfile::TempDir> {
    let target = util::utrace_bin().parent().map(Path::to_path_buf);
    [PathBuf::from("/var/tmp"), PathBuf::from("/tmp")]
        .into_iter()
        .chain(target)
        .find(|d| block_device(d).is_some())
        .and_then(|d| tempfile::tempdir_in(d).ok())
}

/// Whether the scratch directory's filesystem records `event` (`system/name`) for its files:
/// the kernel has the event and the filesystem is one that uses it (`magics`: `stat -f`'s
/// hex type, ext4's `ef53`, XFS's `58465342`).
pub(crate) fn fs_events(event: &str, magics: &[&str]) -> bool {
    let Some(scratch) = block_dir() else {
        return false;
    };
    let out = Command::new("stat")
        .args(["-f", "-c", "%t"])
        .arg(scratch.path())
        .output();
    let magic = out.map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string());
    Path::new(TRACEFS)
        .join("events")
        .join(event)
        .join("format")
        .exists()
        && magic.is_ok_and(|m| magics.contains(&m.as_str()))
}

/// The two 512-byte reads went through iomap's direct I/O: each request's path has the
/// `fs` point right after `before` (its system call, and its SQE for io_uring), and names
/// the file's range it read.
fn check_dio(reqs: &[Req], before: &[&str]) {
    let mut offsets: Vec<&str> = Vec::new();
    for r in reqs
        .iter()
        .filter(|r| r.kind == "read" && r.submitted.contains("submit_reads"))
    {
        let layers: Vec<&str> = r.path.iter().map(|p| p.0.as_str()).collect();
        assert_eq!(layers[..before.len()], *before, "{r:?}");
        assert_eq!(layers[before.len()], "fs", "{r:?}");
        let range = r.submitted.split(" iomap dio ino ").nth(1);
        let range = range.unwrap_or_else(|| panic!("{r:?}"));
        offsets.push(range.split_once(' ').unwrap().1);
    }
    offsets.sort_unstable();
    assert_eq!(offsets, ["offset 0 length 512", "offset 4096 length 512"]);
}

/// One request of the `# worst requests` list.
#[derive(Debug)]
pub(crate) struct Req {
    pub(crate) total_us: f64,
    pub(crate) kind: String,
    pub(crate) dev: String,
    pub(crate) sector: u64,
    pub(crate) bytes: u64,
    pub(crate) submitted: String,
    /// (layer, microseconds since the previous point; 0 for the first).
    pub(crate) path: Vec<(String, f64)>,
    pub(crate) reaped: Option<String>,
}

fn micros(num: &str, unit: &str) -> f64 {
    let v: f64 = num.parse().unwrap_or_else(|_| panic!("not a time: {num}"));
    match unit {
        "us" => v,
        "ms" => v * 1e3,
        "s" => v * 1e6,
        _ => panic!("unit {unit}"),
    }
}

/// The requests of `report --io`'s worst list (all of them when at most 10).
fn parse(report: &str) -> Vec<Req> {
    let mut out: Vec<Req> = Vec::new();
    let list = report
        .split("# worst requests (by total)\n")
        .nth(1)
        .unwrap_or_else(|| panic!("no worst list:\n{report}"));
    for line in list.lines() {
        let t = line.trim_start();
        if let Some(rest) = t.strip_prefix("submitted: ") {
            out.last_mut().unwrap().submitted = rest.to_string();
        } else if let Some(rest) = t.strip_prefix("path: ") {
            let mut path = Vec::new();
            for step in rest.split(" > ") {
                let w: Vec<&str> = step.split_whitespace().collect();
                let us = match w.as_slice() {
                    [_, "0"] => 0.0,
                    [_, d, unit] => {
                        assert!(d.starts_with('+'), "a step back in time: {line}");
                        micros(&d[1..], unit)
                    }
                    _ => panic!("bad path step {step:?} in {line}"),
                };
                path.push((w[0].to_string(), us));
            }
            out.last_mut().unwrap().path = path;
        } else if let Some(rest) = t.strip_prefix("reaped by ") {
            out.last_mut().unwrap().reaped = Some(rest.to_string());
        } else if t.starts_with("not reaped") {
        } else if let Some((_, rest)) = t.split_once(". ") {
            // `1. 117.384 us  read 254,0 sector 240282736 + 1 (512 bytes, RS) tid 21894`
            let w: Vec<&str> = rest.split_whitespace().collect();
            out.push(Req {
                total_us: micros(w[0], w[1]),
                kind: w[2].to_string(),
                dev: w[3].to_string(),
                sector: w[5].parse().unwrap(),
                bytes: w[8].trim_start_matches('(').parse().unwrap(),
                submitted: String::new(),
                path: Vec::new(),
                reaped: None,
            });
        }
    }
    out
}

/// Records `prog` (linked with `libs`) with -k on a file of a block-backed directory; its
/// stdout, the requests of `report --io` (checked for what holds for every request) and the
/// directory holding the data directory `data`.
pub(crate) fn record(prog: &str, libs: &[&str]) -> Option<(String, Vec<Req>, tempfile::TempDir)> {
    let Some(scratch) = block_dir() else {
        eprintln!("kernel_io skipped: no directory on a block device");
        return None;
    };
    Some(record_in(prog, libs, scratch.path()))
}

/// [`record`] on a file of directory `scratch` (on a block-backed filesystem).
pub(crate) fn record_in(
    prog: &str,
    libs: &[&str],
    scratch: &Path,
) -> (String, Vec<Req>, tempfile::TempDir) {
    record_args(prog, libs, scratch, &[])
}

/// [`record_in`], with `args` after the file's name.
fn record_args(
    prog: &str,
    libs: &[&str],
    scratch: &Path,
    args: &[&str],
) -> (String, Vec<Req>, tempfile::TempDir) {
    let exe = util::testprog_with(prog, Mode::Pg, libs);
    let file = scratch.join(format!("{prog}.dat"));
    // Once untraced first: on a cold filesystem, allocating the file's blocks reads the block
    // group's metadata (tens of 4 KiB reads during prepare_file's fsync), which would crowd
    // the program's own requests out of the report's list of the 20 worst.
    util::run({
        let mut cmd = Command::new(&exe);
        cmd.arg(&file).args(args);
        cmd
    })
    .assert_success();
    let _tracefs = util::tracefs_lock();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("data");
    let mut cmd = Command::new(util::utrace_bin());
    cmd.args(["record", "--no-event", "-k", "-d"])
        .arg(&dir)
        .arg(&exe)
        .arg(&file)
        .args(args);
    let recorded = util::run(cmd);
    recorded.assert_success();
    let mut cmd = Command::new(util::utrace_bin());
    cmd.args(["report", "--io", "--no-pager", "-d"]).arg(&dir);
    let report = util::run(cmd);
    report.assert_success();
    let reqs = parse(&report.stdout);
    for r in &reqs {
        let sum: f64 = r.path.iter().map(|p| p.1).sum();
        // Each time is printed to 3 decimals of its unit (ns for us, us for ms).
        let slack = 0.001 * (r.path.len() as f64 + 1.0) + 0.001 * (sum + r.total_us);
        if r.path.first().is_some_and(|p| p.0 == "syscall") && r.reaped.is_some() {
            assert!((sum - r.total_us).abs() <= slack, "{r:?}\n{report}");
        }
    }
    (recorded.stdout, reqs, tmp)
}

/// The two 512-byte reads: at the sectors of file offsets 0 and 4096 (FIEMAP's extent, plus
/// the partition's start), each submitted by `submit_call` under submit_reads and reaped by
/// one of `reap_calls` under one of `reapers` (the functions during which the completion may
/// become visible).
fn check_reads(
    stdout: &str,
    reqs: &[Req],
    submit_call: &str,
    reap_calls: &[&str],
    reapers: &[&str],
) {
    let mut reads: Vec<&Req> = reqs
        .iter()
        .filter(|r| r.kind == "read" && r.submitted.contains("submit_reads"))
        .collect();
    reads.sort_by_key(|r| r.sector);
    assert_eq!(reads.len(), 2, "{reqs:#?}");
    assert_eq!(reads[1].sector - reads[0].sector, 8, "{reqs:#?}");
    if let Some(extent) = stdout
        .lines()
        .find_map(|l| l.strip_prefix("extent: ")?.trim().parse::<u64>().ok())
    {
        let (major, minor) = reads[0].dev.split_once(',').unwrap();
        let start = std::fs::read_to_string(format!("/sys/dev/block/{major}:{minor}/start"))
            .ok()
            .and_then(|s| s.trim().parse::<u64>().ok())
            .unwrap_or(0);
        assert_eq!(reads[0].sector, extent / 512 + start, "{reqs:#?}");
    }
    for r in reads {
        assert_eq!(r.bytes, 512);
        assert!(r.submitted.contains(&format!("[{submit_call}]")), "{r:?}");
        let reaped = r.reaped.as_deref().unwrap_or_else(|| panic!("{r:?}"));
        assert!(
            reap_calls
                .iter()
                .any(|c| reaped.starts_with(&format!("{c} in "))),
            "{r:?}"
        );
        assert!(reapers.iter().any(|f| reaped.contains(f)), "{r:?}");
        let layers: Vec<&str> = r.path.iter().map(|p| p.0.as_str()).collect();
        for l in ["syscall", "issue", "complete", "reap"] {
            assert!(layers.contains(&l), "{r:?}");
        }
    }
}

#[test]
fn aio_reads_link_io_submit_to_their_io_getevents() {
    if !possible("syscalls/sys_exit_io_getevents") {
        eprintln!("kernel_io skipped: needs root and tracefs with block and syscalls events");
        return;
    }
    let Some((stdout, reqs, tmp)) = record("aio_read", &["-laio"]) else {
        return;
    };
    assert!(stdout.contains("reads: 2"), "{stdout}");
    check_reads(
        &stdout,
        &reqs,
        "io_submit",
        &["io_getevents"],
        &["reap_reads"],
    );
    // -F/-N select the requests by the functions they were submitted under.
    let report_with = |opts: &[&str]| {
        let mut cmd = Command::new(util::utrace_bin());
        cmd.args(["report", "--io", "--no-pager"])
            .args(opts)
            .arg("-d")
            .arg(tmp.path().join("data"));
        let out = util::run(cmd);
        out.assert_success();
        out.stdout
    };
    let only = report_with(&["-F", "submit_reads"]);
    assert!(only.starts_with("# I/O requests: 2 "), "{only}");
    assert!(parse(&only)
        .iter()
        .all(|r| r.submitted.contains("submit_reads")));
    let rest = report_with(&["-N", "submit_reads"]);
    let rest = parse(&rest);
    assert!(!rest.is_empty(), "the file's preparation wrote blocks");
    assert!(rest.iter().all(|r| !r.submitted.contains("submit_reads")));
    assert!(reqs
        .iter()
        .filter(|r| r.kind == "read")
        .all(|r| r.submitted.contains("aio ctx 0x")));
    let dio = fs_events("iomap/iomap_dio_rw_begin", &["ef53", "58465342"]);
    if dio {
        check_dio(&reqs, &["syscall"]);
    }
    // `dump --perfetto` draws each request as a flow: from the io_submit system call through
    // the block events to the io_getevents that reaped it.
    if !crate::analysis_perfetto::have_perfetto("aio_reads_link_io_submit_to_their_io_getevents") {
        return;
    }
    let v = crate::analysis_perfetto::perfetto(&tmp.path().join("data"), &[]);
    let edges = v["flows"].as_array().unwrap();
    let name = |end: &serde_json::Value| end[1].as_str().unwrap_or("").to_string();
    let from_submit = edges
        .iter()
        .filter(|e| name(&e[0]).ends_with("sys_io_submit"))
        .count();
    let to_reap = edges
        .iter()
        .filter(|e| name(&e[1]).ends_with("sys_io_getevents"))
        .count();
    assert!(from_submit >= 2 && to_reap >= 2, "{edges:#?}");
    assert!(edges
        .iter()
        .any(|e| name(&e[1]).contains("block_rq_complete")));
    if dio {
        assert!(edges.iter().any(|e| name(&e[0]).ends_with("sys_io_submit")
            && name(&e[1]).contains("iomap_dio_rw_begin")));
    }
}

/// Three reads of one io_submit reaped one at a time by three functions (testprogs/
/// aio_reapers): with libmcount's markers each request names its iocb (offset, length,
/// data) and is reaped by the very function whose io_getevents returned it, as the program
/// says; tracing leaves the program's next descriptor and errno as they are untraced.
#[test]
fn aio_requests_know_their_iocb_and_the_function_that_reaped_it() {
    if !possible("syscalls/sys_exit_io_getevents") {
        eprintln!("kernel_io skipped: needs root and tracefs with block and syscalls events");
        return;
    }
    let Some(scratch) = block_dir() else {
        eprintln!("kernel_io skipped: no directory on a block device");
        return;
    };
    let exe = util::testprog_with("aio_reapers", Mode::Pg, &["-laio"]);
    let untraced = util::run({
        let mut cmd = Command::new(&exe);
        cmd.arg(scratch.path().join("untraced.dat"));
        cmd
    });
    untraced.assert_success();
    let (stdout, reqs, _tmp) = record_in("aio_reapers", &["-laio"], scratch.path());
    assert!(stdout.contains("reads: 3"), "{stdout}");
    let line = |out: &str, key: &str| out.lines().find(|l| l.starts_with(key)).map(str::to_string);
    for key in ["errno: ", "next fd: "] {
        assert_eq!(line(&stdout, key), line(&untraced.stdout, key), "{stdout}");
    }
    assert_eq!(line(&stdout, "errno: ").as_deref(), Some("errno: 77"));
    // errno across the calls that wrote markers: as set before each call.
    let errnos = |out: &str| -> Vec<String> {
        out.lines()
            .filter(|l| l.contains(" errno: "))
            .map(str::to_string)
            .collect()
    };
    assert_eq!(errnos(&stdout), errnos(&untraced.stdout), "{stdout}");
    assert_eq!(errnos(&stdout).len(), 4, "{stdout}");
    assert!(errnos(&stdout)
        .iter()
        .all(|l| l.ends_with(": 71") || l.ends_with(": 72")));
    // `reap_b: data 2 res 1024`: which function got which read.
    let got: Vec<(u64, String)> = stdout
        .lines()
        .filter_map(|l| {
            let (who, rest) = l.split_once(": data ")?;
            Some((rest.split(' ').next()?.parse().ok()?, who.to_string()))
        })
        .collect();
    assert_eq!(got.len(), 3, "{stdout}");
    let mut seen = Vec::new();
    for r in reqs
        .iter()
        .filter(|r| r.kind == "read" && r.submitted.contains("submit_reads"))
    {
        // `iocb 0x55.. pread fd 3 offset 4096 length 1024 data 0x2`
        let iocb = r.submitted.split(" iocb 0x").nth(1);
        let w: Vec<&str> = iocb.unwrap_or_else(|| panic!("{r:?}")).split(' ').collect();
        assert_eq!(
            (w[1], w[4], w[6], w[8]),
            ("pread", "offset", "length", "data")
        );
        let data = u64::from_str_radix(w[9].trim_start_matches("0x"), 16).unwrap();
        let want = [(0, 512), (4096, 1024), (12288, 512)][data as usize - 1];
        assert_eq!(
            (w[5].parse::<u64>().unwrap(), w[7].parse::<u64>().unwrap()),
            want
        );
        assert_eq!(r.bytes, want.1, "{r:?}");
        let who = &got.iter().find(|g| g.0 == data).unwrap().1;
        let reaped = r.reaped.as_deref().unwrap_or_else(|| panic!("{r:?}"));
        assert!(reaped.starts_with("io_getevents in "), "{r:?}");
        assert!(
            reaped.contains(&format!(" > {who} > reap_one > ")),
            "{r:?}\n{stdout}"
        );
        seen.push(data);
    }
    seen.sort_unstable();
    assert_eq!(seen, [1, 2, 3], "{reqs:#?}");
    // The first two reads next to each other on disk: two requests, each with its iocb, or
    // one of 1024 bytes (merged in the plug) given the first iocb and naming the second.
    let (stdout, reqs, _tmp) =
        record_args("aio_reapers", &["-laio"], scratch.path(), &["adjacent"]);
    assert!(stdout.contains("reads: 3"), "{stdout}");
    let first: Vec<&Req> = reqs
        .iter()
        .filter(|r| r.kind == "read" && r.submitted.contains(" pread fd "))
        .filter(|r| r.submitted.contains(" offset 0 length 512 data 0x1"))
        .collect();
    assert_eq!(first.len(), 1, "{reqs:#?}");
    let merged = first[0].submitted.contains(" (merged with iocb 0x");
    assert_eq!(first[0].bytes, if merged { 1024 } else { 512 }, "{reqs:#?}");
    if !merged {
        assert!(reqs
            .iter()
            .any(|r| r.submitted.contains(" offset 512 length 512 data 0x2")));
    }
}

/// libaio only in a plugin's local scope (testprogs/aio_local): the plugin's calls reach
/// libmcount's interposed `io_submit`/`io_getevents`/`io_pgetevents`, which find no libaio
/// after them and make the system calls themselves. The program's output must be the
/// untraced one, recorded with and (where tracefs allows) without `-k`.
#[test]
fn aio_without_a_global_libaio_behaves_as_untraced() {
    let exe = util::testprog("aio_local", Mode::Pg);
    let scratch = tempfile::tempdir().unwrap();
    let file = scratch.path().join("aio_local.txt");
    let run = |prefix: &[&str]| {
        let mut cmd = match prefix.split_first() {
            Some((first, rest)) => {
                let mut cmd = Command::new(first);
                cmd.args(rest);
                cmd
            }
            None => Command::new(&exe),
        };
        if !prefix.is_empty() {
            cmd.arg(&exe);
        }
        cmd.arg(&file);
        let out = util::run(cmd);
        out.assert_success();
        out.stdout
    };
    let untraced = run(&[]);
    assert!(untraced.contains("io_pgetevents: 2\n"), "{untraced}");
    assert!(untraced.contains("data 4 res 8: dddddddd"), "{untraced}");
    let bin = util::utrace_bin();
    let bin = bin.to_str().unwrap();
    let data = scratch.path().join("data");
    let data = data.to_str().unwrap();
    assert_eq!(run(&[bin, "record", "-d", data]), untraced);
    if possible("syscalls/sys_exit_io_getevents") {
        let _tracefs = util::tracefs_lock();
        assert_eq!(
            run(&[bin, "record", "--no-event", "-k", "-d", data]),
            untraced
        );
    }
}

#[test]
fn uring_reads_link_their_sqes_to_the_cqes() {
    if !possible("io_uring/io_uring_complete") {
        eprintln!("kernel_io skipped: needs root and tracefs with block and io_uring events");
        return;
    }
    let Some((stdout, reqs, _)) = record("uring_read", &["-luring"]) else {
        return;
    };
    assert!(stdout.contains("reads: 2"), "{stdout}");
    // A uring completion is posted by task work when the task next leaves the kernel. That
    // is normally in io_uring_wait_cqe's io_uring_enter, but on a busy machine the task may
    // be kept off the CPU inside the submitting io_uring_enter until after the device
    // completed (the CQE is then posted before that call returns, and the program finds it
    // without entering the kernel again), or be preempted in user space (the CQE is posted
    // on the way back, outside any system call: "task_work in" the functions then open).
    check_reads(
        &stdout,
        &reqs,
        "io_uring_enter",
        &["io_uring_enter", "task_work"],
        &["reap_reads", "submit_reads"],
    );
    let mut user_data: Vec<&str> = reqs
        .iter()
        .filter(|r| r.kind == "read")
        .map(|r| {
            assert!(r.submitted.contains(" res 512"), "{r:?}");
            let path: Vec<&str> = r.path.iter().map(|p| p.0.as_str()).collect();
            assert!(path.contains(&"sqe") && path.contains(&"cqe"), "{r:?}");
            let rest = r.submitted.split("user_data ").nth(1).unwrap_or("");
            rest.split(" iomap dio ").next().unwrap_or("")
        })
        .collect();
    user_data.sort_unstable();
    assert_eq!(user_data, ["0x1 res 512", "0x2 res 512"]);
    if fs_events("iomap/iomap_dio_rw_begin", &["ef53", "58465342"]) {
        check_dio(&reqs, &["syscall", "sqe"]);
    }
}

/// Without kernel data (no -k), `report --io` says there is nothing to report and succeeds.
#[test]
fn report_io_without_kernel_data_says_so() {
    let exe = util::testprog("abc", Mode::Pg);
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("data");
    let mut cmd = Command::new(util::utrace_bin());
    cmd.args(["record", "--no-event", "-d"]).arg(&dir).arg(&exe);
    util::run(cmd).assert_success();
    let mut cmd = Command::new(util::utrace_bin());
    cmd.args(["report", "--io", "--no-pager", "-d"]).arg(&dir);
    let out = util::run(cmd);
    out.assert_success();
    assert!(out.stdout.starts_with("# no I/O requests: "), "{out}");
}
