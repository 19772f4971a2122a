/*
 * sleep: one slow path and one fast path, so a time filter has a
 * deterministic result. slow() sleeps 2 ms via usleep(); quick() does a few
 * additions. `-t 1ms` keeps main, slow and usleep and drops quick.
 */
#include <unistd.h>

int quick(int n)
{
	return n + 1;
}

int slow(void)
{
	return usleep(2000);
}

int main(void)
{
	quick(1);
	slow();
	quick(2);
	return 0;
}
