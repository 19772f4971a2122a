/*
 * sigaltstack: signal handlers nested two deep, the outer one running on
 * an alternate signal stack.
 *
 * main -> work -> raise(SIGUSR1): on_usr1() runs on the sigaltstack and
 * calls nested(), which raises SIGUSR2; on_usr2() runs (on the same
 * alternate stack, nested inside on_usr1) and calls leaf(). Everything
 * returns normally; afterwards work() calls leaf() on the normal stack.
 * The return slots of the handlers' frames lie in a different mapping from
 * those of main and work.
 */
#include <signal.h>
#include <stdlib.h>
#include <string.h>

static volatile sig_atomic_t hits;

int leaf(int n)
{
	return n + 1;
}

void on_usr2(int sig)
{
	hits += leaf(sig) > 0;
}

void nested(void)
{
	raise(SIGUSR2);
}

void on_usr1(int sig)
{
	(void)sig;
	nested();
	hits++;
}

int work(void)
{
	raise(SIGUSR1);
	return leaf(hits);
}

int main(void)
{
	struct sigaction sa;
	stack_t ss;

	ss.ss_sp = malloc(SIGSTKSZ * 4);
	ss.ss_size = SIGSTKSZ * 4;
	ss.ss_flags = 0;
	sigaltstack(&ss, NULL);

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_usr1;
	sa.sa_flags = SA_ONSTACK;
	sigaction(SIGUSR1, &sa, NULL);
	sa.sa_handler = on_usr2;
	sigaction(SIGUSR2, &sa, NULL);
	work();
	return hits == 2 ? 0 : 1;
}
