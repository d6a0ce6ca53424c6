-- gpurun.elementwise and gpurun.elementwise_pipeline: the module table's
-- names for lua/gpurun/elementwise.lua (CuPy-style elementwise kernels and
-- fused pipelines of them), whose errors then end any capture in progress
-- as every gpurun error does.
return function(internal)
  require("gpurun.elementwise_source").fail = internal.raise
  local elementwise = require("gpurun.elementwise")
  return {
    -- elementwise(in_params, out_params, operation, name [, options]) -> kernel
    elementwise = function(...) return elementwise.elementwise(...) end,
    -- elementwise_pipeline(in_params, stages, outputs, name [, options]) -> pipeline
    elementwise_pipeline = function(...) return elementwise.pipeline(...) end,
  }
end
