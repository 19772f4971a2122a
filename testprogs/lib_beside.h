/* For the test programs that load a library built beside them (`NAME_lib.c`, built as
 * `libNAME_lib.so` next to the program): included, not a program of its own. */
#ifndef UTRACE_TESTPROGS_LIB_BESIDE_H
#define UTRACE_TESTPROGS_LIB_BESIDE_H

#include <string.h>
#include <unistd.h>

/* The path of `lib` in this executable's directory into `path` (`size` bytes, room for a
 * library name of up to 31 bytes); 0, or -1 when the executable's path is unknown. */
static int load(char *path, size_t size, const char *lib)
{
	ssize_t n = readlink("/proc/self/exe", path, size - 32);
	if (n <= 0 || strlen(lib) > 31)
		return -1;
	path[n] = '\0';
	char *slash = strrchr(path, '/');
	strcpy(slash ? slash + 1 : path, lib);
	return 0;
}

#endif
