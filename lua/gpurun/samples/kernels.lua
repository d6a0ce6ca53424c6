-- CUDA C sources that ship with gpurun's Lua library (lua/gpurun/samples/kernels/):
-- the sample pipeline's kernels, shared by the scripts and the benchmarks so
-- that there is one copy of them.
--
--   local kernels = require("gpurun.samples.kernels")
--   local source = kernels.source("cudagraphs")   -- vec_add, vec_mul, vec_sub
local kernels = {}

local here = debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or "."

-- path(name) -> where the kernel file of that name is.
function kernels.path(name)
  return here .. "/kernels/" .. name .. ".cu"
end

-- source(name) -> the file's text; an unknown name raises, naming the path.
function kernels.source(name)
  if type(name) ~= "string" or not name:match("^[%w_]+$") then
    error("gpurun.samples.kernels.source: a kernel file name expected, got " .. tostring(name), 2)
  end
  local path = kernels.path(name)
  local file, why = io.open(path, "rb")
  if not file then
    error("gpurun.samples.kernels.source: no kernel file '" .. name .. "' (" .. why .. ")", 2)
  end
  local text = file:read("a")
  file:close()
  return text
end

return kernels
