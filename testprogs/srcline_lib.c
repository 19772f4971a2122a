/* The library srcline.c links with: two traced functions with source locations. */

static int lib_helper(int x)
{
	return x * 3;
}

int lib_scale(int x)
{
	return lib_helper(x) + 1;
}
