/*
 * cxx: C++ names for demangling and exceptions for unwinding.
 *
 * - shapes::Square: a class in a namespace with a constructor, a const
 *   method, a static method and a virtual destructor;
 * - shapes::twice<T>: a function template instantiated for int and double;
 * - measure(): takes a std::string by reference;
 * - risky() -> deeper() throws std::runtime_error that main catches, so the
 *   exits of deeper() and risky() are skipped by the unwinder.
 */
#include <stdexcept>
#include <string>

namespace shapes {

template <typename T> T twice(T v)
{
	return v + v;
}

class Square {
public:
	explicit Square(int side) : side_(side) {}
	virtual ~Square() {}
	int area() const { return side_ * side_; }
	static int sides() { return 4; }

private:
	int side_;
};

} // namespace shapes

int measure(const std::string &s)
{
	return (int)s.size();
}

int deeper(int n)
{
	if (n > 0)
		throw std::runtime_error("too deep");
	return n;
}

int risky(int n)
{
	return deeper(n) + 1;
}

int main()
{
	shapes::Square sq(3);
	int r = shapes::twice<int>(sq.area()) + shapes::Square::sides();
	double d = shapes::twice<double>(1.25);
	std::string word("hello");

	r += measure(word);
	try {
		r += risky(1);
	} catch (const std::runtime_error &) {
		r += 1;
	}
	return (r + (int)d) > 0 ? 0 : 1;
}
