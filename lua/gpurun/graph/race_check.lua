-- The race check of a graph built by hand: pairs of nodes that touch
-- overlapping memory, one writing, with no path of edges between them. No
-- GPU and no gpurun objects: the nodes are plain tables (graph/accesses.lua
-- makes them of a Graph's facts, specs record them), so that it runs and is
-- tested on any machine. race_check.check(nodes) -> races, unchecked says
-- what a node holds. A conditional node stands, at its level, for all its
-- bodies touch: a body's node is ordered with the rest as its conditional
-- node is, and checked against its own body's nodes only (one body of an
-- if/else or switch runs per launch; a loop's passes follow each other).
local access = require("gpurun.pipeline.access")
local common = require("gpurun.common")

local raise = common.raise
local hazard_of, overlap = access.hazard, access.overlap

local race_check = {}

local MODES = access.MODES

local BIT_OF = {}
for bit = 0, 63 do BIT_OF[1 << bit] = bit end

local function check_input(nodes)
  if type(nodes) ~= "table" then
    raise(("race_check.check: a list of nodes expected, got %s"):format(type(nodes)))
  end
  for i, node in ipairs(nodes) do
    if type(node) ~= "table" or type(node.dependencies) ~= "table" then
      raise(("race_check.check: node %d is not { kind, dependencies = {...}, accesses = {...} }")
        :format(i))
    end
    for _, d in ipairs(node.dependencies) do
      if math.type(d) ~= "integer" or d < 1 or d > #nodes or d == i then
        raise(("race_check.check: node %d depends on %s, not another node of the list")
          :format(i, tostring(d)))
      end
      if nodes[d].conditional ~= node.conditional or nodes[d].branch ~= node.branch then
        raise(("race_check.check: node %d depends on node %d, which is in another graph (a body "
          .. "and its outside are ordered through the conditional node)"):format(i, d))
      end
    end
    local c = node.conditional
    if c ~= nil and (math.type(c) ~= "integer" or not nodes[c] or c == i) then
      raise(("race_check.check: node %d's conditional %s is not a node of the list")
        :format(i, tostring(c)))
    end
    for a, x in ipairs(node.accesses or {}) do
      if not MODES[x.mode] or type(x.lo) ~= "number" or type(x.hi) ~= "number" then
        raise(("race_check.check: node %d's access %d is not { key, lo, hi, mode = r|w|rw }")
          :format(i, a))
      end
    end
  end
end

-- Each node's accesses with those of the bodies it holds, in three
-- columns: the access, the node that makes it, and its id (the same
-- wherever the access is listed, so that a race's sides are made once).
local function flatten(nodes, children)
  local flat_access, flat_node, flat_id, first_id = {}, {}, {}, {}
  local next_id = 1
  for i, node in ipairs(nodes) do
    first_id[i] = next_id
    next_id = next_id + #(node.accesses or {})
  end
  local function collect(i, into, seen)
    if seen[i] then
      raise(("race_check.check: node %d holds itself through conditional bodies"):format(i))
    end
    seen[i] = true
    local node = nodes[i]
    if not node.unknown then
      local id = first_id[i] - 1
      for a, x in ipairs(node.accesses or {}) do
        local n = #into.access + 1
        into.access[n], into.node[n], into.id[n] = x, i, id + a
      end
    end
    for _, child in ipairs(children[i] or {}) do
      collect(child, into, seen)
    end
    seen[i] = nil
  end
  for i = 1, #nodes do
    local into = { access = {}, node = {}, id = {} }
    collect(i, into, {})
    flat_access[i], flat_node[i], flat_id[i] = into.access, into.node, into.id
  end
  return { access = flat_access, node = flat_node, id = flat_id }
end

-- The members of one level in a topological order, or an error naming a
-- node of a cycle.
local function topological(nodes, members)
  local pending, order, after = {}, {}, {}
  for _, i in ipairs(members) do
    pending[i] = #nodes[i].dependencies
    for _, d in ipairs(nodes[i].dependencies) do
      after[d] = after[d] or {}
      after[d][#after[d] + 1] = i
    end
  end
  local ready = {}
  for _, i in ipairs(members) do
    if pending[i] == 0 then ready[#ready + 1] = i end
  end
  local head = 1
  while head <= #ready do
    local i = ready[head]
    head = head + 1
    order[#order + 1] = i
    for _, j in ipairs(after[i] or {}) do
      pending[j] = pending[j] - 1
      if pending[j] == 0 then ready[#ready + 1] = j end
    end
  end
  if #order < #members then
    for _, i in ipairs(members) do
      if pending[i] > 0 then
        raise(("race_check.check: the dependencies make a cycle through node %d"):format(i))
      end
    end
  end
  return order
end

-- One node of a race; top: the top-level node that holds it (itself, or
-- the outermost conditional node around its body). Made once per access.
local function side(nodes, i, x, id, sides)
  local made = sides[id]
  if made then return made end
  local node = nodes[i]
  local top = i
  while nodes[top].conditional do top = nodes[top].conditional end
  made = { index = i, kind = node.kind, name = node.name, conditional = node.conditional,
           branch = node.branch, top = top, mode = x.mode, label = x.label, buffer = x.buffer,
           parameter = x.parameter }
  sides[id] = made
  return made
end

local function race_order(a, b)
  if a.first.index ~= b.first.index then return a.first.index < b.first.index end
  if a.second.index ~= b.second.index then return a.second.index < b.second.index end
  return a.lo < b.lo
end

-- Every conflicting pair of accesses between the level's members u and v
-- (unordered; each pair of a level is expanded once, so each pair of
-- accesses is met once), as races between the nodes that make them. The
-- races of one pair of nodes come from one call: each such group is
-- sorted here and listed by its key, for check() to put in order.
local function expand(nodes, flat, u, v, found)
  local ua, un, uid = flat.access[u], flat.node[u], flat.id[u]
  local va, vn, vid = flat.access[v], flat.node[v], flat.id[v]
  local races, sides = found.races, found.sides
  local start = #races + 1
  for a = 1, #ua do
    local x = ua[a]
    for b = 1, #va do
      local y = va[b]
      if (x.mode ~= "r" or y.mode ~= "r") and overlap(x, y) then
        local i, j, xi, yj, xid, yid = un[a], vn[b], x, y, uid[a], vid[b]
        if j < i then i, j, xi, yj, xid, yid = j, i, y, x, yid, xid end
        races[#races + 1] = {
          first = side(nodes, i, xi, xid, sides), second = side(nodes, j, yj, yid, sides),
          hazard = hazard_of(xi.mode, yj.mode), key = xi.key,
          lo = xi.lo > yj.lo and xi.lo or yj.lo, hi = xi.hi < yj.hi and xi.hi or yj.hi,
          buffer = xi.buffer, label = xi.label,
        }
      end
    end
  end
  local stop = #races
  if stop > start then
    local group = table.move(races, start, stop, 1, {})
    table.sort(group, race_order)
    table.move(group, 1, #group, start, races)
  end
  local keys, at, width, last = found.group_keys, found.group_start, found.width, nil
  for t = start, stop do
    local g = races[t].first.index * width + races[t].second.index
    if g ~= last then
      keys[#keys + 1], at[g], last = g, t, g
    end
  end
end

-- One level: its members ordered, an ancestor bitset per member, and the
-- accesses grouped by range (classes), each class with the members so far
-- that wrote it and that read it, as bitsets: a member conflicts with the
-- earlier ones that wrote (or, when it writes, touched) a class that
-- overlaps one of its own, less its ancestors.
local function check_level(nodes, members, flat, found)
  local order = topological(nodes, members)
  local k = #order
  if k < 2 then return end
  local words = (k + 63) // 64
  local position = {}
  for p, i in ipairs(order) do position[i] = p end
  local ancestors = {}
  for p = 1, k do
    local base = (p - 1) * words
    for w = 1, words do ancestors[base + w] = 0 end
    for _, d in ipairs(nodes[order[p]].dependencies) do
      local q = position[d]
      local qbase = (q - 1) * words
      for w = 1, words do
        ancestors[base + w] = ancestors[base + w] | ancestors[qbase + w]
      end
      local w = (q - 1) // 64 + 1
      ancestors[base + w] = ancestors[base + w] | (1 << ((q - 1) % 64))
    end
  end
  -- Classes: one per (key, lo, hi), each with the classes it overlaps.
  local class_of_key, classes = {}, {}
  local class_at = {} -- per member position, its accesses' classes
  for p = 1, k do
    local list, at = flat.access[order[p]], {}
    for a = 1, #list do
      local x = list[a]
      local by_range = class_of_key[x.key]
      if not by_range then
        by_range = {}
        class_of_key[x.key] = by_range
      end
      local range = x.lo .. ":" .. x.hi
      local c = by_range[range]
      if not c then
        c = #classes + 1
        classes[c] = { key = x.key, lo = x.lo, hi = x.hi, writers = {}, readers = {} }
        for w = 1, words do classes[c].writers[w], classes[c].readers[w] = 0, 0 end
        by_range[range] = c
      end
      at[a] = c
    end
    class_at[p] = at
  end
  local by_key = {}
  for c, class in ipairs(classes) do
    local list = by_key[class.key]
    if not list then
      list = {}
      by_key[class.key] = list
    end
    list[#list + 1] = c
  end
  for _, list in pairs(by_key) do
    table.sort(list, function(a, b) return classes[a].lo < classes[b].lo end)
    for s = 1, #list do
      local c = classes[list[s]]
      c.overlapping = c.overlapping or {}
      if c.lo < c.hi then c.overlapping[#c.overlapping + 1] = list[s] end
      for t = s + 1, #list do
        local d = classes[list[t]]
        if d.lo >= c.hi then break end
        if d.lo < d.hi and c.lo < c.hi then
          c.overlapping[#c.overlapping + 1] = list[t]
          d.overlapping = d.overlapping or {}
          d.overlapping[#d.overlapping + 1] = list[s]
        end
      end
    end
  end
  local pairs_seen = {}
  for p = 1, k do
    local u = order[p]
    local list, at = flat.access[u], class_at[p]
    local base = (p - 1) * words
    for a = 1, #list do
      local writes = list[a].mode ~= "r"
      local over = classes[at[a]].overlapping
      for w = 1, words do
        local x = 0
        for o = 1, #over do
          local c = classes[over[o]]
          x = x | c.writers[w]
          if writes then x = x | c.readers[w] end
        end
        x = x & ~ancestors[base + w]
        while x ~= 0 do
          local low = x & -x
          x = x & ~low
          local q = (w - 1) * 64 + BIT_OF[low] + 1
          local pair = q * (k + 1) + p
          if not pairs_seen[pair] then
            pairs_seen[pair] = true
            expand(nodes, flat, order[q], u, found)
          end
        end
      end
    end
    local w, bit = (p - 1) // 64 + 1, 1 << ((p - 1) % 64)
    for a = 1, #list do
      local c = classes[at[a]]
      if list[a].mode ~= "r" then
        c.writers[w] = c.writers[w] | bit
      else
        c.readers[w] = c.readers[w] | bit
      end
    end
  end
end

-- check(nodes) -> races, unchecked: races in the order of their nodes, each
-- { first = { index, kind, name, conditional, branch, top, mode, label, buffer,
-- parameter (a kernel's argument position) },
-- second = { ... }, hazard = "RAW" | "WAR" | "WAW" (first's access, then
-- second's, in the list's order), key, lo, hi (the bytes both touch),
-- label, buffer (first's) }; unchecked: { { index, kind, name, why } } for
-- the nodes whose accesses are not known.
--
-- nodes: a list; node i is { kind, name, dependencies = { index... } (nodes
-- of its own graph: the top level, or the same body), conditional = index
-- of the conditional node whose body holds it (nil at the top level),
-- branch = which of that node's bodies (1..), accesses = { { key, lo, hi,
-- mode = "r" | "w" | "rw", label, buffer, parameter } }, unknown = why its
-- accesses are not known (then it is left out, and listed in
-- `unchecked`) }. key names an address space and [lo, hi) its bytes
-- (pipeline/access.lua's overlap rule); label and buffer say what the
-- memory is, for the report.
function race_check.check(nodes)
  check_input(nodes)
  local children, levels, level_list = {}, {}, {}
  for i, node in ipairs(nodes) do
    local c = node.conditional
    if c then
      children[c] = children[c] or {}
      children[c][#children[c] + 1] = i
    end
    local key = c and (c .. ":" .. tostring(node.branch)) or "top"
    local level = levels[key]
    if not level then
      level = {}
      levels[key] = level
      level_list[#level_list + 1] = level
    end
    level[#level + 1] = i
  end
  local flat = flatten(nodes, children)
  local found = { races = {}, sides = {}, group_keys = {}, group_start = {}, width = #nodes + 1 }
  for _, members in ipairs(level_list) do
    check_level(nodes, members, flat, found)
  end
  local keys, at, found_races, races = found.group_keys, found.group_start, found.races, {}
  table.sort(keys)
  for _, g in ipairs(keys) do
    local t = at[g]
    repeat
      races[#races + 1] = found_races[t]
      t = t + 1
      local next_race = found_races[t]
    until not next_race or next_race.first.index * found.width + next_race.second.index ~= g
  end
  local unchecked = {}
  for i, node in ipairs(nodes) do
    if node.unknown then
      unchecked[#unchecked + 1] = { index = i, kind = node.kind, name = node.name, why = node.unknown }
    end
  end
  return races, unchecked
end

-- A node as a report names it: "node 3 (kernel scale)", "node 9 (memset,
-- body 1 of node 4)".
function race_check.node_text(n)
  local what = n.name and (n.kind .. " " .. n.name) or n.kind
  if n.conditional then
    what = what .. (", body %d of node %d"):format(n.branch or 1, n.conditional)
  end
  return ("node %d (%s)"):format(n.index, what)
end

-- One line per race: "node 2 (kernel scale) and node 3 (kernel shift):
-- write after write on x (bytes 0x7f0000000000..0x7f0000000100)".
function race_check.describe(race)
  return ("%s and %s, unordered: %s (%s) on %s, bytes [0x%x, 0x%x)"):format(
    race_check.node_text(race.first), race_check.node_text(race.second), race.hazard,
    access.HAZARD[race.hazard], race.label or "memory", race.lo, race.hi)
end

return race_check
