/* uring_read: aio_read's two O_DIRECT reads of 512 bytes (offsets 0 and 4096) through
 * io_uring with liburing: both SQEs (user_data 1 and 2) submitted by one io_uring_submit,
 * both CQEs waited for. The file (argv[1], on a block-backed filesystem) is created and
 * fsynced first; "extent: BYTES" says where its data lies on the device. Built with
 * -luring; exits non-zero when a step fails. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <liburing.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "io_file.h"

#define BLOCK 512

/* Both reads in one submission: 512 bytes at 0 (user_data 1) and at 4096 (user_data 2). */
static int submit_reads(struct io_uring *ring, int fd, char *buf)
{
	for (int i = 0; i < 2; i++) {
		struct io_uring_sqe *sqe = io_uring_get_sqe(ring);
		if (!sqe)
			return -1;
		io_uring_prep_read(sqe, fd, buf + 4096 * i, BLOCK, 4096 * i);
		io_uring_sqe_set_data64(sqe, i + 1);
	}
	return io_uring_submit(ring);
}

/* Waits for both completions; the number of successful 512-byte reads. */
static int reap_reads(struct io_uring *ring)
{
	int ok = 0;
	for (int i = 0; i < 2; i++) {
		struct io_uring_cqe *cqe;
		if (io_uring_wait_cqe(ring, &cqe) != 0)
			return ok;
		ok += cqe->res == BLOCK;
		io_uring_cqe_seen(ring, cqe);
	}
	return ok;
}

int main(int argc, char *argv[])
{
	const char *path = argc > 1 ? argv[1] : "/var/tmp/utrace-uring_read.dat";
	struct io_uring ring;
	char *buf;
	int fd, ok = 0;

	if (prepare_file(path, 8192, 'u', 1) != 0)
		return 1;
	fd = open(path, O_RDONLY | O_DIRECT);
	if (fd < 0 || posix_memalign((void **)&buf, 4096, 8192) != 0)
		return 2;
	if (io_uring_queue_init(4, &ring, 0) == 0) {
		if (submit_reads(&ring, fd, buf) == 2)
			ok = reap_reads(&ring);
		io_uring_queue_exit(&ring);
	}
	close(fd);
	unlink(path);
	free(buf);
	printf("reads: %d\n", ok);
	return ok == 2 ? 0 : 3;
}
