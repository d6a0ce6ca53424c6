-- gpurun.pipeline(options) -> Pipeline: stages declared by the data they
-- read and write, planned into streams, fusion groups and temporaries, run
-- stage by stage or replayed as one graph (lua/gpurun/pipeline/;
-- docs/pipelines.md). The library is loaded on first use, so that the
-- module opens without it; a pipeline's methods are guarded as this
-- function is, so that their errors end any capture in progress as every
-- gpurun error does.
return function(internal)
  local Pipeline
  -- Guarded again if the library was loaded anew (package.loaded cleared,
  -- as busted's insulation does between spec files).
  local function library()
    -- lazy: the module opens without the Lua library's files
    local loaded = require("gpurun.pipeline.declare")
    if loaded ~= Pipeline then
      Pipeline = loaded
      require("gpurun.pipeline.report") -- lazy: as above
      require("gpurun.pipeline.run") -- lazy: as above
      require("gpurun.pipeline.devices") -- lazy: as above
      internal.guard(Pipeline)
      internal.guard(Pipeline.Data)
      internal.guard(Pipeline.Scalar)
    end
    return Pipeline
  end
  return {
    -- pipeline([options]) -> Pipeline
    pipeline = function(options) return library().new(options) end,
  }
end
