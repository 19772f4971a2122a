//! Trigger actions (`-T FUNC@ACTION[,ACTION...]`, cli.md §3.2), parsed alike by the runtime
//! (which applies them while recording) and by the analysis commands (at replay time).
//!
//! Action words are case-insensitive; `trace_on`, `trace-on` and `traceon` are the same word.
//! A word that is no action is the pattern's module name (so `b@bogus` silently matches
//! nothing). Argument specs (`argN`, `fpargN`, `retval`) and the other record-only words are
//! skipped here: they have their own parsers.

use crate::timeval::parse_time;

/// The actions of one `-T` value (or several, merged).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Actions {
    /// `depth=N`: inside FUNC, at most N levels (FUNC included).
    pub depth: Option<u32>,
    /// `time=TIME` in nanoseconds: a time filter for FUNC and below.
    pub time: Option<u64>,
    /// `size=N`: a size filter below FUNC.
    pub size: Option<u64>,
    pub filter: bool,
    pub notrace: bool,
    pub hide: bool,
    pub caller: bool,
    /// Always shown, even under a time filter.
    pub trace: bool,
    pub trace_on: bool,
    pub trace_off: bool,
    pub backtrace: bool,
    pub finish: bool,
    pub recover: bool,
    /// `dump` (flight recorder): write the newest records at FUNC's entry, or with `time=`,
    /// at the exit of a call of FUNC that lasted at least that long ([`Actions::dump_time`]).
    pub dump: bool,
    /// `time=TIME` given with `dump`, in nanoseconds: the duration that makes a call dump
    /// (then no time filter).
    pub dump_time: Option<u64>,
    /// `read=...`: the counters read at entry and exit ([`read`] bits).
    pub read: u8,
    /// `color=NAME`: the ANSI code of the colour.
    pub color: Option<&'static str>,
}

impl Actions {
    /// Adds the actions of a later trigger for the same function.
    pub fn merge(&mut self, o: &Actions) {
        self.depth = o.depth.or(self.depth);
        self.time = o.time.or(self.time);
        self.size = o.size.or(self.size);
        self.filter |= o.filter;
        self.notrace |= o.notrace;
        self.hide |= o.hide;
        self.caller |= o.caller;
        self.trace |= o.trace;
        // The later of trace_on / trace_off for the same function wins.
        if o.trace_on || o.trace_off {
            self.trace_on = o.trace_on;
            self.trace_off = o.trace_off;
        }
        self.backtrace |= o.backtrace;
        self.finish |= o.finish;
        self.recover |= o.recover;
        self.dump |= o.dump;
        self.dump_time = o.dump_time.or(self.dump_time);
        self.read |= o.read;
        self.color = o.color.or(self.color);
    }
}

/// ANSI code for a `color=` trigger name.
pub fn color_code(name: &str) -> Option<&'static str> {
    Some(match name {
        "red" => "\x1b[91m",
        "green" => "\x1b[32m",
        "blue" => "\x1b[94m",
        "yellow" => "\x1b[33m",
        "magenta" => "\x1b[35m",
        "cyan" => "\x1b[36m",
        "bold" => "\x1b[1m",
        "gray" => "\x1b[90m",
        _ => return None,
    })
}

/// Words handled by other parsers (argument specs) or without effect here.
fn is_other_word(lw: &str) -> bool {
    lw == "auto-args"
        || lw.starts_with("if:")
        || lw.starts_with("clear")
        || lw.starts_with("arg")
        || lw.starts_with("fparg")
        || lw.starts_with("retval")
}

/// One parsed `-T` value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Trigger<'a> {
    /// The function pattern (before the `@`).
    pub name: &'a str,
    /// The first word that is not an action.
    pub module: Option<&'a str>,
    pub actions: Actions,
}

/// Parses one `-T` value; complaints in uftrace's words (for `Usage:` / warnings) go to
/// `notices`.
pub fn parse_trigger<'a>(spec: &'a str, notices: &mut Vec<String>) -> Trigger<'a> {
    let (name, rest) = spec.split_once('@').unwrap_or((spec, ""));
    let mut a = Actions::default();
    let mut module = None;
    for w in rest.split(',').filter(|w| !w.is_empty()) {
        let lw = w.to_ascii_lowercase();
        let norm = lw.replace(['_', '-'], "");
        if let Some(v) = lw.strip_prefix("depth=") {
            match v.parse::<u32>() {
                Ok(d) if d > 0 => a.depth = Some(d),
                _ => notices.push(format!("invalid depth given: {v} (ignoring..)")),
            }
        } else if let Some(v) = lw.strip_prefix("time=") {
            a.time = parse_time(v, 3).ok().map(|p| p.ns);
        } else if let Some(v) = lw.strip_prefix("size=") {
            a.size = v.parse().ok();
        } else if let Some(v) = lw.strip_prefix("color=") {
            match color_code(v) {
                Some(c) => a.color = Some(c),
                None => notices.push(format!("ignoring invalid color: {v}")),
            }
        } else if let Some(v) = lw.strip_prefix("read=") {
            match read::of(v) {
                Some(bit) => a.read |= bit,
                None => notices.push(format!("unknown read trigger: {v} (ignoring..)")),
            }
        } else if norm == "traceon" {
            a.trace_on = true;
        } else if norm == "traceoff" {
            a.trace_off = true;
        } else {
            match lw.as_str() {
                "filter" => a.filter = true,
                "notrace" => a.notrace = true,
                "hide" => a.hide = true,
                "caller" => a.caller = true,
                "trace" => a.trace = true,
                "backtrace" => a.backtrace = true,
                "finish" => a.finish = true,
                "recover" => a.recover = true,
                "dump" => a.dump = true,
                _ if is_other_word(&lw) => {}
                _ => {
                    if module.is_none() {
                        module = Some(w);
                    } else {
                        notices.push(format!("ignoring extra module: {w}"));
                    }
                }
            }
        }
    }
    // With `dump`, `time=` is the duration of a call that dumps, not a filter.
    if a.dump {
        a.dump_time = a.time.take();
    }
    Trigger {
        name,
        module,
        actions: a,
    }
}

/// The counters of `read=` trigger actions, one bit each, and the event ids of their records
/// (data-format §3.6: the `read:` event at entry, the `diff:` one before the exit).
pub mod read {
    pub const PROC_STATM: u8 = 1;
    pub const PAGE_FAULT: u8 = 2;
    pub const PMU_CYCLE: u8 = 4;
    pub const PMU_CACHE: u8 = 8;
    pub const PMU_BRANCH: u8 = 16;

    /// Every counter: (bit, name after `read=`, id of the `read:` event, of the `diff:` one,
    /// number of u64 values).
    pub const COUNTERS: [(u8, &str, u32, u32, usize); 5] = [
        (PROC_STATM, "proc/statm", 100001, 100003, 3),
        (PAGE_FAULT, "page-fault", 100002, 100004, 2),
        (PMU_CYCLE, "pmu-cycle", 100005, 100006, 2),
        (PMU_CACHE, "pmu-cache", 100007, 100008, 2),
        (PMU_BRANCH, "pmu-branch", 100009, 100010, 2),
    ];

    /// The bit of the counter named `name` (`proc/statm`, `page-fault`, `pmu-cycle`, ...).
    pub fn of(name: &str) -> Option<u8> {
        COUNTERS
            .iter()
            .find(|c| c.1.eq_ignore_ascii_case(name))
            .map(|c| c.0)
    }
}

/// What a `--signal SIG@ACTION` trigger does when the signal arrives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SignalAction {
    TraceOn,
    TraceOff,
    Finish,
    /// Flight recorder: write the newest records.
    Dump,
}

/// The signals `--signal` can name (Linux x86_64 numbers), without their `SIG` prefix.
const SIGNALS: &[(&str, i32)] = &[
    ("HUP", 1),
    ("INT", 2),
    ("QUIT", 3),
    ("ILL", 4),
    ("TRAP", 5),
    ("ABRT", 6),
    ("BUS", 7),
    ("FPE", 8),
    ("USR1", 10),
    ("SEGV", 11),
    ("USR2", 12),
    ("PIPE", 13),
    ("ALRM", 14),
    ("TERM", 15),
    ("STKFLT", 16),
    ("CHLD", 17),
    ("CONT", 18),
    ("TSTP", 20),
    ("TTIN", 21),
    ("TTOU", 22),
    ("URG", 23),
    ("XCPU", 24),
    ("XFSZ", 25),
    ("VTALRM", 26),
    ("PROF", 27),
    ("WINCH", 28),
    ("IO", 29),
    ("POLL", 29),
    ("PWR", 30),
    ("SYS", 31),
];

/// The number of a signal named `SIGUSR1`, `USR1` (any case), `SIGRTMIN+2` or `10`. Signals
/// that cannot be caught (`KILL`, `STOP`) are not accepted.
pub fn signal_number(name: &str) -> Option<i32> {
    let up = name.trim().to_ascii_uppercase();
    let bare = up.strip_prefix("SIG").unwrap_or(&up);
    if let Ok(n) = bare.parse::<i32>() {
        return (1..=64)
            .contains(&n)
            .then_some(n)
            .filter(|&n| n != 9 && n != 19);
    }
    if let Some(off) = bare.strip_prefix("RTMIN") {
        let off = match off.strip_prefix('+') {
            Some(n) => n.parse::<i32>().ok()?,
            None if off.is_empty() => 0,
            None => return None,
        };
        return Some(34 + off).filter(|&n| n <= 64);
    }
    SIGNALS.iter().find(|(s, _)| *s == bare).map(|&(_, n)| n)
}

/// Parses one `--signal` value, `SIG@ACTION[,ACTION...]`: the signal's number and its actions
/// (`trace_on`, `trace_off`, `finish`, `dump`, spelled as in `-T`). The error is one line.
pub fn parse_signal_trigger(spec: &str) -> Result<(i32, Vec<SignalAction>), String> {
    let (sig, words) = spec
        .split_once('@')
        .ok_or_else(|| format!("invalid signal trigger: {spec} (use SIG@ACTION)"))?;
    let signo = signal_number(sig).ok_or_else(|| format!("unknown signal: {sig}"))?;
    let mut actions = Vec::new();
    for w in words.split(',').filter(|w| !w.is_empty()) {
        let norm = w.to_ascii_lowercase().replace(['_', '-'], "");
        actions.push(match norm.as_str() {
            "traceon" => SignalAction::TraceOn,
            "traceoff" => SignalAction::TraceOff,
            "finish" => SignalAction::Finish,
            "dump" => SignalAction::Dump,
            _ => {
                return Err(format!(
                    "unsupported signal trigger action: {w} (trace_on, trace_off, finish or dump)"
                ))
            }
        });
    }
    if actions.is_empty() {
        return Err(format!("no action in signal trigger: {spec}"));
    }
    Ok((signo, actions))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signal_triggers() {
        assert_eq!(signal_number("SIGUSR1"), Some(10));
        assert_eq!(signal_number("usr2"), Some(12));
        assert_eq!(signal_number("15"), Some(15));
        assert_eq!(signal_number("SIGRTMIN+2"), Some(36));
        assert_eq!(signal_number("SIGKILL"), None);
        assert_eq!(signal_number("9"), None);
        assert_eq!(signal_number("BOGUS"), None);
        assert_eq!(
            parse_signal_trigger("SIGUSR1@finish"),
            Ok((10, vec![SignalAction::Finish]))
        );
        assert_eq!(
            parse_signal_trigger("USR2@trace-off,Trace_On"),
            Ok((12, vec![SignalAction::TraceOff, SignalAction::TraceOn]))
        );
        assert_eq!(
            parse_signal_trigger("USR1@dump"),
            Ok((10, vec![SignalAction::Dump]))
        );
        assert!(parse_signal_trigger("SIGUSR1@depth=2").is_err());
        assert!(parse_signal_trigger("SIGUSR1").is_err());
        assert!(parse_signal_trigger("SIGFOO@finish").is_err());
    }

    #[test]
    fn actions_and_module() {
        let mut n = Vec::new();
        let t = parse_trigger(
            "b@filter,backtrace,depth=2,Trace_On,color=pink,mod,arg1/x,time=1us,size=30",
            &mut n,
        );
        assert_eq!(t.name, "b");
        assert_eq!(t.module, Some("mod"));
        let a = t.actions;
        assert!(a.filter && a.backtrace && a.trace_on && !a.trace_off);
        assert_eq!(a.depth, Some(2));
        assert_eq!(a.time, Some(1000));
        assert_eq!(a.size, Some(30));
        assert_eq!(n, ["ignoring invalid color: pink"]);
    }

    #[test]
    fn dump_takes_the_time_as_its_threshold() {
        let mut n = Vec::new();
        let a = parse_trigger("io_getevents@time=500us,dump", &mut n).actions;
        assert!(a.dump);
        assert_eq!((a.time, a.dump_time), (None, Some(500_000)));
        let a = parse_trigger("marker@dump", &mut n).actions;
        assert!(a.dump && a.dump_time.is_none());
        let a = parse_trigger("f@time=1ms", &mut n).actions;
        assert!(!a.dump && a.time == Some(1_000_000));
        assert!(n.is_empty());
    }

    #[test]
    fn later_trace_toggle_wins() {
        let mut n = Vec::new();
        let mut a = parse_trigger("f@trace_on", &mut n).actions;
        a.merge(&parse_trigger("f@trace-off,depth=0", &mut n).actions);
        assert!(a.trace_off && !a.trace_on);
        assert_eq!(n, ["invalid depth given: 0 (ignoring..)"]);
    }
}
