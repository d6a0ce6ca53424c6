-- gpurun.fft over cuFFT, and complex buffers. Every check before cuFFT runs
-- anywhere, on stand-in buffers and streams with cuFFT's C side stubbed;
-- the loader's message where cuFFT is missing, in a child gpurun; results
-- against a host DFT (each kind, 1-D to 3-D, batched, both precisions),
-- graphs and plans' lifetimes need a GPU.
local gpurun = require("gpurun")
local process = require("spec.support.process")

local function stand_in(dtype, n, device, ptr)
  return setmetatable({}, { __name = "gpurun.Buffer", __len = function() return n end,
    __index = { dtype = dtype, ptr = ptr or 0x7f0000000000, device = device or 0 } })
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

-- compute/fft.lua loaded afresh over a stand-in of its C side, which
-- records the calls that reach it.
local function stubbed()
  local saved_core, saved = package.loaded["gpurun.fft_core"], package.loaded["gpurun.compute.fft"]
  local calls = {}
  package.loaded["gpurun.fft_core"] = {
    load = function() return nil end,
    make = function(...) calls[#calls + 1] = { "make", ... }; return "core", 256 end,
    execute = function(...) calls[#calls + 1] = { "execute", ... } end,
    close = function(...) calls[#calls + 1] = { "close", ... } end,
  }
  package.loaded["gpurun.compute.fft"] = nil
  local fft = require("gpurun.compute.fft")
  package.loaded["gpurun.fft_core"], package.loaded["gpurun.compute.fft"] = saved_core, saved
  return fft, calls
end

describe("gpurun.fft.plan", function()
  it("refuses shapes, kinds, dtypes and batches that do not fit, naming the dimension", function()
    local plan = gpurun.fft.plan
    refuses("bad argument #1 to 'gpurun.fft.plan' (shape[1] must be a positive integer, got 0)", plan, 0)
    refuses("(shape[2] must be a positive integer, got 0)", plan, { 4, 0 })
    refuses("(shape[3] must be a positive integer, got 2.5)", plan, { 4, 4, 2.5 })
    refuses("(shape[1] must be a positive integer, got string)", plan, { "4" })
    refuses("(shape must have 1 to 3 dimensions (cuFFT's plans), got 4)", plan, { 2, 2, 2, 2 })
    refuses("(shape must have 1 to 3 dimensions (cuFFT's plans), got 0)", plan, {})
    refuses("(shape must be a positive integer or a sequence of 1 to 3, got string)", plan, "8")
    refuses("bad argument #2 to 'gpurun.fft.plan' (options.kind must be 'c2c', 'r2c' or 'c2r', got 'dct')",
      plan, 8, { kind = "dct" })
    refuses("(options.dtype must be complex64 or complex128 (or float32 or float64, the same "
      .. "precisions), got 'float16')", plan, 8, { dtype = "float16" })
    refuses("(options.batch must be a positive integer, got 0)", plan, 8, { batch = 0 })
    refuses("(unknown option 'norm' (known: kind, dtype, batch, stream))", plan, 8, { norm = "ortho" })
    refuses("(options table expected, got string)", plan, 8, "c2c")
    refuses("(shape (1048576, 1048576) with batch 16384 is too large", plan, { 1 << 20, 1 << 20 },
      { batch = 1 << 14 })
    refuses("(shape (4294967296, 4294967296) with batch 1 is too large (18446744073709551616 elements))",
      plan, { 1 << 32, 1 << 32 })
    refuses("(options.stream must be a gpurun.Stream or gpurun.GraphBuilder, got number)", plan, 8,
      { stream = 1 })
  end)

  it("describes what each kind reads and writes: a real transform halves the last dimension", function()
    local fft = require("gpurun.compute.fft")
    local c2c = fft.describe("f", { 4, 6 }, { batch = 3 })
    assert.are.same({ "complex64", 72, "complex64", 72, 0x29 },
      { c2c.input, c2c.input_count, c2c.output, c2c.output_count, c2c.type })
    local r2c = fft.describe("f", { 4, 6 }, { kind = "r2c", dtype = "float64" })
    assert.are.same({ "float64", 24, "complex128", 16, 0x6a },
      { r2c.input, r2c.input_count, r2c.output, r2c.output_count, r2c.type })
    local c2r = fft.describe("f", 7, { kind = "c2r", dtype = "complex64", batch = 2 })
    assert.are.same({ "complex64", 8, "float32", 14, 0x2c },
      { c2r.input, c2r.input_count, c2r.output, c2r.output_count, c2r.type })
    assert.are.equal(0x69, fft.describe("f", { 2, 2, 2 }, { dtype = "complex128" }).type)
  end)

  it("makes the plan on the stream's device with cuFFT's type, batch and C-order shape", function()
    local fft, calls = stubbed()
    local record = fft.plan({ 4, 8 }, { kind = "r2c", batch = 2, stream = STREAM })
    assert.are.same({ "make", STREAM, 0x2a, 2, 4, 8 }, calls[1])
    assert.are.same({ "core", 256, 0 }, { record.core, record.work_size, record.device })
  end)
end)

describe("FftPlan:execute", function()
  local fft, calls, c2c, r2c, c2r
  before_each(function()
    fft, calls = stubbed()
    c2c = fft.plan(8, { batch = 2, stream = STREAM })
    r2c = fft.plan({ 2, 8 }, { kind = "r2c", stream = STREAM })
    c2r = fft.plan(8, { kind = "c2r", dtype = "complex128", stream = STREAM })
  end)

  it("checks dtypes, element counts, devices and the direction before cuFFT runs", function()
    local x = stand_in("complex64", 16)
    refuses("bad argument #1 to 'FftPlan:execute' (input must be a gpurun.Buffer, got table)",
      fft.execute, c2c, {}, x)
    refuses("bad argument #1 to 'FftPlan:execute' (input has dtype float32; the c2c plan's input is "
      .. "complex64)", fft.execute, c2c, stand_in("float32", 16), x)
    refuses("bad argument #2 to 'FftPlan:execute' (output has 15 elements; the c2c plan of shape (8,) "
      .. "and batch 2 writes 16)", fft.execute, c2c, x, stand_in("complex64", 15))
    refuses("(output has 16 elements; the r2c plan of shape (2, 8) writes 10 (its last dimension "
      .. "8 // 2 + 1 = 5))", fft.execute, r2c, stand_in("float32", 16), stand_in("complex64", 16))
    refuses("(input has 8 elements; the c2r plan of shape (8,) reads 5 (its last dimension 8 // 2 + 1 "
      .. "= 5))", fft.execute, c2r, stand_in("complex128", 8), stand_in("float64", 8))
    refuses("(output is on device 1 but the plan on device 0)", fft.execute, c2c, x,
      stand_in("complex64", 16, 1))
    refuses("(a r2c transform is out of place: output must not be input)", fft.execute, r2c,
      stand_in("float32", 16, 0, 0x1000), stand_in("complex64", 10, 0, 0x1000))
    refuses("bad argument #3 to 'FftPlan:execute' (options.direction must be 'forward' or 'inverse', "
      .. "got 'backward')", fft.execute, c2c, x, x, { direction = "backward", stream = STREAM })
    refuses("(a c2r plan runs inverse only, not forward)", fft.execute, c2r, stand_in("complex128", 5),
      stand_in("float64", 8, 0, 0x2000), { direction = "forward", stream = STREAM })
    refuses("(unknown option 'n' (known: direction, stream))", fft.execute, c2c, x, x, { n = 8 })
    local other = setmetatable({}, { __name = "gpurun.Stream", __index = { device = 1 } })
    refuses("(the stream is on device 1 but the plan on device 0)", fft.execute, c2c, x, x,
      { stream = other })
    assert.are.equal(3, #calls) -- the three plans made; nothing run
  end)

  it("passes cuFFT's direction: c2c forward by default, c2r inverse, in place for c2c", function()
    local x = stand_in("complex64", 16)
    fft.execute(c2c, x, x, { stream = STREAM })
    fft.execute(c2c, x, x, { direction = "inverse", stream = STREAM })
    fft.execute(c2r, stand_in("complex128", 5), stand_in("float64", 8, 0, 0x2000), { stream = STREAM })
    assert.are.same({ "execute", "core", STREAM, x, x, -1, 16, 16 }, calls[4])
    assert.are.equal(1, calls[5][6])
    assert.are.same({ 1, 5, 8 }, { calls[6][6], calls[6][7], calls[6][8] })
  end)
end)

describe("gpurun.fft's one-call functions", function()
  it("refuse what does not fit before making a plan", function()
    refuses("bad argument #1 to 'gpurun.fft.fft' (gpurun.Buffer expected, got number)", gpurun.fft.fft, 5)
    refuses("bad argument #1 to 'gpurun.fft.fft' (x has dtype float32; gpurun.fft.fft takes complex64 "
      .. "or complex128)", gpurun.fft.fft, stand_in("float32", 8))
    refuses("(x has dtype complex64; gpurun.fft.rfft takes float32 or float64)", gpurun.fft.rfft,
      stand_in("complex64", 8))
    refuses("(x has 10 elements, not a whole number of rows of 4 (n = 4))", gpurun.fft.ifft,
      stand_in("complex64", 10), { n = 4, stream = STREAM })
    refuses("(x has 10 elements, not a whole number of rows of 6 (n = 10))", gpurun.fft.irfft,
      stand_in("complex128", 10), { n = 10, stream = STREAM })
    refuses("bad argument #2 to 'gpurun.fft.rfft' (options.n must be a positive integer, got 0)",
      gpurun.fft.rfft, stand_in("float32", 8), { n = 0 })
    refuses("(unknown option 'norm' (known: n, stream))", gpurun.fft.fft, stand_in("complex64", 8),
      { norm = "ortho" })
    refuses("(x is on device 1 but the stream on device 0)", gpurun.fft.fft, stand_in("complex64", 8, 1),
      { stream = STREAM })
  end)
end)

describe("cuFFT's loader", function()
  local CHUNK = [[
    local gpurun = require("gpurun")
    print(package.loaded["gpurun.fft_core"].load())
  ]]

  it("says in one line why it cannot be loaded", function()
    local result = process.run(process.quote(process.gpurun_bin()) .. " -e " .. process.quote(CHUNK),
      { env = { GPURUN_CUFFT_LIBRARY = "/nonexistent/libcufft.so.12" } })
    assert.are.equal(0, result.code, result.stderr)
    assert.are.equal("cuFFT could not be loaded (/nonexistent/libcufft.so.12: cannot open shared object "
      .. "file: No such file or directory); install the CUDA toolkit's cuFFT (libcufft.so beside "
      .. "libnvrtc, NVIDIA's libcufft package) or set GPURUN_CUFFT_LIBRARY to the library's path\n",
      result.stdout)
  end)

  it("finds the toolkit's cuFFT beside libnvrtc with no setting", function()
    local result = process.run(process.quote(process.gpurun_bin()) .. " -e " .. process.quote(CHUNK))
    assert.are.equal("nil\n", result.stdout, result.stderr)
  end)
end)

-- ---- on the GPU ------------------------------------------------------------------

-- The DFT of each batch item of (re, im) in C order, along every axis:
-- sign -1 forward, +1 inverse (unnormalised), as cuFFT defines them.
local function host_dft(re, im, shape, batch, sign)
  local total = 1
  for _, n in ipairs(shape) do total = total * n end
  re, im = table.move(re, 1, #re, 1, {}), table.move(im, 1, #im, 1, {})
  for item = 0, batch - 1 do
    local stride = total
    for _, n in ipairs(shape) do
      stride = stride // n
      for start = 0, total - 1 do
        if (start // stride) % n == 0 then -- the first element of a line along this axis
          local base = item * total + start
          local line_re, line_im = {}, {}
          for k = 0, n - 1 do
            local sum_re, sum_im = 0.0, 0.0
            for j = 0, n - 1 do
              local angle = sign * 2 * math.pi * ((j * k) % n) / n
              local x_re, x_im = re[base + j * stride + 1], im[base + j * stride + 1]
              sum_re = sum_re + x_re * math.cos(angle) - x_im * math.sin(angle)
              sum_im = sum_im + x_re * math.sin(angle) + x_im * math.cos(angle)
            end
            line_re[k], line_im[k] = sum_re, sum_im
          end
          for k = 0, n - 1 do
            re[base + k * stride + 1], im[base + k * stride + 1] = line_re[k], line_im[k]
          end
        end
      end
    end
  end
  return re, im
end

-- Keeps the first n // 2 + 1 of each last-dimension line.
local function halve(re, im, shape)
  local n = shape[#shape]
  local lines = #re // n
  local out_re, out_im = {}, {}
  for line = 0, lines - 1 do
    for k = 0, n // 2 do
      out_re[#out_re + 1], out_im[#out_im + 1] = re[line * n + k + 1], im[line * n + k + 1]
    end
  end
  return out_re, out_im
end

local function pairs_of(re, im)
  local out = {}
  for i = 1, #re do out[i] = { re[i], im[i] } end
  return out
end

local function parts(buffer)
  local re, im = {}, {}
  for i, pair in ipairs(buffer:to_table()) do re[i], im[i] = pair[1], pair[2] end
  return re, im
end

local TOLERANCE = { complex64 = 2e-5, complex128 = 1e-12 }

-- Every value within tolerance of the largest magnitude expected.
local function close_to(expected, got, dtype, what)
  local largest, worst = 1, 0
  for _, value in ipairs(expected) do largest = math.max(largest, math.abs(value)) end
  assert.are.equal(#expected, #got, what)
  for i, value in ipairs(expected) do worst = math.max(worst, math.abs(got[i] - value)) end
  assert(worst <= TOLERANCE[dtype] * largest, ("%s: worst error %g over %g"):format(what, worst,
    TOLERANCE[dtype] * largest))
end

local function gpu()
  local device = gpurun.Device(0)
  device:set_current()
  return device, device:create_stream()
end

local function random_parts(rng, count)
  local re, im = {}, {}
  local values = rng:random_table(2 * count)
  for i = 1, count do re[i], im[i] = values[2 * i - 1] - 0.5, values[2 * i] - 0.5 end
  return re, im
end

local CASES = {
  { shape = { 16 }, batch = 1 }, { shape = { 12 }, batch = 3 }, { shape = { 4, 6 }, batch = 2 },
  { shape = { 2, 3, 4 }, batch = 1 }, { shape = { 7 }, batch = 2 },
}

local function count_of(shape, batch, last)
  local total = batch
  for i, n in ipairs(shape) do total = total * (i == #shape and last or n) end
  return total
end

describe("gpurun.fft on a GPU", function()
  for _, dtype in ipairs({ "complex64", "complex128" }) do
    local real = dtype == "complex64" and "float32" or "float64"
    for _, case in ipairs(CASES) do
      local label = ("%s shape (%s) batch %d"):format(dtype, table.concat(case.shape, ", "), case.batch)

      it("runs c2c forward and inverse as the host DFT, " .. label .. " #gpu", function()
        local _, stream = gpu()
        local count = count_of(case.shape, case.batch, case.shape[#case.shape])
        local re, im = random_parts(gpurun.default_rng(count), count)
        local x = gpurun.array(pairs_of(re, im), dtype)
        local y = gpurun.empty(count, dtype)
        local plan <close> = gpurun.fft.plan(case.shape, { dtype = dtype, batch = case.batch, stream = stream })
        for _, direction in ipairs({ "forward", "inverse" }) do
          plan:execute(x, y, { direction = direction, stream = stream })
          stream:sync()
          local want_re, want_im = host_dft(re, im, case.shape, case.batch, direction == "forward" and -1 or 1)
          local got_re, got_im = parts(y)
          close_to(want_re, got_re, dtype, label .. " " .. direction .. " re")
          close_to(want_im, got_im, dtype, label .. " " .. direction .. " im")
        end
      end)

      it("runs r2c and c2r as the host DFT of real data, " .. label .. " #gpu", function()
        local _, stream = gpu()
        local count = count_of(case.shape, case.batch, case.shape[#case.shape])
        local re = random_parts(gpurun.default_rng(count + 1), count)
        local zeros = {}
        for i = 1, count do zeros[i] = 0.0 end
        local x = gpurun.array(re, real)
        local half = count_of(case.shape, case.batch, case.shape[#case.shape] // 2 + 1)
        local spectrum = gpurun.empty(half, dtype)
        local r2c <close> = gpurun.fft.plan(case.shape, { kind = "r2c", dtype = dtype, batch = case.batch,
                                                          stream = stream })
        r2c:execute(x, spectrum, { stream = stream })
        stream:sync()
        local full_re, full_im = host_dft(re, zeros, case.shape, case.batch, -1)
        local want_re, want_im = halve(full_re, full_im, case.shape)
        local got_re, got_im = parts(spectrum)
        close_to(want_re, got_re, dtype, label .. " r2c re")
        close_to(want_im, got_im, dtype, label .. " r2c im")
        -- c2r of a real signal's half spectrum: the signal times its size
        local back = gpurun.empty(count, real)
        local c2r <close> = gpurun.fft.plan(case.shape, { kind = "c2r", dtype = dtype, batch = case.batch,
                                                          stream = stream })
        c2r:execute(spectrum, back, { stream = stream })
        stream:sync()
        local size = count // case.batch
        local scaled = {}
        for i = 1, count do scaled[i] = re[i] * size end
        close_to(scaled, back:to_table(), dtype, label .. " c2r")
      end)
    end
  end

  it("has one-call fft, ifft, rfft and irfft, each returning a new buffer #gpu", function()
    local _, stream = gpu()
    local re, im = random_parts(gpurun.default_rng(5), 32)
    local x = gpurun.array(pairs_of(re, im), "complex128")
    local y = gpurun.fft.fft(x, { n = 8, stream = stream })
    local back = gpurun.fft.ifft(y, { n = 8, stream = stream })
    stream:sync()
    local want_re, want_im = host_dft(re, im, { 8 }, 4, -1)
    local got_re, got_im = parts(y)
    close_to(want_re, got_re, "complex128", "fft re")
    close_to(want_im, got_im, "complex128", "fft im")
    local back_re = parts(back)
    for i = 1, 32 do back_re[i] = back_re[i] / 8 end -- unnormalised: n times the input
    close_to(re, back_re, "complex128", "ifft")
    local signal = gpurun.array(re, "float64")
    local spectrum = gpurun.fft.rfft(signal, { stream = stream })
    assert.are.same({ 17, "complex128" }, { #spectrum, spectrum.dtype })
    local restored = gpurun.fft.irfft(spectrum, { stream = stream })
    local again = gpurun.fft.irfft(spectrum, { stream = stream }) -- its input is left as it was
    stream:sync()
    assert.are.same({ 32, "float64" }, { #restored, restored.dtype })
    local scaled = {}
    for i = 1, 32 do scaled[i] = re[i] * 32 end
    close_to(scaled, restored:to_table(), "complex128", "irfft")
    close_to(scaled, again:to_table(), "complex128", "irfft again")
    gpurun.fft.clear_cache()
  end)

  it("lands in the graph of a capture, and a replay reads the input anew #gpu", function()
    local _, stream = gpu()
    local count = 64
    local x = gpurun.zeros(count, "complex64")
    local y = gpurun.zeros(count, "complex64")
    local plan = gpurun.fft.plan({ 8, 8 }, { stream = stream })
    local builder = stream:create_graph_builder()
    builder:begin_building()
    plan:execute(x, y, { stream = builder })
    builder:end_building()
    local graph = builder:complete()
    stream:sync()
    assert.are.same({ 0.0, 0.0 }, y:get(1)) -- captured, not run
    assert.matches("gpurun.FftPlan is used by %d graph%(s%) or graph builder%(s%); close them first",
      error_of(plan.close, plan))
    for round = 1, 2 do
      local re, im = random_parts(gpurun.default_rng(round), count)
      x:copy_from(pairs_of(re, im))
      graph:launch(stream)
      stream:sync()
      local want_re, want_im = host_dft(re, im, { 8, 8 }, 1, -1)
      local got_re, got_im = parts(y)
      close_to(want_re, got_re, "complex64", "replay " .. round .. " re")
      close_to(want_im, got_im, "complex64", "replay " .. round .. " im")
    end
    graph:close()
    builder:close()
    plan:close()
    plan:close() -- idempotent
    assert.matches("attempt to use a closed gpurun.FftPlan", error_of(plan.execute, plan, x, y))
  end)

  it("ends the capture in progress when cuFFT or a check refuses a call #gpu", function()
    local _, stream = gpu()
    local x, short = gpurun.zeros(16, "complex64"), gpurun.zeros(8, "complex64")
    local plan <close> = gpurun.fft.plan(16, { stream = stream })
    local builder = stream:create_graph_builder()
    builder:begin_building()
    local message = error_of(plan.execute, plan, x, short, { stream = builder })
    assert.matches("output has 8 elements", message)
    assert.are.equal("abandoned", builder.state)
    builder:close()
  end)

  it("releases its plans: none left open after close #gpu", function()
    local _, stream = gpu()
    local core = package.loaded["gpurun.fft_core"]
    local before = core.plans()
    local plan = gpurun.fft.plan({ 4, 4, 4 }, { kind = "r2c", dtype = "float64", stream = stream })
    assert.are.equal(before + 1, core.plans())
    assert.are.equal("gpurun.FftPlan(r2c, complex128, shape (4, 4, 4), batch 1, device 0)", tostring(plan))
    assert.are.same({ 4, 4, 4 }, plan.shape)
    plan:close()
    assert.are.equal(before, core.plans())
    assert.are.equal("gpurun.FftPlan(closed)", tostring(plan))
  end)

  it("keeps complex elements as pairs on the way through a buffer and a .npy file #gpu", function()
    gpu()
    local x = gpurun.array({ { 1.5, -2 }, 3, { 0, 0.25 } }, "complex64")
    assert.are.same({ { 1.5, -2.0 }, { 3.0, 0.0 }, { 0.0, 0.25 } }, x:to_table())
    x:set(2, { -1, 1 })
    assert.are.same({ -1.0, 1.0 }, x:get(2))
    local full = gpurun.full(3, { 1, 2 }, "complex128")
    assert.are.same({ 1.0, 2.0 }, full[3])
    local path = os.tmpname() .. ".npy"
    full:save(path)
    local loaded = gpurun.load(path)
    os.remove(path)
    assert.are.same({ "complex128", 3 }, { loaded.dtype, #loaded })
    assert.are.same(full:to_table(), loaded:to_table())
    assert.matches("complex64 buffers are not compared", error_of(gpurun.allclose, x, x))
  end)
end)
