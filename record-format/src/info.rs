//! The `info` file: a 40-byte binary header followed by `key:value` text sections, one per set bit
//! of `info_mask`, in increasing bit order.

use crate::error::{clip, FormatError, Result};
use std::fmt::Write as _;
use std::path::Path;

pub const INFO_MAGIC: &[u8; 8] = b"Ftrace!\0";
pub const INFO_HEADER_SIZE: usize = 40;
pub const FILE_VERSION: u32 = 4;

/// Feature bits (`feat_mask`).
pub mod feat {
    pub const PLTHOOK: u64 = 1 << 0;
    pub const TASK_SESSION: u64 = 1 << 1;
    pub const KERNEL: u64 = 1 << 2;
    pub const ARGUMENT: u64 = 1 << 3;
    pub const RETVAL: u64 = 1 << 4;
    pub const SYM_REL_ADDR: u64 = 1 << 5;
    pub const MAX_STACK: u64 = 1 << 6;
    pub const EVENT: u64 = 1 << 7;
    pub const PERF_EVENT: u64 = 1 << 8;
    pub const AUTO_ARGS: u64 = 1 << 9;
    pub const DEBUG_INFO: u64 = 1 << 10;
    pub const ESTIMATE_RETURN: u64 = 1 << 11;
    pub const SYM_SIZE: u64 = 1 << 12;
}

/// Info bits (`info_mask`); each names one text section.
pub mod sect {
    pub const EXE_NAME: u64 = 1 << 0;
    pub const EXE_BUILD_ID: u64 = 1 << 1;
    pub const EXIT_STATUS: u64 = 1 << 2;
    pub const CMDLINE: u64 = 1 << 3;
    pub const CPUINFO: u64 = 1 << 4;
    pub const MEMINFO: u64 = 1 << 5;
    pub const OSINFO: u64 = 1 << 6;
    pub const TASKINFO: u64 = 1 << 7;
    pub const USAGEINFO: u64 = 1 << 8;
    pub const LOADINFO: u64 = 1 << 9;
    pub const ARG_SPEC: u64 = 1 << 10;
    pub const RECORD_DATE: u64 = 1 << 11;
    pub const PATTERN_TYPE: u64 = 1 << 12;
    pub const VERSION: u64 = 1 << 13;
    pub const UTC_OFFSET: u64 = 1 << 14;
}

/// The binary header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InfoHeader {
    pub version: u32,
    pub endian: u8,
    pub elf_class: u8,
    pub feat_mask: u64,
    pub info_mask: u64,
    pub max_stack: u16,
}

impl Default for InfoHeader {
    fn default() -> Self {
        InfoHeader {
            version: FILE_VERSION,
            endian: 1,
            elf_class: 2,
            feat_mask: feat::TASK_SESSION | feat::SYM_REL_ADDR | feat::MAX_STACK,
            info_mask: 0,
            max_stack: 1024,
        }
    }
}

/// `cpuinfo` lines.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CpuInfo {
    pub online: u32,
    pub possible: u32,
    pub desc: String,
}

/// `osinfo` lines.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OsInfo {
    pub kernel: String,
    pub hostname: String,
    pub distro: String,
}

/// `usageinfo` lines, kept as the recorder wrote them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UsageInfo {
    pub systime: String,
    pub usrtime: String,
    pub ctxsw: String,
    pub maxrss: String,
    pub pagefault: String,
    pub iops: String,
}

/// The ARG_SPEC section.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ArgSpecInfo {
    pub argspec: Option<String>,
    pub retspec: Option<String>,
    pub argauto: String,
    pub retauto: String,
    pub enumauto: String,
    pub auto_args: bool,
}

/// Everything in an `info` file. A section is written iff its field is `Some`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Info {
    pub header: InfoHeader,
    pub exename: Option<String>,
    pub build_id: Option<String>,
    pub exit_status: Option<i32>,
    pub cmdline: Option<String>,
    pub cpuinfo: Option<CpuInfo>,
    pub meminfo: Option<String>,
    pub osinfo: Option<OsInfo>,
    /// TASKINFO: the threads with data files, in task-index order.
    pub tids: Vec<u32>,
    pub usage: Option<UsageInfo>,
    pub loadinfo: Option<String>,
    pub argspec: Option<ArgSpecInfo>,
    /// RECORD_DATE: (ctime text, elapsed "sec.nsec").
    pub record_date: Option<(String, String)>,
    pub pattern_type: Option<String>,
    pub version: Option<String>,
    pub utc_offset: Option<i64>,
}

impl Info {
    pub fn has_feature(&self, bit: u64) -> bool {
        self.header.feat_mask & bit != 0
    }

    /// Parses a whole `info` file.
    pub fn parse(bytes: &[u8], path: &Path) -> Result<Info> {
        let bad = |what: &str| FormatError::invalid(path, what);
        if bytes.len() < INFO_HEADER_SIZE || &bytes[..8] != INFO_MAGIC {
            return Err(bad("not a uftrace info file (bad magic)"));
        }
        let u16at = |o: usize| u16::from_le_bytes([bytes[o], bytes[o + 1]]);
        let u32at = |o: usize| u32::from_le_bytes(bytes[o..o + 4].try_into().unwrap_or([0; 4]));
        let u64at = |o: usize| u64::from_le_bytes(bytes[o..o + 8].try_into().unwrap_or([0; 8]));
        let header = InfoHeader {
            version: u32at(8),
            endian: bytes[14],
            elf_class: bytes[15],
            feat_mask: u64at(16),
            info_mask: u64at(24),
            max_stack: u16at(32),
        };
        if !(3..=FILE_VERSION).contains(&header.version) {
            return Err(FormatError::Version {
                path: path.to_path_buf(),
                version: header.version,
            });
        }
        if header.endian == 2 {
            return Err(bad("big-endian data is not supported"));
        }
        let text = String::from_utf8_lossy(&bytes[INFO_HEADER_SIZE..]);
        let mut lines = Lines {
            iter: text.split('\n'),
            path,
        };
        let mut info = Info {
            header,
            ..Info::default()
        };
        for bit in 0..15 {
            let mask = 1u64 << bit;
            if info.header.info_mask & mask == 0 {
                continue;
            }
            match mask {
                sect::EXE_NAME => info.exename = Some(lines.value("exename")?.to_string()),
                sect::EXE_BUILD_ID => {
                    let id = lines.value("build_id")?;
                    if id.len() != 40 || !id.bytes().all(|b| b.is_ascii_hexdigit()) {
                        return Err(bad("build_id is not 40 hex digits"));
                    }
                    info.build_id = Some(id.to_string());
                }
                sect::EXIT_STATUS => {
                    info.exit_status = Some(lines.number("exit_status")?);
                }
                sect::CMDLINE => info.cmdline = Some(lines.value("cmdline")?.replace("\\\"", "\"")),
                sect::CPUINFO => {
                    let mut ci = CpuInfo::default();
                    for l in lines.multi("cpuinfo", 2)? {
                        if let Some(v) = l.strip_prefix("nr_cpus=") {
                            let mut it = v
                                .split(|c: char| !c.is_ascii_digit())
                                .filter(|s| !s.is_empty());
                            ci.online = it.next().and_then(|s| s.parse().ok()).unwrap_or(0);
                            ci.possible = it.next().and_then(|s| s.parse().ok()).unwrap_or(0);
                        } else if let Some(v) = l.strip_prefix("desc=") {
                            ci.desc = v.to_string();
                        }
                    }
                    info.cpuinfo = Some(ci);
                }
                sect::MEMINFO => info.meminfo = Some(lines.value("meminfo")?.to_string()),
                sect::OSINFO => {
                    let mut oi = OsInfo::default();
                    for l in lines.multi("osinfo", 3)? {
                        if let Some(v) = l.strip_prefix("kernel=") {
                            oi.kernel = v.to_string();
                        } else if let Some(v) = l.strip_prefix("hostname=") {
                            oi.hostname = v.to_string();
                        } else if let Some(v) = l.strip_prefix("distro=") {
                            oi.distro = v.to_string();
                        }
                    }
                    info.osinfo = Some(oi);
                }
                sect::TASKINFO => {
                    let ls = lines.multi("taskinfo", 2)?;
                    let mut nr = None;
                    let mut tids = Vec::new();
                    for l in ls {
                        if let Some(v) = l.strip_prefix("nr_tid=") {
                            nr = v.trim().parse::<usize>().ok();
                        } else if let Some(v) = l.strip_prefix("tids=") {
                            for t in v.split(',').filter(|s| !s.trim().is_empty()) {
                                tids.push(
                                    t.trim().parse().map_err(|_| bad("bad tid in taskinfo"))?,
                                );
                            }
                        }
                    }
                    if nr != Some(tids.len()) {
                        return Err(bad("taskinfo nr_tid does not match the tid list"));
                    }
                    info.tids = tids;
                }
                sect::USAGEINFO => {
                    let mut u = UsageInfo::default();
                    for l in lines.multi("usageinfo", 6)? {
                        let (k, v) = l.split_once('=').unwrap_or((l, ""));
                        let v = v.to_string();
                        match k {
                            "systime" => u.systime = v,
                            "usrtime" => u.usrtime = v,
                            "ctxsw" => u.ctxsw = v,
                            "maxrss" => u.maxrss = v,
                            "pagefault" => u.pagefault = v,
                            "iops" => u.iops = v,
                            _ => {}
                        }
                    }
                    info.usage = Some(u);
                }
                sect::LOADINFO => info.loadinfo = Some(lines.value("loadinfo")?.to_string()),
                sect::ARG_SPEC => info.argspec = Some(lines.argspec()?),
                sect::RECORD_DATE => {
                    let date = lines.value("record_date")?.to_string();
                    let elapsed = lines.value("elapsed_time")?;
                    let elapsed = elapsed.trim_end_matches(" sec").to_string();
                    info.record_date = Some((date, elapsed));
                }
                sect::PATTERN_TYPE => {
                    info.pattern_type = Some(lines.value("pattern_type")?.to_string())
                }
                sect::VERSION => info.version = Some(lines.value("uftrace_version")?.to_string()),
                sect::UTC_OFFSET => {
                    info.utc_offset = lines.value("utc_offset")?.trim().parse().ok()
                }
                _ => {}
            }
        }
        Ok(info)
    }

    /// The info mask that matches the present sections.
    pub fn section_mask(&self) -> u64 {
        let mut m = sect::TASKINFO;
        let set = |m: &mut u64, present: bool, bit: u64| {
            if present {
                *m |= bit
            }
        };
        set(&mut m, self.exename.is_some(), sect::EXE_NAME);
        set(&mut m, self.build_id.is_some(), sect::EXE_BUILD_ID);
        set(&mut m, self.exit_status.is_some(), sect::EXIT_STATUS);
        set(&mut m, self.cmdline.is_some(), sect::CMDLINE);
        set(&mut m, self.cpuinfo.is_some(), sect::CPUINFO);
        set(&mut m, self.meminfo.is_some(), sect::MEMINFO);
        set(&mut m, self.osinfo.is_some(), sect::OSINFO);
        set(&mut m, self.usage.is_some(), sect::USAGEINFO);
        set(&mut m, self.loadinfo.is_some(), sect::LOADINFO);
        set(&mut m, self.argspec.is_some(), sect::ARG_SPEC);
        set(&mut m, self.record_date.is_some(), sect::RECORD_DATE);
        set(&mut m, self.pattern_type.is_some(), sect::PATTERN_TYPE);
        set(&mut m, self.version.is_some(), sect::VERSION);
        set(&mut m, self.utc_offset.is_some(), sect::UTC_OFFSET);
        m
    }

    /// Serializes the header and sections; `info_mask` is derived from the present sections.
    pub fn to_bytes(&self) -> Vec<u8> {
        let h = &self.header;
        let mut out = Vec::with_capacity(1024);
        out.extend_from_slice(INFO_MAGIC);
        out.extend_from_slice(&h.version.to_le_bytes());
        out.extend_from_slice(&(INFO_HEADER_SIZE as u16).to_le_bytes());
        out.push(h.endian);
        out.push(h.elf_class);
        out.extend_from_slice(&h.feat_mask.to_le_bytes());
        out.extend_from_slice(&self.section_mask().to_le_bytes());
        out.extend_from_slice(&h.max_stack.to_le_bytes());
        out.extend_from_slice(&[0u8; 6]);
        let mut s = String::new();
        if let Some(v) = &self.exename {
            let _ = writeln!(s, "exename:{v}");
        }
        if let Some(v) = &self.build_id {
            let _ = writeln!(s, "build_id:{v}");
        }
        if let Some(v) = self.exit_status {
            let _ = writeln!(s, "exit_status:{v}");
        }
        if let Some(v) = &self.cmdline {
            let _ = writeln!(s, "cmdline:{}", v.replace('"', "\\\""));
        }
        if let Some(c) = &self.cpuinfo {
            let _ = write!(
                s,
                "cpuinfo:lines=2\ncpuinfo:nr_cpus={} / {} (online/possible)\ncpuinfo:desc={}\n",
                c.online, c.possible, c.desc
            );
        }
        if let Some(v) = &self.meminfo {
            let _ = writeln!(s, "meminfo:{v}");
        }
        if let Some(o) = &self.osinfo {
            let _ = write!(
                s,
                "osinfo:lines=3\nosinfo:kernel={}\nosinfo:hostname={}\nosinfo:distro={}\n",
                o.kernel, o.hostname, o.distro
            );
        }
        let tids: Vec<String> = self.tids.iter().map(u32::to_string).collect();
        let _ = write!(
            s,
            "taskinfo:lines=2\ntaskinfo:nr_tid={}\ntaskinfo:tids={}\n",
            self.tids.len(),
            tids.join(",")
        );
        if let Some(u) = &self.usage {
            let _ = write!(
                s,
                "usageinfo:lines=6\nusageinfo:systime={}\nusageinfo:usrtime={}\nusageinfo:ctxsw={}\n\
                 usageinfo:maxrss={}\nusageinfo:pagefault={}\nusageinfo:iops={}\n",
                u.systime, u.usrtime, u.ctxsw, u.maxrss, u.pagefault, u.iops
            );
        }
        if let Some(v) = &self.loadinfo {
            let _ = writeln!(s, "loadinfo:{v}");
        }
        if let Some(a) = &self.argspec {
            let mut body = String::new();
            let mut n = 3;
            if let Some(v) = &a.argspec {
                let _ = writeln!(body, "argspec:{v}");
                n += 1;
            }
            if let Some(v) = &a.retspec {
                let _ = writeln!(body, "retspec:{v}");
                n += 1;
            }
            let _ = write!(
                body,
                "argauto:{}\nretauto:{}\nenumauto:{}\n",
                a.argauto, a.retauto, a.enumauto
            );
            if a.auto_args {
                body.push_str("auto-args:1\n");
                n += 1;
            }
            let _ = write!(s, "argspec:lines={n}\n{body}");
        }
        if let Some((date, elapsed)) = &self.record_date {
            let _ = write!(s, "record_date:{date}\nelapsed_time:{elapsed} sec\n");
        }
        if let Some(v) = &self.pattern_type {
            let _ = writeln!(s, "pattern_type:{v}");
        }
        if let Some(v) = &self.version {
            let _ = writeln!(s, "uftrace_version:{v}");
        }
        if let Some(v) = self.utc_offset {
            let _ = writeln!(s, "utc_offset:{v}");
        }
        out.extend_from_slice(s.as_bytes());
        out
    }
}

struct Lines<'a, I: Iterator<Item = &'a str>> {
    iter: I,
    path: &'a Path,
}

impl<'a, I: Iterator<Item = &'a str>> Lines<'a, I> {
    fn bad(&self, what: String) -> FormatError {
        FormatError::invalid(self.path, what)
    }

    fn value(&mut self, key: &str) -> Result<&'a str> {
        let line = self
            .iter
            .next()
            .ok_or_else(|| self.bad(format!("missing '{key}' section")))?;
        line.strip_prefix(key)
            .and_then(|r| r.strip_prefix(':'))
            .ok_or_else(|| self.bad(format!("expected '{key}:' but found '{}'", clip(line))))
    }

    fn number<T: std::str::FromStr>(&mut self, key: &str) -> Result<T> {
        let v = self.value(key)?;
        v.trim()
            .parse()
            .map_err(|_| self.bad(format!("bad number in '{key}': '{}'", clip(v))))
    }

    fn multi(&mut self, key: &str, max: usize) -> Result<Vec<&'a str>> {
        let first = self.value(key)?;
        let n: usize = first
            .strip_prefix("lines=")
            .and_then(|v| v.trim().parse().ok())
            .filter(|&n| n <= max)
            .ok_or_else(|| self.bad(format!("bad '{key}:lines=' line")))?;
        (0..n).map(|_| self.value(key)).collect()
    }

    fn argspec(&mut self) -> Result<ArgSpecInfo> {
        let first = self.value("argspec")?;
        let mut a = ArgSpecInfo::default();
        let Some(n) = first.strip_prefix("lines=") else {
            a.argspec = Some(first.to_string());
            return Ok(a);
        };
        let n: usize = n
            .trim()
            .parse()
            .ok()
            .filter(|&n| n <= 6)
            .ok_or_else(|| self.bad("bad 'argspec:lines=' line".into()))?;
        for _ in 0..n {
            let line = self
                .iter
                .next()
                .ok_or_else(|| self.bad("truncated argspec section".into()))?;
            let (k, v) = line
                .split_once(':')
                .ok_or_else(|| self.bad(format!("bad argspec line '{}'", clip(line))))?;
            match k {
                "argspec" => a.argspec = Some(v.to_string()),
                "retspec" => a.retspec = Some(v.to_string()),
                "argauto" => a.argauto = v.to_string(),
                "retauto" => a.retauto = v.to_string(),
                "enumauto" => a.enumauto = v.to_string(),
                "auto-args" => a.auto_args = v.trim() == "1",
                _ => return Err(self.bad(format!("bad argspec line '{}'", clip(line)))),
            }
        }
        Ok(a)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_full() {
        let info = Info {
            header: InfoHeader {
                feat_mask: 0x363,
                ..InfoHeader::default()
            },
            exename: Some("/tmp/a b".into()),
            build_id: Some("3a563f689b82deaf91adaa536189fd67d4a72a15".into()),
            exit_status: Some(768),
            cmdline: Some("utrace record \"x\"".into()),
            cpuinfo: Some(CpuInfo {
                online: 2,
                possible: 4,
                desc: "AMD EPYC".into(),
            }),
            meminfo: Some("22.8 / 23.5 GB (free / total)".into()),
            osinfo: Some(OsInfo {
                kernel: "Linux 6.1".into(),
                hostname: "vm".into(),
                distro: "\"Debian\"".into(),
            }),
            tids: vec![10, 12],
            usage: Some(UsageInfo {
                systime: "0.000100".into(),
                usrtime: "0.002000".into(),
                ctxsw: "2 / 3 (voluntary / involuntary)".into(),
                maxrss: "7200".into(),
                pagefault: "0 / 635 (major / minor)".into(),
                iops: "0 / 8 (read / write)".into(),
            }),
            loadinfo: Some("0.74 / 0.23 / 0.07".into()),
            argspec: Some(ArgSpecInfo {
                argspec: Some("fib@arg1".into()),
                retspec: Some("fib@retval".into()),
                auto_args: true,
                ..ArgSpecInfo::default()
            }),
            record_date: Some(("Sat Nov 21 14:16:47 2026".into(), "0.007867728".into())),
            pattern_type: Some("regex".into()),
            version: Some("v0.1.0 ( x86_64 )".into()),
            utc_offset: Some(1700000000),
        };
        let bytes = info.to_bytes();
        let mut back = Info::parse(&bytes, Path::new("info")).unwrap();
        assert_eq!(back.header.info_mask, 0x7fff);
        back.header.info_mask = 0;
        assert_eq!(back, info);
    }

    #[test]
    fn minimal_taskinfo_only() {
        let info = Info {
            header: InfoHeader {
                info_mask: sect::TASKINFO,
                ..InfoHeader::default()
            },
            tids: vec![4242],
            ..Info::default()
        };
        let back = Info::parse(&info.to_bytes(), Path::new("info")).unwrap();
        assert_eq!(back.tids, vec![4242]);
    }

    #[test]
    fn rejects_garbage() {
        assert!(Info::parse(b"nope", Path::new("info")).is_err());
        let mut b = Info::default().to_bytes();
        b[8] = 5;
        assert!(matches!(
            Info::parse(&b, Path::new("info")),
            Err(FormatError::Version { .. })
        ));
    }
}
