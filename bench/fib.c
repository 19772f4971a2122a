/*
 * Workload of bench/replay.sh: naive recursive Fibonacci, one traced call per step.
 * fib(n) makes 2*F(n+1)-1 calls, so `fib 30` records about 2.7 million calls (5.4 million
 * ENTRY/EXIT records, ~86 MB of .dat). Build with -pg -O0 -fno-inline so every call stays.
 */
#include <stdlib.h>

static int fib(int n)
{
	return n < 2 ? n : fib(n - 1) + fib(n - 2);
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 30;

	/* Use the result so the calls cannot be dropped; exit 0 for any n > 0. */
	return fib(n) < 0;
}
