/* ksys: system calls made from different functions, for `record -k`: an O_SYNC open, a
 * write and an fsync, a pread and a getpid (kernel.md §5.4), on a scratch file (argv[1], or
 * /tmp/utrace-ksys.out), removed at the end. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

static int fd = -1;

static void open_file(const char *path)
{
	fd = open(path, O_CREAT | O_RDWR | O_TRUNC | O_SYNC, 0644);
}

static void write_sync(void)
{
	char buf[4096];
	memset(buf, 'x', sizeof(buf));
	if (write(fd, buf, sizeof(buf)) != sizeof(buf))
		return;
	fsync(fd);
}

static int read_back(void)
{
	char buf[16];
	return pread(fd, buf, sizeof(buf), 0) == sizeof(buf) ? 0 : 1;
}

static int who(void)
{
	return getpid() > 0 ? 0 : 1;
}

int main(int argc, char **argv)
{
	const char *path = argc > 1 ? argv[1] : "/tmp/utrace-ksys.out";
	open_file(path);
	if (fd < 0)
		return 1;
	write_sync();
	int r = read_back() + who();
	close(fd);
	unlink(path);
	return r;
}
