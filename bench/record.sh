#!/usr/bin/env bash
# Side-by-side benchmark of `uftrace record` and `utrace record`: the cost each tracer adds to
# one traced call, on a call-heavy program (bench/fib.c; fib 30 makes 2,692,537 calls).
#
# For each build mode (-pg, -pg -mfentry, -finstrument-functions) it runs, $RUNS times each and
# interleaved (so that the machine's load falls on all of them alike),
#   - the program alone, with n=1 and n=$FIB_N,
#   - each tracer recording it, with n=1 (start-up and finish) and n=$FIB_N,
# and prints, per tracer, the median wall time of the n=$FIB_N runs with their spread
# (fastest-slowest) and the added cost per call:
#   ns/call = ((T_tracer(N) - T_tracer(1)) - (T_plain(N) - T_plain(1))) / calls
# from the medians (in parentheses: the same from the fastest and the slowest T_tracer(N)), and
# the ratio uftrace/utrace of the medians (how many times cheaper utrace is). Both tracers
# write their data directory on the same file system ($TMPDIR) and run with --no-libcall (fib
# makes no library calls in its hot path). The call count comes from fib's arithmetic; the
# script checks that both tracers wrote the same number of bytes of records.
#
# The floor column: the same program with bench/floor's least possible hook preloaded (the time
# stamp counter read and a 16-byte record stored at each entry and exit, and for -pg/-mfentry the
# return hijacked through a shadow stack; nothing checked, nothing written out), measured the same
# way in the same loop. It is what any tracer of this design costs on this machine; "best" is
# uftrace's cost over it, the largest ratio a tracer could reach here. FLOOR=0 leaves it out.
#
# With WORKLOAD=libcall the program is bench/libcall.c instead: one traced function calling
# strlen through the PLT $LIBCALL_N times, recorded with library-call hooks on, so that the
# cost per call is that of the PLT hook.
#
# Environment: UTRACE (utrace binary; default target/release/utrace, built if missing),
# UFTRACE (default uftrace), RUNS (default 9), FIB_N (default 30), MODES (default "pg fentry cyg"),
# EXTRA (extra options for both tracers, e.g. "-t 1us" or "-A fib@arg1 -R fib@retval"),
# WORKLOAD (fib or libcall), LIBCALL_N (default 2000000), TIMING (whole: the wall time of each
# command, the default; program: the traced program's own elapsed time as both tracers print it
# with `record --time`, which leaves out the recorders' start-up and finishing, whose waits
# are as long as a whole fib 30 run on a loaded machine), UTRACE_EXTRA (options for utrace
# only, e.g. "--flight-recorder=16M": then utrace writes fewer records than uftrace, and says so).
set -euo pipefail
shopt -s inherit_errexit

orig_pwd=$PWD
cd "$(dirname "$0")/.."

RUNS=${RUNS:-9}
FIB_N=${FIB_N:-30}
WORKLOAD=${WORKLOAD:-fib}
TIMING=${TIMING:-whole}
FLOOR=${FLOOR:-1}
LIBCALL_N=${LIBCALL_N:-2000000}
MODES=${MODES:-pg fentry cyg}
UFTRACE=${UFTRACE:-uftrace}
read -r -a EXTRA <<<"${EXTRA:-}"
read -r -a UTRACE_EXTRA <<<"${UTRACE_EXTRA:-}"

# shellcheck source=bench/utrace_bin.sh
source bench/utrace_bin.sh
locate_utrace bench
command -v "$UFTRACE" >/dev/null || die "$UFTRACE not found"
command -v gcc >/dev/null || die "gcc not found"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/utrace-bench.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# Wall time in nanoseconds of one run of "$@" (data directory removed first); with
# TIMING=program and a tracer's `record`, the program's elapsed time that `--time` prints.
wall() {
	local start end
	rm -rf "$tmp/data" "$tmp/data.old"
	if [[ $TIMING == program && ${2:-} == record ]]; then
		"$1" record --time "${@:3}" >"$tmp/out" 2>"$tmp/err" ||
			die "failed (exit $?): $* ($(head -c 300 "$tmp/err"))"
		awk '/^elapsed time:/ { printf "%.0f\n", $3 * 1e9 }' "$tmp/out"
		return
	fi
	start=$(date +%s%N)
	"$@" >/dev/null 2>"$tmp/err" || die "failed (exit $?): $* ($(head -c 300 "$tmp/err"))"
	end=$(date +%s%N)
	echo $((end - start))
}

# "median min max" of the numbers on stdin.
stats() {
	sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)], v[1], v[NR] }'
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

echo "bench: $WORKLOAD $N ${EXTRA[*]} utrace: ${UTRACE_EXTRA[*]}, median (fastest-slowest) of $RUNS interleaved runs, timing: $TIMING, data in $tmp ($(df -T "$tmp" | awk 'NR == 2 { print $2 }'))"
printf '%-8s %9s %8s %24s %24s %26s %26s %7s' mode calls "plain ms" "uftrace ms" "utrace ms" \
	"uftrace ns/call" "utrace ns/call" ratio
[[ $FLOOR == 1 && $WORKLOAD == fib ]] && printf ' %26s %6s' "floor ns/call" best
echo

for mode in $MODES; do
	prog=$tmp/fib-$mode
	# shellcheck disable=SC2046 # the flags are meant to split
	gcc $(flags_of "$mode") -O0 -fno-inline -fno-builtin -o "$prog" "$src"

	floor=
	if [[ $FLOOR == 1 && $WORKLOAD == fib ]]; then
		floor=$tmp/floor-$mode.so
		case $mode in
		pg) gcc -shared -fPIC -o "$floor" bench/floor/hijack.S ;;
		fentry) gcc -DFENTRY -shared -fPIC -o "$floor" bench/floor/hijack.S ;;
		cyg) gcc -O2 -shared -fPIC -ftls-model=initial-exec -o "$floor" bench/floor/cyg.c ;;
		esac
	fi

	: >"$tmp/p1" && : >"$tmp/pN" && : >"$tmp/f1" && : >"$tmp/fN" && : >"$tmp/u1" && : >"$tmp/uN"
	: >"$tmp/h1" && : >"$tmp/hN"
	for ((i = 0; i < RUNS; i++)); do
		if [[ -n $floor ]]; then
			wall env LD_PRELOAD="$floor" "$prog" 1 >>"$tmp/h1"
			wall env LD_PRELOAD="$floor" "$prog" "$N" >>"$tmp/hN"
		fi
		wall "$prog" 1 >>"$tmp/p1"
		wall "$prog" "$N" >>"$tmp/pN"
		wall "$UFTRACE" record "${libcall[@]}" --no-event "${EXTRA[@]}" -d "$tmp/data" "$prog" 1 >>"$tmp/f1"
		wall "$UFTRACE" record "${libcall[@]}" --no-event "${EXTRA[@]}" -d "$tmp/data" "$prog" "$N" >>"$tmp/fN"
		uf_bytes=$(cat "$tmp"/data/*.dat | wc -c)
		wall "$UTRACE" record "${libcall[@]}" "${EXTRA[@]}" "${UTRACE_EXTRA[@]}" -d "$tmp/data" "$prog" 1 >>"$tmp/u1"
		wall "$UTRACE" record "${libcall[@]}" "${EXTRA[@]}" "${UTRACE_EXTRA[@]}" -d "$tmp/data" "$prog" "$N" >>"$tmp/uN"
		ut_bytes=$(cat "$tmp"/data/*.dat | wc -c)
	done
	# Same records (and argument payloads) from both: the same work was measured.
	((ut_bytes == uf_bytes)) ||
		echo "bench: warning: utrace wrote $ut_bytes bytes of records, uftrace $uf_bytes" >&2
	((ut_bytes > 0)) || die "utrace recorded nothing"

	awk -v mode="$mode" -v calls="$calls" \
		-v p1="$(stats <"$tmp/p1")" -v pn="$(stats <"$tmp/pN")" \
		-v f1="$(stats <"$tmp/f1")" -v fn="$(stats <"$tmp/fN")" \
		-v u1="$(stats <"$tmp/u1")" -v un="$(stats <"$tmp/uN")" \
		-v h1="$([[ -n $floor ]] && stats <"$tmp/h1")" -v hn="$([[ -n $floor ]] && stats <"$tmp/hN")" 'BEGIN {
		split(p1, P1); split(pn, PN); split(f1, F1); split(fn, FN); split(u1, U1); split(un, UN)
		split(h1, H1); split(hn, HN)
		plain = PN[1] - P1[1]
		for (k = 1; k <= 3; k++) {
			uf[k] = (FN[k] - F1[1] - plain) / calls
			ut[k] = (UN[k] - U1[1] - plain) / calls
		}
		printf "%-8s %9d %8.1f %8.1f (%6.1f-%6.1f) %8.1f (%6.1f-%6.1f) %7.1f (%7.1f-%7.1f) %7.1f (%7.1f-%7.1f) %6.2fx",
			mode, calls, PN[1] / 1e6, FN[1] / 1e6, FN[2] / 1e6, FN[3] / 1e6,
			UN[1] / 1e6, UN[2] / 1e6, UN[3] / 1e6, uf[1], uf[2], uf[3], ut[1], ut[2], ut[3],
			(ut[1] > 0 ? uf[1] / ut[1] : 0)
		if (hn != "") {
			for (k = 1; k <= 3; k++)
				fl[k] = (HN[k] - H1[1] - plain) / calls
			printf " %7.1f (%7.1f-%7.1f) %5.2fx", fl[1], fl[2], fl[3], (fl[1] > 0 ? uf[1] / fl[1] : 0)
		}
		printf "\n"
	}'
done
