#!/usr/bin/env bash
# Cost of `utrace record -k` (event mode) per system call, and events lost at a high system
# call rate, on bench/syscalls.c (one traced function calling getppid() N times).
#
# uftrace 0.13 has no kernel tracing on kernels without function_graph (like this machine's),
# so the reference is the same recording without -k: for N calls and for 1, the best time of
# RUNS runs of
#   - the program alone (wall time),
#   - `utrace record --no-libcall` (user functions only) and
#   - `utrace record --no-libcall -k` (plus sys_enter, sys_exit and sched_switch events), both
#     timed by `record --time` (the traced program's run, without the recorder's finishing),
# and prints the time -k adds per system call, ((T_k(N) - T_k(1)) - (T_user(N) - T_user(1))) / N,
# the untraced cost per call, the whole `record -k` wall time (converting the events
# included), and the events `record -k` reports lost (it warns with the count) with the default
# buffer and with KBUF (--kernel-buffer).
#
# Needs root and tracefs. Environment: UTRACE (default target/release/utrace), RUNS (default
# 5), N (default 1000000), KBUF (default 16m).
set -euo pipefail
shopt -s inherit_errexit

cd "$(dirname "$0")/.."
RUNS=${RUNS:-5}
N=${N:-1000000}
KBUF=${KBUF:-16m}
UTRACE=${UTRACE:-$PWD/target/release/utrace}
[[ -x $UTRACE ]] || cargo build --release >&2

die() {
	echo "bench: $*" >&2
	exit 1
}
((EUID == 0)) || die "-k needs root"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/utrace-kbench.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
prog=$tmp/syscalls
gcc -pg -O0 -o "$prog" bench/syscalls.c

# Best wall time in nanoseconds of RUNS runs of "$@".
best() {
	local best=0 i start end t
	for ((i = 0; i < RUNS; i++)); do
		rm -rf "$tmp/data"
		start=$(date +%s%N)
		"$@" >/dev/null 2>"$tmp/err" || die "failed: $* ($(head -c 300 "$tmp/err"))"
		end=$(date +%s%N)
		t=$((end - start))
		((best == 0 || t < best)) && best=$t
	done
	echo "$best"
}

# Best run time in nanoseconds of the program under RUNS runs of `utrace record --time "$@"`.
best_run() {
	local best=0 i t
	for ((i = 0; i < RUNS; i++)); do
		rm -rf "$tmp/data"
		t=$("$UTRACE" record --time "$@" 2>"$tmp/err" | awk '/elapsed time:/ {
			split($3, p, "."); printf "%d", p[1] * 1000000000 + p[2] }') ||
			die "failed: $* ($(head -c 300 "$tmp/err"))"
		((best == 0 || t < best)) && best=$t
	done
	echo "$best"
}

# Events lost in one -k recording of N calls (from record's warning), with extra options.
lost() {
	rm -rf "$tmp/data"
	"$UTRACE" record --no-libcall -k "$@" -d "$tmp/data" "$prog" "$N" >/dev/null 2>"$tmp/err" ||
		die "record -k failed: $(head -c 300 "$tmp/err")"
	grep -o 'kernel: [0-9]* of [0-9]* events lost' "$tmp/err" || echo "kernel: 0 events lost"
}

echo "bench: $UTRACE, $N getppid() calls, best of $RUNS runs, kernel $(uname -r)"
plain1=$(best "$prog" 1)
plainN=$(best "$prog" "$N")
user1=$(best_run --no-libcall -d "$tmp/data" "$prog" 1)
userN=$(best_run --no-libcall -d "$tmp/data" "$prog" "$N")
k1=$(best_run --no-libcall -k -d "$tmp/data" "$prog" 1)
kN=$(best_run --no-libcall -k -d "$tmp/data" "$prog" "$N")
wall=$(best "$UTRACE" record --no-libcall -k -d "$tmp/data" "$prog" "$N")
awk -v n="$N" -v p1="$plain1" -v pn="$plainN" -v u1="$user1" -v un="$userN" \
	-v k1="$k1" -v kn="$kN" -v wall="$wall" 'BEGIN {
	plain = (pn - p1) / n
	user = (un - u1) / n
	kernel = (kn - k1) / n
	printf "untraced system call         %8.1f ns\n", plain
	printf "record (user functions only) %8.1f ns per call (function + system call)\n", user
	printf "record -k                    %8.1f ns per call\n", kernel
	printf "added by -k                  %8.1f ns per system call (%.1f ns per kernel event)\n",
		kernel - user, (kernel - user) / 2
	printf "record -k, whole run         %8.3f s (converting %d system calls included)\n",
		wall / 1e9, n
}'
echo "default buffer:       $(lost)"
echo "--kernel-buffer=$KBUF: $(lost --kernel-buffer="$KBUF")"
