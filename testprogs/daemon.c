/*
 * daemon: main calls before() and daemon(); only the daemonized grandchild
 * goes on (the parent and the intermediate child exit inside daemon()), calls
 * after() and returns.
 */
#include <stdlib.h>
#include <unistd.h>

int before(int n)
{
	return n + 1;
}

int after(int n)
{
	return n * 2;
}

int main(void)
{
	before(1);
	if (daemon(1, 1) < 0)
		return 1;
	return after(1) == 2 ? 0 : 1;
}
