//! Where warnings and debug messages go (`-v`, `--debug`, `--debug-domain`, `--logfile`).
//!
//! Every `WARN:` line and every debug line of the command is written through here: to stderr,
//! or with `--logfile=FILE` to that file (created, or truncated, when the command starts; the
//! traced program's runtime writes its own messages there too, through an inherited
//! descriptor, see [`runtime_log_fd`]). Debug lines read `DOMAIN: message`, as uftrace prints
//! them, and are printed when the domain's level is at least the message's:
//!
//! - `-v` (or `--debug`), repeated up to three times, sets the level of every domain;
//! - `--debug-domain=D1[:N],D2...` limits the messages to the domains listed, each at its
//!   own level `N` or else at the `-v` level (at least 1).
//!
//! The domains are uftrace's: `uftrace` (the command itself), `symbol`, `demangle`, `filter`,
//! `fstack`, `session`, `kernel`, `mcount` (the traced program's runtime), `dynamic`, `event`,
//! `script` and `dwarf`.

use std::fs::File;
use std::io::Write;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::{Mutex, OnceLock};

/// uftrace's debug domains.
pub const DOMAINS: &[&str] = &[
    "uftrace", "symbol", "demangle", "filter", "fstack", "session", "kernel", "mcount", "dynamic",
    "event", "script", "dwarf",
];

/// The debug level of each domain.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Levels {
    /// The level of a domain not listed in `domains` (0 when `--debug-domain` lists some).
    default: u8,
    domains: Vec<(String, u8)>,
}

impl Levels {
    /// From `-v` counted `verbose` times and `--debug-domain`; an unknown domain is an error.
    pub fn parse(verbose: u8, domains: Option<&str>) -> Result<Levels, String> {
        let verbose = verbose.min(3);
        let Some(list) = domains.filter(|d| !d.trim().is_empty()) else {
            return Ok(Levels {
                default: verbose,
                domains: Vec::new(),
            });
        };
        let mut out = Vec::new();
        for item in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let (name, level) = match item.split_once(':') {
                Some((n, l)) => match l.parse::<u8>() {
                    Ok(l) => (n, l.min(3)),
                    Err(_) => return Err(format!("invalid debug level: {item}")),
                },
                None => (item, verbose.max(1)),
            };
            if !DOMAINS.contains(&name) {
                return Err(format!(
                    "unknown debug domain: {name} (one of {})",
                    DOMAINS.join(", ")
                ));
            }
            out.push((name.to_string(), level));
        }
        Ok(Levels {
            default: 0,
            domains: out,
        })
    }

    /// The level of `domain`.
    pub fn of(&self, domain: &str) -> u8 {
        self.domains
            .iter()
            .find(|(d, _)| d == domain)
            .map_or(self.default, |&(_, l)| l)
    }
}

struct Sink {
    levels: Levels,
    /// `--logfile`; stderr when none.
    file: Option<File>,
    /// A descriptor of the log file without close-on-exec, for the traced program.
    inherited: Option<RawFd>,
}

static SINK: OnceLock<Mutex<Sink>> = OnceLock::new();

/// Sets the levels and the destination; called once, before the command runs. Without a call
/// warnings go to stderr and no debug line is printed.
pub fn init(levels: Levels, logfile: Option<&str>) -> anyhow::Result<()> {
    let file = match logfile {
        Some(path) => Some(
            File::create(path).map_err(|e| anyhow::anyhow!("cannot open log file {path}: {e}"))?,
        ),
        None => None,
    };
    // SAFETY: dup of a descriptor this process owns; the copy has no close-on-exec flag, so
    // the traced program inherits it (and the recorder closes nothing it relies on).
    let inherited = file
        .as_ref()
        .map(|f| unsafe { libc::dup(f.as_raw_fd()) })
        .filter(|&fd| fd >= 0);
    let _ = SINK.set(Mutex::new(Sink {
        levels,
        file,
        inherited,
    }));
    Ok(())
}

/// Writes `line` (no newline) to the log destination.
fn write_line(line: &str) {
    let mut text = String::with_capacity(line.len() + 1);
    text.push_str(line);
    text.push('\n');
    if let Some(sink) = SINK.get() {
        let mut sink = sink.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(f) = sink.file.as_mut() {
            let _ = f.write_all(text.as_bytes());
            return;
        }
    }
    let _ = std::io::stderr().lock().write_all(text.as_bytes());
}

/// A warning: `WARN: <msg>`.
pub fn warn(msg: impl AsRef<str>) {
    write_line(&format!("WARN: {}", msg.as_ref()));
}

/// A line printed as it is (stderr or the log file).
pub fn line(text: impl AsRef<str>) {
    write_line(text.as_ref());
}

/// The debug level of `domain`.
pub fn level(domain: &str) -> u8 {
    SINK.get().map_or(0, |s| {
        s.lock()
            .unwrap_or_else(|e| e.into_inner())
            .levels
            .of(domain)
    })
}

/// A debug line `DOMAIN: msg`, printed when `domain`'s level is at least `level`.
pub fn debug(domain: &str, level_needed: u8, msg: impl AsRef<str>) {
    if level(domain) >= level_needed {
        write_line(&format!("{domain}: {}", msg.as_ref()));
    }
}

/// The descriptor the traced program's runtime writes its messages to with `--logfile`
/// (inherited across exec); `None`: its stderr.
pub fn runtime_log_fd() -> Option<RawFd> {
    SINK.get()
        .and_then(|s| s.lock().unwrap_or_else(|e| e.into_inner()).inherited)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_by_domain() {
        let l = Levels::parse(0, None).unwrap();
        assert_eq!(l.of("uftrace"), 0);
        let l = Levels::parse(2, None).unwrap();
        assert_eq!((l.of("uftrace"), l.of("mcount")), (2, 2));
        let l = Levels::parse(5, None).unwrap();
        assert_eq!(l.of("filter"), 3);
        // -v --debug-domain=filter:2,mcount: filter at 2, mcount at 1, the others off.
        let l = Levels::parse(1, Some("filter:2,mcount")).unwrap();
        assert_eq!((l.of("filter"), l.of("mcount"), l.of("uftrace")), (2, 1, 0));
        // A listed domain is on even without -v.
        assert_eq!(Levels::parse(0, Some("kernel")).unwrap().of("kernel"), 1);
        assert!(Levels::parse(1, Some("bogus")).is_err());
        assert!(Levels::parse(1, Some("filter:x")).is_err());
    }
}
