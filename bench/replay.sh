#!/usr/bin/env bash
# Side-by-side benchmark of `uftrace replay` and `utrace replay` on the same recorded data.
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

compare replay "replay -d $DATA --no-pager" "replay -d $DATA --no-pager"

echo
printf '%s\n' "${summary[@]}"
