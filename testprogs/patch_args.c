/*
 * patch_args: arguments and return values of functions patched at run time (-P) in plain -O2
 * code built with -g, recorded with -a (types from DWARF): a struct passed by value in
 * registers, an int, a string, and a double returned in xmm0. The program prints what addpt
 * returned: tracing must not change it (uftrace 0.13 prints 131.00 here: its exit path does
 * not keep xmm0, and it records the return value as 0.000000).
 */
#include <stdio.h>
struct pt { int x; double y; };
__attribute__((noinline)) double addpt(struct pt p, int k, const char *s) { return p.x * k + p.y + s[0]; }
__attribute__((noinline)) int twice(int v) { return v * 2 + 1; }
int main(void) { struct pt p = { 3, 1.5 }; double d = addpt(p, twice(4), "hi"); printf("%.2f\n", d); return 0; }
