// Dynamic patching (`-P`, tests/integration/record_patch.rs) of frames left by a C++
// exception and by longjmp, and of a tail call into the PLT: built without -pg at -O2 (full
// dynamic patching) and with -fpatchable-function-entry=5. Prints a checksum.
#include <csetjmp>
#include <cstdio>
#include <stdexcept>

static jmp_buf jump_buffer;

__attribute__((noinline)) int thrower(int x)
{
	if (x > 2)
		throw std::runtime_error("boom");
	return x * 2;
}

__attribute__((noinline)) int middle(int x)
{
	int t = x * 5;
	int r = thrower(x);
	return r + t;
}

__attribute__((noinline)) int catcher(int x)
{
	try {
		return middle(x);
	} catch (const std::exception &) {
		return -x;
	}
}

__attribute__((noinline)) void jumper(int x)
{
	if (x == 3)
		longjmp(jump_buffer, 7);
}

__attribute__((noinline)) int jump_middle(int x)
{
	jumper(x);
	return x + 1;
}

// A tail call through the PLT: its frame and puts' share one return slot (full dynamic: the
// slot holds the dynamic exit trampoline when the PLT hook sees it).
__attribute__((noinline)) int tail(const char *s, int skip)
{
	return puts(s + skip);
}

int main()
{
	long sum = 0;
	for (int i = 0; i < 5; i++)
		sum += catcher(i);
	for (int i = 0; i < 5; i++) {
		if (setjmp(jump_buffer) == 0)
			sum += jump_middle(i);
		else
			sum += 100;
	}
	sum += tail("a tail", 2);
	std::printf("checksum %ld\n", sum);
	return 0;
}
