-- gpurun.struct and gpurun.Struct: layouts checked against what NVRTC's C++
-- gives the same struct (its static_asserts and its PTX parameter, no GPU
-- needed), values checked as typed scalars are, and (#gpu) struct
-- arguments in launches, captures, plans, set_args and pipelines.
local gpurun = require("gpurun")

local DTYPES = gpurun.dtypes

local function error_of(f, ...)
  local ok, err = pcall(f, ...)
  assert.is_false(ok, "expected an error")
  return tostring(err)
end

-- Field lists, with the align option where C would say __align__(n).
local CASES = {
  { fields = { { "x", "float32" }, { "n", "uint64" } } },
  { fields = { { "x", "float32" }, { "n", "uint64" }, { "v", "float32", 4 } } },
  { fields = { { "c", "int8" } } },
  { fields = { { "a", "uint8" }, { "h", "float16" }, { "b", "bfloat16" }, { "d", "float64" },
               { "c", "int8" } } },
  { fields = { { "s", "int16" }, { "u", "uint32" }, { "b", "uint8", 3 } } },
  { fields = { { "d", "float64", 2 }, { "c", "uint8" } } },
  { fields = { { "b", "uint8", 5 }, { "i", "int32" }, { "h", "uint16" } } },
  { fields = { { "x", "float32" }, { "y", "float32" }, { "z", "float32" }, { "w", "float32" } },
    align = 16 },
  { fields = { { "q", "int64" }, { "c", "int8" } }, align = 32 },
}
do -- every dtype, from the smallest to the largest and back
  local all = {}
  for i = #DTYPES, 1, -1 do all[#all + 1] = { "f" .. i, DTYPES[i].name } end
  for i = 1, #DTYPES do all[#all + 1] = { "g" .. i, DTYPES[i].name, i } end
  CASES[#CASES + 1] = { fields = all }
end

local function layout_of(case)
  return gpurun.struct(case.fields, case.align and { align = case.align } or nil)
end

-- CUDA C++ declaring case i's struct, asserting the size and alignment
-- gpurun gives it, with a kernel per field that takes the struct by value
-- and stores the field's offset, which the compiler folds into a constant
-- of the PTX (NVRTC has no constant offsetof to assert).
local function cuda_case(i, case, layout)
  local lines = { ("struct %sS%d {"):format(case.align and ("__align__(%d) "):format(case.align) or "", i) }
  for _, field in ipairs(case.fields) do
    lines[#lines + 1] = ("  %s %s%s;"):format(DTYPES[field[2]].c_type, field[1],
                                               field[3] and ("[%d]"):format(field[3]) or "")
  end
  lines[#lines + 1] = "};"
  lines[#lines + 1] = ("static_assert(sizeof(S%d) == %d, \"size\");"):format(i, layout.size)
  lines[#lines + 1] = ("static_assert(alignof(S%d) == %d, \"align\");"):format(i, layout.align)
  for k, field in ipairs(case.fields) do
    lines[#lines + 1] = ("extern \"C\" __global__ void f%d_%d(S%d s, unsigned *out) "
      .. "{ *out = (unsigned)((char *)&s.%s - (char *)&s); }"):format(i, k, i, field[1])
  end
  return table.concat(lines, "\n")
end

-- The offset case i's kernel for field k stores.
local function compiled_offset(ptx, i, k)
  local entry = ptx:find((".entry f%d_%d("):format(i, k), 1, true)
  return entry and tonumber(ptx:match("mov%.u32%s+%%r%d+,%s*(%d+);", entry))
end

describe("gpurun.struct layouts", function()
  it("match C's: the size and alignment NVRTC asserts, its PTX parameter and its offsets", function()
    local parts = { "#include <cuda_fp16.h>", "#include <cuda_bf16.h>" }
    local layouts = {}
    for i, case in ipairs(CASES) do
      layouts[i] = layout_of(case)
      parts[#parts + 1] = cuda_case(i, case, layouts[i])
    end
    local code = gpurun.Program(table.concat(parts, "\n"), "c++",
      { std = "c++17", arch = "sm_90" }):compile("ptx")
    for i, layout in ipairs(layouts) do
      local align, size = code.code:match(("%%.param %%.align (%%d+) %%.b8 f%d_1_param_0%%[(%%d+)%%]"):format(i))
      assert.are.same({ layout.align, layout.size }, { tonumber(align), tonumber(size) },
        tostring(layout))
      for k, field in ipairs(layout.fields) do
        assert.are.equal(field.offset, compiled_offset(code.code, i, k), tostring(layout) .. " " .. field.name)
      end
    end
  end)

  it("read back as given", function()
    local S = gpurun.struct{ { "x", "float32" }, { "n", "uint64" }, { "v", "float32", 4 } }
    assert.are.equal(32, S.size)
    assert.are.equal(8, S.align)
    assert.are.same({
      { name = "x", dtype = "float32", offset = 0, size = 4 },
      { name = "n", dtype = "uint64", offset = 8, size = 8 },
      { name = "v", dtype = "float32", offset = 16, size = 16, count = 4 },
    }, S.fields)
    assert.are.equal(16, S:offsetof("v"))
    assert.are.equal("gpurun.StructLayout{ x: float32 @0, n: uint64 @8, v: float32[4] @16; size 32, "
      .. "align 8 }", tostring(S))
    assert.are.equal(1, DTYPES.int8.align)
    assert.are.equal(2, DTYPES.bfloat16.align)
    assert.are.equal(8, DTYPES.float64.align)
  end)

  it("refuse bad field lists and options, naming the field", function()
    local cases = {
      { { {} }, "field 1: { name, dtype [, count] } expected, got another table" },
      { { "x" }, "field 1: { name, dtype [, count] } expected, got string" },
      { {}, "a list of 1 to 1024 fields" },
      { { { "x", "float33" } }, "field 1 ('x'): unknown dtype 'float33' (expected one of: float32" },
      { { { "x", "float32" }, { "y", 4 } }, "field 2 ('y'): a dtype name expected second, got number" },
      { { { "x", "float32" }, { "x", "int8" } }, "field 2: 'x' is field 1's name too" },
      { { { "1x", "float32" } }, "field 1: name '1x' is not an identifier" },
      { { { "a b", "float32" } }, "field 1: name 'a b' is not an identifier" },
      { { { ("a"):rep(65), "float32" } }, "field 1: name '" .. ("a"):rep(65) .. "' is not an identifier of at most 64" },
      { { { 7, "float32" } }, "field 1: a name expected first, got number" },
      { { { "bytes", "uint8" } }, "field 1: 'bytes' is a gpurun.Struct's own member" },
      { { { "layout", "uint8" } }, "field 1: 'layout' is a gpurun.Struct's own member" },
      { { { "v", "float32", 0 } }, "field 1 ('v'): count must be an integer from 1 to 32764, got 0" },
      { { { "v", "float32", 1.5 } }, "field 1 ('v'): count must be an integer from 1 to 32764, got 1.5" },
      { { { "v", "float32", 0 / 0 } }, "field 1 ('v'): count must be an integer from 1 to 32764, got" },
      { { { "v", "float64", 5000 } }, "field 1 ('v') ends at byte 40000, past the 32764 bytes" },
      { { { "v", "float32", 2, "extra" } }, "field 1: { name, dtype [, count] } expected" },
    }
    for _, case in ipairs(cases) do
      local err = error_of(gpurun.struct, case[1])
      assert.truthy(err:find("bad argument #1 to 'gpurun.struct' (" .. case[2], 1, true), err)
    end
    local fields = { { "x", "float32" } }
    for _, case in ipairs({
      { { align = 2 }, "option 'align' must be a power of two from 4 (the fields' own alignment) to 4096, got 2" },
      { { align = 24 }, "option 'align' must be a power of two from 4" },
      { { align = 8192 }, "option 'align' must be a power of two from 4 (the fields' own alignment) to 4096, got 8192" },
      { { align = 0.5 }, "option 'align' must be a power of two, got 0.5" },
      { { alignment = 8 }, "unknown option 'alignment' (known: align)" },
    }) do
      local err = error_of(gpurun.struct, fields, case[1])
      assert.truthy(err:find("bad argument #2 to 'gpurun.struct' (" .. case[2], 1, true), err)
    end
    assert.matches("list of fields", error_of(gpurun.struct, "x"))
    assert.matches("table of options", error_of(gpurun.struct, fields, 5))
    local S = gpurun.struct(fields)
    assert.matches("bad argument #1 to 'StructLayout:offsetof' %(field name expected, got 'y', "
      .. "which names no field%)", error_of(S.offsetof, S, "y"))
  end)
end)

describe("gpurun.Struct values", function()
  local S = gpurun.struct{ { "x", "float32" }, { "n", "uint64" }, { "v", "float32", 4 } }

  it("are set by name and packed as C packs them", function()
    local value = S{ x = 1.5, n = 7 }
    assert.are.equal(S, value.layout)
    assert.are.equal(string.pack("<f xxxx I8 ffff", 1.5, 7, 0, 0, 0, 0), value.bytes)
    value.v = { 1, 2, 3, 4 }
    value.x = 2
    assert.are.same({ 2.0, 7, { 1.0, 2.0, 3.0, 4.0 } }, { value.x, value.n, value.v })
    assert.are.equal(string.pack("<f xxxx I8 ffff", 2, 7, 1, 2, 3, 4), value.bytes)
    assert.are.equal(string.rep("\0", 32), S:new().bytes)
    assert.are.equal("gpurun.Struct{ x = 2.0, n = 7, v = { 1.0, 2.0, 3.0, 4.0 } }", tostring(value))
    assert.are.equal("gpurun.Struct", getmetatable(value).__name)
  end)

  it("store every dtype as its typed scalar does, and refuse what it refuses", function()
    local values = { 0, 1, -1, 1.5, 0.1, 255, 256, 65504, 65520, 1e39, -1e39, 2 ^ 31, 2 ^ 63,
                     math.maxinteger, math.mininteger, math.huge, -math.huge, 0 / 0, 3.4e38 }
    for _, dtype in ipairs(DTYPES) do
      if not dtype.scalar then goto next_dtype end -- complex: no typed scalar (see below)
      local T = gpurun.struct{ { "pad", "uint8" }, { "f", dtype.name } }
      local value = T:new()
      for _, number in ipairs(values) do
        local scalar_ok, scalar = pcall(gpurun[dtype.scalar], number)
        local set_ok, err = pcall(function() value.f = number end)
        assert.are.equal(scalar_ok, set_ok, ("%s = %s: %s"):format(dtype.name, number, tostring(err)))
        if set_ok then
          assert.are.equal(scalar.bytes, value.bytes:sub(dtype.align + 1))
        else
          assert.truthy(err:find("gpurun.Struct field 'f': ", 1, true), err)
          -- the scalar's own reason, word for word
          local why = scalar:match("%((.*)%)$")
          assert.truthy(err:find(why, 1, true), err .. " / " .. scalar)
        end
      end
      ::next_dtype::
    end
  end)

  it("store a complex field from a pair {re, im} or a number, and read it as a pair", function()
    local T = gpurun.struct{ { "z", "complex64" }, { "w", "complex128", 2 } }
    assert.are.same({ 8, 16, 48 }, { T:offsetof("z") + 8, T:offsetof("w"), T.size })
    local value = T{ z = { 1.5, -2 }, w = { 3, { 4, 5 } } }
    assert.are.same({ 1.5, -2.0 }, value.z)
    assert.are.same({ { 3.0, 0.0 }, { 4.0, 5.0 } }, value.w)
    assert.are.equal(string.pack("<ff", 1.5, -2), value.bytes:sub(1, 8))
    assert.matches("field 'z': number or {re, im} pair expected, got string",
      error_of(function() value.z = "x" end))
    assert.matches("field 'z': {re, im} pair of numbers expected for complex64, got nil as its im",
      error_of(function() value.z = { 1 } end))
    assert.matches("field 'z': {1e%+300, 0.0} out of range for complex64",
      error_of(function() value.z = { 1e300, 0 } end))
    assert.are.same({ 1.5, -2.0 }, value.z)
  end)

  it("leave a field as it was when a value is refused", function()
    local value = S{ x = 1, v = { 1, 2, 3, 4 } }
    assert.matches("gpurun.Struct field 'x': 1e%+39 out of range for float32", error_of(function() value.x = 1e39 end))
    assert.matches("gpurun.Struct field 'n': %-1 out of range for uint64", error_of(function() value.n = -1 end))
    assert.matches("gpurun.Struct field 'n': integer expected for uint64, got %-?nan",
      error_of(function() value.n = 0 / 0 end))
    assert.matches("gpurun.Struct field 'v' element 4: number expected, got string",
      error_of(function() value.v = { 5, 6, 7, "8" } end))
    assert.matches("gpurun.Struct field 'v' takes a sequence of 4 float32 values, got a table of length 2",
      error_of(function() value.v = { 5, 6 } end))
    assert.matches("gpurun.Struct field 'v' takes a sequence of 4 float32 values, got number",
      error_of(function() value.v = 5 end))
    assert.matches("gpurun.Struct field 'x': number expected, got table",
      error_of(function() value.x = { 1 } end))
    assert.are.same({ 1.0, 0, { 1.0, 2.0, 3.0, 4.0 } }, { value.x, value.n, value.v })
  end)

  it("set and read a scalar field without allocating", function()
    local value = S:new()
    value.x = 0
    local total = 0
    collectgarbage("collect")
    collectgarbage("stop")
    local before = collectgarbage("count")
    for i = 1, 10000 do
      value.n = i
      value.x = 0.5
      total = total + value.n
    end
    local after = collectgarbage("count")
    collectgarbage("restart")
    assert.are.equal(before, after)
    assert.are.equal(10000 * 10001 // 2, total)
  end)

  it("refuse fields they do not have, read or set", function()
    local value = S:new()
    assert.matches("gpurun.Struct has no field 'y' %(its fields: x, n, v%)", error_of(function() return value.y end))
    assert.matches("gpurun.Struct has no field 'y'", error_of(function() value.y = 1 end))
    assert.matches("gpurun.Struct fields are named by strings, got number", error_of(function() return value[1] end))
    assert.matches("gpurun.Struct fields are set by name %({ x = 1.5 }%), got a number key",
      error_of(S, { 1.5 }))
    assert.matches("gpurun.Struct has no field 'z'", error_of(S, { z = 1 }))
    assert.matches("bad argument #2 to 'StructLayout.__call' %(table of field values", error_of(S, 5))
    assert.matches("bad argument #1 to 'StructLayout:new' %(table of field values", error_of(S.new, S, "x"))
    assert.matches("calling 'StructLayout:new' on bad self", error_of(S.new, {}))
  end)
end)

describe("a Struct in a declared pipeline, without a GPU", function()
  it("is a constant of its stage, in the plan, explain and the picture", function()
    local fake = require("spec.support.fake_gpu")
    local Params = gpurun.struct{ { "x", "float32" }, { "n", "uint64" } }
    local kernel = fake.kernel("read_params",
      'extern "C" __global__ void read_params(Params p, float *out) {}', {
        { offset = 0, size = 16, type = ".align 8 .b8[16]", kind = "aggregate", pointer = false },
        { offset = 16, size = 8, type = ".u64", kind = "integer", pointer = "maybe" },
      })
    local p <close> = gpurun.pipeline{ name = "structs", quiet = true }
    p:temporary("out", 8)
    local value = Params{ x = 2, n = 8 }
    p:launch(kernel, gpurun.LaunchConfig{ grid = 1, block = 32 }, value, "out")
    local plan = p:plan()
    assert.are.equal(1, #plan.stages)
    assert.truthy(p:explain():find("read_params", 1, true))
    assert.truthy(p:to_dot():find("read_params", 1, true))
  end)
end)

-- ---- on a GPU: struct arguments wherever a kernel takes arguments -----------------

local SOURCE = [[
struct Params { float x; unsigned long long n; float v[4]; };
struct Same32 { float a[8]; };
extern "C" __global__ void read_params(Params p, float *out, unsigned long long *count) {
  if (threadIdx.x == 0 && blockIdx.x == 0) {
    out[0] = p.x;
    for (int i = 0; i < 4; i++) out[1 + i] = p.v[i];
    count[0] = p.n;
  }
}
extern "C" __global__ void read_same(Same32 s, float *out) { out[0] = s.a[7]; }
extern "C" __global__ void read_float(float x, float *out) { out[0] = x; }
]]

describe("struct arguments", function()
  local device, code, stream, config, out, count
  local Params = gpurun.struct{ { "x", "float32" }, { "n", "uint64" }, { "v", "float32", 4 } }

  before_each(function()
    device = gpurun.Device(0)
    device:set_current()
    code = code or gpurun.Program(SOURCE, "c++", gpurun.ProgramOptions{ std = "c++17",
      arch = "sm_" .. device.arch }):compile("cubin")
    stream = device:create_stream()
    config = gpurun.LaunchConfig{ grid = 1, block = 32 }
    out, count = gpurun.zeros(5, "float32"), gpurun.zeros(1, "uint64")
  end)

  after_each(function()
    if stream then stream:close() end
  end)

  local function read_back()
    return { out:to_table(stream), count:to_table(stream)[1] }
  end

  it("pass in a launch, a capture, set_args and set_arg, as their bytes were then #gpu", function()
    local kernel = code:get_kernel("read_params")
    local value = Params{ x = 1.5, n = 1 << 40, v = { 1, 2, 3, 4 } }
    gpurun.launch(stream, config, kernel, value, out, count)
    assert.are.same({ { 1.5, 1, 2, 3, 4 }, 1 << 40 }, read_back())
    -- the byte string of before still passes, the same bytes
    value.x = 2.5
    gpurun.launch(stream, config, kernel, value.bytes, out, count)
    assert.are.same({ { 2.5, 1, 2, 3, 4 }, 1 << 40 }, read_back())
    local builder = stream:create_graph_builder()
    builder:begin_building()
    gpurun.launch(builder, config, kernel, value, out, count)
    builder:end_building()
    local graph <close> = builder:complete()
    value.x, value.n = 9, 3 -- after the capture: the graph keeps what it captured
    graph:launch(stream)
    assert.are.same({ { 2.5, 1, 2, 3, 4 }, 1 << 40 }, read_back())
    -- set_args takes a new value
    local node = graph:nodes()[1]
    graph:set_args(node.index, value, out, count)
    graph:launch(stream)
    assert.are.same({ { 9, 1, 2, 3, 4 }, 3 }, read_back())
    -- and set_arg that one argument alone
    value.v = { 5, 6, 7, 8 }
    graph:set_arg(node.index, 1, value)
    graph:launch(stream)
    assert.are.same({ { 9, 5, 6, 7, 8 }, 3 }, read_back())
    assert.matches("parameter 1 %(%.align 8 %.b8%[32%]%): a 32%-byte struct, but the gpurun.Struct is 4 bytes",
      error_of(graph.set_arg, graph, node.index, 1, gpurun.struct{ { "x", "float32" } }:new()))
  end)

  it("pass in a LaunchPlan, bound once #gpu", function()
    local kernel = code:get_kernel("read_params")
    local value = Params{ x = -4, n = 12, v = { 0.5, 0.25, 0, -1 } }
    local plan <close> = kernel:bind(config, value, out, count)
    value.x = 100 -- bind packed the bytes it was given
    plan:launch(stream)
    assert.are.same({ { -4, 0.5, 0.25, 0, -1 }, 12 }, read_back())
  end)

  it("pass in a declared pipeline, checked when declared #gpu", function()
    local kernel = code:get_kernel("read_params")
    local value = Params{ x = 6, n = 5, v = { 4, 3, 2, 1 } }
    local p <close> = gpurun.pipeline{ name = "structs", quiet = true }
    p:launch(kernel, config, value, out, count)
    p:run(stream)
    assert.are.same({ { 6, 4, 3, 2, 1 }, 5 }, read_back())
    local q <close> = gpurun.pipeline{ name = "wrong", quiet = true }
    local Small = gpurun.struct{ { "x", "float32" } }
    assert.matches("pipeline 'wrong': stage 'read_params': argument 1: kernel 'read_params' parameter 1 "
      .. "%(%.align 8 %.b8%[32%]%): a 32%-byte struct, but the gpurun.Struct is 4 bytes",
      error_of(q.launch, q, kernel, config, Small:new(), out, count))
  end)

  it("allocate nothing per launch, nor per field set #gpu", function()
    local kernel = code:get_kernel("read_params")
    local value = Params{ x = 1, n = 2 }
    local launch = gpurun.launch
    value.n = 3
    launch(stream, config, kernel, value, out, count)
    stream:sync()
    collectgarbage("collect")
    collectgarbage("stop")
    local before = collectgarbage("count")
    for i = 1, 10000 do
      value.n = i
      launch(stream, config, kernel, value, out, count)
    end
    local after = collectgarbage("count")
    collectgarbage("restart")
    assert.are.equal(before, after)
    assert.are.same({ { 1, 0, 0, 0, 0 }, 10000 }, read_back())
  end)

  it("are refused before launch when size or alignment differ, naming the parameter #gpu", function()
    local kernel, same = code:get_kernel("read_params"), code:get_kernel("read_same")
    -- params() tells the size and alignment a Struct must have
    local param = kernel:params()[1]
    assert.are.same({ "aggregate", 32, 8 }, { param.kind, param.size, param.align })
    assert.are.same({ Params.size, Params.align }, { param.size, param.align })
    assert.are.equal(4, same:params()[1].align)
    assert.is_nil(kernel:params()[2].align)
    local value = Params:new()
    local Float8 = gpurun.struct{ { "a", "float32", 8 } } -- 32 bytes, aligned to 4
    local Over = gpurun.struct({ { "a", "float32", 8 } }, { align = 8 }) -- 32 bytes, aligned to 8
    local cases = {
      { kernel, Float8:new(), "kernel 'read_params' parameter 1 (.align 8 .b8[32]): a struct aligned to "
        .. "8 bytes, but the gpurun.Struct's layout is aligned to 4" },
      { same, Over:new(), "kernel 'read_same' parameter 1 (.align 4 .b8[32]): a struct aligned to 4 "
        .. "bytes, but the gpurun.Struct's layout is aligned to 8" },
      { same, gpurun.struct{ { "a", "float32", 7 } }:new(), "a 32-byte struct, but the gpurun.Struct is 28 bytes" },
      { code:get_kernel("read_float"), gpurun.struct{ { "x", "float32" } }:new(),
        "kernel 'read_float' parameter 1 (.f32): not a struct: a gpurun.Struct passes only as a struct parameter" },
    }
    for _, case in ipairs(cases) do
      local k, bad = case[1], case[2]
      local args = k == kernel and { bad, out, count } or { bad, out }
      local launched = error_of(gpurun.launch, stream, config, k, table.unpack(args))
      assert.truthy(launched:find(case[3], 1, true), launched)
      -- check_argument, bind and set_args say the same
      assert.are.equal(launched:match("kernel '.*$"), error_of(k.check_argument, k, 1, bad):match("kernel '.*$"))
      assert.are.equal(launched:match("kernel '.*$"), error_of(k.bind, k, config, table.unpack(args)):match("kernel '.*$"))
    end
    assert.matches("kernel 'read_params' parameter 2 %(.-%): not a struct: a gpurun.Struct passes only as a "
      .. "struct parameter", error_of(gpurun.launch, stream, config, kernel, value, value, count))
    assert.are.equal(same, same:check_argument(1, Float8:new()))
    gpurun.launch(stream, config, same, Float8{ a = { 0, 0, 0, 0, 0, 0, 0, 7 } }, out)
    assert.are.equal(7, out:to_table(stream)[1])
  end)
end)
