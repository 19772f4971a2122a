/* The library dlopen.c loads: a traced constructor and two traced functions. */
static int ready;

static int lib_helper(int x) { return x + ready; }

__attribute__((constructor)) static void lib_init(void) { ready = 1; }

int lib_entry(int x) { return 2 * lib_helper(x) - 12; }
