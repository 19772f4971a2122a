//! The return-value half of the built-in prototypes (`retauto`), grouped as
//! [`super::args`] is: `int` results are `d32`, ids (`pid_t`, `uid_t`) `i32`, `size_t` ones
//! `u`, pointers `p` (`s` where the result is a string), full words the default. Functions
//! returning nothing (`free`, `memcpy`'s pointer to its own argument, `qsort`) have no entry.

/// Return values, `;`-separated `NAME@retval[/FMT]`.
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
