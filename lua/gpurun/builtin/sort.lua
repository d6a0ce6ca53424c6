-- gpurun.sort, gpurun.lower_bound and gpurun.upper_bound: the module
-- table's names for lua/gpurun/compute/sort.lua, loaded on first use so
-- that the module opens without it; it guards its functions where they are
-- defined (gpurun.guard), so that their errors end any capture in
-- progress as every gpurun error does.
return function()
  local loaded
  local function library()
    -- lazy: the module opens without the Lua library's files
    loaded = loaded or require("gpurun.compute.sort")
    return loaded
  end
  return {
    -- sort(target, keys [, { values =, descending =, out =, values_out =, segments = }]) -> keys or out
    sort = function(...) return library().sort(...) end,
    -- lower_bound / upper_bound(target, sorted, queries [, { out = }]) -> int64 positions, 1-based
    lower_bound = function(...) return library().lower_bound(...) end,
    upper_bound = function(...) return library().upper_bound(...) end,
  }
end
