//! The built-in prototypes of `-a`/`--auto-args`: argument and return-value specs of common C
//! library functions, in the argspec grammar of the `info` file's `argauto`/`retauto`/
//! `enumauto` lines (data-format §2.4). The recorder writes them into `info`; the runtime
//! applies them to library calls by name; the readers show the values with them.
//!
//! The specs are written from the functions' C prototypes (their manual pages) and the enum
//! values from the system headers. The set of functions and the way each value shows (its
//! size and format, enum names) are those of uftrace 0.13, so that a replay of a `-a`
//! recording prints each call as uftrace prints it; in particular `mkdir` shows only its
//! path, `fseek` its whence as a number, `fallocate` its mode as a number, `prctl` nine words.
//! Only formats uftrace 0.13 reads are used (no `/o`).
//!
//! Deliberate differences: the functions of [`BEYOND_UFTRACE`], whose arguments uftrace 0.13
//! does not show, are given the ones their prototypes name, because the values are plainly
//! right and useful: `pread`/`pwrite` (descriptor, buffer, count, offset), `send`/`recv`,
//! `listen`, `nanosleep` and `_exit` (its status, as `exit`'s).

/// Arguments (`argauto`), `;`-separated `NAME@items`: one group per C library header (or
/// family), each entry from the function's C prototype. Integer parameters of type `int` are
/// `d32`, `size_t` ones `u`, `long`/`off_t`/`ssize_t` and other full words the default; enums
/// refer to the `utrace_*` definitions of [`ENUMAUTO`].
pub const ARGAUTO: &str = concat!(
    // <stdlib.h>: allocation (malloc(3), posix_memalign(3), brk(2))
    "malloc@arg1/u;calloc@arg1/u,arg2/u;realloc@arg1/p,arg2/u;free@arg1/p;",
    "aligned_alloc@arg1/u,arg2/u;posix_memalign@arg1/p,arg2/u,arg3/u;memalign@arg1/u,arg2/u;",
    "valloc@arg1/u;pvalloc@arg1/u;brk@arg1/p;sbrk@arg1;",
    // <sys/mman.h> (mmap(2), mprotect(2), madvise(2), posix_madvise(3))
    "mmap@arg1/p,arg2/u,arg3/e:utrace_prot,arg4/e:utrace_map,arg5/d32,arg6;",
    "mmap64@arg1/p,arg2/u,arg3/e:utrace_prot,arg4/e:utrace_map,arg5/d32,arg6/d64;",
    "munmap@arg1/p,arg2/u;mprotect@arg1/p,arg2/u,arg3/e:utrace_prot;",
    "madvise@arg1/p,arg2/u,arg3/e:utrace_madv;posix_madvise@arg1/p,arg2/u,arg3/e:utrace_pmadv;",
    // <stdlib.h>: conversions, sorting, exit
    "atoi@arg1/s;atol@arg1/s;atof@arg1/s;strtol@arg1/s,arg2/p,arg3/d32;",
    "strtoul@arg1/s,arg2/p,arg3/d32;strtod@arg1/s,arg2/p;strtof@arg1/s,arg2/p;",
    "qsort@arg1/p,arg2/u,arg3/u,arg4/p;qsort_r@arg1/p,arg2/u,arg3/u,arg4/p,arg5/p;",
    "bsearch@arg1/p,arg2/p,arg3/u,arg4/u,arg5/p;exit@arg1/d32;_exit@arg1/d32;",
    "getenv@arg1/s;setenv@arg1/s,arg2/s,arg3/d32;unsetenv@arg1/s;",
    // <string.h>: memory blocks
    "memcpy@arg1/p,arg2/p,arg3/u;memmove@arg1/p,arg2/p,arg3/u;memset@arg1/p,arg2/d32,arg3/u;",
    "memcmp@arg1/p,arg2/p,arg3/u;memchr@arg1/p,arg2/d32,arg3/u;memrchr@arg1/p,arg2/d32,arg3/u;",
    "rawmemchr@arg1/p,arg2/d32;",
    // <string.h>: strings (the destination of a copy is a pointer: its contents are not yet
    // a string)
    "strlen@arg1/s;strnlen@arg1/s,arg2/u;strcpy@arg1/p,arg2/s;strncpy@arg1/p,arg2/s,arg3/u;",
    "strcat@arg1/s,arg2/s;strncat@arg1/s,arg2/s,arg3/u;strcmp@arg1/s,arg2/s;",
    "strncmp@arg1/s,arg2/s,arg3/u;strcasecmp@arg1/s,arg2/s;strncasecmp@arg1/s,arg2/s,arg3/u;",
    "strcoll@arg1/s,arg2/s;strdup@arg1/s;strndup@arg1/s,arg2/u;strdupa@arg1/s;",
    "strndupa@arg1/s,arg2/u;strchr@arg1/s,arg2/c;strrchr@arg1/s,arg2/c;strchrnul@arg1/s,arg2/c;",
    "strstr@arg1/s,arg2/s;strcasestr@arg1/s,arg2/s;strpbrk@arg1/s,arg2/s;",
    "strspn@arg1/s,arg2/s;strcspn@arg1/s,arg2/s;strtok@arg1/s,arg2/s;",
    "strtok_r@arg1/s,arg2/s,arg3/p;strsep@arg1/p,arg2/s;",
    // <stdio.h>
    "printf@arg1/s;fprintf@arg1/p,arg2/s;dprintf@arg1/d32,arg2/s;sprintf@arg1/p,arg2/s;",
    "snprintf@arg1/p,arg2/u,arg3/s;puts@arg1/s;fputs@arg1/s,arg2/p;putchar@arg1/c;",
    "putc@arg1/c,arg2/p;fputc@arg1/c,arg2/p;getc@arg1/p;fgetc@arg1/p;ungetc@arg1/c,arg2/p;",
    "fgets@arg1/p,arg2/d32,arg3/p;fopen@arg1/s,arg2/s;fopen64@arg1/s,arg2/s;",
    "fdopen@arg1/d32,arg2/s;freopen@arg1/s,arg2/s,arg3/p;fclose@arg1/p;fflush@arg1/p;",
    "fread@arg1/p,arg2/u,arg3/u,arg4/p;fwrite@arg1/p,arg2/u,arg3/u,arg4/p;",
    "fseek@arg1/p,arg2,arg3/d32;ftell@arg1/p;feof@arg1/p;ferror@arg1/p;fileno@arg1/p;",
    // <fcntl.h>, <unistd.h>: descriptors (open(2), fcntl(2), lseek(2), fallocate(2))
    "open@arg1/s,arg2/e:utrace_open;open64@arg1/s,arg2/e:utrace_open;",
    "openat@arg1/d32,arg2/s,arg3/e:utrace_open;open64at@arg1/d32,arg2/s,arg3/e:utrace_open;",
    "creat@arg1/s,arg2/e:utrace_mode;creat64@arg1/s,arg2/e:utrace_mode;close@arg1/d32;",
    "read@arg1/d32,arg2/p,arg3/u;write@arg1/d32,arg2/p,arg3/u;",
    "pread@arg1/d32,arg2/p,arg3/u,arg4;pwrite@arg1/d32,arg2/p,arg3/u,arg4;",
    "lseek@arg1/d32,arg2,arg3/e:utrace_whence;fcntl@arg1/d32,arg2/e:utrace_fcntl;",
    "fcntl64@arg1/d32,arg2/e:utrace_fcntl;fallocate@arg1/d32,arg2/d32,arg3,arg4;",
    "posix_fadvise@arg1/d32,arg2,arg3,arg4/e:utrace_fadv;fsync@arg1/d32;fdatasync@arg1/d32;",
    "dup@arg1/d32;dup2@arg1/d32,arg2/d32;isatty@arg1/d32;ioctl@arg1/d32,arg2/u,arg3;",
    // <unistd.h>, <sys/stat.h>, <dirent.h>, <libgen.h>: the file system
    "access@arg1/s,arg2/e:utrace_access;unlink@arg1/s;unlinkat@arg1/d32,arg2/s,arg3/d32;",
    "mkdir@arg1/s;rmdir@arg1/s;chdir@arg1/s;getcwd@arg1/p,arg2/u;opendir@arg1/s;",
    "closedir@arg1/p;dirname@arg1/s;basename@arg1/s;stat@arg1/s,arg2/p;fstat@arg1/d32,arg2/p;",
    "lstat@arg1/s,arg2/p;chmod@arg1/s,arg2/e:utrace_mode;fchmod@arg1/d32,arg2/e:utrace_mode;",
    "umask@arg1/e:utrace_mode;chown@arg1/s,arg2/i32,arg3/i32;lchown@arg1/s,arg2/i32,arg3/i32;",
    "fchown@arg1/d32,arg2/i32,arg3/i32;",
    // <unistd.h>, <sys/wait.h>: processes and credentials
    "execl@arg1/s,arg2/s;execlp@arg1/s,arg2/s;execle@arg1/s,arg2/s;execv@arg1/s;",
    "execvp@arg1/s;execve@arg1/s;execvpe@arg1/s;wait@arg1/p;waitpid@arg1/i32,arg2/p,arg3/d32;",
    "setuid@arg1/i32;setgid@arg1/i32;seteuid@arg1/i32;setegid@arg1/i32;",
    "setreuid@arg1/i32,arg2/i32;setregid@arg1/i32,arg2/i32;",
    "setresuid@arg1/i32,arg2/i32,arg3/i32;setresgid@arg1/i32,arg2/i32,arg3/i32;",
    // <sys/prctl.h>: as uftrace 0.13 lists it, nine words (the prototype has five)
    "prctl@arg1/e:utrace_prctl,arg2/u,arg3,arg4/u,arg5,arg6/u,arg7,arg8/u,arg9;",
    // <signal.h>
    "kill@arg1/i32,arg2/e:utrace_signal;raise@arg1/e:utrace_signal;",
    "signal@arg1/e:utrace_signal,arg2/p;sigaction@arg1/e:utrace_signal,arg2/p,arg3/p;",
    "sigemptyset@arg1/p;sigfillset@arg1/p;sigaddset@arg1/p,arg2/e:utrace_signal;",
    "sigdelset@arg1/p,arg2/e:utrace_signal;sigismember@arg1/p,arg2/e:utrace_signal;",
    "sigprocmask@arg1/e:utrace_sighow,arg2/p,arg3/p;",
    "pthread_sigmask@arg1/e:utrace_sighow,arg2/p,arg3/p;",
    // <time.h>, <unistd.h>: clocks and sleeping
    "clock_gettime@arg1/e:utrace_clock,arg2/p;clock_getres@arg1/e:utrace_clock,arg2/p;",
    "clock_settime@arg1/e:utrace_clock,arg2/p;sleep@arg1/u;usleep@arg1/u;",
    "nanosleep@arg1/p,arg2/p;",
    // <pthread.h>
    "pthread_create@arg1/p,arg2/p,arg3/p,arg4/p;pthread_join@arg1,arg2/p;pthread_detach@arg1;",
    "pthread_once@arg1/p,arg2/p;pthread_kill@arg1,arg2/d32;pthread_cancel@arg1;",
    "pthread_exit@arg1/p;pthread_mutex_init@arg1/p,arg2/p;pthread_mutex_destroy@arg1/p;",
    "pthread_mutex_lock@arg1/p;pthread_mutex_trylock@arg1/p;pthread_mutex_unlock@arg1/p;",
    "pthread_cond_wait@arg1/p,arg2/p;pthread_cond_timedwait@arg1/p,arg2/p,arg3/p;",
    "pthread_cond_signal@arg1/p;pthread_cond_broadcast@arg1/p;",
    // <dlfcn.h>
    "dlopen@arg1/s,arg2/e:utrace_rtld;dlmopen@arg1,arg2/s,arg3/d32;dlsym@arg1/p,arg2/s;",
    "dlvsym@arg1/p,arg2/s,arg3/s;dlclose@arg1/p;",
    // <sys/socket.h>, <netdb.h>, <arpa/inet.h>
    "socket@arg1/e:utrace_af,arg2/e:utrace_sock,arg3/d32;connect@arg1/d32,arg2/p,arg3;",
    "bind@arg1/d32,arg2/p,arg3;listen@arg1/d32,arg2/d32;accept@arg1/d32,arg2/p,arg3/p;",
    "accept4@arg1/d32,arg2/p,arg3/p,arg4/e:utrace_sockfl;",
    "send@arg1/d32,arg2/p,arg3/u,arg4/d32;recv@arg1/d32,arg2/p,arg3/u,arg4/d32;",
    "gethostbyname@arg1/s;gethostbyaddr@arg1/p,arg2,arg3/e:utrace_af;",
    "getaddrinfo@arg1/s,arg2/s,arg3/p,arg4/p;freeaddrinfo@arg1/p;",
    "inet_pton@arg1/e:utrace_af,arg2/s,arg3/p;inet_ntop@arg1/e:utrace_af,arg2/p,arg3/s,arg4;",
    "inet_aton@arg1/s,arg2/p;inet_ntoa@arg1;inet_addr@arg1/s;inet_network@arg1/s;",
    // <sys/select.h>, <poll.h>, <sys/epoll.h>
    "select@arg1/d32,arg2/p,arg3/p,arg4/p,arg5/p;pselect@arg1/d32,arg2/p,arg3/p,arg4/p,arg5/p,",
    "arg6/p;poll@arg1/p,arg2,arg3/d32;ppoll@arg1/p,arg2,arg3/p,arg4/p;",
    "epoll_create@arg1/d32;epoll_create1@arg1/d32;",
    "epoll_ctl@arg1/d32,arg2/e:utrace_epoll,arg3/d32,arg4/p;",
    "epoll_wait@arg1/d32,arg2/p,arg3/d32,arg4/d32;",
    "epoll_pwait@arg1/d32,arg2/p,arg3/d32,arg4/d32,arg5/p;",
    // <unistd.h> syscall(2), <libintl.h>, <locale.h>, <getopt.h>
    "syscall@arg1;textdomain@arg1/s;bindtextdomain@arg1/s,arg2/s;gettext@arg1/s;",
    "dgettext@arg1/s,arg2/s;dcgettext@arg1/s,arg2/s,arg3/d32;",
    "setlocale@arg1/e:utrace_locale,arg2/s;getopt@arg1/d32,arg2/p,arg3/s;",
    "getopt_long@arg1/d32,arg2/p,arg3/s;getopt_long_only@arg1/d32,arg2/p,arg3/s;",
    // C++ runtime: operator new/new[] (size) and delete/delete[] (pointer). Not the sized
    // `operator delete` (`_ZdlPvm`): uftrace's reader binds it the prototype of `_ZdlPv`
    // (a regex prefix), so a payload of ours would desynchronise its stream.
    "_Znwm@arg1/u;_Znam@arg1/u;_ZdlPv@arg1/x;_ZdaPv@arg1/x",
);

/// Return values (`retauto`), `;`-separated `NAME@retval[/FMT]`, grouped as [`ARGAUTO`] is:
/// `int` results are `d32`, ids (`pid_t`, `uid_t`) `i32`, `size_t` ones `u`, pointers `p`
/// (`s` where the result is a string), full words the default. Functions whose result tells
/// nothing (`free`, `qsort`: none; `memcpy`, `strcpy`: their first argument) have no entry.
pub const RETAUTO: &str = concat!(
    // allocation, <sys/mman.h>
    "malloc@retval/p;calloc@retval/p;realloc@retval/p;aligned_alloc@retval/p;",
    "posix_memalign@retval/d32;memalign@retval/p;valloc@retval/p;pvalloc@retval/p;",
    "brk@retval/d32;sbrk@retval/p;mmap@retval/p;mmap64@retval/p;munmap@retval/d32;",
    "mprotect@retval/d32;madvise@retval/d32;posix_madvise@retval/d32;",
    // <stdlib.h>
    "atoi@retval/d32;atol@retval;atof@retval/f64;strtol@retval;strtoul@retval/u;",
    "strtod@retval/f64;strtof@retval/f32;bsearch@retval/p;getenv@retval/s;",
    "setenv@retval/d32;unsetenv@retval/d32;",
    // <string.h>
    "memcmp@retval/d32;memchr@retval/p;memrchr@retval/p;rawmemchr@retval/p;",
    "strlen@retval/u;strnlen@retval/u;strcat@retval/s;strncat@retval/s;strcmp@retval/d32;",
    "strncmp@retval/d32;strcasecmp@retval/d32;strncasecmp@retval/d32;strcoll@retval/d32;",
    "strdup@retval/s;strndup@retval/s;strdupa@retval/s;strndupa@retval/s;strchr@retval/s;",
    "strrchr@retval/s;strchrnul@retval/s;strstr@retval/s;strcasestr@retval/s;",
    "strpbrk@retval/s;strspn@retval/u;strcspn@retval/u;strtok@retval/s;strtok_r@retval/s;",
    "strsep@retval/s;",
    // <stdio.h>
    "printf@retval/d32;fprintf@retval/d32;dprintf@retval/d32;sprintf@retval/d32;",
    "snprintf@retval/d32;puts@retval/d32;fputs@retval/d32;putchar@retval/d32;",
    "putc@retval/d32;fputc@retval/d32;getchar@retval/c;getc@retval/c;fgetc@retval/c;",
    "ungetc@retval/c;fgets@retval/s;fopen@retval/p;fopen64@retval/p;fdopen@retval/p;",
    "freopen@retval/p;fclose@retval/d32;fflush@retval/d32;fread@retval/u;fwrite@retval/u;",
    "fseek@retval/d32;ftell@retval;feof@retval/d32;ferror@retval/d32;fileno@retval/d32;",
    // descriptors
    "open@retval/d32;open64@retval/d32;openat@retval/d32;open64at@retval/d32;",
    "creat@retval/d32;creat64@retval/d32;close@retval/d32;read@retval;write@retval;",
    "pread@retval;pwrite@retval;lseek@retval;fcntl@retval/d32;fcntl64@retval/d32;",
    "fallocate@retval/d32;posix_fadvise@retval/d32;fsync@retval/d32;fdatasync@retval/d32;",
    "dup@retval/d32;dup2@retval/d32;isatty@retval/d32;ioctl@retval/d32;",
    // the file system
    "access@retval/d32;unlink@retval/d32;unlinkat@retval/d32;mkdir@retval/d32;",
    "rmdir@retval/d32;chdir@retval/d32;getcwd@retval/s;opendir@retval/p;closedir@retval/d32;",
    "dirname@retval/s;basename@retval/s;stat@retval/d32;fstat@retval/d32;lstat@retval/d32;",
    "chmod@retval/d32;fchmod@retval/d32;chown@retval/d32;lchown@retval/d32;",
    "fchown@retval/d32;",
    // processes and credentials
    "fork@retval/i32;vfork@retval/i32;execl@retval/d32;execlp@retval/d32;execle@retval/d32;",
    "execv@retval/d32;execvp@retval/d32;execve@retval/d32;execvpe@retval/d32;",
    "wait@retval/i32;waitpid@retval/i32;getpid@retval/i32;getppid@retval/i32;",
    "gettid@retval/i32;getuid@retval/i32;getgid@retval/i32;geteuid@retval/i32;",
    "getegid@retval/i32;setuid@retval/d32;setgid@retval/d32;seteuid@retval/d32;",
    "setegid@retval/d32;setreuid@retval/d32;setregid@retval/d32;setresuid@retval/d32;",
    "setresgid@retval/d32;prctl@retval/d32;",
    // signals
    "kill@retval/d32;raise@retval/d32;signal@retval;sigaction@retval/d32;",
    "sigemptyset@retval/d32;sigfillset@retval/d32;sigaddset@retval/d32;sigdelset@retval/d32;",
    "sigismember@retval/d32;sigprocmask@retval/d32;pthread_sigmask@retval/d32;",
    // clocks and sleeping
    "clock_gettime@retval/d32;clock_getres@retval/d32;clock_settime@retval/d32;",
    "sleep@retval/u;usleep@retval/d32;nanosleep@retval/d32;",
    // <pthread.h>
    "pthread_create@retval/d32;pthread_join@retval/d32;pthread_detach@retval/d32;",
    "pthread_once@retval/d32;pthread_kill@retval/d32;pthread_cancel@retval/d32;",
    "pthread_mutex_init@retval/d32;pthread_mutex_destroy@retval/d32;",
    "pthread_mutex_lock@retval/d32;pthread_mutex_trylock@retval/d32;",
    "pthread_mutex_unlock@retval/d32;pthread_cond_wait@retval/d32;",
    "pthread_cond_timedwait@retval/d32;pthread_cond_signal@retval/d32;",
    "pthread_cond_broadcast@retval/d32;",
    // <dlfcn.h>
    "dlopen@retval/p;dlmopen@retval/p;dlsym@retval/p;dlvsym@retval/p;dlclose@retval/d32;",
    "dlerror@retval/s;",
    // sockets, name resolution
    "socket@retval/d32;connect@retval/d32;bind@retval/d32;listen@retval/d32;",
    "accept@retval/d32;accept4@retval/d32;send@retval;recv@retval;",
    "gethostbyname@retval/p;gethostbyaddr@retval/p;getaddrinfo@retval/d32;",
    "inet_pton@retval/d32;inet_ntop@retval/s;inet_aton@retval/d32;inet_ntoa@retval/s;",
    "inet_addr@retval;inet_network@retval;",
    // waiting for descriptors
    "select@retval/d32;pselect@retval/d32;poll@retval/d32;ppoll@retval/d32;",
    "epoll_create@retval/d32;epoll_create1@retval/d32;epoll_ctl@retval/d32;",
    "epoll_wait@retval/d32;epoll_pwait@retval/d32;",
    // syscall(2), messages, locales, options
    "syscall@retval;gettext@retval/s;dgettext@retval/s;dcgettext@retval/s;",
    "setlocale@retval/s;getopt@retval/d32;getopt_long@retval/d32;getopt_long_only@retval/d32;",
    // C++ runtime
    "_Znwm@retval/x;_Znam@retval/x",
);

/// Enum definitions (`enumauto`) for the `e:` items of [`ARGAUTO`]: the constants of the
/// system headers (x86_64 Linux, glibc), restricted to the enumerators uftrace 0.13 shows and
/// spelt as it shows them, since a value's name (and, for flags, how it is split) depends on
/// the whole set of enumerators. Where that spelling is not the header's, the enumerator says
/// so: `SIGNULL` for signal 0, `SIGPOLL` for 29 (glibc's other name of `SIGIO`), `F_SEGSIG`
/// for `F_SETSIG`, the 32-bit `F_*LK64` commands, `AF_TPIC` for `AF_TIPC`, `LC_TYPE` for
/// `LC_CTYPE`, and modes named `mod_NNN` after their octal digits. Type names are ours (they
/// never show).
pub const ENUMAUTO: &str = concat!(
    // <sys/mman.h>
    "enum utrace_prot {PROT_NONE,PROT_READ,PROT_WRITE,PROT_EXEC=4};",
    "enum utrace_map {MAP_SHARED=1,MAP_PRIVATE=2,MAP_FIXED=16,MAP_ANON=32,MAP_GROWSDOWN=256,",
    "MAP_DENYWRITE=2048,MAP_EXECUTABLE=4096,MAP_LOCKED=8192,MAP_NORESERVE=16384,",
    "MAP_POPULATE=32768,MAP_NONBLOCK=65536,MAP_STACK=131072,MAP_HUGETLB=262144};",
    "enum utrace_madv {MADV_NORMAL,MADV_RANDOM,MADV_SEQUENTIAL,MADV_WILLNEED,MADV_DONTNEED,",
    "MADV_FREE=8,MADV_REMOVE,MADV_DONTFORK,MADV_DOFORK,MADV_MERGEABLE,MADV_UNMERGEABLE,",
    "MADV_HUGEPAGE,MADV_NOHUGEPAGE,MADV_DONTDUMP,MADV_DODUMP,MADV_HWPOISON=100};",
    "enum utrace_pmadv {POSIX_MADV_NORMAL,POSIX_MADV_RANDOM,POSIX_MADV_SEQUENTIAL,",
    "POSIX_MADV_WILLNEED,POSIX_MADV_DONTNEED};",
    // <fcntl.h>, <unistd.h>, <sys/stat.h>
    "enum utrace_fadv {POSIX_FADV_NORMAL,POSIX_FADV_RANDOM,POSIX_FADV_SEQUENTIAL,",
    "POSIX_FADV_WILLNEED,POSIX_FADV_DONTNEED,POSIX_FADV_NOREUSE};",
    "enum utrace_open {O_RDONLY,O_WRONLY,O_RDWR,O_CREAT=64,O_EXCL=128,O_NOCTTY=256,",
    "O_TRUNC=512,O_APPEND=1024,O_NONBLOCK=2048,O_DSYNC=4096,O_ASYNC=8192,O_DIRECT=16384,",
    "O_LARGEFILE=32768,O_DIRECTORY=65536,O_NOFOLLOW=131072,O_NOATIME=262144,",
    "O_CLOEXEC=524288,O_SYNC=1052672,O_PATH=2097152};",
    "enum utrace_fcntl {F_DUPFD,F_GETFD,F_SETFD,F_GETFL,F_SETFL,F_GETLK,F_SETLK,F_SETLKW,",
    "F_SETOWN,F_GETOWN,F_SEGSIG,F_GETSIG,F_GETLK64,F_SETLK64,F_SETLKW64,F_SETOWN_EX,",
    "F_GETOWN_EX};",
    "enum utrace_whence {SEEK_SET,SEEK_CUR,SEEK_END,SEEK_DATA,SEEK_HOLE};",
    "enum utrace_access {F_OK,X_OK,W_OK,R_OK=4};",
    "enum utrace_mode {mod_777=511,mod_755=493,mod_666=438,mod_644=420,mod_400=256,",
    "mod_600=384,mod_660=432,mod_640=416,mod_444=292,mod_022=18,mod_440=288,mod_222=146,",
    "mod_111=73,mod_011=9,mod_033=27,mod_077=63};",
    // <dlfcn.h>
    "enum utrace_rtld {RTLD_LOCAL,RTLD_LAZY,RTLD_NOW,RTLD_NOLOAD=4,RTLD_DEEPBIND=8,",
    "RTLD_GLOBAL=256,RTLD_NODELETE=4096};",
    // <sys/socket.h>, <sys/epoll.h>
    "enum utrace_af {AF_UNSPEC,AF_UNIX,AF_INET,AF_AX25,AF_IPX,AF_APPLETALK,AF_NETROM,",
    "AF_BRIDGE,AF_ATMPVC,AF_X25,AF_INET6,AF_ROSE,AF_DECnet,AF_NETBEUI,AF_SECURITY,AF_KEY,",
    "AF_NETLINK,AF_PACKET,AF_ASH,AF_ECONET,AF_ATMSVC,AF_RDS,AF_SNA,AF_IRDA,AF_PPPOX,",
    "AF_WANPIPE,AF_LLC,AF_IB,AF_MPLS,AF_CAN,AF_TPIC,AF_BLUETOOTH,AF_IUCV,AF_RXRPC,AF_ISDN,",
    "AF_PHONET,AF_IEEE802154,AF_CAIF,AF_ALG,AF_NFC,AF_VSOCK,AF_KCM,AF_QIPCRTR,AF_SMC};",
    "enum utrace_sock {SOCK_STREAM=1,SOCK_DGRAM,SOCK_RAW,SOCK_RDM,SOCK_SEQPACKET,SOCK_DCCP,",
    "SOCK_PACKET=10};",
    "enum utrace_sockfl {SOCK_NONBLOCK=2048,SOCK_CLOEXEC=524288};",
    "enum utrace_epoll {EPOLL_CTL_ADD=1,EPOLL_CTL_DEL,EPOLL_CTL_MOD};",
    // <signal.h>
    "enum utrace_signal {SIGNULL,SIGHUP,SIGINT,SIGQUIT,SIGILL,SIGTRAP,SIGABRT,SIGBUS,SIGFPE,",
    "SIGKILL,SIGUSR1,SIGSEGV,SIGUSR2,SIGPIPE,SIGALRM,SIGTERM,SIGSTKFLT,SIGCHLD,SIGCONT,",
    "SIGSTOP,SIGTSTP,SIGTTIN,SIGTTOU,SIGURG,SIGXCPU,SIGXFSZ,SIGVTALRM,SIGPROF,SIGWINCH,",
    "SIGPOLL,SIGPWR,SIGSYS,SIGRTMIN,SIGRTMAX=64};",
    "enum utrace_sighow {SIG_BLOCK,SIG_UNBLOCK,SIG_SETMASK};",
    // <sys/prctl.h>
    "enum utrace_prctl {PR_SET_PDEATHSIG=1,PR_GET_PDEATHSIG,PR_GET_DUMPABLE,PR_SET_DUMPABLE,",
    "PR_GET_UNALIGN,PR_SET_UNALIGN,PR_GET_KEEPCAPS,PR_SET_KEEPCAPS,PR_GET_FPEMU,",
    "PR_SET_FPEMU,PR_GET_FPEXC,PR_SET_FPEXC,PR_GET_TIMING,PR_SET_TIMING,PR_SET_NAME,",
    "PR_GET_NAME,PR_GET_ENDIAN=19,PR_SET_ENDIAN,PR_GET_SECCOMP,PR_SET_SECCOMP,",
    "PR_CAPBSET_READ,PR_CAPBSET_DROP,PR_GET_TSC,PR_SET_TSC,PR_GET_SECUREBITS,",
    "PR_SET_SECUREBITS,PR_SET_TIMERSLACK,PR_GET_TIMERSLACK,PR_TASK_PERF_EVENTS_DISABLE,",
    "PR_TASK_PERF_EVENTS_ENABLE,PR_MCE_KILL,PR_MCE_KILL_GET,PR_SET_MM,",
    "PR_SET_CHILD_SUBREAPER,PR_GET_CHILD_SUBREAPER,PR_SET_NO_NEW_PRIVS,",
    "PR_GET_NO_NEW_PRIVS,PR_GET_TID_ADDRESS,PR_SET_THP_DISABLE,PR_GET_THP_DISABLE,",
    "PR_MPX_ENABLE_MANAGEMENT,PR_MPX_DISABLE_MANAGEMENT,PR_SET_FP_MODE,PR_GET_FP_MODE,",
    "PR_CAP_AMBIENT};",
    // <locale.h>, <time.h>
    "enum utrace_locale {LC_TYPE,LC_NUMERIC,LC_TIME,LC_COLLATE,LC_MONETARY,LC_MESSAGES,",
    "LC_ALL,LC_PAPER,LC_NAME,LC_ADDRESS,LC_TELEPHONE,LC_MEASUREMENT,LC_IDENTIFICATION};",
    "enum utrace_clock {CLOCK_REALTIME,CLOCK_MONOTONIC,CLOCK_PROCESS_CPUTIME_ID,",
    "CLOCK_THREAD_CPUTIME_ID,CLOCK_MONOTONIC_RAW,CLOCK_REALTIME_COARSE,",
    "CLOCK_MONOTONIC_COARSE,CLOCK_BOOTTIME,CLOCK_REALTIME_ALARM,CLOCK_BOOTTIME_ALARM,",
    "CLOCK_TAI=11};",
);

/// Functions given arguments or a return value that uftrace 0.13 does not show (see the
/// module documentation).
pub const BEYOND_UFTRACE: &[&str] = &[
    "pread",
    "pwrite",
    "send",
    "recv",
    "listen",
    "nanosleep",
    "_exit",
];

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
            for e in entry.split("/e:").skip(1) {
                let name = e.split(',').next().unwrap();
                assert!(
                    enums.iter().any(|(n, _)| n == name),
                    "{entry}: enum {name} missing"
                );
            }
        }
    }

    #[test]
    fn one_entry_per_function() {
        for list in [ARGAUTO, RETAUTO] {
            let mut names: Vec<&str> = list
                .split(';')
                .map(|e| e.split('@').next().unwrap())
                .collect();
            let len = names.len();
            names.sort_unstable();
            names.dedup();
            assert_eq!(names.len(), len, "a function listed twice");
        }
        for f in BEYOND_UFTRACE {
            let entry = format!(";{f}@");
            assert!(
                format!(";{ARGAUTO}").contains(&entry) || format!(";{RETAUTO}").contains(&entry),
                "{f}"
            );
        }
    }

    #[test]
    fn enum_values_are_the_headers() {
        let enums = parse_enums(ENUMAUTO).unwrap();
        let value = |e: &str, name: &str| {
            let (_, values) = enums.iter().find(|(n, _)| n == e).expect(e);
            values.iter().find(|(_, n)| n == name).expect(name).0
        };
        assert_eq!(value("utrace_open", "O_CREAT"), 0o100);
        assert_eq!(value("utrace_open", "O_SYNC"), 0o4010000);
        assert_eq!(value("utrace_mode", "mod_644"), 0o644);
        assert_eq!(value("utrace_mode", "mod_077"), 0o77);
        assert_eq!(value("utrace_madv", "MADV_DODUMP"), 17);
        assert_eq!(value("utrace_af", "AF_SMC"), 43);
        assert_eq!(value("utrace_sock", "SOCK_PACKET"), 10);
        assert_eq!(value("utrace_signal", "SIGSYS"), 31);
        assert_eq!(value("utrace_signal", "SIGRTMIN"), 32);
        assert_eq!(value("utrace_prctl", "PR_GET_NAME"), 16);
        assert_eq!(value("utrace_prctl", "PR_CAP_AMBIENT"), 47);
        assert_eq!(value("utrace_locale", "LC_ALL"), 6);
        assert_eq!(value("utrace_clock", "CLOCK_BOOTTIME_ALARM"), 9);
        assert_eq!(value("utrace_rtld", "RTLD_GLOBAL"), 0x100);
    }
}
