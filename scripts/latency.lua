--
-- latency.lua: per-function latency percentiles (of the calls the filters leave in).
--
--   utrace script -S scripts/latency.lua [TOP]     (default: the 20 slowest by p99)
--
-- The same table as latency.py. Works with uftrace too (same script interface).

local top = 20
local durations = {}

local function fmt(ns)
  for _, u in ipairs({ { "s", 1e9 }, { "ms", 1e6 }, { "us", 1e3 } }) do
    if ns >= u[2] then
      return string.format("%.3f %s", ns / u[2], u[1])
    end
  end
  return string.format("%d ns", ns)
end

-- nearest rank: the smallest value with at least p% of the values at or below it
local function percentile(values, p)
  return values[math.max(1, math.ceil(p / 100 * #values))]
end

function uftrace_begin(ctx)
  if ctx.cmds[1] then top = tonumber(ctx.cmds[1]) end
end

function uftrace_entry(ctx) end

function uftrace_exit(ctx)
  local list = durations[ctx.name]
  if not list then
    list = {}
    durations[ctx.name] = list
  end
  list[#list + 1] = ctx.duration
end

function uftrace_end()
  local rows = {}
  for name, values in pairs(durations) do
    table.sort(values)
    rows[#rows + 1] = { p99 = percentile(values, 99), name = name, values = values }
  end
  table.sort(rows, function(a, b)
    if a.p99 ~= b.p99 then return a.p99 > b.p99 end
    return a.name < b.name
  end)
  print(string.format("%12s  %12s  %12s  %12s  %12s  %s", "CALLS", "P50", "P90", "P99", "MAX", "FUNCTION"))
  for i = 1, math.min(top, #rows) do
    local r = rows[i]
    local v = r.values
    print(string.format("%12d  %12s  %12s  %12s  %12s  %s", #v, fmt(percentile(v, 50)),
      fmt(percentile(v, 90)), fmt(r.p99), fmt(v[#v]), r.name))
  end
end
