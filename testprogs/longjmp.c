/*
 * longjmp: main sets a jump point, calls outer() -> middle() -> thrower(),
 * and thrower() longjmps straight back into main, skipping the exits of the
 * three traced frames in between. main then calls after_jump().
 */
#include <setjmp.h>

static jmp_buf env;

void thrower(int depth)
{
	longjmp(env, depth);
}

void middle(int depth)
{
	thrower(depth + 1);
}

void outer(void)
{
	middle(1);
}

int after_jump(int value)
{
	return value * 10;
}

int main(void)
{
	int value = setjmp(env);

	if (value == 0)
		outer();
	return after_jump(value) == 20 ? 0 : 1;
}
