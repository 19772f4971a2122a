/* The data file of the I/O test programs (aio_read, aio_reapers, uring_read): included, not
 * a program of its own. */
#ifndef UTRACE_TESTPROGS_IO_FILE_H
#define UTRACE_TESTPROGS_IO_FILE_H

#include <fcntl.h>
#include <linux/fiemap.h>
#include <linux/fs.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

/* Creates `path` with `size` bytes of `fill` (at most 16 KiB) and fsyncs it, so that O_DIRECT
 * reads of it go to the device; with `extent`, prints the physical byte offset of its first
 * extent ("extent: BYTES", from FIEMAP). 0, or -1 when a step fails. */
static int prepare_file(const char *path, size_t size, char fill, int extent)
{
	static char data[16384];
	if (size > sizeof(data))
		return -1;
	int fd = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0644);
	if (fd < 0)
		return -1;
	memset(data, fill, size);
	if (write(fd, data, size) != (ssize_t)size || fsync(fd) != 0) {
		close(fd);
		return -1;
	}
	if (extent) {
		struct {
			struct fiemap map;
			struct fiemap_extent ext[1];
		} fm;
		memset(&fm, 0, sizeof(fm));
		fm.map.fm_length = size;
		fm.map.fm_flags = FIEMAP_FLAG_SYNC;
		fm.map.fm_extent_count = 1;
		if (ioctl(fd, FS_IOC_FIEMAP, &fm) == 0 && fm.map.fm_mapped_extents == 1)
			printf("extent: %llu\n", (unsigned long long)fm.ext[0].fe_physical);
	}
	close(fd);
	return 0;
}

#endif
