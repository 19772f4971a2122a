/*
 * deep: recursion far past the default shadow-stack limit (1024 entries).
 *
 * `deep N` recurses N levels (default 10000) through down(), calls
 * bottom() at the end and unwinds; main then calls after() to show that
 * tracing goes on normally. `deep N exit` calls exit() from the bottom
 * instead, so no frame of the recursion returns.
 *
 * Frames beyond the limit are not recorded; the ones within it must nest
 * and close like uftrace's.
 */
#include <stdlib.h>
#include <string.h>

static int exit_at_bottom;

int bottom(int n)
{
	if (exit_at_bottom)
		exit(0);
	return n;
}

int down(int n)
{
	if (n <= 1)
		return bottom(n);
	return down(n - 1) + 1;
}

int after(int n)
{
	return n - 1;
}

int main(int argc, char *argv[])
{
	int n = argc > 1 ? atoi(argv[1]) : 10000;

	exit_at_bottom = argc > 2 && strcmp(argv[2], "exit") == 0;
	return after(down(n)) == n - 1 ? 0 : 1;
}
