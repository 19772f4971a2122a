/* Dynamic patching (`-P`, tests/integration/record_patch.rs): `victim`'s second instruction
 * is the target of a jump from `intruder`, so `victim`'s first bytes cannot be replaced by a
 * 5-byte call; full dynamic patching must refuse it (and count it as failed) and patch the
 * others. Built at -O2 without -pg. */
#include <stdio.h>

int victim(int x);
int intruder(int x);

__asm__(".text\n"
	".globl victim\n"
	".type victim, @function\n"
	"victim:\n"
	"	mov %edi, %eax\n"       /* 2 bytes */
	"victim_inside:\n"
	"	add $3, %eax\n"         /* 3 bytes */
	"	imul $7, %eax, %eax\n"  /* 3 bytes */
	"	ret\n"
	".size victim, .-victim\n"
	".globl intruder\n"
	".type intruder, @function\n"
	"intruder:\n"
	"	lea 10(%rdi), %eax\n"
	"	cmp $100, %edi\n"
	"	jg victim_inside\n"
	"	add $1, %eax\n"
	"	ret\n"
	".size intruder, .-intruder\n");

__attribute__((noinline)) int caller(int x)
{
	return victim(x) + intruder(x) + intruder(x + 200);
}

int main(void)
{
	int s = 0;
	for (int i = 0; i < 3; i++)
		s += caller(i);
	printf("checksum %d\n", s);
	return 0;
}
