/* Flight recorder scenarios (record --flight-recorder): many small calls in phases, each
 * phase's functions named for it, so that a test can tell which calls a dump kept.
 *
 *   flight signal  : phase_a (N calls of a_leaf), raise(SIGUSR1), phase_b (N calls of b_leaf)
 *   flight marker  : phase_a, marker(), phase_b
 *   flight slow    : phase_a, one slow() call (10 ms) among fast ones, phase_b
 *   flight crash   : phase_a, then a NULL write in crash_here()
 *   flight exit    : phase_a, phase_b, return
 *   flight threads : two threads call t_leaf() 10 N times each while main raises SIGUSR1 every
 *                    5 ms (record with --signal USR1@dump: dumps while the threads write)
 *
 * N is argv[2] (default 200000). Each leaf call is one ENTRY and one EXIT record (32 bytes):
 * 200000 calls are 6.4 MB of records, more than the small flight sizes the tests use.
 */
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static volatile long sink;

__attribute__((noinline)) void a_leaf(long i) { sink += i; }
__attribute__((noinline)) void b_leaf(long i) { sink -= i; }
__attribute__((noinline)) void a_last(void) { sink++; }
__attribute__((noinline)) void b_last(void) { sink--; }

__attribute__((noinline)) void phase_a(long n)
{
	for (long i = 0; i < n; i++)
		a_leaf(i);
	a_last();
}

__attribute__((noinline)) void phase_b(long n)
{
	for (long i = 0; i < n; i++)
		b_leaf(i);
	b_last();
}

__attribute__((noinline)) void marker(void) { sink += 7; }

__attribute__((noinline)) void fast(void) { sink += 3; }

__attribute__((noinline)) void slow(void)
{
	struct timespec ts = { 0, 10 * 1000 * 1000 };
	nanosleep(&ts, NULL);
}

__attribute__((noinline)) void crash_here(int *p) { *p = 42; }

__attribute__((noinline)) void t_leaf(long i) { sink ^= i; }

static int running;

static void *worker(void *arg)
{
	long n = (long)arg;

	for (long i = 0; i < n; i++)
		t_leaf(i);
	__atomic_sub_fetch(&running, 1, __ATOMIC_SEQ_CST);
	return NULL;
}

/* Dumps while two threads write: at most 40, 5 ms apart. */
__attribute__((noinline)) void threads(long n)
{
	struct timespec ts = { 0, 5 * 1000 * 1000 };
	pthread_t t[2];

	running = 2;
	for (int k = 0; k < 2; k++)
		pthread_create(&t[k], NULL, worker, (void *)(n * 10));
	for (int d = 0; d < 40 && __atomic_load_n(&running, __ATOMIC_SEQ_CST) > 0; d++) {
		raise(SIGUSR1);
		nanosleep(&ts, NULL);
	}
	for (int k = 0; k < 2; k++)
		pthread_join(t[k], NULL);
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "exit";
	long n = argc > 2 ? atol(argv[2]) : 200000;

	if (!strcmp(mode, "threads")) {
		threads(n);
		return 0;
	}
	phase_a(n);
	if (!strcmp(mode, "signal")) {
		raise(SIGUSR1);
	} else if (!strcmp(mode, "marker")) {
		marker();
	} else if (!strcmp(mode, "slow")) {
		for (int i = 0; i < 10; i++)
			fast();
		slow();
		fast();
	} else if (!strcmp(mode, "crash")) {
		crash_here(NULL);
	}
	phase_b(n);
	return 0;
}
