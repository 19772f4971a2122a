#!/usr/bin/env bash
# Side-by-side benchmark of the analysis commands `uftrace report`/`graph` and `utrace report`/
# `graph` on the same recorded data (and `report --task`, `graph FUNC`).
#
# Records `fib $FIB_N` once with uftrace, then for each comparison measures the median wall time
# of $RUNS runs of both tools (hyperfine and jq when present, else a timing loop) and the peak RSS of
# one run (/usr/bin/time). Prints one table row per comparison and the speedup.
#
# Then the same for `report` and `graph` on data WITH scheduling events (`fib $FIB_N` recorded
# by uftrace with its default perf events: a `linux:schedule (pre-empted)` node per
# pre-emption): both tools run alternately $SCHED_RUNS times, and the table gives the median,
# the spread (fastest–slowest) of each and the ratio of the medians.
#
# Environment: UTRACE (utrace binary; default target/release/utrace, built if missing),
# UFTRACE (default uftrace), RUNS (default 3), FIB_N (default 30), SCHED_RUNS (default 7).
set -euo pipefail
shopt -s inherit_errexit # a failing command inside $(...) fails the script too

# shellcheck source=bench/side_by_side.sh
source "$(dirname "$0")/side_by_side.sh"

# Both tools must print the same thing before their speed means anything.
for sub in report graph; do
	"$UFTRACE" "$sub" -d "$DATA" --no-pager >"$tmp/uftrace.$sub"
	"$UTRACE" "$sub" -d "$DATA" --no-pager >"$tmp/utrace.$sub"
	cmp -s "$tmp/uftrace.$sub" "$tmp/utrace.$sub" || echo "bench: warning: $sub outputs differ" >&2
done

compare report "report -d $DATA --no-pager" "report -d $DATA --no-pager"
compare graph "graph -d $DATA --no-pager" "graph -d $DATA --no-pager"
compare report-task "report -d $DATA --no-pager --task" "report -d $DATA --no-pager --task"
compare graph-fib "graph -d $DATA --no-pager fib" "graph -d $DATA --no-pager fib"
# --- dump --chrome goes here (the dump engineer's line; see bench/dump.sh) --------------------
# compare chrome "dump -d $DATA --no-pager --chrome" "dump -d $DATA --no-pager --chrome"
compare chrome "dump -d $DATA --no-pager --chrome" "dump -d $DATA --no-pager --chrome"
compare flame "dump -d $DATA --no-pager --flame-graph" "dump -d $DATA --no-pager --flame-graph"

# --- with scheduling events ---------------------------------------------------------------------

SCHED_RUNS=${SCHED_RUNS:-7}
SCHED_DATA=$tmp/fib$FIB_N.sched.data
echo "bench: recording fib $FIB_N with scheduling events into $SCHED_DATA" >&2
"$UFTRACE" record -d "$SCHED_DATA" "$tmp/fib" "$FIB_N" >/dev/null
# A context switch is a 24-byte perf record (two per switch).
perf_bytes=$(cat "$SCHED_DATA"/perf-cpu*.dat 2>/dev/null | wc -c)
for sub in report graph; do
	"$UFTRACE" "$sub" -d "$SCHED_DATA" --no-pager >"$tmp/uftrace.sched.$sub"
	"$UTRACE" "$sub" -d "$SCHED_DATA" --no-pager >"$tmp/utrace.sched.$sub"
	cmp -s "$tmp/uftrace.sched.$sub" "$tmp/utrace.sched.$sub" ||
		echo "bench: warning: $sub outputs differ with scheduling events" >&2
done
nodes=$(grep -c 'linux:schedule' "$tmp/utrace.sched.graph" || true)

# Wall time in seconds of one run of the command in the array named by $1.
wall() {
	local -n cmd=$1
	local start end
	start=$(date +%s%N)
	"${cmd[@]}" >/dev/null || die "failed (exit $?): ${cmd[*]}"
	end=$(date +%s%N)
	awk -v ns=$((end - start)) 'BEGIN { printf "%.6f\n", ns / 1e9 }'
}

# "median min max" of the numbers on stdin.
stats() {
	sort -g | awk '{ t[NR] = $1 } END {
		m = (NR % 2) ? t[(NR + 1) / 2] : (t[NR / 2] + t[NR / 2 + 1]) / 2
		printf "%.3f %.3f %.3f\n", m, t[1], t[NR] }'
}

# compare_spread NAME ARGS: both tools with the same arguments, run alternately.
compare_spread() {
	local name=$1 args
	read -ra args <<<"$2"
	# shellcheck disable=SC2034 # used through the nameref of wall
	local uf=("$UFTRACE" "${args[@]}") ut=("$UTRACE" "${args[@]}")
	local uf_times=() ut_times=() i
	wall uf >/dev/null # warm the page cache
	wall ut >/dev/null
	for ((i = 0; i < SCHED_RUNS; i++)); do
		uf_times+=("$(wall uf)")
		ut_times+=("$(wall ut)")
	done
	local a b am amin amax bm bmin bmax
	a=$(printf '%s\n' "${uf_times[@]}" | stats)
	b=$(printf '%s\n' "${ut_times[@]}" | stats)
	read -r am amin amax bm bmin bmax <<<"$a $b"
	awk -v n="$name" -v am="$am" -v amin="$amin" -v amax="$amax" -v bm="$bm" -v bmin="$bmin" \
		-v bmax="$bmax" 'BEGIN {
		printf "%-14s %8.3f (%.3f-%.3f) %8.3f (%.3f-%.3f) %8.1f×\n", n, am, amin, amax, bm, bmin,
			bmax, am / bm }'
	summary+=("$(awk -v n="$name" -v a="$am" -v b="$bm" 'BEGIN {
		printf "%s (scheduling events): utrace is %.1f× faster", n, a / b }')")
}

echo
echo "with scheduling events: $perf_bytes bytes of perf-cpu*.dat, $nodes linux:schedule nodes" \
	"in the graph; median (fastest-slowest) of $SCHED_RUNS alternating runs, seconds"
printf '%-14s %24s %24s %9s\n' command "uftrace" "utrace" speedup
compare_spread report-sched "report -d $SCHED_DATA --no-pager"
compare_spread graph-sched "graph -d $SCHED_DATA --no-pager"

echo
printf '%s\n' "${summary[@]}"
