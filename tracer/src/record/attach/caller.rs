//! Choosing where the injected calls are safe: a thread stopped outside the C library's and
//! the loader's code (or in a system call the allocator does not make holding its lock), and
//! no thread inside libmcount's code. The threads are let run or single-stepped a little
//! until so.

use super::check_stop;
use super::inject::{self, Modules};
use super::ptrace::Stopped;
use anyhow::bail;
use std::path::Path;
use std::time::Duration;

/// The system calls that the C library's allocator makes holding its arena lock.
const ALLOCATOR_CALLS: [i64; 6] = [
    libc::SYS_brk,
    libc::SYS_mmap,
    libc::SYS_munmap,
    libc::SYS_mremap,
    libc::SYS_mprotect,
    libc::SYS_madvise,
];

/// Whether a thread at `rip` (in system call `call`) may run code that takes the C
/// library's or the loader's locks: it is outside their code (`inside`), or blocked in a
/// system call that the allocator does not make while holding its lock.
fn safe_caller(rip: u64, call: Option<u64>, inside: &[(u64, u64)]) -> bool {
    match call {
        Some(nr) => !ALLOCATOR_CALLS.contains(&(nr as i64)),
        None => !inside.iter().any(|&(a, b)| (a..b).contains(&rip)),
    }
}

/// How many times the threads are let run a little before no thread is found that may make
/// the calls.
const CALLER_TRIES: usize = 200;

/// The thread that makes the calls: the main thread if held, else another, at a place where
/// it holds none of the C library's or the loader's locks (a `dlopen` in a thread stopped in
/// `malloc` waits for itself); with `libmcount` loaded, also once no thread is inside its
/// code (a hook half-way through its bookkeeping). The threads are let run a little until so.
pub(super) fn caller(stopped: &mut Stopped, libmcount: Option<&Path>) -> anyhow::Result<i32> {
    for try_ in 0..CALLER_TRIES {
        let modules = Modules::read(stopped.pid)?;
        let hooks = libmcount.map_or(Vec::new(), |l| modules.code_of(l));
        let in_hook = stopped.tids().into_iter().any(|tid| {
            inject::position(tid)
                .is_some_and(|(rip, _)| hooks.iter().any(|&(a, b)| (a..b).contains(&rip)))
        });
        let inside = lock_code(&modules);
        if in_hook {
            check_stop()?;
            match try_ % 2 {
                0 => step_out(stopped, &stopped.tids(), &hooks, &inside)?,
                _ => stopped.shake()?,
            }
            continue;
        }
        let mut tids = stopped.tids();
        if let Some(i) = tids.iter().position(|&t| t == stopped.pid) {
            tids[..=i].rotate_right(1);
        }
        let safe: Vec<i32> = tids
            .iter()
            .copied()
            .filter(|&tid| {
                inject::position(tid).is_some_and(|(rip, call)| safe_caller(rip, call, &inside))
            })
            .collect();
        // Best when no thread holds such a lock (the call would wait for it); after a while,
        // any thread that holds none itself.
        if safe.len() == tids.len() || (try_ >= CALLER_TRIES / 2 && !safe.is_empty()) {
            return Ok(safe[0]);
        }
        check_stop()?;
        if try_ % 2 == 0 {
            step_out(stopped, &tids, &hooks, &inside)?;
        } else {
            stopped.shake()?;
        }
    }
    bail!(
        "process {}: its threads stay inside the C library, the loader or libmcount: cannot stop them where a call is safe",
        stopped.pid
    )
}

/// Single-steps each of `tids` that is running user code inside `hooks` or `inside` until it
/// is out of them (see [`Stopped::step_out`]).
fn step_out(
    stopped: &mut Stopped,
    tids: &[i32],
    hooks: &[(u64, u64)],
    inside: &[(u64, u64)],
) -> anyhow::Result<()> {
    let within = |rip: u64| {
        hooks
            .iter()
            .chain(inside)
            .any(|&(a, b)| (a..b).contains(&rip))
    };
    for &tid in tids {
        if inject::position(tid).is_some_and(|(rip, call)| call.is_none() && within(rip)) {
            stopped.step_out(tid, |rip| !within(rip))?;
        }
    }
    Ok(())
}

/// Lets the threads other than `tid` run a little until none is inside libmcount's code, and
/// for a while, until none is at a place where it may hold a lock of the C library or the
/// loader (`utrace_attach` allocates, and the others stay stopped while it patches).
pub(super) fn settle_others(
    stopped: &mut Stopped,
    tid: i32,
    libmcount: &Path,
) -> anyhow::Result<()> {
    for try_ in 0..CALLER_TRIES {
        let modules = Modules::read(stopped.pid)?;
        let hooks = modules.code_of(libmcount);
        // Only for a while: a thread that keeps stopping right after a system call (for a
        // signal it sent to its process) is not known to hold nothing, but likely does not.
        let inside = match try_ < CALLER_TRIES / 2 {
            true => lock_code(&modules),
            false => Vec::new(),
        };
        let settled = stopped.tids().into_iter().filter(|&t| t != tid).all(|t| {
            inject::position(t).is_some_and(|(rip, call)| {
                safe_caller(rip, call, &inside)
                    && !hooks.iter().any(|&(a, b)| (a..b).contains(&rip))
            })
        });
        if settled {
            return Ok(());
        }
        if crate::diag::level("uftrace") > 0 {
            let at: Vec<String> = stopped
                .tids()
                .into_iter()
                .map(|t| format!("{t}: {:x?}", inject::position(t)))
                .collect();
            crate::diag::debug(
                "uftrace",
                1,
                format!("attach: threads at {}", at.join(", ")),
            );
        }
        check_stop()?;
        let others: Vec<i32> = stopped.tids().into_iter().filter(|&t| t != tid).collect();
        if try_ % 2 == 0 {
            step_out(stopped, &others, &hooks, &inside)?;
            continue;
        }
        stopped.release_others(tid);
        std::thread::sleep(Duration::from_millis(2));
        stopped.restop_others(tid)?;
    }
    bail!(
        "process {}: its threads stay inside libmcount: cannot stop them where patching is safe",
        stopped.pid
    )
}

/// The code of the C library and the loader in `modules`.
fn lock_code(modules: &Modules) -> Vec<(u64, u64)> {
    let mut inside = Vec::new();
    for (path, _) in [
        modules.find(inject::is_libc),
        modules.find(inject::is_loader),
    ]
    .into_iter()
    .flatten()
    {
        inside.extend(modules.code_of(path));
    }
    inside
}
