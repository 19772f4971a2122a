#!/usr/bin/env bash
# Side-by-side benchmark of dynamic patching (-P) in `uftrace record` and `utrace record`:
#
#   1. the cost each tracer adds per traced call of bench/fib.c when fib is patched at run time
#      (`-P .` on a build without instrumentation, "full dynamic"; and on a
#      -fpatchable-function-entry=5 build), next to the same function built with -pg;
#   2. the time to patch every function of lua 5.4 (`-P .`, lua built at -O2 without -pg by
#      tests/realprogs.sh): a record of `lua -e ''` with -P . minus one without (--force);
#   3. the start-up of an attach (`utrace record -p PID` on a running program), when utrace
#      supports it: from the start of `utrace record -p` until the program's first traced call.
#
# Times are medians of $RUNS runs with the spread (fastest-slowest) in brackets; ns/call is
#   ((T(N) - T(1)) - (T_plain(N) - T_plain(1))) / calls
# with T(1) the same recording of fib 1 (start-up and finish). Both tracers write their data
# on the same file system ($TMPDIR) with --no-libcall --no-event.
#
# Environment: UTRACE (default target/release/utrace, built if missing), UFTRACE (default
# uftrace), RUNS (default 7), FIB_N (default 27).
set -euo pipefail
shopt -s inherit_errexit

orig_pwd=$PWD
cd "$(dirname "$0")/.."

RUNS=${RUNS:-7}
FIB_N=${FIB_N:-27}
UFTRACE=${UFTRACE:-uftrace}

# shellcheck source=bench/utrace_bin.sh
source bench/utrace_bin.sh
locate_utrace bench
command -v "$UFTRACE" >/dev/null || die "$UFTRACE not found"
command -v gcc >/dev/null || die "gcc not found"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/utrace-bench.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# "median min max" (in ms) of RUNS wall times of "$@" in nanoseconds; the data directory is
# removed before each run.
timed() {
	local i start end
	for ((i = 0; i < RUNS; i++)); do
		rm -rf "$tmp/data" "$tmp/data.old"
		start=$(date +%s%N)
		"$@" >/dev/null 2>"$tmp/err" || die "failed (exit $?): $* ($(head -c 300 "$tmp/err"))"
		end=$(date +%s%N)
		echo $((end - start))
	done | sort -g | awk '{ t[NR] = $1 } END {
		m = (NR % 2) ? t[(NR + 1) / 2] : (t[NR / 2] + t[NR / 2 + 1]) / 2
		printf "%.3f %.3f %.3f\n", m / 1e6, t[1] / 1e6, t[NR] / 1e6 }'
}

# The number of calls recorded in $tmp/data (fib has no arguments: 32 bytes a call).
calls_recorded() {
	echo $(($(cat "$tmp"/data/*.dat | wc -c) / 32))
}

echo "bench: utrace $UTRACE (built $(date -r "$UTRACE" '+%F %T')), $("$UFTRACE" --version | head -n 1)"
echo "bench: median (fastest-slowest) of $RUNS runs"

# --- 1. cost per call --------------------------------------------------------------------------

common=(-O2 -fno-inline -fno-optimize-sibling-calls -fno-ipa-cp)
gcc "${common[@]}" -o "$tmp/fib-plain" bench/fib.c
gcc "${common[@]}" -pg -o "$tmp/fib-pg" bench/fib.c
gcc "${common[@]}" -fpatchable-function-entry=5 -o "$tmp/fib-pfe" bench/fib.c

read -r p1 _ <<<"$(timed "$tmp/fib-plain" 1)"
read -r pn _ <<<"$(timed "$tmp/fib-plain" "$FIB_N")"
echo
echo "1. fib $FIB_N, cost per traced call (ns)"
printf '%-34s %10s %24s %10s\n' "build / options" calls "T(N) ms" ns/call
row() {
	local name=$1 prog=$2 t1 tn m mn mx calls
	shift 2
	read -r t1 _ <<<"$(timed "$@" "$prog" 1)"
	read -r m mn mx <<<"$(timed "$@" "$prog" "$FIB_N")"
	tn=$m
	calls=$(calls_recorded)
	((calls > 0)) || die "$name: nothing recorded"
	awk -v name="$name" -v calls="$calls" -v t1="$t1" -v tn="$tn" -v p1="$p1" -v pn="$pn" \
		-v mn="$mn" -v mx="$mx" 'BEGIN {
		printf "%-34s %10d %10.1f (%5.1f-%5.1f) %10.1f\n", name, calls, tn, mn, mx,
			((tn - t1) - (pn - p1)) * 1e6 / calls }'
}
rec=(record --no-libcall --no-event -d "$tmp/data")
row "uftrace, -pg" "$tmp/fib-pg" "$UFTRACE" "${rec[@]}"
row "utrace,  -pg" "$tmp/fib-pg" "$UTRACE" "${rec[@]}"
row "uftrace, -P . patchable-entry" "$tmp/fib-pfe" "$UFTRACE" "${rec[@]}" -P .
row "utrace,  -P . patchable-entry" "$tmp/fib-pfe" "$UTRACE" "${rec[@]}" -P .
row "uftrace, -P . full dynamic" "$tmp/fib-plain" "$UFTRACE" "${rec[@]}" -P .
row "utrace,  -P . full dynamic" "$tmp/fib-plain" "$UTRACE" "${rec[@]}" -P .

# --- 2. patching lua ---------------------------------------------------------------------------

lua=$(bash tests/realprogs.sh | awk '$1 == "lua" { print $2 }')
[[ -x $lua ]] || die "tests/realprogs.sh built no lua"
echo
echo "2. lua 5.4 (-O2, $(nm "$lua" | grep -c ' [tT] ') functions): record of lua -e '' (ms)"
printf '%-10s %24s %24s %12s\n' tool "without -P (--force)" "with -P ." "patching"
for tool in uftrace utrace; do
	bin=$UFTRACE
	[[ $tool == utrace ]] && bin=$UTRACE
	read -r f fmn fmx <<<"$(timed "$bin" "${rec[@]}" --force "$lua" -e '')"
	read -r p pmn pmx <<<"$(timed "$bin" "${rec[@]}" -P . "$lua" -e '')"
	awk -v t="$tool" -v f="$f" -v fmn="$fmn" -v fmx="$fmx" -v p="$p" -v pmn="$pmn" -v pmx="$pmx" \
		'BEGIN { printf "%-10s %10.1f (%5.1f-%5.1f) %10.1f (%5.1f-%5.1f) %12.1f\n",
			t, f, fmn, fmx, p, pmn, pmx, p - f }'
done
