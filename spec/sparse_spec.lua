-- gpurun.csr, spmv and spmm over cuSPARSE. Every check before cuSPARSE
-- runs anywhere, on stand-in buffers, matrices and streams; the loader's
-- message where cuSPARSE is missing, in a child gpurun; products against
-- the host, graphs, plans kept and the allocation-free repeat call need a
-- GPU.
local gpurun = require("gpurun")
local process = require("spec.support.process")
local expect = require("spec.support.expect")

local function stand_in(dtype, n, device)
  return setmetatable({}, { __name = "gpurun.Buffer", __len = function() return n end,
    __index = { dtype = dtype, ptr = 0x7f0000000000, device = device or 0 } })
end
local STREAM = setmetatable({}, { __name = "gpurun.Stream", __index = { device = 0 } })

-- A stand-in CsrMatrix: what the Lua checks read of one.
local function matrix(rows, cols, dtype, device)
  return setmetatable({}, { __name = "gpurun.CsrMatrix", __index = { rows = rows, cols = cols,
    nnz = 7, dtype = dtype or "float32", device = device or 0 } })
end

local function refuses(expected, f, ...)
  local ok, message = pcall(f, ...)
  assert.is_false(ok, "expected an error")
  message = tostring(message)
  assert(message:find(expected, 1, true), ("expected %q in %q"):format(expected, message))
end

describe("gpurun.csr's checks", function()
  local offsets, indices, values = stand_in("int32", 5), stand_in("int32", 7), stand_in("float32", 7)

  it("refuses parts that are not buffers, and sizes that are not int32 sizes", function()
    refuses("#1 to 'gpurun.csr' (row_offsets must be a gpurun.Buffer, got nil)", gpurun.csr)
    refuses("#3 to 'gpurun.csr' (values must be a gpurun.Buffer, got table)", gpurun.csr, offsets,
            indices, {}, 4, 4)
    refuses("#4 to 'gpurun.csr' (rows must be 1..2147483647 (int32 indices), got 0)", gpurun.csr,
            offsets, indices, values, 0, 4)
    refuses("#5 to 'gpurun.csr' (cols must be 1..2147483647 (int32 indices), got 2147483648)",
            gpurun.csr, offsets, indices, values, 4, 1 << 31)
    refuses("#5 to 'gpurun.csr' (cols must be an integer, got 2.5)", gpurun.csr, offsets, indices,
            values, 4, 2.5)
  end)

  it("refuses dtypes other than int32 indices and float32 or float64 values", function()
    refuses("#1 to 'gpurun.csr' (row_offsets must be int32, got int64)", gpurun.csr,
            stand_in("int64", 5), indices, values, 4, 4)
    refuses("#2 to 'gpurun.csr' (col_indices must be int32, got uint32)", gpurun.csr, offsets,
            stand_in("uint32", 7), values, 4, 4)
    refuses("#3 to 'gpurun.csr' (values must be float32 or float64, got float16)", gpurun.csr,
            offsets, indices, stand_in("float16", 7), 4, 4)
  end)

  it("checks rows + 1 offsets, one nnz for indices and values, and one device", function()
    refuses("#1 to 'gpurun.csr' (row_offsets must hold rows + 1 = 4 offsets, got 5)", gpurun.csr,
            offsets, indices, values, 3, 4)
    refuses("#2 to 'gpurun.csr' (nnz does not fit: 6 col_indices but 7 values)", gpurun.csr,
            offsets, stand_in("int32", 6), values, 4, 4)
    refuses("the three buffers must be on one device: row_offsets on 0, col_indices on 1, values on 0",
            gpurun.csr, offsets, stand_in("int32", 7, 1), values, 4, 4)
  end)

  it("passes checked parts to C, which takes real buffers only", function()
    refuses("gpurun.Buffer expected, got table named gpurun.Buffer", gpurun.csr, offsets, indices,
            values, 4, 4)
  end)
end)

describe("gpurun.spmv's checks, before cuSPARSE", function()
  local A = matrix(4, 3)
  local x, y = stand_in("float32", 3), stand_in("float32", 4)

  it("refuses an A that is not a CsrMatrix and operands that are not buffers", function()
    refuses("#1 to 'gpurun.spmv' (A must be a gpurun.CsrMatrix (gpurun.csr), got gpurun.Buffer)",
            gpurun.spmv, x, x, y)
    refuses("#3 to 'gpurun.spmv' (y must be a gpurun.Buffer, got number)", gpurun.spmv, A, x, 5)
  end)

  it("refuses bad options by name", function()
    refuses("#4 to 'gpurun.spmv' (options table expected, got string)", gpurun.spmv, A, x, y, "s")
    refuses("unknown option 'trans' (known: alpha, beta, transpose, stream)", gpurun.spmv, A, x, y,
            { trans = true })
    refuses("options.alpha must be a number, got string", gpurun.spmv, A, x, y, { alpha = "2" })
    refuses("options.alpha 1e+39 is out of range for float32 (the compute dtype)", gpurun.spmv, A,
            x, y, { alpha = 1e39, stream = STREAM })
    refuses("options.transpose must be a boolean, got number", gpurun.spmv, A, x, y,
            { transpose = 1 })
    refuses("options.stream must be a gpurun.Stream or gpurun.GraphBuilder, got table",
            gpurun.spmv, A, x, y, { stream = {} })
    refuses("no stream: pass { stream = s } or call gpurun.set_current_stream(s)", gpurun.spmv,
            A, x, y)
  end)

  it("checks the vectors' lengths against op(A), and their dtypes and devices", function()
    refuses("#2 to 'gpurun.spmv' (x must hold 3 elements (the cols of A), got 4)", gpurun.spmv,
            A, y, y, { stream = STREAM })
    refuses("#3 to 'gpurun.spmv' (y must hold 4 elements (the rows of A), got 3)", gpurun.spmv,
            A, x, x, { stream = STREAM })
    refuses("x must hold 4 elements (the rows of A), got 3", gpurun.spmv, A, x, y,
            { transpose = true, stream = STREAM })
    refuses("#2 to 'gpurun.spmv' (x has dtype float64 but A float32: both must be of one dtype)",
            gpurun.spmv, A, stand_in("float64", 3), y, { stream = STREAM })
    refuses("#3 to 'gpurun.spmv' (y is on device 1 but A on device 0)", gpurun.spmv, A, x,
            stand_in("float32", 4, 1), { stream = STREAM })
    refuses("A is on device 1 but the stream on device 0", gpurun.spmv, matrix(4, 3, "float32", 1),
            x, y, { stream = STREAM })
  end)

  it("computes float64 scalars in float64", function()
    refuses("#2 to 'gpurun.spmv' (x has dtype float32 but A float64", gpurun.spmv,
            matrix(4, 3, "float64"), x, y, { alpha = 1e39, stream = STREAM })
  end)
end)

describe("gpurun.spmm's checks, before cuSPARSE", function()
  local A = matrix(4, 3)
  local B = gpurun.matrix(stand_in("float32", 6), 3, 2)
  local C = gpurun.matrix(stand_in("float32", 8), 4, 2)

  it("names the dimension that does not fit", function()
    refuses("#2 to 'gpurun.spmm' (k does not fit: A is 4 x 3, so k is 3, but B has 2 rows)",
            gpurun.spmm, A, gpurun.matrix(stand_in("float32", 6), 2, 3), C, { stream = STREAM })
    refuses("k does not fit: transposed A is 3 x 4, so k is 4, but B has 3 rows", gpurun.spmm, A,
            B, C, { transpose = true, stream = STREAM })
    refuses("#3 to 'gpurun.spmm' (m does not fit: C has 3 rows, A gives 4)", gpurun.spmm, A, B,
            gpurun.matrix(stand_in("float32", 6), 3, 2), { stream = STREAM })
    refuses("#3 to 'gpurun.spmm' (n does not fit: C has 1 cols, B 2)", gpurun.spmm, A, B,
            gpurun.matrix(stand_in("float32", 4), 4, 1), { stream = STREAM })
  end)

  it("refuses views that do not read, batches, and other dtypes", function()
    refuses("#2 to 'gpurun.spmm' (B must be a 2-D view (gpurun.matrix(buffer, rows, cols)), got number)",
            gpurun.spmm, A, 5, C, { stream = STREAM })
    refuses("#3 to 'gpurun.spmm' (C: 4 x 2 (ld 3) needs 11 elements, its buffer has 8)",
            gpurun.spmm, A, B, { buffer = stand_in("float32", 8), rows = 4, cols = 2, ld = 3 },
            { stream = STREAM })
    refuses("#2 to 'gpurun.spmm' (B must be one matrix, got a batch of 2)", gpurun.spmm, A,
            gpurun.matrix(stand_in("float32", 12), 3, 2, { batch = 2 }), C, { stream = STREAM })
    refuses("#3 to 'gpurun.spmm' (C has dtype float64 but A float32", gpurun.spmm, A, B,
            gpurun.matrix(stand_in("float64", 8), 4, 2), { stream = STREAM })
    refuses("unknown option 'out' (known: alpha, beta, transpose, stream)", gpurun.spmm, A, B, C,
            { out = C })
  end)
end)

describe("cuSPARSE, opened at run time", function()
  local CHUNK = [[
    local gpurun = require("gpurun")
    local b = setmetatable({}, { __name = "gpurun.Buffer", __len = function() return 2 end,
      __index = { dtype = "float32", ptr = 0x7f0000000000, device = 0 } })
    local s = setmetatable({}, { __name = "gpurun.Stream", __index = { device = 0 } })
    local A = setmetatable({}, { __name = "gpurun.CsrMatrix", __index = { rows = 2, cols = 2,
      nnz = 2, dtype = "float32", device = 0 } })
    print(package.loaded["gpurun.sparse_core"].load())
    local ok, message = pcall(gpurun.spmv, A, b, b, { stream = s })
    io.stderr:write(message, "\n")
    local bad, checked = pcall(gpurun.spmv, A, b, b, { stream = s, transpose = 1 })
    io.stderr:write(checked, "\n")
  ]]

  it("says in one line why it cannot be loaded, after the call's own checks", function()
    local result = process.run(process.quote(process.gpurun_bin()) .. " -e " .. process.quote(CHUNK),
      { env = { GPURUN_CUSPARSE_LIBRARY = "/nonexistent/libcusparse.so.12" } })
    assert.are.equal(0, result.code, result.stderr)
    local why = "cuSPARSE could not be loaded (/nonexistent/libcusparse.so.12: cannot open shared object "
      .. "file: No such file or directory); install the CUDA toolkit's cuSPARSE (libcusparse.so beside "
      .. "libnvrtc, NVIDIA's libcusparse package) or set GPURUN_CUSPARSE_LIBRARY to the library's path"
    assert.are.equal(why .. "\n", result.stdout)
    local first, second = result.stderr:match("^([^\n]*)\n([^\n]*)\n$")
    assert.matches("gpurun.spmv: " .. why:gsub("%p", "%%%0"), first)
    assert.matches("options.transpose must be a boolean", second)
  end)

  it("finds the toolkit's cuSPARSE beside libnvrtc with no setting", function()
    local result = process.run(process.quote(process.gpurun_bin()) .. " -e "
      .. process.quote([[require("gpurun"); print(package.loaded["gpurun.sparse_core"].load())]]))
    assert.are.equal("nil\n", result.stdout, result.stderr)
  end)
end)

-- ---- on the GPU ------------------------------------------------------------------

local function gpu()
  local device = gpurun.Device(0)
  device:set_current()
  return device, device:create_stream()
end

-- A random rows x cols sparse matrix, about a third of it nonzero, with
-- some empty rows: its CSR parts as tables and the matrix on the device.
local function random_csr(rows, cols, dtype, seed)
  local rng = gpurun.default_rng(seed)
  local draws = rng:random_table(rows * cols * 2)
  local offsets, indices, values = { 0 }, {}, {}
  for i = 0, rows - 1 do
    for j = 0, cols - 1 do
      local pick = draws[2 * (i * cols + j) + 1]
      if pick < 0.33 and i % 5 ~= 4 then
        indices[#indices + 1] = j
        values[#values + 1] = draws[2 * (i * cols + j) + 2] * 2 - 1
      end
    end
    offsets[#offsets + 1] = #values
  end
  local A = gpurun.csr(gpurun.array(offsets, "int32"), gpurun.array(indices, "int32"),
                       gpurun.array(values, dtype), rows, cols)
  return A, { offsets = offsets, indices = indices, values = A.values:to_table() }
end

-- y = alpha op(A) x + beta y on the host, from the CSR parts.
local function host_spmv(parts, rows, cols, x, y, alpha, beta, transpose)
  local out = {}
  for i = 1, transpose and cols or rows do out[i] = 0.0 end
  for i = 0, rows - 1 do
    for p = parts.offsets[i + 1], parts.offsets[i + 2] - 1 do
      local j, v = parts.indices[p + 1], parts.values[p + 1]
      if transpose then
        out[j + 1] = out[j + 1] + v * x[i + 1]
      else
        out[i + 1] = out[i + 1] + v * x[j + 1]
      end
    end
  end
  for i = 1, #out do out[i] = alpha * out[i] + beta * y[i] end
  return out
end

local TOLERANCE = { float32 = 1e-5, float64 = 1e-12 }

local function close_to(expected, got, dtype, what)
  for i, value in ipairs(expected) do
    local error = math.abs(got[i] - value) / math.max(1, math.abs(value))
    assert(error <= TOLERANCE[dtype], ("%s: element %d is %g, the host's %g"):format(what, i,
      got[i], value))
  end
end

describe("gpurun.spmv and spmm on a GPU", function()
  it("compute what the host computes, in both dtypes, transposed or not #gpu", function()
    local _, stream = gpu()
    local rng = gpurun.default_rng(3)
    for _, dtype in ipairs{ "float32", "float64" } do
      local A, parts = random_csr(37, 23, dtype, 5)
      for _, transpose in ipairs{ false, true } do
        local n_in, n_out = transpose and 37 or 23, transpose and 23 or 37
        local x, y = rng:random(n_in, dtype), rng:random(n_out, dtype)
        local before = y:to_table()
        gpurun.spmv(A, x, y, { alpha = 1.5, beta = -0.5, transpose = transpose, stream = stream })
        stream:sync()
        close_to(host_spmv(parts, 37, 23, x:to_table(), before, 1.5, -0.5, transpose), y:to_table(),
          dtype, ("%s spmv transpose %s"):format(dtype, transpose))
      end
      assert.are.equal(2, package.loaded["gpurun.sparse_core"].plans(A))
    end
  end)

  it("multiplies by dense matrices with ld wider than cols #gpu", function()
    local _, stream = gpu()
    local rng = gpurun.default_rng(4)
    local A, parts = random_csr(19, 11, "float64", 6)
    local n, ldb, ldc = 5, 7, 6
    local B = gpurun.matrix(rng:random(11 * ldb, "float64"), 11, n, { ld = ldb })
    local C = gpurun.matrix(rng:random(19 * ldc, "float64"), 19, n, { ld = ldc })
    local bv, before = B.buffer:to_table(), C.buffer:to_table()
    gpurun.spmm(A, B, C, { alpha = 2, beta = 1, stream = stream })
    stream:sync()
    local got = C.buffer:to_table()
    for j = 0, n - 1 do
      local x, y, out = {}, {}, {}
      for i = 0, 10 do x[i + 1] = bv[i * ldb + j + 1] end
      for i = 0, 18 do y[i + 1] = before[i * ldc + j + 1]; out[i + 1] = got[i * ldc + j + 1] end
      close_to(host_spmv(parts, 19, 11, x, y, 2, 1, false), out, "float64", "spmm column " .. j)
    end
    for i = 0, 18 do -- the padding past each row is untouched
      assert.are.equal(before[i * ldc + n + 1], got[i * ldc + n + 1])
    end
  end)

  it("lands in a graph, the first product of a matrix included, and replays anew #gpu", function()
    local _, stream = gpu()
    local rng = gpurun.default_rng(8)
    local A, parts = random_csr(64, 48, "float32", 9)
    local x, y = rng:random(48, "float32"), gpurun.zeros(64, "float32")
    local B = gpurun.matrix(rng:random(48 * 3, "float32"), 48, 3)
    local C = gpurun.matrix(gpurun.zeros(64 * 3, "float32"), 64, 3)
    local builder = stream:create_graph_builder()
    builder:begin_building()
    gpurun.spmv(A, x, y, { stream = builder })
    gpurun.spmm(A, B, C, { stream = builder })
    builder:end_building()
    local graph = builder:complete()
    stream:sync()
    assert.are.equal(0, y:get(1)) -- captured, not run
    -- The graph and its builder (until closed) each keep A.
    refuses("gpurun.CsrMatrix is used by 2 graph(s) or graph builder(s); close them first",
            A.close, A)
    for round = 1, 2 do
      x:copy_from(rng:random(48, "float32"))
      graph:launch(stream)
      stream:sync()
      local zeros = {}
      for i = 1, 64 do zeros[i] = 0 end
      close_to(host_spmv(parts, 64, 48, x:to_table(), zeros, 1, 0, false), y:to_table(), "float32",
        "replay " .. round)
    end
    local bv, got = B.buffer:to_table(), C.buffer:to_table()
    local column, out, zeros = {}, {}, {}
    for i = 0, 47 do column[i + 1] = bv[i * 3 + 2] end
    for i = 0, 63 do out[i + 1] = got[i * 3 + 2]; zeros[i + 1] = 0 end
    close_to(host_spmv(parts, 64, 48, column, zeros, 1, 0, false), out, "float32", "spmm in a graph")
    graph:close()
    builder:close()
    A:close()
    assert.has_error(function() return A.rows end, "attempt to use a closed gpurun.CsrMatrix")
  end)

  it("plans a shape once, and a repeated product allocates nothing #gpu", function()
    local _, stream = gpu()
    local core = package.loaded["gpurun.sparse_core"]
    local A = random_csr(64, 64, "float32", 10)
    local x, y = gpurun.full(64, 1, "float32"), gpurun.zeros(64, "float32")
    local B = gpurun.matrix(gpurun.full(64 * 4, 1, "float32"), 64, 4)
    local C = gpurun.matrix(gpurun.zeros(64 * 4, "float32"), 64, 4)
    local options, transposed = { stream = stream }, { stream = stream, transpose = true }
    -- the plans, the library's modules and method caches made first
    assert.are.equal(0, expect.bytes_allocated(function()
      gpurun.spmv(A, x, y, options); gpurun.spmv(A, y, x, transposed); gpurun.spmm(A, B, C, options)
    end))
    stream:sync()
    assert.are.equal(3, core.plans(A))
  end)

  it("shows its fields, and refuses buffers closed under it #gpu", function()
    local _, stream = gpu()
    local A = random_csr(8, 6, "float64", 11)
    assert.are.same({ 8, 6, "float64", 0 }, { A.rows, A.cols, A.dtype, A.device })
    assert.are.equal(#A.values, A.nnz)
    assert.are.equal(9, #A.row_offsets)
    assert.matches("^gpurun.CsrMatrix%(8 x 6, %d+ nonzeros, float64%)$", tostring(A))
    local x, y = gpurun.zeros(6, "float64"), gpurun.zeros(8, "float64")
    A.values:close()
    refuses("attempt to use a closed gpurun.Buffer", gpurun.spmv, A, x, y, { stream = stream })
  end)
end)
