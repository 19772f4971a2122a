# Sourced by the benchmarks, after they `cd` to the repository root with the caller's directory
# in $orig_pwd: defines `die` (one line on stderr, exit 1) and `locate_utrace`, which sets
# UTRACE to the utrace binary to measure.
# $UTRACE when given (a relative path is taken from the caller's directory, a bare name from
# $PATH), else target/release/utrace, built when missing. $1 prefixes the build message.
# shellcheck shell=bash
die() {
	echo "bench: $*" >&2
	exit 1
}

locate_utrace() {
	if [[ -n ${UTRACE:-} ]]; then
		[[ $UTRACE == */* && $UTRACE != /* ]] && UTRACE=$orig_pwd/$UTRACE
		local found
		found=$(type -P "$UTRACE") || die "UTRACE=$UTRACE is not executable"
		UTRACE=$found
	else
		UTRACE=$PWD/${CARGO_TARGET_DIR:-target}/release/utrace
		if [[ ! -x $UTRACE ]]; then
			echo "$1: building $UTRACE" >&2
			cargo build --release -p tracer --bin utrace >&2
		fi
	fi
}
