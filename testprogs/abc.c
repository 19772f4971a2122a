/*
 * abc: the smallest interesting call chain, main -> a -> b -> c -> getpid().
 *
 * Every filter example in the spec uses this shape: `a`, `b` and `c` each
 * have exactly one caller and one callee, and `getpid` is a library (PLT)
 * call at the bottom.
 */
#include <unistd.h>

int c(void)
{
	return getpid() % 100000;
}

int b(void)
{
	return c() + 1;
}

int a(void)
{
	return b() - 1;
}

int main(void)
{
	return a() >= 0 ? 0 : 1;
}
