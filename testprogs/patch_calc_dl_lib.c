/* The library testprogs/patch_calc.c dlopens (dynamic patching of a library loaded later:
 * `-P .@libpatch_calc_dl_lib.so`). */
__attribute__((noinline)) static int dl_cube(int x)
{
	return x * x * x + 1;
}

__attribute__((noinline)) int dl_sum(int n)
{
	int s = 0;
	for (int i = 0; i < n; i++)
		s += dl_cube(i) - i;
	return s;
}
