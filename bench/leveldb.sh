#!/usr/bin/env bash
# C++ names on a real program (issue 18): leveldb's db_bench recorded by uftrace 0.13 and by
# utrace, then `report`, `graph`, `replay` and `dump` of both data directories by both tools,
# compared name by name in each `--demangle` mode.
#
# The source is Debian's (`apt-get source leveldb`, a `deb-src` line is added to
# /etc/apt/sources.list.d/debian.sources when missing) and db_bench is built with cmake and
# $CFLAGS once, into $CACHE; later runs reuse both. For each data directory (recorded by
# uftrace, recorded by utrace) and each demangling mode (simple, full, no) it compares what
# does not depend on timing:
#   report  the function column with its call count, sorted (the rows' order follows the times);
#   graph   the function column (after ` : `), in order;
#   replay  the function column (after ` | `) of each task, tasks one after the other (as
#           tests/integration/normalize.rs `by_task`);
#   dump    each task's entry and exit records: kind, depth and name (without timestamps),
# and prints per comparison the number of lines that differ (uftrace's lines missing from
# utrace's output, `-`, and utrace's lines not in uftrace's, `+`) and the first differences.
# Exits 1 when any comparison differs.
#
# The default run writes 400 values of 1000 bytes with a 64 KB memtable, so that db_bench also
# flushes tables, compacts them and reads them back (838 distinct functions, 1.5 million replay
# lines); `-N leveldb::test::CompressibleString` leaves out the megabyte of random values that
# db_bench makes first (a million calls of the same four functions).
#
# Environment: UTRACE (default target/release/utrace, built if missing), UFTRACE (default
# uftrace), CACHE (default ${XDG_CACHE_HOME:-~/.cache}/utrace-bench/leveldb), CFLAGS (default
# uftrace's test flags, `-pg -O0 -fno-inline -fno-omit-frame-pointer`; `-O2 -pg` has clones
# such as `.isra.0`), NUM (db_bench --num, default 400), BENCHMARKS (default
# fillseq,readrandom), DB_ARGS (more db_bench options, default
# "--value_size=1000 --write_buffer_size=65536"), RECORD_ARGS (options of both `record`s,
# default "--no-event -N leveldb::test::CompressibleString"), MODES (default "simple full no"),
# SHOW (differences shown per comparison, default 10), KEEP (a directory: keep the data and the
# normalized outputs there instead of a temporary directory).
set -euo pipefail
shopt -s inherit_errexit

orig_pwd=$PWD
cd "$(dirname "$0")/.."
started=$(date +%s)

UFTRACE=${UFTRACE:-uftrace}
CACHE=${CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/utrace-bench/leveldb}
CFLAGS=${CFLAGS:--pg -O0 -fno-inline -fno-omit-frame-pointer}
NUM=${NUM:-400}
BENCHMARKS=${BENCHMARKS:-fillseq,readrandom}
DB_ARGS=${DB_ARGS---value_size=1000 --write_buffer_size=65536}
RECORD_ARGS=${RECORD_ARGS---no-event -N leveldb::test::CompressibleString}
MODES=${MODES:-simple full no}
SHOW=${SHOW:-10}

die() {
	echo "leveldb: $*" >&2
	exit 2
}
say() {
	echo "leveldb: $*" >&2
}

# shellcheck source=bench/utrace_bin.sh
source bench/utrace_bin.sh
locate_utrace leveldb
command -v "$UFTRACE" >/dev/null || die "$UFTRACE not found"

# --- the source ---------------------------------------------------------------------------------

# shellcheck source=tests/debian_source.sh
source tests/debian_source.sh
SRC=$(debian_source leveldb "$CACHE")

# --- the build ----------------------------------------------------------------------------------

# What the package's build needs for db_bench (its Build-Depends minus the docs and the
# optional snappy): cmake, and gmock for util/testutil.h.
missing=()
command -v cmake >/dev/null || missing+=(cmake)
[[ -f /usr/include/gmock/gmock.h ]] || missing+=(libgmock-dev)
if ((${#missing[@]})); then
	((EUID == 0)) || die "missing ${missing[*]} (apt-get install ${missing[*]})"
	say "apt-get install ${missing[*]}"
	apt-get install -y -q "${missing[@]}" >&2
fi

# One build directory per set of flags.
BUILD=$CACHE/build-$(printf '%s' "$CFLAGS" | md5sum | cut -c1-8)
DB_BENCH=$BUILD/db_bench
if [[ ! -x $DB_BENCH ]]; then
	say "building db_bench with '$CFLAGS' in $BUILD"
	cmake -S "$SRC" -B "$BUILD" -DCMAKE_BUILD_TYPE=None \
		-DCMAKE_C_FLAGS="$CFLAGS" -DCMAKE_CXX_FLAGS="$CFLAGS" \
		-DLEVELDB_BUILD_TESTS=OFF -DLEVELDB_BUILD_BENCHMARKS=ON -DBUILD_SHARED_LIBS=OFF >&2
	cmake --build "$BUILD" --target db_bench -j "$(nproc)" >&2
	[[ -x $DB_BENCH ]] || die "the build made no $DB_BENCH"
fi

# --- the recordings -----------------------------------------------------------------------------

if [[ -n ${KEEP:-} ]]; then
	[[ $KEEP == /* ]] || KEEP=$orig_pwd/$KEEP
	tmp=$KEEP
	rm -rf "$tmp"
	mkdir -p "$tmp"
else
	tmp=$(mktemp -d "${TMPDIR:-/tmp}/utrace-leveldb.XXXXXX")
	trap 'rm -rf "$tmp"' EXIT
fi

read -ra db_args <<<"$DB_ARGS"
read -ra record_args <<<"$RECORD_ARGS"
run_args=(--num="$NUM" --benchmarks="$BENCHMARKS" "${db_args[@]}")
# uftrace 0.13 sometimes fails on db_bench ("writing shmem name to pipe: Bad file descriptor"
# when a thread starts, then exit status 1): up to 3 tries.
for tool in uftrace utrace; do
	bin=$UFTRACE
	[[ $tool == utrace ]] && bin=$UTRACE
	for try in 1 2 3; do
		say "$tool record db_bench ${run_args[*]} (try $try)"
		rm -rf "$tmp/db" "$tmp/$tool.data"
		status=0
		"$bin" record "${record_args[@]}" -d "$tmp/$tool.data" "$DB_BENCH" "${run_args[@]}" \
			--db="$tmp/db" >"$tmp/$tool.record.out" 2>&1 || status=$?
		((status == 0)) && break
		say "$tool record failed (exit $status): $(grep -v '^\.\.\.' "$tmp/$tool.record.out" | tail -n 2)"
		((try < 3)) || die "$tool record failed 3 times"
	done
done
rm -rf "$tmp/db"

# --- normalizing --------------------------------------------------------------------------------

# report: "CALLS NAME" per row, sorted.
norm_report() {
	sed -nE 's/^ *[0-9.]+ +[a-z]+ +[0-9.]+ +[a-z]+ +([0-9]+)  (.*)$/\1 \2/p' | LC_ALL=C sort
}

# graph: the text after ` : `, in order.
norm_graph() {
	sed -n 's/^[^:]* : //p'
}

# replay: the function text of each task, tasks in order of first appearance (dir $1 for the
# per-task files).
norm_replay() {
	local dir=$1
	mkdir -p "$dir"
	awk -v dir="$dir" '
		{ sub(/[ \t]+$/, "") }
		/^#/ || $0 == "" { next }
		{
			at = index($0, " | ")
			if (at == 0) { fields = ""; text = $0 } else {
				fields = substr($0, 1, at - 1); text = substr($0, at + 3) }
			if (match(fields, /\[ *[0-9]+\]/)) {
				tid = substr(fields, RSTART + 1, RLENGTH - 2); gsub(/ /, "", tid)
			} else if (cur == "") tid = "none"; else tid = cur
			if (!(tid in seen)) { seen[tid] = 1; order[++n] = tid }
			cur = tid
			print text > (dir "/" tid)
		}
		END { for (i = 1; i <= n; i++) { close(dir "/" order[i]); print order[i] > (dir "/order") } }'
	[[ -f $dir/order ]] || return 0
	while read -r tid; do cat "$dir/$tid"; done <"$dir/order"
}

# dump: the entry and exit records without their timestamps (tid, kind, name, depth).
norm_dump() {
	sed -nE 's/^ *[0-9]+\.[0-9]+ +([0-9]+: \[(entry|exit )\].*)$/\1/p'
}

# --- comparing ----------------------------------------------------------------------------------

total_differ=0
results=()

# compare DATA MODE COMMAND: both tools' normalized output and the lines that differ.
compare() {
	local data=$1 mode=$2 cmd=$3 dir=$tmp/out/$1/$2/$3
	mkdir -p "$dir"
	local args=("$cmd" -d "$tmp/$data.data" --demangle="$mode" --no-pager)
	for tool in uftrace utrace; do
		local bin=$UFTRACE
		[[ $tool == utrace ]] && bin=$UTRACE
		"$bin" "${args[@]}" >"$dir/$tool.raw" 2>"$dir/$tool.err" ||
			echo "leveldb: $tool ${args[*]} failed (exit $?): $(head -n 1 "$dir/$tool.err")" >&2
		case $cmd in
		replay) norm_replay "$dir/$tool.tasks" <"$dir/$tool.raw" >"$dir/$tool" ;;
		*) "norm_$cmd" <"$dir/$tool.raw" >"$dir/$tool" ;;
		esac
	done
	diff --speed-large-files "$dir/uftrace" "$dir/utrace" >"$dir/diff" || true
	local minus plus lines
	minus=$(grep -c '^<' "$dir/diff" || true)
	plus=$(grep -c '^>' "$dir/diff" || true)
	lines=$(wc -l <"$dir/uftrace")
	local row
	row=$(printf '%-8s %-7s %-7s %10d %10d %10d' "$data" "$mode" "$cmd" "$lines" "$minus" "$plus")
	results+=("$row")
	echo "$row"
	if ((minus + plus)); then
		total_differ=$((total_differ + minus + plus))
		awk -v n="$SHOW" '/^[<>]/ { if (++shown > n) exit; print "    " $0 }' "$dir/diff"
	fi
	rm -rf "$dir/uftrace.tasks" "$dir/utrace.tasks"
	[[ -n ${KEEP:-} ]] || rm -f "$dir/uftrace.raw" "$dir/utrace.raw"
}

echo "uftrace: $("$UFTRACE" --version | head -n 1)"
echo "utrace:  $UTRACE (built $(date -r "$UTRACE" '+%F %T'))"
echo "program: $DB_BENCH ${run_args[*]} (built with $CFLAGS)"
echo "record:  ${record_args[*]}"
for data in uftrace utrace; do
	echo "data:    $data record: $(cat "$tmp/$data.data"/*.dat | wc -c) bytes of .dat," \
		"$(grep -c '^TASK' "$tmp/$data.data/task.txt") tasks"
done
echo
printf '%-8s %-7s %-7s %10s %10s %10s\n' data demangle command lines "-uftrace" "+utrace"
for data in uftrace utrace; do
	for mode in $MODES; do
		for cmd in report graph replay dump; do
			compare "$data" "$mode" "$cmd"
		done
	done
done

echo
echo "summary (lines: uftrace's normalized output; -: its lines utrace lacks; +: utrace's extra):"
printf '%s\n' "${results[@]}"
echo "differing lines: $total_differ; run time: $(($(date +%s) - started)) s"
((total_differ == 0))
