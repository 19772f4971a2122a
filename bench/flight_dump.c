/* The stall of a flight-recorder dump asked for by a trigger: `utrace record
 * --flight-recorder=1M -T hot@dump flight_dump N GAP` makes N calls of hot() (each one a dump
 * its thread waits for), GAP microseconds apart, and prints the mean time of one hot() call.
 * See bench/README.md (flight recorder). */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
static volatile long sink;
void __attribute__((noinline)) leaf(long i) { sink += i; }
void __attribute__((noinline)) hot(long i) { leaf(i); }
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec * 1e6 + t.tv_nsec / 1e3; }
int main(int argc, char **argv) {
	long n = argc > 1 ? atol(argv[1]) : 2000;
	long gap = argc > 2 ? atol(argv[2]) : 0;
	double total = 0;
	for (long i = 0; i < n; i++) {
		double a = now();
		hot(i);
		total += now() - a;
		if (gap) usleep(gap);
	}
	fprintf(stderr, "per call: %.1f us\n", total / n);
	return 0;
}
