#!/usr/bin/env bash
# Installs what the tests need when it is missing, on Debian (12 or newer): gcc and g++ build
# testprogs/, uftrace is the reference whose output utrace must reproduce, tmux drives the tui
# test, systemtap-sdt-dev has <sys/sdt.h> for the SDT probes of testprogs/sdt.c. Quick to
# re-run: a package is installed only when its command (or header) is missing. Called by
# the README's test command (and so by .ci/run); as root or with sudo. GNU time measures the
# peak memory of utrace in the bounded tests. libpython3 and LuaJIT: the script engines.
set -euo pipefail

# The protobuf definitions of Perfetto's trace (PyPI package `perfetto`) decode the output of
# `dump --perfetto` in tests/integration/analysis_perfetto.rs. Debian's python3 refuses pip
# outside a venv (PEP 668) unless told.
if command -v python3 >/dev/null &&
	! python3 -c 'import perfetto.protos.perfetto.trace.perfetto_trace_pb2' 2>/dev/null; then
	echo "== installing the perfetto Python package (pip)"
	if ! python3 -m pip --version >/dev/null 2>&1 && command -v apt-get >/dev/null; then
		sudo=()
		((EUID == 0)) || sudo=(sudo)
		"${sudo[@]}" apt-get update -qq
		"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-pip </dev/null >/dev/null
	fi
	python3 -m pip install -q perfetto 2>/dev/null ||
		python3 -m pip install -q --break-system-packages perfetto
fi

missing=()
for pkg_cmd in gcc:gcc g++:g++ uftrace:uftrace tmux:tmux time:/usr/bin/time; do
	command -v "${pkg_cmd#*:}" >/dev/null || missing+=("${pkg_cmd%%:*}")
done
# <sys/sdt.h> for the testprogs with user SDT probes (-E).
[[ -e /usr/include/x86_64-linux-gnu/sys/sdt.h || -e /usr/include/sys/sdt.h ]] ||
	missing+=(systemtap-sdt-dev)
# libaio and liburing for the I/O testprogs (aio_read.c, uring_read.c; tests/integration/kernel_io.rs).
[[ -e /usr/include/libaio.h ]] || missing+=(libaio-dev)
[[ -e /usr/include/liburing.h ]] || missing+=(liburing-dev)
# `script -S`: utrace's Python engine links libpython3 (building it needs its headers), and
# uftrace's script engines open libpython3 and libluajit-5.1.so at run time.
[[ -x /usr/bin/python3-config ]] && compgen -G "/usr/lib/*/libpython3*.so" >/dev/null ||
	missing+=(python3-dev libpython3-dev)
[[ -e /usr/lib/x86_64-linux-gnu/libluajit-5.1.so ]] || missing+=(libluajit-5.1-dev)
((${#missing[@]})) || exit 0

if ! command -v apt-get >/dev/null; then
	echo "tests/setup.sh: install ${missing[*]} first (no apt-get on this machine)" >&2
	exit 1
fi
echo "== installing ${missing[*]} (Debian packages)"
sudo=()
((EUID == 0)) || sudo=(sudo)
"${sudo[@]}" apt-get update -qq
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
	"${missing[@]}" </dev/null >/dev/null
