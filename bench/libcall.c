/*
 * Workload of bench/record.sh WORKLOAD=libcall: one traced function calling a library
 * function through the PLT in a loop, so that the cost measured is that of the PLT hook.
 * Build with -fno-builtin so that strlen stays a library call.
 */
#include <stdlib.h>
#include <string.h>

char text[] = "library call";

static size_t loop(long n)
{
	size_t sum = 0;

	for (long i = 0; i < n; i++)
		sum += strlen(text);
	return sum;
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 1000000;

	return loop(n) == 0;
}
