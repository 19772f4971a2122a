/*
 * libcall: copy_and_print() makes a fixed sequence of libc calls
 * (strlen, malloc, strcpy, printf, free) through the PLT. Nothing but the
 * library calls happens under copy_and_print(), so --no-libcall turns it
 * into a leaf.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int copy_and_print(const char *s)
{
	size_t len = strlen(s);
	char *copy = malloc(len + 1);

	if (copy == NULL)
		return -1;
	strcpy(copy, s);
	printf("%s\n", copy);
	free(copy);
	return (int)len;
}

int main(int argc, char *argv[])
{
	return copy_and_print(argc > 1 ? argv[1] : "hello") > 0 ? 0 : 1;
}
