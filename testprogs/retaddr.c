/*
 * retaddr: a program that reads its own return addresses, as assertion helpers, profilers
 * and "who called me" checks do, and uses what it reads.
 *
 * - level3() reads __builtin_return_address(0) and (1), names them with a table of its own
 *   functions (the nearest start below the address, as a symbolizer would) or, outside the
 *   executable, dladdr()'s library and symbol, and checks that its caller is level2();
 * - walk() follows the frame-pointer chain (rbp -> [rbp], return address [rbp+8]) from its
 *   own frame up to main's frame (its address saved by main), naming each return address,
 *   and counts the frames;
 * - rec(n) recurses n times and, at the bottom, counts the frames of the chain that return
 *   into rec().
 *
 * Untraced, every return address lies in the caller. Under a tracer that hijacks return
 * addresses (-pg, -mfentry), the traced frames return into its exit trampoline instead; the
 * saved frame pointers are left alone, so the walks find the same number of frames and end
 * at main's frame either way. The exit status depends only on that (0: main's frame found).
 * The printed lines never show a raw address.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

static void *main_frame;

int level1(void);
int level2(void);
int level3(void);
int walk(void);
int rec(int n);
int main(void);

static const struct {
	const char *name;
	void *start;
} known[] = {
	{ "level1", (void *)level1 }, { "level2", (void *)level2 },
	{ "level3", (void *)level3 }, { "walk", (void *)walk },
	{ "rec", (void *)rec },	      { "main", (void *)main },
};

/* The executable's file name, as dladdr() gives it. */
static const char *exe_name(void)
{
	static const char *exe;
	Dl_info self;

	if (!exe && dladdr((void *)exe_name, &self))
		exe = self.dli_fname;
	return exe;
}

/* What an address is: one of `known` ("main+"), or "lib:FILE:SYMBOL" outside the executable. */
static const char *name_of(void *addr, char *buf, size_t size)
{
	Dl_info info;
	const char *best = NULL;
	char *best_start = NULL;

	const char *file;

	if (!addr)
		return "null";
	if (!dladdr(addr, &info))
		return "unknown";
	/* The same library calls whatever the address is (their trace is compared). */
	file = strrchr(info.dli_fname, '/');
	if (strcmp(info.dli_fname, exe_name()) != 0) {
		snprintf(buf, size, "lib:%s:%s", file ? file + 1 : info.dli_fname,
			 info.dli_sname ? info.dli_sname : "?");
		return buf;
	}
	for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++) {
		char *start = known[i].start;

		if (start < (char *)addr && (!best_start || start > best_start)) {
			best = known[i].name;
			best_start = start;
		}
	}
	snprintf(buf, size, "%s+", best ? best : "exe");
	return buf;
}

/* Whether `addr` is a return address inside `fn` (at most 4 KiB in). */
static int returns_into(void *addr, void *fn)
{
	char buf[256];
	const char *name = name_of(addr, buf, sizeof(buf));

	for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++) {
		if (known[i].start == fn) {
			size_t len = strlen(known[i].name);

			return strncmp(name, known[i].name, len) == 0 && name[len] == '+';
		}
	}
	return 0;
}

/* Follows the frame pointers up from the caller's frame; returns the frames to main's or -1. */
static int frames_to_main(void **fp, const char *who, int print)
{
	char buf[256];
	int n = 0;

	while (fp != main_frame) {
		void **next = fp[0];

		if (print)
			printf("%s: frame %d returns into %s\n", who, n,
			       name_of(fp[1], buf, sizeof(buf)));
		/* Frames grow down: a caller's frame is above, and not far. */
		if (next <= fp || (char *)next - (char *)fp > (1 << 20) || n == 64)
			return -1;
		fp = next;
		n++;
	}
	return n;
}

int walk(void)
{
	int n = frames_to_main(__builtin_frame_address(0), "walk", 1);

	printf("walk: %d frames to main\n", n);
	return n;
}

int level3(void)
{
	char a[256], b[256];
	void *caller = __builtin_return_address(0);
	void *callers_caller = __builtin_return_address(1);

	printf("level3: returns into %s, then %s\n", name_of(caller, a, sizeof(a)),
	       name_of(callers_caller, b, sizeof(b)));
	printf("level3: called from level2: %s\n", returns_into(caller, (void *)level2) ? "yes" : "no");
	return walk();
}

int level2(void)
{
	return level3();
}

int level1(void)
{
	return level2();
}

int rec(int n)
{
	void **fp = __builtin_frame_address(0);
	int into_rec = 0, frames = 0;

	if (n > 0)
		return rec(n - 1);
	while (fp != main_frame && frames < 64) {
		into_rec += returns_into(fp[1], (void *)rec);
		fp = fp[0];
		frames++;
	}
	printf("rec: %d frames to main, %d return into rec\n", frames, into_rec);
	return fp == main_frame ? frames : -1;
}

int main(void)
{
	main_frame = __builtin_frame_address(0);
	if (level1() != 4)
		return 1;
	if (rec(5) != 6)
		return 2;
	return 0;
}
