/* libc_calls: a broad sample of C library calls with fixed arguments, for `-a` (the built-in
 * prototypes of library calls). Works in the directory given as argv[1] (a fresh temporary
 * one without it) and removes what it creates. */
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <locale.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>

/* Results of pure functions are kept: the compiler may drop calls whose result is unused. */
static const void *volatile sink;

static int cmp_int(const void *a, const void *b)
{
	return *(const int *)a - *(const int *)b;
}

static void *worker(void *arg)
{
	return arg;
}

static void on_signal(int sig)
{
	(void)sig;
}

static int memory(void)
{
	char *p = malloc(32);
	char *q = calloc(4, 8);
	p = realloc(p, 64);
	void *a = NULL;
	posix_memalign(&a, 64, 128);
	free(a);
	a = aligned_alloc(64, 128);
	free(a);
	char *m = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	mprotect(m, 4096, PROT_READ);
	madvise(m, 8192, MADV_DONTNEED);
	munmap(m, 8192);
	memset(q, 'x', 16);
	memcpy(p, q, 16);
	int same = memcmp(p, q, 16) == 0;
	sink = memchr(p, 'x', 16);
	free(q);
	free(p);
	return same;
}

static int strings(void)
{
	char buf[64];
	strcpy(buf, "alpha");
	strcat(buf, "-beta");
	int n = (int)strlen(buf);
	n += strcmp(buf, "alpha-beta") == 0;
	n += strncmp(buf, "alpine", 3) == 0;
	sink = strchr(buf, '-');
	sink = strrchr(buf, 'a');
	sink = strstr(buf, "beta");
	char *d = strdup("gamma,delta");
	strtok(d, ",");
	free(d);
	n += atoi("42");
	n += (int)atol("-7");
	n += (int)strtoul("17", NULL, 8);
	n += strcasecmp("Alpha", "alpha") == 0;
	strncpy(buf, "delta", 3);
	memmove(buf + 1, buf, 4);
	n += (int)strtol("0x1f", NULL, 16);
	snprintf(buf, sizeof(buf), "%d-%s", 7, "seven");
	int v[] = { 5, 3, 9, 1 };
	qsort(v, 4, sizeof(int), cmp_int);
	int key = 9;
	bsearch(&key, v, 4, sizeof(int), cmp_int);
	return n;
}

static void files(void)
{
	char cwd[256];
	getcwd(cwd, sizeof(cwd));
	char buf[8] = "hello\n";
	int fd = open("data.txt", O_RDWR | O_CREAT | O_TRUNC, 0644);
	write(fd, buf, 6);
	lseek(fd, 0, SEEK_SET);
	read(fd, buf, sizeof(buf));
	pread(fd, buf, 2, 1);
	fcntl(fd, F_GETFL);
	struct stat st;
	fstat(fd, &st);
	fcntl(fd, F_SETFD, FD_CLOEXEC);
	isatty(fd);
	close(fd);
	stat("data.txt", &st);
	access("data.txt", F_OK);
	access("data.txt", R_OK | W_OK);
	chmod("data.txt", 0600);
	umask(022);
	FILE *f = fopen("data.txt", "r");
	fgets(buf, sizeof(buf), f);
	feof(f);
	fclose(f);
	f = fopen("data.txt", "a");
	fputs("more\n", f);
	fprintf(f, "%s\n", "text");
	fflush(f);
	fclose(f);
	unlink("data.txt");
	mkdir("sub", 0755);
	DIR *dir = opendir("sub");
	closedir(dir);
	rmdir("sub");
}

static void processes(void)
{
	kill(0, 0);
	signal(SIGUSR1, on_signal);
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGUSR2, &sa, NULL);
	sigset_t set, old;
	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	sigprocmask(SIG_BLOCK, &set, &old);
	sigprocmask(SIG_SETMASK, &old, NULL);
	sigfillset(&set);
	sigdelset(&set, SIGTERM);
	sigismember(&set, SIGINT);
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	clock_getres(CLOCK_REALTIME, &ts);
	usleep(100);
	struct timespec nap = { 0, 1000 };
	nanosleep(&nap, NULL);
	char name[32];
	prctl(PR_GET_NAME, name, 0, 0, 0);
	setlocale(LC_ALL, "C");
	getenv("LIBC_CALLS_UNSET");
	setenv("LIBC_CALLS_SET", "yes", 1);
	unsetenv("LIBC_CALLS_SET");
	getuid();
	pthread_t t;
	pthread_create(&t, NULL, worker, NULL);
	pthread_join(t, NULL);
}

static void loading(void)
{
	dlopen("libnot-there.so", RTLD_LAZY | RTLD_GLOBAL);
	dlerror();
	void *h = dlopen("libm.so.6", RTLD_NOW);
	if (h) {
		dlsym(h, "cos");
		dlclose(h);
	}
}

static void sockets(void)
{
	int u = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	close(u);
	int s = socket(AF_INET, SOCK_STREAM, 0);
	struct in_addr addr;
	inet_pton(AF_INET, "127.0.0.1", &addr);
	close(s);
	int ep = epoll_create1(EPOLL_CLOEXEC);
	struct epoll_event ev = { .events = EPOLLIN };
	int p[2];
	pipe(p);
	epoll_ctl(ep, EPOLL_CTL_ADD, p[0], &ev);
	struct epoll_event out[2];
	epoll_wait(ep, out, 2, 0);
	close(p[0]);
	close(p[1]);
	close(ep);
}

int main(int argc, char **argv)
{
	char tmp[] = "/tmp/libc_calls.XXXXXX";
	const char *dir = argc > 1 ? argv[1] : mkdtemp(tmp);
	if (!dir || chdir(dir) != 0)
		return 1;
	int ok = memory();
	ok += strings();
	files();
	processes();
	loading();
	sockets();
	if (argc <= 1)
		rmdir(tmp);
	return ok > 0 ? 0 : 1;
}
