/*
 * attach_throw: a long-running C++ program built WITHOUT -pg (-O2), for `utrace record -p`
 * while exceptions are thrown and caught. Every 100 ms it throws and catches through several
 * frames with destructors (cleanup landing pads, `_Unwind_Resume`), rethrows, and makes a
 * library call throw (`std::vector::at` out of range: libstdc++'s
 * `std::__throw_out_of_range_fmt`, reached through the PLT), and counts the frames that
 * `backtrace` sees. It prints "tick N sum S": S depends
 * on N only, so a run that was attached to and detached from prints the same lines as an
 * untraced one. It prints "ready" first, runs TICKS ticks (argv[1], default 40), exits 0.
 */
#include <execinfo.h>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <stdexcept>
#include <string>
#include <vector>

static volatile int salt;

struct Guard {
	int *count;
	~Guard() { ++*count; }
};

__attribute__((noinline)) static int thrower(int n, int *dtors)
{
	Guard g{ dtors };
	if (n % 3 == 0)
		throw std::runtime_error("three");
	return n + salt;
}

/* The number of frames a stack walk sees (it ends early at a frame it cannot unwind). */
__attribute__((noinline)) static int frames(void)
{
	void *buf[64];
	return backtrace(buf, 64);
}

__attribute__((noinline)) static int middle(int n, int *dtors)
{
	Guard g{ dtors };
	*dtors += frames();
	std::string s(40, 'a' + n % 26);
	return thrower(n, dtors) + (int)s.size();
}

__attribute__((noinline)) static int rethrower(int n, int *dtors)
{
	try {
		return middle(n, dtors);
	} catch (const std::runtime_error &) {
		++*dtors;
		throw;
	}
}

__attribute__((noinline)) static int lib_throw(int n)
{
	std::vector<int> v(4, n);
	return v.at(n % 6); /* out of range for 4 and 5 */
}

__attribute__((noinline)) static unsigned long work(int tick)
{
	unsigned long sum = 0;
	int dtors = 0;

	for (int i = 0; i < 12; i++) {
		int n = tick * 12 + i;
		try {
			sum = sum * 31 + rethrower(n, &dtors);
		} catch (const std::exception &e) {
			sum = sum * 31 + 7;
		}
		try {
			sum = sum * 17 + lib_throw(n);
		} catch (const std::out_of_range &) {
			sum = sum * 17 + 3;
		}
	}
	return sum * 13 + dtors;
}

int main(int argc, char **argv)
{
	int ticks = argc > 1 ? atoi(argv[1]) : 40;
	struct timespec ts = { 0, 100 * 1000 * 1000 };

	printf("ready\n");
	fflush(stdout);
	for (int t = 0; t < ticks; t++) {
		printf("tick %d sum %lu\n", t, work(t));
		fflush(stdout);
		nanosleep(&ts, NULL);
	}
	return 0;
}
