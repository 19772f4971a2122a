/*
 * The C++ library dlopen_cxx.cc loads: an extern "C" entry, a namespaced one, and a member
 * function they both call.
 */
struct AAA {
	int bar(int x);
};

int AAA::bar(int x)
{
	return x + 1;
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
}
