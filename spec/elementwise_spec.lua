-- gpurun.elementwise and its pipelines. Parsing, code generation (compiled
-- by NVRTC to PTX, no GPU), the choice of kernel for given buffers (on
-- stand-in buffers) and argument errors run everywhere; results, graphs and
-- the fused.lua script need a GPU.
local gpurun = require("gpurun")
local expect = require("spec.support.expect")
local ew = require("gpurun.compute.elementwise")
local process = require("spec.support.process")
local q = process.quote

local SPEC_FILE = "elementwise_spec.lua"

-- Called from a function of this file (not as a tail call, which leaves no
-- frame), so that messages carry its position.
local function error_of(f, ...)
  local args = table.pack(...)
  local ok, message = pcall(function()
    local result = f(table.unpack(args, 1, args.n))
    return result
  end)
  assert.is_false(ok, "expected an error")
  return tostring(message)
end

-- A stand-in for a gpurun.Buffer: what gpurun.elementwise reads of one.
local function fake_buffer(dtype, n, ptr, device)
  return setmetatable({}, {
    __name = "gpurun.Buffer",
    __len = function() return n end,
    __index = { dtype = dtype, ptr = ptr or 0x7f0000000000, device = device or 0 },
  })
end

local function ptx(source_text)
  local options = gpurun.ProgramOptions{ std = "c++17", arch = "sm_90" }
  local program <close> = gpurun.Program(source_text, "c++", options)
  local code <close> = program:compile("ptx")
  return code.code
end

local function count(text, pattern)
  local found = 0
  for _ in text:gmatch(pattern) do
    found = found + 1
  end
  return found
end

local SAMPLE_IN, SAMPLE_OUT, SAMPLE_OP = "float32 a, float32 b, float32 c", "float32 r",
                                         "r = (a + b) * c - a"
local SAMPLE_STAGES = { "float32 r1 = a + b", "float32 r2 = r1 * c", "float32 r3 = r2 - a" }

describe("gpurun.elementwise parameters", function()
  it("reads CuPy's parameter lists, type variables included", function()
    local kernel = ew.elementwise("float32 x, T y, uint8 z", "T out", "out = x + y + z", "mixed")
    assert.are.same({ "x", "y", "z", "out" }, {
      kernel.params[1].name, kernel.params[2].name, kernel.params[3].name, kernel.params[4].name })
    assert.are.same({ "float32", "T", "uint8", "T" }, {
      kernel.params[1].type, kernel.params[2].type, kernel.params[3].type, kernel.params[4].type })
    assert.is_true(kernel.params[2].variable)
    assert.is_true(kernel.params[4].output)
    assert.are.same({ "T" }, kernel.type_variables)
    assert.are.equal(3, kernel.input_count)
    assert.is_nil(kernel.source) -- T is not known until a call
  end)

  it("is what the module itself makes when called", function()
    local kernel = ew(SAMPLE_IN, SAMPLE_OUT, SAMPLE_OP, "called")
    assert.are.equal(ew.Kernel, getmetatable(kernel))
    assert.are.equal("called", kernel.name)
    assert.matches("^[^\n]*" .. SPEC_FILE .. ":%d+: .*unknown dtype", error_of(ew, "flaot32 a", "float32 r", "r = a"))
  end)

  it("takes no inputs, and defaults the name to 'kernel'", function()
    local kernel = ew.elementwise("", "int32 r", "r = (int)i")
    assert.are.equal("kernel", kernel.name)
    assert.are.equal(0, kernel.input_count)
  end)

  for _, case in ipairs{
    { { "flaot32 a", "float32 r", "r = a" }, "unknown dtype 'flaot32' for a %(dtypes: float32, float64, int32, uint32, int64, uint64, int8, uint8, int16, uint16, float16, bfloat16;" },
    { { "float a", "float32 r", "r = a" }, "unknown dtype 'float' for a" },
    { { "float32 _a", "float32 r", "r = _a" }, "'_a' cannot name a parameter" },
    { { "float32 i", "float32 r", "r = i" }, "'i' cannot name a parameter" },
    { { "float32 int", "float32 r", "r = 1" }, "'int' cannot name a parameter" },
    { { "float32", "float32 r", "r = 1" }, "'float32' is not \"<dtype> <name>\"" },
    { { "float32 a,", "float32 r", "r = a" }, "'' is not \"<dtype> <name>\"" },
    { { "float32 a", "", "a" }, "out_params names no output" },
    { { "float32 a", "float32 a", "a = 1" }, "parameter name 'a' is used twice" },
    { { "float32 a", "float32 r", "  " }, "the operation must be a non%-empty string" },
    { { "float32 a", "float32 r, float32 s", "r = a" }, "the operation never mentions output 's'" },
    { { 42, "float32 r", "r = 1" }, "in_params: a string such as" },
    { { "float32 a", "float32 r", "r = a", "2x" }, "the name must be a C identifier" },
    { { "float32 a", "float32 r", "r = a", "k", { block = 100 } }, "options.block must be a multiple of 32, got 100" },
    { { "float32 a", "float32 r", "r = a", "k", { block = 2048 } }, "options.block must be an integer from 32 to 1024, got 2048" },
    { { "float32 a", "float32 r", "r = a", "k", { unroll = 0 } }, "options.unroll must be an integer from 1 to 8" },
    { { "float32 a", "float32 r", "r = a", "k", "fast" }, "options must be a table, got string" },
  } do
    it("refuses " .. case[2]:gsub("%%", ""), function()
      local message = error_of(ew.elementwise, table.unpack(case[1], 1, 5))
      assert.matches(case[2], message)
      assert.matches("^[^\n]*" .. SPEC_FILE .. ":%d+: ", message) -- points at the caller
    end)
  end
end)

describe("gpurun.elementwise code", function()
  it("writes a vector kernel and a scalar kernel, both compiled by NVRTC", function()
    local kernel = ew.elementwise(SAMPLE_IN, SAMPLE_OUT, SAMPLE_OP, "pipeline")
    assert.matches("pipeline_vec", kernel.source)
    assert.matches("pipeline_scalar", kernel.source)
    local code = ptx(kernel.source)
    assert.matches("%.entry pipeline_vec%(", code)
    assert.matches("%.entry pipeline_scalar%(", code)
    -- 16-byte loads of a, b and c and a 16-byte store of r in the main loop
    assert.are.equal(3, count(code, "ld%.global%.nc%.v4%.f32"))
    assert.are.equal(1, count(code, "st%.global%.v4%.f32"))
  end)

  for _, case in ipairs{
    { "float32", "v4%.f32" }, { "float64", "v2%.f64" }, { "int32", "v4%.u32" },
    { "uint32", "v4%.u32" }, { "int64", "v2%.u64" }, { "uint64", "v2%.u64" },
    { "int8", "v4%.u32" }, { "uint8", "v4%.u32" }, { "int16", "v4%.u32" }, { "uint16", "v4%.u32" },
    { "float16", "v4%.u32" }, { "bfloat16", "v4%.u32" },
  } do
    it("loads 16 bytes at a time for " .. case[1], function()
      local kernel = ew.elementwise(("%s a, %s b"):format(case[1], case[1]), case[1] .. " r",
                              "r = a * b + 1", "k_" .. case[1])
      local code = ptx(kernel.source)
      assert.matches("ld%.global%.nc%." .. case[2], code)
      assert.matches("st%.global%." .. case[2], code)
    end)
  end

  it("has a dtype for every entry of gpurun.dtypes, with its C type and size", function()
    local common = require("gpurun.common")
    local checked = 0
    for _, info in ipairs(gpurun.dtypes) do
      local dtype = common.DTYPES[info.name]
      assert.are.same({ info.c_type, info.compute_type, info.size, info.scalar },
                      { dtype.c, dtype.compute, dtype.size, dtype.scalar })
      checked = checked + 1
    end
    assert.are.equal(#gpurun.dtypes, checked)
    assert.matches("int16, uint16, float16, bfloat16$", common.REAL_DTYPE_NAMES)
    assert.matches("bfloat16, complex64, complex128$", common.DTYPE_NAMES)
  end)

  for _, dtype in ipairs({ "float16", "bfloat16" }) do
    it(("computes %s in float, including its header, under NVRTC"):format(dtype), function()
      local info = gpurun.dtypes[dtype]
      local kernel = ew.elementwise(("%s x, %s a, %s y"):format(dtype, dtype, dtype), dtype .. " r",
                                    "r = a * x + y + 2", "axpy2")
      local variant = kernel:variant(fake_buffer(dtype, 64), gpurun[info.scalar](0.5),
                                     fake_buffer(dtype, 64), fake_buffer(dtype, 64))
      local text = variant.source
      assert.matches("#include <" .. info.header .. ">", text, 1, true)
      assert.matches(info.c_type .. " _in_a", text, 1, true)
      assert.matches("const float a = (float)_in_a;", text, 1, true)
      assert.matches("const float x = static_cast<float>(_in_x[i]);", text, 1, true)
      assert.matches("_out_r[i] = static_cast<" .. info.c_type .. ">(r);", text, 1, true)
      assert.are.equal(8, variant.width) -- 8 elements of 2 bytes per 16-byte access
      local code = ptx(text)
      assert.matches("%.entry axpy2_vec%(", code)
      assert.matches("ld%.global%.nc%.v4%.u32", code)
      -- the scalar arrives as NVRTC passes __half: a 2-byte struct
      assert.matches("%.param %.align 2 %.b8 axpy2_vec_param_2%[2%]", code)
      local generic = ew.elementwise("T x", "T r", "r = x * 2", "twice")
      assert.matches("typedef float T;", generic:source_for{ T = dtype }, 1, true)
      local pipe = ew.pipeline(("%s a, %s b"):format(dtype, dtype), { dtype .. " s = a + b",
                               dtype .. " t = s * s" }, "t", "square_sum")
      assert.matches("const float s = a + b;", pipe.source, 1, true)
      assert.matches("%.entry square_sum_vec%(", ptx(pipe.source))
    end)
  end

  it("writes only a scalar kernel when the buffers' element sizes differ", function()
    local kernel = ew.elementwise("float32 a, float64 b", "float64 r", "r = a * b", "mixed")
    assert.is_nil(kernel.source:find("mixed_vec", 1, true))
    assert.matches("%.entry mixed_scalar%(", ptx(kernel.source))
  end)

  it("unrolls vectors per thread when asked", function()
    local kernel = ew.elementwise(SAMPLE_IN, SAMPLE_OUT, SAMPLE_OP, "unrolled", { unroll = 4 })
    local code = ptx(kernel.source)
    -- 4 vectors of each input in the unrolled step, 1 in the step after it
    assert.are.equal(15, count(code, "ld%.global%.nc%.v4%.f32"))
  end)

  it("reads an output first only when the operation needs its old value", function()
    local function loads_output(operation)
      local kernel = ew.elementwise("float32 a", "float32 r", operation, "k")
      return kernel.source:find("float r = _out_r[i];", 1, true) ~= nil
    end
    assert.is_false(loads_output("r = a * 2"))
    assert.is_false(loads_output("r = a; r *= 2;"))
    assert.is_false(loads_output("// scale\nr = a * 2; // done"))
    assert.is_true(loads_output("r += a"))
    assert.is_true(loads_output("if (a > 0) r = a;"))
    assert.is_true(loads_output("r = r * a"))
    assert.is_true(loads_output("{ r = a; }"))
  end)

  it("adds the ';' CuPy's operations leave off, and keeps a trailing comment out of the way", function()
    for _, operation in ipairs{ "r = a * 2", "r = a * 2;", "r = a * 2 // twice", "if (a > 0) { r = a; } else { r = 0; }" } do
      local kernel = ew.elementwise("float32 a", "float32 r", operation, "k")
      assert.matches("%.entry k_vec", ptx(kernel.source))
    end
  end)

  it("binds type variables for source_for, usable as types in the operation", function()
    local kernel = ew.elementwise("T a, T b", "T r", "T t = a + b; r = t * t", "generic")
    local text = kernel:source_for{ T = "float64" }
    assert.matches("typedef double T;", text)
    assert.matches("ld%.global%.nc%.v2%.f64", ptx(text))
    assert.matches("source_for needs a dtype for T", error_of(kernel.source_for, kernel, {}))
  end)

  it("passes scalars by value in their own type", function()
    local kernel = ew.elementwise("int8 a, int8 s", "int8 r", "r = a + s", "k")
    for _, scalar in ipairs({ gpurun.i8(3), gpurun.i32(3) }) do
      local variant = kernel:variant(fake_buffer("int8", 64), scalar, fake_buffer("int8", 64))
      assert.matches("signed char _in_s", variant.source)
      assert.matches("const signed char s = %(signed char%)_in_s;", variant.source)
      assert.matches("%.entry k_vec", ptx(variant.source))
    end
  end)
end)

describe("gpurun.elementwise kernel choice", function()
  local kernel = ew.elementwise(SAMPLE_IN, SAMPLE_OUT, SAMPLE_OP, "pipeline")
  local function buffers(n, ptrs)
    ptrs = ptrs or {}
    local list = {}
    for index = 1, 4 do
      list[index] = fake_buffer("float32", n, ptrs[index])
    end
    return table.unpack(list)
  end

  it("vectorises 16-byte-aligned buffers of one element size, any size", function()
    for _, n in ipairs{ 1, 3, 4, 5, 4096, 4099 } do
      local variant = kernel:variant(buffers(n))
      assert.are.same({ "pipeline_vec", true, 4, n },
                      { variant.kernel, variant.vectorised, variant.width, variant.n })
    end
  end)

  it("falls back to the scalar kernel when one buffer is not 16-byte aligned", function()
    local base = 0x7f0000000000
    local variant = kernel:variant(buffers(100, { base, base + 4, base, base }))
    assert.are.same({ "pipeline_scalar", false }, { variant.kernel, variant.vectorised })
    variant = kernel:variant(buffers(100, { base, base, base, base + 8 }))
    assert.are.equal("pipeline_scalar", variant.kernel)
  end)

  it("keeps scalar inputs out of the alignment and size checks", function()
    local variant = kernel:variant(fake_buffer("float32", 10), 0.5, gpurun.f32(2),
                                   fake_buffer("float32", 10))
    assert.are.equal("pipeline_vec", variant.kernel)
    assert.matches("float _in_b", variant.source)
    assert.matches("float _in_c", variant.source)
  end)

  it("binds a type variable from the first buffer or typed scalar that has it", function()
    local generic = ew.elementwise("T a, T b", "T r", "r = a * b", "generic")
    local variant = generic:variant(fake_buffer("float64", 8), 2, fake_buffer("float64", 8))
    assert.matches("typedef double T;", variant.source)
    assert.are.equal(2, variant.width)
    variant = generic:variant(gpurun.i64(3), fake_buffer("int64", 8), fake_buffer("int64", 8))
    assert.matches("typedef long long T;", variant.source)
  end)

  -- The sample's four arguments, float32 buffers of 8 elements, with some replaced.
  local function with(replacements)
    local list = {}
    for index = 1, 4 do
      local value = replacements[index]
      if value == nil then
        value = fake_buffer("float32", 8)
      end
      list[index] = value
    end
    return table.unpack(list)
  end

  for _, case in ipairs{
    { "a wrong count", function(k) return k:variant(fake_buffer("float32", 8)) end,
      "elementwise kernel 'pipeline' takes 4 arguments %(a, b, c, r%), got 1" },
    { "a wrong dtype", function(k) return k:variant(with{ fake_buffer("float64", 8) }) end,
      "elementwise kernel 'pipeline' input 1 %(float32 a%): expected float32, got a float64 buffer" },
    { "a size mismatch", function(k) return k:variant(with{ [2] = fake_buffer("float32", 9) }) end,
      "input 2 %(float32 b%): has 9 elements, but a has 8" },
    { "a scalar output", function(k) return k:variant(with{ [4] = 1.0 }) end,
      "output 1 %(float32 r%): an output must be a gpurun.Buffer, got number" },
    { "a string", function(k) return k:variant(with{ "a" }) end,
      "input 1 %(float32 a%): a gpurun.Buffer, a gpurun scalar or a number expected, got string" },
    { "a typed scalar of another dtype", function(k) return k:variant(with{ [2] = gpurun.f64(1) }) end,
      "input 2 %(float32 b%): expected float32, got gpurun.f64" },
    { "an integer that is not exact", function()
        local ints = ew.elementwise("int32 a", "int32 r", "r = a", "ints")
        return ints:launch(nil, 2.5, fake_buffer("int32", 8)) end,
      "elementwise kernel 'ints' input 1 %(int32 a%): integer expected for int32, got 2.5" },
    { "buffers on two devices", function(k)
        return k:variant(with{ [2] = fake_buffer("float32", 8, nil, 1) }) end,
      "input 2 %(float32 b%): is on device 1, but a is on device 0" },
  } do
    it("names the kernel and the parameter for " .. case[1], function()
      local message = error_of(case[2], kernel)
      assert.matches(case[3], message)
      assert.matches("^" .. "[^\n]*" .. SPEC_FILE .. ":%d+: ", message)
    end)
  end

  it("refuses a type variable bound two ways, or only by Lua numbers", function()
    local generic = ew.elementwise("T a, T b", "T r", "r = a * b", "generic")
    assert.matches("input 2 %(T b%): T is float32, but a float64 buffer is float64 here",
      error_of(generic.variant, generic, fake_buffer("float32", 4), fake_buffer("float64", 4),
               fake_buffer("float32", 4)))
    local scalars_only = ew.elementwise("T a, float32 b", "float32 r", "r = a * b", "k")
    assert.matches("input 1 %(T a%): a Lua number does not say what T is",
      error_of(scalars_only.variant, scalars_only, 2, fake_buffer("float32", 4),
               fake_buffer("float32", 4)))
  end)

  it("refuses to compile inside a capture, saying to call or prepare first", function()
    local builder = setmetatable({}, { __name = "gpurun.GraphBuilder" })
    local fresh = ew.elementwise(SAMPLE_IN, SAMPLE_OUT, SAMPLE_OP, "fresh")
    assert.matches("elementwise kernel 'fresh' is compiled on its first call for these dtypes; "
                   .. "make that call, or kernel:prepare%(...%) with the same arguments, before capturing it",
                   error_of(fresh.launch, fresh, builder, with{}))
  end)

  it("range-checks the 32-bit scalars an 8- or 16-bit integer takes", function()
    local small = ew.elementwise("uint8 a, uint8 s", "uint8 r", "r = a + s", "k")
    assert.matches("input 2 %(uint8 s%): 300 out of range for uint8 %(0%.%.255%)",
      error_of(function() small:launch(nil, fake_buffer("uint8", 4), gpurun.u32(300),
                                       fake_buffer("uint8", 4)) end))
    local short = ew.elementwise("int16 a, int16 s", "int16 r", "r = a + s", "k16")
    assert.matches("input 2 %(int16 s%): 40000 out of range for int16",
      error_of(function() short:variant(fake_buffer("int16", 4), gpurun.i32(40000),
                                        fake_buffer("int16", 4)) end))
    assert.matches("input 2 %(int16 s%): expected int16, got gpurun.u32",
      error_of(function() short:variant(fake_buffer("int16", 4), gpurun.u32(4),
                                        fake_buffer("int16", 4)) end))
  end)
end)

describe("gpurun.elementwise node arguments", function()
  -- kernel:node_arguments compiles and loads its kernel: the stand-in
  -- device of spec/support/emulated_gpu.lua does both with no GPU (and
  -- nothing here runs the emulator, so g++ is not needed).
  it("types a plain Lua number as its parameter's scalar", function()
    local session <close> = require("spec.support.emulated_gpu").session()
    local kernel = session.modules.elementwise.elementwise("float32 x, float32 s", "float32 y",
                                                           "y = x * s", "scaled")
    local x, y = session:zeros(8, "float32"), session:zeros(8, "float32")
    local launches = kernel:node_arguments(x, 2.5, y)
    assert.are.equal(1, #launches)
    local args = launches[1].args
    assert.are.equal(4, #args)
    assert.are.equal(8, args[1].value)
    assert.are.equal(x, args[2])
    assert.are.same({ "float32", 2.5 }, { args[3].dtype, args[3].value })
    assert.are.equal(y, args[4])
  end)
end)

describe("gpurun.elementwise pipelines", function()
  it("fuse the sample's three stages into one kernel when only r3 is wanted", function()
    local pipe = ew.pipeline(SAMPLE_IN, SAMPLE_STAGES, "r3", "pipeline")
    assert.is_true(pipe.fused)
    assert.are.equal(1, #pipe.kernels)
    assert.are.equal("pipeline: writes r3; r1, r2 in registers", pipe:describe())
    assert.matches("const float r1 = a %+ b;", pipe.source)
    assert.matches("r3 = r2 %- a;", pipe.source)
    local code = ptx(pipe.source)
    assert.are.equal(3, count(code, "ld%.global%.nc%.v4%.f32"))
    assert.are.equal(1, count(code, "st%.global%.v4%.f32"))
  end)

  it("keep one kernel per stage when every intermediate is wanted", function()
    local pipe = ew.pipeline(SAMPLE_IN, SAMPLE_STAGES, "r1, r2, r3", "pipeline")
    assert.is_false(pipe.fused)
    assert.are.equal("pipeline_r1: writes r1\npipeline_r2: writes r2\npipeline_r3: writes r3",
                     pipe:describe())
    assert.are.same({ "float32 a, float32 b", "float32 c, float32 r1", "float32 a, float32 r2" },
                    { pipe.kernels[1].in_params, pipe.kernels[2].in_params, pipe.kernels[3].in_params })
    local code = ptx(pipe.source)
    for _, name in ipairs{ "pipeline_r1", "pipeline_r2", "pipeline_r3" } do
      assert.matches("%.entry " .. name .. "_vec%(", code)
    end
  end)

  it("cut only after wanted intermediates, keeping the rest in registers", function()
    local pipe = ew.pipeline(SAMPLE_IN, SAMPLE_STAGES, { "r1", "r3" }, "pipeline")
    assert.are.equal("pipeline_r1: writes r1\npipeline_r3: writes r3; r2 in registers", pipe:describe())
    assert.are.equal("float32 a, float32 c, float32 r1", pipe.kernels[2].in_params)
  end)

  it("compute again a value a later kernel needs and nobody wants", function()
    local pipe = ew.pipeline("float32 a, float32 b",
      { "float32 s = a + b", "float32 t = s * 2", "float32 u = t + s" }, "t, u", "again")
    assert.are.equal("again_t: writes t; s in registers\nagain_u: writes u; s in registers",
                     pipe:describe())
    assert.matches("%.entry again_u_vec", ptx(pipe.source))
  end)

  it("fuse everything with fuse = \"always\", writing wanted intermediates on the way", function()
    local pipe = ew.pipeline(SAMPLE_IN, SAMPLE_STAGES, "r1, r2, r3", "pipeline", { fuse = "always" })
    assert.is_true(pipe.fused)
    assert.are.equal("pipeline: writes r1, r2, r3", pipe:describe())
    local code = ptx(pipe.source)
    assert.are.equal(3, count(code, "st%.global%.v4%.f32"))
    -- r1 and r2 are written before they are read: never loaded from memory
    assert.is_nil(pipe.source:find("_out_r1[i];", 1, true))
  end)

  it("keep stages apart with fuse = \"never\" and pass elementwise options on", function()
    local pipe = ew.pipeline(SAMPLE_IN, SAMPLE_STAGES, "r1, r2, r3", "p", { fuse = "never", unroll = 2 })
    assert.are.equal(3, #pipe.kernels)
    assert.are.equal(2, pipe.kernels[1].unroll)
  end)

  it("keep unwanted intermediates in temporaries with fuse = \"never\"", function()
    local pipe = ew.pipeline(SAMPLE_IN, SAMPLE_STAGES, "r3", "p", { fuse = "never" })
    assert.are.equal(3, #pipe.kernels)
    assert.are.equal("p_r1: writes r1 (a temporary)\np_r2: writes r2 (a temporary)\np_r3: writes r3",
                     pipe:describe())
    assert.are.same({ { name = "r1", dtype = "float32", last_reader = 2 },
                      { name = "r2", dtype = "float32", last_reader = 3 } }, pipe.temporaries)
    -- The caller passes the inputs and r3 only; r1 and r2 are arguments 5 and 6.
    assert.are.equal(4, pipe.arity)
    assert.are.same({ 1, 2, 5 }, pipe.kernels[1].pipeline_arguments)
    assert.are.same({ 3, 5, 6 }, pipe.kernels[2].pipeline_arguments)
    assert.are.same({ 1, 6, 4 }, pipe.kernels[3].pipeline_arguments)
    local code = ptx(pipe.source)
    for _, name in ipairs{ "p_r1", "p_r2", "p_r3" } do
      assert.matches("%.entry " .. name .. "_vec%(", code)
    end
  end)

  it("carry type variables through the stages", function()
    local pipe = ew.pipeline("T a, T b", { "T s = a + b", "T r = s * a" }, "r", "generic")
    assert.is_nil(pipe.source)
    local variant = pipe.kernels[1]:variant(fake_buffer("int32", 4), fake_buffer("int32", 4),
                                            fake_buffer("int32", 4))
    assert.matches("const T s = a %+ b;", variant.source)
    assert.matches("%.entry generic_vec", ptx(variant.source))
  end)

  for _, case in ipairs{
    { { "T a, T b", { "T s = a + b", "T r = s * a" }, "r", "p", { fuse = "never" } },
      "fuse = \"never\" keeps stage 's' in a temporary buffer, which needs a dtype, not the type variable T" },
    { { SAMPLE_IN, SAMPLE_STAGES, "r2" }, "stage 'r3' feeds no output" },
    { { SAMPLE_IN, SAMPLE_STAGES, "r4" }, "output 'r4' is not a stage" },
    { { SAMPLE_IN, SAMPLE_STAGES, "r3, r3" }, "output 'r3' is listed twice" },
    { { SAMPLE_IN, SAMPLE_STAGES, "" }, "outputs names no stage" },
    { { SAMPLE_IN, { "float32 r1 = a + r2", "float32 r2 = b" }, "r1" }, "stage 'r1' reads 'r2', which comes after it" },
    { { SAMPLE_IN, { "float32 r1 = r1 + a" }, "r1" }, "stage 'r1' reads itself" },
    { { SAMPLE_IN, { "float32 a = b" }, "a" }, "the name 'a' is taken already" },
    { { SAMPLE_IN, { "r1 = a + b" }, "r1" }, "is not \"<dtype> <name> = <expression>\"" },
    { { SAMPLE_IN, { "float32 r1 == a" }, "r1" }, "is not \"<dtype> <name> = <expression>\"" },
    { { SAMPLE_IN, { "U r1 = a" }, "r1" }, "stage 'r1' has type U, which no input has" },
    { { SAMPLE_IN, {}, "r1" }, "stages must be a non%-empty list" },
    { { SAMPLE_IN, SAMPLE_STAGES, "r3", "p", { fuse = "sometimes" } }, "options.fuse must be \"auto\", \"always\" or \"never\", got 'sometimes'" },
  } do
    it("refuse " .. case[2]:gsub("%%", ""), function()
      local message = error_of(ew.pipeline, table.unpack(case[1], 1, 5))
      assert.matches(case[2], message)
      assert.matches("^[^\n]*" .. SPEC_FILE .. ":%d+: ", message)
    end)
  end

  it("check the argument count before anything runs", function()
    local pipe = ew.pipeline(SAMPLE_IN, SAMPLE_STAGES, "r3", "pipeline")
    assert.matches("elementwise pipeline 'pipeline' takes 4 arguments after the stream or builder "
                   .. "%(3 inputs, then the outputs r3%), got 2",
                   error_of(pipe.launch, pipe, nil, 1, 2))
  end)
end)

-- ---- on the GPU --------------------------------------------------------------

local function host_reference(a, b, c)
  local expected = {}
  for i = 1, #a do
    expected[i] = (a[i] + b[i]) * c[i] - a[i]
  end
  return expected
end

describe("gpurun.elementwise on the GPU", function()
  local device, stream

  before_each(function()
    device = gpurun.Device(0)
    device:set_current()
    stream = device:create_stream()
    gpurun.set_current_stream(stream)
  end)

  after_each(function()
    gpurun.set_current_stream(nil)
    stream:close()
  end)

  local function inputs(n, dtype)
    local rng <close> = gpurun.default_rng(n)
    local a, b, c = rng:random(n, dtype or "float32"), rng:random(n, dtype or "float32"),
                    rng:random(n, dtype or "float32")
    return a, b, c, host_reference(a:to_table(), b:to_table(), c:to_table())
  end

  for _, n in ipairs{ 1, 3, 4, 5, 1023, 4096, 4097, 4099, 65536 + 2, (1 << 20) + 3 } do
    it(("computes the sample's expression at %d elements #gpu"):format(n), function()
      local kernel = ew.elementwise(SAMPLE_IN, SAMPLE_OUT, SAMPLE_OP, "pipeline")
      local a, b, c, expected = inputs(n)
      local r = gpurun.full(n, -1.0, "float32")
      finally(function() for _, x in ipairs{ a, b, c, r } do x:close() end end)
      assert.is_true(kernel:variant(a, b, c, r).vectorised)
      assert.are.equal(r, kernel(stream, a, b, c, r))
      stream:sync()
      local want <close> = gpurun.array(expected, "float32")
      assert.is_true(gpurun.allclose(r, want, 1e-5, 1e-5))
    end)
  end

  for _, dtype in ipairs{ "float64", "int32", "uint32", "int64", "uint64", "int8", "uint8", "int16",
                          "uint16", "float16", "bfloat16" } do
    it(("adds and scales %s buffers, with a scalar, at a size off the vector width #gpu"):format(dtype), function()
      local n = 16 * 7 + 5
      local kernel = ew.elementwise(("%s x, %s y, %s s"):format(dtype, dtype, dtype), dtype .. " r",
                                    "r = x + y * s", "axpy_" .. dtype)
      local xs, ys = {}, {}
      for i = 1, n do
        xs[i], ys[i] = i % 50, (i * 7) % 20
      end
      if dtype == "float64" then
        xs[1], ys[1] = 0.25, 0.5
      end
      local x <close> = gpurun.array(xs, dtype)
      local y <close> = gpurun.array(ys, dtype)
      local r <close> = gpurun.zeros(n, dtype)
      kernel(stream, x, y, 3, r)
      stream:sync()
      local got = r:to_table()
      for i = 1, n do
        assert.are.equal(xs[i] + ys[i] * 3, got[i], "element " .. i)
      end
    end)
  end

  -- The sample's pipeline on 16-bit floats, against the exact result on the
  -- host: the inputs are exact in the dtype (multiples of 2^-digits), the
  -- host computes in doubles (exactly), the GPU in float. Fused, only the
  -- result is rounded to the dtype: within 1.5 ulps of the exact value.
  -- In three kernels every stage is rounded: within a few ulps of the
  -- inputs' scale.
  for _, dtype in ipairs({ "float16", "bfloat16" }) do
    for _, fuse in ipairs({ "auto", "never" }) do
      it(("runs the sample's pipeline on %s (fuse = %s) as the host computes it #gpu"):format(dtype, fuse), function()
        local n = (1 << 16) + 13
        local outputs = fuse == "auto" and "r3" or "r1, r2, r3"
        local pipe = ew.pipeline(("%s a, %s b, %s c"):format(dtype, dtype, dtype),
          { dtype .. " r1 = a + b", dtype .. " r2 = r1 * c", dtype .. " r3 = r2 - a" }, outputs,
          "p_" .. dtype, { fuse = fuse })
        assert.are.equal(fuse == "auto", pipe.fused)
        local a, b, c, expected = inputs(n, dtype)
        local r1 <close> = gpurun.full(n, -1, dtype)
        local r2 <close> = gpurun.full(n, -1, dtype)
        local r3 <close> = gpurun.full(n, -1, dtype)
        finally(function() for _, x in ipairs{ a, b, c } do x:close() end end)
        assert.are.equal(dtype, a.dtype)
        for _, value in ipairs(a:to_table(1, 100)) do
          assert.are.equal(0, value * 2 ^ gpurun.dtypes[dtype].digits % 1) -- exact inputs
        end
        if fuse == "auto" then
          assert.is_true(pipe.kernels[1]:variant(a, b, c, r3).vectorised)
          pipe(stream, a, b, c, r3)
        else
          pipe(stream, a, b, c, r1, r2, r3)
        end
        stream:sync()
        local digits = gpurun.dtypes[dtype].digits
        local want <close> = gpurun.array(expected, "float64")
        local rtol, atol = 2 ^ (2 - digits), 2 ^ -20
        if fuse == "never" then atol = 2 ^ (4 - digits) end
        local summary = gpurun.compare(r3, want, rtol, atol)
        assert.are.equal(0, summary.mismatches, ("worst element %d: got %.9g, expected %.9g")
          :format(summary.worst_index, summary.worst_actual, summary.worst_expected))
        -- every result is a value of the dtype
        local first = r3:to_table(1, 64)
        for i = 1, 64 do
          assert.are.equal(first[i], gpurun[gpurun.dtypes[dtype].scalar](first[i]).value)
        end
      end)
    end
  end

  it("takes typed scalars and Lua numbers alike, and allocates nothing per call with buffers only #gpu", function()
    local n = 4096
    local kernel = ew.elementwise("float32 x, float32 alpha", "float32 r", "r = alpha * x", "scale")
    local x <close> = gpurun.full(n, 2.0, "float32")
    local r <close> = gpurun.zeros(n, "float32")
    kernel(stream, x, 0.5, r)
    stream:sync()
    assert.is_true(gpurun.allclose(r, 1.0, 0, 0))
    kernel(stream, x, gpurun.f32(4), r)
    stream:sync()
    assert.is_true(gpurun.allclose(r, 8.0, 0, 0))

    local copy = ew.elementwise("float32 x", "float32 r", "r = x", "copy")
    assert.are.equal(0, expect.bytes_allocated(function() copy(stream, x, r) end))
    stream:sync()
  end)

  it("falls back to the scalar kernel for a misaligned view #gpu", function()
    local n = 4099
    local a, b, c, expected = inputs(n + 1)
    local r = gpurun.zeros(n + 1, "float32")
    finally(function() for _, x in ipairs{ a, b, c, r } do x:close() end end)
    if not a.view then
      pending("needs buf:view(offset, count), which this build lacks")
      return
    end
    local kernel = ew.elementwise(SAMPLE_IN, SAMPLE_OUT, SAMPLE_OP, "pipeline")
    -- views from element 2 (elements count from 1): 4 bytes past a 16-byte boundary
    local va, vb, vc, vr = a:view(2, n), b:view(2, n), c:view(2, n), r:view(2, n)
    assert.are.equal("pipeline_scalar", kernel:variant(va, vb, vc, vr).kernel)
    kernel(stream, va, vb, vc, vr)
    stream:sync()
    local got = r:to_table()
    assert.are.equal(0, got[1])
    for i = 2, n + 1 do
      assert.is_true(math.abs(got[i] - expected[i]) <= 1e-5 + 1e-5 * math.abs(expected[i]), "element " .. i)
    end
  end)

  for _, case in ipairs{ { "r3", 1 }, { "r1, r2, r3", 3 }, { "r1, r3", 2 } } do
    it(("runs the pipeline with outputs %s as %d kernel(s), launched and captured #gpu"):format(case[1], case[2]), function()
      local n = (1 << 16) + 1
      local pipe = ew.pipeline(SAMPLE_IN, SAMPLE_STAGES, case[1], "pipeline")
      assert.are.equal(case[2], #pipe.kernels)
      local a, b, c, expected = inputs(n)
      local outputs = {}
      for index = 1, select(2, case[1]:gsub(",", "")) + 1 do
        outputs[index] = gpurun.zeros(n, "float32")
      end
      pipe(stream, a, b, c, table.unpack(outputs))
      stream:sync()
      local want <close> = gpurun.array(expected, "float32")
      local r3 = outputs[#outputs]
      assert.is_true(gpurun.allclose(r3, want, 1e-5, 1e-5))
      if #outputs > 1 then
        local r1 = outputs[1]:to_table()
        local at, bt = a:to_table(), b:to_table()
        for i = 1, n, 997 do
          assert.is_true(math.abs(r1[i] - (at[i] + bt[i])) <= 1e-5)
        end
      end

      r3:fill(0.0)
      local builder <close> = stream:create_graph_builder()
      builder:begin_building()
      pipe(builder, a, b, c, table.unpack(outputs))
      builder:end_building()
      local graph <close> = builder:complete()
      assert.are.equal(case[2], graph.node_count)
      graph:launch(stream)
      stream:sync()
      assert.is_true(gpurun.allclose(r3, want, 1e-5, 1e-5))
      a:fill(1.0)
      b:fill(2.0)
      c:fill(3.0)
      graph:launch(stream)
      stream:sync()
      assert.is_true(gpurun.allclose(r3, 8.0, 0, 0))
      graph:close()
      builder:close()
      for _, buffer in ipairs{ a, b, c, table.unpack(outputs) } do
        buffer:close()
      end
    end)
  end

  it("binds a fused pipeline into launch plans #gpu", function()
    local n = 4096
    local pipe = ew.pipeline(SAMPLE_IN, SAMPLE_STAGES, "r3", "pipeline")
    local a <close> = gpurun.full(n, 1.0, "float32")
    local b <close> = gpurun.full(n, 2.0, "float32")
    local c <close> = gpurun.full(n, 3.0, "float32")
    local r3 <close> = gpurun.zeros(n, "float32")
    local plans <close> = pipe:bind(a, b, c, r3)
    plans:launch(stream)
    stream:sync()
    assert.is_true(gpurun.allclose(r3, 8.0, 0, 0))
  end)
end)

describe("scripts/fused.lua", function()
  it("runs the six variants, checks all six and reports them in JSON #gpu", function()
    local result = process.gpurun(q("scripts/fused.lua") .. " --elements 65537 --iters 20 --json")
    assert.are.equal(0, result.code, result.stderr)
    local report = require("cjson").decode(result.stdout)
    assert.is_true(report.checks_passed)
    local labels = 0
    for _, passed in pairs(report.checks) do
      labels = labels + 1
      assert.is_true(passed)
    end
    assert.is_true(labels >= 6)
    for _, key in ipairs{ "sample", "generated", "fused" } do
      assert.is_true(report[key].launch.us_per_iter > 0, key)
      assert.is_true(report[key].graph.us_per_iter > 0, key)
    end
  end)

  it("prints the text report #gpu", function()
    local result = process.gpurun(q("scripts/fused.lua") .. " --elements 4096 --iters 10")
    assert.are.equal(0, result.code, result.stderr)
    assert.matches("Fused kernel, launched: ", result.stdout)
    assert.matches("\nDone\n$", result.stdout)
  end)

  it("refuses a bad option before touching the GPU", function()
    local result = process.gpurun(q("scripts/fused.lua") .. " --elements 0")
    assert.are.equal(2, result.code)
    assert.matches("fused.lua: error: %-%-elements: expected a positive integer, got '0'", result.stderr)
  end)
end)

describe("bench/fused.lua", function()
  it("times every path at two sizes and reports them in JSON #gpu", function()
    local result = process.gpurun(q("bench/fused.lua")
      .. " --sizes 4096,65537 --reps 2 --seconds 0.01 --copy-mib 16 --json")
    assert.are.equal(0, result.code, result.stderr)
    local report = require("cjson").decode(result.stdout)
    assert.are.equal(2, #report.sizes)
    for _, figures in ipairs(report.sizes) do
      for _, path in ipairs{ "fused_launch", "fused_plan", "fused_graph", "generated_launch",
                             "generated_graph" } do
        assert.is_true(figures[path].us_per_iter > 0, path)
      end
      assert.are.equal("fused_vec", figures.fused_kernel)
    end
    assert.is_true(report.copy.gb_per_s > 0)
  end)
end)
