-- Graph:profile's policy, with no gpurun objects: its options, and the
-- times an instrumented twin of a graph recorded made into per-node
-- medians, shares and the critical path, and into text. The mechanism
-- (the twin, its events) is types/graph_profile.c's; the builtin
-- graph_profile.lua joins the two.
local profile = {}

profile.DEFAULT_REPLAYS = 20
profile.MAX_REPLAYS = 10000

-- check_options(options) -> replays, or nil and why (a bad-argument text).
function profile.check_options(options)
  if options == nil then
    return profile.DEFAULT_REPLAYS
  end
  if type(options) ~= "table" then
    return nil, ("table of options expected, got %s"):format(type(options))
  end
  for key in pairs(options) do
    if key ~= "replays" then
      return nil, ("unknown option %s (known: replays)"):format(
        type(key) == "string" and ("'" .. key .. "'") or type(key))
    end
  end
  local replays = options.replays
  if replays == nil then
    return profile.DEFAULT_REPLAYS
  end
  if math.type(replays) ~= "integer" or replays < 1 or replays > profile.MAX_REPLAYS then
    return nil, ("replays must be an integer from 1 to %d, got %s"):format(profile.MAX_REPLAYS,
      type(replays) == "number" and tostring(replays) or type(replays))
  end
  return replays
end

-- The median of a list of numbers (the mean of the middle two for an even
-- count); 0 for none.
function profile.median(values)
  local count = #values
  if count == 0 then return 0 end
  local sorted = table.move(values, 1, count, 1, {})
  table.sort(sorted)
  if count % 2 == 1 then
    return sorted[(count + 1) // 2]
  end
  return (sorted[count // 2] + sorted[count // 2 + 1]) / 2
end
local median = profile.median

-- The heaviest path through the DAG of `nodes` (each { dependencies =
-- { index... } }, indices from 1) weighted by weights[i] (0 or more): ->
-- the list of indices from a node without dependencies to one without
-- successors, and its weight.
function profile.critical_path(nodes, weights)
  local count = #nodes
  local successors, pending = {}, {}
  for i = 1, count do successors[i] = {} end
  for i = 1, count do
    pending[i] = #nodes[i].dependencies
    for _, d in ipairs(nodes[i].dependencies) do
      if d < 1 or d > count or math.type(d) ~= "integer" then
        error(("critical_path: node %d depends on %s, not a node"):format(i, tostring(d)), 2)
      end
      local list = successors[d]
      list[#list + 1] = i
    end
  end
  -- Kahn's order: best[i] is the heaviest path ending at i, through[i] its
  -- previous node.
  local ready, best, through, seen = {}, {}, {}, 0
  for i = 1, count do
    best[i] = weights[i]
    if pending[i] == 0 then ready[#ready + 1] = i end
  end
  local head = 1
  while head <= #ready do
    local i = ready[head]
    head, seen = head + 1, seen + 1
    for _, s in ipairs(successors[i]) do
      if through[s] == nil or best[i] + weights[s] > best[s] then
        best[s], through[s] = best[i] + weights[s], i
      end
      pending[s] = pending[s] - 1
      if pending[s] == 0 then ready[#ready + 1] = s end
    end
  end
  if seen < count then
    error("critical_path: the dependencies form a cycle", 2)
  end
  -- It ends at a node without successors: with weights of 0 or more, a
  -- path to one weighs no less, and nodes of 0 us still lie on it.
  local last
  for i = 1, count do
    if #successors[i] == 0 and (last == nil or best[i] > best[last]) then last = i end
  end
  local path = {}
  while last do
    table.insert(path, 1, last)
    last = through[last]
  end
  local total = 0
  for _, i in ipairs(path) do total = total + weights[i] end
  return path, total
end

-- summarize(nodes, record, plain_us) -> the profile. nodes: graph:nodes();
-- record: { starts, ends, empty }, replay r's node i at [(r - 1) * #nodes
-- + i], microseconds after the replay was queued, and empty[r] what an
-- empty bracket took in replay r; plain_us: the plain graph's replay
-- times. A node's time is its bracket's median less the empty bracket's:
-- the event record nodes' own cost is the twin's, not the node's. Returns
-- { nodes = { { index, kind, name, us, bracket_us, share, start_us,
-- critical }... }, critical_path = { index... }, critical_us, total_us
-- (the node times' sum), empty_us, twin_us (the twin's replay, first start
-- to last end), plain_us, replays }.
function profile.summarize(nodes, record, plain_us)
  local count = #nodes
  local replays = count > 0 and #record.starts // count or 0
  local durations, offsets, spans = {}, {}, {}
  for i = 1, count do durations[i], offsets[i] = {}, {} end
  for r = 1, replays do
    local base = (r - 1) * count
    local first, last = math.huge, -math.huge
    for i = 1, count do
      first = math.min(first, record.starts[base + i])
      last = math.max(last, record.ends[base + i])
    end
    for i = 1, count do
      durations[i][r] = math.max(0, record.ends[base + i] - record.starts[base + i])
      offsets[i][r] = record.starts[base + i] - first
    end
    spans[r] = last - first
  end
  local empty = median(record.empty or {})
  local out, brackets, weights, total = {}, {}, {}, 0
  for i = 1, count do
    brackets[i] = median(durations[i])
    weights[i] = math.max(0, brackets[i] - empty)
    total = total + weights[i]
  end
  local path, critical_us = profile.critical_path(nodes, weights)
  local on_path = {}
  for _, i in ipairs(path) do on_path[i] = true end
  for i, node in ipairs(nodes) do
    out[i] = { index = node.index or i, kind = node.kind, name = node.name, us = weights[i],
               bracket_us = brackets[i], share = total > 0 and weights[i] / total or 0,
               start_us = median(offsets[i]), critical = on_path[i] or false }
  end
  return { nodes = out, critical_path = path, critical_us = critical_us, total_us = total,
           empty_us = empty, twin_us = median(spans), plain_us = median(plain_us or {}),
           replays = replays }
end

-- format(profile) -> a text table: one row per node (its time, share and
-- start, '*' on the critical path), then the totals.
function profile.format(result)
  local lines = { ("%4s  %-28s %10s %7s %10s"):format("node", "name", "us", "share", "start us") }
  for _, node in ipairs(result.nodes) do
    local name = node.name and (node.name .. " (" .. node.kind .. ")") or node.kind
    lines[#lines + 1] = ("%4d%s %-28s %10.3f %6.1f%% %10.3f"):format(node.index,
      node.critical and "*" or " ", name:sub(1, 28), node.us, node.share * 100, node.start_us)
  end
  local path = {}
  for k, i in ipairs(result.critical_path) do path[k] = tostring(i) end
  lines[#lines + 1] = ("critical path (*): %s, %.3f us; all nodes %.3f us"):format(
    #path > 0 and table.concat(path, " -> ") or "none", result.critical_us, result.total_us)
  lines[#lines + 1] = ("node times net of an empty bracket's %.3f us; replay: instrumented %.3f us,"
    .. " plain %.3f us (medians of %d)"):format(result.empty_us, result.twin_us, result.plain_us,
    result.replays)
  return table.concat(lines, "\n")
end

return profile
