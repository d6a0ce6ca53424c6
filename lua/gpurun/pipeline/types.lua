-- The two types gpurun.pipeline makes, chosen when a pipeline is made: over
-- one device (pipeline/run.lua runs it), or split over the devices its
-- options list (pipeline/devices.lua). Both declare and report alike: the
-- methods of pipeline/declare.lua, one per stage kind
-- (pipeline/stage_kinds.lua) and pipeline/report.lua's.
local common = require("gpurun.common")
local declare = require("gpurun.pipeline.declare")
local devices = require("gpurun.pipeline.devices")
local report = require("gpurun.pipeline.report")
local run = require("gpurun.pipeline.run")
local stage_kinds = require("gpurun.pipeline.stage_kinds")

local types = { Data = declare.Data, Scalar = declare.Scalar }

local function stage_method(kind)
  return function(self, ...)
    return declare.add_stage(self, kind, kind.declare(self, ...))
  end
end

-- A method of `class` that refuses a self of another type (p.fill(x) for
-- p:fill(x)) instead of reading it.
local function method_of(class, name, method)
  return function(self, ...)
    if getmetatable(self) ~= class then
      common.raise(("pipeline method '%s': a pipeline expected as self (p:%s(...)), got %s")
                   :format(name, name, common.type_name(self)))
    end
    return method(self, ...)
  end
end

-- A pipeline type: a metatable that is its own methods table, with the
-- running methods `running` gives.
local function pipeline_type(running)
  local methods = {}
  for name, method in pairs(declare.methods) do methods[name] = method end
  for _, kind in ipairs(stage_kinds) do methods[kind.method] = stage_method(kind) end
  methods.plan, methods.explain, methods.to_dot = report.plan, report.explain, report.to_dot
  for _, name in ipairs({ "run", "graph", "wait", "set", "timings", "close" }) do
    methods[name] = running[name]
  end
  methods.explain = running.explain or methods.explain
  local class = {}
  class.__index = class
  for name, method in pairs(methods) do class[name] = method_of(class, name, method) end
  class.__close = class.close
  function class:__tostring()
    return ("gpurun.pipeline '%s' (%d stage%s)"):format(self.name, #self.stages,
      #self.stages == 1 and "" or "s")
  end
  return class
end

types.Pipeline = pipeline_type(run)
types.SplitPipeline = pipeline_type(devices)

-- gpurun.pipeline([options]) -> a Pipeline, or a SplitPipeline with options.devices.
function types.new(options)
  local checked = declare.options(options)
  return declare.new(checked, checked.devices and types.SplitPipeline or types.Pipeline)
end

return types
