-- binarySearch.lua: a port of NVIDIA cuda-samples' python/2_CoreConcepts/
-- binarySearch (cuda.core and cuda.compute). gpurun.lower_bound and
-- gpurun.upper_bound (where the original calls cuda.compute's) on two sorted
-- int32 inputs, one with duplicates so that the two differ, each checked
-- against searchsorted computed on the host. gpurun's positions are 1-based;
-- the port prints them minus one, as NumPy's searchsorted and the original
-- count.
--
--   gpurun samples/2_CoreConcepts/binarySearch.lua [--device ID]

local gpurun = require("gpurun")
local args = require("gpurun.args")
local report = require("gpurun.report")

local cli = args.new("binarySearch.lua", "Parallel upper_bound / lower_bound via gpurun")
cli:integer_option("--device", "CUDA device id", 0, 0)
local options = cli:parse(arg)

local function list(values)
  return "[" .. table.concat(values, ", ") .. "]"
end

-- numpy.searchsorted(data, value, side): the 0-based insertion point.
local function searchsorted(data, value, side)
  local low, high = 0, #data
  while low < high do
    local middle = (low + high) // 2
    local goes_right
    if side == "right" then goes_right = data[middle + 1] <= value else goes_right = data[middle + 1] < value end
    if goes_right then low = middle + 1 else high = middle end
  end
  return low
end

local function same(a, b)
  if #a ~= #b then return false end
  for i = 1, #a do
    if a[i] ~= b[i] then return false end
  end
  return true
end

local device = cli:open_device(options.device)
report.new():device(device, options.device)
print()
local stream <close> = device:create_stream()

local function run_binary_search(h_data, h_values)
  local d_data <close> = gpurun.array(h_data, "int32")
  local d_values <close> = gpurun.array(h_values, "int32")
  local d_lb <close> = gpurun.lower_bound(stream, d_data, d_values)
  local d_ub <close> = gpurun.upper_bound(stream, d_data, d_values)
  local got_lb, got_ub = d_lb:to_table(stream), d_ub:to_table(stream)
  local expected_lb, expected_ub = {}, {}
  for i, value in ipairs(h_values) do
    got_lb[i], got_ub[i] = got_lb[i] - 1, got_ub[i] - 1 -- 0-based, as the original prints
    expected_lb[i] = searchsorted(h_data, value, "left")
    expected_ub[i] = searchsorted(h_data, value, "right")
  end
  local ok_lb, ok_ub = same(got_lb, expected_lb), same(got_ub, expected_ub)
  print("  data    = " .. list(h_data))
  print("  values  = " .. list(h_values))
  print(("  lower_bound: got %s  expected %s  %s"):format(list(got_lb), list(expected_lb), ok_lb and "OK" or "FAIL"))
  print(("  upper_bound: got %s  expected %s  %s"):format(list(got_ub), list(expected_ub), ok_ub and "OK" or "FAIL"))
  return ok_lb and ok_ub
end

-- Case 1: values inside and outside the data's range, no duplicates in
-- the data: lower_bound and upper_bound agree on values not present.
print("Case 1: distinct data, mixed queries")
local ok = run_binary_search({ 1, 3, 5, 7, 9 }, { 0, 3, 4, 10 })
print()

-- Case 2: duplicates in the data, so the two differ on values present.
print("Case 2: duplicates in data")
ok = run_binary_search({ 1, 3, 3, 5, 7, 9 }, { 3, 3, 5, 8 }) and ok

print()
if ok then
  print("Done")
  os.exit(0, true)
end
print("FAILED")
os.exit(1, true)
