//! Calling a function inside a stopped thread of another process: save the thread's registers
//! and its whole FPU/vector state, put the call's data below the red zone of its stack, point
//! `rip` at the function with a return address of 0 (so that its return faults, a stop caught
//! here and never delivered), run it, read `rax`, and put everything back exactly, including
//! `orig_rax`/`rax` so that a system call the thread was interrupted in restarts as it would
//! have.
//!
//! Symbols are found from the process's `/proc/PID/maps` and the dynamic symbol table of the
//! mapped file.

use super::ptrace::{ptrace, wait_stop, wait_stop_for, Stop, Stopped};
use anyhow::{bail, Context};
use std::path::{Path, PathBuf};

/// `NT_X86_XSTATE`: the note type of the XSAVE area for `PTRACE_GETREGSET`.
const NT_X86_XSTATE: usize = 0x202;
/// Room for the XSAVE area (AVX-512 needs about 2.7 KiB; AMX 11 KiB).
const XSTATE_MAX: usize = 16 * 1024;
/// Bytes below the stack pointer that the interrupted code may be using (x86-64 ABI).
const RED_ZONE: u64 = 128;

/// A thread's registers as they were before the calls.
pub struct Saved {
    regs: libc::user_regs_struct,
    /// The XSAVE area (`NT_X86_XSTATE`), or the legacy FXSAVE area when the kernel has none.
    fp: Vec<u8>,
    xstate: bool,
}

fn get_regs(tid: i32) -> std::io::Result<libc::user_regs_struct> {
    // SAFETY: plain data, all-zero is valid.
    let mut regs: libc::user_regs_struct = unsafe { std::mem::zeroed() };
    ptrace(libc::PTRACE_GETREGS, tid, 0, &raw mut regs as usize)?;
    Ok(regs)
}

fn set_regs(tid: i32, regs: &libc::user_regs_struct) -> std::io::Result<()> {
    ptrace(libc::PTRACE_SETREGS, tid, 0, regs as *const _ as usize).map(drop)
}

impl Saved {
    /// Saves `tid`'s registers.
    pub fn take(tid: i32) -> anyhow::Result<Saved> {
        let regs = get_regs(tid).context("cannot read the thread's registers")?;
        let mut fp = vec![0u8; XSTATE_MAX];
        let mut iov = libc::iovec {
            iov_base: fp.as_mut_ptr().cast(),
            iov_len: fp.len(),
        };
        let xstate = ptrace(
            libc::PTRACE_GETREGSET,
            tid,
            NT_X86_XSTATE,
            &raw mut iov as usize,
        )
        .is_ok();
        if xstate {
            fp.truncate(iov.iov_len);
        } else {
            fp.resize(size_of::<libc::user_fpregs_struct>(), 0);
            ptrace(libc::PTRACE_GETFPREGS, tid, 0, fp.as_mut_ptr() as usize)
                .context("cannot read the thread's FPU registers")?;
        }
        Ok(Saved { regs, fp, xstate })
    }

    /// Puts `tid`'s registers back as they were.
    pub fn restore(&self, tid: i32) -> anyhow::Result<()> {
        let mut fp = self.fp.clone();
        if self.xstate {
            let mut iov = libc::iovec {
                iov_base: fp.as_mut_ptr().cast(),
                iov_len: fp.len(),
            };
            ptrace(
                libc::PTRACE_SETREGSET,
                tid,
                NT_X86_XSTATE,
                &raw mut iov as usize,
            )
        } else {
            ptrace(libc::PTRACE_SETFPREGS, tid, 0, fp.as_mut_ptr() as usize)
        }
        .context("cannot restore the thread's vector registers")?;
        set_regs(tid, &self.regs).context("cannot restore the thread's registers")
    }

    /// Where the stopped thread is.
    pub fn rip(&self) -> u64 {
        self.regs.rip
    }
}

/// A thread's saved registers that are put back when this is dropped, unless
/// [`Held::restore`] did it: an error or a panic between the calls never lets the thread run on
/// with the registers of a call. (Dropped before the [`Stopped`] that detaches the thread.)
pub struct Held {
    tid: i32,
    saved: Saved,
    restored: bool,
}

impl Held {
    /// Saves `tid`'s registers.
    pub fn take(tid: i32) -> anyhow::Result<Held> {
        Ok(Held {
            tid,
            saved: Saved::take(tid)?,
            restored: false,
        })
    }

    pub fn saved(&self) -> &Saved {
        &self.saved
    }

    /// Puts the registers back now.
    pub fn restore(mut self) -> anyhow::Result<()> {
        self.restored = true;
        self.saved.restore(self.tid)
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        if !self.restored {
            let _ = self.saved.restore(self.tid);
        }
    }
}

/// Where stopped thread `tid` is: its `rip`, and the system call it was blocked in and
/// will restart (`None` if none: running user code, or a call that has completed).
pub fn position(tid: i32) -> Option<(u64, Option<u64>)> {
    let regs = get_regs(tid).ok()?;
    // -ERESTARTSYS .. -ERESTART_RESTARTBLOCK: interrupted, to be restarted.
    let restarts = (-516..=-512).contains(&(regs.rax as i64));
    let call = (regs.orig_rax as i64 >= 0 && restarts).then_some(regs.orig_rax);
    Some((regs.rip, call))
}

/// Writes `data` at `addr` in the memory of thread `pid`.
fn write_mem(pid: i32, addr: u64, data: &[u8]) -> std::io::Result<()> {
    let local = libc::iovec {
        iov_base: data.as_ptr() as *mut _,
        iov_len: data.len(),
    };
    let remote = libc::iovec {
        iov_base: addr as *mut _,
        iov_len: data.len(),
    };
    // SAFETY: `local` describes `data`, readable for its length; the remote range is the
    // other process's, checked by the kernel.
    let n = unsafe { libc::process_vm_writev(pid, &local, 1, &remote, 1, 0) };
    match n {
        n if n as usize == data.len() => Ok(()),
        -1 => Err(std::io::Error::last_os_error()),
        _ => Err(std::io::Error::from_raw_os_error(libc::EFAULT)),
    }
}

/// Reads a NUL-terminated string at `addr` in the memory of thread `pid` (at most 512 bytes).
pub fn read_cstr(pid: i32, addr: u64) -> Option<String> {
    let mut buf = vec![0u8; 512];
    let local = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    let remote = libc::iovec {
        iov_base: addr as *mut _,
        iov_len: buf.len(),
    };
    // SAFETY: `local` describes `buf`, writable for its length.
    let n = unsafe { libc::process_vm_readv(pid, &local, 1, &remote, 1, 0) };
    if n <= 0 {
        return None;
    }
    buf.truncate(n as usize);
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    Some(String::from_utf8_lossy(&buf[..end]).into_owned())
}

/// Calls `func(args...)` (at most 6 integer arguments) in thread `tid` of `stopped`, with
/// `data` copied below its red zone: an argument equal to [`DATA`] is replaced by the data's
/// address. The thread's registers are left changed: the caller restores them ([`Saved`]).
/// Signals that arrive meanwhile are kept for the thread's resumption. A call that has not
/// returned after `lock_wait` is taken to wait for a lock a stopped thread holds: the other
/// threads run until it returns, and are stopped again after.
pub fn call(
    stopped: &mut Stopped,
    tid: i32,
    saved: &Saved,
    (func, lock_wait): (u64, std::time::Duration),
    args: &[u64],
    data: &[u8],
) -> anyhow::Result<u64> {
    let mut regs = saved.regs;
    let data_at = (regs.rsp - RED_ZONE - data.len() as u64 - 64) & !15;
    // Through the thread, not the process: a main thread that called pthread_exit has no
    // memory to reach.
    if !data.is_empty() {
        write_mem(tid, data_at, data).context("cannot write into the process's stack")?;
    }
    // At the function's first instruction, rsp + 8 is 16-byte aligned (a call pushed 8).
    let sp = data_at - 8;
    write_mem(tid, sp, &0u64.to_ne_bytes()).context("cannot write into the process's stack")?;
    let arg = |i: usize| match args.get(i).copied() {
        Some(DATA) => data_at,
        Some(a) => a,
        None => 0,
    };
    regs.rdi = arg(0);
    regs.rsi = arg(1);
    regs.rdx = arg(2);
    regs.rcx = arg(3);
    regs.r8 = arg(4);
    regs.r9 = arg(5);
    regs.rax = 0;
    regs.rip = func;
    regs.rsp = sp;
    // Not in a system call any more: the kernel must not restart one at the new rip.
    regs.orig_rax = u64::MAX;
    set_regs(tid, &regs).context("cannot set the thread's registers")?;
    // After a while, the call is taken to wait for a lock a stopped thread holds (the
    // loader's, malloc's): the other threads run until it returns.
    let mut released = false;
    let result = run_call(stopped, tid, (func, lock_wait), &mut released);
    if released {
        stopped.restop_others(tid)?;
    }
    result
}

/// Runs the call set up by [`call`] until its return faults at address 0.
fn run_call(
    stopped: &mut Stopped,
    tid: i32,
    (func, lock_wait): (u64, std::time::Duration),
    released: &mut bool,
) -> anyhow::Result<u64> {
    let pid = stopped.pid;
    loop {
        ptrace(libc::PTRACE_CONT, tid, 0, 0).context("cannot resume the thread")?;
        let stop = match *released {
            true => wait_stop(tid)?,
            false => match wait_stop_for(tid, Some(lock_wait))? {
                Some(stop) => stop,
                None => {
                    crate::diag::debug(
                        "uftrace",
                        1,
                        format!("attach: the call in {tid} waits: the other threads run"),
                    );
                    *released = true;
                    stopped.release_others(tid);
                    wait_stop(tid)?
                }
            },
        };
        match stop {
            Stop::Gone => bail!("process {pid} ended during the call at {func:#x}"),
            // A pending interrupt, or a group stop: go on.
            Stop::Event => {}
            Stop::Signal(libc::SIGSEGV) => {
                let now = get_regs(tid).context("cannot read the thread's registers")?;
                if now.rip == 0 {
                    return Ok(now.rax);
                }
                bail!(
                    "the call at {func:#x} in process {pid} crashed at {:#x}",
                    now.rip
                );
            }
            Stop::Signal(sig) => stopped.add_pending(tid, sig),
        }
    }
}

/// How long a `dlopen` may take with the other threads stopped (it may need the loader's
/// lock, which another thread's `dlopen` holds).
pub const LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(1);

/// How long `utrace_attach`/`utrace_detach` may take with the other threads stopped: they
/// patch code the others may run, so the others are let go only as a last resort.
pub const PATCH_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// The argument value that stands for the address of the call's data.
pub const DATA: u64 = u64::MAX - 0xfff;

/// The modules of process `pid`: each file's path and the start of its lowest mapping, and
/// the executable ranges with their paths.
pub struct Modules {
    first: Vec<(PathBuf, u64)>,
    exec: Vec<(u64, u64, PathBuf)>,
}

impl Modules {
    pub fn read(pid: i32) -> anyhow::Result<Modules> {
        let path = super::ptrace::proc_dir(pid).join("maps");
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        Ok(Modules::parse(&text))
    }

    pub fn parse(text: &str) -> Modules {
        let (mut first, mut exec) = (Vec::<(PathBuf, u64)>::new(), Vec::new());
        for line in text.lines() {
            let mut it = line.split_whitespace();
            let (Some(range), Some(perms)) = (it.next(), it.next()) else {
                continue;
            };
            let path: String = it.skip(3).collect::<Vec<_>>().join(" ");
            if !path.starts_with('/') {
                continue;
            }
            let Some((s, e)) = range.split_once('-') else {
                continue;
            };
            let (Ok(start), Ok(end)) = (u64::from_str_radix(s, 16), u64::from_str_radix(e, 16))
            else {
                continue;
            };
            // A file deleted or replaced since it was mapped: its old name (read through
            // `map_files`, see [`symbol`]).
            let path = PathBuf::from(path.strip_suffix(" (deleted)").unwrap_or(&path));
            if perms.contains('x') {
                exec.push((start, end, path.clone()));
            }
            match first.iter_mut().find(|(p, _)| *p == path) {
                Some((_, lo)) => *lo = (*lo).min(start),
                None => first.push((path, start)),
            }
        }
        Modules { first, exec }
    }

    /// The first module whose file name matches `name`.
    pub fn find(&self, name: impl Fn(&str) -> bool) -> Option<&(PathBuf, u64)> {
        self.first
            .iter()
            .find(|(p, _)| p.file_name().and_then(|n| n.to_str()).is_some_and(&name))
    }

    /// The module at exactly `path`.
    pub fn at(&self, path: &Path) -> Option<&(PathBuf, u64)> {
        self.first.iter().find(|(p, _)| p == path)
    }

    /// The executable ranges of the module at `path`.
    pub fn code_of(&self, path: &Path) -> Vec<(u64, u64)> {
        self.exec
            .iter()
            .filter(|(_, _, p)| p == path)
            .map(|&(s, e, _)| (s, e))
            .collect()
    }
}

/// Whether `name` is the dynamic loader's file name.
pub fn is_loader(name: &str) -> bool {
    name.starts_with("ld-linux") || name.starts_with("ld-2.") || name.starts_with("ld64.so")
}

/// Whether `name` is the C library's file name.
pub fn is_libc(name: &str) -> bool {
    name.starts_with("libc.so") || (name.starts_with("libc-") && name.ends_with(".so"))
}

/// The run-time address of the defined dynamic symbol `name` of the module `path` whose
/// lowest mapping starts at `start`.
pub fn symbol(pid: i32, path: &Path, start: u64, name: &str) -> Option<u64> {
    // The very file mapped (deleted or replaced since), else the file as the process sees
    // it (another mount namespace), else as utrace does.
    let mapped = std::fs::read_to_string(super::ptrace::proc_dir(pid).join("maps"))
        .ok()
        .and_then(|maps| {
            let range = maps
                .lines()
                .find(|l| l.starts_with(&format!("{start:x}-")))?
                .split_whitespace()
                .next()?
                .to_string();
            std::fs::read(format!("/proc/{pid}/map_files/{range}")).ok()
        });
    let bytes = match mapped {
        Some(b) => b,
        None => std::fs::read(format!("/proc/{pid}/root{}", path.display()))
            .or_else(|_| std::fs::read(path))
            .ok()?,
    };
    let elf = record_format::elf::parse(&bytes)?;
    let sym = elf.dynsyms.iter().find(|s| {
        s.st_value != 0 && s.st_shndx != 0 && elf.dynstrtab.get_at(s.st_name) == Some(name)
    })?;
    Some(record_format::elf::load_bias(&elf, start).wrapping_add(sym.st_value))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modules_from_maps() {
        let maps = "\
55d0c0a00000-55d0c0a01000 r--p 00000000 08:01 1234                       /tmp/a prog
55d0c0a01000-55d0c0a02000 r-xp 00001000 08:01 1234                       /tmp/a prog
7f0000000000-7f0000001000 r--p 00000000 08:01 99                         /lib/libc.so.6
7f0000001000-7f0000100000 r-xp 00001000 08:01 99                         /lib/libc.so.6
7ffd00100000-7ffd00102000 r-xp 00000000 00:00 0                          [vdso]
7f1000000000-7f1000001000 r-xp 00000000 08:01 77                         /x/libmcount.so (deleted)
";
        let m = Modules::parse(maps);
        let libc = m.find(is_libc).unwrap();
        assert_eq!(libc, &(PathBuf::from("/lib/libc.so.6"), 0x7f0000000000));
        assert_eq!(
            m.code_of(Path::new("/tmp/a prog")),
            vec![(0x55d0c0a01000, 0x55d0c0a02000)]
        );
        assert!(m.at(Path::new("/tmp/a prog")).is_some());
        // Replaced since it was mapped: found by its name.
        assert_eq!(
            m.at(Path::new("/x/libmcount.so")),
            Some(&(PathBuf::from("/x/libmcount.so"), 0x7f1000000000))
        );
        assert!(is_libc("libc-2.31.so") && !is_libc("libcrypt.so.1"));
    }

    #[test]
    fn symbols_of_this_process_libc() {
        let pid = std::process::id() as i32;
        let m = Modules::read(pid).unwrap();
        let (path, start) = m.find(is_libc).unwrap().clone();
        let at = symbol(pid, &path, start, "getpid").unwrap();
        assert_eq!(at, libc::getpid as *const () as usize as u64);
    }
}
