//! Raw Linux system calls (x86_64), so that libmcount never goes through symbols the traced
//! program may interpose (`open`, `write`, `mmap`…) and never touches `errno`.
//!
//! Every wrapper returns `Err(errno)` for the kernel's `-4095..=-1` results.

use core::arch::asm;
use core::ffi::CStr;

pub const PAGE_SIZE: usize = 4096;

const SYS_READ: usize = 0;
const SYS_WRITE: usize = 1;
const SYS_CLOSE: usize = 3;
const SYS_CLOSE_RANGE: usize = 436;
const SYS_FSTAT: usize = 5;
const SYS_POLL: usize = 7;
const SYS_NANOSLEEP: usize = 35;
const SYS_MMAP: usize = 9;
const SYS_PWRITE64: usize = 18;
const SYS_MUNMAP: usize = 11;
const SYS_GETPID: usize = 39;
const SYS_FCNTL: usize = 72;
const SYS_FTRUNCATE: usize = 77;
const SYS_FCHMOD: usize = 91;
const SYS_FSTATFS: usize = 138;
const SYS_GETEUID: usize = 107;
const SYS_GETPPID: usize = 110;
const SYS_GETTID: usize = 186;
const SYS_FUTEX: usize = 202;
const SYS_OPENAT: usize = 257;
const SYS_UNLINKAT: usize = 263;
const SYS_FALLOCATE: usize = 285;
const SYS_GETRANDOM: usize = 318;
const SYS_PROCESS_VM_READV: usize = 310;
const SYS_PIDFD_OPEN: usize = 434;
const SYS_GETRUSAGE: usize = 98;
const SYS_PERF_EVENT_OPEN: usize = 298;
pub const SYS_IO_GETEVENTS: usize = 208;
pub const SYS_IO_SUBMIT: usize = 209;
pub const SYS_IO_PGETEVENTS: usize = 333;

pub type SysResult<T> = Result<T, i32>;

/// # Safety
/// The arguments must be valid for system call `nr` (pointers to memory of the sizes it
/// reads or writes).
#[inline]
unsafe fn syscall6(nr: usize, a: [usize; 6]) -> isize {
    let ret: isize;
    // SAFETY: the caller guarantees the arguments are valid for `nr`; the `syscall`
    // instruction clobbers only rcx and r11 (declared) and rax (the output).
    unsafe {
        asm!(
            "syscall",
            inlateout("rax") nr as isize => ret,
            in("rdi") a[0],
            in("rsi") a[1],
            in("rdx") a[2],
            in("r10") a[3],
            in("r8") a[4],
            in("r9") a[5],
            lateout("rcx") _,
            lateout("r11") _,
            options(nostack),
        );
    }
    ret
}

/// The libaio system calls as libaio makes them (`io_submit`, `io_getevents`,
/// `io_pgetevents`): the kernel's result, a negative errno on failure; `errno` untouched.
///
/// # Safety
/// The arguments must be valid for system call `nr`, as for the libaio function.
pub unsafe fn aio_syscall(nr: usize, a: [usize; 6]) -> isize {
    // SAFETY: the caller's guarantees.
    unsafe { syscall6(nr, a) }
}

/// `close_range(first, last, flags)` (Linux 5.9).
pub fn close_range(first: u32, last: u32, flags: u32) -> SysResult<usize> {
    // SAFETY: no memory is passed; the kernel checks the range and the flags.
    check(unsafe {
        syscall6(
            SYS_CLOSE_RANGE,
            [first as usize, last as usize, flags as usize, 0, 0, 0],
        )
    })
}

fn check(ret: isize) -> SysResult<usize> {
    if (-4095..0).contains(&ret) {
        Err(-ret as i32)
    } else {
        Ok(ret as usize)
    }
}

/// `openat(dirfd, path, flags, mode)`.
pub fn openat(dirfd: i32, path: &CStr, flags: i32, mode: u32) -> SysResult<i32> {
    // SAFETY: `path` is a valid NUL-terminated string for the duration of the call.
    let r = unsafe {
        syscall6(
            SYS_OPENAT,
            [
                dirfd as usize,
                path.as_ptr() as usize,
                flags as usize,
                mode as usize,
                0,
                0,
            ],
        )
    };
    check(r).map(|fd| fd as i32)
}

pub fn close(fd: i32) {
    // SAFETY: close takes no pointers; closing a bad fd only returns EBADF.
    unsafe { syscall6(SYS_CLOSE, [fd as usize, 0, 0, 0, 0, 0]) };
}

/// One `read(2)`; returns the number of bytes read.
pub fn read(fd: i32, buf: &mut [u8]) -> SysResult<usize> {
    // SAFETY: the kernel writes at most `buf.len()` bytes into `buf`.
    check(unsafe {
        syscall6(
            SYS_READ,
            [fd as usize, buf.as_mut_ptr() as usize, buf.len(), 0, 0, 0],
        )
    })
}

/// `getrusage(who)`.
pub fn getrusage(who: i32) -> SysResult<libc::rusage> {
    // SAFETY: all-zero is a valid rusage; the kernel fills at most its size.
    let mut usage: libc::rusage = unsafe { core::mem::zeroed() };
    // SAFETY: `usage` is a valid out-pointer for the call.
    check(unsafe {
        syscall6(
            SYS_GETRUSAGE,
            [who as usize, &mut usage as *mut _ as usize, 0, 0, 0, 0],
        )
    })
    .map(|_| usage)
}

/// The first 64 bytes of the kernel's `struct perf_event_attr` (`PERF_ATTR_SIZE_VER0`), all
/// a counting event needs.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub struct PerfAttr {
    pub kind: u32,
    pub size: u32,
    pub config: u64,
    pub sample_period: u64,
    pub sample_type: u64,
    pub read_format: u64,
    /// Bit 0 disabled, 5 exclude_kernel, 6 exclude_hv, ...
    pub flags: u64,
    pub wakeup_events: u32,
    pub bp_type: u32,
    pub config1: u64,
}

const _: () = assert!(core::mem::size_of::<PerfAttr>() == 64);

/// `perf_event_open(attr, 0 (this thread), -1 (any CPU), group_fd, PERF_FLAG_FD_CLOEXEC)`.
pub fn perf_event_open(attr: &PerfAttr, group_fd: i32) -> SysResult<i32> {
    const PERF_FLAG_FD_CLOEXEC: usize = 8;
    // SAFETY: `attr` is a valid perf_event_attr whose `size` field says its size.
    check(unsafe {
        syscall6(
            SYS_PERF_EVENT_OPEN,
            [
                attr as *const _ as usize,
                0,
                usize::MAX, // cpu -1
                group_fd as usize,
                PERF_FLAG_FD_CLOEXEC,
                0,
            ],
        )
    })
    .map(|fd| fd as i32)
}

/// One `write(2)`; returns the number of bytes written.
pub fn write(fd: i32, buf: &[u8]) -> SysResult<usize> {
    // SAFETY: the kernel reads at most `buf.len()` bytes from `buf`.
    check(unsafe {
        syscall6(
            SYS_WRITE,
            [fd as usize, buf.as_ptr() as usize, buf.len(), 0, 0, 0],
        )
    })
}

/// Writes all of `buf` at file offset `off` (retrying short writes and EINTR).
pub fn pwrite_all(fd: i32, mut buf: &[u8], mut off: u64) -> SysResult<()> {
    while !buf.is_empty() {
        // SAFETY: the kernel reads at most `buf.len()` bytes from `buf`.
        let r = check(unsafe {
            syscall6(
                SYS_PWRITE64,
                [
                    fd as usize,
                    buf.as_ptr() as usize,
                    buf.len(),
                    off as usize,
                    0,
                    0,
                ],
            )
        });
        match r {
            Ok(0) => return Err(libc::EIO),
            Ok(n) => {
                buf = buf.get(n..).unwrap_or_default();
                off += n as u64;
            }
            Err(libc::EINTR) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// `fallocate(fd, FALLOC_FL_KEEP_SIZE, off, len)`: reserves blocks without growing the file.
pub fn fallocate_keep_size(fd: i32, off: u64, len: u64) -> SysResult<()> {
    // SAFETY: no pointers involved.
    check(unsafe {
        syscall6(
            SYS_FALLOCATE,
            [
                fd as usize,
                libc::FALLOC_FL_KEEP_SIZE as usize,
                off as usize,
                len as usize,
                0,
                0,
            ],
        )
    })
    .map(drop)
}

/// `unlinkat(AT_FDCWD, path, 0)`.
pub fn unlink(path: &CStr) -> SysResult<()> {
    // SAFETY: `path` is a valid NUL-terminated string for the duration of the call.
    check(unsafe {
        syscall6(
            SYS_UNLINKAT,
            [libc::AT_FDCWD as usize, path.as_ptr() as usize, 0, 0, 0, 0],
        )
    })
    .map(drop)
}

pub fn ftruncate(fd: i32, len: u64) -> SysResult<()> {
    // SAFETY: no pointers involved.
    check(unsafe { syscall6(SYS_FTRUNCATE, [fd as usize, len as usize, 0, 0, 0, 0]) }).map(drop)
}

/// `fstat(fd)`.
pub fn fstat(fd: i32) -> SysResult<libc::stat> {
    let mut st = core::mem::MaybeUninit::<libc::stat>::uninit();
    // SAFETY: fstat writes one `struct stat` into `st`, which is large enough.
    check(unsafe {
        syscall6(
            SYS_FSTAT,
            [fd as usize, st.as_mut_ptr() as usize, 0, 0, 0, 0],
        )
    })?;
    // SAFETY: fstat succeeded, so the kernel initialised the structure.
    Ok(unsafe { st.assume_init() })
}

/// Bytes free (for unprivileged users) in the file system of `fd` (`fstatvfs`).
pub fn free_space(fd: i32) -> SysResult<u64> {
    let mut st = core::mem::MaybeUninit::<libc::statfs>::uninit();
    // SAFETY: fstatfs writes one `struct statfs` into `st`, which is large enough.
    check(unsafe {
        syscall6(
            SYS_FSTATFS,
            [fd as usize, st.as_mut_ptr() as usize, 0, 0, 0, 0],
        )
    })?;
    // SAFETY: fstatfs succeeded, so the kernel initialised the structure.
    let st = unsafe { st.assume_init() };
    Ok(st.f_bavail.saturating_mul(st.f_bsize as u64))
}

/// Size of the file behind `fd`.
pub fn file_size(fd: i32) -> SysResult<u64> {
    fstat(fd).map(|st| st.st_size as u64)
}

/// Mode of every file libmcount creates in the data directory, whatever the umask.
pub const DATA_FILE_MODE: u32 = 0o644;

/// Opens `name` in the data directory `dirfd` for writing (`flags` add `O_APPEND`, `O_CREAT`,
/// `O_EXCL`...) without following a symbolic link, and only if it is a regular file of this
/// user with no other link to it: nothing planted in the directory can redirect the writes.
/// A file is given [`DATA_FILE_MODE`] whatever the program's umask.
pub fn open_data_file(dirfd: i32, name: &CStr, flags: i32) -> SysResult<(i32, libc::stat)> {
    let fd = openat(
        dirfd,
        name,
        flags | libc::O_WRONLY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
        DATA_FILE_MODE,
    )?;
    let checked = fstat(fd).and_then(|st| {
        // SAFETY: geteuid takes no arguments and cannot fail.
        let euid = unsafe { syscall6(SYS_GETEUID, [0; 6]) } as u32;
        if st.st_mode & libc::S_IFMT != libc::S_IFREG || st.st_uid != euid || st.st_nlink != 1 {
            return Err(libc::EPERM);
        }
        if st.st_mode & 0o7777 != DATA_FILE_MODE {
            // SAFETY: no pointers involved.
            check(unsafe {
                syscall6(
                    SYS_FCHMOD,
                    [fd as usize, DATA_FILE_MODE as usize, 0, 0, 0, 0],
                )
            })?;
        }
        Ok(st)
    });
    match checked {
        Ok(st) => Ok((fd, st)),
        Err(e) => {
            close(fd);
            Err(e)
        }
    }
}

/// `pidfd_open(pid, 0)`: a descriptor that becomes readable when process `pid` ends.
pub fn pidfd_open(pid: i32) -> SysResult<i32> {
    // SAFETY: no pointers involved.
    check(unsafe { syscall6(SYS_PIDFD_OPEN, [pid as usize, 0, 0, 0, 0, 0]) }).map(|fd| fd as i32)
}

/// Whether `fd` is readable now (`poll` with a zero timeout); `false` on any error.
pub fn readable(fd: i32) -> bool {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: `p` is one valid pollfd for the duration of the call.
    let r = unsafe { syscall6(SYS_POLL, [&raw mut p as usize, 1, 0, 0, 0, 0]) };
    r == 1 && p.revents & libc::POLLIN != 0
}

/// `nanosleep(ts, NULL)`: `Err(EINTR)` when a signal cut it short. Async-signal-safe.
pub fn nanosleep(ts: &libc::timespec) -> SysResult<()> {
    // SAFETY: `ts` is a valid timespec for the call; a null remainder is allowed.
    check(unsafe { syscall6(SYS_NANOSLEEP, [ts as *const _ as usize, 0, 0, 0, 0, 0]) }).map(drop)
}

/// `futex(word, op, val, timeout)` on a word shared between processes (no `FUTEX_PRIVATE`):
/// `FUTEX_WAIT` sleeps while `*word == val`, at most `timeout_ns`; `FUTEX_WAKE` wakes `val`
/// waiters. The kernel only reads `word` (a bad address is `EFAULT`). Async-signal-safe.
pub fn futex(word: *const u32, op: i32, val: u32, timeout_ns: u64) -> SysResult<usize> {
    let ts = libc::timespec {
        tv_sec: (timeout_ns / 1_000_000_000) as i64,
        tv_nsec: (timeout_ns % 1_000_000_000) as i64,
    };
    let a = [
        word as usize,
        op as usize,
        val as usize,
        &raw const ts as usize,
        0,
        0,
    ];
    // SAFETY: `ts` is a valid timespec during the call; the kernel checks `word` itself.
    check(unsafe { syscall6(SYS_FUTEX, a) })
}

/// `mmap(NULL, len, prot, flags, fd, off)`: a new mapping where the kernel chooses (never
/// `MAP_FIXED`, so no existing memory is replaced).
pub fn mmap(len: usize, prot: i32, flags: i32, fd: i32, off: u64) -> SysResult<*mut u8> {
    debug_assert!(flags & libc::MAP_FIXED == 0);
    // SAFETY: without MAP_FIXED the kernel picks unused address space; nothing existing is
    // affected.
    let r = unsafe {
        syscall6(
            SYS_MMAP,
            [
                0,
                len,
                prot as usize,
                flags as usize,
                fd as usize,
                off as usize,
            ],
        )
    };
    check(r).map(|p| p as *mut u8)
}

/// # Safety
/// `[addr, addr+len)` must be a mapping made by [`mmap`] that nothing references any more.
pub unsafe fn munmap(addr: *mut u8, len: usize) {
    // SAFETY: guaranteed by the caller.
    unsafe { syscall6(SYS_MUNMAP, [addr as usize, len, 0, 0, 0, 0]) };
}

/// `process_vm_readv` of this process from the `remote` ranges into the `local` buffers:
/// the bytes copied (0 on an error). The kernel stops at the first remote range that is not
/// mapped, so the count says how many ranges were read whole.
///
/// # Safety
/// Each `local` iovec must describe writable memory of its length.
pub unsafe fn read_self_iov(local: &[libc::iovec], remote: &[libc::iovec]) -> usize {
    // SAFETY: the caller's local buffers are writable; the kernel checks the remote ranges.
    let ret = unsafe {
        syscall6(
            SYS_PROCESS_VM_READV,
            [
                getpid() as usize,
                local.as_ptr() as usize,
                local.len(),
                remote.as_ptr() as usize,
                remote.len(),
                0,
            ],
        )
    };
    check(ret).unwrap_or(0)
}

/// Copies this process's memory at `addr` into `out` with `process_vm_readv`, which fails
/// (or stops early) instead of faulting on unmapped memory. The read is split at the first
/// page boundary, so that a string ending before an unmapped page is still read. Returns the
/// number of bytes copied.
pub fn read_self(addr: usize, out: &mut [u8]) -> usize {
    if out.is_empty() || addr == 0 {
        return 0;
    }
    let split = (PAGE_SIZE - addr % PAGE_SIZE).min(out.len());
    let (head, tail) = out.split_at_mut(split);
    let local = [
        libc::iovec {
            iov_base: head.as_mut_ptr() as *mut libc::c_void,
            iov_len: head.len(),
        },
        libc::iovec {
            iov_base: tail.as_mut_ptr() as *mut libc::c_void,
            iov_len: tail.len(),
        },
    ];
    let remote = [
        libc::iovec {
            iov_base: addr as *mut libc::c_void,
            iov_len: head.len(),
        },
        libc::iovec {
            iov_base: addr.wrapping_add(split) as *mut libc::c_void,
            iov_len: tail.len(),
        },
    ];
    let n = if tail.is_empty() { 1 } else { 2 };
    // SAFETY: the local iovecs cover `out`, which is writable.
    unsafe { read_self_iov(&local[..n], &remote[..n]) }
}

pub fn gettid() -> i32 {
    // SAFETY: no arguments.
    unsafe { syscall6(SYS_GETTID, [0; 6]) as i32 }
}

pub fn getpid() -> i32 {
    // SAFETY: no arguments.
    unsafe { syscall6(SYS_GETPID, [0; 6]) as i32 }
}

/// The CPU the calling thread runs on: glibc reads it from the thread's `rseq` area (one load,
/// about 6 ns here), falling back to the vDSO's `getcpu`; -1 if neither can tell. No lock, no
/// allocation, async-signal-safe.
#[inline]
pub fn current_cpu() -> i32 {
    // SAFETY: sched_getcpu takes no arguments and touches only the thread's rseq area.
    unsafe { libc::sched_getcpu() }
}

pub fn getppid() -> i32 {
    // SAFETY: no arguments.
    unsafe { syscall6(SYS_GETPPID, [0; 6]) as i32 }
}

/// `fcntl(fd, F_DUPFD_CLOEXEC, min)`.
pub fn dup_cloexec_above(fd: i32, min: i32) -> SysResult<i32> {
    // SAFETY: no pointers involved.
    let r = unsafe {
        syscall6(
            SYS_FCNTL,
            [
                fd as usize,
                libc::F_DUPFD_CLOEXEC as usize,
                min as usize,
                0,
                0,
                0,
            ],
        )
    };
    check(r).map(|fd| fd as i32)
}

/// Fills `buf` from the kernel's random pool without blocking; returns the bytes written.
pub fn getrandom(buf: &mut [u8]) -> SysResult<usize> {
    // SAFETY: the kernel writes at most `buf.len()` bytes into `buf`.
    check(unsafe {
        syscall6(
            SYS_GETRANDOM,
            [
                buf.as_mut_ptr() as usize,
                buf.len(),
                libc::GRND_NONBLOCK as usize,
                0,
                0,
                0,
            ],
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_match_libc() {
        // SAFETY: plain libc calls without arguments.
        let (pid, tid) = unsafe { (libc::getpid(), libc::gettid()) };
        assert_eq!(getpid(), pid);
        assert_eq!(gettid(), tid);
    }

    #[test]
    fn failing_calls_leave_errno_alone() {
        // SAFETY: errno is this thread's.
        let errno = || unsafe { *libc::__errno_location() };
        // SAFETY: as above.
        unsafe { *libc::__errno_location() = 0 };
        let bad = libc::timespec {
            tv_sec: 0,
            tv_nsec: -1,
        };
        assert_eq!(nanosleep(&bad), Err(libc::EINVAL));
        assert_eq!(errno(), 0);
        let short = libc::timespec {
            tv_sec: 0,
            tv_nsec: 1000,
        };
        assert_eq!(nanosleep(&short), Ok(()));
    }

    #[test]
    fn errors_are_negative_errno() {
        assert_eq!(write(-1, b"x"), Err(libc::EBADF));
        assert_eq!(
            openat(libc::AT_FDCWD, c"/nonexistent/x", libc::O_RDONLY, 0),
            Err(libc::ENOENT)
        );
    }
}
