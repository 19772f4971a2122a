/*
 * attach_malloc: a program built WITHOUT -pg (-O2) whose main thread does nothing but
 * malloc and free (so that `utrace record -p` almost always stops it inside malloc, holding
 * the arena lock that an injected dlopen would wait for), beside an idle thread. It prints
 * "tick N" lines (snprintf, strlen) every 100 ms of its loop for the number of ticks given
 * (default 20), then "done".
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static void *idle(void *arg)
{
	(void)arg;
	for (;;)
		pause();
	return NULL;
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	int ticks = argc > 1 ? atoi(argv[1]) : 20;
	double next = now() + 0.1;
	pthread_t th;
	char buf[32];

	pthread_create(&th, NULL, idle, NULL);
	for (int t = 0; t < ticks;) {
		void *p[8];

		for (int i = 0; i < 8; i++)
			p[i] = malloc(5000 + i * 100);
		for (int i = 0; i < 8; i++)
			free(p[i]);
		if (now() >= next) {
			snprintf(buf, sizeof(buf), "tick %d", t);
			printf("%s len %zu\n", buf, strlen(buf));
			fflush(stdout);
			next += 0.1;
			t++;
		}
	}
	printf("done\n");
	return 0;
}
