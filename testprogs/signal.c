/*
 * signal: a traced signal handler runs in the middle of the call stack.
 *
 * main installs on_signal() for SIGUSR1 and calls work(), which calls
 * raise(); the handler runs synchronously inside raise() and makes nested
 * calls (handler_helper() -> leaf()). Afterwards work() calls leaf() again.
 */
#include <signal.h>
#include <string.h>

static volatile sig_atomic_t hits;

int leaf(int n)
{
	return n + 1;
}

void handler_helper(int sig)
{
	hits += leaf(sig) > 0;
}

void on_signal(int sig)
{
	handler_helper(sig);
}

int work(void)
{
	raise(SIGUSR1);
	return leaf(hits);
}

int main(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigaction(SIGUSR1, &sa, NULL);
	work();
	return hits == 1 ? 0 : 1;
}
