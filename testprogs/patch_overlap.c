/*
 * patch_overlap: a function whose second entry point lies inside its first bytes, as in
 * hand-written assembly that falls through into another global function: fa(x) adds 100 to
 * x, then runs into fb(x) = x + 10. Full dynamic patching of fa would move its first
 * instructions, fb's included, and write a call over fb's entry: fa must be refused (fb,
 * reached through a pointer, would run the middle of the call). Prints "fa 111 fb 11".
 */
#include <stdio.h>

__asm__(".text\n"
	".globl fa\n"
	".type fa, @function\n"
	"fa:\n"
	"	add $100, %edi\n"
	".globl fb\n"
	".type fb, @function\n"
	"fb:\n"
	"	lea 10(%rdi), %eax\n"
	"	ret\n"
	".size fb, . - fb\n"
	".size fa, . - fa\n");

int fa(int x);
int fb(int x);

int main(void)
{
	int (*volatile via)(int) = fb;

	printf("fa %d fb %d\n", fa(1), via(1));
	return 0;
}
