/*
 * longjmp_loop: longjmps that abandon frames at several depths. main sets a
 * jump point; jump2() longjmps from two levels down (two -> jump2), jump3()
 * from three (three -> two3 -> jump3), then a loop longjmps from one level
 * down three times in a row, each time back to the same setjmp.
 */
#include <setjmp.h>

static jmp_buf env;

void two(int v)
{
	longjmp(env, v);
}

void jump2(int v)
{
	two(v);
}

void three(int v)
{
	longjmp(env, v);
}

void two3(int v)
{
	three(v);
}

void jump3(int v)
{
	two3(v);
}

void one(int v)
{
	longjmp(env, v);
}

int done(int v)
{
	return v;
}

int main(void)
{
	volatile int round = 0;
	int v = setjmp(env);

	round++;
	if (round == 1)
		jump2(1);
	if (round == 2)
		jump3(2);
	if (round < 6)
		one(round);
	return done(v) == 5 ? 0 : 1;
}
