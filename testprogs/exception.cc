/*
 * exception: C++ exceptions through several traced frames, with traced
 * code running during the unwinding.
 *
 * main -> catcher -> middle -> thrower throws; middle holds a Guard whose
 * (traced) destructor runs from middle's cleanup landing pad while the
 * exception passes, and catcher catches, calls handled() and rethrows to
 * main, which catches again and calls done().
 */
#include <stdexcept>

int handled(int n)
{
	return n + 1;
}

int done(int n)
{
	return n * 2;
}

struct Guard {
	int id;
	explicit Guard(int i) : id(i) {}
	~Guard() { handled(id); }
};

int thrower(int n)
{
	if (n > 0)
		throw std::runtime_error("thrown");
	return n;
}

int middle(int n)
{
	Guard guard(n);
	return thrower(n) + 1;
}

int catcher(int n)
{
	try {
		return middle(n);
	} catch (const std::runtime_error &) {
		handled(n);
		throw;
	}
}

int main()
{
	int r = 0;

	try {
		r = catcher(1);
	} catch (const std::exception &) {
		r = done(1);
	}
	return r == 2 ? 0 : 1;
}
