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
--   edges       { from = { stage... }, to = { stage... }, data = { name... },
--               hazard = { "RAW" | "WAR" | "WAW"... }, first = { edge... } },
--               edge k being from[k] -> to[k] (columns, not a table per
--               edge: a 1,000-stage plan has thousands), the edges into
--               stage i being first[i] .. first[i + 1] - 1: the ordering
--               each conflicting pair needs, in declaration order
--               (sequential consistency); pairs ordered through others
--               are left out where the frontier shows it
--   units       what runs: a stage, or a fusion group of stages, in an
--               order that respects every edge: { head (its first stage),
--               stages = { i... }, unit (its own index), stream, position
--               (on its stream), after = { unit... } (its predecessors),
--               waits = { unit... } (the cross-stream predecessors not
--               already implied), signals (whether another stream waits
--               for it), group (a fusion group's, below) }
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

-- The after and waits lists of a unit that has none: shared, and never
-- written (the planner makes a list of its own on the first entry).
local NONE = setmetatable({}, { __newindex = function()
  error("gpurun.pipeline: a unit's shared empty list written (a planner bug)", 2)
end })

-- ---- hazards ------------------------------------------------------------------

-- Per address space, the byte ranges each stage accessed that no later
-- write has covered: a new access conflicts with the ranges it overlaps (a
-- write with every reader and writer, a read with the writers). A write
-- cuts what it covers out of the older ranges (a range partly covered keeps
-- the rest, in up to two pieces): anything that conflicts there later
-- conflicts with the write, which comes after them. A write need not follow
-- a writer directly when a reader in between read the same bytes from it.
-- An address space's entries are columns (stage, lo, hi: no table per
-- access). Cuts [lo, hi) out of the entries, in place (an entry partly
-- covered keeps what is left of it, in up to two pieces).
local function cut(entries, lo, hi, index)
  local stage_of, lo_of, hi_of = entries.stage, entries.lo, entries.hi
  local kept, count = 0, #stage_of
  local extra
  for position = 1, count do
    local s, elo, ehi = stage_of[position], lo_of[position], hi_of[position]
    if s == index or ehi <= lo or hi <= elo then
      kept = kept + 1
      stage_of[kept], lo_of[kept], hi_of[kept] = s, elo, ehi
    else
      if elo < lo then
        kept = kept + 1
        stage_of[kept], lo_of[kept], hi_of[kept] = s, elo, lo
      end
      if ehi > hi then
        extra = extra or {}
        extra[#extra + 1] = s
        extra[#extra + 1] = ehi
      end
    end
  end
  for position = count, kept + 1, -1 do
    stage_of[position], lo_of[position], hi_of[position] = nil, nil, nil
  end
  if extra then
    for k = 1, #extra, 2 do
      kept = kept + 1
      stage_of[kept], lo_of[kept], hi_of[kept] = extra[k], hi, extra[k + 1]
    end
  end
end

local function add_entry(entries, index, lo, hi)
  local stage_of = entries.stage
  local n = #stage_of + 1
  stage_of[n], entries.lo[n], entries.hi[n] = index, lo, hi
end

-- Also returns the reads of data nothing wrote before (and the host never
-- filled): the writers' entries cover every byte written so far, since a
-- write only cuts what it covers itself.
local function find_edges(stages)
  local froms, tos, names, hazards, firsts = {}, {}, {}, {}, {}
  local edges = { from = froms, to = tos, data = names, hazard = hazards, first = firsts }
  -- Every edge found while looking at stage `to` ends there: last_to[from]
  -- says whether from -> to is known already.
  local last_to, frontier, count = {}, {}, 0
  for index = 1, #stages do
    last_to[index] = 0
  end
  local unwritten = {}
  local function edge(from, to, data, hazard)
    if from ~= to and last_to[from] ~= to then
      last_to[from] = to
      count = count + 1
      froms[count], tos[count], names[count], hazards[count] = from, to, data.name, hazard
    end
  end
  for index = 1, #stages do
    firsts[index] = count + 1
    local accesses = stages[index].accesses
    for a = 1, #accesses do
      local access = accesses[a]
      local data, mode = access.data, access.mode
      local space = frontier[data.key]
      if not space then
        space = { { stage = {}, lo = {}, hi = {} }, { stage = {}, lo = {}, hi = {} } }
        frontier[data.key] = space
      end
      local writers, readers = space[1], space[2]
      local w_stage, w_lo, w_hi = writers.stage, writers.lo, writers.hi
      local lo, hi = data.lo, data.hi
      if mode ~= "w" then
        local found = false
        for w = 1, #w_stage do
          if w_lo[w] < hi and lo < w_hi[w] then
            edge(w_stage[w], index, data, "RAW")
            found = true
          end
        end
        if not found and not data.filled and not access.maybe_read then
          unwritten[#unwritten + 1] = { stage = index, data = data }
        end
      end
      if mode ~= "r" then
        local r_stage, r_lo, r_hi = readers.stage, readers.lo, readers.hi
        local reader_count = #r_stage
        for r = 1, reader_count do
          if r_lo[r] < hi and lo < r_hi[r] then
            edge(r_stage[r], index, data, "WAR")
          end
        end
        for w = 1, #w_stage do
          local wlo, whi, ws = w_lo[w], w_hi[w], w_stage[w]
          if wlo < hi and lo < whi then
            local through_reader = false
            for r = 1, reader_count do
              local rs, rlo, rhi = r_stage[r], r_lo[r], r_hi[r]
              if rs > ws and rs ~= index and rlo < hi and lo < rhi and rlo < whi and wlo < rhi then
                through_reader = true
                break
              end
            end
            if not through_reader then
              edge(ws, index, data, "WAW")
            end
          end
        end
      end
    end
    -- The frontier changes after all of the stage's accesses, so that a
    -- stage reading and writing views of one buffer conflicts with the
    -- past only.
    for a = 1, #accesses do
      local access = accesses[a]
      local space = frontier[access.data.key]
      local lo, hi = access.data.lo, access.data.hi
      if access.mode ~= "r" then
        cut(space[1], lo, hi, index)
        cut(space[2], lo, hi, index)
        add_entry(space[1], index, lo, hi)
      else
        add_entry(space[2], index, lo, hi)
      end
    end
  end
  firsts[#stages + 1] = count + 1
  return edges, unwritten
end

-- ---- data no one wrote ------------------------------------------------------------

local function unwritten_reads(data_list, stages, unwritten)
  local problems = {}
  for _, item in ipairs(unwritten) do
    problems[#problems + 1] = ("stage '%s' reads '%s', which no earlier stage writes and "
      .. "the host never filled"):format(stages[item.stage].name, item.data.name)
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
-- (through a read-after-write; the latest such group that takes it) when
--   - every other stage it must follow is in a group that began before
--     this one did, so that groups in the order of their first stages stay
--     a topological order: no cycle can form, however groups grow later;
--   - the group waits for each of those already (an ancestor of a member),
--     or it is a stage with no predecessor declared before the group began
--     (setup, such as a fill): fusion never makes a branch wait for another
--     that would have run beside it;
--   - nothing in the group overlaps other data without being the same data
--     (elementwise code reads element i where it was written);
--   - and can_fuse(group, stage, stages) agrees.
-- The group then starts when all its members' predecessors are done.
-- Up to this many members a group's accesses are searched as they are;
-- past it, by address space (most groups stay small, and most candidates
-- are single stages that are never joined).
local SEARCHED_AS_IS = 4

-- Whether o is other data than d that shares bytes with it.
local function overlaps(o, d)
  return o ~= d and o.key == d.key and o.lo < d.hi and d.lo < o.hi
end

local function overlaps_other(stages, group, stage)
  local accesses = stage.accesses
  local by_key = group.by_key
  local members = group.stages
  if not by_key and #members <= SEARCHED_AS_IS then
    for m = 1, #members do
      local others = stages[members[m]].accesses
      for k = 1, #others do
        local o = others[k].data
        for a = 1, #accesses do
          if overlaps(o, accesses[a].data) then return true end
        end
      end
    end
    return false
  end
  -- The group's data by address space (kept with the group as it grows).
  if not by_key then
    by_key = {}
    group.by_key = by_key
    for _, member in ipairs(group.stages) do
      for _, access in ipairs(stages[member].accesses) do
        local d = access.data
        local list = by_key[d.key]
        if not list then
          by_key[d.key] = { d }
        elseif list[#list] ~= d then
          list[#list + 1] = d
        end
      end
    end
  end
  for a = 1, #accesses do
    local data = accesses[a].data
    local list = by_key[data.key] or NONE
    for k = 1, #list do
      if overlaps(list[k], data) then return true end
    end
  end
  return false
end

-- A stage joined the group: its data join the group's.
local function add_to_group(group, stage)
  local by_key = group.by_key
  if not by_key then
    return
  end
  for _, access in ipairs(stage.accesses) do
    local d = access.data
    local list = by_key[d.key]
    if not list then
      by_key[d.key] = { d }
    else
      local known = false
      for k = 1, #list do
        if list[k] == d then known = true break end
      end
      if not known then list[#list + 1] = d end
    end
  end
end

-- A stage's predecessors are the edges into it, which find_edges made one
-- after another: stage i's are edges first[i] .. first[i + 1] - 1, their
-- from and hazard columns (a RAW edge is a link of a fusion chain).

-- Whether stage p is an ancestor of a member of the group (searching
-- back from the members through stages after p only, and giving up, as if
-- it were not, past MAX_SEARCH stages: then the stage is not fused).
local MAX_SEARCH = 8
local visited, generation, stack = {}, 0, {}

-- depth[i]: the longest chain of predecessors before stage i; an ancestor
-- is less deep than what it precedes, so a stage no less deep than every
-- member is no ancestor of the group, and needs no search.
local function is_ancestor(edges, depth, p, group)
  local members = group.stages
  local deepest, depth_p = 0, depth[p]
  for k = 1, #members do
    local d = depth[members[k]]
    if d > deepest then deepest = d end
  end
  if depth_p >= deepest then
    return false
  end
  local from, first = edges.from, edges.first
  -- A direct predecessor of a member, the common case, first.
  for k = 1, #members do
    local m = members[k]
    for e = first[m], first[m + 1] - 1 do
      if from[e] == p then
        return true
      end
    end
  end
  generation = generation + 1
  local top = 0
  for k = 1, #members do
    top = top + 1
    stack[top] = members[k]
  end
  local visits = 0
  while top > 0 do
    visits = visits + 1
    if visits > MAX_SEARCH then
      return false
    end
    local s = stack[top]
    top = top - 1
    for e = first[s], first[s + 1] - 1 do
      local q = from[e]
      if q == p then
        return true
      end
      if q > p and visited[q] ~= generation then
        visited[q] = generation
        top = top + 1
        stack[top] = q
      end
    end
  end
  return false
end

local function takes(stages, edges, depth, group_of, candidate, index, can_fuse)
  local from, first = edges.from, edges.first
  for e = first[index], first[index + 1] - 1 do
    local p = from[e]
    local g = group_of[p]
    if g ~= candidate then
      if g.head > candidate.head then
        return false
      end
      if not ((first[p] == first[p + 1] and p < candidate.head)
              or is_ancestor(edges, depth, p, candidate)) then
        return false
      end
    end
  end
  return not overlaps_other(stages, candidate, stages[index])
    and can_fuse(candidate, stages[index], stages)
end

local function group_stages(stages, edges, fuse, can_fuse)
  local groups, group_of, depth = {}, {}, {}
  local from, hazard, first_edge = edges.from, edges.hazard, edges.first
  for index, stage in ipairs(stages) do
    local deepest, e_first, e_last = 0, first_edge[index], first_edge[index + 1] - 1
    for e = e_first, e_last do
      local d = depth[from[e]]
      if d >= deepest then deepest = d + 1 end
    end
    depth[index] = deepest
    local best
    if fuse and stage.fusion then
      local first, candidates
      for e = e_first, e_last do
        local p = from[e]
        local g = group_of[p]
        -- (A group is open to more stages when its first one is fusable.)
        if g ~= first and hazard[e] == "RAW" and stages[g.head].fusion then
          if not first then
            first = g
          else
            candidates = candidates or { first }
            candidates[#candidates + 1] = g
          end
        end
      end
      if candidates then
        table.sort(candidates, function(x, y) return x.head > y.head end)
        for k = 1, #candidates do
          if candidates[k] ~= candidates[k - 1]
              and takes(stages, edges, depth, group_of, candidates[k], index, can_fuse) then
            best = candidates[k]
            break
          end
        end
      elseif first and takes(stages, edges, depth, group_of, first, index, can_fuse) then
        best = first
      end
    end
    if best then
      best.stages[#best.stages + 1] = index
      group_of[index] = best
      add_to_group(best, stage)
    else
      -- With the fields build and assign_streams fill in already there
      -- (unit, stream, position, signals): the table is made at its size,
      -- eight fields.
      best = { head = index, stages = { index }, after = NONE, waits = NONE, unit = 0, stream = 0,
               position = 0, signals = false }
      groups[#groups + 1] = best
      group_of[index] = best
    end
  end
  return groups, group_of
end

-- ---- streams ---------------------------------------------------------------------

-- Units in a topological order (their first stages' order), each put on the stream of a predecessor it follows
-- directly, else on a stream whose last unit it follows already, else on a
-- new stream while there are fewer than max_streams, else on the stream
-- that has been idle longest. A vector clock per unit (the last position of
-- each stream it follows) finds which waits are implied by others.
local function assign_streams(units, max_streams)
  local streams, tails = {}, {}
  -- The clocks, in one table: unit u's entry for stream s at
  -- (u - 1) * width + s (width: the most streams there can be).
  local width = math.min(max_streams, #units)
  local clocks = {}
  local merged, current = {}, {}
  for u, unit in ipairs(units) do
    local count = #streams
    local after = unit.after
    local chosen
    -- A predecessor that is its stream's last unit: the lowest such stream.
    for k = 1, #after do
      local p = after[k]
      local s = units[p].stream
      if tails[s] == p and (chosen == nil or s < chosen) then
        chosen = s
      end
    end
    if not chosen then
      -- Else a stream whose last unit it follows already (its clock says).
      for s = 1, count do
        merged[s] = 0
      end
      for k = 1, #after do
        local p = after[k]
        local pu = units[p]
        local base = (p - 1) * width
        for s = 1, count do
          local value = clocks[base + s]
          if value > merged[s] then
            merged[s] = value
          end
        end
        if pu.position > merged[pu.stream] then
          merged[pu.stream] = pu.position
        end
      end
      for s = 1, count do
        if merged[s] >= #streams[s] then
          chosen = s
          break
        end
      end
    end
    if not chosen and count < max_streams then
      chosen = count + 1
      streams[chosen] = {}
      count = chosen
    end
    if not chosen then
      chosen = 1
      for s = 2, count do
        if tails[s] < tails[chosen] then
          chosen = s
        end
      end
    end
    local list = streams[chosen]
    unit.stream = chosen
    unit.position = #list + 1
    list[#list + 1] = u
    -- The waits: what the stream's order does not imply already, the
    -- latest predecessors first (their clocks imply the most).
    local tail = tails[chosen]
    if tail then
      local base = (tail - 1) * width
      for s = 1, count do current[s] = clocks[base + s] end
      current[chosen] = units[tail].position
    else
      for s = 1, count do current[s] = 0 end
    end
    local waits = unit.waits
    for position = #after, 1, -1 do
      local p = after[position]
      local pu = units[p]
      local ps = pu.stream
      if ps ~= chosen and current[ps] < pu.position then
        if waits == NONE then
          waits = {}
          unit.waits = waits
        end
        waits[#waits + 1] = p
        pu.signals = true
        local base = (p - 1) * width
        for s = 1, count do
          local value = clocks[base + s]
          if value > current[s] then current[s] = value end
        end
        current[ps] = pu.position
      end
    end
    current[chosen] = unit.position
    -- All width entries, so that the clocks stay one array.
    local base = (u - 1) * width
    for s = 1, count do clocks[base + s] = current[s] end
    for s = count + 1, width do clocks[base + s] = 0 end
    tails[chosen] = u
  end
  return streams
end

-- ---- the plan ---------------------------------------------------------------------

function plan.build(data_list, stages, options)
  local max_streams = options.max_streams or 4
  local edges, unwritten = find_edges(stages)
  -- Made in the order of their first stages: a topological order (see
  -- group_stages).
  local groups = group_stages(stages, edges, options.fuse ~= false,
                              options.can_fuse or function() return true end)

  -- Units: one per group, in order of their first stage.
  local units, unit_of = groups, {}
  for u, g in ipairs(groups) do
    g.unit = u
    local members = g.stages
    for k = 1, #members do
      unit_of[members[k]] = u
    end
  end
  local stamp = {}
  local froms, first_edge = edges.from, edges.first
  for u, unit in ipairs(units) do
    local after = unit.after
    local members = unit.stages
    for k = 1, #members do
      local m = members[k]
      for e = first_edge[m], first_edge[m + 1] - 1 do
        local pu = unit_of[froms[e]]
        if pu ~= u and stamp[pu] ~= u then
          stamp[pu] = u
          if after == NONE then
            after = {}
            unit.after = after
          end
          after[#after + 1] = pu
        end
      end
    end
    if #after > 1 then table.sort(after) end
    assert(#unit.after == 0 or unit.after[#unit.after] < u,
           "gpurun.pipeline: a fusion group follows a later one (a planner bug)")
  end
  local streams = assign_streams(units, max_streams)

  -- Fusion groups and what stays in registers: data written in a group
  -- that is a temporary nobody outside the group touches.
  -- The one unit each data is touched by, or false for several.
  local touched_by = {}
  for index, stage in ipairs(stages) do
    local u = unit_of[index]
    for _, access in ipairs(stage.accesses) do
      local d = access.data
      local seen = touched_by[d]
      if seen == nil then
        touched_by[d] = u
      elseif seen ~= u then
        touched_by[d] = false
      end
    end
  end
  -- A temporary with a view any stage touches lives in memory.
  local viewed = {}
  for _, d in ipairs(data_list) do
    if d.parent and touched_by[d] ~= nil then
      viewed[d.parent] = true
    end
  end
  local fusion_groups, in_registers = {}, {}
  for _, g in ipairs(groups) do
    if #g.stages > 1 then
      local info = { unit = g.unit, stages = g.stages, in_registers = {}, written = {} }
      -- In order: what the group writes, and what it reads after writing.
      local order, written_here, read_after = {}, {}, {}
      for _, member in ipairs(g.stages) do
        for _, access in ipairs(stages[member].accesses) do
          local d = access.data
          if reads(access) and written_here[d] then
            read_after[d] = true
          end
        end
        for _, access in ipairs(stages[member].accesses) do
          local d = access.data
          if writes(access) and not written_here[d] then
            written_here[d] = true
            order[#order + 1] = d
          end
        end
      end
      for _, d in ipairs(order) do
        if d.temporary and not d.parent and not viewed[d] and touched_by[d] == g.unit
            and read_after[d] then
          info.in_registers[#info.in_registers + 1] = d
          in_registers[d] = true
        else
          info.written[#info.written + 1] = d
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
  local first_use, last_use = {}, {}
  for index, stage in ipairs(stages) do
    for _, access in ipairs(stage.accesses) do
      local key = access.data.key
      first_use[key] = first_use[key] or index
      last_use[key] = index
    end
  end
  for _, d in ipairs(data_list) do
    if d.temporary and not d.parent then
      local first, last = first_use[d.key], last_use[d.key]
      local where = "allocated"
      if not first then
        where = "unused"
      elseif in_registers[d] then
        where = "registers"
      end
      temporaries[#temporaries + 1] = { data = d, where = where, first = first, last = last }
    end
  end

  return {
    edges = edges, units = units, unit_of = unit_of, streams = streams,
    groups = fusion_groups, temporaries = temporaries, warnings = unwritten_reads(data_list, stages, unwritten),
  }
end

return plan
