/*
 * agent_phases: a program whose tracing the agent changes between phases (record_agent.rs).
 *
 * Usage: agent_phases DIR PHASES
 * For k = 1..PHASES: calls phaseK() (phase1() ... phase6(); each calls run() -> work() -> leaf()
 * a few times, phase5() first slow(), which lasts about 30 ms), then writes its pid into
 * DIR/readyK and waits until DIR/goK exists (the test changes the tracing in between) — at
 * most 30 s, then exits 1. With DIR "-" the phases run without waiting.
 * With PHASES 0, main() starts a thread that runs phase1() and ends itself with
 * pthread_exit(): the process ends when that thread returns (an agent thread must not keep
 * it alive).
 * The waiting is not instrumented (no_instrument_function) and calls libc only, so with
 * --no-libcall the trace holds exactly the phases' calls that the tracing let through.
 * Prints "done" and exits 0 at the end.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static const char *dir;

int leaf(int x)
{
	return x * 3 + 1;
}

int work(int x)
{
	return leaf(x) + leaf(x + 1);
}

__attribute__((no_instrument_function)) static void pause_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

int slow(void)
{
	pause_ms(30);
	return 1;
}

static int run(int n)
{
	int sum = 0;
	for (int i = 0; i < n; i++)
		sum += work(i);
	return sum;
}

int phase1(void) { return run(2); }
int phase2(void) { return run(2); }
int phase3(void) { return run(2); }
int phase4(void) { return run(2); }
int phase5(void) { return slow() + run(2); }
int phase6(void) { return run(2); }

/* Creates DIR/readyK, then waits for DIR/goK. */
__attribute__((no_instrument_function)) static void handshake(int k)
{
	char path[4096], tmp[4096];
	FILE *f;

	if (dir[0] == '-' && dir[1] == 0)
		return;
	/* Written then renamed: the test reads a whole pid. */
	snprintf(tmp, sizeof(tmp), "%s/ready%d.tmp", dir, k);
	snprintf(path, sizeof(path), "%s/ready%d", dir, k);
	f = fopen(tmp, "w");
	if (f == NULL || fprintf(f, "%d\n", (int)getpid()) < 0 || fclose(f) != 0) {
		perror(tmp);
		exit(1);
	}
	rename(tmp, path);
	snprintf(path, sizeof(path), "%s/go%d", dir, k);
	for (int i = 0; i < 30000; i++) {
		if (access(path, F_OK) == 0)
			return;
		pause_ms(1);
	}
	fprintf(stderr, "agent_phases: no %s after 30 s\n", path);
	exit(1);
}

void *alone(void *arg)
{
	printf("done %d\n", phase1());
	return arg;
}

int main(int argc, char **argv)
{
	int (*phases[])(void) = { phase1, phase2, phase3, phase4, phase5, phase6 };
	int n = argc > 2 ? atoi(argv[2]) : 1;
	int sum = 0;

	if (argc < 3 || n < 0 || n > 6) {
		fprintf(stderr, "usage: agent_phases DIR PHASES(0-6)\n");
		return 2;
	}
	if (n == 0) {
		pthread_t th;

		pthread_create(&th, NULL, alone, NULL);
		pthread_exit(NULL);
	}
	dir = argv[1];
	for (int k = 1; k <= n; k++) {
		sum += phases[k - 1]();
		handshake(k);
	}
	printf("done %d\n", sum);
	return 0;
}
