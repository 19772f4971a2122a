/*
 * attach_timer: a program built WITHOUT -pg (-O2) whose signals come from outside its
 * threads: a 1 ms ITIMER_REAL interval timer sends it SIGALRM, so that two or more arrive
 * while `utrace record -p` makes one call in it. main prints "tick N" lines (each from
 * snprintf and strlen) every 100 ms, 20 of them or as many as argv[1] says, then "alarms ok"
 * if the handler ran at least 100 times.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

static volatile sig_atomic_t got;

static void handler(int sig)
{
	(void)sig;
	got++;
}

int main(int argc, char *argv[])
{
	int ticks = argc > 1 ? atoi(argv[1]) : 20;
	struct itimerval it = { { 0, 1000 }, { 0, 1000 } };
	struct sigaction sa;
	char buf[32];

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = handler;
	sa.sa_flags = SA_RESTART;
	sigaction(SIGALRM, &sa, NULL);
	setitimer(ITIMER_REAL, &it, NULL);
	for (int t = 0; t < ticks; t++) {
		struct timespec ts = { 0, 100 * 1000 * 1000 };

		snprintf(buf, sizeof(buf), "tick %d", t);
		printf("%s len %zu\n", buf, strlen(buf));
		fflush(stdout);
		while (nanosleep(&ts, &ts))
			;
	}
	printf("alarms %s\n", got >= 100 ? "ok" : "few");
	return 0;
}
