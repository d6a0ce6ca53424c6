-- gpurun.matmul's epilogues (relu, gelu, bias, relu_bias, gelu_bias),
-- fused by cuBLASLt. Every check before cuBLASLt runs, on stand-in buffers
-- and streams; the loader's message where cuBLASLt is missing, in a child
-- gpurun; results against the host, in a graph too, and the repeat call
-- that allocates nothing need a GPU.
local gpurun = require("gpurun")
local process = require("spec.support.process")
local expect = require("spec.support.expect")

local function stand_in(dtype, n, device)
  return setmetatable({}, { __name = "gpurun.Buffer", __len = function() return n end,
    __index = { dtype = dtype, ptr = 0x7f0000000000, device = device or 0 } })
end
local STREAM = setmetatable({}, { __name = "gpurun.Stream", __index = { device = 0 } })

local function refuses(expected, f, ...)
  local ok, message = pcall(f, ...)
  assert.is_false(ok, "expected an error")
  message = tostring(message)
  assert(message:find(expected, 1, true), ("expected %q in %q"):format(expected, message))
end

local function view(dtype, rows, cols, options)
  return gpurun.matrix(stand_in(dtype, rows * cols * (options and options.batch or 1)), rows, cols,
                       options)
end

describe("gpurun.matmul's epilogue checks, before cuBLASLt", function()
  local a, b = view("float32", 8, 4), view("float32", 4, 6)
  local out = view("float32", 8, 6)
  local bias = stand_in("float32", 6)

  it("takes cuBLASLt's epilogue names, lower-cased, and lists them otherwise", function()
    local listed = "options.epilogue must be one of bias, gelu, gelu_bias, relu, relu_bias "
      .. "(cuBLASLt's epilogues), got "
    refuses("#3 to 'gpurun.matmul' (" .. listed .. "'RELU')", gpurun.matmul, a, b,
            { out = out, stream = STREAM, epilogue = "RELU" })
    refuses(listed .. "'gelu_aux'", gpurun.matmul, a, b, { stream = STREAM, epilogue = "gelu_aux" })
    refuses(listed .. "boolean", gpurun.matmul, a, b, { stream = STREAM, epilogue = true })
    assert.are.same({ "bias", "gelu", "gelu_bias", "relu", "relu_bias" }, (function()
      local names = {}
      for name in pairs(package.loaded["gpurun.blas_core"].EPILOGUES) do names[#names + 1] = name end
      table.sort(names)
      return names
    end)())
  end)

  it("needs a bias for the bias epilogues and refuses one for the others", function()
    for _, name in ipairs{ "bias", "relu_bias", "gelu_bias" } do
      refuses(('options.epilogue "%s" adds a bias: options.bias (a buffer of out\'s cols '
        .. "elements) is needed"):format(name), gpurun.matmul, a, b,
        { out = out, stream = STREAM, epilogue = name })
    end
    refuses('options.bias is given but options.epilogue "relu" adds none', gpurun.matmul, a, b,
            { out = out, stream = STREAM, epilogue = "relu", bias = bias })
    refuses("options.bias is given without options.epilogue", gpurun.matmul, a, b,
            { out = out, stream = STREAM, bias = bias })
  end)

  it("checks the bias: a buffer of out's dtype, one element per column, on the device", function()
    local function with(value)
      return { out = out, stream = STREAM, epilogue = "relu_bias", bias = value }
    end
    refuses("options.bias must be a gpurun.Buffer, got number", gpurun.matmul, a, b, with(5))
    refuses("options.bias has dtype int8; cuBLAS takes float32", gpurun.matmul, a, b,
            with(stand_in("int8", 6)))
    refuses("options.bias has dtype float64 but out float32: cuBLASLt adds a bias of out's dtype",
            gpurun.matmul, a, b, with(stand_in("float64", 6)))
    refuses("options.bias has 5 elements but out has 6 cols: one per column is needed",
            gpurun.matmul, a, b, with(stand_in("float32", 5)))
    -- transposed a: out is still 8 x 6, the bias still one per column of out
    refuses("options.bias has 4 elements but out has 6 cols", gpurun.matmul, view("float32", 4, 8), b,
            { transa = true, stream = STREAM, epilogue = "bias", bias = stand_in("float32", 4) })
    refuses("options.bias is on device 1 but the stream on device 0", gpurun.matmul, a, b,
            with(stand_in("float32", 6, 1)))
  end)

  it("takes single matrices only: a batch or lists are refused", function()
    refuses("an epilogue takes one matrix, got a batch of 2", gpurun.matmul,
            view("float32", 8, 4, { batch = 2 }), b, { stream = STREAM, epilogue = "relu" })
    refuses("an epilogue takes one matrix, not lists of views", gpurun.matmul, { a }, { b },
            { stream = STREAM, epilogue = "gelu" })
  end)

  it("needs an out on a GraphBuilder, as without an epilogue", function()
    local building = setmetatable({}, { __name = "gpurun.GraphBuilder",
      __index = { stream = { device = 0 } } })
    refuses("options.out is needed on a GraphBuilder", gpurun.matmul, a, b,
            { stream = building, epilogue = "relu" })
  end)
end)

describe("cuBLASLt, opened at run time", function()
  local CHUNK = [[
    local gpurun = require("gpurun")
    local function buffer(n) return setmetatable({}, { __name = "gpurun.Buffer",
      __len = function() return n end,
      __index = { dtype = "float64", ptr = 0x7f0000000000, device = 0 } }) end
    local s = setmetatable({}, { __name = "gpurun.Stream", __index = { device = 0 } })
    local m = gpurun.matrix(buffer(4), 2, 2)
    print(package.loaded["gpurun.blas_core"].load_lt())
    local _, message = pcall(gpurun.matmul, m, m, { stream = s, out = m, epilogue = "gelu_bias",
                                                    bias = buffer(2) })
    io.stderr:write(message, "\n")
  ]]

  it("says in one line why it cannot be loaded, after the call's own checks", function()
    local result = process.run(process.quote(process.gpurun_bin()) .. " -e " .. process.quote(CHUNK),
      { env = { GPURUN_CUBLASLT_LIBRARY = "/nonexistent/libcublasLt.so.13" } })
    assert.are.equal(0, result.code, result.stderr)
    local why = "cuBLASLt could not be loaded (/nonexistent/libcublasLt.so.13: cannot open shared "
      .. "object file: No such file or directory); install the CUDA toolkit's cuBLAS "
      .. "(libcublasLt.so beside libnvrtc, NVIDIA's libcublas package) or set "
      .. "GPURUN_CUBLASLT_LIBRARY to the library's path"
    assert.are.equal(why .. "\n", result.stdout)
    assert.matches("^[^\n]*gpurun.matmul: " .. why:gsub("%p", "%%%0") .. "\n$", result.stderr)
  end)

  it("finds the toolkit's cuBLASLt beside libnvrtc with no setting", function()
    local result = process.run(process.quote(process.gpurun_bin()) .. " -e "
      .. process.quote([[require("gpurun"); print(package.loaded["gpurun.blas_core"].load_lt())]]))
    assert.are.equal("nil\n", result.stdout, result.stderr)
  end)
end)

-- ---- on the GPU ------------------------------------------------------------------

-- cuBLASLt's GELU is the tanh approximation (its own fast tanh): compared
-- with at least 1e-3 of slack.
local function tanh(u) -- Lua 5.4 has none
  local e = math.exp(-2 * math.abs(u))
  return (u < 0 and -1 or 1) * (1 - e) / (1 + e)
end
local function gelu(x)
  return 0.5 * x * (1 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)))
end
local ACTIVATION = { relu = function(x) return math.max(x, 0) end, gelu = gelu }
local TOLERANCE = { float32 = 1e-5, float64 = 1e-12, float16 = 4e-3, bfloat16 = 3e-2 }

-- Values in -1..1, so that the activations have both sides to act on.
local function signed_values(rng, n)
  local values = rng:random_table(n)
  for i, v in ipairs(values) do values[i] = 2 * v - 1 end
  return values
end
local function signed(rng, n, dtype)
  return gpurun.array(signed_values(rng, n), dtype)
end

-- epilogue(a b + bias) on the host, over the values the device holds.
local function expected(a, b, bias, m, n, k, epilogue)
  local av, bv = a.buffer:to_table(), b.buffer:to_table()
  local biases = bias and bias:to_table()
  local act = ACTIVATION[epilogue:match("^(%a+)_bias$") or epilogue]
  local result = {}
  for i = 0, m - 1 do
    for j = 0, n - 1 do
      local sum = 0.0
      for p = 0, k - 1 do sum = sum + av[i * k + p + 1] * bv[p * n + j + 1] end
      if biases then sum = sum + biases[j + 1] end
      result[i * n + j + 1] = act and act(sum) or sum
    end
  end
  return result
end

local function close_to(want, got, dtype, epilogue)
  local tolerance = TOLERANCE[dtype]
  if epilogue:find("gelu", 1, true) then tolerance = math.max(tolerance, 1e-3) end
  local worst = 0
  for index, value in ipairs(want) do
    local error = math.abs(got[index] - value) / math.max(1, math.abs(value))
    if error > worst then worst = error end
  end
  assert(worst <= tolerance, ("%s %s: worst relative error %g over %g"):format(dtype, epilogue,
    worst, tolerance))
end

local function gpu()
  local device = gpurun.Device(0)
  device:set_current()
  return device:create_stream()
end

describe("gpurun.matmul's epilogues on a GPU", function()
  it("applies each epilogue as the host does, in float32, float16 and bfloat16 #gpu", function()
    local stream = gpu()
    local rng = gpurun.default_rng(11)
    local m, n, k = 40, 24, 16
    for _, dtype in ipairs{ "float32", "float16", "bfloat16" } do
      for _, epilogue in ipairs{ "relu", "gelu", "bias", "relu_bias", "gelu_bias" } do
        local a = gpurun.matrix(signed(rng, m * k, dtype), m, k)
        local b = gpurun.matrix(signed(rng, k * n, dtype), k, n)
        local bias = epilogue:find("bias", 1, true) and signed(rng, n, dtype) or nil
        local c = gpurun.matmul(a, b, { stream = stream, epilogue = epilogue, bias = bias })
        stream:sync()
        assert.are.same({ m, n, dtype }, { c.rows, c.cols, c.buffer.dtype })
        close_to(expected(a, b, bias, m, n, k, epilogue), c.buffer:to_table(), dtype, epilogue)
      end
    end
    stream:close()
  end)

  it("transposes, and runs in float64 or says cuBLASLt has no algorithm #gpu", function()
    local stream = gpu()
    local rng = gpurun.default_rng(12)
    local at = gpurun.matrix(signed(rng, 16 * 24, "float32"), 16, 24) -- a^T: a is 24 x 16
    local b = gpurun.matrix(signed(rng, 16 * 8, "float32"), 16, 8)
    local bias = signed(rng, 8, "float32")
    local c = gpurun.matmul(at, b, { transa = true, stream = stream, epilogue = "relu_bias",
                                     bias = bias })
    stream:sync()
    local atv, a_values = at.buffer:to_table(), {}
    for i = 0, 23 do
      for p = 0, 15 do a_values[i * 16 + p + 1] = atv[p * 24 + i + 1] end
    end
    local a = { buffer = { to_table = function() return a_values end } }
    close_to(expected(a, b, bias, 24, 8, 16, "relu_bias"), c.buffer:to_table(), "float32", "relu_bias")
    local a64 = gpurun.matrix(signed(rng, 8 * 8, "float64"), 8, 8)
    local ok, message = pcall(gpurun.matmul, a64, a64, { stream = stream, epilogue = "relu" })
    if ok then
      stream:sync()
      close_to(expected(a64, a64, nil, 8, 8, 8, "relu"), message.buffer:to_table(), "float64", "relu")
    else
      assert.matches("cuBLASLt", tostring(message))
    end
    stream:close()
  end)

  it("lands in the graph of a capture, and a replay reads the bias anew #gpu", function()
    local stream = gpu()
    local rng = gpurun.default_rng(13)
    local a = gpurun.matrix(signed(rng, 32 * 16, "float32"), 32, 16)
    local b = gpurun.matrix(signed(rng, 16 * 24, "float32"), 16, 24)
    local bias = signed(rng, 24, "float32")
    local c = gpurun.matrix(gpurun.zeros(32 * 24, "float32"), 32, 24)
    local fresh = gpurun.Device(0):create_stream() -- its first BLAS call is the captured one
    local builder = fresh:create_graph_builder()
    builder:begin_building()
    gpurun.matmul(a, b, { out = c, stream = builder, epilogue = "gelu_bias", bias = bias })
    builder:end_building()
    local graph = builder:complete()
    stream:sync()
    assert.are.equal(0, c.buffer:get(1)) -- captured, not run
    for round = 1, 2 do
      bias:copy_from(signed_values(rng, 24))
      graph:launch(stream)
      stream:sync()
      close_to(expected(a, b, bias, 32, 24, 16, "gelu_bias"), c.buffer:to_table(), "float32",
               "gelu_bias, replay " .. round)
    end
    graph:close()
    builder:close()
    fresh:close()
    stream:close()
  end)

  -- A float64 GELU is what cuBLASLt may lack: where it does, its refusal
  -- names the call and the status, and the capture is abandoned.
  it("raises with cuBLASLt's status and ends the capture it was in #gpu", function()
    local stream = gpu()
    local a = gpurun.matrix(gpurun.zeros(64, "float64"), 8, 8)
    local c = gpurun.matrix(gpurun.zeros(64, "float64"), 8, 8)
    local builder = stream:create_graph_builder()
    builder:begin_building()
    local ok, message = pcall(gpurun.matmul, a, a, { out = c, stream = builder, epilogue = "gelu" })
    if ok then
      builder:end_building()
    else
      assert.matches("cublasLt%w+: CUBLAS_STATUS_%u+", tostring(message))
      assert.are.equal("abandoned", builder.state)
    end
    builder:close()
    stream:close()
  end)

  it("allocates nothing when a stream calls again with a shape it has seen #gpu", function()
    local stream = gpu()
    local a = gpurun.matrix(gpurun.full(64 * 64, 1, "float32"), 64, 64)
    local c = gpurun.matrix(gpurun.zeros(64 * 64, "float32"), 64, 64)
    local bias = gpurun.full(64, -1, "float32")
    local options = { out = c, stream = stream, epilogue = "relu_bias", bias = bias }
    assert.are.equal(0, expect.bytes_allocated(function() gpurun.matmul(a, a, options) end))
    stream:sync()
    assert.are.equal(63, c.buffer:get(1))
    stream:close()
  end)
end)
