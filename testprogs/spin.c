/*
 * spin: calls work() in a loop for argv[1] milliseconds (default 3000), with a
 * short sleep every thousand calls, then prints "done" and a checksum. A traced
 * run writes records fast and for long enough to stop or kill the recorder in
 * the middle of it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

int work(int i)
{
	return i * 3 + 1;
}

static long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

int main(int argc, char **argv)
{
	long ms = argc > 1 ? atol(argv[1]) : 3000;
	long end = now_ms() + ms;
	long sum = 0;

	while (now_ms() < end) {
		for (int i = 0; i < 1000; i++)
			sum += work(i);
		usleep(200);
	}
	printf("done %ld\n", sum);
	return 0;
}
