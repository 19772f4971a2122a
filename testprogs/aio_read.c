/* aio_read: the classic libaio O_DIRECT reader of two blocks. It creates a file of 8 KiB
 * (argv[1], on a block-backed filesystem: O_DIRECT and block requests need one), fsyncs it,
 * prints where its data lies on the device (FIEMAP: "extent: BYTES"), then submits two
 * IOCB_CMD_PREADs of 512 bytes at offsets 0 and 4096 in one io_submit and reaps both with
 * io_getevents. Built with -laio; exits non-zero when a step fails. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <libaio.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "io_file.h"

#define BLOCK 512

/* Both reads in one io_submit: 512 bytes at 0 and at 4096. */
static int submit_reads(io_context_t ctx, int fd, char *buf)
{
	struct iocb cbs[2];
	struct iocb *list[2] = { &cbs[0], &cbs[1] };
	io_prep_pread(&cbs[0], fd, buf, BLOCK, 0);
	io_prep_pread(&cbs[1], fd, buf + 4096, BLOCK, 4096);
	cbs[0].data = (void *)1;
	cbs[1].data = (void *)2;
	return io_submit(ctx, 2, list);
}

/* Waits for both completions; the number of successful 512-byte reads. */
static int reap_reads(io_context_t ctx)
{
	struct io_event events[2];
	int done = 0, ok = 0;
	while (done < 2) {
		int n = io_getevents(ctx, 1, 2 - done, events, NULL);
		if (n <= 0)
			return ok;
		for (int i = 0; i < n; i++)
			ok += events[i].res == BLOCK;
		done += n;
	}
	return ok;
}

int main(int argc, char *argv[])
{
	const char *path = argc > 1 ? argv[1] : "/var/tmp/utrace-aio_read.dat";
	io_context_t ctx = 0;
	char *buf;
	int fd, ok = 0;

	if (prepare_file(path, 8192, 'a', 1) != 0)
		return 1;
	fd = open(path, O_RDONLY | O_DIRECT);
	if (fd < 0 || posix_memalign((void **)&buf, 4096, 8192) != 0)
		return 2;
	if (io_setup(2, &ctx) == 0) {
		if (submit_reads(ctx, fd, buf) == 2)
			ok = reap_reads(ctx);
		io_destroy(ctx);
	}
	close(fd);
	unlink(path);
	free(buf);
	printf("reads: %d\n", ok);
	return ok == 2 ? 0 : 3;
}
