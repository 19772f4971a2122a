/* aio_local: libaio reached only through a plugin loaded RTLD_LOCAL (libaio_local_lib.so,
 * linked with -laio), so libaio is never in the program's global scope. The plugin's calls
 * of io_submit, io_getevents and io_pgetevents bind to the first definition in the global
 * scope: libaio's own untraced, libmcount's interposed ones when traced, which must then
 * reach the kernel by themselves. The output (each call's result and what it read) must be
 * the same either way. Argument: a scratch file to read. */
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "lib_beside.h"

int main(int argc, char **argv)
{
	char path[PATH_MAX];
	if (argc < 2 || load(path, sizeof path, "libaio_local_lib.so") < 0)
		return 2;
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		printf("dlopen: %s\n", dlerror());
		return 1;
	}
	int (*run)(const char *) = (int (*)(const char *))dlsym(h, "aio_local_run");
	int ret = run ? run(argv[1]) : -1;
	printf("run: %d\n", ret);
	return ret == 0 ? 0 : 1;
}
