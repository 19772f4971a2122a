#!/usr/bin/env bash
# Side-by-side benchmark of the start-up and finish of `uftrace` and `utrace`: the wall time of
# recording a program that does (almost) nothing, where everything measured is the tracers'
# own work: reading the program, creating the data directory, loading and initializing
# libmcount, the scheduling events, and completing the directory (.sym files, info).
#
# Two programs, built with `gcc -pg -O0`: `nop` (main returns 0) and `puts` (main calls puts
# once, through the PLT, so the library-call hook is set up and used). For each, $RUNS rounds
# run, one after the other within a round (so that both tools see the same load):
#   - the program alone,
#   - `uftrace record -d D prog` and `utrace record -d D prog`,
#   - `uftrace prog` and `utrace prog` (live: record into a temporary directory, then replay),
#     the replay's output sent to /dev/null,
# and the script prints the median wall time in ms of each, the spread (min-max) and the
# ratio uftrace/utrace of the medians (above 1: utrace is faster). The data directory is
# removed before each run, outside the timed part. The machine may be shared: medians of many
# alternating runs, not single runs, are what to compare.
#
# Environment: UTRACE (utrace binary; default target/release/utrace, built if missing),
# UFTRACE (default uftrace), RUNS (default 21), PROGS (default "nop puts"),
# EXTRA (extra options for both tracers' record and live runs, e.g. "--no-sched").
set -euo pipefail
shopt -s inherit_errexit

orig_pwd=$PWD
cd "$(dirname "$0")/.."

RUNS=${RUNS:-21}
PROGS=${PROGS:-nop puts}
UFTRACE=${UFTRACE:-uftrace}
read -r -a EXTRA <<<"${EXTRA:-}"

# shellcheck source=bench/utrace_bin.sh
source bench/utrace_bin.sh
locate_utrace bench
command -v "$UFTRACE" >/dev/null || die "$UFTRACE not found"
command -v gcc >/dev/null || die "gcc not found"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/utrace-bench.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

cat >"$tmp/nop.c" <<'EOF'
int main(void) { return 0; }
EOF
cat >"$tmp/puts.c" <<'EOF'
#include <stdio.h>
int main(void) { puts("hello"); return 0; }
EOF

# Wall time in microseconds of "$@" (output to /dev/null), read from bash's clock: no process
# is started around the command.
elapsed_us() {
	local start end
	rm -rf "$tmp/data" "$tmp/data.old"
	start=$EPOCHREALTIME
	"$@" >/dev/null 2>"$tmp/err" || die "failed (exit $?): $* ($(head -c 300 "$tmp/err"))"
	end=$EPOCHREALTIME
	echo $((${end/./} - ${start/./}))
}

# "median min max" in ms of the microsecond values on stdin.
stats() {
	sort -n | awk '{ v[NR] = $1 } END {
		m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
		printf "%.1f %.1f %.1f\n", m / 1000, v[1] / 1000, v[NR] / 1000
	}'
}

echo "bench: utrace $UTRACE (built $(date -r "$UTRACE" '+%F %T')), $("$UFTRACE" --version | head -n 1)"
echo "bench: $RUNS alternating rounds ${EXTRA[*]}, data in $tmp ($(df -T "$tmp" | awk 'NR == 2 { print $2 }')), load $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-6s %-8s %24s %24s %8s\n' prog mode "uftrace ms (min-max)" "utrace ms (min-max)" ratio

for prog in $PROGS; do
	gcc -pg -O0 -o "$tmp/$prog" "$tmp/$prog.c"
	declare -A times=()
	for ((i = 0; i < RUNS; i++)); do
		times[plain]+="$(elapsed_us "$tmp/$prog") "
		times[uf_record]+="$(elapsed_us "$UFTRACE" record "${EXTRA[@]}" -d "$tmp/data" "$tmp/$prog") "
		times[ut_record]+="$(elapsed_us "$UTRACE" record "${EXTRA[@]}" -d "$tmp/data" "$tmp/$prog") "
		times[uf_live]+="$(elapsed_us "$UFTRACE" "${EXTRA[@]}" "$tmp/$prog") "
		times[ut_live]+="$(elapsed_us "$UTRACE" "${EXTRA[@]}" "$tmp/$prog") "
	done
	read -r p_med p_min p_max < <(tr ' ' '\n' <<<"${times[plain]}" | grep . | stats)
	printf '%-6s %-8s %24s\n' "$prog" plain "$p_med ($p_min-$p_max)"
	for mode in record live; do
		read -r f_med f_min f_max < <(tr ' ' '\n' <<<"${times[uf_$mode]}" | grep . | stats)
		read -r t_med t_min t_max < <(tr ' ' '\n' <<<"${times[ut_$mode]}" | grep . | stats)
		printf '%-6s %-8s %24s %24s %7.2fx\n' "$prog" "$mode" "$f_med ($f_min-$f_max)" \
			"$t_med ($t_min-$t_max)" "$(awk -v f="$f_med" -v t="$t_med" 'BEGIN { print f / t }')"
	done
	unset times
done
