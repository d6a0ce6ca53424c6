-- gpurun.pipeline(options) -> a pipeline: stages declared by the data they
-- read and write, planned into streams, fusion groups and temporaries, run
-- stage by stage or replayed as one graph (lua/gpurun/pipeline/;
-- docs/pipelines.md). The library is loaded on first use, so that the
-- module opens without it; a pipeline's methods are guarded as this
-- function is, so that their errors end any capture in progress as every
-- gpurun error does.
return function(internal)
  local types
  -- Guarded again if the library was loaded anew (package.loaded cleared,
  -- as busted's insulation does between spec files).
  local function library()
    -- lazy: the module opens without the Lua library's files
    local loaded = require("gpurun.pipeline.types")
    if loaded ~= types then
      types = loaded
      for _, class in ipairs({ types.Pipeline, types.SplitPipeline, types.Data, types.Scalar }) do
        internal.guard(class)
      end
    end
    return types
  end
  return {
    -- pipeline([options]) -> Pipeline
    pipeline = function(options) return library().new(options) end,
  }
end
