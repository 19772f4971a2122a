#!/usr/bin/env bash
# `utrace dump --perfetto` against `uftrace dump --chrome` on the same data (`fib $FIB_N`
# recorded by uftrace, as bench/dump.sh): median, fastest and slowest wall time and user+sys
# CPU time of $RUNS runs each, output to /dev/null, and the peak RSS of each run
# (/usr/bin/time). The trace written is checked to be a whole stream of packets first.
#
# With BIG_N set (e.g. BIG_N=36, about 60 M records and 1 GB of .dat), it also records
# `fib $BIG_N` with utrace and converts it once, printing records, output size, time and peak
# RSS next to those of fib $FIB_N: memory stays flat (bench/README.md has a measured run).
#
# Environment: UTRACE (utrace binary; default target/release/utrace, built if missing),
# UFTRACE (default uftrace), RUNS (default 5), FIB_N (default 30), BIG_N (unset: skipped).
set -euo pipefail
shopt -s inherit_errexit

RUNS=${RUNS:-5}
# shellcheck source=bench/side_by_side.sh
source "$(dirname "$0")/side_by_side.sh" >/dev/null

# run_stats NAME CMD...: runs CMD $RUNS times; prints NAME, median/min/max wall seconds,
# median CPU seconds and the largest peak RSS in MB.
run_stats() {
	local name=$1
	shift
	local i walls=() cpus=() rss=()
	for ((i = 0; i < RUNS; i++)); do
		/usr/bin/time -f '%e %U %S %M' -o "$tmp/t" "$@" >/dev/null || die "failed: $*"
		read -r w u s m <"$tmp/t"
		walls+=("$w")
		cpus+=("$(awk -v u="$u" -v s="$s" 'BEGIN { print u + s }')")
		rss+=("$m")
	done
	local wall cpu
	wall=$(printf '%s\n' "${walls[@]}" | sort -g | awk '{ t[NR] = $1 } END {
		printf "%.3f %.3f %.3f", t[int((NR + 1) / 2)], t[1], t[NR] }')
	cpu=$(printf '%s\n' "${cpus[@]}" | sort -g | awk '{ t[NR] = $1 } END { printf "%.3f", t[int((NR + 1) / 2)] }')
	local peak
	peak=$(printf '%s\n' "${rss[@]}" | sort -n | tail -n 1)
	read -r med lo hi <<<"$wall"
	printf '%-26s %8s %8s %8s %9s %9.1f\n' "$name" "$med" "$lo" "$hi" "$cpu" "$(awk -v k="$peak" 'BEGIN { print k / 1024 }')"
	echo "$med" >"$tmp/$name.median"
}

"$UTRACE" dump -d "$DATA" --perfetto >"$tmp/trace.pftrace" || die "dump --perfetto failed"
python3 - "$tmp/trace.pftrace" <<'EOF' || die "the trace is not a stream of whole packets"
import sys
data, pos, n = open(sys.argv[1], "rb").read(), 0, 0
def varint():
    global pos
    v = s = 0
    while True:
        b = data[pos]; pos += 1; v |= (b & 0x7f) << s; s += 7
        if b < 0x80: return v
while pos < len(data):
    assert varint() == 0x0a  # field 1, length-delimited
    size = varint()
    pos += size
    n += 1
assert pos == len(data)
print(f"bench: {n} packets, {len(data)} bytes", file=sys.stderr)
EOF

echo "uftrace: $("$UFTRACE" --version | head -n 1)"
echo "utrace:  $UTRACE (built $(date -r "$UTRACE" '+%F %T'))"
echo "data:    fib $FIB_N, $records records ($dat_bytes bytes of .dat); $RUNS runs each, output to /dev/null"
echo
printf '%-26s %8s %8s %8s %9s %9s\n' command "wall (s)" min max "cpu (s)" "peak MB"
run_stats "uftrace dump --chrome" "$UFTRACE" dump -d "$DATA" --chrome
run_stats "utrace dump --chrome" "$UTRACE" dump -d "$DATA" --no-pager --chrome
run_stats "utrace dump --perfetto" "$UTRACE" dump -d "$DATA" --perfetto
awk -v a="$(cat "$tmp/uftrace dump --chrome.median")" -v b="$(cat "$tmp/utrace dump --perfetto.median")" \
	'BEGIN { printf "\nperfetto: utrace dump --perfetto is %.1f× faster than uftrace dump --chrome (medians)\n", a / b }'

if [[ -n ${BIG_N:-} ]]; then
	big=$tmp/fib$BIG_N.data
	echo "bench: recording fib $BIG_N with utrace into $big" >&2
	"$UTRACE" record --no-event -d "$big" "$tmp/fib" "$BIG_N" >/dev/null
	big_records=$(($(cat "$big"/*.dat | wc -c) / 16))
	for d in "$DATA" "$big"; do
		/usr/bin/time -f '%e %M' -o "$tmp/t" "$UTRACE" dump -d "$d" --perfetto | wc -c >"$tmp/bytes"
		read -r w m <"$tmp/t"
		n=$(($(cat "$d"/*.dat | wc -c) / 16))
		printf 'one pass: %11d records -> %12d bytes in %7.2f s, peak RSS %6.1f MB\n' \
			"$n" "$(cat "$tmp/bytes")" "$w" "$(awk -v k="$m" 'BEGIN { print k / 1024 }')"
	done
	: "$big_records"
fi
