#!/usr/bin/env bash
# Two utrace binaries side by side (a change against the commit before it) on the same data:
# every analysis command of replay.sh, analysis.sh and dump.sh, runs interleaved (old, new, old,
# new, ...) so that the machine's noise hits both alike.
#
#   bench/versus.sh OLD_UTRACE NEW_UTRACE
#
# Records `fib $FIB_N` once with uftrace, then for each command prints the median wall time of
# $RUNS runs of each binary, their spread (min-max), and old/new (above 1: the new one is
# faster). Also compares the outputs: a row whose outputs differ is marked DIFFERS.
#
# Environment: UFTRACE (default uftrace), RUNS (default 5), FIB_N (default 30).
set -euo pipefail
shopt -s inherit_errexit

orig_pwd=$PWD
cd "$(dirname "$0")/.."

RUNS=${RUNS:-5}
FIB_N=${FIB_N:-30}
UFTRACE=${UFTRACE:-uftrace}

die() {
	echo "bench: $*" >&2
	exit 1
}

(($# == 2)) || die "usage: bench/versus.sh OLD_UTRACE NEW_UTRACE"
binary() {
	local b=$1
	[[ $b == */* && $b != /* ]] && b=$orig_pwd/$b
	type -P "$b" || die "$1 is not executable"
}
OLD=$(binary "$1")
NEW=$(binary "$2")
command -v "$UFTRACE" >/dev/null || die "$UFTRACE not found"
command -v gcc >/dev/null || die "gcc not found"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/utrace-versus.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

gcc -pg -O0 -fno-inline -o "$tmp/fib" bench/fib.c
DATA=$tmp/fib$FIB_N.data
echo "bench: recording fib $FIB_N into $DATA" >&2
"$UFTRACE" record --no-event -d "$DATA" "$tmp/fib" "$FIB_N" >/dev/null

# Wall time in ns of one run of "$@" (output to /dev/null).
once() {
	local start end
	start=$(date +%s%N)
	"$@" >/dev/null 2>&1 || die "failed (exit $?): $*"
	end=$(date +%s%N)
	echo $((end - start))
}

# "median min max" in seconds of the numbers (ns) on standard input.
stats() {
	sort -n | awk '{ t[NR] = $1 } END {
		m = (NR % 2) ? t[(NR + 1) / 2] : (t[NR / 2] + t[NR / 2 + 1]) / 2
		printf "%.3f %.3f %.3f\n", m / 1e9, t[1] / 1e9, t[NR] / 1e9 }'
}

# compare NAME ARGS...: both binaries with the same arguments.
compare() {
	local name=$1
	shift
	local same=same
	"$OLD" "$@" >"$tmp/old.out" 2>&1 || die "old failed: $*"
	"$NEW" "$@" >"$tmp/new.out" 2>&1 || die "new failed: $*"
	cmp -s "$tmp/old.out" "$tmp/new.out" || same=DIFFERS
	local i old_ns=() new_ns=()
	for ((i = 0; i < RUNS; i++)); do
		old_ns+=("$(once "$OLD" "$@")")
		new_ns+=("$(once "$NEW" "$@")")
	done
	local o n
	o=$(printf '%s\n' "${old_ns[@]}" | stats)
	n=$(printf '%s\n' "${new_ns[@]}" | stats)
	awk -v name="$name" -v o="$o" -v n="$n" -v same="$same" 'BEGIN {
		split(o, a, " "); split(n, b, " ")
		printf "%-12s %8.3f (%.3f-%.3f) %8.3f (%.3f-%.3f) %7.2f  %s\n",
			name, a[1], a[2], a[3], b[1], b[2], b[3], a[1] / b[1], same }'
}

echo "old:   $OLD (built $(date -r "$OLD" '+%F %T'))"
echo "new:   $NEW (built $(date -r "$NEW" '+%F %T'))"
echo "data:  fib $FIB_N recorded by $("$UFTRACE" --version | head -n 1)"
echo "times: median (min-max) wall seconds of $RUNS interleaved runs, output to /dev/null"
echo
printf '%-12s %-24s %-24s %7s  %s\n' command old new old/new output
d=(-d "$DATA" --no-pager)
compare replay replay "${d[@]}"
compare report report "${d[@]}"
compare report-task report "${d[@]}" --task
compare graph graph "${d[@]}"
compare graph-fib graph "${d[@]}" fib
compare info info "${d[@]}"
compare dump-raw dump "${d[@]}"
compare chrome dump "${d[@]}" --chrome
compare flame dump "${d[@]}" --flame-graph
compare graphviz dump "${d[@]}" --graphviz
compare mermaid dump "${d[@]}" --mermaid
