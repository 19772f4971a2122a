/*
 * attach_work: a long-running program built WITHOUT -pg (-O2), for `utrace record -p`.
 * Every 100 ms it does some work through library calls (snprintf, strlen, qsort,
 * memcmp) and prints "tick N sum S": S depends on N only, so a run that was
 * attached to and detached from prints the same lines as an untraced one. It
 * prints "ready" first, runs TICKS ticks (argv[1], default 40) and exits 0.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int cmp(const void *a, const void *b)
{
	return memcmp(a, b, sizeof(int));
}

static unsigned long work(int tick)
{
	char buf[64];
	int vals[16];
	unsigned long sum = 0;

	for (int i = 0; i < 16; i++) {
		snprintf(buf, sizeof(buf), "tick-%d-item-%d", tick, i);
		sum = sum * 31 + strlen(buf);
		vals[i] = (tick * 7919 + i * 104729) % 1000;
	}
	qsort(vals, 16, sizeof(int), cmp);
	for (int i = 0; i < 16; i++)
		sum = sum * 17 + vals[i];
	return sum;
}

int main(int argc, char **argv)
{
	int ticks = argc > 1 ? atoi(argv[1]) : 40;
	struct timespec ts = { 0, 100 * 1000 * 1000 };

	printf("ready\n");
	fflush(stdout);
	for (int t = 0; t < ticks; t++) {
		printf("tick %d sum %lu\n", t, work(t));
		fflush(stdout);
		nanosleep(&ts, NULL);
	}
	return 0;
}
