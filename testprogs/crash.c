/*
 * crash: main -> level1 -> level2 -> level3, and level3 dies there.
 *
 * `crash segv` (the default) writes through a NULL pointer (SIGSEGV);
 * `crash abort` calls abort() (SIGABRT). done() runs and returns before the
 * chain, so the trace holds finished and unfinished functions. None of the
 * chain returns: replay must show every entry and list level3, level2,
 * level1 and main as remaining functions.
 */
#include <stdlib.h>
#include <string.h>

int done(int n)
{
	return n + 1;
}

void level3(const char *how)
{
	if (strcmp(how, "abort") == 0)
		abort();
	*(volatile int *)NULL = done(3);
}

void level2(const char *how)
{
	level3(how);
}

void level1(const char *how)
{
	level2(how);
}

int main(int argc, char *argv[])
{
	done(0);
	level1(argc > 1 ? argv[1] : "segv");
	return 0; /* not reached */
}
