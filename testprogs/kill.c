/*
 * kill: main -> outer -> inner, then the process sends itself SIGKILL.
 *
 * No handler, destructor or exit path of the program (or of the runtime
 * preloaded into it) runs after SIGKILL: whatever the trace shows was
 * already on its way to the data directory. prepare() has returned before,
 * so its exit must be there as well.
 */
#include <signal.h>

int prepare(int n)
{
	return n * 2;
}

void inner(void)
{
	raise(SIGKILL);
}

void outer(void)
{
	inner();
}

int main(void)
{
	prepare(1);
	outer();
	return 0; /* not reached */
}
