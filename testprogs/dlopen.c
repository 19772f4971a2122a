/* dlopen: a -pg library loaded at run time (found next to this executable), whose constructor
 * and functions are traced; spec/runtime.md §6.10, data-format.md §4.1 (DLOP lines). */
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "lib_beside.h"

static int twice(int x) { return 2 * x; }

int main(void)
{
	char path[PATH_MAX];
	if (load(path, sizeof(path), "libdlopen_lib.so") < 0)
		return 1;
	void *h = dlopen(path, RTLD_NOW);
	if (!h) {
		fprintf(stderr, "%s\n", dlerror());
		return 1;
	}
	int (*entry)(int) = (int (*)(int))dlsym(h, "lib_entry");
	int r = entry ? entry(twice(3)) : 0;
	dlclose(h);
	return r == 14 ? 0 : 1;
}
