/*
 * locs: arguments in every place the x86-64 SysV convention puts them, for
 * explicit argument locations (`arg1%rdi`, `arg7%stack+1`, `%RDI+XMM0`) and
 * for the values that are not in general registers: long double (in memory
 * on the stack, returned in x87 st(0)), float next to integers, small structs
 * split over an integer and an SSE register, and structs passed in memory.
 *
 * Every function returns something that depends on all its arguments, so the
 * recorded values can be checked against the return values. The program exits
 * with 3 if an x87 exception flag is set at the end.
 */
#include <stdio.h>

struct ld { long l; double d; };   /* rdi + xmm0 */
struct dl { double d; long l; };   /* xmm0 + rdi */
struct dd { double a; double b; }; /* xmm0 + xmm1 */
struct ll { long a; long b; };     /* rdi + rsi */
struct big { long a; long b; long c; }; /* in memory, on the stack */

long many(long a, long b, long c, long d, long e, long f, long g, long h)
{
	return a + b + c + d + e + f + g + h;
}

int many_int(int a, int b, int c, int d, int e, int f, int g, int h, int i)
{
	return a + b + c + d + e + f + g + h + i;
}

long double ldmul(long double a, long double b)
{
	return a * b;
}

/* Seven integers: the long double goes after the seventh, 16-byte aligned. */
long double ld_after(long a, long b, long c, long d, long e, long f, long g,
		     long double x)
{
	return x + a + b + c + d + e + f + g;
}

/* Long doubles do not take SSE registers: y is in xmm0. */
double ld_mixed(int n, long double x, double y, long double z)
{
	return n + (double)x + y + (double)z;
}

float fmix(int a, float b, long c, float d)
{
	return a + b + c + d;
}

int pair(int a, double x, int b)
{
	return a + b + (int)x;
}

double ld_sum(struct ld s)
{
	return s.l + s.d;
}

double dl_sum(struct dl s)
{
	return s.d + s.l;
}

double dd_sum(struct dd s)
{
	return s.a + s.b;
}

long ll_sum(struct ll s)
{
	return s.a + s.b;
}

long big_sum(struct big s, long k)
{
	return s.a + s.b + s.c + k;
}

/* A 24-byte object passed by address, as C++ passes objects that are not
 * trivially copyable (`/t24%RDI`). */
long big_ref(const struct big *p)
{
	return p->a + p->b + p->c;
}

/* The x87 exception flags: reading a long double return value must leave them
 * as the program set them (a program may test them with fetestexcept). */
static int x87_exceptions(void)
{
	unsigned short sw;

	__asm__ volatile("fnstsw %0" : "=m"(sw));
	return sw & 0x3f;
}

int main(void)
{
	struct ld a = { 3, 0.5 };
	struct dl b = { 1.25, 4 };
	struct dd c = { 2.5, 0.25 };
	struct ll d = { 10, 20 };
	struct big e = { 100, 200, 300 };
	long total = 0;

	total += many(1, 2, 3, 4, 5, 6, 7, 8);
	total += many_int(-1, -2, -3, -4, -5, -6, -7, -8, -9);
	total += (long)ldmul(1.5L, 4.0L);
	total += ld_after(1, 2, 3, 4, 5, 6, 7, 2.75L) > 30;
	total += (long)ld_mixed(5, 0.125L, 1.5, -6.625L);
	total += (long)fmix(1, 2.5f, 3, 4.5f);
	total += pair(1, 2.0, 3);
	total += (long)ld_sum(a);
	total += (long)dl_sum(b);
	total += (long)dd_sum(c);
	total += ll_sum(d);
	total += big_sum(e, 9);
	total += big_ref(&e);
	/* Exact arithmetic only: no flag is set unless the tracer sets one. */
	if (x87_exceptions())
		return 3;
	return total == 0;
}
