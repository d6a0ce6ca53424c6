-- gpurun.reduction, the prebuilt reductions, the scans, select and the
-- reduction stages of pipelines. Parsing, code generation (compiled by
-- NVRTC to cubin, so that ptxas checks the inline PTX too: no GPU), the
-- choice of kernel for given buffers (on stand-in buffers) and argument
-- errors run everywhere; results against host references, determinism,
-- graphs and captures need a GPU.
local gpurun = require("gpurun")
local red = require("gpurun.compute.reduction")
local ss = require("gpurun.compute.scan_source")
local ew = require("gpurun.compute.elementwise")

local SPEC_FILE = "reductions_spec.lua"
local DTYPES = { "float32", "float64", "int32", "uint32", "int64", "uint64", "int8", "uint8", "int16",
                 "uint16" }
-- Stored in 16 bits, computed and accumulated in float (their compute type).
local HALVES = { "float16", "bfloat16" }
local SIZES = { 1, 31, 32, 33, 1023, 1024, 1025, 4096, 4099, 65537, (1 << 20) + 7 }

local function error_of(f, ...)
  local args = table.pack(...)
  local ok, message = pcall(function()
    local result = f(table.unpack(args, 1, args.n))
    return result
  end)
  assert.is_false(ok, "expected an error")
  return tostring(message)
end

local function fake_buffer(dtype, n, ptr, device)
  return setmetatable({}, {
    __name = "gpurun.Buffer",
    __len = function() return n end,
    __index = { dtype = dtype, ptr = ptr or 0x7f0000000000, device = device or 0 },
  })
end

local function fake(name)
  return setmetatable({ device = 0 }, { __name = name })
end

local function compile(source_text, target)
  local options = gpurun.ProgramOptions{ std = "c++17", arch = "sm_90" }
  local program <close> = gpurun.Program(source_text, "c++", options)
  local code <close> = program:compile(target or "cubin")
  return code.code
end

local function ptx(source_text)
  return compile(source_text, "ptx")
end

local function count(text, pattern)
  local found = 0
  for _ in text:gmatch(pattern) do
    found = found + 1
  end
  return found
end

-- ---- parameters and errors -------------------------------------------------------

describe("gpurun.reduction parameters", function()
  it("reads CuPy's vocabulary: in, out, map, reduce, post-map, identity, name", function()
    local kernel = gpurun.reduction("T x", "T y", "x * x", "a + b", "y = sqrt(a)", 0, "l2norm")
    assert.are.equal("l2norm", kernel.name)
    assert.are.same({ "x", "y" }, { kernel.params[1].name, kernel.params[2].name })
    assert.is_true(kernel.params[2].output)
    assert.is_true(kernel.params[2].result)
    assert.is_nil(kernel.params[1].output)
    assert.are.equal(1, kernel.input_count)
    assert.are.equal(2, kernel.arity)
    assert.is_nil(kernel.source) -- T is bound at the call
    assert.matches("typedef double T;", kernel:source_for{ T = "float64" })
  end)

  it("takes a named operation instead of reduce_expr and identity", function()
    for _, op in ipairs{ "sum", "prod", "min", "max", "argmin", "argmax", "any", "all" } do
      local out = (op == "argmin" or op == "argmax") and "int64 at" or "float32 at"
      local kernel = gpurun.reduction("float32 x", out, "x", op, nil, nil, "k_" .. op)
      assert.matches("reduce " .. op .. " of: x", kernel.source)
    end
  end)

  it("defaults the post-map to out = a, and to out = index + 1 for argmin and argmax", function()
    assert.matches("s = a;", gpurun.reduction("float32 x", "float32 s", "x", "sum", nil, nil, "k").source)
    assert.matches("at = index %+ 1;", gpurun.reduction("float32 x", "int64 at", "x", "argmax", "", nil, "k").source)
  end)

  it("reduces in the first output's type, the first input's for argmin and argmax, or reduce_type", function()
    assert.matches("float f0;", gpurun.reduction("int8 x", "float32 s", "x", "sum", nil, nil, "k").source)
    assert.matches("struct alignas%(8%) _pair0 { double v;",
      gpurun.reduction("float64 x", "int64 s", "x", "argmin", nil, nil, "k").source)
    assert.matches("double f0;", gpurun.reduction("float32 x", "float32 s", "x", "sum", nil, nil, "k",
      { reduce_type = "float64" }).source)
    assert.matches("bool f0;", gpurun.reduction("float32 x", "uint8 s", "x > 0", "any", nil, nil, "k").source)
  end)

  for _, case in ipairs{
    { { "flaot32 x", "float32 s", "x", "sum" }, "in_params: unknown dtype 'flaot32' for x" },
    { { "float32 x", "", "x", "sum" }, "out_params names no output" },
    { { "float32 x", "float32 s", "", "sum" }, "map_expr must be a non%-empty string of C code, got an empty one" },
    { { "float32 x", "float32 s", "x", "a + b" }, "identity must be a number or a non%-empty string of C, got nil" },
    { { "float32 x", "float32 s", "x", "a + b", nil, 0 / 0 }, "identity must not be NaN" },
    { { "float32 x", "float32 s", "x", "sum", nil, 0 }, "'sum' brings its own identity; pass nil for identity" },
    { { "float32 x", "float32 s", "x", 5 }, "reduce_expr %(an expression of a and b, or one of sum, prod, min, max, argmin, argmax, any, all%)" },
    { { "float32 x", "float32 s", "x", "sum", nil, nil, "_k" }, "the name must be a C identifier not starting with '_', got '_k'" },
    { { "float32 x", "float32 s, float32 t", "x", "sum" }, "post_map_expr is needed to write several outputs" },
    { { "float32 x", "float32 s", "x", "sum", "t = a" }, "post_map_expr never mentions output 's'" },
    { { "float32 x", "float32 index", "x", "sum" }, "an output cannot be named 'index'" },
    { { "float32 x", "float32 s", "x", "sum", nil, nil, "k", { reduce_type = "half" } }, "options.reduce_type must be a dtype" },
    { { "float32 x", "uint8 s", "x", "all", nil, nil, "k", { reduce_type = "int32" } }, "all reduces as bool" },
    { { "", "int64 s", "i", "argmax" }, "argmax needs options.reduce_type when the kernel has no inputs" },
    { { "float32 x", "float32 s", "x", "sum", nil, nil, "k", { unroll = 9 } }, "options.unroll must be an integer from 1 to 8, got 9" },
    { { "float32 x", "float32 s", "x", "sum", nil, nil, "k", "fast" }, "options must be a table, got string" },
    { { "float32 x, float32 x", "float32 s", "x", "sum" }, "parameter name 'x' is used twice" },
  } do
    it("refuses " .. case[2]:gsub("%%", ""), function()
      local message = error_of(gpurun.reduction, table.unpack(case[1], 1, 8))
      assert.matches(case[2], message)
      assert.matches("^[^\n]*" .. SPEC_FILE .. ":%d+: ", message) -- points at the caller
    end)
  end
end)

-- ---- generated code ----------------------------------------------------------------

describe("gpurun.reduction code", function()
  it("compiles a vector and a scalar kernel for a full reduction, with 16-byte loads and no float atomics", function()
    local kernel = red.reduction("float32 x", "float32 s", "x", "sum", nil, nil, "total")
    local code = ptx(kernel.source)
    assert.matches("%.entry total_vec%(", code)
    assert.matches("%.entry total_scalar%(", code)
    -- 4 vectors per thread per step (unroll), then 1
    assert.are.equal(5, count(code, "ld%.global%.nc%.v4%.f32"))
    -- the ticket is the only atomic: partials are combined in block order
    assert.are.equal(2, count(code, "atom%.global%.add%.u32"))
    assert.is_nil(code:find("atom%.[%w.]*f32"))
    assert.is_nil(code:find("%f[%w]red%.[%w.]*f32"))
  end)

  -- One kernel per dtype reducing four ways at once (what a pipeline with
  -- several reduction stages makes): every named operation's code for
  -- every dtype, in few NVRTC runs.
  local function four_ways(dtype, name)
    local param = function(type_name, param_name) return { type = type_name, name = param_name } end
    return red.kernel{
      name = name, what = name, inputs = { param(dtype, "x") },
      outputs = { param(dtype, "s"), param(dtype, "m"), param("int64", "w"), param("uint8", "y") },
      reductions = {
        { type = dtype, map = "x", op = "sum", post = "s = a;" },
        { type = dtype, map = "x", op = "min", post = "m = a;" },
        { type = dtype, map = "x", op = "argmax", post = "w = index + 1;" },
        { type = "bool", map = "x != 0", op = "any", post = "y = a;" },
      },
    }
  end

  -- Programs joined into one text compile in one NVRTC run (their common
  -- parts are guarded, their names differ).
  local function joined(make)
    local texts = {}
    for index, dtype in ipairs(DTYPES) do
      texts[index] = make(dtype)
    end
    return table.concat(texts, "\n")
  end

  it("compiles every named operation for every dtype, loading 16 bytes at a time", function()
    local code = ptx(joined(function(dtype) return four_ways(dtype, "four_" .. dtype).source end))
    for _, case in ipairs{ { "float32", "v4%.f32" }, { "float64", "v2%.f64" }, { "int32", "v4%.u32" },
                           { "uint32", "v4%.u32" }, { "int64", "v2%.u64" }, { "uint64", "v2%.u64" },
                           { "int8", "v4%.u32" }, { "uint8", "v4%.u32" }, { "int16", "v4%.u32" },
                           { "uint16", "v4%.u32" } } do
      local entry = code:match("%.entry four_" .. case[1] .. "_vec%(.-\n}")
      assert.truthy(entry, case[1])
      assert.matches("ld%.global%.nc%." .. case[2], entry, case[1])
    end
  end)

  it("compiles every named operation for float16 and bfloat16 in float, with their headers, 8 elements a load", function()
    local texts = {}
    for index, dtype in ipairs(HALVES) do
      local info = gpurun.dtypes[dtype]
      local kernel = four_ways(dtype, "four_" .. dtype)
      local text = kernel.source
      assert.matches("#include <" .. info.header .. ">", text, 1, true)
      -- the accumulator holds floats: { sum, min, { max, index }, any }
      assert.matches("struct alignas(8) _acc {\n    float f0;\n    float f1;\n    _pair2 f2;", text, 1, true)
      assert.matches("struct alignas(8) _pair2 { float v; unsigned long long i; };", text, 1, true)
      assert.matches("const float x = static_cast<float>(_l_x_0.v[_k]);", text, 1, true)
      assert.matches("_out_s[segment] = static_cast<" .. info.c_type .. ">(s);", text, 1, true)
      assert.matches("_vec<" .. info.c_type .. ", 8>", text, 1, true)
      texts[index] = text
    end
    local code = ptx(table.concat(texts, "\n"))
    for _, dtype in ipairs(HALVES) do
      local entry = code:match("%.entry four_" .. dtype .. "_vec%(.-\n}")
      assert.truthy(entry, dtype)
      assert.matches("ld%.global%.nc%.v4%.u32", entry, dtype)
      assert.is_nil(entry:find("atom%.[%w.]*f16"), dtype)
    end
    -- the other families, and a sum of float16 into float64, through ptxas
    for _, dtype in ipairs(HALVES) do
      local kernel = four_ways(dtype, "families_" .. dtype)
      compile(kernel:source_for({}, "segments"))
      compile(kernel:source_for({}, "columns"))
    end
    compile(red.reduction("float16 x", "float64 s", "x", "sum", nil, nil, "wide").source)
  end)

  it("compiles a reduction of its own over 16-bit floats: type variables, scalars and a post-map in float", function()
    local kernel = red.reduction("T x, T w", "T y", "x * w", "a + b", "y = sqrt(a / count)", 0, "rms")
    local variant = kernel:variant(fake_buffer("bfloat16", 64), gpurun.bf16(0.5), fake_buffer("bfloat16", 1))
    assert.matches("typedef float T;", variant.source, 1, true)
    assert.matches("__nv_bfloat16 _in_w", variant.source, 1, true)
    assert.matches("const float w = (float)_in_w;", variant.source, 1, true)
    compile(variant.source)
    -- a Lua number and the 32-bit scalar of its kind convert as elementwise kernels' do
    local int16 = red.reduction("int16 x, int16 k", "int64 s", "x * k", "sum", nil, nil, "scaled")
    int16:variant(fake_buffer("int16", 8), gpurun.i32(300), fake_buffer("int64", 1))
    assert.matches("input 2 %(int16 k%): 40000 out of range for int16 %(%-32768%.%.32767%)",
      error_of(int16.variant, int16, fake_buffer("int16", 8), 40000, fake_buffer("int64", 1)))
    assert.matches("input 2 %(int16 k%): 70000 out of range for int16",
      error_of(int16.variant, int16, fake_buffer("int16", 8), gpurun.i32(70000), fake_buffer("int64", 1)))
    ptx(int16:source_for({}))
  end)

  it("compiles the segments and columns families, through ptxas", function()
    for _, dtype in ipairs{ "float32", "int8" } do
      local kernel = four_ways(dtype, "families_" .. dtype)
      compile(kernel:source_for({}, "segments"))
      compile(kernel:source_for({}, "columns"))
    end
    compile(four_ways("float64", "full_f64").source)
  end)

  it("compiles prod, max, argmin, all, and a reduction of its own with a post-map and a scalar", function()
    ptx(red.reduction("int64 x", "int64 r", "x", "prod", nil, nil, "p").source)
    ptx(red.reduction("float64 x", "float64 r", "x", "max", nil, nil, "m"):source_for({}, "columns"))
    ptx(red.reduction("int32 x", "uint32 r", "x", "argmin", nil, nil, "am"):source_for({}, "segments"))
    ptx(red.reduction("uint8 x", "int32 r", "x > 3", "all", nil, nil, "al").source)
    local l2 = red.reduction("T x, float32 w", "T y", "x * w", "a + b", "y = sqrt(a) + count * 0", 0, "l2",
                             { reduce_type = "float64" })
    compile(l2:source_for({ T = "float32" }))
    ptx(l2:source_for({ T = "float64" }, "segments"))
  end)

  it("writes only a scalar kernel when the per-element buffers' sizes differ", function()
    local kernel = red.reduction("float32 x, uint8 keep", "float64 s", "keep ? x : 0.0f", "sum", nil, nil, "masked")
    assert.is_nil(kernel.source:find("masked_vec", 1, true))
    assert.matches("%.entry masked_scalar%(", ptx(kernel.source))
  end)

  it("marks 16-byte loads and stores evict-first with cache = \"streaming\", elementwise and reduction alike", function()
    local pipe = ew.pipeline("float32 a, float32 b, float32 c",
      { "float32 r1 = a + b", "float32 r2 = r1 * c", "float32 r3 = r2 - a" }, "r3", "streamed",
      { cache = "streaming" })
    local code = ptx(pipe.source)
    assert.are.equal(3, count(code, "ld%.global%.cs%.v4%.[fsu]32"))
    assert.are.equal(1, count(code, "st%.global%.cs%.v4%.[fsu]32"))
    local kernel = red.reduction("float32 x", "float32 s", "x", "sum", nil, nil, "streamed_sum",
                                 { cache = "streaming" })
    assert.are.equal(5, count(ptx(kernel.source), "ld%.global%.cs%.v4%.[fsu]32"))
    assert.matches("options%.cache must be \"default\" or \"streaming\", got 'fast'",
      error_of(ew.elementwise, "float32 a", "float32 r", "r = a", "k", { cache = "fast" }))
  end)

  it("refuses a bad expression with NVRTC's log, at compile time", function()
    local kernel = red.reduction("float32 x", "float32 s", "x +* 2", "sum", nil, nil, "broken")
    local message = error_of(compile, kernel.source)
    assert.matches("NVRTC", message)
    assert.matches("error", message)
  end)

  it("compiles CUB's block primitives through NVRTC with the toolkit's CCCL include path", function()
    local include = "/usr/local/cuda/include"
    local probe = io.open(include .. "/cccl/cub/block/block_reduce.cuh")
    if not probe then
      pending("no CCCL headers under " .. include .. "/cccl")
      return
    end
    probe:close()
    local text = [[
#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>
extern "C" __global__ void cub_probe(const float *x, float *out)
{
    typedef cub::BlockReduce<float, 128> Reduce;
    typedef cub::BlockScan<float, 128> Scan;
    __shared__ typename Reduce::TempStorage reduce_storage;
    __shared__ typename Scan::TempStorage scan_storage;
    float v = x[threadIdx.x], total = Reduce(reduce_storage).Sum(v);
    Scan(scan_storage).InclusiveSum(v, v);
    out[threadIdx.x] = v + total;
}
]]
    local options = gpurun.ProgramOptions{ std = "c++17", arch = "sm_90", include_paths = { include .. "/cccl" } }
    local program <close> = gpurun.Program(text, "c++", options)
    local code <close> = program:compile("ptx")
    assert.matches("%.entry cub_probe", code.code)
  end)
end)

-- ---- which kernel a call runs ----------------------------------------------------------

describe("gpurun.reduction kernel choice", function()
  local kernel = red.reduction("float32 x", "float32 s", "x", "sum", nil, nil, "pick")

  it("vectorises an aligned full reduction of any size, and falls back for a misaligned input", function()
    for _, n in ipairs{ 0, 1, 3, 4, 5, 4096, 4099 } do
      local variant = kernel:variant(fake_buffer("float32", n), fake_buffer("float32", 1))
      assert.are.same({ "full", "pick_vec", true, 4, n, 1 },
        { variant.family, variant.kernel, variant.vectorised, variant.width, variant.n, variant.segments })
    end
    local variant = kernel:variant(fake_buffer("float32", 64, 0x7f0000000004), fake_buffer("float32", 1))
    assert.are.same({ "pick_scalar", false }, { variant.kernel, variant.vectorised })
  end)

  it("gives rows a warp each when short and a block each when long, and columns their own kernel", function()
    local rows = kernel:variant(fake_buffer("float32", 4000), fake_buffer("float32", 100), { rows = 100, cols = 40, axis = 2 })
    assert.are.same({ "segments", "rows", "pick_segments_warp", 100 }, { rows.family, rows.shape, rows.kernel, rows.segments })
    local long = kernel:variant(fake_buffer("float32", 40000), fake_buffer("float32", 4), { rows = 4, cols = 10000, axis = 2 })
    assert.are.equal("pick_segments_block", long.kernel)
    local columns = kernel:variant(fake_buffer("float32", 4000), fake_buffer("float32", 40), { rows = 100, cols = 40, axis = 1 })
    assert.are.same({ "columns", "pick_columns", 40 }, { columns.family, columns.kernel, columns.segments })
    local segments = kernel:variant(fake_buffer("float32", 10), fake_buffer("float32", 3), { offsets = fake_buffer("int64", 4) })
    assert.are.same({ "segments", "offsets", 3 }, { segments.family, segments.shape, segments.segments })
  end)

  for _, case in ipairs{
    { "an output of the wrong size", { fake_buffer("float32", 8), fake_buffer("float32", 2) },
      "reduction kernel 'pick' output 1 %(float32 s%): has 2 elements, but this reduction gives 1 %(one per call%)" },
    { "an output not one per row", { fake_buffer("float32", 8), fake_buffer("float32", 2), { rows = 4, cols = 2, axis = 2 } },
      "output 1 %(float32 s%): has 2 elements, but this reduction gives 4 %(one per segment%)" },
    { "rows and cols that do not fit", { fake_buffer("float32", 8), fake_buffer("float32", 3), { rows = 3, cols = 3, axis = 2 } },
      "rows %* cols %(3 %* 3%) must be the inputs' 8 elements" },
    { "a missing axis", { fake_buffer("float32", 8), fake_buffer("float32", 4), { rows = 4, cols = 2 } },
      "shape%.axis must be 2 %(a result per row%) or 1 %(a result per column%), got nil" },
    { "offsets and rows together", { fake_buffer("float32", 8), fake_buffer("float32", 1), { rows = 1, offsets = fake_buffer("int32", 2) } },
      "a shape has offsets or rows, cols and axis, not both" },
    { "float offsets", { fake_buffer("float32", 8), fake_buffer("float32", 1), { offsets = fake_buffer("float32", 2) } },
      "shape%.offsets must be int32, uint32, int64 or uint64, got float32" },
    { "empty offsets", { fake_buffer("float32", 8), fake_buffer("float32", 0), { offsets = fake_buffer("int32", 0) } },
      "shape%.offsets needs one entry more than there are segments, got none" },
    { "offsets on another device", { fake_buffer("float32", 8), fake_buffer("float32", 1), { offsets = fake_buffer("int32", 2, nil, 1) } },
      "shape%.offsets is on device 1, but the inputs are on device 0" },
    { "an unknown shape key", { fake_buffer("float32", 8), fake_buffer("float32", 1), { row = 1 } },
      "unknown shape key 'row' %(rows, cols, axis, offsets%)" },
    { "a shape that is not a table", { fake_buffer("float32", 8), fake_buffer("float32", 1), 5 },
      "the argument after the outputs must be a shape table" },
    { "too many arguments", { fake_buffer("float32", 8), fake_buffer("float32", 1), {}, 5 },
      "reduction kernel 'pick' takes 2 arguments %(x, s, then a shape table if any%), got 4" },
    { "a wrong dtype", { fake_buffer("float64", 8), fake_buffer("float32", 1) },
      "input 1 %(float32 x%): expected float32, got a float64 buffer" },
    { "a scalar output", { fake_buffer("float32", 8), 1.5 }, "output 1 %(float32 s%): an output must be a gpurun.Buffer, got number" },
  } do
    it("refuses " .. case[1] .. ", naming the kernel, at the caller's line", function()
      local message = error_of(kernel.variant, kernel, table.unpack(case[2]))
      assert.matches(case[3], message)
      assert.matches("^[^\n]*" .. SPEC_FILE .. ":%d+: ", message)
    end)
  end

  it("needs an input buffer to know how many elements it reduces", function()
    local scalars = red.reduction("float32 w", "float32 s", "w", "sum", nil, nil, "scalars")
    assert.matches("reduction kernel 'scalars' needs an input buffer",
                   error_of(scalars.variant, scalars, 1.5, fake_buffer("float32", 1)))
  end)

  it("refuses to compile inside a capture, saying to call or prepare first", function()
    local fresh = red.reduction("float32 x", "float32 s", "x", "sum", nil, nil, "fresh")
    assert.matches("reduction kernel 'fresh' is compiled on its first call for these dtypes; make that call, "
                   .. "or kernel:prepare%(...%) with the same arguments, before capturing it",
                   error_of(fresh.launch, fresh, fake("gpurun.GraphBuilder"), fake_buffer("float32", 8),
                            fake_buffer("float32", 1)))
  end)

  it("goes through the module table too, guarded", function()
    local kernel2 = gpurun.reduction("float32 x", "float32 s", "x", "max", nil, nil, "guarded")
    assert.matches(SPEC_FILE .. ":%d+: .*has 2 elements", error_of(kernel2.variant, kernel2,
      fake_buffer("float32", 8), fake_buffer("float32", 2)))
  end)
end)

-- ---- prebuilt, scans and select: their arguments ---------------------------------------

describe("the prebuilt reductions, scans and select refuse bad arguments", function()
  local stream, builder = fake("gpurun.Stream"), fake("gpurun.GraphBuilder")
  local x = fake_buffer("float32", 16)
  for _, case in ipairs{
    { gpurun.sum, { nil, x }, "bad argument #1 to 'gpurun.sum' %(gpurun.Stream or gpurun.GraphBuilder expected, got nil%)" },
    { gpurun.max, { stream, "x" }, "bad argument #2 to 'gpurun.max' %(gpurun.Buffer expected for x, got string%)" },
    { gpurun.mean, { stream, x, fake_buffer("int32", 1) }, "out must be a float buffer %(float32, float64, float16, bfloat16%), got int32" },
    { gpurun.argmax, { stream, x, fake_buffer("float32", 1) }, "out must be an integer buffer %(a 1%-based position%), got float32" },
    { gpurun.min, { stream, x, nil, { accumulate = "float64" } }, "options%.accumulate does not apply: min combines values exactly" },
    { gpurun.sum, { stream, x, nil, { accumulate = "half" } }, "options%.accumulate must be a dtype" },
    { gpurun.sum, { stream, x, nil, { nope = 1 } }, "unknown option 'nope' %(known: accumulate, rows, cols, axis, offsets%)" },
    { gpurun.sum, { builder, x }, "bad argument #3 to 'gpurun.sum' %(out is needed on a GraphBuilder" },
    { gpurun.max_abs_diff, { stream, x, {} }, "bad argument #3 to 'gpurun.max_abs_diff' %(gpurun.Buffer expected for b, got table%)" },
    { gpurun.inclusive_scan, { stream, x, fake_buffer("float32", 8) }, "y has 8 elements, but x has 16" },
    { gpurun.inclusive_scan, { stream, x, x, "argmin" }, "argmin is not a scan operation %(sum, prod, min, max%)" },
    { gpurun.inclusive_scan, { stream, x, x, "a * b" }, "options%.identity %(a number or C text%) is needed with an expression, got nil" },
    { gpurun.exclusive_scan, { stream, x, x, "c + d", { identity = 0 } }, "'c %+ d' is neither an operation" },
    { gpurun.exclusive_scan, { stream, x, x, "sum", { block = 48 } }, "options%.block must be a multiple of 32 from 32 to 1024, got 48" },
    { gpurun.exclusive_scan, { stream, x, x, "sum", { block = 1024, items = 32 } }, "must stay within 40960 bytes of shared memory" },
    { gpurun.inclusive_scan, { stream, x, fake_buffer("float32", 16, nil, 1) }, "y is on device 1, but x is on device 0" },
    { gpurun.select, { stream, x, "", x, fake_buffer("int64", 1) }, "predicate: a C expression of x %(and i%) expected, got string" },
    { gpurun.select, { stream, x, "x > 0", fake_buffer("float64", 16), fake_buffer("int64", 1) }, "out must have x's dtype float32, got float64" },
    { gpurun.select, { stream, x, "x > 0", x, fake_buffer("int64", 2) }, "count must be one int32, uint32, int64 or uint64 element, got 2 int64" },
    { gpurun.select, { stream, x, "x > 0", x, fake_buffer("int64", 1), { identity = 0 } }, "unknown option 'identity' %(known: block, items%)" },
  } do
    it(case[3]:gsub("%%", ""), function()
      local message = error_of(case[1], table.unpack(case[2], 1, 6))
      assert.matches(case[3], message)
      assert.matches("^[^\n]*" .. SPEC_FILE .. ":%d+: ", message)
    end)
  end
end)

describe("scan code", function()
  local function spec_for(mode, in_c, out_c, combine, identity, extra)
    local spec = { name = "scan_" .. mode, mode = mode, in_c = in_c, out_c = out_c, value_c = out_c,
                   combine = combine, identity = identity, block = 128, items = 23 }
    for key, value in pairs(extra or {}) do spec[key] = value end
    return spec
  end

  it("compiles inclusive and exclusive scans of every dtype, with acquire and release at GPU scope", function()
    local texts = {}
    for index, dtype in ipairs(DTYPES) do
      local c = require("gpurun.common").DTYPES[dtype].c
      local mode = index % 2 == 0 and "inclusive" or "exclusive"
      local spec = spec_for(mode, c, c, "a + b", "0")
      spec.name = "scan_" .. dtype
      texts[index] = ss.generate(spec)
    end
    local code = ptx(table.concat(texts, "\n"))
    for _, dtype in ipairs(DTYPES) do
      local entry = code:match("%.entry scan_" .. dtype .. "%(.-\n}")
      assert.truthy(entry, dtype)
      assert.matches("ld%.acquire%.gpu%.u32", entry)
      assert.matches("st%.release%.gpu%.u32", entry)
      assert.matches("atom%.global%.add%.u32", entry) -- the tile counter
    end
    -- and ptxas accepts the inline PTX
    compile(ss.generate(spec_for("inclusive", "float", "float", "a + b", "0")))
    compile(ss.generate(spec_for("exclusive", "double", "double", "(b < a || b != b) ? b : a", "0")))
  end)

  it("compiles scans and select of float16 and bfloat16 in float, storing rounded, through ptxas", function()
    for _, dtype in ipairs(HALVES) do
      local info = gpurun.dtypes[dtype]
      local text = ss.generate(spec_for("inclusive", info.c_type, info.c_type, "a + b", "0",
        { name = "scan_" .. dtype, in_compute = "float", value_c = "float", headers = { info.header } }))
      assert.matches("#include <" .. info.header .. ">", text, 1, true)
      assert.matches("typedef float _value;", text, 1, true)
      assert.matches("(_value)((float)_in_x[i])", text, 1, true)
      assert.matches("_out_y[i] = static_cast<" .. info.c_type .. ">(", text, 1, true)
      compile(text)
    end
    -- float16 into float32, bfloat16's max in place, and select of bfloat16
    compile(ss.generate(spec_for("exclusive", "__half", "float", "a + b", "0",
      { in_compute = "float", headers = { "cuda_fp16.h" } })))
    ptx(ss.generate(spec_for("inclusive", "__nv_bfloat16", "__nv_bfloat16", "(b > a || b != b) ? b : a",
      "(-__int_as_float(0x7f800000))", { in_compute = "float", value_c = "float", headers = { "cuda_bf16.h" } })))
    compile(ss.generate{ name = "pick16", mode = "select", in_c = "__nv_bfloat16", in_compute = "float",
                         headers = { "cuda_bf16.h" }, value_c = "unsigned long long", count_c = "int",
                         combine = "a + b", identity = "0ull", predicate = "x > 0.5f", block = 128, items = 23 })
  end)

  it("compiles a chained (deterministic) scan, a widening scan and select", function()
    compile(ss.generate(spec_for("inclusive", "float", "float", "a + b", "0", { deterministic = true })))
    -- status and value in one word, windowed and chained: whole-word loads and stores, no fences
    local packed = ss.generate(spec_for("inclusive", "float", "float", "a + b", "0", { value_bytes = 4 }))
    local packed_ptx = ptx(packed)
    assert.matches("ld%.relaxed%.gpu%.u64", packed_ptx)
    assert.matches("st%.relaxed%.gpu%.u64", packed_ptx)
    assert.is_nil(packed_ptx:find("st.release", 1, true))
    assert.is_nil(packed_ptx:find("ld.acquire", 1, true))
    compile(packed)
    compile(ss.generate(spec_for("exclusive", "int", "int", "a + b", "0", { value_bytes = 4, deterministic = true })))
    ptx(ss.generate(spec_for("exclusive", "unsigned char", "long long", "a + b", "0")))
    compile(ss.generate{ name = "pick", mode = "select", in_c = "double", value_c = "unsigned long long",
                         count_c = "long long", combine = "a + b", identity = "0ull",
                         predicate = "x > 0.5 && i % 3 != 0", block = 128, items = 23 })
  end)

  it("pauses the look-back as CUB's sm_90 tuning does from 500 tiles up; a chained scan does not", function()
    assert.are.same({ 1140, 688 }, { ss.look_back_pauses(4) })
    assert.are.same({ 1215, 576 }, { ss.look_back_pauses(8) })
    local function pauses(extra)
      local text = ss.generate(spec_for("inclusive", "float", "float", "a + b", "0", extra))
      local found = {}
      for value in text:gmatch("__nanosleep%((%d+)u%)") do found[#found + 1] = tonumber(value) end
      for value in text:gmatch("_paused %? (%d+)u : 8u") do found[#found + 1] = tonumber(value) end
      return found, text
    end
    local packed, packed_text = pauses{ value_bytes = 4 }
    assert.are.same({ 1140, 688 }, packed)
    assert.matches("gridDim.x >= 500u", packed_text, 1, true)
    assert.matches("setp%.gt%.u32%s+%%p%d+, %%r%d+, 499;", ptx(packed_text)) -- the grid's test survives
    assert.are.same({ 1215, 576 }, (pauses{ value_bytes = 8 }))
    local chained, chained_text = pauses{ value_bytes = 4, deterministic = true }
    assert.are.same({}, chained)
    assert.is_nil(chained_text:find("_paused", 1, true))
  end)

  it("lays the temporaries out as the kernel reads them", function()
    assert.are.same({ 32, 32 + 16, 5 }, { ss.temp_layout(1) })
    assert.are.same({ 16 + 4 * 1000, 16 + 4 * 1000 + 16 * 1000, 1004 }, { ss.temp_layout(1000) })
    assert.are.same({ 48, 48 + 16 * 5, 9 }, { ss.temp_layout(5) }) -- 16 + 20 rounded up to 48
    -- packed: a word per tile right after the counter, all of it cleared
    assert.are.same({ 16, 16 + 8 * 1000, 4 + 2 * 1000 }, { ss.temp_layout(1000, true) })
    assert.is_true(ss.packed{ mode = "inclusive", value_bytes = 4 })
    assert.is_false(ss.packed{ mode = "inclusive", value_bytes = 8 })
    assert.is_false(ss.packed{ mode = "select", value_bytes = 4 })
  end)
end)

-- ---- pipelines that end in reductions ---------------------------------------------------

local SAMPLE_IN = "float32 a, float32 b, float32 c"

describe("elementwise pipelines ending in reductions", function()
  it("fuse sum(((a + b) * c - a)^2) into one kernel that reads a, b and c once and writes only s", function()
    local pipe = gpurun.elementwise_pipeline(SAMPLE_IN,
      { "float32 r1 = a + b", "float32 r2 = r1 * c", "float32 r3 = r2 - a", "sum float32 s = r3 * r3" }, "s", "ss")
    assert.is_true(pipe.fused)
    assert.are.equal("ss: writes s; r1, r2, r3 in registers", pipe:describe())
    local kernel = pipe.kernels[1]
    assert.are.equal("reduction kernel", kernel.kind)
    assert.are.same({ "a", "b", "c", "s" }, { kernel.params[1].name, kernel.params[2].name,
                                              kernel.params[3].name, kernel.params[4].name })
    assert.is_true(kernel.params[4].result)
    local code = ptx(pipe.source)
    assert.are.equal(15, count(code, "ld%.global%.nc%.v4%.f32")) -- 3 inputs, 4 + 1 vectors
    assert.are.equal(0, count(code, "st%.global%.v4%.f32"))      -- no intermediate written
  end)

  it("reduce several values in one pass, writing a wanted intermediate on the way with fuse = \"always\"", function()
    local pipe = gpurun.elementwise_pipeline(SAMPLE_IN,
      { "float32 r3 = (a + b) * c - a", "sum float64 s = r3", "max float32 m = fabsf(r3)", "argmax int64 w = r3",
        "mean float32 avg = r3", "norm float64 l2 = r3", "any uint8 neg = r3 < 0", "min float32 lo = r3",
        "prod float64 p = 1.0 + r3 * 1e-9", "all int32 pos = r3 >= 0" },
      "r3, s, m, w, avg, l2, neg, lo, p, pos", "many", { fuse = "always", accumulate = "float64" })
    assert.are.equal(1, #pipe.kernels)
    local code = ptx(pipe.source)
    assert.are.equal(5, count(code, "st%.global%.v4%.f32")) -- r3, the one wanted intermediate
  end)

  it("cut after a wanted intermediate that a reduction reads, by default", function()
    local pipe = gpurun.elementwise_pipeline(SAMPLE_IN, { "float32 r3 = (a + b) * c - a", "sum float32 s = r3" },
                                             "r3, s", "cut")
    assert.are.equal("cut_r3: writes r3\ncut_s: writes s", pipe:describe())
    assert.are.equal("elementwise kernel", pipe.kernels[1].kind)
    assert.are.equal("reduction kernel", pipe.kernels[2].kind)
    compile(pipe.source)
  end)

  it("check the argument count, allowing a shape table", function()
    local pipe = gpurun.elementwise_pipeline(SAMPLE_IN, { "float32 r3 = a + b + c", "sum float32 s = r3" }, "s", "p")
    assert.matches("takes 4 arguments after the stream or builder %(3 inputs, then the outputs s, then a shape table if any%), got 6",
                   error_of(pipe.launch, pipe, nil, 1, 2, 3, 4, 5, 6))
    local variant = pipe.kernels[1]:variant(fake_buffer("float32", 12), fake_buffer("float32", 12),
      fake_buffer("float32", 12), fake_buffer("float32", 3), { rows = 3, cols = 4, axis = 2 })
    assert.are.equal("p_segments_warp", variant.kernel)
  end)

  for _, case in ipairs{
    { { "float32 r = a", "sum float32 s = r", "float32 t = r" }, "s, t", "reduction stage 's' must come after the elementwise stages, but 't' follows it" },
    { { "sum float32 s = a", "float32 t = s" }, "t", "stage 't' reads 's', a reduction: it has one value per call, not one per element" },
    { { "argmax float32 w = a" }, "w", "stage 'w': argmax writes a position, so its dtype must be an integer one, got float32" },
    { { "mean int32 m = a" }, "m", "stage 'm': mean needs a float dtype, got int32" },
    { { "sum float32 s == a" }, "s", "is not \"<op> <dtype> <name> = <expression>\"" },
    { { "sum float32 s = a" }, "", "outputs names no stage" },
    { { "float32 r = a", "sum float32 s = r" }, "r", "stage 's' feeds no output" },
  } do
    it("refuse " .. case[3], function()
      local message = error_of(gpurun.elementwise_pipeline, SAMPLE_IN, case[1], case[2], "p")
      assert.matches(case[3]:gsub("[%(%)%.%-%*%+%?%[%]%^%$]", "%%%0"), message)
      assert.matches("^[^\n]*" .. SPEC_FILE .. ":%d+: ", message)
    end)
  end

  it("refuse an accumulate option that is not a dtype", function()
    assert.matches("options%.accumulate must be a dtype",
      error_of(gpurun.elementwise_pipeline, SAMPLE_IN, { "sum float32 s = a" }, "s", "p", { accumulate = "half" }))
  end)

  it("leave pipelines without reductions as they were", function()
    local pipe = ew.pipeline(SAMPLE_IN, { "float32 r1 = a + b", "float32 r3 = r1 * c - a" }, "r3", "plain")
    assert.are.equal("elementwise kernel", pipe.kernels[1].kind)
    assert.is_nil(pipe.reduces)
  end)
end)

-- ---- on the GPU ---------------------------------------------------------------------

-- Host references: x as a Lua table.
local function host_sum(t, first, last)
  local sum = 0.0
  for i = first or 1, last or #t do
    sum = sum + t[i]
  end
  return sum
end

local function close_enough(got, want, rtol, atol)
  return math.abs(got - want) <= (atol or 0) + (rtol or 0) * math.abs(want)
end

-- A value as a dtype stores it (gpurun's one rounding rule), and the
-- relative step of a 16-bit float: 2^(1 - digits).
local function as(dtype, value)
  return gpurun[gpurun.dtypes[dtype].scalar](value).value
end
local function ulp(dtype)
  return 2.0 ^ (1 - gpurun.dtypes[dtype].digits)
end

describe("reductions on the GPU", function()
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

  local function random(n, dtype, seed)
    local rng <close> = gpurun.default_rng(seed or n)
    if dtype == "float32" or dtype == "float64" then
      return rng:random(n, dtype)
    end
    local low, high = 0, 100
    if dtype == "int8" then low, high = -100, 100 end
    if dtype == "int32" or dtype == "int64" then low, high = -1000, 1000 end
    return rng:integers(n, low, high, dtype)
  end

  for _, n in ipairs(SIZES) do
    it(("sums %d float32 elements against the host, the same bits every run #gpu"):format(n), function()
      local x <close> = random(n, "float32")
      local s <close> = gpurun.zeros(1, "float32")
      gpurun.sum(stream, x, s)
      stream:sync()
      local want = host_sum(x:to_table())
      assert.is_true(close_enough(s:get(1), want, 1e-5, 1e-5), ("got %.9g, want %.9g"):format(s:get(1), want))
      local first = s:to_bytes()
      for _ = 1, 3 do
        s:fill(-1.0)
        gpurun.sum(stream, x, s)
        assert.are.equal(first, s:to_bytes())
      end
      -- in float64: closer
      local d <close> = gpurun.sum(stream, x, nil, { accumulate = "float64" })
      assert.are.equal("float64", d.dtype)
      assert.is_true(close_enough(d:get(1), want, 1e-12, 1e-9))
    end)
  end

  for _, dtype in ipairs(DTYPES) do
    it(("reduces %s with every named operation, at sizes off the vector width #gpu"):format(dtype), function()
      for _, n in ipairs{ 1, 17, 1023, 4099, 65537 } do
        local x <close> = random(n, dtype, n + 7)
        local t = x:to_table()
        local lo, hi, lo_at, hi_at, sum, any, all = math.huge, -math.huge, 0, 0, 0, 0, 1
        for i, v in ipairs(t) do
          if v < lo then lo, lo_at = v, i end
          if v > hi then hi, hi_at = v, i end
          sum = sum + v
          if v ~= 0 then any = 1 else all = 0 end
        end
        local what = ("%s n=%d"):format(dtype, n)
        assert.are.equal(lo, gpurun.min(stream, x):get(1), what)
        assert.are.equal(hi, gpurun.max(stream, x):get(1), what)
        assert.are.equal(lo_at, gpurun.argmin(stream, x):get(1), what)
        assert.are.equal(hi_at, gpurun.argmax(stream, x):get(1), what)
        assert.are.equal(any, gpurun.any(stream, x):get(1), what)
        assert.are.equal(all, gpurun.all(stream, x):get(1), what)
        local s = gpurun.sum(stream, x):get(1)
        if dtype:match("^float") then
          assert.is_true(close_enough(s, sum, 1e-5, 1e-4), what)
        else
          assert.are.equal(sum, s, what) -- int64 / uint64 results: exact
        end
        assert.is_true(close_enough(gpurun.mean(stream, x):get(1), sum / n, 1e-5, 1e-5), what)
      end
    end)
  end

  -- float16 and bfloat16: accumulated in float, so only the stored result
  -- is rounded; comparisons exact where no arithmetic is involved.
  for _, dtype in ipairs(HALVES) do
    it(("reduces %s in float with every named operation, rounding only the result #gpu"):format(dtype), function()
      for _, n in ipairs{ 1, 17, 1023, 4099, 65537 } do
        local rng <close> = gpurun.default_rng(n + 3)
        local x <close> = rng:random(n, dtype)
        local y <close> = rng:random(n, dtype)
        local t, u = x:to_table(), y:to_table()
        local lo, hi, lo_at, hi_at, sum, squares, diff = math.huge, -math.huge, 0, 0, 0, 0, 0
        for i, v in ipairs(t) do
          if v < lo then lo, lo_at = v, i end
          if v > hi then hi, hi_at = v, i end
          sum, squares, diff = sum + v, squares + v * v, math.max(diff, math.abs(v - u[i]))
        end
        local what = ("%s n=%d"):format(dtype, n)
        assert.are.same({ lo, hi, lo_at, hi_at }, { gpurun.min(stream, x):get(1), gpurun.max(stream, x):get(1),
                                                   gpurun.argmin(stream, x):get(1), gpurun.argmax(stream, x):get(1) }, what)
        local s <close> = gpurun.sum(stream, x)
        assert.are.equal(dtype, s.dtype)
        local got = s:get(1)
        assert.are.equal(as(dtype, got), got, what) -- a value of the dtype
        assert.is_true(close_enough(got, sum, ulp(dtype) + 1e-5, 1e-6), ("%s: sum %.9g, want %.9g"):format(what, got, sum))
        local wide = gpurun.sum(stream, x, nil, { accumulate = "float32" }):get(1)
        assert.is_true(close_enough(wide, sum, 1e-5, 1e-6), ("%s: float32 sum %.9g, want %.9g"):format(what, wide, sum))
        assert.is_true(close_enough(gpurun.mean(stream, x):get(1), sum / n, ulp(dtype) + 1e-5), what)
        assert.is_true(close_enough(gpurun.norm(stream, x):get(1), math.sqrt(squares), ulp(dtype) + 1e-5), what)
        local d <close> = gpurun.max_abs_diff(stream, x, y)
        assert.are.equal("float32", d.dtype)
        assert.is_true(close_enough(d:get(1), diff, 2 ^ -22), what)
        assert.are.equal(lo ~= 0 and 1 or 0, gpurun.all(stream, x):get(1), what)
        if n >= 1023 then -- rows and columns too: 3 rows of n // 3
          local rows, cols = 3, n // 3
          local view = x:view(1, rows * cols)
          local per_row <close> = gpurun.zeros(rows, "float32")
          local per_col <close> = gpurun.zeros(cols, dtype)
          gpurun.sum(stream, view, per_row, { rows = rows, cols = cols, axis = 2, accumulate = "float32" })
          gpurun.max(stream, view, per_col, { rows = rows, cols = cols, axis = 1 })
          local row_sums, col_max = per_row:to_table(), per_col:to_table()
          for r = 1, rows do
            assert.is_true(close_enough(row_sums[r], host_sum(t, (r - 1) * cols + 1, r * cols), 1e-5, 1e-6), what)
          end
          for c = 1, cols do
            local best = -math.huge
            for r = 1, rows do best = math.max(best, t[(r - 1) * cols + c]) end
            assert.are.equal(best, col_max[c], what)
          end
        end
      end
    end)
  end

  it("finds the first of equal extremes, propagates NaN, and gives identities for empty inputs #gpu", function()
    local x <close> = gpurun.array({ 3, 7, 1, 7, 1, 5 }, "float32")
    assert.are.equal(2, gpurun.argmax(stream, x):get(1))
    assert.are.equal(3, gpurun.argmin(stream, x):get(1))
    local nan <close> = gpurun.array({ 1, 0 / 0, 9, 0 / 0 }, "float64")
    local m = gpurun.max(stream, nan):get(1)
    assert.is_true(m ~= m)
    assert.are.equal(2, gpurun.argmax(stream, nan):get(1))
    assert.are.equal(2, gpurun.argmin(stream, nan):get(1))
    -- gpurun's buffers are never empty; an empty segment is, and gives the identity
    local four <close> = gpurun.array({ 1, 2, 3, 4 }, "float32")
    local offsets <close> = gpurun.array({ 0, 0, 4 }, "int32")
    local shape = { offsets = offsets }
    local function first(op, dtype)
      local out <close> = gpurun.zeros(2, dtype or "float32")
      gpurun[op](stream, four, out, shape)
      return out:get(1), out:get(2)
    end
    assert.are.same({ 0, 10 }, { first("sum") })
    assert.are.same({ 1, 24 }, { first("prod") })
    assert.are.same({ -math.huge, 4 }, { first("max") })
    assert.are.same({ math.huge, 1 }, { first("min") })
    assert.are.same({ 0, 4 }, { first("argmax", "int64") })
    assert.are.same({ 0, 1 }, { first("argmin", "int32") })
    assert.are.same({ 0, 1 }, { first("any", "uint8") })
    assert.are.same({ 1, 1 }, { first("all", "uint8") })
    local mean, all_mean = first("mean")
    assert.is_true(mean ~= mean)
    assert.are.equal(2.5, all_mean)
    local ints <close> = gpurun.array({ 5, 6 }, "int32")
    local int_max <close> = gpurun.zeros(2, "int32")
    gpurun.max(stream, ints, int_max, shape)
    assert.are.equal(-2147483648, int_max:get(1))
  end)

  it("computes norm, prod and max_abs_diff against a buffer and a number #gpu", function()
    local n = 4099
    local x <close> = random(n, "float32")
    local y <close> = random(n, "float32", 99)
    local xt, yt = x:to_table(), y:to_table()
    local squares, worst = 0, 0
    for i = 1, n do
      squares = squares + xt[i] * xt[i]
      worst = math.max(worst, math.abs(xt[i] - yt[i]))
    end
    assert.is_true(close_enough(gpurun.norm(stream, x):get(1), math.sqrt(squares), 1e-5))
    -- in float64 the differences of float32 values are exact
    assert.are.equal(worst, gpurun.max_abs_diff(stream, x, y, nil, { accumulate = "float64" }):get(1))
    assert.is_true(close_enough(gpurun.max_abs_diff(stream, x, y):get(1), worst, 1e-7))
    local ones <close> = gpurun.full(n, 1.0, "float32")
    assert.are.equal(0, gpurun.max_abs_diff(stream, ones, 1):get(1))
    assert.are.equal(1.5, gpurun.max_abs_diff(stream, ones, gpurun.f64(2.5)):get(1))
    local small <close> = gpurun.array({ 1, 2, 3, 4 }, "int32")
    assert.are.equal(24, gpurun.prod(stream, small):get(1))
    local inf <close> = gpurun.array({ math.huge, 1 }, "float32")
    assert.are.equal(0, gpurun.max_abs_diff(stream, inf, inf):get(1))
  end)

  it("reduces a view that is not 16-byte aligned through the scalar kernel #gpu", function()
    local base <close> = random(4099, "float32")
    local view = base:view(2, 4097)
    local kernel = red.reduction("float32 x", "float64 s", "x", "sum", nil, nil, "viewed")
    local s <close> = gpurun.zeros(1, "float64")
    assert.are.equal("viewed_scalar", kernel:variant(view, s).kernel)
    kernel(stream, view, s)
    stream:sync()
    assert.is_true(close_enough(s:get(1), host_sum(base:to_table(), 2, 4098), 1e-6, 1e-6))
  end)

  for _, shape in ipairs{ { 1, 1 }, { 3, 5 }, { 7, 1 }, { 1, 4097 }, { 100, 33 }, { 33, 100 }, { 4, 5000 },
                          { 5000, 3 }, { 2048, 2048 }, { 17, 16 } } do
    it(("reduces each row and each column of %d x %d against the host #gpu"):format(shape[1], shape[2]), function()
      local rows, cols = shape[1], shape[2]
      local x <close> = random(rows * cols, "int32", rows + cols)
      local t = x:to_table()
      local per_row <close> = gpurun.zeros(rows, "int64")
      local per_col <close> = gpurun.zeros(cols, "int64")
      local row_max <close> = gpurun.zeros(rows, "int64")
      gpurun.sum(stream, x, per_row, { rows = rows, cols = cols, axis = 2 })
      gpurun.sum(stream, x, per_col, { rows = rows, cols = cols, axis = 1 })
      gpurun.argmax(stream, x, row_max, { rows = rows, cols = cols, axis = 2 })
      stream:sync()
      local got_rows, got_cols, got_at = per_row:to_table(), per_col:to_table(), row_max:to_table()
      for r = 1, rows do
        local sum, best, at = 0, -math.huge, 0
        for c = 1, cols do
          local v = t[(r - 1) * cols + c]
          sum = sum + v
          if v > best then best, at = v, c end
        end
        assert.are.equal(sum, got_rows[r], "row " .. r)
        assert.are.equal(at, got_at[r], "argmax of row " .. r)
      end
      for c = 1, cols do
        local sum = 0
        for r = 1, rows do sum = sum + t[(r - 1) * cols + c] end
        assert.are.equal(sum, got_cols[c], "column " .. c)
      end
    end)
  end

  for _, dtype in ipairs{ "int32", "uint32", "int64", "uint64" } do
    it(("reduces segments between %s offsets, empty ones and out-of-range ones included #gpu"):format(dtype), function()
      local n = 10000
      local x <close> = random(n, "float64", 5)
      local t = x:to_table()
      local bounds = { 0, 0, 1, 33, 33, 1100, 5000, 9999, 10000 }
      local offsets <close> = gpurun.array(bounds, dtype)
      local sums <close> = gpurun.zeros(#bounds - 1, "float64")
      local maxes <close> = gpurun.zeros(#bounds - 1, "float64")
      gpurun.sum(stream, x, sums, { offsets = offsets })
      gpurun.max(stream, x, maxes, { offsets = offsets })
      stream:sync()
      local got, got_max = sums:to_table(), maxes:to_table()
      for s = 1, #bounds - 1 do
        local want, best = 0, -math.huge
        for i = bounds[s] + 1, bounds[s + 1] do
          want = want + t[i]
          best = math.max(best, t[i])
        end
        assert.is_true(close_enough(got[s], want, 1e-12, 1e-9), "segment " .. s)
        assert.are.equal(best, got_max[s], "segment " .. s)
      end
      -- offsets past n are clamped: nothing outside x is read
      local wide = (dtype == "int32" and "int64") or (dtype == "uint32" and "uint64") or dtype
      local wild <close> = gpurun.array({ 5, 1 << 40, 3 }, wide)
      local two <close> = gpurun.zeros(2, "float64")
      gpurun.sum(stream, x, two, { offsets = wild })
      stream:sync()
      assert.is_true(close_enough(two:get(1), host_sum(t, 6, n), 1e-12, 1e-9))
      assert.are.equal(0, two:get(2))
    end)
  end

  it("runs a reduction of its own: a weighted L2 norm with a scalar, in float64, over rows too #gpu", function()
    local l2 = gpurun.reduction("T x, float32 w", "T y", "x * w", "a + b", "y = sqrt(a)", 0, "weighted",
                                { reduce_type = "float64" })
    -- a CuPy-style reduce with a * a folded into map
    local sq = gpurun.reduction("T x, float32 w", "T y", "(double)x * x * w", "a + b", "y = sqrt(a)", 0, "wl2",
                                { reduce_type = "float64" })
    local x <close> = random(3000, "float32")
    local t = x:to_table()
    local y <close> = gpurun.zeros(1, "float32")
    sq(stream, x, gpurun.f32(2), y)
    local rows <close> = gpurun.zeros(3, "float32")
    sq(stream, x, 2, rows, { rows = 3, cols = 1000, axis = 2 })
    l2(stream, x, 1.0, y) -- a sum through a post-map
    stream:sync()
    local all, parts = 0, { 0, 0, 0 }
    for i, v in ipairs(t) do
      all = all + v
      parts[(i - 1) // 1000 + 1] = parts[(i - 1) // 1000 + 1] + 2 * v * v
    end
    assert.is_true(close_enough(y:get(1), math.sqrt(all), 1e-6))
    for r = 1, 3 do
      assert.is_true(close_enough(rows:get(r), math.sqrt(parts[r]), 1e-6))
    end
  end)

  it("sums more than 2^31 elements with 64-bit indexing #gpu", function()
    local n = (1 << 31) + 33
    local x <close> = gpurun.full(n, 1, "uint8")
    x:set(n, 7)
    assert.are.equal(n + 6, gpurun.sum(stream, x):get(1))
    assert.are.equal(n, gpurun.argmax(stream, x):get(1))
  end)

  it("captures into a graph that replays on new data, with no host round trip #gpu", function()
    local n = 4096
    local x <close> = gpurun.full(n, 0.5, "float32")
    local s <close> = gpurun.zeros(1, "float32")
    local m <close> = gpurun.zeros(1, "int64")
    gpurun.sum(stream, x, s) -- compiles and makes the temporaries outside the capture
    gpurun.argmax(stream, x, m)
    local builder <close> = stream:create_graph_builder()
    builder:begin_building()
    gpurun.sum(builder, x, s)
    gpurun.argmax(builder, x, m)
    builder:end_building()
    local graph <close> = builder:complete()
    graph:launch(stream)
    stream:sync()
    assert.are.equal(2048, s:get(1))
    x:fill(2.0)
    x:set(77, 9.0)
    graph:launch(stream)
    stream:sync()
    assert.are.equal(2 * (n - 1) + 9, s:get(1))
    assert.are.equal(77, m:get(1))
  end)

  it("replays a multi-block reduction in a graph many times with the same result #gpu", function()
    local n = (1 << 20) + 7
    local x <close> = random(n, "float32")
    local s <close> = gpurun.zeros(1, "float32")
    gpurun.sum(stream, x, s)
    stream:sync()
    local first = s:to_bytes()
    local builder <close> = stream:create_graph_builder()
    builder:begin_building()
    gpurun.sum(builder, x, s)
    builder:end_building()
    local graph <close> = builder:complete()
    for _ = 1, 20 do
      s:fill(0.0)
      graph:launch(stream)
      assert.are.equal(first, s:to_bytes()) -- the ticket is reset by the last block each time
    end
  end)

  it("ends the capture when a call on a builder is refused #gpu", function()
    local x <close> = gpurun.full(16, 1.0, "float32")
    local bad <close> = gpurun.zeros(3, "float32")
    local builder <close> = stream:create_graph_builder()
    builder:begin_building()
    local ok, message = pcall(gpurun.sum, builder, x, bad)
    assert.is_false(ok)
    assert.matches("has 3 elements, but this reduction gives 1", message)
    assert.are.equal("abandoned", builder.state)
    local fresh = gpurun.reduction("float32 x", "float32 s", "x", "max", nil, nil, "never_called")
    local builder2 <close> = stream:create_graph_builder()
    builder2:begin_building()
    assert.is_false(pcall(fresh, builder2, x, bad))
    assert.are.equal("abandoned", builder2.state)
    -- the stream takes plain work again
    gpurun.sum(stream, x, bad:view(1, 1))
    stream:sync()
    assert.are.equal(16, bad:get(1))
  end)

  it("binds a reduction into launch plans #gpu", function()
    local x <close> = gpurun.full(1000, 3.0, "float64")
    local s <close> = gpurun.zeros(1, "float64")
    local per_col <close> = gpurun.zeros(10, "float64")
    local kernel = gpurun.reduction("float64 x", "float64 s", "x", "sum", nil, nil, "bound")
    local plans <close> = kernel:bind(x, s)
    plans:launch(stream)
    local col_plans <close> = kernel:bind(x, per_col, { rows = 100, cols = 10, axis = 1 })
    col_plans:launch(stream)
    stream:sync()
    assert.are.equal(3000, s:get(1))
    assert.is_true(gpurun.allclose(per_col, 300, 0, 0))
  end)

  it("computes the fused map-reduce against the host, and in a graph #gpu", function()
    local n = (1 << 20) + 3
    local a, b, c = random(n, "float32", 1), random(n, "float32", 2), random(n, "float32", 3)
    local s <close> = gpurun.zeros(1, "float64")
    local m <close> = gpurun.zeros(1, "float32")
    local r3 <close> = gpurun.zeros(n, "float32")
    local pipe = gpurun.elementwise_pipeline(SAMPLE_IN,
      { "float32 r3 = (a + b) * c - a", "sum float64 s = (double)r3 * r3", "max float32 m = fabsf(r3)" },
      "r3, s, m", "fused_check", { fuse = "always" })
    pipe(stream, a, b, c, r3, s, m)
    stream:sync()
    local at, bt, ct = a:to_table(), b:to_table(), c:to_table()
    local want, worst = 0, 0
    local r3t = r3:to_table()
    for i = 1, n do
      local v = (at[i] + bt[i]) * ct[i] - at[i]
      want = want + r3t[i] * r3t[i]
      worst = math.max(worst, math.abs(r3t[i]))
      if math.abs(r3t[i] - v) > 1e-5 + 1e-5 * math.abs(v) then error("r3 element " .. i) end
    end
    assert.is_true(close_enough(s:get(1), want, 1e-9, 1e-9))
    assert.are.equal(worst, m:get(1))
    s:fill(0.0)
    local builder <close> = stream:create_graph_builder()
    builder:begin_building()
    pipe(builder, a, b, c, r3, s, m)
    builder:end_building()
    local graph <close> = builder:complete()
    assert.are.equal(1, graph.node_count)
    graph:launch(stream)
    stream:sync()
    assert.is_true(close_enough(s:get(1), want, 1e-9, 1e-9))
    graph:close() -- the graph and its builder hold a, b and c
    builder:close()
    for _, buffer in ipairs{ a, b, c } do buffer:close() end
  end)

  it("reduces a float16 pipeline fused in float, and unfused through a rounded temporary, in a graph too #gpu", function()
    local n = 65537
    local rng <close> = gpurun.default_rng(5)
    local a <close> = rng:random(n, "float16")
    local b <close> = rng:random(n, "float16")
    local at, bt = a:to_table(), b:to_table()
    for _, fuse in ipairs{ "auto", "never" } do
      local pipe = gpurun.elementwise_pipeline("float16 a, float16 b",
        { "float16 r = a * b", "sum float32 s = r" }, "s", "half_dot_" .. fuse, { fuse = fuse })
      local s <close> = gpurun.zeros(1, "float32")
      pipe(stream, a, b, s)
      stream:sync()
      local want = 0
      for i = 1, n do
        -- fused, r stays in float; unfused, it is stored as float16 first
        want = want + (fuse == "auto" and at[i] * bt[i] or as("float16", at[i] * bt[i]))
      end
      assert.is_true(close_enough(s:get(1), want, 1e-5), ("%s: %.9g, want %.9g"):format(fuse, s:get(1), want))
      s:fill(0.0)
      local builder <close> = stream:create_graph_builder()
      builder:begin_building()
      pipe(builder, a, b, s)
      builder:end_building()
      local graph <close> = builder:complete()
      graph:launch(stream)
      graph:launch(stream)
      stream:sync()
      assert.is_true(close_enough(s:get(1), want, 1e-5), fuse .. " in a graph")
    end
  end)
end)

describe("scans on the GPU", function()
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

  local TILE = 128 * 23
  local SCAN_SIZES = { 1, 31, 32, 33, 1023, 1024, 1025, TILE - 1, TILE, TILE + 1, 3 * TILE + 5, 65537,
                       (1 << 20) + 7 }

  local function check_scan(got, t, mode, combine, identity, exact, what)
    local run = identity
    for i = 1, #t do
      local before = run
      run = combine(run, t[i])
      local want = mode == "inclusive" and run or before
      if exact then
        if got[i] ~= want then
          error(("%s: element %d is %s, want %s"):format(what, i, tostring(got[i]), tostring(want)), 0)
        end
      elseif not close_enough(got[i], want, 1e-4, 1e-3) then
        error(("%s: element %d is %s, want %s"):format(what, i, tostring(got[i]), tostring(want)), 0)
      end
    end
  end

  local function add(a, b) return a + b end

  for _, n in ipairs(SCAN_SIZES) do
    it(("scans %d int32 and float32 elements, inclusive and exclusive #gpu"):format(n), function()
      local rng <close> = gpurun.default_rng(n)
      local xi <close> = rng:integers(n, -50, 50, "int32")
      local xf <close> = rng:random(n, "float32")
      local yi <close> = gpurun.zeros(n, "int32")
      local yf <close> = gpurun.zeros(n, "float32")
      local ti, tf = xi:to_table(), xf:to_table()
      for _, mode in ipairs{ "inclusive", "exclusive" } do
        local scan = mode == "inclusive" and gpurun.inclusive_scan or gpurun.exclusive_scan
        assert.are.equal(yi, scan(stream, xi, yi))
        scan(stream, xf, yf)
        stream:sync()
        check_scan(yi:to_table(), ti, mode, add, 0, true, mode .. " int32")
        check_scan(yf:to_table(), tf, mode, add, 0, false, mode .. " float32")
      end
    end)
  end

  for _, dtype in ipairs(DTYPES) do
    it(("scans %s with sum, min and max, and widens uint8 flags into int64 offsets #gpu"):format(dtype), function()
      local n = 3 * TILE + 17
      local rng <close> = gpurun.default_rng(7)
      local x <close> = dtype:match("^float") and rng:random(n, dtype) or rng:integers(n, 0, 3, dtype)
      local y <close> = gpurun.zeros(n, dtype)
      local t = x:to_table()
      local exact = not dtype:match("^float")
      gpurun.inclusive_scan(stream, x, y, "max")
      stream:sync()
      check_scan(y:to_table(), t, "inclusive", math.max, -math.huge, true, dtype .. " max")
      gpurun.exclusive_scan(stream, x, y, "min")
      stream:sync()
      local lowest = { float32 = math.huge, float64 = math.huge, int8 = 127, uint8 = 255, int16 = 32767,
                       uint16 = 65535, int32 = 2147483647, uint32 = 4294967295, int64 = math.maxinteger,
                       uint64 = 2.0 ^ 64 }
      check_scan(y:to_table(), t, "exclusive", math.min, lowest[dtype], true, dtype .. " min")
      if exact and (dtype == "int8" or dtype == "uint8") then
        local wide <close> = gpurun.zeros(n, "int64")
        gpurun.exclusive_scan(stream, x, wide)
        stream:sync()
        check_scan(wide:to_table(), t, "exclusive", add, 0, true, dtype .. " -> int64")
      else
        gpurun.inclusive_scan(stream, x, y)
        stream:sync()
        check_scan(y:to_table(), t, "inclusive", add, 0, exact, dtype .. " sum")
      end
    end)
  end

  for _, dtype in ipairs(HALVES) do
    it(("scans %s in float, rounding each stored prefix once, and selects it #gpu"):format(dtype), function()
      local n = 3 * TILE + 17
      local rng <close> = gpurun.default_rng(11)
      local x <close> = rng:random(n, dtype)
      local y <close> = gpurun.zeros(n, dtype)
      local wide <close> = gpurun.zeros(n, "float32")
      local t = x:to_table()
      gpurun.inclusive_scan(stream, x, y)
      gpurun.exclusive_scan(stream, x, wide)
      stream:sync()
      local got, got_wide, run = y:to_table(), wide:to_table(), 0
      for i = 1, n do
        local before = run
        run = run + t[i]
        assert.are.equal(as(dtype, got[i]), got[i])
        if not close_enough(got[i], run, ulp(dtype) + 1e-4, 1e-3) then
          error(("%s: element %d is %.9g, want %.9g"):format(dtype, i, got[i], run), 0)
        end
        if not close_enough(got_wide[i], before, 1e-4, 1e-3) then
          error(("%s -> float32: element %d is %.9g, want %.9g"):format(dtype, i, got_wide[i], before), 0)
        end
      end
      gpurun.inclusive_scan(stream, x, y, "max")
      stream:sync()
      check_scan(y:to_table(), t, "inclusive", math.max, -math.huge, true, dtype .. " max")
      local out <close> = gpurun.zeros(n, dtype)
      local selected_count <close> = gpurun.full(1, -1, "int64")
      gpurun.select(stream, x, "x > 0.5f", out, selected_count)
      stream:sync()
      local want = {}
      for _, v in ipairs(t) do if v > 0.5 then want[#want + 1] = v end end
      assert.are.equal(#want, selected_count:get(1))
      assert.are.same(want, out:to_table(1, #want))
    end)
  end

  it("scans in place, with an expression of its own, and deterministically when asked #gpu", function()
    local n = (1 << 20) + 7
    local rng <close> = gpurun.default_rng(3)
    local x <close> = rng:integers(n, 0, 9, "int64")
    local t = x:to_table()
    gpurun.inclusive_scan(stream, x, x) -- in place
    stream:sync()
    check_scan(x:to_table(), t, "inclusive", add, 0, true, "in place")
    local y <close> = gpurun.zeros(n, "int64")
    gpurun.inclusive_scan(stream, x, y, "a > b ? a : b", { identity = math.mininteger })
    local f <close> = rng:random(n, "float32")
    local g <close> = gpurun.zeros(n, "float32")
    gpurun.inclusive_scan(stream, f, g, "sum", { deterministic = true })
    stream:sync()
    local first = g:to_bytes()
    for _ = 1, 3 do
      gpurun.inclusive_scan(stream, f, g, "sum", { deterministic = true })
      assert.are.equal(first, g:to_bytes())
    end
    check_scan(g:to_table(), f:to_table(), "inclusive", add, 0, false, "deterministic")
  end)

  it("captures a scan into a graph whose replays reset its temporaries #gpu", function()
    local n = 100000
    local x <close> = gpurun.full(n, 1, "int32")
    local y <close> = gpurun.zeros(n, "int32")
    gpurun.inclusive_scan(stream, x, y)
    local builder <close> = stream:create_graph_builder()
    builder:begin_building()
    gpurun.inclusive_scan(builder, x, y)
    builder:end_building()
    local graph <close> = builder:complete()
    assert.are.equal(2, graph.node_count) -- the memset and the kernel
    for round = 1, 5 do
      x:fill(round)
      graph:launch(stream)
      stream:sync()
      assert.are.equal(round * n, y:get(n))
      assert.are.equal(round, y:get(1))
    end
  end)

  it("selects by a predicate, counting into a device buffer, past a short out too #gpu", function()
    for _, n in ipairs{ 1, 33, TILE + 1, (1 << 20) + 7 } do
      local rng <close> = gpurun.default_rng(n)
      local x <close> = rng:random(n, "float32")
      local out <close> = gpurun.zeros(n, "float32")
      local selected_count <close> = gpurun.full(1, -1, "int64")
      gpurun.select(stream, x, "x > 0.5f", out, selected_count)
      stream:sync()
      local t, want = x:to_table(), {}
      for _, v in ipairs(t) do
        if v > 0.5 then want[#want + 1] = v end
      end
      assert.are.equal(#want, selected_count:get(1), "n = " .. n)
      local got, first_wrong = out:to_table(), nil
      for i = 1, #want do
        if want[i] ~= got[i] then first_wrong = first_wrong or i end
      end
      assert.is_nil(first_wrong, ("n = %d: the first element selected wrongly"):format(n))
      if #want > 2 then
        local short <close> = gpurun.full(2, -7, "float32")
        gpurun.select(stream, x, "x > 0.5f", short, selected_count)
        stream:sync()
        assert.are.equal(#want, selected_count:get(1))
        assert.are.same({ want[1], want[2] }, short:to_table())
      end
    end
    local ints <close> = gpurun.array({ 5, 6, 7, 8, 9 }, "int32")
    local out <close> = gpurun.zeros(5, "int32")
    local selected_count <close> = gpurun.zeros(1, "uint32")
    gpurun.select(stream, ints, "i % 2 == 0", out, selected_count)
    stream:sync()
    assert.are.equal(3, selected_count:get(1))
    assert.are.same({ 5, 7, 9 }, { out:get(1), out:get(2), out:get(3) })
  end)
end)

describe("scripts/reduce.lua", function()
  local process = require("spec.support.process")
  local q = process.quote

  it("runs the fused map-reduce and the scan, launched and in a graph, checked, in JSON #gpu", function()
    local result = process.gpurun(q("scripts/reduce.lua") .. " --elements 65537 --iters 5 --json")
    assert.are.equal(0, result.code, result.stderr)
    local report = require("cjson").decode(result.stdout)
    assert.is_true(report.checks_passed)
    assert.are.equal(65537, report.elements)
    for _, key in ipairs{ "fused", "scan", "graph" } do
      assert.is_true(report[key].us_per_iter > 0, key)
    end
    assert.is_true(report.negative > 0)
  end)

  it("prints the text report #gpu", function()
    local result = process.gpurun(q("scripts/reduce.lua") .. " --elements 4096 --iters 3")
    assert.are.equal(0, result.code, result.stderr)
    assert.matches("squares: writes s; r3 in registers", result.stdout)
    assert.matches("fused map%-reduce:", result.stdout)
    assert.matches("\nDone\n$", result.stdout)
  end)

  it("refuses a bad option before touching the GPU", function()
    local result = process.gpurun(q("scripts/reduce.lua") .. " --elements 0")
    assert.are.equal(2, result.code)
    assert.matches("reduce.lua: error: %-%-elements: expected a positive integer, got '0'", result.stderr)
  end)
end)

describe("bench/reduce.lua and bench/reduce_compare.py", function()
  local process = require("spec.support.process")
  local q = process.quote

  it("times every path at two sizes, checked, and reports them in JSON #gpu", function()
    local result = process.gpurun(q("bench/reduce.lua")
      .. " --sizes 4096,65537 --reps 2 --seconds 0.01 --copy-mib 16 --json")
    assert.are.equal(0, result.code, result.stderr)
    local report = require("cjson").decode(result.stdout)
    assert.are.equal(2, #report.sizes)
    for _, figures in ipairs(report.sizes) do
      for _, path in ipairs{ "sum", "sum_f64", "argmax", "fused", "scan", "sum_launch" } do
        assert.is_true(figures[path].us_per_iter > 0, path)
      end
      assert.are.equal("fused_sum_vec", figures.fused_kernel)
    end
    assert.is_true(report.copy.gb_per_s > 0)
    assert.is_true(report.read.gb_per_s > 0)
  end)

  it("prints one table from the sides' figures, a missing module's rows as '-'", function()
    if os.execute("python3 -c '' 2>/dev/null") ~= true then
      pending("no python3")
      return
    end
    local gpurun_file, cub_file = os.tmpname(), os.tmpname()
    local function write(path, text)
      local file = assert(io.open(path, "w"))
      file:write(text)
      file:close()
    end
    local function sizes(extra)
      return ('[{"elements":4096,"sum":{"us_per_iter":2},"argmax":{"us_per_iter":2},"fused":{"us_per_iter":2},'
              .. '"scan":{"us_per_iter":4}%s}]'):format(extra)
    end
    write(gpurun_file, '{"device":"stand-in","sizes":' .. sizes(',"sum_f64":{"us_per_iter":2},'
          .. '"sum_launch":{"us_per_iter":9}') .. ',"copy":{"gb_per_s":4000},"read":{"gb_per_s":4400}}')
    write(cub_file, '{"device":"stand-in","sizes":' .. sizes("") .. "}")
    -- a python without cupy or torch (a folder of stand-ins that fail to import)
    local shadow = os.tmpname()
    os.remove(shadow)
    os.execute("mkdir -p " .. q(shadow))
    write(shadow .. "/cupy.py", "raise ImportError('hidden by the spec')\n")
    write(shadow .. "/torch.py", "raise ImportError('hidden by the spec')\n")
    local result = process.run("PYTHONPATH=" .. q(shadow) .. " python3 bench/reduce_compare.py --sizes 4096 --reps 1"
                               .. " --gpurun " .. q(gpurun_file) .. " --cub " .. q(cub_file))
    os.remove(gpurun_file)
    os.remove(cub_file)
    os.execute("rm -rf " .. q(shadow))
    assert.are.equal(0, result.code, result.stderr)
    assert.matches("gpurun sum, graph%s+2%.00 %(%s*8%)", result.stdout)
    assert.matches("CUB DeviceScan::InclusiveSum, graph%s+4%.00", result.stdout)
    assert.matches("torch%.sum, graph%s+%-", result.stdout)
    assert.matches("at 4096: sum 0%% of read, %+0%.0%% vs CUB", result.stdout)
    assert.matches("cupy is missing", result.stderr)
    assert.matches("torch is missing", result.stderr)
  end)
end)
