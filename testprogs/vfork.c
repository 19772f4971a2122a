/*
 * vfork: spawn() vforks; the child execs this program again as
 * `vfork child`, whose main calls in_child(); the parent, resumed when the
 * child has exec'd, waits for it and then calls parent_done().
 *
 * Until it execs, the vfork child runs on the parent's stack and memory, and
 * the parent is suspended: the runtime must not let the child disturb the
 * parent's trace. (The child calls no traced function before exec: without
 * library-call hooks, uftrace would log such calls as the parent's.)
 */
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

int in_child(int n)
{
	return n - 1;
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
