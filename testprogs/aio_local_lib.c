/* The plugin of aio_local.c (utrace-test: lib-link -laio): writes a small file, then reads
 * it back with libaio, two reads per io_submit, reaped by io_getevents and by io_pgetevents
 * (with a signal mask), and prints every result and the bytes read. */
#include <fcntl.h>
#include <libaio.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static int reap(io_context_t ctx, int with_mask, const char *who)
{
	struct io_event ev[2];
	int n;
	if (with_mask) {
		sigset_t mask;
		sigemptyset(&mask);
		sigaddset(&mask, SIGUSR1);
		n = io_pgetevents(ctx, 2, 2, ev, NULL, &mask);
	} else {
		n = io_getevents(ctx, 2, 2, ev, NULL);
	}
	printf("%s: %d\n", who, n);
	for (int i = 0; i < n; i++) {
		const char *buf = ((struct iocb *)ev[i].obj)->u.c.buf;
		printf("  data %lu res %ld: %.8s\n", (unsigned long)(size_t)ev[i].data,
		       (long)ev[i].res, buf);
	}
	return n == 2 ? 0 : -1;
}

int aio_local_run(const char *file)
{
	int fd = open(file, O_RDWR | O_CREAT | O_TRUNC, 0600);
	if (fd < 0 || write(fd, "aaaaaaaabbbbbbbbccccccccdddddddd", 32) != 32)
		return -1;
	io_context_t ctx = 0;
	int ret = io_setup(4, &ctx);
	printf("io_setup: %d\n", ret);
	if (ret)
		return -1;
	static char bufs[4][9];
	struct iocb cbs[4], *list[4];
	for (int i = 0; i < 4; i++) {
		io_prep_pread(&cbs[i], fd, bufs[i], 8, 8 * i);
		cbs[i].data = (void *)(size_t)(i + 1);
		list[i] = &cbs[i];
	}
	int failed = 0;
	ret = io_submit(ctx, 2, list);
	printf("io_submit: %d\n", ret);
	failed |= ret != 2 || reap(ctx, 0, "io_getevents");
	ret = io_submit(ctx, 2, list + 2);
	printf("io_submit: %d\n", ret);
	failed |= ret != 2 || reap(ctx, 1, "io_pgetevents");
	io_destroy(ctx);
	close(fd);
	unlink(file);
	return failed ? -1 : 0;
}
