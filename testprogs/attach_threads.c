/*
 * attach_threads: a multi-threaded program built WITHOUT -pg (-O2), for `utrace
 * record -p`. Two workers start at once, two more at tick 15 (1.5 s); each runs
 * 60 rounds of library calls (snprintf, strlen) 20 ms apart. main prints "ready",
 * "tick N sum S" every 100 ms for 40 ticks, joins the workers and prints each
 * one's checksum: every line depends on nothing but the program, so a run that
 * was attached to prints the same lines as an untraced one.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static unsigned long round_sum(int who, int round)
{
	char buf[64];
	unsigned long sum = 0;

	for (int i = 0; i < 8; i++) {
		snprintf(buf, sizeof(buf), "w%d-r%d-i%d", who, round, i);
		sum = sum * 31 + strlen(buf) + buf[1];
	}
	return sum;
}

static void *worker(void *arg)
{
	int who = (int)(long)arg;
	unsigned long sum = 0;
	struct timespec ts = { 0, 20 * 1000 * 1000 };

	for (int r = 0; r < 60; r++) {
		sum = sum * 7 + round_sum(who, r);
		nanosleep(&ts, NULL);
	}
	return (void *)sum;
}

int main(void)
{
	pthread_t th[4];
	struct timespec ts = { 0, 100 * 1000 * 1000 };

	printf("ready\n");
	fflush(stdout);
	for (long i = 0; i < 2; i++)
		pthread_create(&th[i], NULL, worker, (void *)i);
	for (int t = 0; t < 40; t++) {
		if (t == 15)
			for (long i = 2; i < 4; i++)
				pthread_create(&th[i], NULL, worker, (void *)i);
		printf("tick %d sum %lu\n", t, round_sum(9, t));
		fflush(stdout);
		nanosleep(&ts, NULL);
	}
	for (int i = 0; i < 4; i++) {
		void *ret;

		pthread_join(th[i], &ret);
		printf("worker %d sum %lu\n", i, (unsigned long)ret);
	}
	return 0;
}
