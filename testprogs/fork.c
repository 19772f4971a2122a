/*
 * fork: the child runs child_work() -> leaf() and exits; the parent waits
 * for it, then calls leaf() itself.
 *
 * The child is a new task that inherits its parent's call stack: its first
 * record is the return from fork() at main's depth + 1.
 */
#include <sys/wait.h>
#include <unistd.h>

int leaf(void)
{
	return getpid() > 0;
}

int child_work(void)
{
	return leaf() + 1;
}

int main(void)
{
	int status = 0;
	pid_t pid = fork();

	if (pid == 0) {
		child_work();
		return 0;
	}
	waitpid(pid, &status, 0);
	leaf();
	return 0;
}
