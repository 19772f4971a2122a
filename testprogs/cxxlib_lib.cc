/*
 * The C++ library cxxlib.cc is linked with. Its exported functions call one another through
 * the library's own PLT (as exported functions of a shared library do without -fvisibility
 * or -Bsymbolic), and libc's getpid.
 */
#include <unistd.h>

struct AAA {
	int bar(int x);
};

int AAA::bar(int x)
{
	return x + (getpid() > 0 ? 1 : 0);
}

extern "C" int lib_b(int x)
{
	AAA a;
	return a.bar(x);
}

namespace ns {
int lib_a(int x)
{
	return lib_b(x) + 1;
}

struct Vec {
	int x, y;
	Vec operator+(const Vec &o) const;
};

Vec Vec::operator+(const Vec &o) const
{
	Vec r = {x + o.x, y + o.y};
	return r;
}
}
