/*
 * exec: `exec` calls before_exec() and then execs itself as `exec child`;
 * the new image calls after_exec() and returns.
 *
 * The exec'd image is a new session in the same task: its trace starts again
 * at depth 0 while the old image's execl() never returns.
 */
#include <string.h>
#include <unistd.h>

int before_exec(void)
{
	return 1;
}

int after_exec(int n)
{
	return n * 2;
}

int main(int argc, char *argv[])
{
	if (argc > 1 && strcmp(argv[1], "child") == 0)
		return after_exec(argc) == 4 ? 0 : 1;

	before_exec();
	execl(argv[0], argv[0], "child", (char *)NULL);
	return 1; /* only reached when exec fails */
}
