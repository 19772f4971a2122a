/* The library testprogs/patch_calc.c is linked with (dynamic patching of a library:
 * `-P .@libpatch_calc_lib.so`). */
__attribute__((noinline)) static int lib_sq(int x)
{
	return x * x + 3;
}

__attribute__((noinline)) int lib_sum(int n)
{
	int s = 0;
	for (int i = 0; i < n; i++)
		s += lib_sq(i) * (i + 1);
	return s;
}
