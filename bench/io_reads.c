/* io_reads: N O_DIRECT reads of 512 bytes from a file it creates (argv[2], on a block-backed
 * filesystem), each a block request: `pread` mode reads with pread() (the call waits), `aio`
 * mode submits each read with io_submit and reaps it with io_getevents (built with -laio).
 * The reads walk the file's 64 blocks of 4 KiB in turn. For bench/io.sh. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <libaio.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define FILE_SIZE (64 * 4096)

static int make_file(const char *path)
{
	static char data[FILE_SIZE];
	int fd = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0644);
	memset(data, 'r', sizeof(data));
	if (fd < 0 || write(fd, data, sizeof(data)) != (ssize_t)sizeof(data) || fsync(fd))
		return -1;
	return close(fd);
}

static int read_block(int fd, char *buf, off_t off)
{
	return pread(fd, buf, 512, off) == 512 ? 0 : -1;
}

static int aio_block(io_context_t ctx, int fd, char *buf, off_t off)
{
	struct iocb cb, *list[1] = { &cb };
	struct io_event ev;
	io_prep_pread(&cb, fd, buf, 512, off);
	if (io_submit(ctx, 1, list) != 1 || io_getevents(ctx, 1, 1, &ev, NULL) != 1)
		return -1;
	return ev.res == 512 ? 0 : -1;
}

int main(int argc, char *argv[])
{
	if (argc < 4) {
		fprintf(stderr, "usage: io_reads pread|aio FILE N\n");
		return 2;
	}
	int aio = strcmp(argv[1], "aio") == 0;
	long n = atol(argv[3]);
	io_context_t ctx = 0;
	char *buf;
	if (make_file(argv[2]) != 0 || posix_memalign((void **)&buf, 4096, 4096) != 0)
		return 1;
	int fd = open(argv[2], O_RDONLY | O_DIRECT);
	if (fd < 0 || (aio && io_setup(1, &ctx) != 0))
		return 1;
	for (long i = 0; i < n; i++) {
		off_t off = (i % 64) * 4096;
		if ((aio ? aio_block(ctx, fd, buf, off) : read_block(fd, buf, off)) != 0)
			return 3;
	}
	if (aio)
		io_destroy(ctx);
	close(fd);
	unlink(argv[2]);
	return 0;
}
