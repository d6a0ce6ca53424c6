-- gpurun.reduction, the prebuilt reductions (sum, prod, min, max, argmin,
-- argmax, any, all, mean, norm, max_abs_diff), the scans (inclusive_scan,
-- exclusive_scan) and select: the module table's names for
-- lua/gpurun/compute/reduction.lua, prebuilt.lua and scan.lua. The library
-- is loaded on first use, so that the module opens without it; it guards
-- its functions and the methods of the kernels it makes where they are
-- defined (gpurun.guard), so that their errors end any capture in progress
-- as every gpurun error does.
return function()
  local loaded
  local function library()
    if not loaded then
      -- lazy: the module opens without the Lua library's files
      local reduction = require("gpurun.compute.reduction")
      local prebuilt = require("gpurun.compute.prebuilt") -- lazy: as reduction
      local scan = require("gpurun.compute.scan") -- lazy: as reduction
      loaded = { reduction = reduction.reduction, prebuilt = prebuilt, scan = scan }
    end
    return loaded
  end
  local exports = {
    -- reduction(in_params, out_params, map_expr, reduce_expr, post_map_expr, identity
    --           [, name [, options]]) -> kernel
    reduction = function(...) return library().reduction(...) end,
    -- inclusive_scan / exclusive_scan(target, x, y [, op [, options]]) -> y
    inclusive_scan = function(...) return library().scan.inclusive_scan(...) end,
    exclusive_scan = function(...) return library().scan.exclusive_scan(...) end,
    -- select(target, x, predicate, out, count [, options]) -> out, count
    select = function(...) return library().scan.select(...) end,
  }
  -- sum(target, x [, out] [, options]) -> out, and the others alike
  for _, name in ipairs{ "sum", "prod", "min", "max", "argmin", "argmax", "any", "all", "mean",
                         "norm", "max_abs_diff" } do
    exports[name] = function(...) return library().prebuilt[name](...) end
  end
  return exports
end
