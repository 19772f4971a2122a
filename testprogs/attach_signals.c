/*
 * attach_signals: a program built WITHOUT -pg (-O2) that keeps receiving signals
 * while `utrace record -p` stops and resumes it: a thread sends itself's process
 * 4000 real-time signals (queued, never merged by the kernel), one every 0.5 ms,
 * and the handler counts them. main prints "tick N" lines like attach_work's,
 * then "signals 4000": a signal that arrived while the process was stopped and
 * was not given back would show in the count.
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define SIGNALS 4000

static volatile sig_atomic_t got;
static volatile int sent_all;

static void handler(int sig)
{
	(void)sig;
	got++;
}

static void *sender(void *arg)
{
	struct timespec ts = { 0, 500 * 1000 };

	(void)arg;
	for (int i = 0; i < SIGNALS; i++) {
		kill(getpid(), SIGRTMIN);
		nanosleep(&ts, NULL);
	}
	sent_all = 1;
	return NULL;
}

int main(void)
{
	struct sigaction sa;
	pthread_t th;
	char buf[64];

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = handler;
	sa.sa_flags = SA_RESTART;
	sigaction(SIGRTMIN, &sa, NULL);
	pthread_create(&th, NULL, sender, NULL);
	for (int t = 0; !sent_all || t < 5; t++) {
		struct timespec ts = { 0, 100 * 1000 * 1000 };

		snprintf(buf, sizeof(buf), "tick %d len", t);
		printf("tick %d sum %zu\n", t, strlen(buf));
		fflush(stdout);
		while (nanosleep(&ts, &ts) != 0)
			;
	}
	pthread_join(th, NULL);
	usleep(100 * 1000);
	printf("signals %d\n", (int)got);
	return 0;
}
