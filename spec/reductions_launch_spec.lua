-- The launch paths of reductions, scans and select, run everywhere against
-- stand-ins for what needs a GPU (gpurun.Device, Program's loading,
-- buffers, gpurun.launch): each launch's arguments are checked against the
-- generated kernel's C signature (count, pointer or scalar, pointee dtype,
-- scalar type), the temporaries against what the kernels index, and the
-- per-launch path for allocations. What the kernels compute is the #gpu
-- specs' (spec/reductions_spec.lua).
local gpurun = require("gpurun")
local expect = require("spec.support.expect")
local common = require("gpurun.common")
local ss = require("gpurun.compute.scan_source")

local SPEC_FILE = "reductions_launch_spec.lua"
local C_TO_SCALAR = {} -- a scalar parameter's C type -> the typed scalar that fills it
for _, info in pairs(common.DTYPES) do
  C_TO_SCALAR[info.c] = info.scalar
end

-- ---- stand-ins --------------------------------------------------------------------

local Buffer = { __name = "gpurun.Buffer" }
Buffer.__index = Buffer
Buffer.__len = function(self) return self.count end
local allocations = {}

local function new_buffer(count, dtype, ptr)
  local buffer = setmetatable({ count = count, dtype = dtype or "float32", device = 0,
                                ptr = ptr or 0x7f0000000000, size = count, fills = {} }, Buffer)
  return buffer
end
function Buffer.get() return 0 end
function Buffer:fill(value, target)
  self.fills[#self.fills + 1] = { value = value, target = target }
end
function Buffer:view(first, count)
  local view = new_buffer(count, self.dtype, self.ptr + (first - 1) * common.DTYPES[self.dtype].size)
  view.base, view.first = self, first
  self.views = self.views or {}
  self.views[#self.views + 1] = view
  return view
end
function Buffer.close() end

local function stand_in(name)
  return setmetatable({ device = 0 }, { __name = name })
end

-- "(unsigned long long n, const float *__restrict__ _in_x, ...)" of kernel
-- `name` in the source -> { { pointer = bool, c = "float" } ... }
local function signature(text, name)
  local list = text:match('__global__ void __launch_bounds__%(%d+%) ' .. name .. '%(([^)]*)%)')
  assert(list, "no kernel " .. name .. " in the source")
  local params = {}
  for item in (list .. ","):gmatch("%s*([^,]-)%s*,") do
    local pointer = item:find("*", 1, true) ~= nil
    local c = item:gsub("__restrict__", ""):gsub("const ", ""):gsub("%*", ""):gsub("%s+[%w_]+$", "")
    params[#params + 1] = { pointer = pointer, c = c:match("^%s*(.-)%s*$"), text = item }
  end
  return params
end

local launches = {}
local recording = true
local programs = {} -- every program text the stand-in Program was given, in order

local function refuse(fmt, ...)
  error(fmt:format(...), 0)
end

-- Checks one launch; formats a message only when a check fails, so that
-- the allocation specs measure gpurun's path alone.
local function check_launch(kernel, config, ...)
  local count = select("#", ...)
  if count ~= #kernel.params then
    refuse("%s: %d arguments for %d parameters", kernel.name, count, #kernel.params)
  end
  if not (getmetatable(config) and getmetatable(config).__name == "gpurun.LaunchConfig") then
    refuse("%s: not a LaunchConfig", kernel.name)
  end
  if recording then -- config.grid makes a table
    local grid = config.grid[1]
    if grid < 1 or grid >= 2 ^ 31 then refuse("%s: grid %d", kernel.name, grid) end
  end
  for index = 1, count do
    local arg, param = select(index, ...), kernel.params[index]
    if param.pointer then
      if getmetatable(arg) ~= Buffer then
        refuse("%s parameter %d (%s): a buffer expected, got %s", kernel.name, index, param.text, tostring(arg))
      end
      if param.c ~= "unsigned char" and param.c ~= "void" and common.DTYPES[arg.dtype].c ~= param.c then
        refuse("%s parameter %d (%s): a %s buffer", kernel.name, index, param.text, arg.dtype)
      end
    else
      local meta = getmetatable(arg)
      if not (meta and meta.__name == "gpurun.Scalar") then
        refuse("%s parameter %d (%s): a typed scalar expected, got %s", kernel.name, index, param.text, tostring(arg))
      end
      if arg.type ~= C_TO_SCALAR[param.c] then
        refuse("%s parameter %d (%s): gpurun.%s passed", kernel.name, index, param.text, arg.type)
      end
    end
  end
end

local saved = {}
local REPLACED = { "Device", "Program", "zeros", "empty", "launch" }

local function install()
  for _, name in ipairs(REPLACED) do saved[name] = gpurun[name] end
  gpurun.Device = function(id)
    return { id = id, arch = "90", multiprocessor_count = 132,
             get_attribute = function() return 2048 end }
  end
  gpurun.Program = function(text)
    programs[#programs + 1] = text
    return {
      compile = function()
        return { get_kernel = function(_, name)
          return { name = name, params = signature(text, name), source = text,
                   occupancy = function(_, options)
                     return { max_active_blocks_per_multiprocessor = 2048 // options.block }
                   end,
                   bind = function(self, config, ...)
                     check_launch(self, config, ...)
                     return { launch = function() end, close = function() end }
                   end }
        end }
      end,
    }
  end
  gpurun.zeros = function(count, dtype)
    local buffer = new_buffer(count, dtype, 0x7e0000000000 + #allocations * 0x100000)
    allocations[#allocations + 1] = buffer
    return buffer
  end
  gpurun.empty = gpurun.zeros
  gpurun.launch = function(target, config, kernel, ...)
    check_launch(kernel, config, ...)
    if recording then
      launches[#launches + 1] = { target = target, config = config, kernel = kernel, args = table.pack(...) }
    end
  end
end

local function uninstall()
  for _, name in ipairs(REPLACED) do gpurun[name] = saved[name] end
end

-- Fresh copies of the compute modules, so that the kernels made here on
-- stand-in devices stay out of the caches behind gpurun.sum and the others,
-- which later specs of the same process use on the real GPU.
local M, saved_modules = {}, {}
local function fresh_modules()
  for name, module in pairs(package.loaded) do
    if name:match("^gpurun%.compute%.") then
      saved_modules[name] = module
      package.loaded[name] = nil
    end
  end
  M.prebuilt = require("gpurun.compute.prebuilt")
  M.scan = require("gpurun.compute.scan")
  M.reduction = require("gpurun.compute.reduction")
  M.elementwise = require("gpurun.compute.elementwise")
end

local function restore_modules()
  for name in pairs(package.loaded) do
    if name:match("^gpurun%.compute%.") then package.loaded[name] = nil end
  end
  for name, module in pairs(saved_modules) do package.loaded[name] = module end
end

local function last_launches(from)
  local list = {}
  for index = from + 1, #launches do list[#list + 1] = launches[index] end
  return list
end

-- ---- the specs --------------------------------------------------------------------------

describe("reduction launches (stand-ins for the GPU)", function()
  local stream, builder
  setup(function()
    install()
    fresh_modules()
    stream, builder = stand_in("gpurun.Stream"), stand_in("gpurun.GraphBuilder")
  end)
  teardown(function()
    restore_modules()
    uninstall()
  end)

  it("pass every full reduction's arguments as its kernels declare them, vector or scalar", function()
    for _, dtype in ipairs{ "float32", "float64", "int8", "uint64" } do
      local x, out = new_buffer(100000, dtype), new_buffer(1, dtype == "int8" and "int64" or dtype)
      local from = #launches
      M.prebuilt.sum(stream, x, out)
      local list = last_launches(from)
      assert.are.equal(1, #list)
      assert.matches("gpurun_sum_vec", list[1].kernel.name)
      local misaligned = new_buffer(1000, dtype, 0x7f0000000001)
      M.prebuilt.max(stream, misaligned, new_buffer(1, dtype))
      assert.matches("gpurun_max_scalar", launches[#launches].kernel.name)
    end
  end)

  it("size the full reduction's temporaries for every block's partial", function()
    local x = new_buffer(1 << 26, "float32")
    local from = #launches
    M.prebuilt.argmax(stream, x, new_buffer(1, "int64"))
    local launch = last_launches(from)[1]
    local temp = launch.args[2]
    -- 16 bytes of ticket, then one 16-byte { value, index } partial per block
    assert.is_true(temp.count * 4 >= 16 + launch.config.grid[1] * 16)
    assert.are.equal(132 * 8, launch.config.grid[1]) -- a full device of 256-thread blocks
    M.prebuilt.sum(stream, new_buffer(4096, "float32"), new_buffer(1, "float32"))
    assert.are.equal(1, launches[#launches].config.grid[1]) -- 4096 elements: one block, one kernel
  end)

  it("launch rows, columns (one chunk or several, then the finish) and offsets with their shape arguments", function()
    local x = new_buffer(6000, "float64")
    local from = #launches
    M.prebuilt.sum(stream, x, new_buffer(3, "float64"), { rows = 3, cols = 2000, axis = 2 })
    M.prebuilt.sum(stream, x, new_buffer(2000, "float64"), { rows = 3, cols = 2000, axis = 1 })
    M.prebuilt.sum(stream, x, new_buffer(2, "float64"), { rows = 3000, cols = 2, axis = 1 })
    M.prebuilt.sum(stream, x, new_buffer(100, "float64"), { offsets = new_buffer(101, "int64") })
    M.prebuilt.sum(stream, x, new_buffer(100, "float64"), { offsets = new_buffer(101, "uint32") })
    local names = {}
    for index, launch in ipairs(last_launches(from)) do names[index] = launch.kernel.name end
    assert.are.same({ "gpurun_sum_segments_block", "gpurun_sum_columns", "gpurun_sum_columns",
                      "gpurun_sum_columns_finish", "gpurun_sum_segments_warp", "gpurun_sum_segments_warp" }, names)
    local chunked = last_launches(from)[3]
    local chunks, cols = chunked.args[5].value, chunked.args[4].value
    assert.is_true(chunks > 1)
    assert.is_true(chunked.args[2].count * 4 >= 16 + chunks * cols * 8) -- the partials fit
    assert.are.equal(3, last_launches(from)[5].args[5].value)  -- int64 offsets: kind 3
    assert.are.equal(2, last_launches(from)[6].args[5].value)  -- uint32 offsets: kind 2
  end)

  it("launch nothing for no segments, and pass pipelines' shapes to their reduction kernel", function()
    local from = #launches
    M.prebuilt.sum(stream, new_buffer(8, "float32"), new_buffer(0, "float32"), { offsets = new_buffer(1, "int32") })
    assert.are.equal(from, #launches)
    local pipe = M.elementwise.pipeline("float32 a, float32 b",
      { "float32 r = a * b", "sum float64 s = r", "argmax int64 w = r" }, "r, s, w", "dot", { fuse = "always" })
    local a = new_buffer(12, "float32")
    pipe(stream, a, a, new_buffer(12, "float32"), new_buffer(3, "float64"), new_buffer(3, "int64"),
         { rows = 3, cols = 4, axis = 2 })
    assert.are.equal("dot_segments_warp", launches[#launches].kernel.name)
  end)

  -- What NVRTC makes of the programs given since `from` (no GPU needed).
  local function compile_programs(from)
    local compiled = 0
    for index = from + 1, #programs do
      local options = gpurun.ProgramOptions{ std = "c++17", arch = "sm_90" }
      local program <close> = saved.Program(programs[index], "c++", options)
      local code <close> = program:compile("ptx")
      assert.matches("%.entry ", code.code)
      compiled = compiled + 1
    end
    return compiled
  end

  it("pass 16-bit dtypes' arguments as their kernels declare them, and the programs compile", function()
    local from_program = #programs
    for _, dtype in ipairs{ "float16", "bfloat16", "int16", "uint16" } do
      local float = common.DTYPES[dtype].float
      local x = new_buffer(5000, dtype)
      local from = #launches
      M.prebuilt.sum(stream, x, new_buffer(1, float and dtype or "int64"))
      M.prebuilt.argmax(stream, x, new_buffer(1, "int64"))
      M.prebuilt.max(stream, x, new_buffer(4, dtype), { rows = 4, cols = 1250, axis = 2 })
      M.scan.inclusive_scan(stream, x, new_buffer(5000, dtype))
      M.scan.select(stream, x, "x > 1", new_buffer(5000, dtype), new_buffer(1, "int64"))
      local names = {}
      for index, launch in ipairs(last_launches(from)) do names[index] = launch.kernel.name end
      assert.are.same({ "gpurun_sum_vec", "gpurun_argmax_vec", "gpurun_max_segments_block",
                        "gpurun_inclusive_scan", "gpurun_select" }, names)
    end
    M.prebuilt.mean(stream, new_buffer(300, "float16"), new_buffer(1, "float16"))
    M.prebuilt.norm(stream, new_buffer(300, "bfloat16"), new_buffer(1, "bfloat16"))
    local diff = M.prebuilt.max_abs_diff(stream, new_buffer(300, "float16"), 0.5)
    assert.are.equal("float32", diff.dtype) -- narrow floats' differences, in float32
    assert.are.equal("f64", launches[#launches].args[4].type) -- b, a number, as float64
    M.scan.exclusive_scan(stream, new_buffer(300, "float16"), new_buffer(300, "float32"))
    assert.is_true(compile_programs(from_program) >= 24)
  end)

  it("keep a fuse = \"never\" pipeline's intermediate in a temporary that its reduction reads", function()
    local from_program = #programs
    local pipe = M.elementwise.pipeline("float16 a", { "float16 r = a * 2", "sum float32 s = r" }, "s", "tmp",
                                        { fuse = "never" })
    assert.are.equal("tmp_r: writes r (a temporary)\ntmp_s: writes s", pipe:describe())
    local a = new_buffer(5000, "float16")
    for _, shape in ipairs{ false, { rows = 4, cols = 1250, axis = 2 } } do
      local from = #launches
      if shape then
        pipe(stream, a, new_buffer(4, "float32"), shape)
      else
        pipe(stream, a, new_buffer(1, "float32"))
      end
      local list = last_launches(from)
      assert.are.equal(2, #list)
      assert.are.equal(shape and "tmp_s_segments_block" or "tmp_s_vec", list[2].kernel.name)
      local temporary = list[1].args[3] -- (n, a, r)
      assert.are.same({ "float16", 5000 }, { temporary.dtype, temporary.count })
      assert.are.equal(temporary, list[2].args[shape and 6 or 3]) -- read by the reduction
    end
    assert.are.equal(3, compile_programs(from_program)) -- the elementwise kernel, two reduction families
  end)

  it("capture prepared kernels on a builder, and refuse ones not prepared", function()
    local x, out = new_buffer(5000, "int32"), new_buffer(1, "int64")
    M.prebuilt.sum(stream, x, out)
    local from = #launches
    M.prebuilt.sum(builder, x, out)
    assert.are.equal(builder, launches[from + 1].target)
    local kernel = M.reduction.reduction("int32 x", "int32 s", "x", "min", nil, nil, "k")
    local ok, message = pcall(kernel, builder, x, new_buffer(1, "int32"))
    assert.is_false(ok)
    assert.matches(SPEC_FILE .. ":%d+: reduction kernel 'k' is compiled on its first call", message)
    kernel:prepare(x, new_buffer(1, "int32"))
    kernel(builder, x, new_buffer(1, "int32"))
    -- columns with partials make their temporaries on the first call of the shape
    local columns = new_buffer(400, "int32")
    kernel(stream, new_buffer(40000, "int32"), new_buffer(400, "int32"), { rows = 100, cols = 400, axis = 1 })
    local again = M.reduction.reduction("int32 x", "int32 s", "x", "max", nil, nil, "k2")
    again:prepare(x, new_buffer(1, "int32"), { rows = 5000, cols = 1, axis = 1 }) -- compiles columns
    ok, message = pcall(again, builder, new_buffer(100 * 40, "int32"), new_buffer(40, "int32"),
                        { rows = 100, cols = 40, axis = 1 })
    assert.is_true(ok, message) -- one temp per program: made by prepare
    local _ = columns
  end)

  it("bind into plans checked as launches are", function()
    local kernel = M.reduction.reduction("float32 x, float32 w", "float32 s", "x * w", "a + b", nil, 0, "wsum")
    local plans = kernel:bind(new_buffer(300, "float32"), 2.5, new_buffer(1, "float32"))
    assert.are.equal(1, #plans)
    local columns = kernel:bind(new_buffer(3000, "float32"), gpurun.f32(1), new_buffer(3, "float32"),
                                { rows = 1000, cols = 3, axis = 1 })
    assert.are.equal(2, #columns)
  end)

  it("allocate nothing per launch once a shape has been seen", function()
    local x, out = new_buffer(1 << 20, "float32"), new_buffer(1, "float32")
    local rows_out, offsets = new_buffer(16, "float32"), new_buffer(17, "int32")
    local shape, segments = { rows = 16, cols = 1 << 16, axis = 2 }, { offsets = offsets }
    local kernel = M.reduction.reduction("float32 x", "float32 s", "x", "sum", nil, nil, "lean")
    recording = false
    finally(function() recording = true end)
    for index, step in ipairs{
      function() M.prebuilt.sum(stream, x, out) end,
      function() kernel(stream, x, out) end,
      function() kernel(stream, x, rows_out, shape) end,
      function() M.prebuilt.max(stream, x, rows_out, segments) end,
    } do
      local grew = expect.bytes_allocated(step, 2000, 10)
      if grew ~= 0 then refuse("launch %d allocated %d bytes in 2000 calls", index, grew) end
    end
    recording = true
  end)
end)

describe("scan and select launches (stand-ins for the GPU)", function()
  local stream, builder
  setup(function()
    install()
    fresh_modules()
    stream, builder = stand_in("gpurun.Stream"), stand_in("gpurun.GraphBuilder")
  end)
  teardown(function()
    restore_modules()
    uninstall()
  end)

  -- The view of temp that was filled last before the launch.
  local function reset_of(temp)
    for index = #(temp.views or {}), 1, -1 do
      local view = temp.views[index]
      if #view.fills > 0 then return view end
    end
  end

  it("clear the counter and tile statuses, then launch one tile per block with temporaries that fit", function()
    for _, n in ipairs{ 1, 2944, 2945, 1 << 20 } do
      local x, y = new_buffer(n, "float32"), new_buffer(n, "float32")
      local from = #launches
      M.scan.inclusive_scan(stream, x, y)
      local launch = last_launches(from)[1]
      local tiles = (n + 2943) // 2944
      assert.are.equal(tiles, launch.config.grid[1])
      assert.are.equal(tiles, launch.args[3].value)
      local temp = launch.args[2]
      local _, bytes = ss.temp_layout(tiles, true)
      assert.is_true(temp.count * 4 >= bytes)
      local reset = reset_of(temp)
      -- 16 bytes, then a word per tile (float32's status and value in one)
      assert.are.same({ 1, 4 + 2 * tiles }, { reset.first, reset.count })
      assert.are.same({ value = 0, target = stream }, reset.fills[#reset.fills])
    end
  end)

  it("clear them on a builder too, before each captured launch", function()
    local n = 10000
    local x, y = new_buffer(n, "int32"), new_buffer(n, "int64")
    M.scan.exclusive_scan(stream, x, y)
    M.scan.exclusive_scan(builder, x, y)
    local launch = launches[#launches]
    assert.are.equal(builder, launch.target)
    local reset = reset_of(launch.args[2])
    assert.are.equal(builder, reset.fills[#reset.fills].target)
  end)

  it("grow the temporaries for a larger size, which a builder cannot do", function()
    local small, large = new_buffer(100, "float64"), new_buffer(1 << 20, "float64")
    M.scan.inclusive_scan(stream, small, small, "max")
    M.scan.inclusive_scan(builder, small, small, "max") -- fits what was made
    local ok, message = pcall(M.scan.inclusive_scan, builder, large, large, "max")
    assert.is_false(ok)
    assert.matches("makes its temporaries on its first call of this size or larger", message)
    M.scan.inclusive_scan(stream, large, large, "max")
    M.scan.inclusive_scan(builder, large, large, "max")
  end)

  it("select into out with its capacity and count", function()
    local x, out, count = new_buffer(5000, "float64"), new_buffer(100, "float64"), new_buffer(1, "uint32")
    local from = #launches
    M.scan.select(stream, x, "x > 0.5", out, count)
    local launch = last_launches(from)[1]
    assert.are.equal("gpurun_select", launch.kernel.name)
    assert.are.equal(100, launch.args[6].value) -- the capacity
  end)

  it("allocate nothing per launch once a size has been seen", function()
    local x, y = new_buffer(1 << 20, "float32"), new_buffer(1 << 20, "float32")
    local out, count = new_buffer(1 << 20, "float32"), new_buffer(1, "int64")
    recording = false
    finally(function() recording = true end)
    local function fills_cleared()
      for _, allocation in ipairs(allocations) do allocation.fills = {} end
    end
    Buffer.fill = function() end -- the stand-in's record would allocate
    for index, step in ipairs{
      function() M.scan.inclusive_scan(stream, x, y) end,
      function() M.scan.exclusive_scan(stream, x, y, "max") end,
      function() M.scan.select(stream, x, "x > 0.5f", out, count) end,
    } do
      local grew = expect.bytes_allocated(step, 2000, 10)
      if grew ~= 0 then refuse("launch %d allocated %d bytes in 2000 calls", index, grew) end
    end
    fills_cleared()
    recording = true
  end)
end)
