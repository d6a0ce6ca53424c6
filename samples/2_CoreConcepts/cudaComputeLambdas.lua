-- cudaComputeLambdas.lua: a port of NVIDIA cuda-samples' python/2_CoreConcepts/
-- cudaComputeLambdas (cuda.compute). Device-wide algorithms driven by
-- operators the user writes: where the original hands cuda.compute Python
-- lambdas that Numba compiles, gpurun takes the operator as a line of CUDA
-- C and compiles it with NVRTC into a reduction (a + b), an elementwise
-- transform (x * x + 1) and an inclusive scan that adds only the even
-- values. Each result is checked against the host's.
--
--   gpurun samples/2_CoreConcepts/cudaComputeLambdas.lua [--device ID]

local gpurun = require("gpurun")
local args = require("gpurun.args")
local check = require("gpurun.check")
local report = require("gpurun.report")

local cli = args.new("cudaComputeLambdas.lua",
  "Drives device-wide reductions, transforms and scans with operators written as C expressions.")
cli:integer_option("--device", "CUDA device id.", 0, 0)
local options = cli:parse(arg)

local function list(values)
  return "[" .. table.concat(values, ", ") .. "]"
end

local device = cli:open_device(options.device)
report.new():device(device, options.device)
print()
local stream <close> = device:create_stream()
gpurun.set_current_stream(stream)
local checks = check.new(cli.name)

local function verdict(ok)
  return ok and "OK" or "FAIL"
end

-- A sum whose combining operator is the expression "a + b".
local function reduce_with_operator()
  local values = {}
  for i = 1, 10 do values[i] = i end
  local input <close> = gpurun.array(values, "int32")
  local total <close> = gpurun.empty(1, "int32")
  local sum = gpurun.reduction("int32 x", "int32 total", "x", "a + b", nil, 0, "sum_by_operator")
  sum(stream, input, total)
  local got = total:get(1)
  print(("gpurun.reduction(\"a + b\") over 1..10 -> %d (expected 55)  %s"):format(got,
    verdict(checks:number("reduction by a + b", got, 55, 0, 0))))
end

-- An elementwise transform y = x * x + 1.
local function transform_with_operator()
  local values, expected = {}, {}
  for i = 1, 8 do
    values[i] = i - 1
    expected[i] = (i - 1) * (i - 1) + 1
  end
  local x <close> = gpurun.array(values, "int32")
  local y <close> = gpurun.empty(#values, "int32")
  local square_plus_one = gpurun.elementwise("int32 x", "int32 y", "y = x * x + 1", "square_plus_one")
  square_plus_one(stream, x, y)
  local got = y:to_table()
  print("gpurun.elementwise(\"y = x * x + 1\"):")
  print("  got      = " .. list(got))
  print(("  expected = %s  %s"):format(list(expected),
    verdict(checks:tables("transform by x * x + 1", got, expected, 0, 0))))
end

-- An inclusive scan whose operator adds only even operands (an odd one
-- counts as 0): with identity 0, the running sum of the even values.
local function scan_with_operator()
  local values = { 1, 2, 3, 4, 5, 6 }
  local expected, running = {}, 0
  for i, value in ipairs(values) do
    if value % 2 == 0 then running = running + value end
    expected[i] = running
  end
  local x <close> = gpurun.array(values, "int32")
  local y <close> = gpurun.empty(#values, "int32")
  gpurun.inclusive_scan(stream, x, y, "(a % 2 == 0 ? a : 0) + (b % 2 == 0 ? b : 0)", { identity = 0 })
  local got = y:to_table()
  print("gpurun.inclusive_scan(add-evens-only) over " .. list(values):gsub(" ", "") .. ":")
  print("  got      = " .. list(got))
  print(("  expected = %s  %s"):format(list(expected),
    verdict(checks:tables("scan adding the even values", got, expected, 0, 0))))
end

reduce_with_operator()
print()
transform_with_operator()
print()
scan_with_operator()
print()
if not checks:passed() then
  print("FAILED")
  os.exit(1, true)
end
print("Done")
