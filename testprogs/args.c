/*
 * args: one function per argument type, called in a fixed order from main.
 *
 * Record with -A/-R specs (or -a for DWARF auto-args) to check how each kind
 * of value is rendered: negative ints, values above the hex threshold,
 * unsigned, char, C string, double and float (counted separately from the
 * integer arguments), pointers and enums, stack arguments, a NULL string and
 * a string pointer to unmapped memory.
 */
#include <stddef.h>
#include <string.h>

enum shape { SQUARE, CIRCLE = 4, TRIANGLE };

int add_int(int x, int y)
{
	return x + y;
}

long mul_long(long x, long y)
{
	return x * y;
}

unsigned twice_unsigned(unsigned x)
{
	return x * 2;
}

char to_upper(char ch)
{
	return ch - 'a' + 'A';
}

const char *pick(const char *name, int use_name)
{
	return use_name ? name : "nobody";
}

double half(double x)
{
	return x / 2;
}

float scale(float x, int factor, float y)
{
	return x * factor + y;
}

void *same_ptr(void *p)
{
	return p;
}

int sides(enum shape s)
{
	return s == TRIANGLE ? 3 : 0;
}

/* every kind at once: integer args fill rdi.., floating args fill xmm0.. */
long mixed(char ch, int i, double d, const char *s, unsigned long ul)
{
	return ch + i + (long)d + (long)strlen(s) + (long)ul;
}

/* more integer arguments than registers: g and h are passed on the stack */
long sum8(long a, long b, long c, long d, long e, long f, long g, long h)
{
	return a + b + c + d + e + f + g + h;
}

/* six integer arguments: the sixth is in r9 */
int six(int a, int b, int c, int d, int e, int f)
{
	return a + b + c + d + e + f;
}

int main(void)
{
	long r = 0;
	int local = 7;

	r += add_int(1, -2);
	r += mul_long(-3, 1000000);
	r += twice_unsigned(0x40000000u);
	r += to_upper('q');
	r += strlen(pick("utrace", 1));
	r += (long)half(5.0);
	r += (long)scale(1.5f, 2, 0.25f);
	r += same_ptr(&local) != NULL;
	r += same_ptr(NULL) == NULL;
	r += sides(TRIANGLE);
	r += mixed('x', -42, 2.5, "tail", 123456789UL);
	r += sum8(1, 2, 3, 4, 5, 6, 7, -8);
	r += pick(NULL, 0)[0];                /* a NULL string */
	r += pick((const char *)16, 0)[0];    /* a pointer to nothing */
	/* called again: once known, the trampolines record these calls themselves */
	for (int i = 0; i < 3; i++) {
		r += add_int(i, -i);
		r += to_upper('a' + i);
		r += mul_long(i, 1L << 40);
		r += six(i, -1, 2, 3, 40 + i, -6 - i);
	}
	return r != 0 ? 0 : 1;
}
