/*
 * pid: prints the process's pid (for --keep-pid, which must leave it the pid of the command
 * the shell started), then returns the exit status given as its argument (0 without one)
 * from main, through exit().
 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int status_of(const char *arg)
{
	return arg ? atoi(arg) : 0;
}

void show_pid(void)
{
	printf("pid=%d\n", (int)getpid());
	fflush(stdout);
}

int main(int argc, char **argv)
{
	show_pid();
	return status_of(argc > 1 ? argv[1] : NULL);
}
