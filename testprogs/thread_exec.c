/*
 * thread_exec: main starts a thread that calls before_exec() and then execs
 * this program again as `thread_exec child`; the new image (in the thread
 * group leader's tid, as the kernel does it) calls after_exec().
 * main itself waits in pthread_join() until the exec ends it.
 * With `late`, the thread waits until main is out of pthread_create() and in
 * wait_exec(), which waits until the thread is about to exec, a little
 * longer, and returns; main calls pthread_join(): those calls are recorded
 * after the thread's exec entry.
 */
#include <pthread.h>
#include <string.h>
#include <unistd.h>

static char *self;
static volatile int late, go, ready;
/* A long argument for the late exec: copying it slows the exec before the
 * kernel ends the other threads. */
static char big[100 * 1024];

int before_exec(void)
{
	return 1;
}

int after_exec(int n)
{
	return n * 2;
}

void *runner(void *arg)
{
	before_exec();
	while (late && !go)
		;
	ready = 1;
	if (late)
		execl(self, self, "child", big, big, big, big, big, big, big, big, big,
		      big, big, big, big, big, big, big,
		      (char *)NULL);
	else
		execl(self, self, "child", (char *)NULL);
	return arg; /* only reached when exec fails */
}

int wait_exec(void)
{
	volatile long i;

	go = 1;
	while (!ready)
		;
	for (i = 0; i < 20000; i++)
		;
	return 0;
}

int main(int argc, char *argv[])
{
	pthread_t th;

	if (argc > 1 && strcmp(argv[1], "child") == 0)
		return after_exec(argc) > 0 ? 0 : 1;
	self = argv[0];
	late = argc > 1 && strcmp(argv[1], "late") == 0;
	memset(big, 'x', sizeof(big) - 1);
	pthread_create(&th, NULL, runner, NULL);
	if (late)
		wait_exec();
	pthread_join(th, NULL);
	return 1; /* not reached */
}
