//! `task.txt`: sessions (SESS), threads (TASK), forks (FORK) and dlopen'ed libraries (DLOP).

use crate::error::{FormatError, Result};
use std::fmt;
use std::path::Path;

/// One line of `task.txt`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TaskLine {
    Sess {
        time: u64,
        pid: u32,
        sid: String,
        exename: String,
    },
    Task {
        time: u64,
        tid: u32,
        pid: u32,
    },
    Fork {
        time: u64,
        /// The child.
        pid: u32,
        ppid: u32,
    },
    Dlop {
        time: u64,
        tid: u32,
        sid: String,
        base: u64,
        libname: String,
    },
}

impl TaskLine {
    pub fn time(&self) -> u64 {
        match self {
            TaskLine::Sess { time, .. }
            | TaskLine::Task { time, .. }
            | TaskLine::Fork { time, .. }
            | TaskLine::Dlop { time, .. } => *time,
        }
    }
}

/// Formats nanoseconds as `SEC.NSEC` with 9 fraction digits.
pub struct Timestamp(pub u64);

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}.{:09}",
            self.0 / 1_000_000_000,
            self.0 % 1_000_000_000
        )
    }
}

impl fmt::Display for TaskLine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TaskLine::Sess {
                time,
                pid,
                sid,
                exename,
            } => write!(
                f,
                "SESS timestamp={} pid={pid} sid={sid} exename=\"{exename}\"",
                Timestamp(*time)
            ),
            TaskLine::Task { time, tid, pid } => {
                write!(f, "TASK timestamp={} tid={tid} pid={pid}", Timestamp(*time))
            }
            TaskLine::Fork { time, pid, ppid } => {
                write!(
                    f,
                    "FORK timestamp={} pid={pid} ppid={ppid}",
                    Timestamp(*time)
                )
            }
            TaskLine::Dlop {
                time,
                tid,
                sid,
                base,
                libname,
            } => write!(
                f,
                "DLOP timestamp={} tid={tid} sid={sid} base={base:x} libname=\"{libname}\"",
                Timestamp(*time)
            ),
        }
    }
}

/// Parses `SEC.NSEC` (NSEC as written, normally 9 digits) into nanoseconds.
pub fn parse_timestamp(s: &str) -> Option<u64> {
    let (sec, nsec) = s.split_once('.').unwrap_or((s, "0"));
    let sec: u64 = sec.parse().ok()?;
    let nsec: u64 = nsec.parse().ok()?;
    sec.checked_mul(1_000_000_000)?.checked_add(nsec)
}

fn field<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    let start = line.find(&format!(" {key}="))? + key.len() + 2;
    let rest = &line[start..];
    Some(rest.split_whitespace().next().unwrap_or(""))
}

fn quoted<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    let start = line.find(&format!("{key}=\""))? + key.len() + 2;
    let end = line.rfind('"')?;
    (end >= start).then(|| &line[start..end])
}

/// Parses the text of `task.txt`. Unknown lines are skipped; malformed known lines are errors.
pub fn parse_task_txt(text: &str, path: &Path) -> Result<Vec<TaskLine>> {
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let bad = || {
            let what = format!("line {}: malformed '{}'", n + 1, crate::error::clip(line));
            FormatError::invalid(path, what)
        };
        let kind = line.get(..4).unwrap_or("");
        if !matches!(kind, "SESS" | "TASK" | "FORK" | "DLOP") {
            continue;
        }
        let time = field(line, "timestamp")
            .and_then(parse_timestamp)
            .ok_or_else(bad)?;
        let num = |k: &str| {
            field(line, k)
                .and_then(|v| v.parse::<u32>().ok())
                .ok_or_else(bad)
        };
        let t = match kind {
            "SESS" => TaskLine::Sess {
                time,
                pid: num("pid")?,
                sid: field(line, "sid").ok_or_else(bad)?.to_string(),
                exename: quoted(line, "exename").ok_or_else(bad)?.to_string(),
            },
            "TASK" => TaskLine::Task {
                time,
                tid: num("tid")?,
                pid: num("pid")?,
            },
            "FORK" => TaskLine::Fork {
                time,
                pid: num("pid")?,
                ppid: num("ppid")?,
            },
            _ => TaskLine::Dlop {
                time,
                tid: num("tid")?,
                sid: field(line, "sid").ok_or_else(bad)?.to_string(),
                base: field(line, "base")
                    .and_then(|v| u64::from_str_radix(v, 16).ok())
                    .ok_or_else(bad)?,
                libname: quoted(line, "libname").ok_or_else(bad)?.to_string(),
            },
        };
        out.push(t);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const REAL: &str = r#"SESS timestamp=585.025314576 pid=20935 sid=3b626f034f6db638 exename="/home/user/src/mt"
TASK timestamp=585.025647412 tid=20935 pid=20935
FORK timestamp=585.030480992 pid=20939 ppid=20935
DLOP timestamp=593.236518782 tid=23064 sid=4c0cb5b7204d6a9e base=7fa1150fa000 libname="./libdl1.so"
"#;

    #[test]
    fn parses_and_prints_back() {
        let lines = parse_task_txt(REAL, Path::new("task.txt")).unwrap();
        assert_eq!(lines.len(), 4);
        assert_eq!(
            lines[0],
            TaskLine::Sess {
                time: 585_025_314_576,
                pid: 20935,
                sid: "3b626f034f6db638".into(),
                exename: "/home/user/src/mt".into()
            }
        );
        let printed: String = lines.iter().map(|l| format!("{l}\n")).collect();
        assert_eq!(printed, REAL);
    }

    #[test]
    fn malformed_is_error() {
        assert!(parse_task_txt("TASK timestamp=x tid=1 pid=1\n", Path::new("t")).is_err());
        assert!(parse_task_txt("hello\n", Path::new("t"))
            .unwrap()
            .is_empty());
    }
}
