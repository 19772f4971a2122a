/*
 * spawn: posix_spawn()s itself twice as `spawn child`, waiting for each; the children
 * (traced programs of their own, as uftrace traces them) call a() -> b() -> c() -> getpid().
 */
#include <spawn.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

int c(void)
{
	return getpid();
}

int b(void)
{
	return c();
}

int a(void)
{
	return b();
}

int main(int argc, char *argv[])
{
	if (argc > 1 && strcmp(argv[1], "child") == 0)
		return a() > 0 ? 0 : 1;
	for (int i = 0; i < 2; i++) {
		pid_t pid;
		char *args[] = { argv[0], "child", NULL };
		int status = 1;

		if (posix_spawn(&pid, argv[0], NULL, NULL, args, environ) != 0)
			return 1;
		if (waitpid(pid, &status, 0) != pid || status != 0)
			return 1;
	}
	return 0;
}
