-- gpurun.device_rng: the host reference of Philox4x32-10 against the
-- published known answers; the generated CUDA C through NVRTC; the
-- kernels run on the CPU (spec/support/emulated_gpu.lua: blocks racing on
-- OS threads) against the host reference, element for element, with the
-- state they leave and every argument check; and on the device (#gpu).
local gpurun = require("gpurun")
local expect = require("spec.support.expect")
local philox = require("spec.support.philox")
local emulated = require("spec.support.emulated_gpu")

local function check(cond, fmt, ...)
  if not cond then error(fmt:format(...), 2) end
end

local function refuses(pattern, f, ...)
  local ok, message = pcall(f, ...)
  assert.is_false(ok, "expected an error matching " .. pattern)
  assert.truthy(tostring(message):find(pattern, 1, true), ("%q does not contain %q"):format(tostring(message),
    pattern))
end

-- 64-bit uniform fractions (float64's 53 bits) from the host words.
local function host_random64(seed, offset, n)
  local words = philox.words(seed, offset, 2 * n)
  local list = {}
  for i = 1, n do
    list[i] = (((words[2 * i - 1] << 32) | words[2 * i]) >> 11) * 2.0 ^ -53
  end
  return list
end

local function same(got, want, what)
  check(#got >= #want, "%s: %d values, want %d", what, #got, #want)
  for i = 1, #want do
    check(got[i] == want[i], "%s: element %d is %s, want %s", what, i, tostring(got[i]), tostring(want[i]))
  end
end

-- `rounds` rounds of the four fills into given buffers, after `warm`
-- rounds and one more: the bytes the collector counted during them.
local function growth(gen, out, ints, opts, warm, rounds)
  local function round()
    gen:random(out, opts)
    gen:uniform(out, -1, 1, opts)
    gen:normal(out, 0, 1, opts)
    gen:integers(ints, -5, 5, opts)
  end
  return expect.bytes_allocated(round, rounds, warm)
end

describe("Philox4x32-10's host reference", function()
  it("gives Random123's known answers (kat_vectors, philox4x32_10)", function()
    local cases = {
      { { 0, 0, 0, 0 }, { 0, 0 }, { 0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8 } },
      { { 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff }, { 0xffffffff, 0xffffffff },
        { 0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd } },
      { { 0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344 }, { 0xa4093822, 0x299f31d0 },
        { 0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1 } },
    }
    for _, case in ipairs(cases) do
      local c, k = case[1], case[2]
      assert.same(case[3], { philox.block(c[1], c[2], c[3], c[4], k[1], k[2]) })
    end
  end)
end)

describe("device_rng's generated CUDA C", function()
  it("compiles through NVRTC for every dtype, with a kernel per kind", function()
    local source = require("gpurun.compute.random_source")
    local options = gpurun.ProgramOptions{ std = "c++17", arch = "sm_90" }
    for _, dtype in ipairs(gpurun.dtypes) do
      if dtype.kind == "complex" then goto next_dtype end -- refused (see the bad-input rows)
      local text, names = source.source(dtype.name)
      local ptx = gpurun.Program(text, "c++", options):compile("ptx").code
      for _, kind in ipairs(source.kinds(dtype.name)) do
        assert.truthy(ptx:find(".entry " .. names[kind], 1, true), dtype.name .. " " .. kind)
      end
      ::next_dtype::
    end
  end)
end)

describe("device_rng on the emulated GPU", function()
  if not emulated.available() then
    pending("no g++ to compile the emulated kernels")
    return
  end

  it("writes Philox's words as the host reference does, and moves the offset past them", function()
    local session <close> = emulated.session{ multiprocessors = 2 }
    local stream = session.stream
    local opts = { stream = stream }
    local cases = {}
    for _, seed in ipairs{ 0, 42, 0x123456789abcdef } do
      for _, offset in ipairs{ 0, 7, 0xfffffffe } do
        local gen = gpurun.device_rng(seed)
        gen:set_state{ seed = seed, offset = offset, stream = stream }
        local case = { gen = gen, seed = seed, offset = offset }
        case.bits = gen:integers(1001, 0, 1 << 32, "uint32", opts)     -- 2 words each: 501 counters
        case.f32 = gen:random(session:zeros(4099, "float32"), opts)     -- a whole burst per block and a tail
        case.f64 = gen:random(37, "float64", opts)
        case.f16 = gen:random(9, "float16", opts)
        case.bf16 = gen:random(6, "bfloat16", opts)
        -- a view one element in: not 16-byte aligned, element by element
        local base = session:zeros(10, "float32")
        case.view = gen:random(base:view(2, 9), opts)
        cases[#cases + 1] = case
      end
    end
    session:run()
    for _, case in ipairs(cases) do
      local what = ("seed %d offset %d"):format(case.seed, case.offset)
      local at = case.offset
      local words = philox.words(case.seed, at, 2 * 1001)
      local bits = {}
      for i = 1, 1001 do bits[i] = words[2 * i - 1] end
      same(case.bits:to_table(), bits, what .. " uint32")
      at = at + philox.counters(1001, 2)
      same(case.f32:to_table(), philox.random(case.seed, at, 4099, 24), what .. " float32")
      at = at + philox.counters(4099, 1)
      same(case.f64:to_table(), host_random64(case.seed, at, 37), what .. " float64")
      at = at + philox.counters(37, 2)
      same(case.f16:to_table(), philox.random(case.seed, at, 9, 11), what .. " float16")
      at = at + philox.counters(9, 1)
      same(case.bf16:to_table(), philox.random(case.seed, at, 6, 8), what .. " bfloat16")
      at = at + philox.counters(6, 1)
      same(case.view:to_table(), philox.random(case.seed, at, 9, 24), what .. " view")
      at = at + philox.counters(9, 1)
      local state = case.gen:get_state()
      assert.equal(case.seed, state.seed)
      assert.equal(at, state.offset)
    end
  end)

  it("draws integers in range, uniform in [low, high), normal with the mean and spread asked", function()
    local session <close> = emulated.session{ multiprocessors = 2 }
    local opts = { stream = session.stream }
    local gen = gpurun.device_rng(5)
    local ints = {}
    for _, case in ipairs{ { "int8", -128, 128 }, { "uint8", 0, 256 }, { "int16", -3, 4 }, { "uint16", 10, 11 },
                           { "int32", -2147483648, 2147483648 }, { "uint32", 7, 4000000000 },
                           { "int64", math.mininteger, math.maxinteger }, { "uint64", 0, 1 << 62 },
                           { "int64", -5, 5 } } do
      ints[#ints + 1] = { case = case, out = gen:integers(2001, case[2], case[3], case[1], opts) }
    end
    local f32 = gen:uniform(8000, -2.5, 4.0, "float32", opts)
    local f16 = gen:uniform(4000, 1000, 1001, "float16", opts) -- a range of one unit near half's precision
    local f64 = gen:uniform(4000, 1, 1 + 2 ^ -40, "float64", opts)
    local normal = gen:normal(1 << 14, 3.0, 2.0, "float32", opts)
    local normal64 = gen:normal(1 << 13, -1.0, 0.5, "float64", opts)
    session:run()
    for _, entry in ipairs(ints) do
      local dtype, low, high = table.unpack(entry.case)
      local seen = {}
      for i, v in ipairs(entry.out:to_table()) do
        check(v >= low and v <= high - 1, "%s element %d: %d not in [%d, %d)", dtype, i, v, low, high)
        seen[v] = true
      end
      if high - low <= 7 and high - low > 0 then
        for v = low, high - 1 do check(seen[v], "%s: %d never drawn from [%d, %d)", dtype, v, low, high) end
      end
    end
    for _, case in ipairs{ { f32, -2.5, 4.0 }, { f16, 1000, 1001 }, { f64, 1, 1 + 2 ^ -40 } } do
      for i, v in ipairs(case[1]:to_table()) do
        check(v >= case[2] and v < case[3], "element %d: %.17g not in [%.17g, %.17g)", i, v, case[2], case[3])
      end
    end
    for _, case in ipairs{ { normal, 3.0, 2.0 }, { normal64, -1.0, 0.5 } } do
      local values = case[1]:to_table()
      local sum, squares = 0, 0
      for _, v in ipairs(values) do sum = sum + v end
      local mean = sum / #values
      for _, v in ipairs(values) do squares = squares + (v - mean) ^ 2 end
      local std = math.sqrt(squares / (#values - 1))
      -- 5 standard errors: the mean's is std / sqrt(n), the std's about std / sqrt(2n)
      check(math.abs(mean - case[2]) < 5 * case[3] / math.sqrt(#values), "mean %g, want %g", mean, case[2])
      check(math.abs(std - case[3]) < 5 * case[3] / math.sqrt(2 * #values), "std %g, want %g", std, case[3])
    end
  end)


  it("fills a given buffer with no table or string made once its kernels are loaded", function()
    local session <close> = emulated.session{ multiprocessors = 2 }
    local gen = gpurun.device_rng(3)
    local out, ints = session:zeros(64, "float32"), session:zeros(64, "int16")
    local opts = { stream = session.stream }
    growth(gen, out, ints, opts, 3, 0) -- the kernels and the launch shapes are made
    local launches = 0
    gpurun.launch = function() launches = launches + 1 end -- the session puts its own back
    assert.equal(0, growth(gen, out, ints, opts, 0, 1000))
    assert.equal(4004, launches)
  end)

  it("refuses every bad argument, naming it, before anything runs", function()
    local session <close> = emulated.session{ multiprocessors = 2 }
    local stream = session.stream
    local opts = { stream = stream }
    local gen = gpurun.device_rng(1)
    local f32, i32 = session:zeros(8, "float32"), session:zeros(8, "int32")
    refuses("bad argument #1 to 'gpurun.device_rng' (integer seed expected, got 1.5)", gpurun.device_rng, 1.5)
    refuses("integer seed expected, got no value", gpurun.device_rng)
    refuses("calling 'DeviceGenerator:random' on bad self (gpurun.DeviceGenerator expected, got number)",
            gen.random, 42, 8)
    for _, method in ipairs{ "random", "uniform", "normal", "integers" } do
      refuses("gpurun.Buffer or positive element count expected, got 0", gen[method], gen, 0, 0, 1)
      refuses("gpurun.Buffer or positive element count expected, got string", gen[method], gen, "8", 0, 1)
    end
    refuses("no stream: pass { stream = s }", gen.random, gen, 8)
    refuses("unknown option 'strem'", gen.random, gen, 8, { strem = stream })
    refuses("options table expected, got string", gen.random, gen, 8, "float32", "fast")
    refuses("options.stream must be a gpurun.Stream or gpurun.GraphBuilder, got number", gen.random, gen, 8,
            { stream = 3 })
    refuses("unknown dtype 'float8'", gen.random, gen, 8, "float8", opts)
    refuses("dtype name expected, got number", gen.random, gen, 8, 4, opts)
    refuses("bad argument #2 to 'DeviceGenerator:random' (float dtype (float32, float64, float16, bfloat16) "
            .. "expected, got int32 (integers() makes integer buffers)", gen.random, gen, 8, "int32", opts)
    refuses("float dtype (float32, float64, float16, bfloat16) expected, got int32", gen.random, gen, i32, opts)
    refuses("dtype float64 does not match the buffer's, float32", gen.random, gen, f32, "float64", opts)
    refuses("integer dtype expected, got float32 (random() makes float buffers)", gen.integers, gen, f32, 0, 4, opts)
    refuses("number expected for low, got string", gen.uniform, gen, 8, "0", 1, opts)
    refuses("high must be finite, got inf", gen.uniform, gen, 8, 0, math.huge, opts)
    refuses("low must be finite, got", gen.uniform, gen, 8, 0 / 0, 1, opts)
    refuses("high (1) must be greater than low (1)", gen.uniform, gen, 8, 1, 1, opts)
    refuses("high - low finite", gen.uniform, gen, 8, -1e308, 1e308, opts)
    refuses("range [0, 70000) does not fit float16 (largest 65504)", gen.uniform, gen, 8, 0, 70000,
            "float16", opts)
    refuses("std must be 0 or more, got -1", gen.normal, gen, 8, 0, -1, opts)
    refuses("mean must be finite", gen.normal, gen, 8, math.huge, 1, opts)
    refuses("number expected, got table", gen.integers, gen, 8, {}, 1, opts)
    refuses("bad argument #3 to 'DeviceGenerator:integers' (number has no integer representation)",
            gen.integers, gen, 8, 0, 1.5, opts)
    refuses("high (5) must be greater than low (5)", gen.integers, gen, 8, 5, 5, opts)
    refuses("range [0, 300) does not fit uint8 (0..255)", gen.integers, gen, 8, 0, 300, "uint8", opts)
    refuses("range [-1, 10) does not fit uint32", gen.integers, gen, 8, -1, 10, "uint32", opts)
    refuses("table { seed =, offset =, stream = } expected, got number", gen.set_state, gen, 3)
    refuses("integer seed expected, got nil", gen.set_state, gen, {})
    refuses("unknown option 'sed'", gen.set_state, gen, { sed = 1 })
    refuses("offset must be an integer of 0 or more, got -1", gen.set_state, gen, { seed = 1, offset = -1 })
    refuses("offset must be an integer of 0 or more, got 0.5", gen.set_state, gen, { seed = 1, offset = 0.5 })
    refuses("stream must be a gpurun.Stream or gpurun.GraphBuilder, got string", gen.set_state, gen,
            { seed = 1, stream = "s" })
    refuses("options.stream must be a gpurun.Stream (the state is read now", gen.get_state, gen,
            { stream = session.builder })
    refuses("pass the buffer to fill on a gpurun.GraphBuilder", gen.random, gen, 8, { stream = session.builder })
    refuses("the float64 kernels are compiled on their first use; make one float64 fill on a stream before "
            .. "capturing", gen.random, gen, session:zeros(4, "float64"), { stream = session.builder })
    assert.equal(0, session.launches)
    gen:close()
    gen:close()
    refuses("attempt to use a closed gpurun.DeviceGenerator", gen.random, gen, 8, opts)
    assert.equal("gpurun.DeviceGenerator(closed)", tostring(gen))
  end)
end)

describe("device_rng on the device", function()
  local device, stream
  local function setup()
    if not device then
      device = gpurun.Device(0)
      device:set_current()
      stream = device:create_stream()
    end
    return stream
  end

  it("matches the host reference bit for bit: uint32 draws and float32 uniforms #gpu", function()
    local s = setup()
    for _, seed in ipairs{ 0, 1, 0x0123456789abcdef } do
      for _, offset in ipairs{ 0, 3, (1 << 32) - 2 } do
        local gen <close> = gpurun.device_rng(seed)
        gen:set_state{ seed = seed, offset = offset, stream = s }
        local n = 100003
        local bits = gen:integers(n, 0, 1 << 32, "uint32", { stream = s })
        local floats = gen:random(n, "float32", { stream = s })
        local words = philox.words(seed, offset, 2 * n)
        local want = {}
        for i = 1, n do want[i] = words[2 * i - 1] end
        same(bits:to_table(s), want, "uint32")
        same(floats:to_table(s), philox.random(seed, offset + philox.counters(n, 2), n, 24), "float32")
        local state = gen:get_state{ stream = s }
        assert.equal(seed, state.seed)
        assert.equal(offset + philox.counters(n, 2) + philox.counters(n, 1), state.offset)
        bits:close()
        floats:close()
      end
    end
  end)

  it("draws normals with mean and variance near those asked at 2^20, and integers in range #gpu", function()
    local s = setup()
    local gen <close> = gpurun.device_rng(2024)
    local x <close> = gen:normal(1 << 20, 1.5, 3.0, "float32", { stream = s })
    local values = x:to_table(s)
    local sum, squares = 0, 0
    for _, v in ipairs(values) do sum = sum + v end
    local mean = sum / #values
    for _, v in ipairs(values) do squares = squares + (v - mean) ^ 2 end
    local std = math.sqrt(squares / (#values - 1))
    check(math.abs(mean - 1.5) < 5 * 3.0 / 1024, "mean %g", mean)
    check(math.abs(std - 3.0) < 5 * 3.0 / math.sqrt(2 << 20), "std %g", std)
    for _, dtype in ipairs{ "int8", "uint16", "int32", "uint32", "int64", "uint64" } do
      local out <close> = gen:integers(1 << 16, 3, 100, dtype, { stream = s })
      for i, v in ipairs(out:to_table(s)) do
        check(v >= 3 and v < 100, "%s element %d: %d", dtype, i, v)
      end
    end
  end)

  it("allocates nothing per fill into a given buffer once its kernels are loaded #gpu", function()
    local s = setup()
    local gen <close> = gpurun.device_rng(9)
    local out <close> = gpurun.empty(4096, "float32")
    local ints <close> = gpurun.empty(4096, "int16")
    local opts = { stream = s }
    assert.are.equal(0, growth(gen, out, ints, opts, 4, 1000))
    s:sync()
  end)

  it("draws new numbers at each replay of a captured fill; set_state reproduces them #gpu", function()
    local s = setup()
    local gen <close> = gpurun.device_rng(77)
    local out <close> = gpurun.empty(1 << 16, "float32")
    gen:random(out, { stream = s }) -- loads the float32 kernels before the capture
    gen:set_state{ seed = 77, offset = 0, stream = s }
    local builder <close> = s:create_graph_builder()
    builder:begin_building()
    gen:random(out, { stream = builder })
    builder:end_building()
    local graph <close> = builder:complete()
    graph:launch(s)
    local first = out:to_table(s)
    graph:launch(s)
    local second = out:to_table(s)
    local differing = 0
    for i = 1, #first do
      if first[i] ~= second[i] then differing = differing + 1 end
    end
    check(differing > #first * 0.99, "only %d of %d elements differ between replays", differing, #first)
    same(second, philox.random(77, philox.counters(#out, 1), #out, 24), "second replay")
    assert.equal(2 * philox.counters(#out, 1), gen:get_state{ stream = s }.offset)
    gen:set_state{ seed = 77, offset = 0, stream = s }
    graph:launch(s)
    same(out:to_table(s), first, "replay after set_state")
  end)
end)
