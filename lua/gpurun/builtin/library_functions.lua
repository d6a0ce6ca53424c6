-- The module's functions written in Lua (gpurun.elementwise, the
-- reductions and scans, sort, the cuBLAS and cuSPARSE calls): each name of
-- the module table forwards to its function in the Lua library, which is
-- required at the call, so that the module opens without the library's
-- files (and a spec may swap a library module for its own). The library
-- guards its functions where they are defined (gpurun.guard). A part of the
-- `gpurun` module (see program_options.lua for the protocol).
return function()
  -- { library module, { module table's name = the library's name... } }
  local FORWARDS = {
    { "gpurun.compute.elementwise", {
      elementwise = "elementwise",          -- (in_params, out_params, operation, name [, options])
      elementwise_pipeline = "pipeline",    -- (in_params, stages, outputs, name [, options])
    } },
    { "gpurun.compute.reduction", {
      reduction = "reduction", -- (in, out, map, reduce, post_map, identity [, name [, options]])
    } },
    { "gpurun.compute.prebuilt", { -- (target, x [, out] [, options]) -> out
      sum = "sum", prod = "prod", min = "min", max = "max", argmin = "argmin", argmax = "argmax",
      any = "any", all = "all", mean = "mean", norm = "norm", max_abs_diff = "max_abs_diff",
    } },
    { "gpurun.compute.scan", {
      inclusive_scan = "inclusive_scan", exclusive_scan = "exclusive_scan", -- (target, x, y [, op [, options]])
      select = "select",                    -- (target, x, predicate, out, count [, options])
    } },
    { "gpurun.compute.sort", {
      sort = "sort",                        -- (target, keys [, options]) -> keys or out
      lower_bound = "lower_bound", upper_bound = "upper_bound", -- (target, sorted, queries [, options])
    } },
    { "gpurun.compute.blas", {
      matrix = "matrix", matmul = "matmul", axpy = "axpy", dot = "dot", nrm2 = "nrm2", scal = "scal",
    } },
    { "gpurun.compute.sparse", { csr = "csr", spmv = "spmv", spmm = "spmm" } },
  }

  -- lazy: each library is required by its functions' first call, by its name in FORWARDS
  local require = require
  local exports = {}
  for _, forward in ipairs(FORWARDS) do
    local library = forward[1]
    for name, library_name in pairs(forward[2]) do
      -- lazy: as above
      exports[name] = function(...) return require(library)[library_name](...) end
    end
  end
  return exports
end
