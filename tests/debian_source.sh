# Sourced by the scripts that build real programs from Debian's source packages
# (tests/realprogs.sh, bench/leveldb.sh); they define `die` and `say` first.
#
# debian_source PKG DIR: unpacks the newest source of PKG into DIR (once; later calls find it)
# and prints the directory it made. Adds `deb-src` to the `Types:` line of each stanza of
# /etc/apt/sources.list.d/debian.sources that has only `deb` (needs root).
# shellcheck shell=bash

DEBIAN_SOURCES=${DEBIAN_SOURCES:-/etc/apt/sources.list.d/debian.sources}

enable_deb_src() {
	[[ -f $DEBIAN_SOURCES ]] || die "$DEBIAN_SOURCES not found: add a deb-src line by hand"
	if ! grep -q '^Types:.*deb-src' "$DEBIAN_SOURCES"; then
		((EUID == 0)) || die "adding deb-src to $DEBIAN_SOURCES needs root"
		say "adding deb-src to $DEBIAN_SOURCES"
		sed -i 's/^Types: deb$/Types: deb deb-src/' "$DEBIAN_SOURCES"
		apt-get update -q >&2
	fi
}

# The unpacked source directory of source package $1 in $2 (its name starts with the
# package name minus a `lib` prefix, as libzstd unpacks to libzstd-1.5.4... and lua5.4 to
# lua5.4-5.4.4), if any.
debian_source_dir() {
	find "$2" -maxdepth 1 -type d -name "$1-[0-9]*" | sort | tail -n 1
}

debian_source() {
	local pkg=$1 dir=$2 src
	mkdir -p "$dir"
	src=$(debian_source_dir "$pkg" "$dir")
	if [[ -z $src ]]; then
		command -v dpkg-source >/dev/null || die "dpkg-source not found (apt-get install dpkg-dev)"
		enable_deb_src
		say "apt-get source $pkg into $dir"
		# apt-get drops privileges to _apt for the download; let it write there.
		(cd "$dir" && apt-get source -q "$pkg" >&2) ||
			{
				apt-get update -q >&2
				(cd "$dir" && apt-get source -q "$pkg" >&2)
			}
		src=$(debian_source_dir "$pkg" "$dir")
		[[ -n $src ]] || die "apt-get source left no $pkg-* directory in $dir"
	fi
	printf '%s\n' "$src"
}
