-- A pipeline's schedule for its user, all without a GPU: p:plan() (plain
-- tables), p:explain() (text) and p:to_dot() (Graphviz).
local declare = require("gpurun.pipeline.declare")
local fuse = require("gpurun.pipeline.fuse")
local schedule = require("gpurun.pipeline.schedule")

local report = {}

-- ---- plan() ---------------------------------------------------------------------

local MODE_TEXT = { r = "read", w = "written", rw = "read and written" }

-- A unit's name: its stages' names joined by " + " (a single stage's
-- own name, with no list made for it: most units are one stage).
local function unit_name(stages, unit)
  local members = unit.stages
  if #members == 1 then
    return stages[members[1]].name
  end
  local names = {}
  for k = 1, #members do
    names[k] = stages[members[k]].name
  end
  return table.concat(names, " + ")
end

-- A fresh copy of a list (plan() hands out no list of the plan's own).
local function copy_of(list)
  return table.move(list, 1, #list, 1, {})
end

-- The names of a list of data, in a fresh list.
local function names_of(list)
  local names = {}
  for k = 1, #list do
    names[k] = list[k].name
  end
  return names
end

-- plan([{ sources = true }]) -> { name, stages, edges, units, streams,
-- groups, temporaries, warnings } as docs/api.md describes: the schedule
-- as plain tables, names not objects, made fresh at each call. With
-- sources, each fusion group's CUDA C too (generated then: planning alone
-- does not).
--
-- A 1,000-stage plan is some ten thousand of these tables: they are made
-- in numeric loops, each at its size by one constructor, and what is
-- looked up for every item is looked up once, before its loop.
function report.plan(self, options)
  local sources = declare.check_options_table(("pipeline '%s': plan"):format(self.name), options,
                                              { "sources" }, "{ sources = true }").sources
  local sched = schedule.of(self)
  local stages, units, unit_of = self.stages, sched.units, sched.unit_of

  local stages_out = {}
  for index = 1, #stages do
    local stage = stages[index]
    local list = stage.accesses
    local reads, writes, accesses, read_count, write_count = {}, {}, {}, 0, 0
    for k = 1, #list do
      local a = list[k]
      local name, mode = a.data.name, a.mode
      if mode ~= "w" then
        read_count = read_count + 1
        reads[read_count] = name
      end
      if mode ~= "r" then
        write_count = write_count + 1
        writes[write_count] = name
      end
      accesses[k] = { data = name, mode = mode, how = a.how }
    end
    local u = unit_of[index]
    stages_out[index] = { index = index, name = stage.name, kind = stage.kind.name, reads = reads,
                          writes = writes, accesses = accesses, unit = u,
                          stream = units[u].stream, not_fused = stage.not_fused }
  end

  local edges_out = {}
  local edges = sched.edges
  local from, to, data, hazards, why = edges.from, edges.to, edges.data, edges.hazard, schedule.HAZARD
  for i = 1, #from do
    local hazard = hazards[i]
    edges_out[i] = { from = from[i], to = to[i], data = data[i], hazard = hazard, why = why[hazard] }
  end

  local units_out = {}
  for u = 1, #units do
    local unit = units[u]
    units_out[u] = { index = u, name = unit_name(stages, unit), stages = copy_of(unit.stages),
                     stream = unit.stream, after = copy_of(unit.after), waits = copy_of(unit.waits),
                     fused = unit.group ~= nil, programmatic = unit.programmatic == true }
  end

  local streams_out = {}
  for s = 1, #sched.streams do
    streams_out[s] = copy_of(sched.streams[s])
  end

  local groups_out = {}
  for g = 1, #sched.groups do
    local group = sched.groups[g]
    local entry = { unit = group.unit, stages = copy_of(group.stages), kernel = fuse.kernel_name(self, group),
                    in_registers = names_of(group.in_registers), written = names_of(group.written) }
    if sources then
      entry.expressions = copy_of(fuse.describe(self, group).stage_texts)
      entry.source = fuse.kernel(self, group).source
    end
    groups_out[g] = entry
  end

  local temporaries_out = {}
  for k = 1, #sched.temporaries do
    local t = sched.temporaries[k]
    local d = t.data
    temporaries_out[k] = { name = d.name, count = d.count, dtype = d.dtype, bytes = d.hi - d.lo,
                           where = t.where, first = t.first, last = t.last }
  end

  return { name = self.name, stages = stages_out, edges = edges_out, units = units_out,
           streams = streams_out, groups = groups_out, temporaries = temporaries_out,
           warnings = copy_of(sched.warnings) }
end

-- ---- explain() ------------------------------------------------------------------

local WHERE_TEXT = {
  registers = "in registers (fused: never made)",
  pool = "from the memory pool (inside the graph when captured)",
  unused = "unused",
}

local function size_text(bytes)
  if bytes >= 1 << 30 then return ("%.1f GiB"):format(bytes / (1 << 30)) end
  if bytes >= 1 << 20 then return ("%.1f MiB"):format(bytes / (1 << 20)) end
  if bytes >= 1 << 10 then return ("%.1f KiB"):format(bytes / (1 << 10)) end
  return bytes .. " B"
end

-- explain() -> the plan as text: stages and what each reads and writes,
-- the edges and their hazards, the streams and their waits, the fusion
-- groups, the temporaries and the warnings.
function report.explain(self)
  local p = report.plan(self)
  local lines = {}
  local function add(fmt, ...) lines[#lines + 1] = fmt:format(...) end
  add("pipeline '%s': %d stage%s -> %d unit%s on %d stream%s, %d fusion group%s", p.name,
      #p.stages, #p.stages == 1 and "" or "s", #p.units, #p.units == 1 and "" or "s", #p.streams,
      #p.streams == 1 and "" or "s", #p.groups, #p.groups == 1 and "" or "s")
  add("stages:")
  for _, s in ipairs(p.stages) do
    add("  %d %-16s %-6s reads %s; writes %s  (stream %d%s)", s.index, s.name, s.kind,
        #s.reads > 0 and table.concat(s.reads, ", ") or "-",
        #s.writes > 0 and table.concat(s.writes, ", ") or "-", s.stream,
        p.units[s.unit].fused and (", fused in unit %d"):format(s.unit) or "")
    local describe = self.stages[s.index].kind.describe
    for _, a in ipairs(s.accesses) do
      if a.how == "declared" then
        add("      %s %s: declared", a.data, MODE_TEXT[a.mode])
      elseif describe then
        add("      %s %s: %s", a.data, MODE_TEXT[a.mode], describe(a))
      end
    end
    if s.not_fused then
      add("      not fusable: %s", s.not_fused)
    end
  end
  add("edges:")
  if #p.edges == 0 then add("  none: every stage is independent") end
  for _, e in ipairs(p.edges) do
    add("  %s -> %s  %s: %s (%s)", p.stages[e.from].name, p.stages[e.to].name, e.data, e.why, e.hazard)
  end
  add("streams:")
  for s, list in ipairs(p.streams) do
    local items = {}
    for _, u in ipairs(list) do
      local unit = p.units[u]
      local text = unit.fused and ("[" .. unit.name .. "]") or unit.name
      if unit.programmatic then
        text = text .. " (PDL)" -- launched to overlap the kernel before it
      end
      if #unit.waits > 0 then
        local on = {}
        for _, w in ipairs(unit.waits) do
          on[#on + 1] = ("%s on stream %d"):format(p.units[w].name, p.units[w].stream)
        end
        text = text .. " (waits for " .. table.concat(on, ", ") .. ")"
      end
      items[#items + 1] = text
    end
    add("  stream %d: %s", s, table.concat(items, " -> "))
  end
  if #p.streams > 1 then
    add("  %s after the work queued before the pipeline on stream 1, which waits for %s at its end",
        #p.streams == 2 and "stream 2 starts" or ("streams 2..%d start"):format(#p.streams),
        #p.streams == 2 and "it" or "them")
  end
  if #p.groups > 0 then
    add("fusion groups:")
    for g, group in ipairs(p.groups) do
      local names = {}
      for _, index in ipairs(group.stages) do names[#names + 1] = p.stages[index].name end
      add("  %d: %s -> one kernel '%s', writes %s%s", g, table.concat(names, ", "), group.kernel,
          #group.written > 0 and table.concat(group.written, ", ") or "nothing",
          #group.in_registers > 0 and ("; " .. table.concat(group.in_registers, ", ") .. " in registers") or "")
    end
  end
  if #p.temporaries > 0 then
    add("temporaries:")
    for _, t in ipairs(p.temporaries) do
      add("  %s: %d x %s (%s), %s", t.name, t.count, t.dtype, size_text(t.bytes), WHERE_TEXT[t.where])
    end
  end
  if #p.warnings > 0 then
    add("warnings:")
    for _, text in ipairs(p.warnings) do add("  %s", text) end
  end
  return table.concat(lines, "\n")
end

-- ---- to_dot() -------------------------------------------------------------------

local function dot_string(text)
  return '"' .. tostring(text):gsub('[\\"]', "\\%0"):gsub("\n", "\\n") .. '"'
end

-- to_dot([{ title = }]) -> Graphviz DOT text: one box per unit (fused
-- groups double-bordered) in a cluster per stream, one arrow per ordering
-- between units labelled with the data and hazard, bold where it is an
-- event wait between streams.
function report.to_dot(self, options)
  options = declare.check_options_table(("pipeline '%s': to_dot"):format(self.name), options,
                                        { "title" }, "{ title = }")
  local title = options.title or ("pipeline '%s'"):format(self.name)
  local p = report.plan(self)
  local lines = { "digraph " .. dot_string(self.name) .. " {",
                  "  label=" .. dot_string(title) .. "; labelloc=t; rankdir=TB;",
                  '  node [shape=box, style=rounded, fontname="Helvetica"];',
                  '  edge [fontname="Helvetica", fontsize=10];' }
  for s, list in ipairs(p.streams) do
    lines[#lines + 1] = ("  subgraph cluster_stream_%d {"):format(s)
    lines[#lines + 1] = ("    label=%s; style=dashed;"):format(dot_string("stream " .. s))
    for _, u in ipairs(list) do
      local unit = p.units[u]
      local label = unit.name
      if unit.fused then
        label = unit.name:gsub(" %+ ", " +\n") .. "\n(fused)"
      end
      lines[#lines + 1] = ("    u%d [label=%s%s];"):format(u, dot_string(label),
        unit.fused and ", peripheries=2" or "")
    end
    lines[#lines + 1] = "  }"
  end
  local drawn = {}
  local waits = {}
  for _, unit in ipairs(p.units) do
    for _, w in ipairs(unit.waits) do waits[w * 65536 + unit.index] = true end
  end
  for _, e in ipairs(p.edges) do
    local from, to = p.stages[e.from].unit, p.stages[e.to].unit
    local key = from * 65536 + to
    if from ~= to and not drawn[key] then
      drawn[key] = true
      lines[#lines + 1] = ("  u%d -> u%d [label=%s%s];"):format(from, to,
        dot_string(e.data .. " " .. e.hazard), waits[key] and ", style=bold" or "")
    end
  end
  lines[#lines + 1] = "}"
  return table.concat(lines, "\n") .. "\n"
end

return report
