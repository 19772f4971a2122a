/* The library dlopen_malloc.c loads: lib_alloc calls malloc and free through the library's
 * own PLT (traced with --nest-libcall), with sizes derived from its argument. */
#include <stdlib.h>
#include <string.h>

int lib_alloc(int n)
{
	char *p = malloc((size_t)n);
	if (!p)
		return -1;
	memset(p, 1, (size_t)n);
	int sum = 0;
	for (int i = 0; i < n; i++)
		sum += p[i];
	free(p);
	char *q = malloc((size_t)n * 3);
	free(q);
	return sum;
}
