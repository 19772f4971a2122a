/*
 * backtrace: a program that walks its own stack, as logging and crash handlers do, with
 * glibc's backtrace() and with libgcc's _Unwind_Backtrace() directly, from three traced
 * frames down. It prints the number of frames each walk found and, for each frame, whether
 * it lies in the executable or in a library: the same output traced or not.
 *
 * Under a tracer the return addresses of traced functions point into its exit trampoline;
 * a walk that saw them would stop early or name frames in the tracer's library.
 *
 * `backtrace glibc-only`: only glibc's walk, printing just whether it found the frames
 * (the call graph is then the same under any tracer that keeps the program working).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <execinfo.h>
#include <stdio.h>
#include <string.h>
#include <unwind.h>

static const char *where(void *addr)
{
	Dl_info info;
	static const char *exe;

	if (!exe) {
		Dl_info self;
		if (dladdr((void *)where, &self))
			exe = self.dli_fname;
	}
	if (!dladdr(addr, &info))
		return "?";
	return exe && strcmp(info.dli_fname, exe) == 0 ? "exe" : "lib";
}

static void show(const char *walker, void **frames, int n)
{
	printf("%s: %d frames:", walker, n);
	for (int i = 0; i < n; i++)
		printf(" %s", where(frames[i]));
	printf("\n");
}

struct walk {
	void *frames[64];
	int n;
};

static _Unwind_Reason_Code step(struct _Unwind_Context *ctx, void *arg)
{
	struct walk *w = arg;

	if (w->n == 64)
		return _URC_END_OF_STACK;
	w->frames[w->n++] = (void *)_Unwind_GetIP(ctx);
	return _URC_NO_REASON;
}

static int quiet;

int walk_glibc(void)
{
	void *frames[64];
	int n = backtrace(frames, 64);

	if (quiet)
		printf("backtrace: %s\n", n >= 5 ? "ok" : "too short");
	else
		show("backtrace", frames, n);
	return n;
}

int walk_libgcc(void)
{
	struct walk w = { .n = 0 };

	_Unwind_Backtrace(step, &w);
	show("_Unwind_Backtrace", w.frames, w.n);
	return w.n;
}

int inner(void)
{
	return walk_glibc() + (quiet ? 0 : walk_libgcc());
}

int middle(void)
{
	return inner() + 1;
}

int outer(void)
{
	return middle() + 1;
}

int main(int argc, char *argv[])
{
	quiet = argc > 1 && strcmp(argv[1], "glibc-only") == 0;
	/* Twice: the first backtrace() loads libgcc_s, the second runs on a warm path. */
	outer();
	return outer() > 5 ? 0 : 1;
}
