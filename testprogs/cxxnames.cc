/*
 * cxxnames: C++ names as uftrace 0.13 spells them in its simple demangling: an anonymous
 * namespace, operator() of a comparator (through std::sort), a lambda, templates (a member
 * template), virtual functions, std::map and std::function, a static initializer, and two
 * functions of one name in two namespaces (for regex filters).
 */
#include <cstdio>
#include <iostream>
#include <map>
#include <string>
#include <vector>
#include <functional>
#include <algorithm>

namespace ns1 {
namespace {
struct Impl {
	int Compare(int a, int b) const { return a - b; }
};
}  // namespace
int compare(int a, int b) { Impl i; return i.Compare(a, b); }

struct KeyComparator {
	bool operator()(int a, int b) const { return a < b; }
	KeyComparator &operator+=(int) { return *this; }
};

template <typename T> struct Box {
	T v;
	T get() const { return v; }
	template <typename U> U as() const { return static_cast<U>(v); }
};

class Base {
public:
	virtual ~Base() {}
	virtual int run() { return 1; }
};
class Derived : public Base {
public:
	int run() override { return 2; }
};
int bar2(int x) { return x; }
}  // namespace ns1

namespace ns2 { int bar2(int x) { return x + 1; } }

static int counter = ns1::compare(3, 1);
std::string global_name = "x";

int main()
{
	ns1::KeyComparator kc;
	std::vector<int> v{3, 1, 2};
	std::sort(v.begin(), v.end(), kc);
	kc += 1;
	ns1::Box<int> b{5};
	b.get();
	b.as<long>();
	ns1::Derived d;
	ns1::Base *p = &d;
	p->run();
	std::map<std::string, int> m;
	m["a"] = 1;
	auto lam = [](int x) { return x * 2; };
	lam(3);
	std::function<int(int)> f = ns2::bar2;
	f(1);
	ns1::bar2(1);
	std::cout << counter << std::endl;
	return 0;
}
