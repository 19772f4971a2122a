#!/usr/bin/env bash
# Flight recorder benchmark: a program that makes calls for $DURATION seconds (default 600,
# 10 minutes) on $THREADS threads (bench/flight_loop.c) recorded with
# `utrace record --flight-recorder=$SIZE`. Every $INTERVAL seconds it samples
#   - the disk use of the data directory (allocated bytes, `du`),
#   - the memory of the rings in /dev/shm (allocated bytes of the ring directory),
#   - the resident memory of the recorder and of the program (VmRSS, summed),
# and at the end prints the maximum of each, the final size of the data directory, and the
# bound they are held to, SIZE × traced threads (the $THREADS workers and main); plus what a normal recording would have written:
# the rate of a normal recording of the same program for $NORMAL seconds × DURATION (the
# program runs slower then: its threads wait for the disk), and the records the program made
# in flight mode (an ENTRY and an EXIT per call, 32 bytes).
#
# Environment: UTRACE (utrace binary; default target/release/utrace, built if missing),
# DURATION (default 600), SIZE (default 16M), THREADS (default 2), INTERVAL (default 5),
# NORMAL (default 3).
set -euo pipefail
shopt -s inherit_errexit

orig_pwd=$PWD
cd "$(dirname "$0")/.."

DURATION=${DURATION:-600}
SIZE=${SIZE:-16M}
THREADS=${THREADS:-2}
INTERVAL=${INTERVAL:-5}
NORMAL=${NORMAL:-3}

# shellcheck source=bench/utrace_bin.sh
source bench/utrace_bin.sh
locate_utrace bench
command -v gcc >/dev/null || die "gcc not found"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/utrace-flight.XXXXXX")
rec=
cleanup() {
	[[ -n $rec ]] && kill "$rec" 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT

bytes_of() {
	numfmt --from=iec "${1^^}"
}
size_bytes=$(bytes_of "$SIZE") || die "bad SIZE $SIZE"
mib() {
	awk -v b="$1" 'BEGIN { printf "%.1f MiB", b / 1048576 }'
}

prog=$tmp/flight_loop
gcc -pg -O0 -fno-inline -pthread -o "$prog" bench/flight_loop.c

echo "bench: utrace $UTRACE (built $(date -r "$UTRACE" '+%F %T'))"
echo "bench: $THREADS threads for $DURATION s, --flight-recorder=$SIZE, samples every $INTERVAL s, data in $tmp"

# What a normal recording writes per second.
"$UTRACE" record --no-sched -d "$tmp/normal" "$prog" "$NORMAL" "$THREADS" >/dev/null 2>"$tmp/err" ||
	die "normal recording failed: $(head -c 300 "$tmp/err")"
normal_bytes=$(cat "$tmp"/normal/*.dat | wc -c)
rm -rf "$tmp/normal"

rss_of() {
	awk '/^VmRSS:/ { print $2 * 1024 }' "/proc/$1/status" 2>/dev/null || echo 0
}

"$UTRACE" record --no-sched --flight-recorder="$SIZE" -d "$tmp/data" "$prog" "$DURATION" "$THREADS" \
	>"$tmp/out" 2>"$tmp/err" &
rec=$!
max_disk=0 max_shm=0 max_rss=0 samples=0
start=$(date +%s)
while kill -0 "$rec" 2>/dev/null; do
	sleep "$INTERVAL"
	disk=$(du -s --block-size=1 "$tmp/data" 2>/dev/null | cut -f1) || disk=0
	shm=0
	for d in /dev/shm/utrace-"$rec"-*; do
		[[ -d $d ]] && shm=$(du -s --block-size=1 "$d" 2>/dev/null | cut -f1)
	done
	rss=$(rss_of "$rec")
	for child in $(pgrep -P "$rec" || true); do
		rss=$((rss + $(rss_of "$child")))
	done
	((disk > max_disk)) && max_disk=$disk
	((shm > max_shm)) && max_shm=$shm
	((rss > max_rss)) && max_rss=$rss
	samples=$((samples + 1))
	if ((samples % 12 == 0)); then
		echo "bench: $(($(date +%s) - start)) s: data $(mib "$disk"), rings $(mib "$shm"), rss $(mib "$rss")"
	fi
done
wait "$rec" || die "flight recording failed: $(head -c 300 "$tmp/err")"
rec=
final=$(du -s --block-size=1 "$tmp/data" | cut -f1)
dat=$(cat "$tmp"/data/*.dat | wc -c)
calls=$(awk '{ print $1 }' "$tmp/out")
"$UTRACE" replay -d "$tmp/data" --no-pager >/dev/null 2>"$tmp/err" || die "replay failed: $(head -c 300 "$tmp/err")"

bound=$((size_bytes * (THREADS + 1)))
echo "bench: $calls calls in $DURATION s; $samples samples"
printf '%-40s %14s\n' "" "bytes"
printf '%-40s %14s  (%s)\n' "bound: SIZE x $((THREADS + 1)) threads" "$bound" "$(mib "$bound")"
printf '%-40s %14s  (%s)\n' "max rings in /dev/shm" "$max_shm" "$(mib "$max_shm")"
printf '%-40s %14s  (%s)\n' "max data directory during the run" "$max_disk" "$(mib "$max_disk")"
printf '%-40s %14s  (%s)\n' "data directory at the end" "$final" "$(mib "$final")"
printf '%-40s %14s  (%s)\n' ".dat records at the end" "$dat" "$(mib "$dat")"
printf '%-40s %14s  (%s)\n' "max RSS, recorder + program" "$max_rss" "$(mib "$max_rss")"
made=$((calls * 32))
printf '%-40s %14s  (%s)\n' "records the program made (32 B/call)" "$made" "$(mib "$made")"
normal=$(awk -v b="$normal_bytes" -v n="$NORMAL" -v d="$DURATION" 'BEGIN { printf "%.0f", b / n * d }')
printf '%-40s %14s  (%s)\n' "normal recording would write (est.)" "$normal" "$(mib "$normal")"
