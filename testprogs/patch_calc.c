/* Dynamic patching (`-P`/`-U`, tests/integration/record_patch.rs): built without -pg at -O2
 * (full dynamic patching), with -fpatchable-function-entry=5[,0], or with -pg -mfentry
 * -mnop-mcount. It calls functions of a linked library (patch_calc_lib.c) and of one it
 * dlopens (argv[1], patch_calc_dl_lib.c), and prints checksums of integer and floating-point
 * work: at -O2 callers keep values in call-clobbered registers that a callee does not touch
 * (IPA-RA), so a hook that clobbers one changes the checksums. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

int lib_sum(int n);

/* Too small to patch (fewer than 6 bytes): counted as skipped. */
__attribute__((noinline)) int tiny(int x)
{
	return x + 1;
}

__attribute__((noinline)) static int mix(int a, int b)
{
	return (a * 31) ^ (b + 7);
}

__attribute__((noinline)) static double scale(double x, int k)
{
	return x * k - x / 4;
}

/* `t` stays in a scratch register across the call to mix. */
__attribute__((noinline)) static int step(int acc, int i)
{
	int t = i * 7 + acc;
	int r = mix(acc, i);
	return r + t;
}

/* `t` stays in an xmm register across the call to scale. */
__attribute__((noinline)) static double fstep(double acc, double y)
{
	double t = y * y;
	double r = scale(acc, 3);
	return r / 2 + t;
}

__attribute__((noinline)) int work(int n)
{
	int acc = 1;
	for (int i = 0; i < n; i++)
		acc = step(acc, i);
	return acc;
}

__attribute__((noinline)) double fwork(int n)
{
	double acc = 0.5;
	for (int i = 0; i < n; i++)
		acc = fstep(acc, i + 0.5);
	return acc;
}

int main(int argc, char **argv)
{
	int n = argc > 2 ? atoi(argv[2]) : 3;
	long sum = work(n) + lib_sum(n) + tiny(n);
	double f = fwork(n);
	if (argc > 1) {
		void *h = dlopen(argv[1], RTLD_NOW);
		if (!h) {
			fprintf(stderr, "%s\n", dlerror());
			return 1;
		}
		int (*dl_sum)(int) = (int (*)(int))dlsym(h, "dl_sum");
		sum += dl_sum(n);
	}
	printf("checksum %ld %.6f\n", sum, f);
	return 0;
}
