-- A pipeline's plan for its user: pipeline:plan() (tables), :explain()
-- (text) and :to_dot() (Graphviz), all without a GPU; and the planning
-- step they share with running (Pipeline:planned), cached until the
-- declaration changes.
local Pipeline = require("gpurun.compute.pipeline")
local planner = require("gpurun.compute.pipeline_plan")
local fuse = require("gpurun.compute.pipeline_fuse")
local source = require("gpurun.compute.elementwise_source")

local raise = source.raise

local MAX_FUSED = 16 -- stages per fused kernel

-- A host callback without reads or writes orders against every data.
local function barrier_accesses(self, stage)
  local list = {}
  for _, d in ipairs(self.data) do
    list[#list + 1] = { data = d, mode = "rw", maybe_read = true,
                        how = "a host callback without reads or writes: a barrier" }
  end
  stage.accesses = list
end

local function can_fuse(group, stage, stages)
  local head = stages[group.head].fusion
  return #group.stages < MAX_FUSED and head.count == stage.fusion.count
    and head.device == stage.fusion.device
end

-- The plan the pipeline runs: the planner's, with a fused elementwise
-- pipeline per fusion group and what each temporary becomes.
function Pipeline:planned()
  local cached = self.cached_plan
  if cached then
    return cached
  end
  if #self.stages == 0 then
    raise(("pipeline '%s' has no stages: declare some (p:call, p:launch, p:copy, p:fill, p:host)")
          :format(self.name))
  end
  for _, stage in ipairs(self.stages) do
    if stage.barrier then
      barrier_accesses(self, stage)
    end
  end
  local plan = planner.build(self.data, self.stages, {
    max_streams = self.options.max_streams, fuse = self.options.fuse, can_fuse = can_fuse,
  })
  -- What lives in memory comes from a pool (compute/pipeline_run.lua).
  for _, t in ipairs(plan.temporaries) do
    if t.where == "allocated" then
      t.where = "pool"
    end
  end
  if self.options.strict then
    for _, text in ipairs(plan.warnings) do
      if text:find(" reads ", 1, true) then
        raise(("pipeline '%s': %s (strict)"):format(self.name, text))
      end
    end
  end
  plan.version = self.version
  self.cached_plan = plan
  return plan
end

-- The fused kernel's name of a group, made on first use.
function Pipeline:kernel_name(group)
  group.kernel = group.kernel or fuse.kernel_name(self.name, group, self.stages)
  return group.kernel
end

-- What a fusion group's kernel computes (fuse.describe), worked out on
-- first use: planning alone does not need it.
function Pipeline:fused(group)
  local fused = group.fused
  if not fused then
    fused = fuse.describe(self.name, group, self.stages)
    group.fused = fused
  end
  return fused
end

-- The elementwise pipeline of a fusion group, made on first use through
-- the module's own function (its methods are guarded), once per fused
-- kernel's text: a plan made again (data pointed at another buffer)
-- launches the same compiled kernels, which Graph:update needs.
function Pipeline:fused_pipe(group)
  local fused = self:fused(group)
  if fused.pipe then
    return fused.pipe
  end
  local cache = self.fused_cache
  return fuse.make(fused, function(in_params, stages, outputs, name)
    local key = table.concat({ name, in_params, table.concat(stages, ";"), table.concat(outputs, ",") }, "|")
    local pipe = cache[key]
    if not pipe then
      pipe = require("gpurun").elementwise_pipeline(in_params, stages, outputs, name, { fuse = "always" })
      cache[key] = pipe
    end
    return pipe
  end)
end

-- ---- plan() ---------------------------------------------------------------------

local MODE_TEXT = { r = "read", w = "written", rw = "read and written" }

local function unit_name(self, unit)
  local names = {}
  for _, index in ipairs(unit.stages) do
    names[#names + 1] = self.stages[index].name
  end
  return table.concat(names, " + ")
end

-- plan([{ sources = true }]) -> { name, stages, edges, units, streams,
-- groups, temporaries, warnings } as docs/api.md describes: plain tables,
-- names not objects, made fresh at each call. With sources, each fusion
-- group's CUDA C too (generated then: planning alone does not).
function Pipeline:plan(options)
  local sources = Pipeline.check_options_table(("pipeline '%s': plan"):format(self.name), options,
                                               { "sources" }, "{ sources = true }").sources
  local plan = self:planned()
  local out = { name = self.name, stages = {}, edges = {}, units = {}, streams = {}, groups = {},
                temporaries = {}, warnings = {} }
  for index, stage in ipairs(self.stages) do
    local reads, writes, accesses = {}, {}, {}
    for _, a in ipairs(stage.accesses) do
      if a.mode ~= "w" then reads[#reads + 1] = a.data.name end
      if a.mode ~= "r" then writes[#writes + 1] = a.data.name end
      accesses[#accesses + 1] = { data = a.data.name, mode = a.mode, how = a.how }
    end
    local unit = plan.units[plan.unit_of[index]]
    out.stages[index] = { index = index, name = stage.name, kind = stage.kind, reads = reads,
                          writes = writes, accesses = accesses, unit = plan.unit_of[index],
                          stream = unit.stream, not_fused = stage.not_fused }
  end
  local edges = plan.edges
  for i = 1, #edges.from do
    local hazard = edges.hazard[i]
    out.edges[i] = { from = edges.from[i], to = edges.to[i], data = edges.data[i], hazard = hazard,
                     why = planner.HAZARD[hazard] }
  end
  for u, unit in ipairs(plan.units) do
    local stages = {}
    for k, index in ipairs(unit.stages) do stages[k] = index end
    local after, waits = {}, {}
    for k, p in ipairs(unit.after) do after[k] = p end
    for k, p in ipairs(unit.waits) do waits[k] = p end
    out.units[u] = { index = u, name = unit_name(self, unit), stages = stages, stream = unit.stream,
                     after = after, waits = waits, fused = unit.group ~= nil }
  end
  for s, list in ipairs(plan.streams) do
    local copy = {}
    for k, u in ipairs(list) do copy[k] = u end
    out.streams[s] = copy
  end
  for g, group in ipairs(plan.groups) do
    local registers, written, stages = {}, {}, {}
    for k, d in ipairs(group.in_registers) do registers[k] = d.name end
    for k, d in ipairs(group.written) do written[k] = d.name end
    for k, index in ipairs(group.stages) do stages[k] = index end
    out.groups[g] = { unit = group.unit, stages = stages, kernel = self:kernel_name(group),
                      in_registers = registers, written = written }
    if sources then
      local fused = self:fused(group)
      out.groups[g].expressions = table.move(fused.stage_texts, 1, #fused.stage_texts, 1, {})
      out.groups[g].source = self:fused_pipe(group).source
    end
  end
  for k, t in ipairs(plan.temporaries) do
    local d = t.data
    out.temporaries[k] = { name = d.name, count = d.count, dtype = d.dtype, bytes = d.hi - d.lo,
                           where = t.where, first = t.first, last = t.last }
  end
  for k, text in ipairs(plan.warnings) do out.warnings[k] = text end
  return out
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
function Pipeline:explain()
  local p = self:plan()
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
    for _, a in ipairs(s.accesses) do
      if a.how ~= "declared" and self.stages[s.index].kind == "kernel" then
        add("      %s %s: %s", a.data, MODE_TEXT[a.mode], a.how)
      elseif a.how == "declared" then
        add("      %s %s: declared", a.data, MODE_TEXT[a.mode])
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
function Pipeline:to_dot(options)
  options = Pipeline.check_options_table(("pipeline '%s': to_dot"):format(self.name), options,
                                         { "title" }, "{ title = }")
  local title = options.title or ("pipeline '%s'"):format(self.name)
  local p = self:plan()
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

return Pipeline
