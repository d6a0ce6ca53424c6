-- The planner behind gpurun.pipeline: declared stages and the data they
-- read and write in, a schedule out. No GPU and no gpurun objects: every
-- input is a plain table, so that the inference runs (and is tested) on any
-- machine.
--
--   plan.build(data, stages, options) -> plan
--
-- data: { { id, name, key, lo, hi, temporary, filled, count, dtype }... }:
--   key names an address space (a device's memory, host memory, or one
--   temporary) and [lo, hi) the bytes the data covers in it, so that two
--   data overlap when they share the key and their ranges intersect (a view
--   and its base, two views of one buffer).
-- stages: { { name, kind, accesses = { { data = d, mode = "r" | "w" | "rw",
--   maybe_read = bool, how = text } }, fusion = nil or { count, device } } }
--   in declaration order.
-- options: max_streams (>= 1), fuse (boolean), can_fuse(group, stage,
--   stages) -> whether the stage's code joins the group's (the caller's
--   check: one element count, one device, code it can splice).
--
-- The plan (everything indexes stages and units by their position):
--   edges       { { from, to, data = name, hazard = "RAW" | "WAR" | "WAW" } }:
--               the ordering each conflicting pair needs, in declaration
--               order (sequential consistency); pairs ordered through
--               others are left out where the frontier shows it
--   units       what runs: a stage, or a fusion group of stages, in an
--               order that respects every edge: { stages = { i... },
--               stream, position (on its stream), after = { unit... }
--               (its predecessors), waits = { unit... } (the cross-stream
--               predecessors not already implied), signals (another
--               stream waits for it) }
--   unit_of     stage index -> unit index
--   streams     { { unit... }... }: what each stream runs, in order
--   groups      the fusion groups of two or more stages: { unit, stages,
--               in_registers = { data... }, written = { data... } }
--   temporaries { { data, where = "registers" | "allocated" | "unused",
--               first, last } } for every temporary
--   warnings    { text... }
local plan = {}

local HAZARD = { RAW = "read after write", WAR = "write after read", WAW = "write after write" }
plan.HAZARD = HAZARD

local function reads(access) return access.mode ~= "w" end
local function writes(access) return access.mode ~= "r" end

-- ---- hazards ------------------------------------------------------------------

-- Per address space, the byte ranges each stage accessed that no later
-- write has covered: a new access conflicts with the ranges it overlaps (a
-- write with every reader and writer, a read with the writers). A write
-- cuts what it covers out of the older ranges (a range partly covered keeps
-- the rest, in up to two pieces): anything that conflicts there later
-- conflicts with the write, which comes after them. A write need not follow
-- a writer directly when a reader in between read the same bytes from it.
local function add_edge(edges, seen, from, to, data, hazard)
  local key = from * 65536 + to
  if from == to or seen[key] then
    return
  end
  seen[key] = true
  edges[#edges + 1] = { from = from, to = to, data = data.name, hazard = hazard }
end

local function overlap(a, lo, hi)
  return a.lo < hi and lo < a.hi
end

-- The entries of `list` with [lo, hi) cut out of them.
local function cut(list, lo, hi, index)
  local out = {}
  for _, entry in ipairs(list) do
    if entry.stage == index or not overlap(entry, lo, hi) then
      out[#out + 1] = entry
    else
      if entry.lo < lo then
        out[#out + 1] = { stage = entry.stage, lo = entry.lo, hi = lo }
      end
      if entry.hi > hi then
        out[#out + 1] = { stage = entry.stage, lo = hi, hi = entry.hi }
      end
    end
  end
  return out
end

local function find_edges(stages)
  local edges, seen, frontier = {}, {}, {}
  for index, stage in ipairs(stages) do
    for _, access in ipairs(stage.accesses) do
      local data = access.data
      local space = frontier[data.key]
      if not space then
        space = { writers = {}, readers = {} }
        frontier[data.key] = space
      end
      local lo, hi = data.lo, data.hi
      if reads(access) then
        for _, entry in ipairs(space.writers) do
          if overlap(entry, lo, hi) then
            add_edge(edges, seen, entry.stage, index, data, "RAW")
          end
        end
      end
      if writes(access) then
        for _, entry in ipairs(space.readers) do
          if overlap(entry, lo, hi) then
            add_edge(edges, seen, entry.stage, index, data, "WAR")
          end
        end
        for _, entry in ipairs(space.writers) do
          if overlap(entry, lo, hi) then
            local through_reader = false
            for _, r in ipairs(space.readers) do
              if r.stage > entry.stage and r.stage ~= index and overlap(r, lo, hi)
                  and overlap(r, entry.lo, entry.hi) then
                through_reader = true
                break
              end
            end
            if not through_reader then
              add_edge(edges, seen, entry.stage, index, data, "WAW")
            end
          end
        end
      end
    end
    -- The frontier changes after all of the stage's accesses, so that a
    -- stage reading and writing views of one buffer conflicts with the
    -- past only.
    for _, access in ipairs(stage.accesses) do
      local space = frontier[access.data.key]
      local lo, hi = access.data.lo, access.data.hi
      if writes(access) then
        space.writers = cut(space.writers, lo, hi, index)
        space.readers = cut(space.readers, lo, hi, index)
        space.writers[#space.writers + 1] = { stage = index, lo = lo, hi = hi }
      end
      if access.mode == "r" then
        space.readers[#space.readers + 1] = { stage = index, lo = lo, hi = hi }
      end
    end
  end
  return edges
end

-- ---- data no one wrote ------------------------------------------------------------

local function unwritten_reads(data_list, stages)
  local problems, written = {}, {}
  for _, stage in ipairs(stages) do
    for _, access in ipairs(stage.accesses) do
      local data = access.data
      if reads(access) and not access.maybe_read and not data.filled then
        local found = false
        for _, range in ipairs(written[data.key] or {}) do
          if range[1] < data.hi and data.lo < range[2] then
            found = true
            break
          end
        end
        if not found then
          problems[#problems + 1] = ("stage '%s' reads '%s', which no earlier stage writes and "
            .. "the host never filled"):format(stage.name, data.name)
        end
      end
    end
    for _, access in ipairs(stage.accesses) do
      if writes(access) then
        local data = access.data
        local list = written[data.key] or {}
        written[data.key] = list
        list[#list + 1] = { data.lo, data.hi }
      end
    end
  end
  local used = {}
  for _, stage in ipairs(stages) do
    for _, access in ipairs(stage.accesses) do
      used[access.data] = true
    end
  end
  for _, data in ipairs(data_list) do
    if data.temporary and not used[data] and not data.parent then
      problems[#problems + 1] = ("temporary '%s' is declared but no stage uses it"):format(data.name)
    end
  end
  return problems
end

-- ---- fusion -----------------------------------------------------------------------

-- Chains of fusable stages: a stage joins the group of one it reads from
-- (through a read-after-write) when no other stage it must follow depends
-- on the group (that would be a cycle: the group both before and after
-- it), when nothing in the group overlaps other data without being the
-- same data (elementwise code reads element i where it was written), and
-- when can_fuse(group, stage, stages) agrees. The group then starts when
-- all its members' predecessors are done.
local function overlaps_other(stages, group, stage)
  for _, access in ipairs(stage.accesses) do
    local data = access.data
    for _, member in ipairs(group.stages) do
      for _, other in ipairs(stages[member].accesses) do
        local o = other.data
        if o ~= data and o.key == data.key and o.lo < data.hi and data.lo < o.hi then
          return true
        end
      end
    end
  end
  return false
end

-- Whether the group that stage p (not in `group`) belongs to follows
-- `group`, through the predecessors of groups' members: then a member
-- that follows p would close a cycle. Groups whose stages all come before
-- the group's first cannot follow it.
local function follows_group(preds, group_of, group, p)
  local start = group_of[p]
  local seen, stack = { [start] = true }, { start }
  while #stack > 0 do
    local g = table.remove(stack)
    for _, member in ipairs(g.stages) do
      for _, q in ipairs(preds[member]) do
        local qg = group_of[q]
        if qg == group then
          return true
        end
        if not seen[qg] and qg.last > group.head then
          seen[qg] = true
          stack[#stack + 1] = qg
        end
      end
    end
  end
  return false
end

local function group_stages(stages, preds, raw_into, fuse, can_fuse)
  local groups, group_of, links = {}, {}, {}
  for index, stage in ipairs(stages) do
    local best
    if fuse and stage.fusion then
      for _, p in ipairs(preds[index]) do
        local g = group_of[p]
        if g.open and links[g][index] and (best == nil or g.head > best.head) then
          best = g
        end
      end
    end
    if best then
      for _, p in ipairs(preds[index]) do
        if group_of[p] ~= best and group_of[p].last > best.head
            and follows_group(preds, group_of, best, p) then
          best = nil
          break
        end
      end
    end
    if best and (overlaps_other(stages, best, stage) or not can_fuse(best, stage, stages)) then
      best = nil
    end
    if best then
      best.stages[#best.stages + 1] = index
      best.last = index
      group_of[index] = best
    else
      best = { head = index, last = index, stages = { index }, open = stage.fusion ~= nil }
      groups[#groups + 1] = best
      group_of[index] = best
      links[best] = {}
    end
    for to in pairs(raw_into[index] or {}) do
      links[best][to] = true
    end
  end
  return groups, group_of
end

-- The groups in a topological order of their edges, the one with the
-- earliest first stage first among those ready (Kahn's, with a heap).
local function order_groups(groups, group_of, preds)
  local after, before_count, followers = {}, {}, {}
  for g, group in ipairs(groups) do
    group.order_key = g
    after[g] = {}
    followers[g] = {}
    before_count[g] = 0
  end
  for g, group in ipairs(groups) do
    local seen = {}
    for _, member in ipairs(group.stages) do
      for _, p in ipairs(preds[member]) do
        local pg = group_of[p].order_key
        if pg ~= g and not seen[pg] then
          seen[pg] = true
          after[g][#after[g] + 1] = pg
          followers[pg][#followers[pg] + 1] = g
          before_count[g] = before_count[g] + 1
        end
      end
    end
  end
  local heap = {}
  local function push(g)
    heap[#heap + 1] = g
    local i = #heap
    while i > 1 do
      local parent = i // 2
      if heap[parent] <= heap[i] then break end
      heap[parent], heap[i] = heap[i], heap[parent]
      i = parent
    end
  end
  local function pop()
    local top = heap[1]
    heap[1] = heap[#heap]
    heap[#heap] = nil
    local i = 1
    while true do
      local l, r, smallest = 2 * i, 2 * i + 1, i
      if heap[l] and heap[l] < heap[smallest] then smallest = l end
      if heap[r] and heap[r] < heap[smallest] then smallest = r end
      if smallest == i then break end
      heap[smallest], heap[i] = heap[i], heap[smallest]
      i = smallest
    end
    return top
  end
  for g = 1, #groups do
    if before_count[g] == 0 then push(g) end
  end
  local ordered = {}
  while #heap > 0 do
    local g = pop()
    ordered[#ordered + 1] = groups[g]
    for _, f in ipairs(followers[g]) do
      before_count[f] = before_count[f] - 1
      if before_count[f] == 0 then push(f) end
    end
  end
  assert(#ordered == #groups, "gpurun.pipeline: the fusion groups form a cycle (a planner bug)")
  return ordered
end

-- ---- streams ---------------------------------------------------------------------

-- Units in a topological order (order_groups), each put on the stream of a predecessor it follows
-- directly, else on a stream whose last unit it follows already, else on a
-- new stream while there are fewer than max_streams, else on the stream
-- that has been idle longest. A vector clock per unit (the last position of
-- each stream it follows) finds which waits are implied by others.
local function assign_streams(units, max_streams)
  local streams, tails = {}, {}
  local clocks = {}
  for u, unit in ipairs(units) do
    local merged = {}
    for s = 1, #streams do
      merged[s] = 0
    end
    for _, p in ipairs(unit.after) do
      local pu = units[p]
      local clock = clocks[p]
      for s = 1, #streams do
        if clock[s] and clock[s] > merged[s] then
          merged[s] = clock[s]
        end
      end
      if pu.position > merged[pu.stream] then
        merged[pu.stream] = pu.position
      end
    end
    local chosen
    -- A predecessor that is its stream's last unit, the latest first.
    for position = #unit.after, 1, -1 do
      local p = unit.after[position]
      if tails[units[p].stream] == p and (chosen == nil or p > tails[chosen]) then
        chosen = units[p].stream
      end
    end
    if not chosen then
      for s = 1, #streams do
        if merged[s] >= #streams[s] then
          chosen = s
          break
        end
      end
    end
    if not chosen and #streams < max_streams then
      chosen = #streams + 1
      streams[chosen] = {}
      merged[chosen] = 0
    end
    if not chosen then
      chosen = 1
      for s = 2, #streams do
        if tails[s] < tails[chosen] then
          chosen = s
        end
      end
    end
    local list = streams[chosen]
    unit.stream = chosen
    unit.position = #list + 1
    list[#list + 1] = u
    -- The waits: what the stream's order does not imply already.
    local current = {}
    local tail = tails[chosen]
    for s = 1, #streams do
      current[s] = 0
    end
    if tail then
      for s, value in pairs(clocks[tail]) do
        current[s] = value
      end
      current[chosen] = units[tail].position
    end
    local order = {}
    for position, p in ipairs(unit.after) do
      order[position] = p
    end
    table.sort(order, function(x, y) return x > y end)
    unit.waits = {}
    for _, p in ipairs(order) do
      local pu = units[p]
      if pu.stream ~= chosen and (current[pu.stream] or 0) < pu.position then
        unit.waits[#unit.waits + 1] = p
        pu.signals = true
        for s, value in pairs(clocks[p]) do
          if value > (current[s] or 0) then
            current[s] = value
          end
        end
        current[pu.stream] = pu.position
      end
    end
    current[chosen] = unit.position
    clocks[u] = current
    tails[chosen] = u
  end
  return streams
end

-- ---- the plan ---------------------------------------------------------------------

function plan.build(data_list, stages, options)
  local max_streams = options.max_streams or 4
  local edges = find_edges(stages)
  local preds = {}
  for index = 1, #stages do
    preds[index] = {}
  end
  for _, edge in ipairs(edges) do
    local list = preds[edge.to]
    list[#list + 1] = edge.from
  end
  -- Which stages read what another wrote (the links of a fusion chain).
  local raw_into = {}
  for _, edge in ipairs(edges) do
    if edge.hazard == "RAW" then
      raw_into[edge.from] = raw_into[edge.from] or {}
      raw_into[edge.from][edge.to] = true
    end
  end
  local groups, group_of = group_stages(stages, preds, raw_into, options.fuse ~= false,
                                        options.can_fuse or function() return true end)
  groups = order_groups(groups, group_of, preds)

  -- Units: one per group, in order of their first stage.
  local units, unit_of = {}, {}
  for u, g in ipairs(groups) do
    units[u] = { stages = g.stages, after = {}, waits = {} }
    g.unit = u
    for _, member in ipairs(g.stages) do
      unit_of[member] = u
    end
  end
  for u, unit in ipairs(units) do
    local seen = {}
    for _, member in ipairs(unit.stages) do
      for _, p in ipairs(preds[member]) do
        local pu = unit_of[p]
        if pu ~= u and not seen[pu] then
          seen[pu] = true
          unit.after[#unit.after + 1] = pu
        end
      end
    end
    table.sort(unit.after)
  end
  local streams = assign_streams(units, max_streams)

  -- Fusion groups and what stays in registers: data written in a group
  -- that is a temporary nobody outside the group touches.
  local touched_by = {}
  for index, stage in ipairs(stages) do
    for _, access in ipairs(stage.accesses) do
      local d = access.data
      local set = touched_by[d]
      if not set then
        set = {}
        touched_by[d] = set
      end
      set[unit_of[index]] = true
    end
  end
  local fusion_groups, in_registers = {}, {}
  for _, g in ipairs(groups) do
    if #g.stages > 1 then
      local info = { unit = g.unit, stages = g.stages, in_registers = {}, written = {} }
      local seen = {}
      for _, member in ipairs(g.stages) do
        for _, access in ipairs(stages[member].accesses) do
          local d = access.data
          if writes(access) and not seen[d] then
            seen[d] = true
            local only_here = true
            for u in pairs(touched_by[d]) do
              if u ~= g.unit then
                only_here = false
              end
            end
            -- A temporary read inside the group after it is written.
            local read_later = false
            local written_at
            for position, m in ipairs(g.stages) do
              for _, a in ipairs(stages[m].accesses) do
                if a.data == d then
                  if writes(a) and not written_at then
                    written_at = position
                  elseif reads(a) and written_at and position > written_at then
                    read_later = true
                  end
                end
              end
            end
            if d.temporary and not d.parent and only_here and read_later then
              info.in_registers[#info.in_registers + 1] = d
              in_registers[d] = true
            else
              info.written[#info.written + 1] = d
            end
          end
        end
      end
      if #info.written == 0 then
        -- Nothing outside reads what it computes: its last value is stored
        -- all the same (made, and reported below as read by nobody).
        local last = table.remove(info.in_registers)
        in_registers[last] = nil
        info.written[1] = last
      end
      fusion_groups[#fusion_groups + 1] = info
      units[g.unit].group = info
    end
  end

  local temporaries = {}
  for _, d in ipairs(data_list) do
    if d.temporary and not d.parent then
      local first, last
      for index, stage in ipairs(stages) do
        for _, access in ipairs(stage.accesses) do
          local a = access.data
          if a.key == d.key then
            first = first or index
            last = index
          end
        end
      end
      local where = "allocated"
      if not first then
        where = "unused"
      elseif in_registers[d] then
        local views = false
        for _, other in ipairs(data_list) do
          if other.parent == d and touched_by[other] then
            views = true
          end
        end
        if not views then
          where = "registers"
        end
      end
      temporaries[#temporaries + 1] = { data = d, where = where, first = first, last = last }
    end
  end

  return {
    edges = edges, units = units, unit_of = unit_of, streams = streams,
    groups = fusion_groups, temporaries = temporaries, warnings = unwritten_reads(data_list, stages),
    preds = preds,
  }
end

return plan
