#!/usr/bin/env bash
# Builds real programs without any instrumentation, for the tests and benchmarks of dynamic
# patching (-P): lua 5.4 and zstd from Debian's source packages, at $CFLAGS (default -O2, no
# -pg), into $CACHE (default ${XDG_CACHE_HOME:-~/.cache}/utrace-tests/realprogs; later runs
# reuse the builds). Prints one line per program, `NAME PATH`.
#
# lua: every .c file of src/ but luac.c, in one gcc call (the Debian package's build goes
# through libtool; the program is the same). zstd: `make -C programs zstd`, without the
# assembly decoder loop so that every function is C.
set -euo pipefail
shopt -s inherit_errexit

cd "$(dirname "$0")/.."
CFLAGS=${CFLAGS:--O2}
CACHE=${CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/utrace-tests/realprogs}

die() {
	echo "realprogs: $*" >&2
	exit 2
}
say() {
	echo "realprogs: $*" >&2
}

# shellcheck source=tests/debian_source.sh
source tests/debian_source.sh

build=$CACHE/build-$(printf '%s' "$CFLAGS" | md5sum | cut -c1-8)
mkdir -p "$build"
# One run at a time (the tests that need the programs run in parallel): a second apt-get
# would find the package lists locked.
exec 9>"$CACHE/.lock"
flock 9
read -ra cflags <<<"$CFLAGS"

lua=$build/lua
if [[ ! -x $lua ]]; then
	src=$(debian_source lua5.4 "$CACHE")
	say "building $lua with '$CFLAGS'"
	# Debian's luaconf.h includes a header its build generates.
	echo '#define DEB_HOST_MULTIARCH "x86_64-linux-gnu"' >"$build/lua5.4-deb-multiarch.h"
	mapfile -t files < <(find "$src/src" -maxdepth 1 -name '*.c' ! -name luac.c | sort)
	gcc "${cflags[@]}" -DLUA_USE_LINUX -I"$build" -o "$lua.tmp" "${files[@]}" -lm -ldl
	mv "$lua.tmp" "$lua"
fi

zstd=$build/zstd
if [[ ! -x $zstd ]]; then
	src=$(debian_source libzstd "$CACHE")
	say "building $zstd with '$CFLAGS'"
	rm -rf "$build/zstd-src"
	cp -r "$src" "$build/zstd-src"
	make -s -j "$(nproc)" -C "$build/zstd-src/programs" zstd CFLAGS="$CFLAGS" MOREFLAGS= \
		ZSTD_NO_ASM=1 >&2
	mv "$build/zstd-src/programs/zstd" "$zstd"
	rm -rf "$build/zstd-src"
fi

echo "lua $lua"
echo "zstd $zstd"
