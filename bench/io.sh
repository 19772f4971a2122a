#!/usr/bin/env bash
# Cost `utrace record -k` adds per I/O request, on bench/io_reads.c: N O_DIRECT reads of 512
# bytes, each one block request, made with pread() or with libaio (io_submit + io_getevents).
#
# For each mode, RUNS runs of
#   - the program alone (wall time),
#   - `utrace record --no-libcall` (user functions only) and
#   - `utrace record --no-libcall -k` (plus system call, scheduler, block, io_uring and libaio
#     events), both timed by `record --time` (the traced program's run, without the
#     recorder's finishing),
# and prints the median and the spread (min..max) of each, per request, and the time -k adds
# per request: median(-k) - median(user only), divided by N, in wall time and in CPU time of
# the traced program (user + system from `record --time`: the tracepoints run in its context,
# except device completions, which interrupt whatever runs). The device's own latency varies
# run to run by more than -k's cost on a shared machine: read the spread with the medians.
#
# uftrace -k needs the function_graph tracer, which kernels like this one (Firecracker) lack:
# no uftrace column here.
#
# Needs root, tracefs, libaio-dev and a block-backed directory (the first of /var/tmp, /tmp
# and the build directory on a block device). Environment: UTRACE (default
# target/release/utrace), RUNS (default 7), N (default 5000), MODES (default "pread aio").
set -euo pipefail
shopt -s inherit_errexit

cd "$(dirname "$0")/.."
RUNS=${RUNS:-7}
N=${N:-5000}
MODES=${MODES:-pread aio}
UTRACE=${UTRACE:-$PWD/target/release/utrace}
[[ -x $UTRACE ]] || cargo build --release >&2

die() {
	echo "bench: $*" >&2
	exit 1
}
((EUID == 0)) || die "-k needs root"

on_block() { # DIR: its filesystem is on a block device
	local dev
	dev=$(stat -c '%Hd:%Ld' "$1" 2>/dev/null) || return 1
	[[ ${dev%%:*} != 0 && -e /sys/dev/block/$dev ]]
}
scratch=
for d in /var/tmp /tmp "$PWD/target"; do
	if on_block "$d"; then
		scratch=$(mktemp -d "$d/utrace-iobench.XXXXXX")
		break
	fi
done
[[ -n $scratch ]] || die "no directory on a block device"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/utrace-iobench.XXXXXX")
trap 'rm -rf "$tmp" "$scratch"' EXIT
prog=$tmp/io_reads
gcc -pg -O0 -o "$prog" bench/io_reads.c -laio

# RUNS wall times in nanoseconds of "$@", one per line.
walls() {
	local i start end
	for ((i = 0; i < RUNS; i++)); do
		start=$(date +%s%N)
		"$@" >/dev/null 2>"$tmp/err" || die "failed: $* ($(head -c 300 "$tmp/err"))"
		end=$(date +%s%N)
		echo $((end - start))
	done
}

# RUNS times in nanoseconds of the program under `utrace record --time "$@"`, one run per
# line: elapsed, then CPU (user + system: the tracepoints run in the task's context).
runs() {
	local i
	for ((i = 0; i < RUNS; i++)); do
		rm -rf "$tmp/data"
		"$UTRACE" record --time "$@" 2>"$tmp/err" | awk '
			function ns(s) { split(s, p, "."); return p[1] * 1000000000 + p[2] }
			/elapsed time:/ { e = ns($3) } /system time:/ { c += ns($3) } /user time:/ { c += ns($3) }
			END { printf "%d %d\n", e, c }' ||
			die "failed: $* ($(head -c 300 "$tmp/err"))"
	done
}

# Median, min and max of column COL (default 1) of stdin.
stats() {
	awk -v c="${1:-1}" '{ print $c }' | sort -n | awk '{ v[NR] = $1 } END {
		m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
		print m, v[1], v[NR] }'
}

echo "bench: $UTRACE, $N O_DIRECT reads of 512 bytes, $RUNS runs, kernel $(uname -r), $scratch"
for mode in $MODES; do
	file=$scratch/io_reads.dat
	read -r pm pmin pmax < <(walls "$prog" "$mode" "$file" "$N" | stats)
	runs --no-libcall -d "$tmp/data" "$prog" "$mode" "$file" "$N" >"$tmp/user"
	runs --no-libcall -k -d "$tmp/data" "$prog" "$mode" "$file" "$N" >"$tmp/k"
	read -r um umin umax < <(stats 1 <"$tmp/user")
	read -r km kmin kmax < <(stats 1 <"$tmp/k")
	read -r uc ucmin ucmax < <(stats 2 <"$tmp/user")
	read -r kc kcmin kcmax < <(stats 2 <"$tmp/k")
	rm -rf "$tmp/data"
	"$UTRACE" record --no-libcall -k -d "$tmp/data" "$prog" "$mode" "$file" "$N" >/dev/null 2>&1
	reqs=$("$UTRACE" report --io --no-pager -d "$tmp/data" | awk '/^# I\/O requests:/ { print $4 }')
	awk -v mode="$mode" -v n="$N" -v reqs="$reqs" -v pm="$pm" -v pmin="$pmin" -v pmax="$pmax" \
		-v um="$um" -v umin="$umin" -v umax="$umax" -v km="$km" -v kmin="$kmin" -v kmax="$kmax" \
		-v uc="$uc" -v ucmin="$ucmin" -v ucmax="$ucmax" -v kc="$kc" -v kcmin="$kcmin" -v kcmax="$kcmax" 'BEGIN {
		printf "%-5s untraced          %8.2f us per request (spread %.2f..%.2f)\n", mode, pm / n / 1e3, pmin / n / 1e3, pmax / n / 1e3
		printf "%-5s record            %8.2f us per request (spread %.2f..%.2f)\n", mode, um / n / 1e3, umin / n / 1e3, umax / n / 1e3
		printf "%-5s record -k         %8.2f us per request (spread %.2f..%.2f)\n", mode, km / n / 1e3, kmin / n / 1e3, kmax / n / 1e3
		printf "%-5s added by -k       %8.2f us per request, wall (median -k - median user only)\n", mode, (km - um) / n / 1e3
		printf "%-5s CPU, record       %8.2f us per request (spread %.2f..%.2f)\n", mode, uc / n / 1e3, ucmin / n / 1e3, ucmax / n / 1e3
		printf "%-5s CPU, record -k    %8.2f us per request (spread %.2f..%.2f)\n", mode, kc / n / 1e3, kcmin / n / 1e3, kcmax / n / 1e3
		printf "%-5s added by -k       %8.2f us CPU per request; report --io found %s requests\n", mode, (kc - uc) / n / 1e3, reqs
	}'
done
