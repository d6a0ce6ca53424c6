-- gpurun.csr, spmv and spmm (cuSPARSE): the module table's names for
-- lua/gpurun/compute/sparse.lua, loaded on first use so that the module
-- opens without the Lua library's files. Every function a part exports is
-- guarded, so that its errors end any capture in progress as every gpurun
-- error does.
return function()
  local loaded
  local function library()
    if not loaded then
      loaded = require("gpurun.compute.sparse") -- lazy: the module opens without it
    end
    return loaded
  end
  local exports = {}
  for _, name in ipairs{ "csr", "spmv", "spmm" } do
    exports[name] = function(...) return library()[name](...) end
  end
  return exports
end
