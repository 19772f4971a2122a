#!/usr/bin/env bash
# Side-by-side benchmark of `uftrace record` and `utrace record`: the cost each tracer adds to
# one traced call, on a call-heavy program (bench/fib.c; fib 30 makes 2,692,537 calls).
#
# For each build mode (-pg, -pg -mfentry, -finstrument-functions) it takes the best wall time
# of $RUNS runs of
#   - the program alone, with n=1 and n=$FIB_N,
#   - each tracer recording it, with n=1 (start-up and finish) and n=$FIB_N,
# and prints, per tracer, the added cost per call:
#   ns/call = ((T_tracer(N) - T_tracer(1)) - (T_plain(N) - T_plain(1))) / calls
# and the ratio uftrace/utrace (how many times cheaper utrace is). The best of several runs is
# used because the machine is shared: noise only ever adds time. Both tracers write their data
# directory on the same file system ($TMPDIR) and run with --no-libcall (fib makes no library
# calls in its hot path). The call count comes from the data utrace recorded (32 bytes per
# call); the script checks that uftrace recorded the same number.
#
# With WORKLOAD=libcall the program is bench/libcall.c instead: one traced function calling
# strlen through the PLT $LIBCALL_N times, recorded with library-call hooks on, so that the
# cost per call is that of the PLT hook.
#
# Environment: UTRACE (utrace binary; default target/release/utrace, built if missing),
# UFTRACE (default uftrace), RUNS (default 7), FIB_N (default 30), MODES (default "pg fentry cyg"),
# EXTRA (extra options for both tracers, e.g. "-t 1us" or "-A fib@arg1 -R fib@retval"),
# WORKLOAD (fib or libcall), LIBCALL_N (default 2000000), UTRACE_EXTRA (options for utrace only,
# e.g. "--flight-recorder=16M": then utrace writes fewer records than uftrace, and says so).
set -euo pipefail
shopt -s inherit_errexit

orig_pwd=$PWD
cd "$(dirname "$0")/.."

RUNS=${RUNS:-7}
FIB_N=${FIB_N:-30}
WORKLOAD=${WORKLOAD:-fib}
LIBCALL_N=${LIBCALL_N:-2000000}
MODES=${MODES:-pg fentry cyg}
UFTRACE=${UFTRACE:-uftrace}
read -r -a EXTRA <<<"${EXTRA:-}"
read -r -a UTRACE_EXTRA <<<"${UTRACE_EXTRA:-}"

die() {
	echo "bench: $*" >&2
	exit 1
}

# shellcheck source=bench/utrace_bin.sh
source bench/utrace_bin.sh
locate_utrace bench
command -v "$UFTRACE" >/dev/null || die "$UFTRACE not found"
command -v gcc >/dev/null || die "gcc not found"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/utrace-bench.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# Best wall time in nanoseconds of RUNS runs of "$@" (data directory removed before each run).
best() {
	local best=0 i start end t
	for ((i = 0; i < RUNS; i++)); do
		rm -rf "$tmp/data" "$tmp/data.old"
		start=$(date +%s%N)
		"$@" >/dev/null 2>"$tmp/err" || die "failed (exit $?): $* ($(head -c 300 "$tmp/err"))"
		end=$(date +%s%N)
		t=$((end - start))
		((best == 0 || t < best)) && best=$t
	done
	echo "$best"
}

flags_of() {
	case $1 in
	pg) echo "-pg" ;;
	fentry) echo "-pg -mfentry" ;;
	cyg) echo "-finstrument-functions" ;;
	*) die "unknown mode $1" ;;
	esac
}

echo "bench: utrace $UTRACE (built $(date -r "$UTRACE" '+%F %T')), $("$UFTRACE" --version | head -n 1)"
case $WORKLOAD in
fib)
	src=bench/fib.c N=$FIB_N libcall=(--no-libcall)
	# fib(n) makes 2*F(n+1)-1 calls; main is one more.
	calls=$(awk -v n="$FIB_N" 'BEGIN { a = 0; b = 1; for (i = 0; i < n + 1; i++) { t = a + b; a = b; b = t } print 2 * a - 1 + 1 }')
	;;
libcall)
	src=bench/libcall.c N=$LIBCALL_N libcall=()
	calls=$LIBCALL_N
	;;
*) die "unknown WORKLOAD $WORKLOAD (fib or libcall)" ;;
esac

echo "bench: $WORKLOAD $N ${EXTRA[*]} utrace: ${UTRACE_EXTRA[*]}, best of $RUNS runs, data in $tmp ($(df -T "$tmp" | awk 'NR == 2 { print $2 }'))"
printf '%-8s %10s %12s %12s %12s %12s %8s\n' mode calls "plain ms" "uftrace ms" "utrace ms" \
	"uftrace ns" "" | sed 's/ *$//'
printf '%-8s %10s %12s %12s %12s %12s %12s %8s\n' "" "" "" "" "" "/call" "utrace ns/call" ratio

for mode in $MODES; do
	prog=$tmp/fib-$mode
	# shellcheck disable=SC2046 # the flags are meant to split
	gcc $(flags_of "$mode") -O0 -fno-inline -fno-builtin -o "$prog" "$src"

	plain1=$(best "$prog" 1)
	plainN=$(best "$prog" "$N")
	uf1=$(best "$UFTRACE" record "${libcall[@]}" --no-event "${EXTRA[@]}" -d "$tmp/data" "$prog" 1)
	ufN=$(best "$UFTRACE" record "${libcall[@]}" --no-event "${EXTRA[@]}" -d "$tmp/data" "$prog" "$N")
	uf_bytes=$(cat "$tmp"/data/*.dat | wc -c)
	ut1=$(best "$UTRACE" record "${libcall[@]}" "${EXTRA[@]}" "${UTRACE_EXTRA[@]}" -d "$tmp/data" "$prog" 1)
	utN=$(best "$UTRACE" record "${libcall[@]}" "${EXTRA[@]}" "${UTRACE_EXTRA[@]}" -d "$tmp/data" "$prog" "$N")
	ut_bytes=$(cat "$tmp"/data/*.dat | wc -c)
	# Same records (and argument payloads) from both: the same work was measured.
	((ut_bytes == uf_bytes)) ||
		echo "bench: warning: utrace wrote $ut_bytes bytes of records, uftrace $uf_bytes" >&2
	((ut_bytes > 0)) || die "utrace recorded nothing"

	awk -v mode="$mode" -v calls="$calls" -v p1="$plain1" -v pn="$plainN" \
		-v f1="$uf1" -v fn="$ufN" -v u1="$ut1" -v un="$utN" 'BEGIN {
		plain = pn - p1
		uf = (fn - f1 - plain) / calls
		ut = (un - u1 - plain) / calls
		printf "%-8s %10d %12.1f %12.1f %12.1f %12.1f %14.1f %7.2fx\n",
			mode, calls, pn / 1e6, fn / 1e6, un / 1e6, uf, ut, (ut > 0 ? uf / ut : 0)
	}'
done
