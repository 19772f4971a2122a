/*
 * vfork_work: the vfork child does some work before it execs (a traced
 * function and a library call, on the parent's stack and memory). The exec'd
 * image (`vfork_work child`) calls in_child(). The parent, resumed, waits and
 * calls parent_done(): its trace must be intact. (No child here _exit()s
 * without exec: uftrace 0.13 loses the pending `_exit() {` entry there.)
 */
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

int in_child(int n)
{
	return n - 1;
}

int prepare(int n)
{
	return n + 1;
}

int parent_done(int status)
{
	return status;
}

int spawn(char *self)
{
	int status = 0;
	pid_t pid = vfork();

	if (pid == 0) {
		prepare(1);
		getpid();
		execl(self, self, "child", (char *)NULL);
		_exit(127);
	}
	waitpid(pid, &status, 0);
	return status;
}

int main(int argc, char *argv[])
{
	if (argc > 1 && strcmp(argv[1], "child") == 0)
		return in_child(1);
	return parent_done(spawn(argv[0]));
}
