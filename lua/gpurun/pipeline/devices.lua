-- Running a pipeline over several devices: gpurun.pipeline{ devices = {
-- 0, 1 } }. Every buffer and temporary of the declaration has one element
-- count N; each device gets a slice of it (N split as evenly as it goes,
-- device order), and a one-device pipeline of its own (pipeline/run.lua)
-- over its slices, each stage declared again there by its kind's split.
-- Only stages that work element by element split: elementwise kernels and
-- pipelines, copies and fills.
local gpurun = require("gpurun")
local common = require("gpurun.common")
local declare = require("gpurun.pipeline.declare")
local report = require("gpurun.pipeline.report")
local run = require("gpurun.pipeline.run")
local schedule = require("gpurun.pipeline.schedule")

local raise = common.raise

local devices = {}

-- A slice's own pipeline: declared, planned and run as one device's.
local Slice = { __index = declare.methods }

-- The element count every data shares, and how each stage splits
-- (split_of[stage] = declare_on(slice)); raises naming what cannot split.
local function check_splittable(self)
  local count
  for _, d in ipairs(self.data) do
    if d.state then
      goto next_data -- a kernel's own state: its stage is refused below
    end
    if d.parent then
      raise(("pipeline '%s' over devices: '%s' is a view; a pipeline split across devices takes "
             .. "whole buffers and temporaries"):format(self.name, d.name))
    end
    if d.host then
      raise(("pipeline '%s' over devices: '%s' is host memory; split pipelines take device "
             .. "buffers"):format(self.name, d.name))
    end
    if count and d.count ~= count then
      raise(("pipeline '%s' over devices: '%s' has %d elements, others %d; every buffer of a "
             .. "split pipeline has one count"):format(self.name, d.name, d.count, count))
    end
    count = d.count
    ::next_data::
  end
  local split_of = {}
  for _, stage in ipairs(self.stages) do
    local kind = stage.kind
    local declare_on, why
    if kind.split then
      declare_on, why = kind.split(stage)
    else
      why = ("a %s stage"):format(kind.name)
    end
    if not declare_on then
      raise(("pipeline '%s' over devices: stage '%s' (%s) does not work element by element, so "
             .. "it cannot be split across devices (elementwise kernels and pipelines, copies and "
             .. "fills can)"):format(self.name, stage.name, why))
    end
    split_of[stage] = declare_on
  end
  return count, split_of
end

-- slice:declared(stage) -> the reads and writes lists a stage declared,
-- as this slice's data (nil for an empty one).
local function declared(slice, stage)
  local reads, writes = {}, {}
  for d, mode in pairs(stage.declared or {}) do
    if mode ~= "r" then writes[#writes + 1] = slice.map[d] end
    if mode ~= "w" then reads[#reads + 1] = slice.map[d] end
  end
  return #reads > 0 and reads or nil, #writes > 0 and writes or nil
end

-- The elements device k of `count` devices takes of n.
local function slice_count(n, count, k)
  return n // count + (k <= n % count and 1 or 0)
end

-- The slices and their pipelines, made once per declaration. On the device
-- that holds a buffer the slice is a view of it, on another a buffer of its
-- own, filled from the buffer's slice before each run (when the host filled
-- it) and copied back after (when a stage writes it).
local function slices(self)
  local state = self.state
  if state.sliced and state.sliced.version == self.version then
    return state.sliced
  end
  if state.sliced then
    for _, slice in ipairs(state.sliced) do run.close(slice.pipeline) end
  end
  if #self.stages == 0 then
    raise(("pipeline '%s' has no stages"):format(self.name))
  end
  local n, split_of = check_splittable(self)
  schedule.of(self) -- the declaration's own checks (strict mode) first
  local ordinals = self.options.devices
  local sliced = { version = self.version }
  local written = {}
  for _, stage in ipairs(self.stages) do
    for _, a in ipairs(stage.accesses) do
      if a.mode ~= "r" then written[a.data] = true end
    end
  end
  local first = 1
  for k, ordinal in ipairs(ordinals) do
    local count = slice_count(n, #ordinals, k)
    local device = gpurun.Device(ordinal)
    device:set_current()
    local sub = declare.new(declare.options{ name = ("%s_d%d"):format(self.name, ordinal),
      max_streams = self.options.max_streams, fuse = self.options.fuse,
      quiet = self.options.quiet, timing = self.options.timing }, Slice)
    local slice = { device = device, ordinal = ordinal, first = first, count = count,
                    pipeline = sub, scatter = {}, gather = {}, map = {}, declared = declared }
    if count > 0 then
      for _, d in ipairs(self.data) do
        if d.temporary then
          slice.map[d] = sub:temporary(d.name, count, d.dtype)
        else
          local part = d.buffer:view(first, count)
          if d.device == ordinal then
            slice.map[d] = sub:buffer(d.name, part, { filled = d.filled })
          else
            local own = gpurun.empty(count, d.dtype)
            slice.map[d] = sub:buffer(d.name, own, { filled = d.filled })
            if d.filled then slice.scatter[#slice.scatter + 1] = { own = own, part = part } end
            if written[d] then slice.gather[#slice.gather + 1] = { own = own, part = part } end
          end
        end
      end
      for _, s in ipairs(self.scalars) do
        slice.map[s] = sub:scalar(s.name, s.value, s.dtype)
      end
      for _, stage in ipairs(self.stages) do
        declare.add_stage(sub, stage.kind, split_of[stage](slice))
      end
      slice.stream = device:create_stream()
      sliced[#sliced + 1] = slice
    end
    first = first + count
  end
  state.sliced = sliced
  return sliced
end

-- Runs each device's slice: copies in, the pipeline (as stages or as a
-- graph), copies out; all devices at once, on their own streams, and
-- p:wait() waits for all. Copies between devices follow Buffer:copy_from's
-- rules (peer access where there is, the driver's staging where not),
-- queued on the slice's stream with the slice's device current.
local function each_slice(self, stream, how)
  if stream ~= nil then
    raise(("pipeline '%s' over devices: run and graph take no stream (each device runs on a "
           .. "stream of its own)"):format(self.name))
  end
  local list = slices(self)
  local results = {}
  for k, slice in ipairs(list) do
    slice.device:set_current()
    for _, copy in ipairs(slice.scatter) do
      copy.own:copy_from(copy.part, slice.stream)
    end
    results[k] = how(slice.pipeline, slice.stream)
    for _, copy in ipairs(slice.gather) do
      copy.own:copy_to(copy.part, slice.stream)
    end
  end
  list[1].device:set_current()
  return results
end

-- run(): every slice's stages on its device's stream.
function devices.run(self, stream)
  each_slice(self, stream, run.run)
end

-- graph() -> { Graph... }: every slice's graph, one per device.
function devices.graph(self, stream)
  return each_slice(self, stream, run.graph)
end

function devices.wait(self)
  for _, slice in ipairs(self.state.sliced or {}) do
    slice.stream:sync()
  end
end

-- set(name, value): as one device's, and a scalar's new value in every slice.
function devices.set(self, name, value)
  run.set(self, name, value)
  if self.state.sliced then
    local target = type(name) == "string" and self.by_name[name] or name
    if getmetatable(target) == declare.Scalar then
      for _, slice in ipairs(self.state.sliced) do
        run.set(slice.pipeline, target.name, value)
      end
    end
  end
end

-- timings() -> every slice's units' timings, each with its device.
function devices.timings(self)
  local list = {}
  for _, slice in ipairs(self.state.sliced or {}) do
    for _, entry in ipairs(run.timings(slice.pipeline)) do
      entry.device = slice.ordinal
      list[#list + 1] = entry
    end
  end
  return list
end

function devices.close(self)
  for _, slice in ipairs(self.state.sliced or {}) do
    run.close(slice.pipeline)
    slice.stream:close()
  end
  run.close(self)
end

-- explain(): the schedule, then how the pipeline splits over its devices.
function devices.explain(self)
  local ordinals = self.options.devices
  local lines = { report.explain(self), ("devices: split over %d device%s (%s): each runs this "
    .. "plan on its slice"):format(#ordinals, #ordinals == 1 and "" or "s", table.concat(ordinals, ", ")) }
  local n
  for _, d in ipairs(self.data) do n = n or d.count end
  if n then
    local first = 1
    for k, ordinal in ipairs(ordinals) do
      local count = slice_count(n, #ordinals, k)
      lines[#lines + 1] = ("  device %d: elements %d..%d"):format(ordinal, first, first + count - 1)
      first = first + count
    end
  end
  return table.concat(lines, "\n")
end

return devices
