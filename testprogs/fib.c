/*
 * fib: plain recursion with an int argument and an int return value.
 *
 * `fib N` computes fib(N) the naive way; the default N is 5, which gives
 * 9 calls to fib() nested 4 deep: enough for depth filters and -A/-R
 * rendering, small enough to read a diff.
 */
#include <stdlib.h>

int fib(int n)
{
	if (n <= 2)
		return 1;
	return fib(n - 1) + fib(n - 2);
}

int main(int argc, char *argv[])
{
	int n = 5;

	if (argc > 1)
		n = atoi(argv[1]);
	return fib(n) > 0 ? 0 : 1;
}
