/*
 * pthread_exit: a worker thread calls finish() -> pthread_exit() from two
 * levels down (its frames never return); main joins it and goes on. (The
 * exit value is not checked: under uftrace 0.13 pthread_join() reports
 * another one.)
 */
#include <pthread.h>

int step(int n)
{
	return n + 1;
}

void finish(int n)
{
	step(n);
	pthread_exit((void *)(long)n);
}

void *worker(void *arg)
{
	finish((int)(long)arg);
	return NULL; /* not reached */
}

int main(void)
{
	pthread_t th;

	pthread_create(&th, NULL, worker, (void *)1L);
	pthread_join(th, NULL);
	return step(1) == 2 ? 0 : 1;
}
