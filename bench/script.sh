#!/usr/bin/env bash
# Side-by-side benchmark of `uftrace script -S` and `utrace script -S` (Python and Lua) on the
# same recorded data: `fib $FIB_N` recorded once by uftrace (fib 30: 2.7 million calls, 5.4
# million records), and two scripts per language, written here:
#   count   the least a script does: counts entries, sums the exits' durations (the cost of
#           the engine: the walk, one context per record, one call into the interpreter);
#   latency scripts/latency.{py,lua}: per-function percentiles (a script doing real work).
# Both tools must print the same thing first. Then both run alternately $RUNS times; the
# table gives the median CPU time (user + system: the machine may be shared), its spread
# (fastest-slowest), the ratio of the medians (above 1: utrace is faster), the median wall
# times and their ratio, and the peak RSS of one run (/usr/bin/time).
#
# Environment: UTRACE (utrace binary; default target/release/utrace, built if missing),
# UFTRACE (default uftrace, built with python3 and luajit), RUNS (default 5), FIB_N (default 30).
set -euo pipefail
shopt -s inherit_errexit # a failing command inside $(...) fails the script too
orig_pwd=$PWD
cd "$(dirname "$0")/.."

RUNS=${RUNS:-5}
FIB_N=${FIB_N:-30}
UFTRACE=${UFTRACE:-uftrace}

# shellcheck source=bench/utrace_bin.sh
source bench/utrace_bin.sh
locate_utrace bench
command -v "$UFTRACE" >/dev/null || die "$UFTRACE not found"
command -v gcc >/dev/null || die "gcc not found"
[[ -x /usr/bin/time ]] || die "/usr/bin/time not found (apt-get install time)"
"$UFTRACE" --version | grep -q python3 || die "$UFTRACE has no python3 scripting"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/utrace-bench.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

gcc -pg -O0 -fno-inline -o "$tmp/fib" bench/fib.c
DATA=$tmp/fib$FIB_N.data
echo "bench: recording fib $FIB_N into $DATA" >&2
"$UFTRACE" record --no-event -d "$DATA" "$tmp/fib" "$FIB_N" >/dev/null
records=$(($(cat "$DATA"/*.dat | wc -c) / 16))

cat >"$tmp/count.py" <<'PY'
calls = 0
total = 0
def uftrace_entry(ctx):
    global calls
    calls += 1
def uftrace_exit(ctx):
    global total
    total += ctx["duration"]
def uftrace_end():
    print("calls", calls, "time", total)
PY
cat >"$tmp/count.lua" <<'LUA'
local calls, total = 0, 0
function uftrace_entry(ctx) calls = calls + 1 end
function uftrace_exit(ctx) total = total + ctx.duration end
function uftrace_end() print("calls", calls, "time", string.format("%d", total)) end
LUA
cp scripts/latency.py scripts/latency.lua "$tmp/"

# "wall cpu" seconds of one run of the command in the array named by $1 (cpu: user + system,
# what the run itself costs on a machine shared with other work).
timed() {
	local -n cmd=$1
	/usr/bin/time -f '%e %U %S' -o "$tmp/time" "${cmd[@]}" >/dev/null ||
		die "failed (exit $?): ${cmd[*]}"
	awk '{ printf "%.2f %.2f\n", $1, $2 + $3 }' "$tmp/time"
}

# "median min max" of the numbers on stdin.
stats() {
	sort -g | awk '{ t[NR] = $1 } END {
		m = (NR % 2) ? t[(NR + 1) / 2] : (t[NR / 2] + t[NR / 2 + 1]) / 2
		printf "%.2f %.2f %.2f\n", m, t[1], t[NR] }'
}

echo "script over fib $FIB_N ($records records); median (fastest-slowest) of $RUNS alternating" \
	"runs: CPU seconds (user+system), wall seconds; peak RSS"
printf '%-12s %20s %20s %7s %8s %8s %6s %12s\n' script "uftrace CPU" "utrace CPU" ratio \
	"uf wall" "ut wall" ratio "RSS uf/ut MB"
for name in count.py count.lua latency.py latency.lua; do
	# shellcheck disable=SC2034 # used through the namerefs
	uf=("$UFTRACE" script -d "$DATA" -S "$tmp/$name")
	# shellcheck disable=SC2034
	ut=("$UTRACE" script -d "$DATA" -S "$tmp/$name")
	"${uf[@]}" >"$tmp/uf.out"
	"${ut[@]}" >"$tmp/ut.out"
	cmp -s "$tmp/uf.out" "$tmp/ut.out" || echo "bench: warning: $name outputs differ" >&2
	uf_wall=() uf_cpu=() ut_wall=() ut_cpu=()
	for ((i = 0; i < RUNS; i++)); do
		read -r w c <<<"$(timed uf)"
		uf_wall+=("$w") uf_cpu+=("$c")
		read -r w c <<<"$(timed ut)"
		ut_wall+=("$w") ut_cpu+=("$c")
	done
	read -r am amin amax <<<"$(printf '%s\n' "${uf_cpu[@]}" | stats)"
	read -r bm bmin bmax <<<"$(printf '%s\n' "${ut_cpu[@]}" | stats)"
	read -r aw _ _ <<<"$(printf '%s\n' "${uf_wall[@]}" | stats)"
	read -r bw _ _ <<<"$(printf '%s\n' "${ut_wall[@]}" | stats)"
	/usr/bin/time -f %M -o "$tmp/rss.uf" "${uf[@]}" >/dev/null
	/usr/bin/time -f %M -o "$tmp/rss.ut" "${ut[@]}" >/dev/null
	printf '%-12s %6.2f (%.2f-%.2f) %6.2f (%.2f-%.2f) %6.2f× %8.2f %8.2f %5.2f× %5d/%-5d\n' \
		"$name" "$am" "$amin" "$amax" "$bm" "$bmin" "$bmax" \
		"$(awk -v a="$am" -v b="$bm" 'BEGIN { print a / b }')" "$aw" "$bw" \
		"$(awk -v a="$aw" -v b="$bw" 'BEGIN { print a / b }')" \
		$(($(cat "$tmp/rss.uf") / 1024)) $(($(cat "$tmp/rss.ut") / 1024))
done
