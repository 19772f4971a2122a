#!/usr/bin/env bash
# Start-up and end of an attach (`utrace record -p PID`): the wall time of `utrace record -p PID
# --duration=1ms` on a running program built without -pg (testprogs/attach_work.c, -O2): stop
# every thread, load libmcount with the process's dlopen, start the session, stop again, end
# the session, detach, finish the data directory. The first attach loads libmcount; the next
# ones find it loaded. Prints the best, median and worst of $RUNS attaches (after the first),
# and the first's, and checks that the program's output is that of an untraced run.
# uftrace 0.13 cannot attach to a running process: there is nothing to compare with.
#
# Environment: UTRACE (utrace binary; default target/release/utrace, built if missing), RUNS
# (default 20).
set -euo pipefail
shopt -s inherit_errexit

orig_pwd=$PWD
cd "$(dirname "$0")/.."

RUNS=${RUNS:-20}

# shellcheck source=bench/utrace_bin.sh
source bench/utrace_bin.sh
locate_utrace "attach.sh"

work=$(mktemp -d)
trap 'kill "$pid" 2>/dev/null || true; rm -rf "$work"' EXIT
gcc -O2 -fno-builtin -o "$work/prog" testprogs/attach_work.c
ticks=$((RUNS * 2 + 40))
"$work/prog" "$ticks" >"$work/out" &
pid=$!
sleep 0.5

ms() { date +%s%N; }
times=()
for ((i = 0; i <= RUNS; i++)); do
	t0=$(ms)
	"$UTRACE" record --duration=1ms -d "$work/d$i" -p "$pid" || die "attach $i failed"
	t1=$(ms)
	times+=($(((t1 - t0) / 1000)))
	rm -rf "$work/d$i"
	sleep 0.05
done
wait "$pid" || die "the program failed"
"$work/prog" "$ticks" | cmp -s - "$work/out" || die "the program's output changed"

first=${times[0]}
sorted=$(printf '%s\n' "${times[@]:1}" | sort -n)
best=$(head -1 <<<"$sorted")
worst=$(tail -1 <<<"$sorted")
median=$(sed -n "$(((RUNS + 1) / 2))p" <<<"$sorted")
printf 'attach + detach + finish, microseconds (whole utrace run)\n'
printf '  first (dlopen): %8d\n' "$first"
printf '  again: best %8d   median %8d   worst %8d   (%d runs)\n' "$best" "$median" "$worst" "$RUNS"
