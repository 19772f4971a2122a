/* dlopen_malloc: a library loaded at run time (found next to this executable) whose function
 * allocates through its own PLT (malloc and free with fixed sizes), for `-a` on the library
 * calls of a `dlopen`ed library. The executable allocates once itself before loading it. */
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int load(char *path, size_t size)
{
	ssize_t n = readlink("/proc/self/exe", path, size - 32);
	if (n <= 0)
		return -1;
	path[n] = '\0';
	char *slash = strrchr(path, '/');
	strcpy(slash ? slash + 1 : path, "libdlopen_malloc_lib.so");
	return 0;
}

int main(void)
{
	char path[PATH_MAX] = "";
	if (load(path, sizeof(path)) < 0)
		return 1;
	free(malloc(24));
	void *h = dlopen(path, RTLD_NOW);
	if (!h) {
		fprintf(stderr, "%s\n", dlerror());
		return 1;
	}
	int (*entry)(int) = (int (*)(int))dlsym(h, "lib_alloc");
	int r = entry ? entry(40) : 0;
	dlclose(h);
	return r == 40 ? 0 : 1;
}
