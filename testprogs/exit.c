/*
 * exit: exit(0) from three traced frames deep (main -> outer -> inner ->
 * finish), so main, outer, inner and finish never return. Replay shows
 * `exit() {` without a closing brace and then the remaining-functions block.
 */
#include <stdlib.h>

void finish(int code)
{
	exit(code);
}

void inner(int code)
{
	finish(code);
}

void outer(int code)
{
	inner(code);
}

int main(void)
{
	outer(0);
	return 1; /* not reached */
}
