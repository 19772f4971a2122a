/*
 * dtypes: parameters and return values of every kind the DWARF argument specs
 * (-a, -A ., -R .) describe, each passed where the SysV x86-64 convention puts it:
 *
 * - structs by value in one or two registers of either class (Point, III,
 *   DD, Klass, U, Arr), in memory (Big), empty (Empty), nested in another
 *   call's registers (a method's `this` first), past the sixth integer
 *   argument (many), returned in registers (make_point) or through the
 *   hidden pointer (make_b24, make_holder);
 * - C++ classes that are not trivially copyable, passed by invisible
 *   reference (std::string as a string, std::vector, Holder);
 * - long double on the stack and returned in st(0); float and int arguments
 *   counted apart; enums, an enum class, a function pointer, references;
 * - char (a character) against signed/unsigned char and bool (numbers);
 * - a template function instantiated twice, and a library call with a
 *   built-in prototype (signal).
 */
#include <signal.h>
#include <string>
#include <vector>

struct Point {
	int x;
	int y;
};
struct Big {
	long a, b, c, d;
};
struct Empty {};
class Klass {
public:
	int v;
	double w;
};
struct DD {
	double a, b;
};
struct III {
	int a, b, c;
};
union U {
	int i;
	float f;
};
struct Arr {
	int v[3];
};
struct B24 {
	long a, b, c;
};
/* Not trivially copyable: a user-provided copy constructor and destructor. */
struct Holder {
	int v;
	Holder(int x) : v(x) {}
	Holder(const Holder &o) : v(o.v) {}
	~Holder() {}
};
enum Color { RED, GREEN = 5, BLUE };
enum class Mode : short { Off, On = 3 };

struct Meth {
	int base;
	int add(Point p) { return base + p.x; }
};

typedef int (*fn_t)(int);

int cb(int x) { return x + 1; }
int take_point(Point p) { return p.x + p.y; }
long take_big(Big b) { return b.a + b.d; }
int take_empty(Empty e, int n) { return n; }
int take_klass(Klass k) { return k.v; }
int take_ref(const Point &p) { return p.x; }
int take_ptr(Point *p) { return p->y; }
Point make_point(int x, int y)
{
	Point p = {x, y};
	return p;
}
int take_string(std::string s) { return s.size(); }
int take_cstring(const std::string &s) { return s.size(); }
int take_vector(std::vector<int> v) { return v.size(); }
int take_color(Color c) { return c; }
Color give_color(int n) { return n ? BLUE : RED; }
int take_mode(Mode m) { return (int)m; }
Mode give_mode(int n) { return n ? Mode::On : Mode::Off; }
int take_fn(fn_t f, int x) { return f(x); }
long double ld(long double a, long double b) { return a * b; }
float mixf(int a, float b, long c, float d) { return a + b + c + d; }
bool yes(bool b) { return !b; }
unsigned char uc(unsigned char c) { return c + 1; }
signed char sc(signed char c) { return c - 1; }
char pc(char c) { return c + 1; }
short sh(short s) { return -s; }
double take_dd(DD d) { return d.a + d.b; }
int take_iii(III t) { return t.a + t.c; }
int take_u(U u) { return u.i; }
int take_arr(Arr a) { return a.v[2]; }
long many(int a, int b, int c, int d, int e, int f, int g, Point p, int h)
{
	return a + g + p.x + h;
}
B24 make_b24(int a, long b)
{
	B24 r = {a, b, 3};
	return r;
}
int take_holder(Holder h, int n) { return h.v + n; }
Holder make_holder(int v) { return Holder(v); }
template <typename T> T twice(T v) { return v + v; }

int main()
{
	Point p = {1, 2};
	Big b = {1, 2, 3, 4};
	Empty e;
	Klass k = {7, 1.5};
	take_point(p);
	take_big(b);
	take_empty(e, 3);
	take_klass(k);
	take_ref(p);
	take_ptr(&p);
	make_point(3, 4);
	std::string s("hello");
	take_string(s);
	take_cstring(s);
	std::vector<int> v{1, 2, 3};
	take_vector(v);
	take_color(GREEN);
	give_color(1);
	take_mode(Mode::On);
	give_mode(1);
	take_fn(cb, 4);
	signal(SIGUSR1, SIG_IGN);
	ld(1.5L, 2.0L);
	mixf(1, 2.5f, 3, 4.5f);
	yes(true);
	uc('a');
	sc('b');
	pc('c');
	sh(5);
	take_dd(DD{1.5, 2.5});
	take_iii(III{1, 2, 3});
	U u;
	u.i = 9;
	take_u(u);
	take_arr(Arr{{1, 2, 3}});
	Meth m = {10};
	m.add(p);
	many(1, 2, 3, 4, 5, 6, 7, p, 8);
	make_b24(1, 2);
	Holder h(4);
	take_holder(h, 5);
	make_holder(6);
	twice<int>(3);
	twice<double>(1.5);
	return 0;
}
