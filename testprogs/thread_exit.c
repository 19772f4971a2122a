/*
 * thread_exit: main calls exit() while two worker threads are blocked
 * inside a traced function (worker -> wait_forever).
 *
 * exit() ends every thread at once (exit_group): the workers never return,
 * their per-thread destructors never run, and main's own frames stay open.
 * Each worker calls ready() and only then tells main it has started, from
 * wait_forever's own body, so ready() has returned in every run; main starts
 * the workers one after the other, so they appear in the same order.
 */
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static int started;

int ready(int n)
{
	return n + 1;
}

void wait_forever(int id)
{
	ready(id);
	pthread_mutex_lock(&lock);
	started++;
	pthread_cond_signal(&cond);
	pthread_mutex_unlock(&lock);
	for (;;)
		pause();
}

void *worker(void *arg)
{
	wait_forever((int)(long)arg);
	return NULL;
}

void wait_started(int n)
{
	pthread_mutex_lock(&lock);
	while (started < n)
		pthread_cond_wait(&cond, &lock);
	pthread_mutex_unlock(&lock);
}

void leave(int code)
{
	exit(code);
}

int main(void)
{
	pthread_t th;
	long i;

	for (i = 1; i <= 2; i++) {
		pthread_create(&th, NULL, worker, (void *)i);
		wait_started(i);
	}
	leave(0);
	return 1; /* not reached */
}
