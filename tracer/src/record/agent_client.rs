//! The agent's client: `utrace live -p PID` and `utrace record -p PID`, when process PID runs
//! libmcount with an agent (`record -g`), send it the tracing options given and exit, as
//! uftrace's client mode does; nothing is recorded by this command (the recording `utrace
//! record -g` keeps writing the data). A PID without an agent is attached to with ptrace
//! instead (`attach`).
//!
//! The agent is found by its socket, keyed by the process's effective uid and pid
//! (`record_format::agent::socket_path`); the options go as one request each, in this order:
//! `--trace`/`--disable`, `-D`, `-t`, then `-F`, `-N`, `-H`, `-C`, `-T` as one trigger list
//! (`FUNC@clear` removes an earlier filter or trigger).

use crate::invocation::Invocation;
use crate::notice::Notices;
use anyhow::{bail, Context};
use record_format::agent::{self as proto, Header, Request, HEADER_LEN};
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// A connection to the agent of process `pid` (the text of `-p`), if it has one: `Ok(None)`
/// sends the caller to ptrace attach, which also reports another user's process (whose agent
/// directory this user cannot look into).
pub fn connect(pid: &str) -> anyhow::Result<Option<UnixStream>> {
    let Ok(pid) = pid.trim().parse::<i32>() else {
        return Ok(None);
    };
    let Some(euid) = effective_uid(pid) else {
        return Ok(None);
    };
    let path = PathBuf::from(proto::socket_path(euid, pid));
    if std::fs::symlink_metadata(&path).is_err() {
        return Ok(None);
    }
    match UnixStream::connect(&path) {
        Ok(s) => Ok(Some(s)),
        // A socket left by a process that died with this pid: no agent listens.
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => Ok(None),
        Err(e) => Err(e).with_context(|| format!("cannot reach the agent of process {pid}")),
    }
}

/// The effective uid of process `pid` (from its `/proc` status).
fn effective_uid(pid: i32) -> Option<u32> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let uids = status.lines().find_map(|l| l.strip_prefix("Uid:"))?;
    uids.split_whitespace().nth(1)?.parse().ok()
}

/// The requests for the options of `inv`.
fn requests(inv: &Invocation, notices: &mut Notices) -> anyhow::Result<Vec<Request>> {
    let f = &inv.args.filter;
    let r = &inv.args.record;
    let refused = [
        (!inv.program.is_empty(), "a program to run"),
        (!f.argument.is_empty() || !f.retval.is_empty(), "-A/-R"),
        (f.auto_args, "-a/--auto-args"),
        (f.size_filter.is_some(), "-Z/--size-filter"),
        (!r.patch.is_empty() || !r.unpatch.is_empty(), "-P/-U"),
        (!r.signal.is_empty(), "--signal"),
        (r.duration.is_some(), "--duration"),
        (r.agent, "-g/--agent"),
    ];
    if let Some((_, what)) = refused.into_iter().find(|(on, _)| *on) {
        bail!(
            "process {} runs an agent: {what} cannot be sent to it",
            pid_text(inv)
        );
    }
    let mut out = vec![Request::Hello];
    let trace = match f.trace.as_deref() {
        Some("on") => Some(true),
        Some("off") => Some(false),
        Some(other) => bail!("invalid --trace value: {other} (use on or off)"),
        None => f.disable.then_some(false),
    };
    if let Some(on) = trace {
        out.push(Request::Trace(on));
    }
    if let Some(d) = f.depth.as_deref() {
        match crate::config::parse_depth(d, notices) {
            Some(d) => out.push(Request::Depth(d.min(proto::MAX_DEPTH))),
            None => bail!("invalid depth: {d}"),
        }
    }
    if let Some(t) = &f.time_filter {
        out.push(Request::Threshold(crate::timefmt::parse_time(
            t, 3, notices,
        )?));
    }
    let items = super::settings::trigger_items(f);
    if !items.is_empty() {
        let glob = inv
            .args
            .common
            .match_type
            .as_deref()
            .is_some_and(|m| crate::config::parse_match(m, notices) == replay::MatchType::Glob);
        out.push(Request::Triggers {
            glob,
            items: items.join(";"),
        });
    }
    if out.len() == 1 {
        bail!(
            "process {} runs an agent: give the options to change (--trace, -D, -t, -F, -N, -C, -T)",
            pid_text(inv)
        );
    }
    Ok(out)
}

fn pid_text(inv: &Invocation) -> &str {
    inv.args.record.pid.as_deref().unwrap_or_default().trim()
}

/// `-p PID` of a process whose agent answers: sends it the options, and that is the whole
/// command (its exit status is the answer); `None` when no agent is there (a ptrace attach
/// follows).
pub fn send_if_agent(inv: &Invocation, notices: &mut Notices) -> anyhow::Result<Option<ExitCode>> {
    let Some(pid) = inv.args.record.pid.as_deref() else {
        return Ok(None);
    };
    match connect(pid)? {
        Some(s) => run(inv, notices, s).map(Some),
        None => Ok(None),
    }
}

/// Sends the options of `inv` to the agent connected as `s`; fails on the first refusal.
pub fn run(inv: &Invocation, notices: &mut Notices, mut s: UnixStream) -> anyhow::Result<ExitCode> {
    let reqs = requests(inv, notices)?;
    let pid = pid_text(inv);
    let limit = Some(Duration::from_secs(10));
    s.set_read_timeout(limit)?;
    s.set_write_timeout(limit)?;
    for req in reqs {
        // An agent that refuses the connection replies and closes at once: its reason is
        // what to report, not the failed write (nor a broken pipe, which exits quietly).
        let sent = s.write_all(&req.encode());
        let (kind, text) = match read_reply(&mut s) {
            Ok(reply) => reply,
            Err(e) => match sent {
                Err(w) => bail!("cannot send to the agent of process {pid}: {w}"),
                Ok(()) => bail!("no reply from the agent of process {pid}: {e}"),
            },
        };
        match kind {
            proto::OK => {}
            proto::ERROR => bail!("the agent of process {pid} refused: {text}"),
            other => bail!("the agent of process {pid} sent an unknown reply ({other})"),
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// One reply frame: its type and text.
fn read_reply(s: &mut UnixStream) -> anyhow::Result<(u16, String)> {
    let mut head = [0u8; HEADER_LEN];
    s.read_exact(&mut head)?;
    let h = Header::decode(&head).map_err(|e| anyhow::anyhow!("{e}"))?;
    let mut payload = vec![0u8; h.len as usize];
    s.read_exact(&mut payload)?;
    Ok((h.kind, String::from_utf8_lossy(&payload).into_owned()))
}
