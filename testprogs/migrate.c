/*
 * migrate: the task moves itself between CPUs 0 and 1 (sched_setaffinity), calling leaf()
 * on each, so that `-W cpu` notes a change at the exit of sched_setaffinity() (where the
 * move happened) and none elsewhere. On a machine with one CPU nothing moves.
 */
#define _GNU_SOURCE
#include <sched.h>

int leaf(int x)
{
	return x + 1;
}

void move_to(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	sched_setaffinity(0, sizeof(set), &set);
}

int main(void)
{
	move_to(0);
	leaf(1);
	move_to(1);
	leaf(2);
	move_to(0);
	leaf(3);
	return 0;
}
