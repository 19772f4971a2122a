#
# latency.py: per-function latency percentiles (of the calls the filters leave in).
#
#   utrace script -S scripts/latency.py [TOP]      (default: the 20 slowest by p99)
#   utrace record -S scripts/latency.py ./prog
#
# Works with uftrace too (same script interface).

import math

top = 20
durations = {}


def fmt(ns):
    for unit, div in (("s", 1e9), ("ms", 1e6), ("us", 1e3)):
        if ns >= div:
            return "%.3f %s" % (ns / div, unit)
    return "%d ns" % ns


def percentile(sorted_values, p):
    # nearest rank: the smallest value with at least p% of the values at or below it
    rank = max(1, math.ceil(p / 100.0 * len(sorted_values)))
    return sorted_values[rank - 1]


def uftrace_begin(ctx):
    global top
    if ctx["cmds"]:
        top = int(ctx["cmds"][0])


def uftrace_entry(ctx):
    pass


def uftrace_exit(ctx):
    durations.setdefault(ctx["name"], []).append(ctx["duration"])


def uftrace_end():
    rows = []
    for name, values in durations.items():
        values.sort()
        rows.append((percentile(values, 99), name, values))
    rows.sort(key=lambda r: (-r[0], r[1]))
    print("%12s  %12s  %12s  %12s  %12s  %s" % ("CALLS", "P50", "P90", "P99", "MAX", "FUNCTION"))
    for p99, name, values in rows[:top]:
        print("%12d  %12s  %12s  %12s  %12s  %s" % (
            len(values), fmt(percentile(values, 50)), fmt(percentile(values, 90)),
            fmt(p99), fmt(values[-1]), name))
