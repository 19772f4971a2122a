//! Why a process cannot be attached to, in one line naming the cause: no such process, a
//! process some other tracer holds, another user's process, Yama's `ptrace_scope`. (A
//! statically linked program and a C library without `dlopen` are found in `mod.rs`.)

/// Yama's setting, if the kernel has it.
const YAMA: &str = "/proc/sys/kernel/yama/ptrace_scope";

/// What Yama's `ptrace_scope` value allows.
fn yama_meaning(scope: u32) -> &'static str {
    match scope {
        1 => "only a parent may trace its children",
        2 => "only processes with CAP_SYS_PTRACE may trace",
        3 => "no process may trace",
        _ => "any process of the same user may be traced",
    }
}

/// The error for a `PTRACE_SEIZE` of a thread of `pid` that failed with `err`.
pub fn seize_error(pid: i32, err: std::io::Error) -> anyhow::Error {
    match err.raw_os_error() {
        Some(libc::ESRCH) => anyhow::anyhow!("no such process: {pid}"),
        Some(libc::EPERM) => {
            if let Some(tracer) = status_field(pid, "TracerPid:").filter(|&t| t != 0) {
                return anyhow::anyhow!(
                    "cannot attach to process {pid}: it is being traced by process {tracer} already"
                );
            }
            let owner = status_field(pid, "Uid:");
            // SAFETY: getuid has no preconditions.
            let me = unsafe { libc::getuid() };
            let scope = std::fs::read_to_string(YAMA)
                .ok()
                .and_then(|s| s.trim().parse::<u32>().ok());
            anyhow::anyhow!("{}", permission_message(pid, owner, me, scope))
        }
        _ => anyhow::anyhow!("cannot attach to process {pid}: {err}"),
    }
}

/// The first number of the `/proc/PID/status` line starting with `name` (`Uid:` gives the
/// real uid, `TracerPid:` the process ptracing it).
fn status_field(pid: i32, name: &str) -> Option<u32> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with(name))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// The message for a refused ptrace: the cause that applies first.
pub fn permission_message(pid: i32, owner: Option<u32>, me: u32, scope: Option<u32>) -> String {
    if let Some(owner) = owner.filter(|&o| o != me && me != 0) {
        return format!(
            "cannot attach to process {pid}: it belongs to another user (uid {owner}, not {me})"
        );
    }
    if let Some(scope) = scope.filter(|&s| s >= 1) {
        return format!(
            "cannot attach to process {pid}: ptrace is not allowed by {YAMA} = {scope} ({}); \
             as root, `echo 0 > {YAMA}` allows it",
            yama_meaning(scope)
        );
    }
    format!("cannot attach to process {pid}: ptrace is not permitted (EPERM)")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn permission_messages_name_the_cause() {
        let other = permission_message(42, Some(0), 1000, Some(1));
        assert_eq!(
            other,
            "cannot attach to process 42: it belongs to another user (uid 0, not 1000)"
        );
        let yama = permission_message(42, Some(1000), 1000, Some(1));
        assert!(
            yama.contains("/proc/sys/kernel/yama/ptrace_scope = 1"),
            "{yama}"
        );
        assert!(
            yama.contains("only a parent may trace its children"),
            "{yama}"
        );
        let plain = permission_message(42, Some(1000), 1000, Some(0));
        assert!(
            plain.ends_with("ptrace is not permitted (EPERM)"),
            "{plain}"
        );
        // Root may trace anyone's process: Yama is the cause then.
        let root = permission_message(42, Some(1000), 0, Some(3));
        assert!(root.contains("no process may trace"), "{root}");
    }

    #[test]
    fn a_missing_process_is_named() {
        let e = seize_error(7, std::io::Error::from_raw_os_error(libc::ESRCH));
        assert_eq!(e.to_string(), "no such process: 7");
    }
}
