#!/usr/bin/env bash
# Side-by-side benchmark of `record --host`: uftrace 0.13 sending to `uftrace recv` against
# utrace sending to `utrace recv`, both on this machine (127.0.0.1, ports picked free), and
# utrace recording the same program locally, on a call-heavy program (bench/fib.c, fib
# $FIB_N). Each of the $RUNS rounds runs the three commands one after the other (interleaved,
# so the machine's load falls on all alike) and waits until the session has arrived whole
# (`info` written) before timing the next; the wall time counts the sender up to its exit.
# Prints the median (fastest-slowest) of each and the ratio uftrace/utrace of the medians,
# and checks that both receivers got the same number of bytes of records.
#
# Environment: UTRACE (default target/release/utrace, built if missing), UFTRACE (default
# uftrace), RUNS (default 7), FIB_N (default 27: 635,622 calls).
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
command -v python3 >/dev/null || die "python3 not found (picks free ports)"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/utrace-bench.XXXXXX")
servers=()
cleanup() {
	for pid in "${servers[@]}"; do kill "$pid" 2>/dev/null || true; done
	rm -rf "$tmp"
}
trap cleanup EXIT

free_port() {
	python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

gcc -pg -O0 -fno-inline -fno-builtin -o "$tmp/fib" bench/fib.c
mkdir "$tmp/cwd"
uport=$(free_port)
"$UTRACE" recv -d "$tmp/u" --port "$uport" 2>"$tmp/u.log" &
servers+=($!)
fport=$(free_port)
"$UFTRACE" recv -d "$tmp/f" --port "$fport" 2>"$tmp/f.log" &
servers+=($!)
sleep 0.5

# Wall time in nanoseconds of "$@" (run in $tmp/cwd), then waits for $RECEIVED/info.
wall() {
	local start end
	start=$(date +%s%N)
	(cd "$tmp/cwd" && "$@") >/dev/null 2>"$tmp/err" || die "failed (exit $?): $* ($(head -c 300 "$tmp/err"))"
	end=$(date +%s%N)
	echo $((end - start))
	if [[ -n $RECEIVED ]]; then
		for ((w = 0; w < 500; w++)); do
			[[ -s $RECEIVED/info ]] && break
			sleep 0.02
		done
		sleep 0.1
	fi
}

stats() {
	sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)], v[1], v[NR] }'
}

echo "bench: utrace $UTRACE (built $(date -r "$UTRACE" '+%F %T')), $("$UFTRACE" --version | head -n 1)"
echo "bench: fib $FIB_N --no-sched --no-event, median (fastest-slowest) of $RUNS interleaved runs"
: >"$tmp/fh" && : >"$tmp/uh" && : >"$tmp/ul"
for ((i = 0; i < RUNS; i++)); do
	RECEIVED=$tmp/f/d wall "$UFTRACE" record --no-sched --no-event --host 127.0.0.1 --port "$fport" -d d "$tmp/fib" "$FIB_N" >>"$tmp/fh"
	RECEIVED=$tmp/u/d wall "$UTRACE" record --no-sched --no-event --host 127.0.0.1 --port "$uport" -d d "$tmp/fib" "$FIB_N" >>"$tmp/uh"
	RECEIVED= wall "$UTRACE" record --no-sched --no-event -d "$tmp/local" "$tmp/fib" "$FIB_N" >>"$tmp/ul"
done
f_bytes=$(cat "$tmp"/f/d/*.dat | wc -c)
u_bytes=$(cat "$tmp"/u/d/*.dat | wc -c)
((f_bytes == u_bytes)) || echo "bench: warning: utrace recv got $u_bytes bytes of records, uftrace recv $f_bytes" >&2
((u_bytes > 0)) || die "utrace recv received nothing"

awk -v fh="$(stats <"$tmp/fh")" -v uh="$(stats <"$tmp/uh")" -v ul="$(stats <"$tmp/ul")" 'BEGIN {
	split(fh, F); split(uh, U); split(ul, L)
	printf "%-36s %8.1f ms (%.1f-%.1f)\n", "uftrace record --host -> uftrace recv", F[1] / 1e6, F[2] / 1e6, F[3] / 1e6
	printf "%-36s %8.1f ms (%.1f-%.1f)\n", "utrace record --host -> utrace recv", U[1] / 1e6, U[2] / 1e6, U[3] / 1e6
	printf "%-36s %8.1f ms (%.1f-%.1f)\n", "utrace record (local)", L[1] / 1e6, L[2] / 1e6, L[3] / 1e6
	printf "ratio uftrace/utrace (--host): %.2f\n", F[1] / U[1]
}'
