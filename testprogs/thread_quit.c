/*
 * thread_quit: a worker ends itself with pthread_exit() from two traced
 * frames deep (worker -> quit_from -> quit), so worker, quit_from and quit
 * never return; pthread_exit unwinds the thread's stack (forced unwind)
 * through their frames. main joins it and calls after().
 */
#include <pthread.h>
#include <stddef.h>

int after(int n)
{
	return n + 1;
}

void quit(void)
{
	pthread_exit(NULL);
}

void quit_from(int n)
{
	if (n > 0)
		quit();
}

void *worker(void *arg)
{
	quit_from((int)(long)arg);
	return NULL;
}

int main(void)
{
	pthread_t th;

	pthread_create(&th, NULL, worker, (void *)1L);
	pthread_join(th, NULL);
	return after(0) == 1 ? 0 : 1;
}
