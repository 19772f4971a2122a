// deep_throw: C++ exceptions thrown through many traced frames.
//
// descend(n) recurses 200 levels, each frame owning a Guard whose destructor (a traced call)
// runs while the exception passes; at the bottom it throws. At levels 150, 100 and 50 a
// catch (...) counts the exception and rethrows it (`throw;`), and at level 120 a handler
// catches it and throws a new one (a Wrapped holding the first's value). main catches it
// at the top, three times in a row. Output: what was caught, the destructor and rethrow
// counts; the same traced or not.
#include <cstdio>
#include <stdexcept>

static int destroyed;
static int rethrown;

struct Wrapped {
	int value;
};

int note(int n)
{
	return n;
}

struct Guard {
	int level;
	~Guard();
};

Guard::~Guard()
{
	destroyed += note(1);
}

int descend(int n)
{
	Guard g{ n };

	if (n == 0)
		throw std::runtime_error("bottom");
	if (n == 50 || n == 100 || n == 150) {
		try {
			return descend(n - 1) + 1;
		} catch (...) {
			rethrown++;
			throw;
		}
	}
	if (n == 120) {
		try {
			return descend(n - 1) + 1;
		} catch (const std::runtime_error &e) {
			throw Wrapped{ note(n) };
		}
	}
	return descend(n - 1) + 1;
}

int attempt(int depth)
{
	try {
		return descend(depth);
	} catch (const Wrapped &w) {
		return w.value;
	} catch (const std::exception &e) {
		return -1;
	}
}

int main()
{
	int sum = 0;

	for (int i = 0; i < 3; i++)
		sum += attempt(200);
	std::printf("caught %d, %d destructors, %d rethrows\n", sum, destroyed, rethrown);
	return sum == 360 && destroyed == 603 && rethrown == 9 ? 0 : 1;
}
