-- The planner behind gpurun.pipeline: declared stages and the data they
-- read and write in, a schedule out (what p:plan() reports). No GPU and no
-- gpurun objects: every input is a plain table, so that the inference runs
-- (and is tested) on any machine.
--
--   schedule.build(data, stages, options) -> schedule
--   schedule.of(p) -> the schedule pipeline p runs, made once per declaration
local access_rules = require("gpurun.pipeline.access")
local common = require("gpurun.common")
local stage_kinds = require("gpurun.pipeline.stage_kinds")

local raise = common.raise

local schedule = {}

schedule.HAZARD = access_rules.HAZARD

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
-- access), the writers' and the readers' apart.
--
-- Most address spaces are accessed as a whole, one range every time (a
-- temporary or a buffer no view of which is used). While a space is so
-- (`uniform`), every entry has that range: every access overlaps every
-- entry, and a write covers them all, so that the writers are the last
-- stage that wrote (its entries: one per data it wrote there) and the
-- readers the stages that read since, in order. Those lists keep no
-- ranges, and their lengths are counts of their own (space.writers,
-- space.readers: what lies past them is stale), so that a write empties
-- them without touching their entries. The first access with another range
-- gives the entries their lo and hi columns, and the space is compared by
-- ranges from then on.
--
-- space.first and space.last: the first and last stage that touched it;
-- space.data: the data it was made for.
local function new_space(lo, hi, index, data)
  -- (An empty range overlaps nothing: compared by ranges from the start.)
  if lo < hi then
    return { uniform = true, lo = lo, hi = hi, data = data, writer = {}, writers = 0, reader = {},
             readers = 0, first = index, last = index }
  end
  return { uniform = false, writer = {}, writer_lo = {}, writer_hi = {},
           reader = {}, reader_lo = {}, reader_hi = {}, first = index, last = index }
end

-- A uniform space's list of `count` entries, as a list compared by
-- ranges: columns of the space's range, the stale entries dropped.
local function with_ranges(stage_of, count, lo, hi)
  local lo_of, hi_of = {}, {}
  for position = 1, count do
    lo_of[position], hi_of[position] = lo, hi
  end
  for position = #stage_of, count + 1, -1 do
    stage_of[position] = nil
  end
  return lo_of, hi_of
end

local function compare_by_ranges(space)
  local lo, hi = space.lo, space.hi
  space.writer_lo, space.writer_hi = with_ranges(space.writer, space.writers, lo, hi)
  space.reader_lo, space.reader_hi = with_ranges(space.reader, space.readers, lo, hi)
  space.uniform, space.writers, space.readers = false, nil, nil
end

-- Cuts [lo, hi) out of one list of entries, in place (an entry partly
-- covered keeps what is left of it, in up to two pieces; the stage's own
-- entries stay).
local function cut(stage_of, lo_of, hi_of, lo, hi, index)
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

-- The cut of a write by stage `index` to a uniform space's list of `count`
-- entries: it covers them all, and the stage's own entries stay. They are
-- the last ones (the lists are in stage order), all `index`: the list
-- keeps that many. Returns the new count.
local function own_entries(stage_of, count, index)
  local own = 0
  while own < count and stage_of[count - own] == index do
    own = own + 1
  end
  for position = 1, own do
    stage_of[position] = index
  end
  return own
end

-- (See find_edges. Kept from one schedule to the next, as the clocks below
-- are: each sets its entries first, and does not grow it again.)
local kept_last_to = {}

-- Also returns the reads of data nothing wrote before (and the host never
-- filled): the writers' entries cover every byte written so far, since a
-- write only cuts what it covers itself. And the address spaces, by key.
local function find_edges(stages)
  local froms, tos, names, hazards, firsts = {}, {}, {}, {}, {}
  local edges = { from = froms, to = tos, data = names, hazard = hazards, first = firsts }
  -- Every edge found while looking at stage `to` ends there:
  -- last_to[from] == to says that from -> to is known already, and
  -- last_to[from] < to that it is not (tested so: an order is cheaper in
  -- Lua than an equality). The frontier holds earlier stages only while a
  -- stage is looked at (it changes after all of the stage's accesses), so
  -- from < to always.
  local last_to, frontier, count = kept_last_to, {}, 0
  for index = 1, #stages do
    last_to[index] = 0
  end
  -- (The uniform spaces' edges, most of them, are appended where they are
  -- found: a function call per edge was a tenth of the planner's time.)
  local function edge(from, to, name, hazard)
    if last_to[from] < to then
      last_to[from] = to
      count = count + 1
      froms[count], tos[count], names[count], hazards[count] = from, to, name, hazard
    end
  end
  local unwritten = {}
  local space_at = {} -- the space of each access of the stage looked at
  for index = 1, #stages do
    firsts[index] = count + 1
    local accesses = stages[index].accesses
    for a = 1, #accesses do
      local access = accesses[a]
      local data, mode = access.data, access.mode
      local space = frontier[data.key]
      if not space then
        space = new_space(data.lo, data.hi, index, data)
        frontier[data.key] = space
      end
      space.last = index
      space_at[a] = space
      local uniform = space.uniform
      -- (The data the space was made for has its range: a temporary's,
      -- most often.)
      if uniform and data ~= space.data and (data.lo ~= space.lo or data.hi ~= space.hi) then
        compare_by_ranges(space)
        uniform = false
      end
      local w_stage = space.writer
      if uniform then
        -- Every entry overlaps; the writers are all one stage.
        local writers = space.writers
        local writer = writers > 0 and w_stage[1]
        if mode ~= "w" then
          if writer then
            if last_to[writer] < index then
              last_to[writer] = index
              count = count + 1
              froms[count], tos[count], names[count], hazards[count] = writer, index, data.name, "RAW"
            end
          elseif not data.filled and not access.maybe_read then
            unwritten[#unwritten + 1] = { stage = index, data = data }
          end
        end
        if mode ~= "r" then
          local r_stage, readers = space.reader, space.readers
          for r = 1, readers do
            local from = r_stage[r]
            if last_to[from] < index then
              last_to[from] = index
              count = count + 1
              froms[count], tos[count], names[count], hazards[count] = from, index, data.name, "WAR"
            end
          end
          -- (Not when a reader after the writer, the last reader being
          -- the latest, orders them already.)
          if writer and last_to[writer] < index
              and not (readers > 0 and r_stage[readers] > writer) then
            last_to[writer] = index
            count = count + 1
            froms[count], tos[count], names[count], hazards[count] = writer, index, data.name, "WAW"
          end
        end
      else
        local lo, hi = data.lo, data.hi
        local w_lo, w_hi = space.writer_lo, space.writer_hi
        if mode ~= "w" then
          local found = false
          for w = 1, #w_stage do
            if w_lo[w] < hi and lo < w_hi[w] then
              edge(w_stage[w], index, data.name, "RAW")
              found = true
            end
          end
          if not found and not data.filled and not access.maybe_read then
            unwritten[#unwritten + 1] = { stage = index, data = data }
          end
        end
        if mode ~= "r" then
          local r_stage, r_lo, r_hi = space.reader, space.reader_lo, space.reader_hi
          local reader_count = #r_stage
          for r = 1, reader_count do
            if r_lo[r] < hi and lo < r_hi[r] then
              edge(r_stage[r], index, data.name, "WAR")
            end
          end
          for w = 1, #w_stage do
            local wlo, whi, ws = w_lo[w], w_hi[w], w_stage[w]
            if wlo < hi and lo < whi and last_to[ws] < index then
              -- A reader after the writer, of bytes both this write and
              -- the writer cover, orders them already.
              local through_reader = false
              for r = 1, reader_count do
                local rlo, rhi = r_lo[r], r_hi[r]
                if r_stage[r] > ws and rlo < hi and lo < rhi and rlo < whi and wlo < rhi then
                  through_reader = true
                  break
                end
              end
              if not through_reader then
                edge(ws, index, data.name, "WAW")
              end
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
      local space = space_at[a]
      local writes_it = access.mode ~= "r"
      if space.uniform then
        if writes_it then
          -- (The stage's own entries, from its accesses before this one,
          -- are seldom there: looked for only then.)
          local stage_of, writers, readers = space.writer, space.writers, space.readers
          if writers > 0 and stage_of[writers] == index then
            writers = own_entries(stage_of, writers, index)
          else
            writers = 0
          end
          stage_of[writers + 1] = index
          space.writers = writers + 1
          local r_stage = space.reader
          if readers > 0 and r_stage[readers] == index then
            space.readers = own_entries(r_stage, readers, index)
          else
            space.readers = 0
          end
        else
          local n = space.readers + 1
          space.reader[n] = index
          space.readers = n
        end
      else
        local lo, hi = access.data.lo, access.data.hi
        local stage_of, lo_of, hi_of = space.reader, space.reader_lo, space.reader_hi
        if writes_it then
          stage_of, lo_of, hi_of = space.writer, space.writer_lo, space.writer_hi
          cut(stage_of, lo_of, hi_of, lo, hi, index)
          cut(space.reader, space.reader_lo, space.reader_hi, lo, hi, index)
        end
        local n = #stage_of + 1
        stage_of[n], lo_of[n], hi_of[n] = index, lo, hi
      end
    end
  end
  firsts[#stages + 1] = count + 1
  return edges, unwritten, frontier
end

-- ---- data no one wrote ------------------------------------------------------------

-- touched_by: data -> the unit touching it (see schedule.build): data no
-- stage touches are not in it.
local function unwritten_reads(data_list, stages, unwritten, touched_by)
  local problems = {}
  for k = 1, #unwritten do
    local item = unwritten[k]
    problems[#problems + 1] = ("stage '%s' reads '%s', which no earlier stage writes and "
      .. "the host never filled"):format(stages[item.stage].name, item.data.name)
  end
  for k = 1, #data_list do
    local data = data_list[k]
    if data.temporary and touched_by[data] == nil and not data.parent then
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
local overlap = access_rules.overlap
local function overlaps(o, d)
  return o ~= d and overlap(o, d)
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

-- Whether stage p is an ancestor of one of the members (searching back
-- from them through stages after p only, and giving up, as if it were
-- not, past MAX_SEARCH stages: then the stage is not fused). The caller
-- has ruled out a p too deep to be one (see takes).
local MAX_SEARCH = 8
local visited, generation, search_stack = {}, 0, {}

local function is_ancestor(from, first, p, members)
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
  local mark, seen, stack = generation, visited, search_stack
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
      if q > p and seen[q] ~= mark then
        seen[q] = mark
        top = top + 1
        stack[top] = q
      end
    end
  end
  return false
end

-- Whether the group takes stage `index` (the conditions above), the group
-- being the latest one among the stage's predecessors' (the caller's
-- choice: every other predecessor is in a group that began before it).
-- Every condition must hold, so the cheap refusals come first: a
-- predecessor too deep to be an ancestor of the group; the searches after.
-- depth[i]: the longest chain of predecessors before stage i; an ancestor
-- is less deep than what it precedes, so a stage no less deep than every
-- member is no ancestor of the group.
local function takes(stages, edges, depth, unit_of, group, index, can_fuse)
  local from, first = edges.from, edges.first
  local head, members, u = group.head, group.stages, group.unit
  local deepest = 0
  for k = 1, #members do
    local d = depth[members[k]]
    if d > deepest then deepest = d end
  end
  local e_first, e_last = first[index], first[index + 1] - 1
  local searches = 0
  for e = e_first, e_last do
    local p = from[e]
    -- (Setup: a stage with no predecessor, declared before the group began.)
    if unit_of[p] ~= u and not (first[p] == first[p + 1] and p < head) then
      if depth[p] >= deepest then
        return false
      end
      searches = searches + 1
    end
  end
  if searches > 0 then
    for e = e_first, e_last do
      local p = from[e]
      if unit_of[p] ~= u and not (first[p] == first[p + 1] and p < head)
          and not is_ancestor(from, first, p, members) then
        return false
      end
    end
  end
  return not overlaps_other(stages, group, stages[index])
    and can_fuse(group, stages[index], stages)
end

-- A unit's list of predecessors takes unit pu, in order and once (the
-- lists are short: sorted as they come). Returns the list's new length.
local function add_predecessor(after, count, pu)
  local position = count + 1
  while position > 1 and after[position - 1] > pu do
    position = position - 1
  end
  if position > 1 and after[position - 1] == pu then
    return count
  end
  for k = count, position, -1 do
    after[k + 1] = after[k]
  end
  after[position] = pu
  return count + 1
end

-- depth[i] (see takes), kept from one schedule to the next: each stage's is
-- set before it is read.
local kept_depth = {}

-- Which group a stage joins: of the groups it reads from (through a RAW
-- edge) whose first stage is fusable, the latest that takes it. Only the
-- latest group among all its predecessors' can: with any other, a
-- predecessor would be in a group that began after it. So that one alone
-- is tried, and only when the stage reads from it.
--
-- The groups are the units, numbered as they are made (in the order of
-- their first stages: a topological order, see above), each with its
-- predecessors (after: the units of its stages' predecessors, in order).
-- Also returns each stage's unit.
local function group_stages(stages, edges, fuse, can_fuse)
  local groups, unit_of, depth, unit_count = {}, {}, kept_depth, 0
  local from, hazard, first_edge = edges.from, edges.hazard, edges.first
  -- The units of a stage's predecessors, in order and each once: the
  -- last is the latest.
  local units_before = {}
  -- Depths and what the stages read are for fusion only.
  local fusing = false
  if fuse then
    for index = 1, #stages do
      if stages[index].fusion then
        fusing = true
        break
      end
    end
  end
  for index = 1, #stages do
    local stage = stages[index]
    local deepest, count, latest_read = 0, 0, 0
    for e = first_edge[index], first_edge[index + 1] - 1 do
      local p = from[e]
      local pu = unit_of[p]
      if fusing then
        local d = depth[p]
        if d >= deepest then deepest = d + 1 end
        if pu > latest_read and hazard[e] == "RAW" then latest_read = pu end
      end
      -- (add_predecessor, written out: this is every edge.)
      local position = count + 1
      while position > 1 and units_before[position - 1] > pu do
        position = position - 1
      end
      if position == 1 or units_before[position - 1] < pu then
        if position <= count then
          for k = count, position, -1 do
            units_before[k + 1] = units_before[k]
          end
        end
        units_before[position] = pu
        count = count + 1
      end
    end
    depth[index] = deepest
    local group
    if fusing and stage.fusion and count > 0 and latest_read == units_before[count] then
      local latest = groups[latest_read]
      -- (A group is open to more stages when its first one is fusable.)
      if stages[latest.head].fusion
          and takes(stages, edges, depth, unit_of, latest, index, can_fuse) then
        group = latest
      end
    end
    local u
    if group then
      u = group.unit
      local members = group.stages
      members[#members + 1] = index
      add_to_group(group, stage)
      -- The stage's other predecessors join the group's (the group is the
      -- latest of them: a unit never follows a later one).
      local after = group.after
      if count > 1 and after == NONE then
        after = {}
        group.after = after
      end
      local known = #after
      for k = 1, count - 1 do
        known = add_predecessor(after, known, units_before[k])
      end
    else
      -- A new unit, after every other so far, its list of predecessors
      -- made at its size (a constructor of the values is cheapest; most
      -- units have one to three predecessors).
      local after = NONE
      if count == 1 then
        after = { units_before[1] }
      elseif count == 2 then
        after = { units_before[1], units_before[2] }
      elseif count == 3 then
        after = { units_before[1], units_before[2], units_before[3] }
      elseif count > 3 then
        after = { table.unpack(units_before, 1, count) }
      end
      -- With the fields assign_streams fills in already there (stream,
      -- position, signals): the table is made at its size, eight fields.
      unit_count = unit_count + 1
      u = unit_count
      groups[u] = { head = index, stages = { index }, after = after, waits = NONE, unit = u,
                    stream = 0, position = 0, signals = false }
    end
    unit_of[index] = u
  end
  return groups, unit_of
end

-- ---- streams ---------------------------------------------------------------------

-- Units in a topological order (their first stages' order), each put on
-- the stream of a predecessor it follows directly, else on a stream whose
-- last unit it follows already, else on a new stream while there are fewer
-- than max_streams, else on the stream that has been idle longest. A
-- vector clock per unit (the last position of each other stream it
-- follows) finds which waits are implied by others.
--
-- A unit's clock is its stream's last unit's, with what its waits add (a
-- wait's clock and the wait's own position): a unit that waits for none
-- has the same clock, and shares it. A clock says nothing of its unit's
-- own stream (it is never read for it: the unit's position says it).
--
-- Each unit's stream and position as columns too (the unit tables get
-- them as well: these are read for every predecessor), and the clocks in
-- one array of `width` entries each (the most streams there can be), the
-- one at clock_of[u] being entries clock_of[u] + 1 .. clock_of[u] + width;
-- the first (at 0) all zeros, for a stream's first unit. Kept from one
-- schedule to the next (every entry is written before it is read), so that a
-- schedule does not grow them again.
local kept_stream_of, kept_position_of, kept_clock_of, kept_clocks = {}, {}, {}, {}

local function assign_streams(units, max_streams)
  local streams, tails, lengths, count = {}, {}, {}, 0
  local stream_of, position_of, clock_of, clocks = kept_stream_of, kept_position_of, kept_clock_of, kept_clocks
  local width = math.min(max_streams, #units)
  for s = 1, width do
    clocks[s] = 0
  end
  local made = 0 -- clocks made after the zeros
  local waits_found = {} -- a unit's waits, before its list is made
  for u = 1, #units do
    local unit = units[u]
    local after = unit.after
    local before = #after
    local chosen
    -- A predecessor that is its stream's last unit: the lowest such stream.
    for k = 1, before do
      local p = after[k]
      local s = stream_of[p]
      -- (p is its stream's last unit when no later one is: tails[s] <= p.)
      if tails[s] <= p and (chosen == nil or s < chosen) then
        chosen = s
      end
    end
    if not chosen then
      -- Else the lowest stream whose last unit it follows already: one
      -- where a predecessor's clock has reached the stream's length. Only
      -- a predecessor made after that last unit can have (the list is in
      -- order: the latest first, down to the last unit), and not for its
      -- own stream (where it is not the last unit).
      local latest = after[before]
      for s = 1, count do
        local tail = tails[s]
        if latest and latest > tail then
          local length = lengths[s]
          for k = before, 1, -1 do
            local p = after[k]
            if p < tail then
              break
            end
            if clocks[clock_of[p] + s] >= length then
              chosen = s
              break
            end
          end
          if chosen then break end
        end
      end
    end
    if not chosen and count < max_streams then
      count = count + 1
      chosen = count
      streams[chosen], lengths[chosen] = {}, 0
    end
    if not chosen then
      chosen = 1
      for s = 2, count do
        if tails[s] < tails[chosen] then
          chosen = s
        end
      end
    end
    local position = lengths[chosen] + 1
    lengths[chosen] = position
    streams[chosen][position] = u
    unit.stream, unit.position = chosen, position
    stream_of[u], position_of[u] = chosen, position
    -- The waits: what the stream's order does not imply already, the
    -- latest predecessors first (their clocks imply the most). The clock
    -- is the last unit's until the first wait, then one of the unit's own.
    local tail = tails[chosen]
    local clock = tail and clock_of[tail] or 0
    local wait_count = 0
    for k = before, 1, -1 do
      local p = after[k]
      local ps = stream_of[p]
      local p_position = position_of[p]
      if ps ~= chosen and clocks[clock + ps] < p_position then
        if wait_count == 0 then
          made = made + 1
          local own = made * width
          for s = 1, width do clocks[own + s] = clocks[clock + s] end
          clock = own
        end
        wait_count = wait_count + 1
        waits_found[wait_count] = p
        units[p].signals = true
        local p_clock = clock_of[p]
        for s = 1, count do
          local value = clocks[p_clock + s]
          if value > clocks[clock + s] then clocks[clock + s] = value end
        end
        if p_position > clocks[clock + ps] then clocks[clock + ps] = p_position end
      end
    end
    clock_of[u] = clock
    -- The list made at its size (most units wait for one or two).
    if wait_count == 1 then
      unit.waits = { waits_found[1] }
    elseif wait_count == 2 then
      unit.waits = { waits_found[1], waits_found[2] }
    elseif wait_count > 2 then
      unit.waits = { table.unpack(waits_found, 1, wait_count) }
    end
    tails[chosen] = u
  end
  return streams
end

-- ---- the schedule -----------------------------------------------------------------

-- schedule.build(data, stages, options) -> schedule
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
-- The schedule (everything indexes stages and units by their position):
--   edges       { from = { stage... }, to = { stage... }, data = { name... },
--               hazard = { "RAW" | "WAR" | "WAW"... }, first = { edge... } },
--               edge k being from[k] -> to[k] (columns, not a table per
--               edge: a 1,000-stage schedule has thousands), the edges into
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
function schedule.build(data_list, stages, options)
  local max_streams = options.max_streams or 4
  local edges, unwritten, spaces = find_edges(stages)
  -- The units: one per group, in the order of their first stages (a
  -- topological order, see group_stages).
  local units, unit_of = group_stages(stages, edges, options.fuse ~= false,
                                      options.can_fuse or function() return true end)
  local streams = assign_streams(units, max_streams)

  -- The one unit each data is touched by (or false for several).
  local touched_by = {}
  for index = 1, #stages do
    local u = unit_of[index]
    local accesses = stages[index].accesses
    for a = 1, #accesses do
      local d = accesses[a].data
      local seen = touched_by[d]
      if seen == nil then
        touched_by[d] = u
      elseif seen and seen ~= u then
        touched_by[d] = false
      end
    end
  end

  -- Fusion groups and what stays in registers: data written in a group
  -- that is a temporary nobody outside the group touches. A temporary
  -- with a view any stage touches lives in memory.
  local viewed = {}
  for _, d in ipairs(data_list) do
    if d.parent and touched_by[d] ~= nil then
      viewed[d.parent] = true
    end
  end
  local fusion_groups, in_registers = {}, {}
  -- For the group looked at (u): written_in[d] == u once it writes d,
  -- read_after[d] == u once it reads d after writing it (marks by unit:
  -- no tables per group).
  local written_in, read_after, order = {}, {}, {}
  for u = 1, #units do
    local g = units[u]
    local members = g.stages
    if #members > 1 then
      -- In order: what the group writes, and what it reads after writing.
      local written = 0
      for m = 1, #members do
        local accesses = stages[members[m]].accesses
        for a = 1, #accesses do
          local access = accesses[a]
          if access.mode ~= "w" and written_in[access.data] == u then
            read_after[access.data] = u
          end
        end
        for a = 1, #accesses do
          local access = accesses[a]
          local d = access.data
          if access.mode ~= "r" and written_in[d] ~= u then
            written_in[d] = u
            written = written + 1
            order[written] = d
          end
        end
      end
      local info = { unit = u, stages = members, in_registers = {}, written = {} }
      local registers, stored = info.in_registers, info.written
      for k = 1, written do
        local d = order[k]
        if d.temporary and not d.parent and not viewed[d] and touched_by[d] == u
            and read_after[d] == u then
          registers[#registers + 1] = d
          in_registers[d] = true
        else
          stored[#stored + 1] = d
        end
      end
      if #stored == 0 then
        -- Nothing outside reads what it computes: its last value is stored
        -- all the same (made, and reported below as read by nobody).
        local last = table.remove(registers)
        in_registers[last] = nil
        stored[1] = last
      end
      fusion_groups[#fusion_groups + 1] = info
      g.group = info
    end
  end

  local temporaries = {}
  for _, d in ipairs(data_list) do
    if d.temporary and not d.parent then
      local space = spaces[d.key]
      local first, last = space and space.first, space and space.last
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
    groups = fusion_groups, temporaries = temporaries,
    warnings = unwritten_reads(data_list, stages, unwritten, touched_by),
  }
end

-- ---- a pipeline's schedule --------------------------------------------------------

local MAX_FUSED = 16 -- stages per fused kernel

-- The methods that declare a stage, for a message.
local STAGE_METHODS = {}
for k, kind in ipairs(stage_kinds) do STAGE_METHODS[k] = "p:" .. kind.method end
STAGE_METHODS = table.concat(STAGE_METHODS, ", ")

local function can_fuse(group, stage, stages)
  local head = stages[group.head].fusion
  return #group.stages < MAX_FUSED and head.count == stage.fusion.count
    and head.device == stage.fusion.device
end

-- Marks unit.programmatic where a unit's launch may use programmatic
-- stream serialization (PDL): its stream's unit before it launches a
-- kernel, it waits for no other stream (an event wait would come between),
-- its code waits for the kernel before (a fusion group's kernels, and the
-- kinds with after_kernel), and no timing events are recorded between
-- units. Whether the device takes it (9.0 and up) is the launch's affair.
local function mark_programmatic(p, made)
  if p.options.timing == "events" then return end
  local stages, units = p.stages, made.units
  local function launches_kernel(unit)
    return unit.group ~= nil or stages[unit.head].kind.launches_kernel == true
  end
  local function after_kernel(unit)
    local stage = stages[unit.head]
    return unit.group ~= nil or (stage.kind.after_kernel ~= nil and stage.kind.after_kernel(stage))
  end
  for _, list in ipairs(made.streams) do
    for k = 2, #list do
      local unit = units[list[k]]
      if #unit.waits == 0 and launches_kernel(units[list[k - 1]]) and after_kernel(unit) then
        unit.programmatic = true
      end
    end
  end
end

-- The schedule pipeline p runs (and p:plan() reports): the planner's, over
-- the accesses each stage kind gives it, with what each temporary in memory
-- becomes (a pool's: pipeline/compile.lua). Cached until the declaration
-- changes (declare.changed).
function schedule.of(p)
  local cached = p.schedule
  if cached then
    return cached
  end
  if #p.stages == 0 then
    raise(("pipeline '%s' has no stages: declare some (%s)"):format(p.name, STAGE_METHODS))
  end
  for _, stage in ipairs(p.stages) do
    local accesses = stage.kind.accesses
    if accesses then
      stage.accesses = accesses(p, stage)
    end
  end
  local made = schedule.build(p.data, p.stages, {
    max_streams = p.options.max_streams, fuse = p.options.fuse, can_fuse = can_fuse,
  })
  for _, t in ipairs(made.temporaries) do
    if t.where == "allocated" then
      t.where = "pool"
    end
  end
  if p.options.strict then
    for _, text in ipairs(made.warnings) do
      if text:find(" reads ", 1, true) then
        raise(("pipeline '%s': %s (strict)"):format(p.name, text))
      end
    end
  end
  mark_programmatic(p, made)
  made.version = p.version
  p.schedule = made
  return made
end

return schedule
