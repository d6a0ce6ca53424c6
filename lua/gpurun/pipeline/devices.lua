-- A pipeline over several devices: gpurun.pipeline{ devices = { 0, 1 } }.
-- Every buffer and temporary of the declaration has one element count N;
-- each device gets a slice of it (N split as evenly as it goes, device
-- order), and a pipeline of its own over its slices, declared from the same
-- stages: on the device that holds a buffer the slice is a view of it, on
-- another a buffer of its own, filled from the buffer's slice before each
-- run (when the host filled it) and copied back after (when a stage writes
-- it). Each device runs its pipeline on a stream of its own, as stages or
-- as one graph, all devices at once; p:wait() waits for all. Copies between
-- devices follow Buffer:copy_from's rules (peer access where there is, the
-- driver's staging where not), queued on the slice's stream with the
-- slice's device current. Only stages that work element by element split:
-- elementwise kernels and pipelines, copies and fills.
local gpurun = require("gpurun")
local Pipeline = require("gpurun.pipeline.declare")
local common = require("gpurun.common")
local access = require("gpurun.pipeline.access")

local raise = common.raise

local single = {
  run = Pipeline.run, graph = Pipeline.graph, set = Pipeline.set, wait = Pipeline.wait,
  timings = Pipeline.timings, close = Pipeline.close, explain = Pipeline.explain,
}

-- Which stages split by elements, and why not.
local function check_splittable(self)
  local count
  for _, d in ipairs(self.data) do
    if d.state then
      goto next_data -- a kernel's own state: its stage is refused below
    end
    if d.kind == "view" then
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
  for _, stage in ipairs(self.stages) do
    -- (An elementwise pipeline holding a reduction reduces over all of N.)
    local ok = stage.kind == "fill" or stage.kind == "copy"
      or (stage.kind == "call" and not access.keeps_state(stage.kernel)
          and (access.is_elementwise_kernel(stage.kernel)
               or access.is_elementwise_pipeline(stage.kernel)))
    if not ok then
      raise(("pipeline '%s' over devices: stage '%s' (%s) does not work element by element, so "
             .. "it cannot be split across devices (elementwise kernels and pipelines, copies and "
             .. "fills can)"):format(self.name, stage.name, stage.kind == "kernel" and "a raw kernel"
             or stage.kind == "host" and "a host callback" or "a kernel object that is not elementwise"))
    end
  end
  return count
end

local function declared_lists(stage, map)
  local reads, writes = {}, {}
  for d, mode in pairs(stage.declared or {}) do
    if mode ~= "w" then reads[#reads + 1] = map[d] end
    if mode ~= "r" then writes[#writes + 1] = map[d] end
  end
  return #reads > 0 and reads or nil, #writes > 0 and writes or nil
end

-- The slices and their pipelines, made once per declaration.
local function slices(self)
  local state = self.state
  if state.sliced and state.sliced.version == self.version then
    return state.sliced
  end
  if state.sliced then
    for _, slice in ipairs(state.sliced) do single.close(slice.pipeline) end
  end
  if #self.stages == 0 then
    raise(("pipeline '%s' has no stages"):format(self.name))
  end
  local n = check_splittable(self)
  self:planned() -- the declaration's own checks (strict mode) first
  local devices = self.options.devices
  local sliced = { version = self.version }
  local first = 1
  for k, ordinal in ipairs(devices) do
    local count = n // #devices + (k <= n % #devices and 1 or 0)
    local device = gpurun.Device(ordinal)
    device:set_current()
    local sub = Pipeline.new{ name = ("%s_d%d"):format(self.name, ordinal),
                              max_streams = self.options.max_streams, fuse = self.options.fuse,
                              quiet = self.options.quiet, timing = self.options.timing }
    local slice = { device = device, ordinal = ordinal, first = first, count = count,
                    pipeline = sub, scatter = {}, gather = {}, map = {} }
    local written = {}
    for _, stage in ipairs(self.stages) do
      for _, a in ipairs(stage.accesses) do
        if a.mode ~= "r" then written[a.data] = true end
      end
    end
    if count > 0 then
      for _, d in ipairs(self.data) do
        if d.kind == "temporary" then
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
        local reads, writes = declared_lists(stage, slice.map)
        if stage.kind == "call" then
          local spec = { stage.kernel, name = stage.name, reads = reads, writes = writes }
          for position, arg in ipairs(stage.args) do
            spec[position + 1] = arg.data and slice.map[arg.data] or arg.scalar and slice.map[arg.scalar]
              or arg.value
          end
          sub:call(spec)
        elseif stage.kind == "copy" then
          sub:copy(slice.map[stage.dst], slice.map[stage.src], { name = stage.name, reads = reads,
                                                                  writes = writes })
        else
          sub:fill(slice.map[stage.dst], stage.value, { name = stage.name, reads = reads,
                                                        writes = writes })
        end
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
-- graph), copies out; all devices at once, on their own streams.
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

function Pipeline:run(stream)
  if not self.options.devices then
    return single.run(self, stream)
  end
  each_slice(self, stream, single.run)
end

function Pipeline:graph(stream)
  if not self.options.devices then
    return single.graph(self, stream)
  end
  return each_slice(self, stream, single.graph)
end

function Pipeline:wait()
  if not self.options.devices then
    return single.wait(self)
  end
  for _, slice in ipairs(self.state.sliced or {}) do
    slice.stream:sync()
  end
end

function Pipeline:set(name, value)
  single.set(self, name, value)
  if self.options.devices and self.state.sliced then
    local target = type(name) == "string" and self.by_name[name] or name
    if getmetatable(target) == Pipeline.Scalar then
      for _, slice in ipairs(self.state.sliced) do
        single.set(slice.pipeline, target.name, value)
      end
    end
  end
end

function Pipeline:timings()
  if not self.options.devices then
    return single.timings(self)
  end
  local list = {}
  for _, slice in ipairs(self.state.sliced or {}) do
    for _, entry in ipairs(single.timings(slice.pipeline)) do
      entry.device = slice.ordinal
      list[#list + 1] = entry
    end
  end
  return list
end

function Pipeline:close()
  for _, slice in ipairs(self.state.sliced or {}) do
    single.close(slice.pipeline)
    slice.stream:close()
  end
  single.close(self)
end
Pipeline.__close = Pipeline.close

-- explain() adds how the pipeline splits over its devices.
function Pipeline:explain()
  local text = single.explain(self)
  local devices = self.options.devices
  if not devices then
    return text
  end
  local lines = { text, ("devices: split over %d device%s (%s): each runs this plan on its slice")
    :format(#devices, #devices == 1 and "" or "s", table.concat(devices, ", ")) }
  local n
  for _, d in ipairs(self.data) do n = n or d.count end
  if n then
    local first = 1
    for k, ordinal in ipairs(devices) do
      local count = n // #devices + (k <= n % #devices and 1 or 0)
      lines[#lines + 1] = ("  device %d: elements %d..%d"):format(ordinal, first, first + count - 1)
      first = first + count
    end
  end
  return table.concat(lines, "\n")
end

return Pipeline
