#!/usr/bin/env bash
# Side-by-side benchmark of the analysis commands `uftrace report`/`graph` and `utrace report`/
# `graph` on the same recorded data (and `report --task`, `graph FUNC`).
#
# Records `fib $FIB_N` once with uftrace, then for each comparison measures the median wall time
# of $RUNS runs of both tools (hyperfine and jq when present, else a timing loop) and the peak RSS of
# one run (/usr/bin/time). Prints one table row per comparison and the speedup.
#
# Environment: UTRACE (utrace binary; default target/release/utrace, built if missing),
# UFTRACE (default uftrace), RUNS (default 3), FIB_N (default 30).
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

echo
printf '%s\n' "${summary[@]}"
