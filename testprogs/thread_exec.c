/*
 * thread_exec: main starts a thread that calls before_exec() and then execs
 * this program again as `thread_exec child`; the new image (in the thread
 * group leader's tid, as the kernel does it) calls after_exec().
 * main itself waits in pthread_join() until the exec ends it.
 */
#include <pthread.h>
#include <string.h>
#include <unistd.h>

static char *self;

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
	execl(self, self, "child", (char *)NULL);
	return arg; /* only reached when exec fails */
}

int main(int argc, char *argv[])
{
	pthread_t th;

	if (argc > 1 && strcmp(argv[1], "child") == 0)
		return after_exec(argc) == 4 ? 0 : 1;
	self = argv[0];
	pthread_create(&th, NULL, runner, NULL);
	pthread_join(th, NULL);
	return 1; /* not reached */
}
