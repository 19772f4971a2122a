/* closefrom: a daemon's start-up closes every descriptor from 3 up (closefrom, then
 * close_range), then opens many files (as many as fit below 1024, the usual limit) in a
 * scratch directory and makes traced calls while they are open. Nothing but the program may
 * write into its files: it prints how many of them are no longer empty. Argument: the
 * scratch directory (default: a new one in /tmp, removed at the end). */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_FILES 1100

static int leaf(int i)
{
	return i & 7;
}

static int work(int n)
{
	int sum = 0;
	for (int i = 0; i < n; i++)
		sum += leaf(i);
	return sum;
}

int main(int argc, char *argv[])
{
	static int fds[MAX_FILES];
	char path[4096];
	int n = 0, dirty = 0;

	char tmp[] = "/tmp/closefrom.XXXXXX";
	const char *dir = argc > 1 ? argv[1] : mkdtemp(tmp);
	if (!dir)
		return 2;
	int sum = work(10);
	closefrom(3);
	if (close_range(3, ~0U, 0) != 0)
		perror("close_range");
	for (int i = 0; i < MAX_FILES; i++) {
		snprintf(path, sizeof path, "%s/f%d", dir, i);
		int fd = open(path, O_CREAT | O_RDWR | O_TRUNC, 0600);
		if (fd < 0)
			break;
		fds[n++] = fd;
	}
	sum += work(50000);
	for (int i = 0; i < n; i++) {
		struct stat st;
		if (fstat(fds[i], &st) == 0 && st.st_size != 0)
			dirty++;
		close(fds[i]);
		snprintf(path, sizeof path, "%s/f%d", dir, i);
		unlink(path);
	}
	if (argc < 2)
		rmdir(dir);
	printf("many files open: %s\n", n > 500 ? "yes" : "no");
	printf("files written by someone else: %d\n", dirty);
	printf("sum: %d\n", sum);
	return 0;
}
