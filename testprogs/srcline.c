/*
 * srcline: source locations (--srcline, -L). #line directives put the functions in several
 * files and directories of one unit, as the DWARF names them: net/socket.c, net/proto/tcp.c,
 * ui/window.c and srcline.c. ui_draw() calls into the shared library srcline_lib.c (built
 * with -g, its file named by its absolute path), and main() makes a library call (getpid),
 * which has no location.  utrace-test: linked
 */
#include <unistd.h>

int lib_scale(int x);

#line 10 "net/socket.c"
int net_open(int x)
{
	return x + 1;
}

#line 20 "net/proto/tcp.c"
int tcp_send(int x)
{
	return net_open(x) * 2;
}

#line 30 "ui/window.c"
int ui_draw(int x)
{
	return lib_scale(x) + tcp_send(x);
}

#line 40 "srcline.c"
int main(void)
{
	int r = ui_draw(1);

	getpid();
	return r == 0;
}
