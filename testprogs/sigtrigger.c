/*
 * sigtrigger: with `raise`, raises SIGUSR1 (with no handler of its own) in the middle of a
 * loop of traced calls, for `record --signal SIGUSR1@ACTION`: the tracer's handler switches
 * recording at the signal; without it the signal would kill the program.
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>

int c(int n)
{
	return n + 1;
}

int b(int n)
{
	return c(n) + 1;
}

int a(int n)
{
	return b(n) + 1;
}

int main(int argc, char *argv[])
{
	int sum = 0;
	int do_raise = argc > 1 && strcmp(argv[1], "raise") == 0;

	for (int i = 0; i < 3; i++) {
		sum += a(i);
		if (i == 1 && do_raise)
			raise(SIGUSR1);
	}
	printf("%d\n", sum);
	return 0;
}
