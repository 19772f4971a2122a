//! `info`: what the `info` file says about the recording (cli.md §7), the task table
//! (`--task`) and the symbol table of the executable (`--symbols`).

use crate::config::Demangle;
use crate::symbols::demangle::demangle;
use record_format::elf::read_sym_table;
use record_format::sym::Symbol;
use record_format::task::TaskLine;
use record_format::TraceDir;
use std::fmt::Write as _;
use std::path::Path;

/// One `# label : value` line.
fn item(s: &mut String, label: &str, value: &str) {
    let _ = writeln!(s, "# {label:<20}: {value}");
}

/// Signal names as strsignal(3) gives them (glibc).
fn signal_name(sig: i32) -> String {
    let name = match sig {
        1 => "Hangup",
        2 => "Interrupt",
        3 => "Quit",
        4 => "Illegal instruction",
        5 => "Trace/breakpoint trap",
        6 => "Aborted",
        7 => "Bus error",
        8 => "Floating point exception",
        9 => "Killed",
        10 => "User defined signal 1",
        11 => "Segmentation fault",
        12 => "User defined signal 2",
        13 => "Broken pipe",
        14 => "Alarm clock",
        15 => "Terminated",
        16 => "Stack fault",
        17 => "Child exited",
        18 => "Continued",
        19 => "Stopped (signal)",
        20 => "Stopped",
        21 => "Stopped (tty input)",
        22 => "Stopped (tty output)",
        23 => "Urgent I/O condition",
        24 => "CPU time limit exceeded",
        25 => "File size limit exceeded",
        26 => "Virtual timer expired",
        27 => "Profiling timer expired",
        28 => "Window changed",
        29 => "I/O possible",
        30 => "Power failure",
        31 => "Bad system call",
        s if (34..=64).contains(&s) => return format!("Real-time signal {}", s - 34),
        s => return format!("Unknown signal {s}"),
    };
    name.to_string()
}

/// uftrace's marker for a recording ended by a `finish` trigger.
const EXIT_FINISHED: i32 = 1 << 16;

/// The wording of a wait(2) status.
pub fn exit_status_text(status: i32) -> String {
    let (code, sig) = ((status >> 8) & 0xff, status & 0x7f);
    if status == EXIT_FINISHED {
        "terminated by finish trigger".to_string()
    } else if sig == 0 {
        format!("exited with code: {code}")
    } else if sig != 0x7f {
        format!("terminated by signal: {sig} ({})", signal_name(sig))
    } else {
        format!("unknown exit status: {status}")
    }
}

/// The comm of each task: the basename of its session's executable (by pid).
pub(crate) fn task_comms(dir: &TraceDir) -> Vec<(u32, u32, u64, String)> {
    // (tid, pid, start time, comm)
    let mut out: Vec<(u32, u32, u64, String)> = Vec::new();
    let comm_of = |pid: u32| {
        let exe = dir.tasks.iter().find_map(|t| match t {
            TaskLine::Sess {
                pid: p, exename, ..
            } if *p == pid => Some(exename.as_str()),
            _ => None,
        });
        let exe = exe.or_else(|| {
            // A forked child runs its parent's executable until it execs.
            let ppid = dir.tasks.iter().find_map(|t| match t {
                TaskLine::Fork { pid: p, ppid, .. } if *p == pid => Some(*ppid),
                _ => None,
            })?;
            dir.tasks.iter().find_map(|t| match t {
                TaskLine::Sess {
                    pid: p, exename, ..
                } if *p == ppid => Some(exename.as_str()),
                _ => None,
            })
        });
        exe.map_or(String::new(), |e| {
            e.rsplit('/').next().unwrap_or(e).chars().take(15).collect()
        })
    };
    for t in &dir.tasks {
        let (time, tid, pid) = match t {
            TaskLine::Task { time, tid, pid } => (*time, *tid, *pid),
            // A forked child without a TASK line of its own.
            TaskLine::Fork { time, pid, .. } => (*time, *pid, *pid),
            _ => continue,
        };
        if out.iter().any(|(x, ..)| *x == tid) {
            continue;
        }
        out.push((tid, pid, time, comm_of(pid)));
    }
    out
}

/// `utrace info`.
pub fn info_text(dir: &TraceDir) -> String {
    let info = &dir.info;
    let mut s = String::new();
    s.push_str("# system information\n# ==================\n");
    if let Some(v) = &info.version {
        item(&mut s, "program version", v);
    }
    if let Some((date, _)) = &info.record_date {
        item(&mut s, "recorded on", date);
    }
    if let Some(c) = &info.cmdline {
        // As stored in the file: uftrace shows the quotes escaped.
        item(&mut s, "cmdline", &c.replace('"', "\\\""));
    }
    if let Some(c) = &info.cpuinfo {
        item(&mut s, "cpu info", &c.desc);
        item(
            &mut s,
            "number of cpus",
            &format!("{} / {} (online / possible)", c.online, c.possible),
        );
    }
    if let Some(m) = &info.meminfo {
        item(&mut s, "memory info", m);
    }
    if let Some(l) = &info.loadinfo {
        let v: Vec<f64> = l
            .split('/')
            .map(|x| x.trim().parse().unwrap_or(0.0))
            .collect();
        let g = |i: usize| v.get(i).copied().unwrap_or(0.0);
        item(
            &mut s,
            "system load",
            &format!("{:.2} / {:.2} / {:.2} (1 / 5 / 15 min)", g(0), g(1), g(2)),
        );
    }
    if let Some(o) = &info.osinfo {
        item(&mut s, "kernel version", &o.kernel);
        item(&mut s, "hostname", &o.hostname);
        item(&mut s, "distro", &o.distro);
    }
    s.push_str("#\n# process information\n# ===================\n");
    if !info.tids.is_empty() {
        item(&mut s, "number of tasks", &info.tids.len().to_string());
        let comms = task_comms(dir);
        let list: Vec<String> = info
            .tids
            .iter()
            .map(|tid| {
                let comm = comms
                    .iter()
                    .find(|c| c.0 == *tid)
                    .map_or("", |c| c.3.as_str());
                format!("{tid}({comm})")
            })
            .collect();
        item(&mut s, "task list", &list.join(", "));
    }
    if let Some(e) = &info.exename {
        item(&mut s, "exe image", e);
    }
    if let Some(b) = &info.build_id {
        item(&mut s, "build id", b);
    }
    if let Some(a) = &info.argspec {
        if let Some(v) = &a.argspec {
            item(&mut s, "arguments", v);
        }
        if let Some(v) = &a.retspec {
            item(&mut s, "return values", v);
        }
        if a.auto_args {
            item(&mut s, "auto-args", "true");
        }
    }
    if let Some(p) = &info.pattern_type {
        item(&mut s, "pattern", p);
    }
    if let Some(st) = info.exit_status {
        item(&mut s, "exit status", &exit_status_text(st));
    }
    // Beyond uftrace: shown only when the kernel dropped events.
    if let Some(lost) = dir
        .kernel
        .as_ref()
        .map(|k| k.lost_events())
        .filter(|&n| n > 0)
    {
        item(&mut s, "kernel lost events", &lost.to_string());
    }
    if let Some((_, elapsed)) = &info.record_date {
        let unit = if elapsed.ends_with("sec") { "" } else { " sec" };
        item(&mut s, "elapsed time", &format!("{elapsed}{unit}"));
    }
    if let Some(u) = &info.usage {
        let f = |x: &str| x.trim().parse::<f64>().unwrap_or(0.0);
        item(
            &mut s,
            "cpu time",
            &format!(
                "{:.3} / {:.3} sec (sys / user)",
                f(&u.systime),
                f(&u.usrtime)
            ),
        );
        item(&mut s, "context switch", &u.ctxsw);
        item(&mut s, "max rss", &format!("{} KB", u.maxrss));
        item(&mut s, "page fault", &u.pagefault);
        item(&mut s, "disk iops", &u.iops);
    }
    if let Some(note) = dir.read_text("note.txt") {
        s.push_str("#\n# extra note information\n# ======================\n");
        s.push_str(&note);
    }
    s.push('\n');
    s
}

/// `utrace info --task`: one row per task, by TID.
pub fn task_text(dir: &TraceDir, tid_width: usize) -> String {
    let mut s = String::new();
    let tid_head = if tid_width == 6 {
        "   TID  "
    } else {
        "   TID   "
    };
    let _ = writeln!(
        s,
        "#{:>23}  {:>5}  {tid_head}  {:<16}  DATA SIZE",
        "TIMESTAMP     ", "FLAGS", "TASK"
    );
    let mut tasks = task_comms(dir);
    tasks.sort_by_key(|t| t.0);
    // A task's scheduling events may come before its TASK line: uftrace shows the earlier.
    let mut first_event: std::collections::HashMap<u32, u64> = std::collections::HashMap::new();
    for (_, e) in crate::perf::events_by_time(dir) {
        first_event.entry(e.tid).or_insert(e.time);
    }
    for (tid, _, time, _) in &mut tasks {
        if let Some(&t) = first_event.get(tid) {
            *time = (*time).min(t);
        }
    }
    let session_tids: Vec<u32> = dir
        .tasks
        .iter()
        .filter_map(|t| match t {
            TaskLine::Sess { pid, .. } => Some(*pid),
            _ => None,
        })
        .collect();
    for (tid, pid, time, comm) in &tasks {
        let mut flags = [' '; 5];
        if tid == pid {
            flags[0] = 'F';
        }
        if session_tids.contains(tid) {
            flags[1] = 'S';
        }
        let flags: String = flags.iter().collect();
        let _ = write!(
            s,
            " {:13}.{:09}  {flags}  [{tid:>w$}]  {comm:<16} ",
            time / 1_000_000_000,
            time % 1_000_000_000,
            w = tid_width
        );
        let size = std::fs::metadata(dir.path.join(format!("{tid}.dat"))).map_or(0, |m| m.len());
        if size > 0 {
            let kb = size / 1024;
            let rem = (kb % 1024).min(999);
            let _ = writeln!(s, " {:5}.{rem:03} MB", kb / 1024);
        } else {
            s.push('\n');
        }
    }
    s
}

/// A symbol's name as uftrace's symbol table shows it: C++ vtables and typeinfo objects get
/// a prefix (uftrace labels `_ZTS` as typeinfo and `_ZTI` as typeinfo name).
fn symbol_name(raw: &str, mode: Demangle) -> String {
    if mode == Demangle::Simple && !raw.contains('@') {
        for (tag, prefix) in [
            ("_ZTV", "__vtable__"),
            ("_ZTS", "__typeinfo__"),
            ("_ZTI", "__typeinfo_name__"),
        ] {
            if let Some(rest) = raw.strip_prefix(tag) {
                return format!("{prefix}{}", demangle(&format!("_Z{rest}"), mode));
            }
        }
    }
    demangle(raw, mode)
}

/// `utrace info --symbols [EXE]`: the symbol table of the executable (`exe`, else the one
/// the `info` file names; its `.sym` file in the data directory when the ELF is gone).
/// `None` when there is no executable to read.
pub fn symbols_text(dir: &TraceDir, exe: Option<&str>, mode: Demangle) -> Option<String> {
    let exe = exe
        .map(str::to_string)
        .or_else(|| dir.info.exename.clone())?;
    let mut syms: Vec<Symbol> = match read_sym_table(Path::new(&exe)) {
        Some(s) => s,
        None => {
            let base = exe.rsplit('/').next().unwrap_or(&exe);
            dir.read_sym(&format!("{base}.sym"))?.symbols
        }
    };
    syms.sort_by_key(|s| s.addr);
    let mut normal = String::new();
    let mut dynamic = String::new();
    for (i, sym) in syms.iter().enumerate() {
        let out = if sym.is_plt() {
            &mut dynamic
        } else {
            &mut normal
        };
        let _ = writeln!(
            out,
            "[{i:2}] {:#x}: {} (size: {})",
            sym.addr,
            symbol_name(&sym.name, mode),
            sym.size
        );
    }
    let mut s = String::from("Normal symbols\n==============\n");
    s.push_str(&normal);
    s.push_str("\n\nDynamic symbols\n===============\n");
    s.push_str(&dynamic);
    Some(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_statuses() {
        assert_eq!(exit_status_text(0), "exited with code: 0");
        assert_eq!(exit_status_text(3 << 8), "exited with code: 3");
        assert_eq!(
            exit_status_text(11),
            "terminated by signal: 11 (Segmentation fault)"
        );
        assert_eq!(exit_status_text(1 << 16), "terminated by finish trigger");
        assert_eq!(exit_status_text(0x137f), "unknown exit status: 4991");
    }
}
