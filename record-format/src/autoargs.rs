//! The built-in prototypes of `-a`/`--auto-args`: argument and return-value specs of common C
//! library functions (written from their manual pages), in the argspec grammar of the `info`
//! file's `argauto`/`retauto`/`enumauto` lines (data-format §2.4). The recorder writes them
//! into `info`; the runtime applies them to library calls by name; the readers show the values
//! with them. Only formats uftrace 0.13 reads are used (no `/o`).

/// Arguments, `;`-separated `NAME@items`.
pub const ARGAUTO: &str = concat!(
    // memory
    "malloc@arg1/u;free@arg1/p;calloc@arg1/u,arg2/u;realloc@arg1/p,arg2/u;",
    "aligned_alloc@arg1/u,arg2/u;posix_memalign@arg1/p,arg2/u,arg3/u;",
    "mmap@arg1/p,arg2/u,arg3/e:utrace_prot,arg4/e:utrace_map,arg5/d32,arg6;",
    "munmap@arg1/p,arg2/u;mprotect@arg1/p,arg2/u,arg3/e:utrace_prot;",
    "memcpy@arg1/p,arg2/p,arg3/u;memmove@arg1/p,arg2/p,arg3/u;memset@arg1/p,arg2/d32,arg3/u;",
    "memcmp@arg1/p,arg2/p,arg3/u;memchr@arg1/p,arg2/c,arg3/u;",
    // strings
    "strlen@arg1/s;strnlen@arg1/s,arg2/u;strcpy@arg1/p,arg2/s;strncpy@arg1/p,arg2/s,arg3/u;",
    "strcat@arg1/s,arg2/s;strncat@arg1/s,arg2/s,arg3/u;strcmp@arg1/s,arg2/s;",
    "strncmp@arg1/s,arg2/s,arg3/u;strcasecmp@arg1/s,arg2/s;strncasecmp@arg1/s,arg2/s,arg3/u;",
    "strdup@arg1/s;strndup@arg1/s,arg2/u;strchr@arg1/s,arg2/c;strrchr@arg1/s,arg2/c;",
    "strstr@arg1/s,arg2/s;strtok@arg1/s,arg2/s;strspn@arg1/s,arg2/s;strcspn@arg1/s,arg2/s;",
    "atoi@arg1/s;atol@arg1/s;atof@arg1/s;strtol@arg1/s,arg2/p,arg3/d32;",
    "strtoul@arg1/s,arg2/p,arg3/d32;strtod@arg1/s,arg2/p;",
    // stdio
    "printf@arg1/s;fprintf@arg1/p,arg2/s;sprintf@arg1/p,arg2/s;snprintf@arg1/p,arg2/u,arg3/s;",
    "puts@arg1/s;fputs@arg1/s,arg2/p;putchar@arg1/c;fputc@arg1/c,arg2/p;",
    "fopen@arg1/s,arg2/s;fclose@arg1/p;fflush@arg1/p;fread@arg1/p,arg2/u,arg3/u,arg4/p;",
    "fwrite@arg1/p,arg2/u,arg3/u,arg4/p;fgets@arg1/p,arg2/d32,arg3/p;",
    "fseek@arg1/p,arg2,arg3/e:utrace_whence;",
    // files and descriptors
    "open@arg1/s,arg2/e:utrace_open;openat@arg1/d32,arg2/s,arg3/e:utrace_open;",
    "close@arg1/d32;read@arg1/d32,arg2/p,arg3/u;write@arg1/d32,arg2/p,arg3/u;",
    "pread@arg1/d32,arg2/p,arg3/u,arg4;pwrite@arg1/d32,arg2/p,arg3/u,arg4;",
    "lseek@arg1/d32,arg2,arg3/e:utrace_whence;fsync@arg1/d32;fdatasync@arg1/d32;",
    "unlink@arg1/s;mkdir@arg1/s,arg2/u;rmdir@arg1/s;chdir@arg1/s;access@arg1/s,arg2/d32;",
    "stat@arg1/s,arg2/p;fstat@arg1/d32,arg2/p;dup@arg1/d32;dup2@arg1/d32,arg2/d32;",
    "ioctl@arg1/d32,arg2/u,arg3;getenv@arg1/s;setenv@arg1/s,arg2/s,arg3/d32;",
    // processes and signals
    "exit@arg1/d32;_exit@arg1/d32;execv@arg1/s;execvp@arg1/s;execve@arg1/s;",
    "execl@arg1/s,arg2/s;execlp@arg1/s,arg2/s;waitpid@arg1/i32,arg2/p,arg3/d32;",
    "kill@arg1/i32,arg2/e:utrace_signal;raise@arg1/e:utrace_signal;",
    "signal@arg1/e:utrace_signal,arg2/p;sigaction@arg1/e:utrace_signal,arg2/p,arg3/p;",
    "sleep@arg1/u;usleep@arg1/u;nanosleep@arg1/p,arg2/p;",
    // threads
    "pthread_create@arg1/p,arg2/p,arg3/p,arg4/p;pthread_join@arg1,arg2/p;",
    "pthread_mutex_lock@arg1/p;pthread_mutex_unlock@arg1/p;pthread_mutex_trylock@arg1/p;",
    "pthread_cond_wait@arg1/p,arg2/p;pthread_cond_signal@arg1/p;",
    "pthread_cond_broadcast@arg1/p;pthread_exit@arg1/p;",
    // dynamic loading
    "dlopen@arg1/s,arg2/d32;dlsym@arg1/p,arg2/s;dlclose@arg1/p;",
    // sockets
    "socket@arg1/d32,arg2/d32,arg3/d32;connect@arg1/d32,arg2/p,arg3/u;",
    "bind@arg1/d32,arg2/p,arg3/u;listen@arg1/d32,arg2/d32;accept@arg1/d32,arg2/p,arg3/p;",
    "send@arg1/d32,arg2/p,arg3/u,arg4/d32;recv@arg1/d32,arg2/p,arg3/u,arg4/d32;",
    // C++ runtime (one prototype per demangled name: the sized `operator delete`, `_ZdlPvm`,
    // takes that of `_ZdlPv`, as every reader binds it)
    "_Znwm@arg1/u;_Znam@arg1/u;_ZdlPv@arg1/p;_ZdaPv@arg1/p",
);

/// Return values, `;`-separated `NAME@retval[/FMT]`.
pub const RETAUTO: &str = concat!(
    "malloc@retval/p;calloc@retval/p;realloc@retval/p;aligned_alloc@retval/p;",
    "posix_memalign@retval/d32;mmap@retval/p;munmap@retval/d32;mprotect@retval/d32;",
    "memcmp@retval/d32;memchr@retval/p;",
    "strlen@retval/u;strnlen@retval/u;strcat@retval/s;",
    "strncat@retval/s;strcmp@retval/d32;strncmp@retval/d32;strcasecmp@retval/d32;",
    "strncasecmp@retval/d32;strdup@retval/s;strndup@retval/s;strchr@retval/s;",
    "strrchr@retval/s;strstr@retval/s;strtok@retval/s;strspn@retval/u;strcspn@retval/u;",
    "atoi@retval/d32;atol@retval;atof@retval/f64;strtol@retval;strtoul@retval/u;",
    "strtod@retval/f64;printf@retval/d32;fprintf@retval/d32;sprintf@retval/d32;",
    "snprintf@retval/d32;puts@retval/d32;fputs@retval/d32;putchar@retval/d32;",
    "fputc@retval/d32;fopen@retval/p;fclose@retval/d32;fflush@retval/d32;fread@retval/u;",
    "fwrite@retval/u;fgets@retval/s;fseek@retval/d32;open@retval/d32;openat@retval/d32;",
    "close@retval/d32;read@retval;write@retval;pread@retval;pwrite@retval;lseek@retval;",
    "fsync@retval/d32;fdatasync@retval/d32;unlink@retval/d32;mkdir@retval/d32;",
    "rmdir@retval/d32;chdir@retval/d32;access@retval/d32;stat@retval/d32;fstat@retval/d32;",
    "dup@retval/d32;dup2@retval/d32;ioctl@retval/d32;getenv@retval/s;setenv@retval/d32;",
    "fork@retval/i32;vfork@retval/i32;getpid@retval/i32;getppid@retval/i32;",
    "gettid@retval/i32;waitpid@retval/i32;kill@retval/d32;raise@retval/d32;",
    "signal@retval;sigaction@retval/d32;sleep@retval/u;usleep@retval/d32;nanosleep@retval/d32;",
    "pthread_create@retval/d32;pthread_join@retval/d32;pthread_mutex_lock@retval/d32;",
    "pthread_mutex_unlock@retval/d32;pthread_mutex_trylock@retval/d32;",
    "pthread_cond_wait@retval/d32;pthread_cond_signal@retval/d32;",
    "pthread_cond_broadcast@retval/d32;dlopen@retval/p;dlsym@retval/p;dlclose@retval/d32;",
    "socket@retval/d32;connect@retval/d32;bind@retval/d32;listen@retval/d32;",
    "accept@retval/d32;send@retval;recv@retval;_Znwm@retval/p;_Znam@retval/p",
);

/// Enum definitions for the `e:` items above.
pub const ENUMAUTO: &str = concat!(
    "enum utrace_prot {PROT_NONE,PROT_READ,PROT_WRITE,PROT_EXEC=4};",
    // Flag names as uftrace 0.13 prints them (`MAP_ANON`, glibc's short spelling).
    "enum utrace_map {MAP_SHARED=1,MAP_PRIVATE=2,MAP_FIXED=16,MAP_ANON=32,MAP_GROWSDOWN=256,",
    "MAP_DENYWRITE=2048,MAP_EXECUTABLE=4096,MAP_LOCKED=8192,MAP_NORESERVE=16384,",
    "MAP_POPULATE=32768,MAP_NONBLOCK=65536,MAP_STACK=131072,MAP_HUGETLB=262144};",
    "enum utrace_whence {SEEK_SET,SEEK_CUR,SEEK_END,SEEK_DATA,SEEK_HOLE};",
    "enum utrace_open {O_RDONLY,O_WRONLY,O_RDWR,O_CREAT=64,O_EXCL=128,O_NOCTTY=256,",
    "O_TRUNC=512,O_APPEND=1024,O_NONBLOCK=2048,O_DSYNC=4096,O_ASYNC=8192,O_DIRECT=16384,",
    "O_LARGEFILE=32768,O_DIRECTORY=65536,O_NOFOLLOW=131072,O_NOATIME=262144,",
    "O_CLOEXEC=524288,O_SYNC=1052672,O_PATH=2097152};",
    "enum utrace_signal {SIGHUP=1,SIGINT,SIGQUIT,SIGILL,SIGTRAP,SIGABRT,SIGBUS,SIGFPE,",
    "SIGKILL,SIGUSR1,SIGSEGV,SIGUSR2,SIGPIPE,SIGALRM,SIGTERM,SIGSTKFLT,SIGCHLD,SIGCONT,",
    "SIGSTOP,SIGTSTP,SIGTTIN,SIGTTOU,SIGURG,SIGXCPU,SIGXFSZ,SIGVTALRM,SIGPROF,SIGWINCH,",
    "SIGIO,SIGPWR,SIGSYS};",
);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::argspec::{items_of_kind, ItemKind};
    use crate::dbg::parse_enums;

    #[test]
    fn every_entry_parses() {
        for (list, kind) in [(ARGAUTO, ItemKind::Args), (RETAUTO, ItemKind::Ret)] {
            for entry in list.split(';') {
                let (name, items) = entry.split_once('@').expect(entry);
                assert!(!name.is_empty(), "{entry}");
                let (items, module) = items_of_kind(items, kind, 8).expect(entry);
                assert!(!items.is_empty() && module.is_none(), "{entry}");
                assert!(
                    !entry.contains("/o"),
                    "uftrace 0.13 cannot read /o: {entry}"
                );
            }
        }
        // Readers find a prototype by the function's demangled name: two entries of one name
        // would bind differently in uftrace (which prefers the exact symbol) and utrace.
        for list in [ARGAUTO, RETAUTO] {
            let mut seen = std::collections::HashSet::new();
            for entry in list.split(';') {
                let name = entry.split('@').next().unwrap();
                let plain = crate::demangle::demangle(name, crate::demangle::Demangle::Simple);
                assert!(
                    seen.insert(plain),
                    "{entry}: a second prototype of its name"
                );
            }
        }
        let enums = parse_enums(ENUMAUTO).expect("enums parse");
        // uftrace 0.13's spelling.
        assert!(ENUMAUTO.contains("MAP_ANON=32") && !ENUMAUTO.contains("MAP_ANONYMOUS"));
        for entry in ARGAUTO.split(';') {
            if let Some((_, e)) = entry.split_once("/e:") {
                let name = e.split(',').next().unwrap();
                assert!(
                    enums.iter().any(|(n, _)| n == name),
                    "{entry}: enum {name} missing"
                );
            }
        }
    }
}
