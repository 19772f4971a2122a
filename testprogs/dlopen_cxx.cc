/*
 * dlopen_cxx: a C++ library loaded at run time (libdlopen_cxx_lib.so, found next to this
 * executable) whose functions are called through dlsym'd pointers: each must be named from
 * the library's own symbols at its own load address (an extern "C" function, a function in a
 * namespace, a member function called from them).
 */
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int main()
{
	char path[PATH_MAX] = "";
	ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - 32);
	if (n <= 0)
		return 1;
	path[n] = '\0';
	char *slash = strrchr(path, '/');
	strcpy(slash ? slash + 1 : path, "libdlopen_cxx_lib.so");
	void *h = dlopen(path, RTLD_NOW);
	if (!h) {
		fprintf(stderr, "%s\n", dlerror());
		return 1;
	}
	int (*plain)(int) = (int (*)(int))dlsym(h, "lib_b");
	int (*scoped)(int) = (int (*)(int))dlsym(h, "_ZN2ns5lib_aEi");
	int r = plain && scoped ? plain(1) + scoped(2) : 0;
	dlclose(h);
	return r == 6 ? 0 : 1;
}
