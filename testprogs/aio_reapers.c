/* aio_reapers: three O_DIRECT reads of a file of 16 KiB (argv[1], on a block-backed
 * filesystem) submitted in one io_submit (IOCB_CMD_PREADs of 512 bytes at 0, 1024 bytes at
 * 4096 and 512 bytes at 12288, data 1, 2 and 3; with argv[2] "adjacent", the second is 512
 * bytes at 512, which the block layer may merge with the first into one request), then
 * reaped one at a time by three
 * functions, each calling io_getevents(ctx, 1, 1, ...): which read each one gets depends on
 * the completion order. Each prints what it got ("reap_b: data 2 res 1024"), so that a test
 * can check the reaper `report --io` gives each request. Then it prints the descriptor the
 * next open() returns and errno as left by an io_getevents, which tracing must not change.
 * Built with -laio; exits non-zero when a step fails. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <libaio.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "io_file.h"

#define SIZE 16384

static struct iocb cbs[3];

/* The three reads in one io_submit. */
static int submit_reads(io_context_t ctx, int fd, char *buf, int adjacent)
{
	struct iocb *list[3] = { &cbs[0], &cbs[1], &cbs[2] };
	io_prep_pread(&cbs[0], fd, buf, 512, 0);
	if (adjacent)
		io_prep_pread(&cbs[1], fd, buf + 512, 512, 512);
	else
		io_prep_pread(&cbs[1], fd, buf + 4096, 1024, 4096);
	io_prep_pread(&cbs[2], fd, buf + 12288, 512, 12288);
	for (int i = 0; i < 3; i++)
		cbs[i].data = (void *)(long)(i + 1);
	return io_submit(ctx, 3, list);
}

/* One completion, said with the name of the reaping function; 1 when it is a full read. */
static int reap_one(io_context_t ctx, const char *who)
{
	struct io_event ev;
	errno = 71;
	if (io_getevents(ctx, 1, 1, &ev, NULL) != 1)
		return 0;
	int saved = errno;
	printf("%s: data %ld res %ld\n", who, (long)ev.data, (long)ev.res);
	printf("%s errno: %d\n", who, saved);
	return ev.res == (long)((struct iocb *)ev.obj)->u.c.nbytes;
}

static int reap_a(io_context_t ctx)
{
	return reap_one(ctx, "reap_a");
}

static int reap_b(io_context_t ctx)
{
	return reap_one(ctx, "reap_b");
}

static int reap_c(io_context_t ctx)
{
	return reap_one(ctx, "reap_c");
}

int main(int argc, char *argv[])
{
	const char *path = argc > 1 ? argv[1] : "/var/tmp/utrace-aio_reapers.dat";
	io_context_t ctx = 0;
	char *buf;
	int fd, ok = 0;

	if (prepare_file(path, SIZE, 'a', 0) != 0)
		return 1;
	fd = open(path, O_RDONLY | O_DIRECT);
	if (fd < 0 || posix_memalign((void **)&buf, 4096, SIZE) != 0)
		return 2;
	if (io_setup(4, &ctx) == 0) {
		int adjacent = argc > 2 && strcmp(argv[2], "adjacent") == 0;
		errno = 72;
		int submitted = submit_reads(ctx, fd, buf, adjacent);
		printf("io_submit errno: %d\n", errno);
		if (submitted == 3)
			ok = reap_a(ctx) + reap_b(ctx) + reap_c(ctx);
		/* Nothing left: a zero timeout returns at once, errno untouched. */
		struct timespec zero = { 0, 0 };
		struct io_event ev;
		errno = 77;
		io_getevents(ctx, 0, 1, &ev, &zero);
		printf("errno: %d\n", errno);
		io_destroy(ctx);
	}
	int next = open("/dev/null", O_RDONLY);
	printf("next fd: %d\n", next);
	close(next);
	close(fd);
	unlink(path);
	free(buf);
	printf("reads: %d\n", ok);
	return ok == 3 ? 0 : 3;
}
