/* bench/syscalls.c: a traced function making N getppid() system calls, for bench/kernel.sh:
 * the cost `record -k` adds per system call (two kernel events each). */
#include <stdlib.h>
#include <unistd.h>

long calls(long n)
{
	long s = 0;
	for (long i = 0; i < n; i++)
		s += getppid();
	return s;
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 1000000;
	return calls(n) == 0 ? 1 : 0;
}
