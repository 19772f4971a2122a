/*
 * thread_kill: a worker thread sends SIGKILL to itself while main is
 * blocked inside a traced function (main -> wait_for_worker).
 *
 * SIGKILL ends the whole process, whichever thread it is aimed at. The
 * worker calls before_kill() (finished), waits until main is inside
 * wait_for_worker() (which never returns: pthread_join waits for a thread
 * that dies with the process), then calls kill_self() (unfinished).
 */
#include <pthread.h>
#include <signal.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static int waiting;

int before_kill(int n)
{
	return n + 1;
}

void kill_self(void)
{
	pthread_kill(pthread_self(), SIGKILL);
}

void *worker(void *arg)
{
	before_kill((int)(long)arg);
	pthread_mutex_lock(&lock);
	while (!waiting)
		pthread_cond_wait(&cond, &lock);
	pthread_mutex_unlock(&lock);
	kill_self();
	return NULL;
}

void wait_for_worker(pthread_t th)
{
	pthread_mutex_lock(&lock);
	waiting = 1;
	pthread_cond_signal(&cond);
	pthread_mutex_unlock(&lock);
	pthread_join(th, NULL);
}

int main(void)
{
	pthread_t th;

	pthread_create(&th, NULL, worker, NULL);
	wait_for_worker(th);
	return 0; /* not reached */
}
