-- gpurun.matrix, matmul, axpy, scal, dot and nrm2 over cuBLAS. Every check
-- before cuBLAS runs anywhere, on stand-in buffers and streams; the
-- loader's message where cuBLAS is missing, in a child gpurun; results
-- against host products, graphs, handles and the allocation-free repeat
-- call need a GPU.
local gpurun = require("gpurun")
local process = require("spec.support.process")
local expect = require("spec.support.expect")

local function stand_in(dtype, n, device)
  return setmetatable({}, { __name = "gpurun.Buffer", __len = function() return n end,
    __index = { dtype = dtype, ptr = 0x7f0000000000, device = device or 0 } })
end
local STREAM = setmetatable({}, { __name = "gpurun.Stream", __index = { device = 0 } })

local function error_of(f, ...)
  local ok, message = pcall(f, ...)
  assert.is_false(ok, "expected an error")
  return tostring(message)
end

local function refuses(expected, f, ...)
  local message = error_of(f, ...)
  assert(message:find(expected, 1, true), ("expected %q in %q"):format(expected, message))
end

local function view(dtype, rows, cols, options)
  local ld = options and options.ld or cols
  local batch = options and options.batch or 1
  local stride = options and options.stride or rows * ld
  return gpurun.matrix(stand_in(dtype, (batch - 1) * stride + rows * ld, options and options.device),
                       rows, cols, options and { ld = options.ld, batch = options.batch,
                                                  stride = options.stride })
end

describe("gpurun.matrix", function()
  it("makes a plain table of its fields, with ld, batch and stride defaulted", function()
    local buffer = stand_in("float32", 100)
    local m = gpurun.matrix(buffer, 4, 5)
    assert.is_nil(getmetatable(m))
    assert.are.same({ buffer = buffer, rows = 4, cols = 5, ld = 5, batch = 1 }, m)
    local b = gpurun.matrix(buffer, 2, 3, { ld = 4, batch = 3 })
    assert.are.same({ 4, 3, 8 }, { b.ld, b.batch, b.stride })
  end)

  it("refuses what does not fit, naming the argument and the field", function()
    local buffer = stand_in("float32", 100)
    refuses("bad argument #1 to 'gpurun.matrix' (matrix.buffer must be a gpurun.Buffer, got number)",
            gpurun.matrix, 5, 2, 2)
    refuses("#2 to 'gpurun.matrix' (matrix.rows must be an integer, got string)", gpurun.matrix, buffer, "2", 2)
    refuses("#3 to 'gpurun.matrix' (matrix.cols must be 1..2147483647", gpurun.matrix, buffer, 2, 0)
    refuses("#4 to 'gpurun.matrix' (matrix.ld (2) must be at least its cols (3)", gpurun.matrix, buffer, 2, 3,
            { ld = 2 })
    refuses("#4 to 'gpurun.matrix' (matrix.ld must be 1..2147483647", gpurun.matrix, buffer, 2, 3,
            { ld = 1 << 31 })
    refuses("#4 to 'gpurun.matrix' (unknown option 'rows' (known: ld, batch, stride))", gpurun.matrix,
            buffer, 2, 3, { rows = 2 })
    refuses("#1 to 'gpurun.matrix' (matrix: 10 x 11 (ld 11) needs 110 elements, its buffer has 100)",
            gpurun.matrix, buffer, 10, 11)
    refuses("matrix: 4 x 4 (ld 5, batch 6, stride 20) needs 119 elements, its buffer has 100",
            gpurun.matrix, buffer, 4, 4, { ld = 5, batch = 6 })
    -- 4 * 2^62 wraps to 0 in integers: the check must not.
    refuses("matrix: 2 x 2 (ld 2, batch 5, stride 4611686018427387904) needs 18446744073709551616 "
            .. "elements, its buffer has 100", gpurun.matrix, buffer, 2, 2, { batch = 5, stride = 1 << 62 })
    refuses("matrix.stride must be an integer of 0 or more, got 1.5", gpurun.matrix, buffer, 2, 2,
            { batch = 2, stride = 1.5 })
    refuses("matrix.buffer has dtype int8; cuBLAS takes float32, float64, float16 or bfloat16",
            gpurun.matrix, stand_in("int8", 4), 2, 2)
    refuses("#4 to 'gpurun.matrix' (options table expected, got table)",
            gpurun.matrix, buffer, 2, 2, setmetatable({}, {}))
  end)
end)

describe("gpurun.matmul's checks, before cuBLAS", function()
  local a, b = view("float32", 64, 32), view("float32", 32, 48)

  it("refuses bad options by name", function()
    refuses("#3 to 'gpurun.matmul' (options table expected, got string)", gpurun.matmul, a, b, "x")
    refuses("unknown option 'trans' (known: out, alpha, beta, transa, transb, stream, epilogue, bias)",
            gpurun.matmul, a, b,
            { trans = true })
    refuses("options.beta must be a number, got boolean", gpurun.matmul, a, b, { beta = true })
    refuses("options.transb must be a boolean, got string", gpurun.matmul, a, b, { transb = "yes" })
    refuses("options.stream must be a gpurun.Stream or gpurun.GraphBuilder, got table", gpurun.matmul,
            a, b, { stream = {} })
    refuses("no stream: pass { stream = s } or call gpurun.set_current_stream(s)", gpurun.matmul, a, b)
  end)

  it("refuses operands that are not views, and views that do not read", function()
    refuses("#1 to 'gpurun.matmul' (a must be a 2-D view", gpurun.matmul, stand_in("float32", 4), b,
            { stream = STREAM })
    refuses("#2 to 'gpurun.matmul' (b.rows must be an integer, got nil)", gpurun.matmul, a,
            { buffer = stand_in("float32", 4) }, { stream = STREAM })
    refuses("#2 to 'gpurun.matmul' (b: unknown option 'shape'", gpurun.matmul, a,
            { buffer = stand_in("float32", 4), rows = 2, cols = 2, shape = 1 }, { stream = STREAM })
    refuses("a: 64 x 32 (ld 32) needs 2048 elements, its buffer has 10", gpurun.matmul,
            { buffer = stand_in("float32", 10), rows = 64, cols = 32 }, b, { stream = STREAM })
  end)

  it("names the dimension that does not fit", function()
    refuses("#2 to 'gpurun.matmul' (k does not fit: a is 64 x 32, so k is 32, but b has 48 rows)",
            gpurun.matmul, a, view("float32", 48, 32), { stream = STREAM })
    refuses("k does not fit: transposed a is 32 x 64, so k is 64, but b has 32 rows", gpurun.matmul,
            a, b, { transa = true, stream = STREAM })
    refuses("k does not fit: a is 64 x 32, so k is 32, but b has 48 cols (transposed)", gpurun.matmul,
            a, b, { transb = true, stream = STREAM })
    refuses("#3 to 'gpurun.matmul' (m does not fit: options.out has 63 rows, a gives 64)",
            gpurun.matmul, a, b, { out = view("float32", 63, 48), stream = STREAM })
    refuses("n does not fit: options.out has 47 cols, b gives 48", gpurun.matmul, a, b,
            { out = view("float32", 64, 47), stream = STREAM })
    refuses("n does not fit: options.out has 48 cols, transposed b gives 40", gpurun.matmul, a,
            view("float32", 40, 32), { out = view("float32", 64, 48), transb = true, stream = STREAM })
  end)

  it("refuses mixed dtypes and unsupported ones", function()
    refuses("b has dtype float16 but a float32: both must be of one dtype", gpurun.matmul, a,
            view("float16", 32, 48), { stream = STREAM })
    refuses("options.out has dtype float64 but a float32", gpurun.matmul, a, b,
            { out = view("float64", 64, 48), stream = STREAM })
    refuses("a.buffer has dtype int32; cuBLAS takes float32, float64, float16 or bfloat16",
            gpurun.matmul, { buffer = stand_in("int32", 4), rows = 2, cols = 2 }, b, { stream = STREAM })
  end)

  it("checks batches: equal, or one of them 1, and an out whose matrices do not overlap", function()
    local a3, b4 = view("float32", 4, 4, { batch = 3 }), view("float32", 4, 4, { batch = 4 })
    refuses("the batches differ: a has 3 matrices, b 4", gpurun.matmul, a3, b4, { stream = STREAM })
    refuses("the batch does not fit: options.out has 1 matrices, the product 3", gpurun.matmul, a3,
            view("float32", 4, 4), { out = view("float32", 4, 4), stream = STREAM })
    refuses("options.out.stride (8) is less than rows * ld (16): its matrices would overlap",
            gpurun.matmul, a3, view("float32", 4, 4),
            { out = view("float32", 4, 4, { batch = 3, stride = 8 }), stream = STREAM })
  end)

  it("checks every pair of the list form before any runs, naming the pair", function()
    local good = view("float32", 4, 4)
    refuses("k does not fit: a[2] is 4 x 4, so k is 4, but b[2] has 5 rows", gpurun.matmul,
            { good, good }, { good, view("float32", 5, 4) }, { stream = STREAM })
    refuses("the lists differ in length: a has 2 views, b 1", gpurun.matmul, { good, good }, { good },
            { stream = STREAM })
    refuses("options.out must be a list of 2 views, like a and b", gpurun.matmul, { good, good },
            { good, good }, { out = good, stream = STREAM })
    refuses("a and b must both be views or both be lists of views", gpurun.matmul, good, { good },
            { stream = STREAM })
  end)

  it("refuses operands on another device than the stream's", function()
    refuses("b is on device 1 but the stream on device 0", gpurun.matmul, a,
            view("float32", 32, 48, { device = 1 }), { stream = STREAM })
  end)

  it("refuses scalars past float32 where the compute dtype is float32", function()
    refuses("options.alpha 1e+39 is out of range for float32 (the compute dtype)", gpurun.matmul, a, b,
            { alpha = 1e39, stream = STREAM })
    refuses("options.beta -1e+39 is out of range for float32", gpurun.matmul, view("float16", 2, 2),
            view("float16", 2, 2), { beta = -1e39, stream = STREAM })
  end)

  it("needs an out on a GraphBuilder", function()
    local builder = setmetatable({}, { __name = "gpurun.GraphBuilder", __index = { stream = STREAM } })
    refuses("options.out is needed on a GraphBuilder", gpurun.matmul, a, b, { stream = builder })
  end)
end)

describe("the vector functions' checks, before cuBLAS", function()
  local x, y = stand_in("float32", 16), stand_in("float32", 16)

  it("refuse vectors that do not pair", function()
    refuses("#3 to 'gpurun.axpy' (n does not fit: x has 16 elements, y 8)", gpurun.axpy, 1, x,
            stand_in("float32", 8))
    refuses("#2 to 'gpurun.dot' (y has dtype float64 but x float32", gpurun.dot, x, stand_in("float64", 16))
    refuses("#1 to 'gpurun.nrm2' (x has dtype uint8; cuBLAS takes", gpurun.nrm2, stand_in("uint8", 4))
    refuses("#2 to 'gpurun.scal' (x must be a gpurun.Buffer, got string)", gpurun.scal, 2, "x")
  end)

  it("take alpha as a number in range or a 1-element buffer of the compute dtype", function()
    refuses("alpha must be a number or a gpurun.Buffer, got boolean", gpurun.axpy, true, x, y,
            { stream = STREAM })
    refuses("alpha 1e+300 is out of range for float32", gpurun.scal, 1e300, x, { stream = STREAM })
    refuses("an alpha buffer holds one float64 (the compute dtype of float64), got 16 float32",
            gpurun.scal, x, stand_in("float64", 4), { stream = STREAM })
    refuses("an alpha buffer holds one float32 (the compute dtype of bfloat16), got 0 float32",
            gpurun.scal, stand_in("float32", 0), stand_in("bfloat16", 4), { stream = STREAM })
  end)

  it("check out and the options", function()
    refuses("options.out must hold one float32 (x's dtype), got 1 float16", gpurun.dot, x, y,
            { out = stand_in("float16", 1), stream = STREAM })
    refuses("unknown option 'out' (known: stream)", gpurun.axpy, 1, x, y, { out = x })
    refuses("unknown option 'alpha' (known: out, stream)", gpurun.nrm2, x, { alpha = 1 })
    refuses("no stream: pass { stream = s }", gpurun.dot, x, y)
  end)
end)

describe("cuBLAS, opened at run time", function()
  local CHUNK = [[
    local gpurun = require("gpurun")
    local b = setmetatable({}, { __name = "gpurun.Buffer", __len = function() return 4 end,
      __index = { dtype = "float32", ptr = 0x7f0000000000, device = 0 } })
    local s = setmetatable({}, { __name = "gpurun.Stream", __index = { device = 0 } })
    local m = gpurun.matrix(b, 2, 2)
    print(package.loaded["gpurun.blas_core"].load())
    local ok, message = pcall(gpurun.matmul, m, m, { stream = s })
    io.stderr:write(message, "\n")
    local bad, checked = pcall(gpurun.matmul, m, gpurun.matrix(b, 1, 2), { stream = s })
    io.stderr:write(checked, "\n")
  ]]

  it("says in one line why it cannot be loaded, after the call's own checks", function()
    local result = process.run(process.quote(process.gpurun_bin()) .. " -e " .. process.quote(CHUNK),
      { env = { GPURUN_CUBLAS_LIBRARY = "/nonexistent/libcublas.so.13" } })
    assert.are.equal(0, result.code, result.stderr)
    local why = "cuBLAS could not be loaded (/nonexistent/libcublas.so.13: cannot open shared object file: "
      .. "No such file or directory); install the CUDA toolkit's cuBLAS (libcublas.so beside libnvrtc, "
      .. "NVIDIA's libcublas package) or set GPURUN_CUBLAS_LIBRARY to the library's path"
    assert.are.equal(why .. "\n", result.stdout)
    local first, second = result.stderr:match("^([^\n]*)\n([^\n]*)\n$")
    assert.matches("gpurun.matmul: " .. why:gsub("%p", "%%%0"), first)
    assert.matches("k does not fit", second)
  end)

  it("finds the toolkit's cuBLAS beside libnvrtc with no setting", function()
    local result = process.run(process.quote(process.gpurun_bin()) .. " -e "
      .. process.quote([[require("gpurun"); print(package.loaded["gpurun.blas_core"].load())]]))
    assert.are.equal("nil\n", result.stdout, result.stderr)
  end)
end)

-- ---- on the GPU ------------------------------------------------------------------

-- Host reference of out = alpha op(a) op(b) + beta out, over the values the
-- device holds (so 16-bit inputs are compared as rounded).
local function host_product(av, bv, cv, m, n, k, alpha, beta, transa, transb, ld)
  local result = {}
  for i = 0, m - 1 do
    for j = 0, n - 1 do
      local sum = 0.0
      for p = 0, k - 1 do
        local x = transa and av[p * ld.a + i + 1] or av[i * ld.a + p + 1]
        local y = transb and bv[j * ld.b + p + 1] or bv[p * ld.b + j + 1]
        sum = sum + x * y
      end
      result[i * ld.c + j + 1] = alpha * sum + beta * (cv and cv[i * ld.c + j + 1] or 0)
    end
  end
  return result
end

local TOLERANCE = { float32 = 1e-5, float64 = 1e-12, float16 = 2e-3, bfloat16 = 1.6e-2 }

local function close_to(expected, got, dtype, what)
  local worst = 0
  for index, value in pairs(expected) do
    local error = math.abs(got[index] - value) / math.max(1, math.abs(value))
    if error > worst then worst = error end
  end
  assert(worst <= TOLERANCE[dtype], ("%s: worst relative error %g over %g"):format(what, worst,
    TOLERANCE[dtype]))
end

local function gpu()
  local device = gpurun.Device(0)
  device:set_current()
  return device, device:create_stream()
end

describe("gpurun.matmul on a GPU", function()
  it("multiplies 64x32 by 32x48 in every dtype, against the host #gpu", function()
    local _, stream = gpu()
    local rng = gpurun.default_rng(7)
    for _, dtype in ipairs{ "float32", "float64", "float16", "bfloat16" } do
      local a = gpurun.matrix(rng:random(64 * 32, dtype), 64, 32)
      local b = gpurun.matrix(rng:random(32 * 48, dtype), 32, 48)
      local c = gpurun.matmul(a, b, { stream = stream })
      stream:sync()
      assert.are.same({ 64, 48, 48, dtype }, { c.rows, c.cols, c.ld, c.buffer.dtype })
      local expected = host_product(a.buffer:to_table(), b.buffer:to_table(), nil, 64, 48, 32, 1, 0,
        false, false, { a = 32, b = 48, c = 48 })
      close_to(expected, c.buffer:to_table(), dtype, dtype)
    end
  end)

  it("transposes either operand, with alpha, beta and ld wider than cols #gpu", function()
    local _, stream = gpu()
    local rng = gpurun.default_rng(8)
    for _, transa in ipairs{ false, true } do
      for _, transb in ipairs{ false, true } do
        local m, n, k = 24, 20, 16
        local a_rows, a_cols = transa and k or m, transa and m or k
        local b_rows, b_cols = transb and n or k, transb and k or n
        local ld = { a = a_cols + 3, b = b_cols + 1, c = n + 5 }
        local a = gpurun.matrix(rng:random(a_rows * ld.a, "float64"), a_rows, a_cols, { ld = ld.a })
        local b = gpurun.matrix(rng:random(b_rows * ld.b, "float64"), b_rows, b_cols, { ld = ld.b })
        local c = gpurun.matrix(rng:random(m * ld.c, "float64"), m, n, { ld = ld.c })
        local before = c.buffer:to_table()
        gpurun.matmul(a, b, { out = c, alpha = 1.5, beta = -0.5, transa = transa, transb = transb,
                              stream = stream })
        stream:sync()
        local expected = host_product(a.buffer:to_table(), b.buffer:to_table(), before, m, n, k, 1.5,
          -0.5, transa, transb, ld)
        local got = c.buffer:to_table()
        close_to(expected, got, "float64", ("transa %s transb %s"):format(transa, transb))
        for i = 0, m - 1 do -- the padding past each row is untouched
          for j = n, ld.c - 1 do assert.are.equal(before[i * ld.c + j + 1], got[i * ld.c + j + 1]) end
        end
      end
    end
  end)

  it("runs a strided batch, broadcasts a batch of 1, and runs lists of views #gpu", function()
    local _, stream = gpu()
    local rng = gpurun.default_rng(9)
    local a = gpurun.matrix(rng:random(3 * 8 * 6, "float32"), 8, 6, { batch = 3 })
    local b = gpurun.matrix(rng:random(6 * 5, "float32"), 6, 5)
    local c = gpurun.matmul(a, b, { stream = stream })
    local listed = gpurun.matmul({ gpurun.matrix(a.buffer, 8, 6), b },
                                 { b, gpurun.matrix(rng:random(5 * 2, "float32"), 5, 2) },
                                 { stream = stream })
    stream:sync()
    assert.are.same({ 3, 40 }, { c.batch, c.stride })
    local av, bv, cv = a.buffer:to_table(), b.buffer:to_table(), c.buffer:to_table()
    for batch = 0, 2 do
      local slice = table.move(av, batch * 48 + 1, batch * 48 + 48, 1, {})
      local expected = host_product(slice, bv, nil, 8, 5, 6, 1, 0, false, false, { a = 6, b = 5, c = 5 })
      close_to(expected, table.move(cv, batch * 40 + 1, batch * 40 + 40, 1, {}), "float32",
        "batch " .. batch)
    end
    close_to(host_product(av, bv, nil, 8, 5, 6, 1, 0, false, false, { a = 6, b = 5, c = 5 }),
      listed[1].buffer:to_table(), "float32", "list 1")
    assert.are.same({ 6, 2 }, { listed[2].rows, listed[2].cols })
  end)

  it("lands in the graph of a capture, and a replay reads the buffers anew #gpu", function()
    local _, stream = gpu()
    local rng = gpurun.default_rng(10)
    local a = gpurun.matrix(rng:random(64 * 32, "float32"), 64, 32)
    local b = gpurun.matrix(rng:random(32 * 48, "float32"), 32, 48)
    local c = gpurun.matrix(gpurun.zeros(64 * 48, "float32"), 64, 48)
    local fresh = gpurun.Device(0):create_stream() -- its first BLAS call is the captured one
    local builder = fresh:create_graph_builder()
    builder:begin_building()
    gpurun.matmul(a, b, { out = c, stream = builder })
    builder:end_building()
    local graph = builder:complete()
    assert.is_true(graph:nodes() and #graph:nodes() >= 1)
    stream:sync()
    assert.are.equal(0, c.buffer:get(1)) -- captured, not run
    for round = 1, 2 do
      a.buffer:copy_from(rng:random(64 * 32, "float32"))
      graph:launch(stream)
      stream:sync()
      local expected = host_product(a.buffer:to_table(), b.buffer:to_table(), nil, 64, 48, 32, 1, 0,
        false, false, { a = 32, b = 48, c = 48 })
      close_to(expected, c.buffer:to_table(), "float32", "replay " .. round)
    end
    graph:close()
    builder:close()
    fresh:close()
  end)

  it("makes one handle per stream, closed with the stream #gpu", function()
    local _, stream = gpu()
    local core = package.loaded["gpurun.blas_core"]
    local a = gpurun.matrix(gpurun.full(16, 1, "float32"), 4, 4)
    local c = gpurun.matrix(gpurun.zeros(16, "float32"), 4, 4)
    local before = core.handles()
    local other = gpurun.Device(0):create_stream()
    gpurun.matmul(a, a, { out = c, stream = other })
    gpurun.matmul(a, a, { out = c, stream = other })
    assert.are.equal(before + 1, core.handles())
    gpurun.matmul(a, a, { out = c, stream = stream })
    other:close()
    stream:sync()
    assert.is_true(core.handles() <= before + 1)
  end)

  it("allocates nothing when a stream calls again #gpu", function()
    local _, stream = gpu()
    local a = gpurun.matrix(gpurun.full(64 * 64, 1, "float32"), 64, 64)
    local c = gpurun.matrix(gpurun.zeros(64 * 64, "float32"), 64, 64)
    local x, y, out = gpurun.full(64, 1, "float32"), gpurun.full(64, 2, "float32"), gpurun.zeros(1, "float32")
    local options, vector_options = { out = c, stream = stream }, { stream = stream }
    local result_options = { out = out, stream = stream }
    -- the handle, the library's modules and method caches made first
    assert.are.equal(0, expect.bytes_allocated(function()
      gpurun.matmul(a, a, options); gpurun.axpy(0.5, x, y, vector_options)
      gpurun.dot(x, y, result_options); gpurun.nrm2(x, result_options); gpurun.scal(1, y, vector_options)
    end))
    stream:sync()
  end)
end)

describe("axpy, scal, dot and nrm2 on a GPU", function()
  it("compute what the host computes, with alpha a number or a device buffer #gpu", function()
    local _, stream = gpu()
    local rng = gpurun.default_rng(11)
    for _, dtype in ipairs{ "float32", "float64", "float16", "bfloat16" } do
      local compute = dtype == "float64" and "float64" or "float32"
      local x, y = rng:random(300, dtype), rng:random(300, dtype)
      local xv, yv = x:to_table(), y:to_table()
      gpurun.axpy(2, x, y, { stream = stream })
      gpurun.scal(gpurun.array({ 0.5 }, compute), y, { stream = stream })
      local dot = gpurun.dot(x, y, { stream = stream })
      local norm = gpurun.nrm2(x, { stream = stream })
      stream:sync()
      local expected, dot_expected, norm_expected = {}, 0, 0
      for i = 1, 300 do
        expected[i] = (2 * xv[i] + yv[i]) * 0.5
        norm_expected = norm_expected + xv[i] * xv[i]
      end
      local got = y:to_table()
      for i = 1, 300 do dot_expected = dot_expected + xv[i] * got[i] end
      close_to(expected, got, dtype, dtype .. " axpy, scal")
      close_to({ dot_expected }, { dot:get(1) }, dtype, dtype .. " dot")
      close_to({ math.sqrt(norm_expected) }, { norm:get(1) }, dtype, dtype .. " nrm2")
    end
  end)

  it("are captured, and a device alpha is read at each replay #gpu", function()
    local _, stream = gpu()
    local x, y = gpurun.full(64, 1, "float32"), gpurun.zeros(64, "float32")
    local alpha, out = gpurun.array({ 2 }, "float32"), gpurun.zeros(1, "float32")
    local builder = stream:create_graph_builder()
    builder:begin_building()
    gpurun.axpy(alpha, x, y, { stream = builder })
    gpurun.dot(x, y, { out = out, stream = builder })
    builder:end_building()
    local graph = builder:complete()
    graph:launch(stream)
    stream:sync()
    assert.are.equal(128, out:get(1))
    alpha:set(1, 3)
    graph:launch(stream)
    stream:sync()
    assert.are.equal(5 * 64, out:get(1))
  end)
end)
