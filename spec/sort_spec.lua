-- gpurun.sort, gpurun.lower_bound and gpurun.upper_bound. The generated
-- CUDA C compiled by NVRTC for sm_90 (no GPU), the argument checks on
-- stand-in buffers, and what the kernels compute run through the emulator
-- (spec/support/emulated_gpu.lua: g++, every CUDA thread a fiber) against
-- host references run everywhere; the same checks on the device, graphs
-- and their replays are the #gpu ones.
local gpurun = require("gpurun")
local sort_source = require("gpurun.compute.sort_source")
local emulated = require("spec.support.emulated_gpu")

local ALL_DTYPES = { "float32", "float64", "int32", "uint32", "int64", "uint64", "int8", "uint8",
                     "int16", "uint16", "float16", "bfloat16" }
local SIZE = { float32 = 4, float64 = 8, int32 = 4, uint32 = 4, int64 = 8, uint64 = 8, int8 = 1, uint8 = 1,
               int16 = 2, uint16 = 2, float16 = 2, bfloat16 = 2 }

local function error_of(f, ...)
  local ok, message = pcall(f, ...)
  assert.is_false(ok, "expected an error")
  return tostring(message)
end

local function stand_in(dtype, n, ptr, device)
  return setmetatable({}, {
    __name = "gpurun.Buffer",
    __len = function() return n end,
    __index = { dtype = dtype, ptr = ptr or 0x7f0000000000, device = device or 0,
                view = function(self) return self end },
  })
end

local function stand_in_target(name)
  return setmetatable({ device = 0 }, { __name = name or "gpurun.Stream" })
end

-- ---- host references ------------------------------------------------------------------

-- n values of dtype with many repeats (so that stability shows), and for
-- floats NaN, infinities and both zeros.
local function values(n, dtype, seed)
  local state = seed or 12345
  local list = {}
  local specials = { 0 / 0, math.huge, -math.huge, -0.0, 0.0 }
  for i = 1, n do
    state = (state * 1103515245 + 12345) % 2147483648
    local u = state / 2147483648
    if dtype:match("float") then
      list[i] = (i % 23 == 0) and specials[(i // 23) % #specials + 1] or math.floor(u * 64) / 4 - 8
    elseif dtype == "int8" then
      list[i] = math.floor(u * 200) - 100
    elseif dtype == "uint8" then
      list[i] = math.floor(u * 250)
    elseif dtype == "int16" or dtype == "uint16" then
      list[i] = math.floor(u * 3000) * (dtype == "int16" and 7 or 13) % 30000 - (dtype == "int16" and 15000 or 0)
    elseif dtype == "int64" then
      list[i] = (math.floor(u * 2000) - 1000) * (1 << 40) + i % 3
    elseif dtype == "uint64" then
      -- from 2^63 up too: negative as Lua integers, compared unsigned
      list[i] = math.floor(u * 2000) * (1 << 53) + i % 3
    else
      list[i] = math.floor(u * 2000) - (dtype == "uint32" and 0 or 1000)
    end
  end
  return list
end

-- Whether element bytes a sort before b (ascending): NaN last, -0.0
-- before +0.0, integers by value (uint64 unsigned).
local function less_than(dtype)
  local size = SIZE[dtype]
  if dtype:match("float") then
    return function(a, b, a_bytes, b_bytes)
      local an, bn = a ~= a, b ~= b
      if an or bn then return bn and not an end
      if a ~= b then return a < b end
      if a == 0 then
        return a_bytes:byte(size) >= 0x80 and b_bytes:byte(size) < 0x80
      end
      return false
    end
  elseif dtype == "uint64" then
    return function(a, b) return math.ult(a, b) end
  end
  return function(a, b) return a < b end
end

-- The stable order of keys: a list of 1-based indices. groups[i]: a
-- segment each element belongs to first (nil: one group).
local function stable_order(dtype, decoded, bytes, descending, groups)
  local size = SIZE[dtype]
  local less = less_than(dtype)
  local function bytes_of(i) return bytes:sub((i - 1) * size + 1, i * size) end
  local order = {}
  for i = 1, #decoded do order[i] = i end
  table.sort(order, function(i, j)
    if groups and groups[i] ~= groups[j] then return groups[i] < groups[j] end
    local a, b, ab, bb = decoded[i], decoded[j], bytes_of(i), bytes_of(j)
    if descending then a, b, ab, bb = b, a, bb, ab end
    if less(a, b, ab, bb) then return true end
    if less(b, a, bb, ab) then return false end
    return i < j
  end)
  return order
end

local function permuted(bytes, size, order)
  local parts = {}
  for k, i in ipairs(order) do parts[k] = bytes:sub((i - 1) * size + 1, i * size) end
  return table.concat(parts)
end

-- Segment of each 0-based element: how many offsets are at or before it.
local function segment_ids(n, offsets)
  local ids = {}
  for i = 1, n do
    local count = 0
    for _, at in ipairs(offsets) do
      if math.max(0, math.min(at, n)) <= i - 1 then count = count + 1 end
    end
    ids[i] = count
  end
  return ids
end

-- 1-based lower (upper) bound of q in the ascending list, -0.0 equal to 0.0.
local function bound(dtype, list, q, upper)
  local less = less_than(dtype)
  local zero = string.rep("\0", SIZE[dtype])
  local function key_less(a, b) return less(a, b, zero, zero) end
  local low, high = 1, #list + 1
  while low < high do
    local middle = (low + high) // 2
    local goes_right
    if upper then goes_right = not key_less(q, list[middle]) else goes_right = key_less(list[middle], q) end
    if goes_right then low = middle + 1 else high = middle end
  end
  return low
end

-- ---- without a GPU ------------------------------------------------------------------

describe("gpurun.sort's kernels", function()
  it("compile with NVRTC for sm_90 for every key dtype, values, descending and segments", function()
    local options = gpurun.ProgramOptions{ std = "c++17", arch = "sm_90" }
    for index, dtype in ipairs(ALL_DTYPES) do
      local value = ALL_DTYPES[(index % #ALL_DTYPES) + 1]
      local text = sort_source.generate(dtype, index % 2 == 0, SIZE[value], index % 3 == 0 and "int64" or nil)
      local program <close> = gpurun.Program(text, "c++", options)
      local code <close> = program:compile("cubin")
      assert.is_true(#code.code > 0)
    end
  end)

  it("orders floats by their bits: NaN canonical, negatives flipped, descending reversed", function()
    local text = sort_source.generate("float32", true, nil, nil)
    assert.matches("0x7fc00000u", text, 1, true)
    assert.matches("bits = (_gsort_key)~bits;", text, 1, true)
    assert.is_nil(sort_source.generate("uint32", false, nil, nil):find("~bits", 1, true))
  end)
end)

describe("gpurun.sort's checks", function()
  local stream = stand_in_target()

  it("names the bad argument", function()
    local keys = stand_in("float32", 16)
    assert.matches("bad argument #1 to 'gpurun.sort' (gpurun.Stream or gpurun.GraphBuilder expected, got nil)",
                   error_of(gpurun.sort), 1, true)
    assert.matches("gpurun.Buffer expected for keys, got number", error_of(gpurun.sort, stream, 5), 1, true)
    assert.matches("options table expected, got string", error_of(gpurun.sort, stream, keys, "x"), 1, true)
    assert.matches("unknown option 'order' (known: values, descending, out, values_out, segments)",
                   error_of(gpurun.sort, stream, keys, { order = 1 }), 1, true)
    assert.matches("options.descending must be a boolean, got number",
                   error_of(gpurun.sort, stream, keys, { descending = 1 }), 1, true)
    assert.matches("gpurun.Buffer expected for options.values, got table",
                   error_of(gpurun.sort, stream, keys, { values = {} }), 1, true)
  end)

  it("refuses mismatched lengths, dtypes, devices and small outputs", function()
    local keys = stand_in("float32", 16)
    assert.matches("options.values has 8 elements, but keys has 16", error_of(gpurun.sort, stream, keys,
                   { values = stand_in("int32", 8, 0x100000) }), 1, true)
    assert.matches("options.out must have the keys' dtype float32, got int32", error_of(gpurun.sort, stream, keys,
                   { out = stand_in("int32", 16, 0x100000) }), 1, true)
    assert.matches("options.out has 8 elements, fewer than the keys' 16", error_of(gpurun.sort, stream, keys,
                   { out = stand_in("float32", 8, 0x100000) }), 1, true)
    assert.matches("options.values_out needs options.values", error_of(gpurun.sort, stream, keys,
                   { values_out = stand_in("int32", 16, 0x100000) }), 1, true)
    assert.matches("options.values_out must have the values' dtype int32, got float32",
                   error_of(gpurun.sort, stream, keys, { values = stand_in("int32", 16, 0x100000),
                            values_out = stand_in("float32", 16, 0x200000) }), 1, true)
    assert.matches("options.segments must be int32, uint32, int64 or uint64 offsets (at least one), got 4 float32",
                   error_of(gpurun.sort, stream, keys, { segments = stand_in("float32", 4, 0x100000) }), 1, true)
    assert.matches("options.values is on device 1, but the keys are on device 0",
                   error_of(gpurun.sort, stream, keys, { values = stand_in("int32", 16, 0x100000, 1) }), 1, true)
  end)

  it("refuses buffers that share memory, but takes out as the keys themselves", function()
    local keys = stand_in("float32", 16, 0x1000)
    assert.matches("keys and options.values share memory", error_of(gpurun.sort, stream, keys,
                   { values = stand_in("int32", 16, 0x1010) }), 1, true)
    assert.matches("keys and options.out share memory", error_of(gpurun.sort, stream, keys,
                   { out = stand_in("float32", 16, 0x1004) }), 1, true)
    assert.matches("options.values and options.values_out share memory", error_of(gpurun.sort, stream, keys,
                   { values = stand_in("int32", 16, 0x9000), values_out = stand_in("int32", 16, 0x9008) }), 1, true)
    assert.matches("keys and options.segments share memory", error_of(gpurun.sort, stream, keys,
                   { segments = stand_in("int32", 4, 0x1000) }), 1, true)
  end)

  it("refuses a first call on a GraphBuilder, saying which call to make before", function()
    local message = error_of(gpurun.sort, stand_in_target("gpurun.GraphBuilder"), stand_in("int16", 16),
                             { values = stand_in("float64", 16, 0x100000) })
    assert.matches("gpurun.sort for int16 keys and float64 values compiles its kernels on its first call; "
                   .. "make one call on a stream (any size) before capturing it", message, 1, true)
  end)

  it("checks lower_bound and upper_bound's arguments", function()
    local sorted, queries = stand_in("int32", 16, 0x1000), stand_in("int32", 4, 0x9000)
    for _, name in ipairs{ "lower_bound", "upper_bound" } do
      local f = gpurun[name]
      assert.matches("bad argument #1 to 'gpurun." .. name .. "'", error_of(f, 5), 1, true)
      assert.matches("gpurun.Buffer expected for queries, got nil", error_of(f, stream, sorted), 1, true)
      assert.matches("queries must have the sorted buffer's dtype int32, got float32",
                     error_of(f, stream, sorted, stand_in("float32", 4, 0x9000)), 1, true)
      assert.matches("options.out must be int64 (1-based positions), got int32",
                     error_of(f, stream, sorted, queries, { out = stand_in("int32", 4, 0x20000) }), 1, true)
      assert.matches("options.out has 2 elements, fewer than the queries' 4",
                     error_of(f, stream, sorted, queries, { out = stand_in("int64", 2, 0x20000) }), 1, true)
      assert.matches("options.out and sorted share memory",
                     error_of(f, stream, sorted, queries, { out = stand_in("int64", 4, 0x1008) }), 1, true)
      assert.matches("options.out is needed on a GraphBuilder",
                     error_of(f, stand_in_target("gpurun.GraphBuilder"), sorted, queries), 1, true)
    end
  end)
end)

-- ---- emulated --------------------------------------------------------------------

describe("emulated sorts", function()
  if not emulated.available() then
    pending("no g++ to compile the emulated kernels")
    return
  end

  it("sort every dtype ascending and descending, in place and into out, stably, against the host", function()
    local session <close> = emulated.session{ multiprocessors = 2 }
    local S, stream = session.modules.sort, session.stream
    local cases = {}
    for index, dtype in ipairs(ALL_DTYPES) do
      local n = ({ 1, 300, 4096, 9001 })[index % 4 + 1]
      local t = values(n, dtype, index)
      local case = { dtype = dtype, n = n, original = session:array(t, dtype) }
      case.in_place = session:array(t, dtype)
      case.out = session:zeros(n + 3, dtype)
      S.sort(stream, case.in_place)
      S.sort(stream, case.original, { out = case.out, descending = true })
      cases[#cases + 1] = case
    end
    session:run()
    for _, case in ipairs(cases) do
      local size = SIZE[case.dtype]
      local bytes, decoded = case.original:to_bytes(), case.original:to_table()
      local up = permuted(bytes, size, stable_order(case.dtype, decoded, bytes, false))
      local down = permuted(bytes, size, stable_order(case.dtype, decoded, bytes, true))
      assert(case.in_place:to_bytes() == up, case.dtype .. " ascending, " .. case.n)
      assert(case.out:view(1, case.n):to_bytes() == down, case.dtype .. " descending into out, " .. case.n)
    end
  end)

  it("move values of every size with their keys, keeping equal keys in order", function()
    local session <close> = emulated.session{ multiprocessors = 2 }
    local S, stream = session.modules.sort, session.stream
    local cases = {}
    for _, pair in ipairs{ { "int8", "int32" }, { "float32", "float64" }, { "uint16", "uint16" },
                           { "int64", "uint8" }, { "bfloat16", "int64" } } do
      local dtype, value_dtype = pair[1], pair[2]
      local n = value_dtype == "uint8" and 250 or 6000
      local t, index = values(n, dtype, n), {}
      for i = 1, n do index[i] = i - 1 end
      local case = { dtype = dtype, n = n, keys = session:array(t, dtype), original = session:array(t, dtype),
                     values = session:array(index, value_dtype), value_dtype = value_dtype }
      if value_dtype == "float64" then
        case.values_out = session:zeros(n, value_dtype)
        S.sort(stream, case.keys, { values = case.values, values_out = case.values_out, descending = true })
      else
        S.sort(stream, case.keys, { values = case.values, descending = dtype == "int64" })
      end
      cases[#cases + 1] = case
    end
    session:run()
    for _, case in ipairs(cases) do
      local bytes, decoded = case.original:to_bytes(), case.original:to_table()
      local descending = case.values_out ~= nil or case.dtype == "int64"
      local order = stable_order(case.dtype, decoded, bytes, descending)
      assert(case.keys:to_bytes() == permuted(bytes, SIZE[case.dtype], order), case.dtype)
      local moved = (case.values_out or case.values):to_table()
      for k, i in ipairs(order) do
        assert(moved[k] == i - 1, ("%s/%s: value %d is %s, want %d"):format(case.dtype, case.value_dtype, k,
               moved[k], i - 1))
      end
      if case.values_out then
        assert.are.same(case.values:to_table()[7], 6) -- values left as they were
      end
    end
  end)

  it("keep equal keys in order when whole warps share a digit, over many tiles", function()
    local session <close> = emulated.session{ multiprocessors = 2 }
    local S = session.modules.sort
    local n = 3 * sort_source.TILE + 100
    local t, index = {}, {}
    for i = 1, n do
      -- three values, each with the same digit in every byte; runs of 40 equal keys
      t[i] = ((i // 40) * 7 % 3) * 0x01010101
      index[i] = i
    end
    local keys, moved = session:array(t, "uint32"), session:array(index, "uint32")
    S.sort(session.stream, keys, { values = moved })
    session:run()
    local order = {}
    for i = 1, n do order[i] = i end
    table.sort(order, function(a, b) if t[a] ~= t[b] then return t[a] < t[b] end return a < b end)
    assert.are.same(order, moved:to_table())
  end)

  it("sort keys into out while their values sort in place, an odd count of passes", function()
    local session <close> = emulated.session{ multiprocessors = 2 }
    local S = session.modules.sort
    local n = 5000
    local t, index = values(n, "int8", 11), {}
    for i = 1, n do index[i] = i end
    local keys, out = session:array(t, "int8"), session:zeros(n, "int8")
    local moved = session:array(index, "int16")
    S.sort(session.stream, keys, { out = out, values = moved })
    session:run()
    local bytes = keys:to_bytes()
    local order = stable_order("int8", keys:to_table(), bytes, false)
    assert(out:to_bytes() == permuted(bytes, 1, order))
    assert.are.same(order, moved:to_table())
  end)

  it("sort segments on their own, elements outside every segment as groups of their own", function()
    local session <close> = emulated.session{ multiprocessors = 2 }
    local S, stream = session.modules.sort, session.stream
    local cases = {}
    local n = 5200
    local many = {}
    for at = 3, 5003, 10 do many[#many + 1] = at end -- 501 offsets: two passes of segment digits
    for _, case in ipairs{ { dtype = "int8", offsets = many, offset_dtype = "uint32" },
                           { dtype = "float32", offsets = { 3, 100, 100, 2500, 5000 }, offset_dtype = "int64" },
                           { dtype = "uint16", offsets = { -5, 700, 9000 }, offset_dtype = "int32",
                             descending = true } } do
      local t = values(n, case.dtype, #case.offsets)
      local index = {}
      for i = 1, n do index[i] = i end
      case.keys, case.original = session:array(t, case.dtype), session:array(t, case.dtype)
      case.values = session:array(index, "int32")
      S.sort(stream, case.keys, { values = case.values, descending = case.descending,
                                  segments = session:array(case.offsets, case.offset_dtype) })
      cases[#cases + 1] = case
    end
    session:run()
    for _, case in ipairs(cases) do
      local bytes, decoded = case.original:to_bytes(), case.original:to_table()
      local order = stable_order(case.dtype, decoded, bytes, case.descending, segment_ids(n, case.offsets))
      assert(case.keys:to_bytes() == permuted(bytes, SIZE[case.dtype], order), case.dtype)
      local moved = case.values:to_table()
      for k, i in ipairs(order) do assert(moved[k] == i, case.dtype) end
    end
  end)

  it("find lower and upper bounds, 1-based, -0.0 equal to 0.0 and NaN past every number", function()
    local session <close> = emulated.session{ multiprocessors = 2 }
    local S, stream = session.modules.sort, session.stream
    local cases = {}
    for _, case in ipairs{
      { dtype = "int32", sorted = { -5, -5, 0, 3, 3, 3, 9 }, queries = { -9, -5, 0, 1, 3, 9, 10 } },
      { dtype = "float32", sorted = { -math.huge, -1.5, -0.0, 0.0, 2, 2, 0 / 0 },
        queries = { -0.0, 0.0, 2, 3, math.huge, 0 / 0, -math.huge } },
      { dtype = "uint64", sorted = { 1, 5, 1 << 40, -1 }, queries = { 0, 5, -1, -2 } },
      { dtype = "float16", sorted = { -2, 0.5, 0.5, 1 }, queries = { 0.5, 1, 4 } },
      { dtype = "int8", sorted = {}, queries = { 1, 2 } },
    } do
      case.s, case.q = session:array(case.sorted, case.dtype), session:array(case.queries, case.dtype)
      if #case.sorted == 0 then case.s = session:zeros(0, case.dtype) end
      case.lower = S.lower_bound(stream, case.s, case.q, { out = session:zeros(#case.queries, "int64") })
      case.upper = S.upper_bound(stream, case.s, case.q, { out = session:zeros(#case.queries + 2, "int64") })
      cases[#cases + 1] = case
    end
    session:run()
    for _, case in ipairs(cases) do
      local lower, upper = case.lower:to_table(), case.upper:to_table()
      local sorted, queries = case.s:to_table(), case.q:to_table()
      for j, q in ipairs(queries) do
        assert.are.equal(bound(case.dtype, sorted, q, false), lower[j], case.dtype .. " lower " .. j)
        assert.are.equal(bound(case.dtype, sorted, q, true), upper[j], case.dtype .. " upper " .. j)
      end
    end
    assert.are.same({ 1, 1, 3, 4, 4, 7, 8 }, cases[1].lower:to_table())
    assert.are.same({ 1, 3, 4, 4, 7, 8, 8 }, { table.unpack(cases[1].upper:to_table(), 1, 7) })
    assert.are.same({ 3, 3, 5, 7, 7, 7, 1 }, cases[2].lower:to_table())
  end)
end)

-- ---- on the GPU ------------------------------------------------------------------------

describe("gpurun.sort on the GPU", function()
  local device, stream

  before_each(function()
    device = gpurun.Device(0)
    device:set_current()
    stream = device:create_stream()
  end)

  after_each(function()
    stream:close()
  end)

  -- keys of dtype on the device, with the host's copy of their bytes and
  -- values. uint64 keys from 2^63 up are negative Lua integers, which
  -- gpurun.array refuses: they go as bytes, and come back compared unsigned.
  local function device_keys(n, dtype, seed)
    local t = values(n, dtype, seed)
    if dtype == "uint64" then
      local parts = {}
      for i, v in ipairs(t) do parts[i] = string.pack("<i8", v) end
      local keys = gpurun.from_bytes(table.concat(parts), dtype)
      return keys, keys:to_bytes(), t
    end
    local keys = gpurun.array(t, dtype)
    return keys, keys:to_bytes(), keys:to_table()
  end

  for _, dtype in ipairs(ALL_DTYPES) do
    it(("sorts %s ascending and descending against the host, stably #gpu"):format(dtype), function()
      for _, n in ipairs{ 1, 255, 4097, 100003 } do
        local keys <close>, bytes, decoded = device_keys(n, dtype, n)
        local out <close> = gpurun.empty(n, dtype)
        gpurun.sort(stream, keys, { out = out, descending = true })
        gpurun.sort(stream, keys)
        stream:sync()
        local size = SIZE[dtype]
        assert(keys:to_bytes() == permuted(bytes, size, stable_order(dtype, decoded, bytes, false)), n)
        assert(out:to_bytes() == permuted(bytes, size, stable_order(dtype, decoded, bytes, true)), n)
      end
    end)
  end

  it("puts every NaN last and -0.0 before +0.0 #gpu", function()
    local keys <close> = gpurun.array({ 0 / 0, 1, -0.0, -(0 / 0), 0.0, -math.huge, -0.0 }, "float64")
    gpurun.sort(stream, keys)
    local got = keys:to_table(stream)
    assert.are.equal(-math.huge, got[1])
    assert.is_true(1 / got[2] < 0 and 1 / got[3] < 0 and 1 / got[4] > 0)
    assert.are.equal(1, got[5])
    assert.is_true(got[6] ~= got[6] and got[7] ~= got[7])
  end)

  it("moves values with their keys, equal keys in their order #gpu", function()
    local n = 200003
    local keys <close>, bytes, decoded = device_keys(n, "int16", 3)
    local index = {}
    for i = 1, n do index[i] = i end
    local positions <close> = gpurun.array(index, "int64")
    local moved <close> = gpurun.empty(n, "int64")
    gpurun.sort(stream, keys, { values = positions, values_out = moved })
    local order = stable_order("int16", decoded, bytes, false)
    assert.are.same(order, moved:to_table(stream))
    assert.are.equal(2, positions:get(2, stream)) -- left as it was
  end)

  it("sorts segments on their own #gpu", function()
    local n = 50000
    local keys <close>, bytes, decoded = device_keys(n, "float32", 5)
    local offsets = { 0, 10, 10, 4000, 33333, 50000 }
    local segments <close> = gpurun.array(offsets, "int32")
    gpurun.sort(stream, keys, { segments = segments, descending = true })
    local order = stable_order("float32", decoded, bytes, true, segment_ids(n, offsets))
    assert(keys:to_bytes(stream) == permuted(bytes, 4, order))
  end)

  it("captures into a graph after a call on the stream, and replays on new data #gpu", function()
    local n = 70001
    local keys <close> = gpurun.empty(n, "uint32")
    local moved <close> = gpurun.empty(n, "float32")
    local rng <close> = gpurun.default_rng(9)
    gpurun.sort(stream, keys, { values = moved }) -- compiles: a capture cannot load code
    local builder = stream:create_graph_builder()
    builder:begin_building()
    gpurun.sort(builder, keys, { values = moved })
    builder:end_building()
    local graph <close> = builder:complete()
    for round = 1, 3 do
      local source <close> = rng:integers(n, 0, 1000, "uint32")
      keys:copy_from(source, stream)
      moved:copy_from(source:to_table(stream))
      graph:launch(stream)
      stream:sync()
      local got, carried = keys:to_table(), moved:to_table()
      for i = 2, n do assert(got[i - 1] <= got[i], ("round %d at %d"):format(round, i)) end
      for i = 1, n do assert(carried[i] == got[i], i) end
    end
    builder:close()
  end)

  it("finds lower and upper bounds of every query against a Lua reference #gpu", function()
    local n, m = 100000, 5000
    local keys <close> = gpurun.default_rng(4):integers(n, -3000, 3000, "int32")
    gpurun.sort(stream, keys)
    local queries <close> = gpurun.default_rng(5):integers(m, -3100, 3100, "int32")
    local lower <close> = gpurun.lower_bound(stream, keys, queries)
    local upper <close> = gpurun.empty(m, "int64")
    gpurun.upper_bound(stream, keys, queries, { out = upper })
    stream:sync()
    assert.are.equal("int64", lower.dtype)
    local sorted, q, lo, up = keys:to_table(), queries:to_table(), lower:to_table(), upper:to_table()
    for j = 1, m do
      assert.are.equal(bound("int32", sorted, q[j], false), lo[j], j)
      assert.are.equal(bound("int32", sorted, q[j], true), up[j], j)
    end
  end)
end)
