#!/usr/bin/env bash
# Shared by replay.sh, analysis.sh and dump.sh (sourced, not run): the recorded data and the
# side-by-side measurement of uftrace and utrace on it.
#
# Records `fib $FIB_N` once with uftrace, then `compare NAME "uftrace args" "utrace args"`
# measures the median wall time of $RUNS runs of both tools (hyperfine and jq when present, else
# a timing loop) and the peak RSS of one run (/usr/bin/time), and prints one table row; the
# caller prints `summary` at the end. Sourcing it prints the header of the table.
#
# Environment: UTRACE (utrace binary; default target/release/utrace, built if missing),
# UFTRACE (default uftrace), RUNS (default 3), FIB_N (default 30).
# shellcheck disable=SC2034 # summary and DATA are the caller's
orig_pwd=$PWD
cd "$(dirname "$0")/.."

RUNS=${RUNS:-3}
FIB_N=${FIB_N:-30}
UFTRACE=${UFTRACE:-uftrace}

# shellcheck source=bench/utrace_bin.sh
source bench/utrace_bin.sh
locate_utrace bench
command -v "$UFTRACE" >/dev/null || die "$UFTRACE not found"
command -v gcc >/dev/null || die "gcc not found"
[[ -x /usr/bin/time ]] || die "/usr/bin/time not found (apt-get install time)"

use_hyperfine=0
if command -v hyperfine >/dev/null && command -v jq >/dev/null; then
	use_hyperfine=1
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/utrace-bench.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# --- the recorded data ------------------------------------------------------------------------

gcc -pg -O0 -fno-inline -o "$tmp/fib" bench/fib.c
DATA=$tmp/fib$FIB_N.data
echo "bench: recording fib $FIB_N into $DATA" >&2
"$UFTRACE" record --no-event -d "$DATA" "$tmp/fib" "$FIB_N" >/dev/null

dat_bytes=$(cat "$DATA"/*.dat | wc -c)
# Every record is 16 bytes; fib has no arguments, so there are no payloads.
records=$((dat_bytes / 16))

# --- measuring --------------------------------------------------------------------------------

# Median wall time in seconds of RUNS runs of the command in the array named by $1.
median_loop() {
	local -n cmd=$1
	local times=() i start end
	for ((i = 0; i < RUNS; i++)); do
		start=$(date +%s%N)
		"${cmd[@]}" >/dev/null || die "failed (exit $?): ${cmd[*]}"
		end=$(date +%s%N)
		times+=($((end - start)))
	done
	printf '%s\n' "${times[@]}" | sort -n | awk '{ t[NR] = $1 } END {
		m = (NR % 2) ? t[(NR + 1) / 2] : (t[NR / 2] + t[NR / 2 + 1]) / 2
		printf "%.6f\n", m / 1e9 }'
}

# Prints "uftrace_median utrace_median" for the arrays named by $1 and $2.
medians() {
	if ((use_hyperfine)); then
		local -n a=$1 b=$2
		local json=$tmp/hyperfine.json
		hyperfine --shell=none --runs "$RUNS" --style none --export-json "$json" \
			"$(printf '%q ' "${a[@]}")" "$(printf '%q ' "${b[@]}")" >&2
		jq -r '[.results[].median | tostring] | join(" ")' "$json"
	else
		local ta tb
		ta=$(median_loop "$1")
		tb=$(median_loop "$2")
		echo "$ta $tb"
	fi
}

# Peak resident set size in KiB of one run of the command in the array named by $1.
peak_rss() {
	local -n cmd=$1
	/usr/bin/time -f %M -o "$tmp/rss" "${cmd[@]}" >/dev/null || die "failed (exit $?): ${cmd[*]}"
	tail -n 1 "$tmp/rss"
}

summary=()

# compare NAME "uftrace args" "utrace args": both commands run on the same data; the argument
# strings are split on whitespace. Prints one table row and queues the summary lines.
compare() {
	local name=$1 uf_args ut_args
	read -ra uf_args <<<"$2"
	read -ra ut_args <<<"$3"
	# shellcheck disable=SC2034 # used through the namerefs of peak_rss and medians
	local uf=("$UFTRACE" "${uf_args[@]}") ut=("$UTRACE" "${ut_args[@]}")

	echo "bench: $name: peak RSS (also warms the page cache)" >&2
	local uf_rss ut_rss
	uf_rss=$(peak_rss uf)
	ut_rss=$(peak_rss ut)
	echo "bench: $name: $RUNS timed runs each" >&2
	local times uf_t ut_t
	times=$(medians uf ut)
	read -r uf_t ut_t <<<"$times"

	awk -v n="$name" -v a="$uf_t" -v b="$ut_t" -v ra="$uf_rss" -v rb="$ut_rss" 'BEGIN {
		printf "%-12s %12.3f %12.3f %10.1f %12.1f %12.1f\n", n, a, b, a / b, ra / 1024, rb / 1024 }'
	summary+=("$(awk -v n="$name" -v a="$uf_t" -v b="$ut_t" -v ra="$uf_rss" -v rb="$ut_rss" 'BEGIN {
		if (a >= b) printf "%s: utrace is %.1f× faster\n", n, a / b
		else printf "%s: utrace is %.1f× slower\n", n, b / a
		printf "%s: peak RSS: utrace %.1f MB, uftrace %.1f MB", n, rb / 1024, ra / 1024 }')")
}

timer="date +%s%N loop"
((use_hyperfine)) && timer=hyperfine
echo "uftrace: $("$UFTRACE" --version | head -n 1)"
echo "utrace:  $UTRACE (built $(date -r "$UTRACE" '+%F %T'))"
echo "data:    fib $FIB_N, $records records ($dat_bytes bytes of .dat)"
echo "timing:  median wall time of $RUNS runs ($timer), output to /dev/null"
echo
printf '%-12s %12s %12s %10s %12s %12s\n' command "uftrace (s)" "utrace (s)" speedup \
	"uftrace MB" "utrace MB"
