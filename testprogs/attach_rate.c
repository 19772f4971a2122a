/*
 * attach_rate: a program built WITHOUT -pg (-O2) that counts how many library
 * calls (strlen) it makes per 200 ms, for 20 rounds, printing "round N: K k
 * calls". While `utrace record -p` is attached the calls pass through
 * libmcount's PLT hooks and the rate drops; after the detach, the process's GOT
 * slots lead to the functions again and the rate must be back.
 */
#include <stdio.h>
#include <string.h>
#include <time.h>

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

int main(void)
{
	volatile size_t sink = 0;
	const char *volatile s = "hello world";

	for (int r = 0; r < 20; r++) {
		double t0 = now();
		long n = 0;

		while (now() - t0 < 0.2) {
			for (int i = 0; i < 1000; i++)
				sink += strlen(s);
			n += 1000;
		}
		printf("round %d: %ld k calls\n", r, n / 1000);
		fflush(stdout);
	}
	return 0;
}
