//! The argument half of the built-in prototypes (`argauto`): one group per C library header
//! (or family), each entry `NAME@items` from the function's C prototype. Integer parameters
//! of type `int` are `d32`, `size_t` ones `u`, `long`/`off_t`/`ssize_t` and other full words
//! the default; enums refer to `utrace_*` definitions of [`super::enums`].

/// Arguments, `;`-separated `NAME@items`.
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
    // C++ runtime: operator new/new[] (size) and delete/delete[] (pointer, sized)
    "_Znwm@arg1/u;_Znam@arg1/u;_ZdlPv@arg1/x;_ZdaPv@arg1/x;_ZdlPvm@arg1/x,arg2/u",
);
