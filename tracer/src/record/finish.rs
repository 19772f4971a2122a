//! Completing a data directory after the traced process tree has ended: the `info` file (data-format.md §2) and one
//! `.sym` file per module of every session map (§7).

use super::launch::Ended;
use super::program::Program;
use super::symfiles::{add_map_build_ids, recorded_modules, write_module_syms, write_sym_files};
use anyhow::Context;
use record_format::info::{feat, ArgSpecInfo, CpuInfo, Info, InfoHeader, OsInfo, UsageInfo};
use record_format::raw::RECORD_SIZE;
use std::collections::BTreeSet;
use std::ffi::CStr;
use std::fs;
use std::path::Path;

/// What `info` says about the recording besides the data itself.
#[derive(Debug)]
pub struct RecordSummary<'a> {
    pub program: &'a Program,
    pub ended: &'a Ended,
    /// The recorder's own command line, words joined by spaces.
    pub cmdline: String,
    pub max_stack: u16,
    pub plthook: bool,
    /// `regex` or `glob`.
    pub pattern_type: &'static str,
    /// `v0.1.0 ( x86_64 )`.
    pub version: String,
    /// The ARG_SPEC section (`-A`, `-R`, `-a`).
    pub args: Option<ArgSpecInfo>,
    /// The executable's `.dbg` file was written.
    pub debug_info: bool,
    /// `--srcline` or `-L`: the libraries get `.dbg` files too.
    pub srcline: bool,
    /// The kernel files (`-k`) were written.
    pub kernel: bool,
    /// The `perf-cpu*.dat` files were written.
    pub perf: bool,
    /// `events.txt` names user SDT events (`-E`).
    pub events: bool,
    /// `--with-syms DIR`: a module's `.sym` file is copied from there when it has one.
    pub with_syms: Option<&'a Path>,
    /// `.sym` texts of libraries made while the program ran.
    pub prefetched: Option<&'a super::symfiles::Prefetched>,
}

/// Makes the directory replayable before the program runs: `info` (without tasks or an exit
/// status yet) and the executable's `.sym` file, so that a recording cut short (a full disk, a
/// killed recorder) still replays with the program's names. [`finish`] completes both.
pub fn start(dir: &Path, summary: &RecordSummary<'_>) -> anyhow::Result<()> {
    let exe = summary.program.absolute.to_string_lossy().into_owned();
    write_module_syms(
        dir,
        vec![(exe, summary.program.build_id.clone())],
        summary.with_syms,
        None,
        None,
    )?;
    let mut info = build_info(summary, Vec::new());
    info.exit_status = None;
    super::write_file(dir, "info", &info.to_bytes())
}

/// Finishes the directory: lists the data files, writes `.sym` files and `info` (last, so a
/// directory with a complete `info` file is complete).
/// On a full disk `info` is still written (over the one of [`start`] if need be) before the
/// error is returned, so what was recorded replays.
pub fn finish(dir: &Path, summary: &RecordSummary<'_>) -> anyhow::Result<()> {
    crate::diag::debug(
        "uftrace",
        1,
        format!("reading {} file", dir.join("task.txt").display()),
    );
    let tids = data_file_tids(dir)?;
    // The program's `.sym` file is there since `start`.
    let exe = summary.program.absolute.to_string_lossy();
    let symbols = add_map_build_ids(dir)
        .and_then(|()| write_sym_files(dir, summary.with_syms, Some(&exe), summary.prefetched));
    // `--srcline`, `-L`: the libraries' source locations (the program's `.dbg` is written
    // before it runs).
    let dbg = match summary.srcline {
        true => recorded_modules(dir).and_then(|m| super::dwarf::files::write_dbg_files(dir, &m)),
        false => Ok(false),
    };
    let mut info = build_info(summary, tids);
    if dbg.as_ref().is_ok_and(|&written| written) {
        info.header.feat_mask |= feat::DEBUG_INFO;
    }
    let info = info.to_bytes();
    if let Err(e) = super::write_file(dir, "info", &info) {
        // No room for a new file: the old one's blocks are enough for the new text.
        let path = dir.join("info");
        record_format::create::open_existing(&path)
            .and_then(|mut f| {
                use std::io::Write;
                f.set_len(0)?;
                f.write_all(&info)
            })
            .map_err(|_| e)?;
    }
    symbols.and(dbg.map(|_| ()))
}

/// The tids whose `<tid>.dat` holds records, ascending. The files need no repair: libmcount
/// and the ring salvage write whole records only (`record_format::ring`); only the blocks
/// libmcount reserved past their ends are given back.
pub fn data_file_tids(dir: &Path) -> anyhow::Result<Vec<u32>> {
    let mut tids = BTreeSet::new();
    let entries = fs::read_dir(dir).with_context(|| format!("cannot read {}", dir.display()))?;
    for entry in entries {
        let entry = entry.with_context(|| format!("cannot read {}", dir.display()))?;
        let name = entry.file_name();
        let Some(tid) = name.to_str().and_then(record_format::dir::task_file) else {
            continue;
        };
        // Setting the length it has releases the blocks libmcount reserved past it. A chunk
        // that could not be written (a full disk) leaves a hole before the chunks written
        // after it: the file ends at the hole (reading a hole of a full tmpfs through a
        // mapping faults, and records must follow each other).
        let len = record_format::create::open_existing(&entry.path())
            .and_then(|f| {
                let len = f.metadata()?.len().min(first_hole(&f));
                f.set_len(len)?;
                Ok(len)
            })
            .with_context(|| format!("cannot open {}", entry.path().display()))?;
        if len >= RECORD_SIZE as u64 {
            tids.insert(tid);
        }
    }
    Ok(tids.into_iter().collect())
}

/// Offset of the first hole of `f` (its length when it has none, or when the file system
/// cannot tell).
fn first_hole(f: &fs::File) -> u64 {
    use std::os::fd::AsRawFd;
    // SAFETY: lseek on a descriptor we own; SEEK_HOLE only reports an offset.
    let off = unsafe { libc::lseek(f.as_raw_fd(), 0, libc::SEEK_HOLE) };
    u64::try_from(off).unwrap_or(u64::MAX)
}

fn build_info(s: &RecordSummary<'_>, tids: Vec<u32>) -> Info {
    let mut feat_mask = feat::TASK_SESSION | feat::SYM_REL_ADDR | feat::MAX_STACK;
    if s.plthook {
        feat_mask |= feat::PLTHOOK;
    }
    if let Some(a) = &s.args {
        // As uftrace: the built-in lists are always there to read.
        feat_mask |= feat::AUTO_ARGS;
        if a.argspec.is_some() || a.auto_args {
            feat_mask |= feat::ARGUMENT;
        }
        if a.retspec.is_some() || a.auto_args {
            feat_mask |= feat::RETVAL;
        }
    }
    if s.debug_info {
        feat_mask |= feat::DEBUG_INFO;
    }
    if s.kernel {
        feat_mask |= feat::KERNEL;
    }
    if s.perf {
        feat_mask |= feat::PERF_EVENT;
    }
    if s.events {
        feat_mask |= feat::EVENT;
    }
    Info {
        header: InfoHeader {
            endian: s.program.endian,
            elf_class: s.program.elf_class,
            feat_mask,
            max_stack: s.max_stack,
            ..InfoHeader::default()
        },
        exename: Some(s.program.absolute.to_string_lossy().into_owned()),
        build_id: s
            .program
            .build_id
            .clone()
            .filter(|id| id.len() == 40 && id.bytes().all(|b| b.is_ascii_hexdigit())),
        exit_status: Some(s.ended.raw_status),
        cmdline: Some(s.cmdline.clone()),
        cpuinfo: Some(cpu_info()),
        meminfo: mem_info(),
        osinfo: Some(os_info()),
        tids,
        usage: usage_info(&s.ended.usage),
        loadinfo: load_info(),
        argspec: s.args.clone(),
        record_date: Some((
            ctime(s.ended.started_at),
            format!(
                "{}.{:09}",
                s.ended.elapsed_ns / 1_000_000_000,
                s.ended.elapsed_ns % 1_000_000_000
            ),
        )),
        pattern_type: Some(s.pattern_type.to_string()),
        version: Some(s.version.clone()),
        utc_offset: None,
    }
}

fn cpu_info() -> CpuInfo {
    // SAFETY: sysconf only reads system configuration.
    let (online, possible) = unsafe {
        (
            libc::sysconf(libc::_SC_NPROCESSORS_ONLN),
            libc::sysconf(libc::_SC_NPROCESSORS_CONF),
        )
    };
    let desc = fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|text| {
            text.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_else(|| "unknown".to_string());
    CpuInfo {
        online: u32::try_from(online).unwrap_or(0),
        possible: u32::try_from(possible).unwrap_or(0),
        desc,
    }
}

/// `<free> / <total> <unit> (free / total)` from `/proc/meminfo`, one decimal, truncated.
fn mem_info() -> Option<String> {
    let text = fs::read_to_string("/proc/meminfo").ok()?;
    let kb = |key: &str| -> Option<u64> {
        text.lines()
            .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
    };
    let (total, free) = (kb("MemTotal")?, kb("MemFree")?);
    Some(format_mem(free, total))
}

fn format_mem(free_kb: u64, total_kb: u64) -> String {
    const UNITS: [&str; 4] = ["KB", "MB", "GB", "TB"];
    let mut unit = 0;
    let mut scale = 1u64;
    while unit + 1 < UNITS.len() && total_kb / scale >= 1024 {
        unit += 1;
        scale *= 1024;
    }
    let tenths = |kb: u64| {
        let t = u128::from(kb) * 10 / u128::from(scale);
        format!("{}.{}", t / 10, t % 10)
    };
    format!(
        "{} / {} {} (free / total)",
        tenths(free_kb),
        tenths(total_kb),
        UNITS[unit]
    )
}

fn os_info() -> OsInfo {
    // SAFETY: utsname is plain data; all-zero is valid.
    let mut uts: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: `uts` is a valid, writable utsname struct.
    let ok = unsafe { libc::uname(&mut uts) } == 0;
    let field = |f: &[libc::c_char]| {
        // SAFETY: uname NUL-terminates every field within its array, and zeroed() left a NUL
        // in case it failed.
        unsafe { CStr::from_ptr(f.as_ptr()) }
            .to_string_lossy()
            .into_owned()
    };
    let (kernel, hostname) = if ok {
        (
            format!("{} {}", field(&uts.sysname), field(&uts.release)),
            field(&uts.nodename),
        )
    } else {
        ("unknown".to_string(), "unknown".to_string())
    };
    let distro = fs::read_to_string("/etc/os-release")
        .ok()
        .and_then(|text| {
            text.lines()
                .find_map(|l| l.strip_prefix("PRETTY_NAME="))
                .map(|v| v.trim().to_string())
        })
        .unwrap_or_else(|| "\"Unknown\"".to_string());
    OsInfo {
        kernel,
        hostname,
        distro,
    }
}

fn usage_info(u: &libc::rusage) -> Option<UsageInfo> {
    let values = [
        u.ru_stime.tv_sec,
        u.ru_stime.tv_usec,
        u.ru_utime.tv_sec,
        u.ru_utime.tv_usec,
        u.ru_nvcsw,
        u.ru_nivcsw,
        u.ru_maxrss,
        u.ru_majflt,
        u.ru_minflt,
        u.ru_inblock,
        u.ru_oublock,
    ];
    if values.iter().all(|&v| v == 0) {
        return None;
    }
    Some(UsageInfo {
        systime: format!("{}.{:06}", u.ru_stime.tv_sec, u.ru_stime.tv_usec),
        usrtime: format!("{}.{:06}", u.ru_utime.tv_sec, u.ru_utime.tv_usec),
        ctxsw: format!("{} / {} (voluntary / involuntary)", u.ru_nvcsw, u.ru_nivcsw),
        maxrss: u.ru_maxrss.to_string(),
        pagefault: format!("{} / {} (major / minor)", u.ru_majflt, u.ru_minflt),
        iops: format!("{} / {} (read / write)", u.ru_inblock, u.ru_oublock),
    })
}

fn load_info() -> Option<String> {
    let text = fs::read_to_string("/proc/loadavg").ok()?;
    let loads: Vec<f64> = text
        .split_whitespace()
        .take(3)
        .filter_map(|v| v.parse().ok())
        .collect();
    (loads.len() == 3).then(|| format!("{:.2} / {:.2} / {:.2}", loads[0], loads[1], loads[2]))
}

/// `ctime()` text without its newline: `Sat Nov 21 14:16:47 2026`, local time.
fn ctime(t: libc::time_t) -> String {
    let mut buf = [0 as libc::c_char; 64];
    // SAFETY: ctime_r writes at most 26 bytes into `buf` (64 long) and returns either NULL or
    // `buf`, which is then NUL-terminated.
    let p = unsafe { libc::ctime_r(&t, buf.as_mut_ptr()) };
    if p.is_null() {
        return String::new();
    }
    // SAFETY: `p` is `buf`, NUL-terminated by ctime_r.
    unsafe { CStr::from_ptr(p) }
        .to_string_lossy()
        .trim_end()
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_files_end_at_their_first_hole() {
        // tmpfs reports holes (SEEK_HOLE), as ext4 and xfs do.
        let dir = tempfile::tempdir_in("/dev/shm").unwrap();
        let f = fs::File::create(dir.path().join("7.dat")).unwrap();
        use std::os::unix::fs::FileExt;
        f.write_all_at(&[1u8; 8192], 0).unwrap();
        f.write_all_at(&[2u8; 4096], 16384).unwrap();
        fs::write(dir.path().join("8.dat"), [3u8; 32]).unwrap();
        assert_eq!(data_file_tids(dir.path()).unwrap(), [7, 8]);
        assert_eq!(fs::metadata(dir.path().join("7.dat")).unwrap().len(), 8192);
        assert_eq!(fs::metadata(dir.path().join("8.dat")).unwrap().len(), 32);
    }

    #[test]
    fn memory_units() {
        assert_eq!(
            format_mem(23_907_533, 24_641_536),
            "22.8 / 23.5 GB (free / total)"
        );
        assert_eq!(format_mem(512, 1000), "512.0 / 1000.0 KB (free / total)");
        assert_eq!(format_mem(1024, 2048), "1.0 / 2.0 MB (free / total)");
    }

    #[test]
    fn ctime_shape() {
        let text = ctime(1_700_000_000);
        assert_eq!(text.len(), 24, "{text}");
        assert!(text.ends_with("2023"), "{text}");
    }
}
