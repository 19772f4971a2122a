--
-- callers.lua: how many times each function was called, by caller.
--
--   utrace script -S scripts/callers.lua [FUNC...]  (only the callees named, when given)
--
-- The same table as callers.py. Works with uftrace too (same script interface).

local stacks = {}  -- tid -> names of the open calls
local counts = {}  -- "caller\0callee" -> calls
local only = nil

function uftrace_begin(ctx)
  if #ctx.cmds > 0 then
    only = {}
    for _, f in ipairs(ctx.cmds) do only[f] = true end
  end
end

function uftrace_entry(ctx)
  local stack = stacks[ctx.tid]
  if not stack then
    stack = {}
    stacks[ctx.tid] = stack
  end
  local caller = stack[#stack] or "(root)"
  if not only or only[ctx.name] then
    local key = caller .. "\0" .. ctx.name
    counts[key] = (counts[key] or 0) + 1
  end
  stack[#stack + 1] = ctx.name
end

function uftrace_exit(ctx)
  local stack = stacks[ctx.tid]
  if stack and #stack > 0 then stack[#stack] = nil end
end

function uftrace_end()
  local rows = {}
  for key, n in pairs(counts) do
    local caller, callee = key:match("^(.-)%z(.*)$")
    rows[#rows + 1] = { n = n, caller = caller, callee = callee }
  end
  table.sort(rows, function(a, b)
    if a.n ~= b.n then return a.n > b.n end
    if a.caller ~= b.caller then return a.caller < b.caller end
    return a.callee < b.callee
  end)
  print(string.format("%10s  %-30s  %s", "CALLS", "CALLER", "CALLEE"))
  for _, r in ipairs(rows) do
    print(string.format("%10d  %-30s  %s", r.n, r.caller, r.callee))
  end
end
