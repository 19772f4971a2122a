/* dlopen_malloc: a library loaded at run time (found next to this executable) whose function
 * allocates through its own PLT (malloc and free with fixed sizes), for `-a` on the library
 * calls of a `dlopen`ed library. The executable allocates once itself before loading it.
 * With `bare`, the library is loaded by its name alone (found through LD_LIBRARY_PATH); with
 * `big FILE`, FILE is first made a sparse 2 GiB file and mapped, and the program prints its
 * peak resident size (VmHWM, kB) at the end. */
#include <dlfcn.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "lib_beside.h"

static void *map_big(const char *file)
{
	size_t len = (size_t)2 << 30;
	int fd = open(file, O_RDWR | O_CREAT | O_TRUNC, 0600);
	if (fd < 0 || ftruncate(fd, (off_t)len) < 0)
		return NULL;
	void *p = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);
	close(fd);
	return p == MAP_FAILED ? NULL : p;
}

static void print_peak(void)
{
	char line[256];
	FILE *f = fopen("/proc/self/status", "r");
	while (f && fgets(line, sizeof(line), f))
		if (strncmp(line, "VmHWM:", 6) == 0)
			printf("peak %ld\n", strtol(line + 6, NULL, 10));
	if (f)
		fclose(f);
}

int main(int argc, char **argv)
{
	char path[PATH_MAX] = "";
	int bare = argc > 1 && strcmp(argv[1], "bare") == 0;
	int big = argc > 2 && strcmp(argv[1], "big") == 0;
	if (load(path, sizeof(path), "libdlopen_malloc_lib.so") < 0)
		return 1;
	if (big && !map_big(argv[2]))
		return 1;
	free(malloc(24));
	void *h = dlopen(bare ? "libdlopen_malloc_lib.so" : path, RTLD_NOW);
	if (!h) {
		fprintf(stderr, "%s\n", dlerror());
		return 1;
	}
	int (*entry)(int) = (int (*)(int))dlsym(h, "lib_alloc");
	int r = entry ? entry(40) : 0;
	dlclose(h);
	if (big)
		print_peak();
	return r == 40 ? 0 : 1;
}
