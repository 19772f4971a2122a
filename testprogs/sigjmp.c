/*
 * sigjmp: a signal handler that does not return. main -> work -> raise()
 * runs on_signal(), which calls escape(), which siglongjmps back into main:
 * work, on_signal and escape never return. main then calls after() and runs
 * a second, ordinary round (work_again -> leaf) to show that tracing is
 * still sound after the jump.
 */
#include <setjmp.h>
#include <signal.h>
#include <string.h>

static sigjmp_buf env;

int leaf(int n)
{
	return n + 1;
}

void escape(int sig)
{
	siglongjmp(env, sig);
}

void on_signal(int sig)
{
	escape(sig);
}

void work(void)
{
	raise(SIGUSR1);
}

int after(int n)
{
	return leaf(n) * 2;
}

int work_again(int n)
{
	return leaf(n) + leaf(n + 1);
}

int main(void)
{
	struct sigaction sa;
	int sig;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigaction(SIGUSR1, &sa, NULL);
	sig = sigsetjmp(env, 1);
	if (sig == 0)
		work();
	after(sig);
	return work_again(sig) > 0 ? 0 : 1;
}
