-- gpurun.elementwise and gpurun.elementwise_pipeline: the module table's
-- names for lua/gpurun/compute/elementwise.lua (CuPy-style elementwise kernels and
-- fused pipelines of them), whose errors then end any capture in progress
-- as every gpurun error does. The library is loaded on first use, so that
-- the module opens without it.
return function(internal)
  local elementwise
  local function library()
    if not elementwise then
      require("gpurun.compute.elementwise_source").fail = internal.raise
      elementwise = require("gpurun.compute.elementwise")
    end
    return elementwise
  end
  return {
    -- elementwise(in_params, out_params, operation, name [, options]) -> kernel
    elementwise = function(...) return library().elementwise(...) end,
    -- elementwise_pipeline(in_params, stages, outputs, name [, options]) -> pipeline
    elementwise_pipeline = function(...) return library().pipeline(...) end,
  }
end
