/*
 * sdt: user SDT probes (<sys/sdt.h>, -E PROVIDER:NAME) and a program that handles SIGTRAP
 * itself.
 *
 * work() passes two probes, myapp:work_start (with an argument) and myapp:work_end; a third,
 * myapp:guarded, is guarded by its semaphore: that code runs only while a tracer enables it. main
 * installs its own SIGTRAP handler, then traps twice itself (raise() and an int3), checks
 * that the handler it reads back is its own, and traps once more after installing it again
 * with signal(): a tracer that patches the probe sites to int3 must leave all of this as it
 * is. The output says what the program saw.
 */
#define _SDT_HAS_SEMAPHORES 1
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/sdt.h>

/* With _SDT_HAS_SEMAPHORES every probe names its semaphore (a tracer counts itself in). */
#define SEMAPHORE(name) \
	__extension__ unsigned short myapp_##name##_semaphore __attribute__((section(".probes")))
SEMAPHORE(work_start);
SEMAPHORE(work_end);
SEMAPHORE(guarded);

static volatile sig_atomic_t traps;
static int guarded;

static void on_trap(int sig)
{
	traps += sig == SIGTRAP;
}

int work(int n)
{
	DTRACE_PROBE1(myapp, work_start, n);
	int r = n * 2;
	if (__builtin_expect(myapp_guarded_semaphore, 0)) {
		guarded++;
		DTRACE_PROBE(myapp, guarded);
	}
	DTRACE_PROBE(myapp, work_end);
	return r;
}

int main(void)
{
	struct sigaction sa, old;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_trap;
	sigaction(SIGTRAP, &sa, NULL);
	for (int i = 0; i < 2; i++)
		work(i);
	raise(SIGTRAP);
	__asm__ volatile("int3");
	sigaction(SIGTRAP, NULL, &old);
	/* signal() answers with the handler sigaction() installed, and installs its own. */
	void (*prev)(int) = signal(SIGTRAP, on_trap);
	raise(SIGTRAP);
	printf("traps=%d own_handler=%d guarded=%d\n", (int)traps,
	       old.sa_handler == on_trap && prev == on_trap, guarded);
	return 0;
}
