/* sync_write: an O_SYNC writer: two 4 KiB writes to a new file (argv[1], on a block-backed
 * filesystem), each written through to the device before write() returns, then an fsync.
 * Exits non-zero when a step fails. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* One 4 KiB block of `c` at `off`: written through (O_SYNC). */
static int write_block(int fd, char c, off_t off)
{
	char buf[4096];
	memset(buf, c, sizeof(buf));
	return pwrite(fd, buf, sizeof(buf), off) == (ssize_t)sizeof(buf) ? 0 : -1;
}

static int sync_file(int fd)
{
	return fsync(fd);
}

int main(int argc, char *argv[])
{
	const char *path = argc > 1 ? argv[1] : "/var/tmp/utrace-sync_write.dat";
	int fd = open(path, O_CREAT | O_TRUNC | O_WRONLY | O_SYNC, 0644);
	int rc = 0;

	if (fd < 0)
		return 1;
	if (write_block(fd, 'a', 0) != 0 || write_block(fd, 'b', 4096) != 0)
		rc = 2;
	else if (sync_file(fd) != 0)
		rc = 3;
	close(fd);
	unlink(path);
	printf("sync_write: %s\n", rc ? "failed" : "ok");
	return rc;
}
