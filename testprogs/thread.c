/*
 * thread: main starts two pthreads and joins them.
 *
 * Each worker makes the same small, fixed sequence of calls (tiny() then
 * step() -> tiny()), so every task's own call sequence is deterministic even
 * though the interleaving between tasks is not. Replay must give each
 * thread its own depth, starting at 0 with worker().
 */
#include <pthread.h>
#include <stddef.h>

int tiny(int n)
{
	return n + 1;
}

int step(int n)
{
	return tiny(n) * 2;
}

void *worker(void *arg)
{
	long id = (long)arg;

	tiny((int)id);
	step((int)id);
	return NULL;
}

int main(void)
{
	pthread_t th[2];
	long i;

	for (i = 0; i < 2; i++)
		pthread_create(&th[i], NULL, worker, (void *)i);
	for (i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	return 0;
}
