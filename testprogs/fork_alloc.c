/*
 * fork_alloc: parent and child both call malloc/realloc/free around a
 * fork; the parent waits for the child. Replayed with --no-merge, no library
 * call may show at the top level after the end of main.
 */
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

int use(char *p, int n)
{
	p[0] = (char)n;
	return p[0];
}

int work(int n)
{
	char *p = malloc(16);
	int r;

	p = realloc(p, 64);
	r = use(p, n);
	free(p);
	return r;
}

int main(void)
{
	int status = 0;
	pid_t pid;

	work(1);
	pid = fork();
	if (pid == 0)
		return work(2) == 2 ? 0 : 1;
	work(3);
	waitpid(pid, &status, 0);
	return WEXITSTATUS(status);
}
