#
# callers.py: how many times each function was called, by caller.
#
#   utrace script -S scripts/callers.py [FUNC...]   (only the callees named, when given)
#
# Works with uftrace too (same script interface).

stacks = {}   # tid -> names of the open calls
counts = {}   # (caller, callee) -> calls
only = None


def uftrace_begin(ctx):
    global only
    if ctx["cmds"]:
        only = set(ctx["cmds"])


def uftrace_entry(ctx):
    stack = stacks.setdefault(ctx["tid"], [])
    caller = stack[-1] if stack else "(root)"
    name = ctx["name"]
    if only is None or name in only:
        counts[(caller, name)] = counts.get((caller, name), 0) + 1
    stack.append(name)


def uftrace_exit(ctx):
    stack = stacks.get(ctx["tid"])
    if stack:
        stack.pop()


def uftrace_end():
    print("%10s  %-30s  %s" % ("CALLS", "CALLER", "CALLEE"))
    for (caller, callee), n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
        print("%10d  %-30s  %s" % (n, caller, callee))
