-- gpurun.dtypes and the conversions of base/dtype.c, through typed scalars
-- (no GPU needed): each stores a number exactly as a buffer element of its
-- dtype, and Scalar.bytes shows the bits. float16 and bfloat16 round to
-- nearest even from the double itself, subnormals included.
local gpurun = require("gpurun")
local process = require("spec.support.process")
local shell = require("gpurun.shell")

local NAN, INF = 0 / 0, math.huge

local function bits(scalar)
  return (string.unpack("<I2", scalar.bytes))
end

local error_of = require("spec.support.expect").error_of

describe("gpurun.dtypes", function()
  local NAMES = { "float32", "float64", "int32", "uint32", "int64", "uint64", "int8", "uint8",
                  "int16", "uint16", "float16", "bfloat16", "complex64", "complex128" }

  it("lists the 14 dtypes in order, each also under its name", function()
    assert.are.equal(14, #gpurun.dtypes)
    for index, name in ipairs(NAMES) do
      assert.are.equal(name, gpurun.dtypes[index].name)
      assert.are.equal(gpurun.dtypes[index], gpurun.dtypes[name])
    end
    local seen = 0
    for _, info in ipairs(gpurun.dtypes) do seen = seen + info.size end
    assert.are.equal(4 + 8 + 4 + 4 + 8 + 8 + 1 + 1 + 2 + 2 + 2 + 2 + 8 + 16, seen)
  end)

  it("says how each is spelled, stored and computed", function()
    local half, brain = gpurun.dtypes.float16, gpurun.dtypes.bfloat16
    assert.are.same({ "__half", "cuda_fp16.h", "float", "f16", "<f2", 2, "float", true, 11 },
      { half.c_type, half.header, half.compute_type, half.scalar, half.numpy, half.size, half.kind,
        half.float, half.digits })
    assert.are.same({ "__nv_bfloat16", "cuda_bf16.h", "float", "bf16", 2, 8 },
      { brain.c_type, brain.header, brain.compute_type, brain.scalar, brain.size, brain.digits })
    assert.is_nil(brain.numpy) -- NumPy has no bfloat16
    assert.are.same({ "int", "int", "<i4", "signed", -2147483648, 2147483647, "-2147483648..2147483647" },
      { gpurun.dtypes.int32.c_type, gpurun.dtypes.int32.compute_type, gpurun.dtypes.int32.numpy,
        gpurun.dtypes.int32.kind, gpurun.dtypes.int32.min, gpurun.dtypes.int32.max,
        gpurun.dtypes.int32.range })
    assert.are.equal("|u1", gpurun.dtypes.uint8.numpy)
    assert.is_nil(gpurun.dtypes.float32.header)
  end)

  it("gives each float its largest finite value and where rounding overflows", function()
    assert.are.same({ 65504.0, -65504.0, 65520.0 },
      { gpurun.dtypes.float16.max, gpurun.dtypes.float16.min, gpurun.dtypes.float16.overflow })
    assert.are.equal(0x1.fffffep127, gpurun.dtypes.float32.max)
    assert.are.equal(0x1.ffffffp127, gpurun.dtypes.float32.overflow)
    assert.are.equal(0x1.fep127, gpurun.dtypes.bfloat16.max)
    assert.are.equal(0x1.ffp127, gpurun.dtypes.bfloat16.overflow)
    assert.are.equal(INF, gpurun.dtypes.float64.overflow)
  end)

  it("has a typed scalar for every dtype, of its size", function()
    for _, info in ipairs(gpurun.dtypes) do
      if info.kind == "complex" then goto next_dtype end -- none: a pair is no scalar
      local scalar = gpurun[info.scalar](1)
      assert.are.equal(info.name, scalar.dtype)
      assert.are.equal(info.size, scalar.size)
      assert.are.equal(info.size, #scalar.bytes)
      assert.are.equal(1, scalar.value)
      ::next_dtype::
    end
  end)

  it("has complex64 and complex128: pairs of float32 and float64, as NumPy's <c8 and <c16", function()
    local c64, c128 = gpurun.dtypes.complex64, gpurun.dtypes.complex128
    assert.are.same({ "complex", "float32", 8, 8, "<c8", "float2", false },
      { c64.kind, c64.part, c64.size, c64.align, c64.numpy, c64.c_type, c64.float })
    assert.are.same({ "complex", "float64", 16, 16, "<c16", "double2" },
      { c128.kind, c128.part, c128.size, c128.align, c128.numpy, c128.c_type })
    assert.is_nil(c64.scalar)
    assert.is_false(c64.tensor_map)
  end)

  it("is read-only", function()
    assert.matches("gpurun.dtypes is read%-only", error_of(function() gpurun.dtypes.float32.size = 8 end))
    assert.matches("gpurun.dtypes is read%-only", error_of(function() gpurun.dtypes.float8 = {} end))
    assert.matches("gpurun.dtypes is read%-only", error_of(function() gpurun.dtypes[13] = {} end))
    assert.are.equal(4, gpurun.dtypes.float32.size)
    assert.are.equal("gpurun.dtypes", getmetatable(gpurun.dtypes))
    local keys = 0
    for _ in pairs(gpurun.dtypes.int8) do keys = keys + 1 end
    assert.is_true(keys >= 10)
  end)
end)

describe("the docs' lists of dtypes", function()
  local files = require("spec.support.files")
  local markdown = require("spec.support.markdown")
  local order = {}
  for index, info in ipairs(gpurun.dtypes) do order[info.name] = index end

  -- Every run of four or more dtype names in a text (joined by ", ", " and "
  -- or " or "), as { names, at = the text before it }.
  local function lists(text)
    text = text:gsub("%s*\n%s*", " ")
    local found, position = {}, 1
    while true do
      local first, last = text:find("%f[%w]%l+%d+%f[^%w]", position)
      if not first then break end
      local names, stop = {}, last
      local word_start, word_end = first, last
      while order[text:sub(word_start, word_end)] do
        names[#names + 1] = text:sub(word_start, word_end)
        stop = word_end
        local _, joint = text:find("^`?,? `?", word_end + 1)
        if not joint then break end
        local _, conj = text:find("^and `?", joint + 1)
        if not conj then _, conj = text:find("^or `?", joint + 1) end
        word_start, word_end = text:find("^%l+%d+%f[^%w]", (conj or joint) + 1)
        if not word_start then break end
      end
      if #names >= 4 then found[#found + 1] = { names = names, at = text:sub(math.max(1, first - 60), first - 1) } end
      position = stop + 1
    end
    return found
  end

  it("name them in gpurun.dtypes' order", function()
    for _, path in ipairs(markdown.doc_files()) do
      for _, list in ipairs(lists(assert(files.read(path)))) do
        for k = 2, #list.names do
          assert(order[list.names[k - 1]] < order[list.names[k]], ("%s: '...%s' lists %s, not in gpurun.dtypes' order")
            :format(path, list.at, table.concat(list.names, ", ")))
        end
      end
    end
  end)

  it("name every dtype where they say what a buffer or an elementwise parameter can be", function()
    local every = {}
    for index, info in ipairs(gpurun.dtypes) do every[index] = info.name end
    local api = assert(files.read("docs/api.md"))
    local places = {
      { "docs/api.md's Buffers row", api:match("\n| %*%*Buffers%*%* |[^\n]*") },
      { "docs/api.md's Buffers section", api:match("\n## Buffers\n\n([^\n]*\n[^\n]*\n)") },
      { "docs/elementwise.md's parameters", assert(files.read("docs/elementwise.md")):match("%*%*Parameters%*%*.-\n%-"),
        real = true },
    }
    local real = {}
    for _, name in ipairs(every) do
      if gpurun.dtypes[name].kind ~= "complex" then real[#real + 1] = name end
    end
    for _, place in ipairs(places) do
      local found = lists(assert(place[2], place[1] .. " not found"))
      assert(#found == 1, place[1] .. ": no list of dtypes")
      assert.are.same(place.real and real or every, found[1].names, place[1])
    end
  end)
end)

describe("float16 conversion", function()
  -- value -> IEEE binary16 bits, as NumPy's np.float16(value).view(np.uint16)
  for _, case in ipairs({
    { 1.0, 0x3c00 }, { -2.0, 0xc000 }, { 0.5, 0x3800 }, { 65504, 0x7bff }, { -65504, 0xfbff },
    { 1 / 3, 0x3555 }, { 0.1, 0x2e66 }, { 0.0, 0x0000 }, { -0.0, 0x8000 },
    { 2 ^ -14, 0x0400 },                  -- the least normal
    { 2 ^ -24, 0x0001 },                  -- the least subnormal
    { 2 ^ -14 - 2 ^ -24, 0x03ff },        -- the largest subnormal
    { 2 ^ -25, 0x0000 },                  -- half the least subnormal: a tie, to even (zero)
    { 3 * 2 ^ -25, 0x0002 },              -- 1.5 subnormal steps: a tie, to even (2)
    { 2 ^ -25 * 1.0001, 0x0001 },         -- above the tie
    { 2 ^ -14 - 2 ^ -25, 0x0400 },        -- a tie that rounds up into the normals
    { 1 + 2 ^ -11, 0x3c00 },              -- a tie at 1: to even
    { 1 + 3 * 2 ^ -11, 0x3c02 },          -- a tie at the next: to even, upwards
    { 1 + 2 ^ -11 + 2 ^ -40, 0x3c01 },    -- just above the tie (float32 first would lose it)
    { 2049, 0x6800 }, { 2051, 0x6802 },   -- integers past 2048 round to even
    { 65519.99, 0x7bff },                 -- below the overflow threshold: the largest
    { INF, 0x7c00 }, { -INF, 0xfc00 },
  }) do
    it(("stores %.17g as 0x%04x"):format(case[1], case[2]), function()
      assert.are.equal(case[2], bits(gpurun.f16(case[1])))
    end)
  end

  it("stores NaN as a quiet NaN and reads it back as NaN", function()
    local scalar = gpurun.f16(NAN)
    assert.are.equal(0x7e00, bits(scalar) & 0x7fff)
    assert.is_true(scalar.value ~= scalar.value)
  end)

  it("reads back the exact value it stored", function()
    assert.are.equal(0.333251953125, gpurun.f16(1 / 3).value)
    assert.are.equal(0.0999755859375, gpurun.f16(0.1).value)
    assert.are.equal(2 ^ -24, gpurun.f16(2 ^ -24).value)
    assert.are.equal(65504.0, gpurun.f16(65519).value)
    assert.are.equal(-INF, gpurun.f16(-INF).value)
    assert.are.equal(2048.0, gpurun.f16(2049).value)
    assert.are.equal(math.type(gpurun.f16(1).value), "float")
  end)

  it("refuses a finite value that rounds to infinity, as float32 does", function()
    for _, value in ipairs({ 65520, -65520, 1e5, 1e300 }) do
      assert.matches("out of range for float16", error_of(gpurun.f16, value))
    end
    assert.matches("number expected, got string", error_of(gpurun.f16, "1"))
  end)
end)

describe("bfloat16 conversion", function()
  -- value -> bfloat16 bits (float32's top half, rounded to nearest even)
  for _, case in ipairs({
    { 1.0, 0x3f80 }, { -1.0, 0xbf80 }, { 1 / 3, 0x3eab }, { 0.1, 0x3dcd }, { 3.0, 0x4040 },
    { 0x1.fep127, 0x7f7f },                -- the largest finite
    { 2 ^ -126, 0x0080 },                  -- the least normal
    { 2 ^ -133, 0x0001 },                  -- the least subnormal
    { 2 ^ -134, 0x0000 },                  -- half of it: a tie, to even (zero)
    { 1 + 2 ^ -8, 0x3f80 },                -- a tie at 1: to even
    { 1 + 3 * 2 ^ -8, 0x3f82 },            -- the next tie: to even, upwards
    { 1 + 2 ^ -8 + 2 ^ -30, 0x3f81 },      -- just above the tie (float32 first would round to 1)
    { 0x1.fefffp127, 0x7f7f },             -- below the overflow threshold
    { INF, 0x7f80 }, { -INF, 0xff80 }, { -0.0, 0x8000 },
  }) do
    it(("stores %.17g as 0x%04x"):format(case[1], case[2]), function()
      assert.are.equal(case[2], bits(gpurun.bf16(case[1])))
    end)
  end

  it("stores NaN as a quiet NaN", function()
    assert.are.equal(0x7fc0, bits(gpurun.bf16(NAN)) & 0x7fff)
  end)

  it("reads back the exact value it stored", function()
    assert.are.equal(0.333984375, gpurun.bf16(1 / 3).value)
    assert.are.equal(0.10009765625, gpurun.bf16(0.1).value)
    assert.are.equal(2 ^ -133, gpurun.bf16(2 ^ -133).value)
    assert.are.equal(0x1.fep127, gpurun.bf16(0x1.fep127).value)
  end)

  it("refuses a finite value that rounds to infinity", function()
    for _, value in ipairs({ 0x1.ffp127, -0x1.ffp127, 1e39 }) do
      assert.matches("out of range for bfloat16", error_of(gpurun.bf16, value))
    end
  end)
end)

describe("the 16-bit float conversions in C", function()
  it("agree with the compiler's _Float16 and a reference rounding on every pattern and 10^6 doubles", function()
    local binary = shell.dirname(process.gpurun_bin()) .. "/tests/dtype_test"
    assert.is_true(shell.file_exists(binary), "not built: " .. binary)
    local result = process.run(process.quote(binary))
    assert.are.equal(0, result.code, result.stdout .. result.stderr)
    assert.matches("dtype_test: %d+ checks, 0 failed\n$", result.stdout)
  end)
end)

describe("the float32 rule", function()
  it("refuses from FLT_MAX plus half an ulp, and rounds below it", function()
    assert.matches("out of range for float32", error_of(gpurun.f32, 0x1.ffffffp127))
    assert.are.equal(0x1.fffffep127, gpurun.f32(0x1.fffffefffffffp127).value)
    assert.are.equal(INF, gpurun.f32(INF).value)
  end)
end)
