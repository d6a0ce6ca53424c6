-- gpurun.elementwise and gpurun.elementwise_pipeline: the module table's
-- names for lua/gpurun/compute/elementwise.lua (CuPy-style elementwise
-- kernels and fused pipelines of them). The library is loaded on first use,
-- so that the module opens without it; it guards its own kernels' and
-- pipelines' methods (gpurun.guard), so that their errors end any capture
-- in progress as every gpurun error does.
return function()
  local elementwise
  local function library()
    -- lazy: the module opens without the Lua library's files
    elementwise = elementwise or require("gpurun.compute.elementwise")
    return elementwise
  end
  return {
    -- elementwise(in_params, out_params, operation, name [, options]) -> kernel
    elementwise = function(...) return library().elementwise(...) end,
    -- elementwise_pipeline(in_params, stages, outputs, name [, options]) -> pipeline
    elementwise_pipeline = function(...) return library().pipeline(...) end,
  }
end
