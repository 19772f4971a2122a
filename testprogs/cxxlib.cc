/*
 * cxxlib: a C++ program linked with a C++ shared library (libcxxlib_lib.so, built beside it;
 * utrace-test: linked). Its calls into the library go through the program's PLT: a member
 * function, a function in a namespace, an extern "C" function and an overloaded operator.
 * Inside the library, calls go through the library's own PLT (--nest-libcall): to its own
 * exported functions and to libc. For --libname (`AAA::bar@libcxxlib_lib.so`).
 */
#include <unistd.h>

struct AAA {
	int bar(int x);
};

namespace ns {
int lib_a(int x);
struct Vec {
	int x, y;
	Vec operator+(const Vec &o) const;
};
}

extern "C" int lib_b(int x);

int main()
{
	AAA a;
	ns::Vec v = {1, 2}, w = {3, 4};
	int r = a.bar(1) + ns::lib_a(2) + lib_b(3) + (v + w).y;
	return getpid() > 0 && r > 0 ? 0 : 1;
}
