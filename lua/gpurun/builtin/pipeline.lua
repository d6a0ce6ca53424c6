-- gpurun.pipeline(options) -> Pipeline: stages declared by the data they
-- read and write, planned into streams, fusion groups and temporaries, run
-- stage by stage or replayed as one graph (lua/gpurun/compute/pipeline*.lua;
-- docs/pipelines.md). The library is loaded on first use, so that the
-- module opens without it; a pipeline's methods are guarded as this
-- function is, so that their errors end any capture in progress as every
-- gpurun error does.
return function(internal)
  local Pipeline
  local function library()
    if not Pipeline then
      Pipeline = require("gpurun.compute.pipeline")
      require("gpurun.compute.pipeline_report")
      require("gpurun.compute.pipeline_run")
      require("gpurun.compute.pipeline_devices")
      internal.guard(Pipeline)
    end
    return Pipeline
  end
  return {
    -- pipeline([options]) -> Pipeline
    pipeline = function(options) return library().new(options) end,
  }
end
