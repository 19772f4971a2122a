/*
 * Workload of bench/flight.sh: THREADS threads (argv[2], default 2) make traced calls for
 * SECONDS (argv[1], default 600): each iteration is step() calling leaf() twice, 3 calls and
 * 6 records. The clock is read every 65536 iterations. Prints the number of calls made.
 * Build with -pg -O0 -fno-inline so every call stays.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double seconds;
static long calls[64];

static long leaf(long i)
{
	return i * 3 + 1;
}

static long step(long i)
{
	return leaf(i) + leaf(i + 1);
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void *work(void *arg)
{
	long id = (long)arg, n = 0, sum = 0;
	double end = now() + seconds;

	for (;;) {
		for (int k = 0; k < 65536; k++)
			sum += step(n++);
		if (now() >= end)
			break;
	}
	calls[id] = n * 3 + (sum == 42);
	return NULL;
}

int main(int argc, char **argv)
{
	int threads = argc > 2 ? atoi(argv[2]) : 2;
	pthread_t tid[64];
	long total = 0;

	seconds = argc > 1 ? atof(argv[1]) : 600;
	if (threads < 1 || threads > 64)
		threads = 2;
	for (long t = 0; t < threads; t++)
		pthread_create(&tid[t], NULL, work, (void *)t);
	for (int t = 0; t < threads; t++) {
		pthread_join(tid[t], NULL);
		total += calls[t];
	}
	printf("%ld calls\n", total);
	return 0;
}
