/* flush_write: buffered writes left to the kernel's writeback, then waited for. Writes
 * 64 KiB to a new file (argv[1], on a block-backed filesystem) with plain write()s, which
 * only dirty the page cache, and calls syncfs(): a flusher thread (kworker) writes the pages
 * out while the program waits. Then writes 4 KiB to a second file (argv[1] with ".2") and
 * fsyncs it: the program writes the data itself, and the journal thread (jbd2) commits the
 * file's metadata while fsync waits. Exits non-zero when a step fails. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* 16 writes of 4 KiB of `c`: dirty pages, no I/O yet. */
static int fill_file(int fd, char c)
{
	char buf[4096];
	memset(buf, c, sizeof(buf));
	for (int i = 0; i < 16; i++)
		if (write(fd, buf, sizeof(buf)) != (ssize_t)sizeof(buf))
			return -1;
	return 0;
}

/* Waits for the writeback of the file system's dirty pages. */
static int flush_all(int fd)
{
	return syncfs(fd);
}

static int append_record(int fd)
{
	char buf[4096];
	memset(buf, 'j', sizeof(buf));
	return write(fd, buf, sizeof(buf)) == (ssize_t)sizeof(buf) ? 0 : -1;
}

static int commit_record(int fd)
{
	return fsync(fd);
}

int main(int argc, char *argv[])
{
	const char *path = argc > 1 ? argv[1] : "/var/tmp/utrace-flush_write.dat";
	char second[4096];
	int rc = 0;

	snprintf(second, sizeof(second), "%s.2", path);
	int fd = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0644);
	if (fd < 0)
		return 1;
	if (fill_file(fd, 'w') != 0)
		rc = 2;
	else if (flush_all(fd) != 0)
		rc = 3;
	close(fd);
	fd = open(second, O_CREAT | O_TRUNC | O_WRONLY, 0644);
	if (fd < 0)
		rc = 4;
	else if (append_record(fd) != 0)
		rc = 5;
	else if (commit_record(fd) != 0)
		rc = 6;
	if (fd >= 0)
		close(fd);
	unlink(path);
	unlink(second);
	printf("flush_write: %s\n", rc ? "failed" : "ok");
	return rc;
}
