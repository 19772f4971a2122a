//! The contract between the recorder (`utrace record`) and the runtime (`libmcount.so`): the
//! environment variables the recorder sets and libmcount reads once at start-up, and which
//! files each side writes.
//!
//! | file | written by | when |
//! |---|---|---|
//! | `<tid>.dat` | libmcount, by the traced thread itself, flushing its staging ring ([`crate::ring`]) | when the ring is full and at thread end; the recorder salvages rings left unflushed (SIGKILL, crash, `exit()` with threads running) |
//! | `task.txt` | libmcount (`SESS`/`TASK`/`FORK` lines, appended with `O_APPEND`) | at start, for each new thread, after fork, after exec |
//! | `sid-<SID>.map` | libmcount (copy of `/proc/self/maps`) | at start of each session |
//! | `info`, `<module>.sym`, `default.opts` | the recorder | after the whole process tree has ended |

/// Data directory (absolute path).
pub const DIR: &str = "UTRACE_DIR";
/// `-b`: bytes per chunk of a thread's staging ring (`ring::CHUNKS` chunks; default 128 KiB).
pub const BUFFER: &str = "UTRACE_BUFFER";
/// Deepest nesting recorded (default 1024).
pub const MAX_STACK: &str = "UTRACE_MAX_STACK";
/// `-D`: record only this many levels.
pub const DEPTH: &str = "UTRACE_DEPTH";
/// `-t` in nanoseconds.
pub const THRESHOLD: &str = "UTRACE_THRESHOLD";
/// `-F`/`-N`/`-H`/`-C`/`-T` as `PATTERN@ACTION,...` items (`-F x` is `x@filter`, `-N x`
/// `x@notrace`, `-H x` `x@hide`, `-C x` `x@caller`), `;`-separated, in command-line order.
pub const TRIGGER: &str = "UTRACE_TRIGGER";
/// `--signal SIG@ACTION` values (validated by the recorder), `;`-separated.
pub const SIGNAL: &str = "UTRACE_SIGNAL";
/// `-Z`: functions smaller than this many bytes are not recorded.
pub const SIZE: &str = "UTRACE_SIZE";
/// Set by `--trace=off` (`--disable`): recording starts off, for `trace_on` triggers.
pub const TRACE_OFF: &str = "UTRACE_TRACE_OFF";
/// Pattern type: `regex` (default) or `glob`.
pub const PATTERN: &str = "UTRACE_PATTERN";
/// Set to `1` to hook library calls through the PLT (`--no-libcall` leaves it unset).
pub const PLTHOOK: &str = "UTRACE_PLTHOOK";
/// `-A` entries (`PATTERN@arg1,arg2/s`), `;`-separated: the `argspec` line of `info`.
pub const ARGSPEC: &str = "UTRACE_ARGSPEC";
/// `-R` entries (`PATTERN@retval/x`), `;`-separated: the `retspec` line of `info`.
pub const RETSPEC: &str = "UTRACE_RETSPEC";
/// Set to `1` by `-a`: functions without explicit items take their automatic ones.
pub const AUTO_ARGS: &str = "UTRACE_AUTO_ARGS";
/// Path of the executable's `.dbg` file (written by the recorder before the program starts),
/// for automatic items of the program's own functions.
pub const DBG: &str = "UTRACE_DBG";
/// Set to `1` by `--nest-libcall`: the libraries' PLTs are hooked too.
pub const NEST_LIBCALL: &str = "UTRACE_NEST_LIBCALL";
/// `--clock`: `mono` (default), `mono_raw` or `boot`.
pub const CLOCK: &str = "UTRACE_CLOCK";
/// Set to take every timestamp with `clock_gettime` instead of the TSC.
pub const NO_TSC: &str = "UTRACE_NO_TSC";
/// File descriptor for libmcount's one-line diagnostics (default stderr).
pub const LOGFD: &str = "UTRACE_LOGFD";
/// The runtime's debug level (`-v`, `--debug-domain=mcount`): 1 to 3; unset: no debug lines.
pub const DEBUG: &str = "UTRACE_DEBUG";
/// The recorder's pid: when that process is gone, libmcount writes what it holds and stops
/// recording (nothing would ever finish the data directory).
pub const RECORDER: &str = "UTRACE_RECORDER";

/// `-P`/`-U` in command-line order, `;`-separated, each `+PATTERN` (patch) or `-PATTERN`
/// (unpatch); a `PATTERN@MODULE` names a library (by the start of its file name), a pattern
/// without one the executable. Unset: nothing is patched. The pattern type is [`PATTERN`], the
/// least function size [`SIZE`].
pub const PATCH: &str = "UTRACE_PATCH";
/// The debug level of the `dynamic` domain (`-v`, `--debug-domain=dynamic:N`): 1 to 3.
pub const PATCH_DEBUG: &str = "UTRACE_PATCH_DEBUG";

/// `-W`: watch points, `;`-separated; only `cpu` is known (an EVENT `watch:cpu` when the CPU
/// of a task changes between function entries).
pub const WATCH: &str = "UTRACE_WATCH";
/// Set to `1` by `-E` when the recorder wrote `events.txt` (user SDT events, see
/// [`crate::sdt`]): libmcount enables the executable's probes of the events listed there.
pub const EVENT: &str = "UTRACE_EVENT";

/// `--keep-pid`: `<pid>:<fd>`, the program's own pid (the recorder's, kept) and a socket to
/// the recorder. In that process, libmcount's destructor writes `exit <status>` (the status
/// `exit()` was given) and waits until the recorder, having finished the data directory,
/// closes the socket: the shell gets the exit status only once the data is complete.
pub const KEEP_PID: &str = "UTRACE_KEEP_PID";

/// Set to `1` to send every hook through libmcount's Rust handlers, never the trampolines'
/// fast paths (what record-time filters do anyway): for tests that compare both paths. The
/// recorder passes it through from its own environment.
pub const SLOW_PATH: &str = "UTRACE_SLOW_PATH";

/// Set to `1` by `-g`/`--agent`: libmcount's constructor starts the agent thread, which lets
/// `utrace live -p PID` change tracing at run time (protocol and socket: [`crate::agent`]).
/// Every hook then takes the Rust handlers, which read the filters the agent replaces.
pub const AGENT: &str = "UTRACE_AGENT";

/// Set by `record -k`: the path of the `trace_marker_raw` file of the tracefs buffer that holds
/// the traced tasks' events. libmcount's `io_submit` / `io_getevents` then write there the
/// iocbs submitted and the events reaped ([`crate::aio`]).
pub const AIO_MARKER: &str = "UTRACE_AIO_MARKER";

/// Default size of a thread's staging ring.
pub const DEFAULT_BUFFER: usize = 128 * 1024;
/// Default `max_stack`.
pub const DEFAULT_MAX_STACK: usize = 1024;

/// `utrace record -p PID`: the file in the data directory where the recorder writes the
/// settings of an attached session (the variables above, as `NAME=VALUE` records each ended by
/// a NUL byte) before it calls libmcount's `utrace_attach` in the process. The process's own
/// environment is left alone: its children must not inherit tracing.
pub const ATTACH_FILE: &str = "attach.env";

/// In an [`ATTACH_FILE`] only: the instruction addresses (hex, `,`-separated) of the
/// process's threads, stopped while `utrace_attach` runs: functions holding one of them in
/// the bytes that patching rewrites must not be patched.
pub const ATTACH_AVOID: &str = "UTRACE_ATTACH_AVOID";

/// The addresses of an [`ATTACH_AVOID`] value (malformed items skipped).
pub fn parse_avoid(text: &str) -> Vec<u64> {
    text.split(',')
        .filter_map(|a| u64::from_str_radix(a.trim().trim_start_matches("0x"), 16).ok())
        .collect()
}

/// The bytes of an [`ATTACH_FILE`] holding `vars` (names must not contain `=` or NUL; values
/// must not contain NUL).
pub fn encode_vars<'a>(vars: impl IntoIterator<Item = (&'a str, &'a [u8])>) -> Vec<u8> {
    let mut out = Vec::new();
    for (name, value) in vars {
        out.extend_from_slice(name.as_bytes());
        out.push(b'=');
        out.extend_from_slice(value);
        out.push(0);
    }
    out
}

/// The `(name, value)` records of an [`ATTACH_FILE`]; records without `=` are skipped.
pub fn decode_vars(bytes: &[u8]) -> impl Iterator<Item = (&[u8], &[u8])> {
    bytes.split(|&b| b == 0).filter_map(|rec| {
        let eq = rec.iter().position(|&b| b == b'=')?;
        Some((&rec[..eq], &rec[eq + 1..]))
    })
}

#[cfg(test)]
mod attach_file_tests {
    use super::*;

    #[test]
    fn vars_round_trip() {
        let bytes = encode_vars([(DIR, &b"/tmp/a b"[..]), (TRIGGER, &b"x=1@filter;y"[..])]);
        let back: Vec<_> = decode_vars(&bytes).collect();
        assert_eq!(
            back,
            vec![
                (DIR.as_bytes(), &b"/tmp/a b"[..]),
                (TRIGGER.as_bytes(), &b"x=1@filter;y"[..])
            ]
        );
        assert_eq!(decode_vars(b"junk\0A=\0").count(), 1);
        assert_eq!(parse_avoid("7f00,0x10, zz,"), vec![0x7f00, 0x10]);
    }
}
