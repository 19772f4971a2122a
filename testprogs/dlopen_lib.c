/* The library dlopen.c loads: a traced constructor and two traced functions, one of which
 * calls into libc through the library's own PLT (shown with --nest-libcall). */
#include <stdio.h>
#include <stdlib.h>

static int ready;

static int lib_helper(int x) { return x + ready; }

__attribute__((constructor)) static void lib_init(void) { ready = 1; }

int lib_entry(int x)
{
	char buf[16];
	snprintf(buf, sizeof(buf), "%d", x);
	return 2 * lib_helper(atoi(buf));
}
