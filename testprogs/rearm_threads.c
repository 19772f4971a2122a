/*
 * rearm_threads: four threads make their first calls of a few library functions at once
 * from cold() (filtered out with -F hot: the PLT slots are bound by the lazy binder behind
 * the tracer's back), then call them again from hot(), where every call must be recorded.
 */
#include <pthread.h>
#include <unistd.h>

#define THREADS 4

static pthread_barrier_t start, middle;

void cold(void)
{
	getegid();
	getppid();
	getuid();
	getgid();
	geteuid();
}

void hot(void)
{
	getegid();
	getppid();
	getuid();
	getgid();
	geteuid();
}

void *worker(void *arg)
{
	(void)arg;
	pthread_barrier_wait(&start);
	cold();
	pthread_barrier_wait(&middle);
	hot();
	return NULL;
}

int main(void)
{
	pthread_t th[THREADS];
	int i;

	pthread_barrier_init(&start, NULL, THREADS);
	pthread_barrier_init(&middle, NULL, THREADS);
	for (i = 0; i < THREADS; i++)
		pthread_create(&th[i], NULL, worker, NULL);
	for (i = 0; i < THREADS; i++)
		pthread_join(th[i], NULL);
	return 0;
}
