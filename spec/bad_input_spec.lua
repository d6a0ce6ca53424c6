-- Every public function and method of gpurun, called with what it must
-- refuse: wrong types, too few or too many arguments, nil, closed objects,
-- objects of the wrong kind, out-of-range numbers (0 and negative sizes,
-- sizes past device memory, NaN, math.huge, 2^63 where integers go). Each
-- call must raise a Lua error whose message says what was wrong, and gpurun
-- must still work afterwards (with a device: a launch still computes the
-- right values). One row per (function, bad input, expected message); a
-- function without rows fails the completeness check.
local gpurun = require("gpurun")
local catalog = require("spec.support.api_catalog")
local bad = require("spec.support.bad_input")
local process = require("spec.support.process")
local R, A, P, ANY = bad.R, bad.A, bad.P, bad.ANY

local NAN, INF = 0 / 0, math.huge
local BIG_FLOAT = 2 ^ 63 -- a float no integer can hold: "9.2233720368548e+18"
local SOURCE = bad.SOURCE
local NO_DRIVER = "the CUDA driver could not be loaded"
local NO_DEVICE = "no current CUDA device: call gpurun.Device(id):set_current() first"
local NAN_TEXT = "%-?nan" -- printf writes NaN as nan or -nan
-- More than any GPU has (out of memory, or a size the driver refuses).
local TOO_BIG = P"cuMemAlloc: CUDA_ERROR_[%u_]+ %b() while allocating"

-- gpurun names the function in its argument errors as a script spells it:
-- 'gpurun.empty', 'Buffer:fill' (arguments counted after self, as in a colon
-- call; a wrong self is "calling 'Buffer:fill' on bad self"), 'Buffer.__index'.
-- Rows say arg_error(n, "fill", ...); this puts the whole name in.
local function plain(text) return (text:gsub("%p", "%%%0")) end

local function qualify(label, expected, wrong_self)
  local short = label:match("[.:]([%w_]+)$")
  if type(expected) == "table" then
    if expected.pattern then
      -- The name as a plain pattern writes it (arg_error's text escaped): %'random%_table%'
      local escaped = "to " .. plain("'" .. short .. "'")
      local pattern = expected.pattern:gsub(plain(escaped), function() return "to " .. plain("'" .. label .. "'") end)
      pattern = pattern:gsub(plain("to '" .. short .. "'"), function() return "to " .. plain("'" .. label .. "'") end)
      return P(pattern)
    end
    local any = {}
    for i, alternative in ipairs(expected.any) do any[i] = qualify(label, alternative, wrong_self) end
    return ANY(table.unpack(any))
  end
  local from = "bad argument #1 to '" .. short .. "' ("
  if wrong_self and label:find(":", 1, true) and expected:sub(1, #from) == from then
    return "calling '" .. label .. "' on bad self (" .. expected:sub(#from + 1)
  end
  return (expected:gsub("to '" .. plain(short) .. "'", function() return "to '" .. label .. "'" end))
end

-- A row is { label, A(arguments...), expected } (see spec/support/bad_input.lua
-- for the optional fields); R.name in the arguments is an object made fresh
-- for the row: R.buffer, R.closed_stream, R.graph, ... The expected text is
-- found plainly in the message; P"..." is a Lua pattern; ANY(...) any of them.
-- Extra arguments are ignored, as Lua's own functions ignore them, except
-- where their number is the point: a launch or bind with more arguments
-- than the kernel takes.
local rows = {}
local function row(label, args, expected, options)
  expected = qualify(label, expected, options and options.self == "any")
  local entry = { label, args, expected }
  for key, value in pairs(options or {}) do entry[key] = value end
  rows[#rows + 1] = entry
end

-- "bad argument #n to 'f' (what)", as Lua formats it.
local function arg_error(n, name, what)
  return ("bad argument #%d to '%s' (%s)"):format(n, name, what)
end

-- ---- every method: the wrong kind of self, and a closed self ---------------------

-- What an object of another type looks like to each type's checks.
local function other_kind(type_name)
  if type_name == "ProgramOptions" then return R.config, "gpurun.LaunchConfig" end
  return R.options, "gpurun.ProgramOptions"
end

-- A closed object of each type.
local CLOSED = {
  Device = "closed_device", Stream = "closed_stream", Event = "closed_event",
  ProgramOptions = "closed_options", Program = "closed_program", ObjectCode = "closed_ptx",
  Kernel = "closed_kernel", LaunchPlan = "closed_plan", Buffer = "closed_buffer",
  Generator = "closed_rng", GraphBuilder = "closed_builder", Graph = "closed_graph",
  DeviceGenerator = "closed_drng",
  Condition = "closed_condition", IPCAllocationHandle = "closed_handle",
  PinnedBuffer = "closed_pinned", HostCallback = "closed_callback", MemoryPool = "closed_pool",
  LinkerOptions = "closed_linker_options", Linker = "closed_linker",
  TensorMap = "closed_tensor_map", SMResource = "closed_sm", Context = "closed_context",
  CsrMatrix = "closed_csr",
}
-- A field each type's __index reads (methods still resolve when closed).
local FIELD = {
  Device = "name", Stream = "handle", ProgramOptions = "std", Program = "source",
  ObjectCode = "code", Kernel = "name", Buffer = "size", GraphBuilder = "state",
  LaunchPlan = "kernel", Graph = "node_count", Condition = "default", Event = "device",
  LaunchConfig = "grid", Scalar = "value", PinnedBuffer = "size", HostCallback = "pending",
  MemoryPool = "device", LinkerOptions = "arch", StructLayout = "size", Struct = "x",
  SMResource = "sm_count", Context = "device", IPCAllocationHandle = "fd", CsrMatrix = "nnz",
}

local SETTOP_FIRST = {
  ["Buffer:fill"] = true, ["Buffer:copy_from"] = true, ["Buffer:copy_to"] = true,
  ["Buffer:to_table"] = true, ["Buffer:get"] = true, ["Buffer:set"] = true,
  ["Buffer:to_bytes"] = true,
}

for _, type_name in ipairs(catalog.types) do
  local wrong, wrong_name = other_kind(type_name)
  local expected_type = "gpurun." .. type_name
  local function wrong_self(label, name, extra)
    local selves = {
      { A(), "no value" }, { A(42), "number" }, { A({}), "table" }, { A(wrong), wrong_name },
    }
    if not label:find(".__", 1, true) then selves[#selves + 1] = { A("x"), "string" } end
    for _, case in ipairs(selves) do
      local args = case[1]
      if args.n > 0 then
        for i, value in ipairs(extra or {}) do args[i + 1] = value end
        args.n = 1 + #(extra or {})
      end
      local expected = arg_error(1, name, expected_type .. " expected, got " .. case[2])
      if case[2] == "no value" and SETTOP_FIRST[label] then
        -- These set the stack's size before checking: a missing self reads as nil.
        expected = ANY(expected, arg_error(1, name, expected_type .. " expected, got nil"))
      end
      if label == "ProgramOptions.__newindex" or label == "LinkerOptions.__newindex" then
        expected = "gpurun." .. type_name .. " is read-only"
      end
      row(label, args, expected, { self = "any" })
    end
  end
  for _, method in ipairs(catalog.sorted_keys(catalog.methods[type_name])) do
    wrong_self(type_name .. ":" .. method, method)
  end
  for _, metamethod in ipairs(catalog.metamethods[type_name]) do
    local extra = metamethod == "__index" and { FIELD[type_name] }
      or metamethod == "__newindex" and { "std", "c++20" } or nil
    wrong_self(type_name .. "." .. metamethod, metamethod, extra)
  end

  local closed = CLOSED[type_name]
  if closed then
    local message = "attempt to use a closed gpurun." .. type_name
    for _, method in ipairs(catalog.sorted_keys(catalog.methods[type_name])) do
      if method ~= "close" then row(type_name .. ":" .. method, A(R[closed]), message) end
    end
    if FIELD[type_name] then row(type_name .. ".__index", A(R[closed], FIELD[type_name]), message) end
  end
end

-- The same methods when a part of the object was closed under it.
for _, method in ipairs({ "params", "bind", "occupancy", "max_potential_block_size",
    "set_max_dynamic_shared_size_bytes" }) do
  row("Kernel:" .. method, A(R.orphan_kernel), "attempt to use a closed gpurun.ObjectCode")
end
row("Kernel.__index", A(R.orphan_kernel, "name"), "attempt to use a closed gpurun.ObjectCode")
for _, method in ipairs({ "begin_building", "end_building", "complete" }) do
  row("GraphBuilder:" .. method, A(R.builder_closed_stream), "attempt to use a closed gpurun.Stream")
end
row("GraphBuilder.__index", A(R.builder_closed_stream, "state"), "attempt to use a closed gpurun.Stream")
row("LaunchPlan:launch", A(R.plan_closed_buffer, R.stream),
  "LaunchPlan of kernel 'vec_add': a gpurun.Buffer it passes was closed after bind")
row("Buffer.__len", A(R.closed_buffer), "attempt to use a closed gpurun.Buffer")
row("Event.__sub", A(R.closed_event, R.event), "attempt to use a closed gpurun.Event")
row("Event.__sub", A(R.event, R.closed_event), "attempt to use a closed gpurun.Event")
-- Reached only by calling the metamethod by hand, but still an argument error.
row("Device.__index", A("x", "name"), arg_error(1, "__index", "gpurun.Device expected, got string"),
  { self = "any" })

-- ---- element counts and dtypes ------------------------------------------------------

-- Bad counts at argument `at` of a call that takes `before` first; `name`
-- is what the message calls the function.
local function count_rows(label, name, before, at)
  local cases = {
    { 0, "positive element count expected, got 0" },
    { -1, "positive element count expected, got -1" },
    { -4096, "positive element count expected, got -4096" },
    { 1.5, "positive element count expected, got 1.5" },
    { -0.5, "positive element count expected, got -0.5" },
    { NAN, P("positive element count expected, got " .. NAN_TEXT) },
    { INF, "element count inf too large" },
    { -INF, "positive element count expected, got -inf" },
    { BIG_FLOAT, "element count 9.2233720368548e+18 too large" },
    { 2 ^ 64, "element count 1.844674407371e+19 too large" },
    { math.mininteger, "positive element count expected, got -9223372036854775808" },
    { "16", "positive element count expected, got string" },
    { {}, "positive element count expected, got table" },
    { true, "positive element count expected, got boolean" },
    { R.scalar, "positive element count expected, got gpurun.Scalar" },
  }
  for _, case in ipairs(cases) do
    local args = A(table.unpack(before))
    args[args.n + 1], args.n = case[1], args.n + 1
    local expected = case[2]
    if type(expected) == "string" then
      expected = arg_error(at, name, expected)
    else
      local escaped = arg_error(at, name, "X"):gsub("%p", "%%%0")
      expected = P((escaped:gsub("X", function() return expected.pattern end)))
    end
    row(label, args, expected)
  end
  local none = A(table.unpack(before))
  row(label, none, arg_error(at, name, "positive element count expected, got no value"))
end

count_rows("gpurun.empty", "empty", {}, 1)
count_rows("gpurun.zeros", "zeros", {}, 1)
count_rows("gpurun.full", "full", {}, 1)
count_rows("Generator:random", "random", { R.rng }, 1)
count_rows("Generator:integers", "integers", { R.rng }, 1)
count_rows("Generator:random_table", "random_table", { R.rng }, 1)

local DTYPE_LIST = "(expected one of: float32, float64, int32, uint32, int64, uint64, int8, uint8, int16, uint16, float16, bfloat16, complex64, complex128)"
local function dtype_rows(label, name, before, at)
  local function with(value)
    local args = A(table.unpack(before))
    args[args.n + 1], args.n = value, args.n + 1
    return args
  end
  row(label, with("float8"), arg_error(at, name, "unknown dtype 'float8' " .. DTYPE_LIST))
  row(label, with(""), arg_error(at, name, "unknown dtype '' " .. DTYPE_LIST))
  row(label, with("FLOAT32"), ("bad argument #%d to '%s' (unknown dtype 'FLOAT32' (expected"):format(at, name))
  row(label, with(4), arg_error(at, name, "dtype name expected, got number"))
  row(label, with({}), arg_error(at, name, "dtype name expected, got table"))
  row(label, with(true), arg_error(at, name, "dtype name expected, got boolean"))
end

dtype_rows("gpurun.empty", "empty", { 16 }, 2)
dtype_rows("gpurun.zeros", "zeros", { 16 }, 2)
dtype_rows("gpurun.full", "full", { 16, 1 }, 3)
dtype_rows("gpurun.array", "array", { { 1, 2 } }, 2)
dtype_rows("Generator:random", "random", { R.rng, 16 }, 2)
dtype_rows("Generator:integers", "integers", { R.rng, 16, 0, 10 }, 4)
dtype_rows("Generator:random_table", "random_table", { R.rng, 16 }, 2)

-- ---- module functions -----------------------------------------------------------------

row("gpurun.empty", A(math.maxinteger), arg_error(1, "empty",
  "element count 9223372036854775807 too large for float32 (the byte size overflows size_t)"))
row("gpurun.zeros", A(1 << 61, "float64"),
  "too large for float64 (the byte size overflows size_t)")
for _, label in ipairs({ "gpurun.empty", "gpurun.zeros" }) do
  row(label, A(16), NO_DEVICE, { when = "no_device" })
  row(label, A(16), NO_DRIVER, { when = "no_driver" })
  row(label, A(1 << 40), TOO_BIG, { gpu = true })
end
row("gpurun.zeros", A(1 << 40, "float64"), P"cuMemAlloc: CUDA_ERROR_[%u_]+ %b() while allocating 8%.00 TiB",
  { gpu = true })

row("gpurun.full", A(16), arg_error(2, "full", "number expected, got no value"))
row("gpurun.full", A(16, "1"), arg_error(2, "full", "number expected, got string"))
row("gpurun.full", A(16, {}), arg_error(2, "full", "number expected, got table"))
row("gpurun.full", A(16, R.scalar), arg_error(2, "full", "number expected, got gpurun.Scalar"))
row("gpurun.full", A(16, 1e39), arg_error(2, "full", "1e+39 out of range for float32"))
row("gpurun.full", A(16, -1e39), arg_error(2, "full", "-1e+39 out of range for float32"))
row("gpurun.full", A(16, 1.5, "int32"), arg_error(2, "full", "integer expected for int32, got 1.5"))
row("gpurun.full", A(16, 300, "uint8"), arg_error(2, "full", "300 out of range for uint8 (0..255)"))
row("gpurun.full", A(16, -129, "int8"), arg_error(2, "full", "-129 out of range for int8 (-128..127)"))
row("gpurun.full", A(16, -1, "uint32"), "-1 out of range for uint32 (0..4294967295)")
row("gpurun.full", A(16, -1, "uint64"), "-1 out of range for uint64")
row("gpurun.full", A(16, NAN, "int64"), P("integer expected for int64, got " .. NAN_TEXT))
row("gpurun.full", A(16, INF, "int8"), "inf out of range for int8 (-128..127)")
row("gpurun.full", A(16, BIG_FLOAT, "int64"), "9.2233720368548e+18 out of range for int64")
row("gpurun.full", A(16, 2 ^ 64, "uint64"), "1.844674407371e+19 out of range for uint64")
row("gpurun.full", A(16, 2 ^ 32, "uint32"), "4294967296.0 out of range for uint32")
row("gpurun.full", A(16, 1), NO_DEVICE, { when = "no_device" })
row("gpurun.full", A(16, 1), NO_DRIVER, { when = "no_driver" })
row("gpurun.full", A(1 << 40, 1), TOO_BIG, { gpu = true })

row("gpurun.array", A(), arg_error(1, "array", "table expected, got no value"))
row("gpurun.array", A(5), arg_error(1, "array", "table expected, got number"))
row("gpurun.array", A("1,2"), arg_error(1, "array", "table expected, got string"))
row("gpurun.array", A(R.buffer), arg_error(1, "array", "table expected, got gpurun.Buffer"))
row("gpurun.array", A({}), arg_error(1, "array", "non-empty sequence expected, got an empty table"))
row("gpurun.array", A({ x = 1 }), "non-empty sequence expected")
row("gpurun.array", A({ 1, "x" }), arg_error(1, "array", "element 2: number expected, got string"))
row("gpurun.array", A({ 1, {} }), "element 2: number expected, got table")
row("gpurun.array", A({ 1.5 }, "int32"), "element 1: integer expected for int32, got 1.5")
row("gpurun.array", A({ 1e39 }), "element 1: 1e+39 out of range for float32")
row("gpurun.array", A({ 1, 2, 256 }, "uint8"), "element 3: 256 out of range for uint8")
row("gpurun.array", A({ NAN }, "uint8"), P("element 1: integer expected for uint8, got " .. NAN_TEXT))
row("gpurun.array", A({ 1, 2 }), NO_DEVICE, { when = "no_device" })
row("gpurun.array", A({ 1, 2 }), NO_DRIVER, { when = "no_driver" })

for _, name in ipairs({ "compare", "allclose" }) do
  local label = "gpurun." .. name
  local FIRST = "gpurun.Buffer or table of numbers expected, got "
  row(label, A(), arg_error(1, name, FIRST .. "no value"))
  row(label, A(1, 1), arg_error(1, name, FIRST .. "number"))
  row(label, A("x", 1), arg_error(1, name, FIRST .. "string"))
  row(label, A(R.options, 1), arg_error(1, name, FIRST .. "gpurun.ProgramOptions"))
  row(label, A(R.stream, 1), arg_error(1, name, FIRST .. "gpurun.Stream"))
  row(label, A({ 1 }), arg_error(2, name, "table of numbers or number expected, got no value"))
  row(label, A({ 1 }, "1"), arg_error(2, name, "table of numbers or number expected, got string"))
  row(label, A({ 1 }, R.buffer), arg_error(2, name, "table of numbers or number expected, got gpurun.Buffer"))
  row(label, A({ 1, 2 }, { 1 }), arg_error(2, name, "table of 2 numbers expected, got 1"))
  row(label, A({ 1, "2" }, 1), arg_error(1, name, "element 2: number expected, got string"))
  row(label, A({ 1 }, { {} }), arg_error(2, name, "element 1: number expected, got table"))
  row(label, A({ 1 }, 1, -1), arg_error(3, name, "non-negative relative tolerance expected"))
  row(label, A({ 1 }, 1, 0, NAN), arg_error(4, name, "non-negative absolute tolerance expected"))
  row(label, A(R.closed_buffer, 1), "attempt to use a closed gpurun.Buffer")
  row(label, A(R.buffer), arg_error(2, name, "gpurun.Buffer or number expected, got no value"))
  row(label, A(R.buffer, "1"), arg_error(2, name, "gpurun.Buffer or number expected, got string"))
  row(label, A(R.buffer, { 1 }), arg_error(2, name, "gpurun.Buffer or number expected, got table"))
  row(label, A(R.buffer, R.stream), arg_error(2, name, "gpurun.Buffer or number expected, got gpurun.Stream"))
  row(label, A(R.buffer, R.buffer8), arg_error(2, name, "gpurun.Buffer of 16 elements expected, got 8"))
  row(label, A(R.buffer, R.closed_buffer), "attempt to use a closed gpurun.Buffer")
  row(label, A(R.buffer, 1, -1), arg_error(3, name, "non-negative relative tolerance expected"))
  row(label, A(R.buffer, 1, NAN), arg_error(3, name, "non-negative relative tolerance expected"))
  row(label, A(R.buffer, 1, -INF), arg_error(3, name, "non-negative relative tolerance expected"))
  row(label, A(R.buffer, 1, "x"), arg_error(3, name, "number expected, got string"))
  row(label, A(R.buffer, 1, {}), arg_error(3, name, "number expected, got table"))
  row(label, A(R.buffer, 1, 0, -1e-9), arg_error(4, name, "non-negative absolute tolerance expected"))
  row(label, A(R.buffer, 1, 0, NAN), arg_error(4, name, "non-negative absolute tolerance expected"))
  row(label, A(R.buffer, 1, 0, true), arg_error(4, name, "number expected, got boolean"))
end

row("gpurun.default_rng", A(), arg_error(1, "default_rng", "integer seed expected, got no value"))
row("gpurun.default_rng", A(nil), arg_error(1, "default_rng", "integer seed expected, got nil"))
row("gpurun.default_rng", A("1"), arg_error(1, "default_rng", "integer seed expected, got string"))
row("gpurun.default_rng", A({}), arg_error(1, "default_rng", "integer seed expected, got table"))
row("gpurun.default_rng", A(R.rng), arg_error(1, "default_rng", "integer seed expected, got gpurun.Generator"))
row("gpurun.default_rng", A(1.5), arg_error(1, "default_rng", "integer seed expected, got 1.5"))
row("gpurun.default_rng", A(NAN), P("integer seed expected, got " .. NAN_TEXT))
row("gpurun.default_rng", A(INF), arg_error(1, "default_rng", "integer seed expected, got inf"))
row("gpurun.default_rng", A(BIG_FLOAT), "integer seed expected, got 9.2233720368548e+18")

row("gpurun.format_cuda_error", A(), arg_error(1, "format_cuda_error", "string expected, got no value"))
row("gpurun.format_cuda_error", A(nil, 1), arg_error(1, "format_cuda_error", "string expected, got nil"))
row("gpurun.format_cuda_error", A({}, 1), arg_error(1, "format_cuda_error", "string expected, got table"))
row("gpurun.format_cuda_error", A(R.options, 1),
  arg_error(1, "format_cuda_error", "string expected, got gpurun.ProgramOptions"))
row("gpurun.format_cuda_error", A("cuMemAlloc"), arg_error(2, "format_cuda_error", "number expected, got no value"))
row("gpurun.format_cuda_error", A("cuMemAlloc", "x"), arg_error(2, "format_cuda_error", "number expected, got string"))
for _, code in ipairs({ 1.5, NAN, INF, -INF, BIG_FLOAT }) do
  row("gpurun.format_cuda_error", A("cuMemAlloc", code),
    arg_error(2, "format_cuda_error", "number has no integer representation"))
end

row("gpurun.set_current_stream", A(42), arg_error(1, "set_current_stream", "gpurun.Stream expected, got number"))
row("gpurun.set_current_stream", A("x"), arg_error(1, "set_current_stream", "gpurun.Stream expected, got string"))
row("gpurun.set_current_stream", A({}), arg_error(1, "set_current_stream", "gpurun.Stream expected, got table"))
row("gpurun.set_current_stream", A(false), arg_error(1, "set_current_stream", "gpurun.Stream expected, got boolean"))
row("gpurun.set_current_stream", A(R.options),
  arg_error(1, "set_current_stream", "gpurun.Stream expected, got gpurun.ProgramOptions"))
for _, wrong in ipairs({ "event", "graph", "builder", "buffer" }) do
  row("gpurun.set_current_stream", A(R[wrong]), "gpurun.Stream expected, got gpurun.")
end
row("gpurun.set_current_stream", A(R.closed_stream), "attempt to use a closed gpurun.Stream")

row("gpurun.Device", A("x"), arg_error(1, "Device", "number expected, got string"))
row("gpurun.Device", A({}), arg_error(1, "Device", "number expected, got table"))
row("gpurun.Device", A(true), arg_error(1, "Device", "number expected, got boolean"))
row("gpurun.Device", A(R.options), arg_error(1, "Device", "number expected, got gpurun.ProgramOptions"))
for _, id in ipairs({ 1.5, NAN, INF, -INF, BIG_FLOAT }) do
  row("gpurun.Device", A(id), arg_error(1, "Device", "number has no integer representation"))
end
for _, id in ipairs({ -1, 64, 1000, math.maxinteger, math.mininteger }) do
  row("gpurun.Device", A(id), ANY(("CUDA device %d not found: "):format(id), NO_DRIVER))
end
row("gpurun.Device", A(0), NO_DRIVER, { when = "no_driver" })
for _, method in ipairs({ "can_access_peer", "enable_peer_access" }) do
  local label = "Device:" .. method
  row(label, A(R.device), arg_error(1, method, "gpurun.Device expected, got no value"))
  row(label, A(R.device, 0), arg_error(1, method, "gpurun.Device expected, got number"))
  row(label, A(R.device, R.stream), arg_error(1, method, "gpurun.Device expected, got gpurun.Stream"))
  row(label, A(R.device, R.closed_device), "attempt to use a closed gpurun.Device")
end
row("gpurun.driver_version", A(), NO_DRIVER, { when = "no_driver" })
row("gpurun.mem_info", A(), NO_DEVICE, { when = "no_device" })

-- Green contexts (a device with them: driver 12.4 or newer).
for _, case in ipairs({
  { nil, "table expected, got nil" },
  { 8, "table expected, got number" },
  { {}, "option 'count' (SMs per group) is required" },
  { { count = 0 }, "option 'count' (SMs per group) must be 1 or more, got 0" },
  { { count = -8 }, "option 'count' (SMs per group) must be 1 or more, got -8" },
  { { count = 1.5 }, "option 'count' must be a whole number of SMs, got 1.5" },
  { { count = "8" }, "option 'count' must be a whole number of SMs, got string" },
  { { count = 8, groups = 0 }, "option 'groups' must be 1 to 64, got 0" },
  { { count = 8, groups = 65 }, "option 'groups' must be 1 to 64, got 65" },
  { { count = 8, nope = 1 }, "unknown option 'nope' (known: count, groups)" },
}) do
  row("SMResource:split", A(R.sm, case[1]), arg_error(1, "split", case[2]))
end
row("SMResource:split", A(R.sm, { count = 1 << 20 }),
  P"^[^\n]*SMResource:split: 1 group%(s%) of 1048576 SMs asked for, but the device has %d+ SMs %(groups take at least %d+, in multiples of %d+%)")
row("SMResource:split", A(R.sm, { count = 8, groups = 64 }),
  P"SMResource:split: 64 group%(s%) of 8 SMs asked for, but the device has %d+ SMs")
row("SMResource:split", A(R.sm_group, { count = 8 }),
  "SMResource:split: only a device's whole SM resource (Device.resources.sm) splits; this one is already a split's")
for _, case in ipairs({
  { nil, "options expected: { resources = { SMResource, ... } }" },
  { {}, "option 'resources' must be a non-empty list of gpurun.SMResource (groups of SMResource:split), got nil" },
  { { resources = {} }, "option 'resources' must be a non-empty list of gpurun.SMResource (groups of SMResource:split), got table" },
  { { resources = 5 }, "option 'resources' must be a non-empty list of gpurun.SMResource (groups of SMResource:split), got number" },
  { { resources = { 5 } }, "resources[1]: gpurun.SMResource expected, got number" },
  { { nope = 1 }, "unknown option 'nope' (known: resources)" },
}) do
  row("Device:create_context", A(R.device, case[1]), arg_error(1, "create_context", case[2]))
end
row("Device:create_context", A(), arg_error(1, "create_context", "resources[1] is the whole device's: it goes alone"),
  { gpu = true, call = function(env) return env.device:create_context({ resources = { env.sm, env.sm_group } }) end })
row("Device:create_context", A(), "attempt to use a closed gpurun.SMResource",
  { gpu = true, call = function(env) return env.device:create_context({ resources = { env.closed_sm } }) end })
row("Context:create_stream", A(R.context, { priority = 1 }), P"priority 1 out of range: this device's stream priorities run from 0")
row("Context:create_stream", A(R.context, { nope = 1 }), arg_error(1, "create_stream", "unknown option 'nope' (known: priority)"))

-- gpurun.checkpoint: lock's options are checked first; the rest take
-- nothing and need the driver (spec/checkpoint_spec.lua runs them with one).
for _, case in ipairs({
  { "soon", "table of options expected, got string" },
  { { timeout = 1 }, "unknown option 'timeout' (known: timeout_ms)" },
  { { timeout_ms = -1 }, "option 'timeout_ms' must be 0 (no timeout) to 4294967295, got -1" },
  { { timeout_ms = 2 ^ 32 }, "option 'timeout_ms' must be 0 (no timeout) to 4294967295, got 4294967296" },
  { { timeout_ms = 0.5 }, "option 'timeout_ms' must be a whole number of milliseconds, got 0.5" },
  { { timeout_ms = "5" }, "option 'timeout_ms' must be a whole number of milliseconds, got string" },
}) do
  row("gpurun.checkpoint.lock", A(case[1]), arg_error(1, "lock", case[2]))
end
row("gpurun.checkpoint.lock", A({ timeout_ms = NAN }), P("bad argument #1 to %'lock%' %(option "
  .. "'timeout_ms' must be a whole number of milliseconds, got " .. NAN_TEXT .. "%)"))
for _, name in ipairs({ "lock", "checkpoint", "restore", "unlock", "state", "restore_thread_id" }) do
  row("gpurun.checkpoint." .. name, A(), NO_DRIVER, { when = "no_driver" })
end

-- ---- scalars ------------------------------------------------------------------------

-- Every scalar stores its value by the rules of a buffer element of its dtype.
local SCALAR_DTYPES = { i8 = "int8", u8 = "uint8", i16 = "int16", u16 = "uint16", i32 = "int32",
  u32 = "uint32", i64 = "int64", u64 = "uint64" }
for _, name in ipairs(catalog.sorted_keys(SCALAR_DTYPES)) do
  local label, dtype = "gpurun." .. name, SCALAR_DTYPES[name]
  row(label, A(), arg_error(1, name, "number expected, got no value"))
  row(label, A("5"), arg_error(1, name, "number expected, got string"))
  row(label, A({}), arg_error(1, name, "number expected, got table"))
  row(label, A(R.scalar), arg_error(1, name, "number expected, got gpurun.Scalar"))
  row(label, A(1.5), arg_error(1, name, "integer expected for " .. dtype .. ", got 1.5"))
  row(label, A(NAN), P(("bad argument #1 to '%s' %%(integer expected for %s, got %s%%)")
    :format(name, dtype, NAN_TEXT)))
  row(label, A(INF), "(inf out of range for " .. dtype .. " (")
  row(label, A(-INF), "(-inf out of range for " .. dtype .. " (")
end
row("gpurun.i64", A(BIG_FLOAT), "(9.2233720368548e+18 out of range for int64 (")
row("gpurun.i32", A(2147483648), arg_error(1, "i32", "2147483648 out of range for int32 (-2147483648..2147483647)"))
row("gpurun.i32", A(-2147483649), "(-2147483649 out of range for int32 (")
row("gpurun.u32", A(-1), arg_error(1, "u32", "-1 out of range for uint32 (0..4294967295)"))
row("gpurun.u32", A(4294967296), "(4294967296 out of range for uint32 (")
row("gpurun.u64", A(-1), "(-1 out of range for uint64 (")
row("gpurun.u64", A(math.mininteger), "(-9223372036854775808 out of range for uint64 (")
row("gpurun.u64", A(2 ^ 64), "(1.844674407371e+19 out of range for uint64 (")
row("gpurun.u8", A(256), arg_error(1, "u8", "256 out of range for uint8 (0..255)"))
row("gpurun.i8", A(-129), arg_error(1, "i8", "-129 out of range for int8 (-128..127)"))
row("gpurun.u16", A(65536), arg_error(1, "u16", "65536 out of range for uint16 (0..65535)"))
row("gpurun.i16", A(32768), arg_error(1, "i16", "32768 out of range for int16 (-32768..32767)"))
for _, name in ipairs({ "f32", "f64", "f16", "bf16" }) do
  local label = "gpurun." .. name
  row(label, A(), arg_error(1, name, "number expected, got no value"))
  row(label, A("1.5"), arg_error(1, name, "number expected, got string"))
  row(label, A({}), arg_error(1, name, "number expected, got table"))
  row(label, A(true), arg_error(1, name, "number expected, got boolean"))
  row(label, A(R.scalar), arg_error(1, name, "number expected, got gpurun.Scalar"))
end
row("gpurun.f32", A(1e39), arg_error(1, "f32", "1e+39 out of range for float32"))
row("gpurun.f32", A(-3.5e38), arg_error(1, "f32", "-3.5e+38 out of range for float32"))
-- A finite value that rounds to infinity: from the largest finite plus half an ulp.
row("gpurun.f16", A(65520), arg_error(1, "f16", "65520 out of range for float16"))
row("gpurun.f16", A(-1e5), arg_error(1, "f16", "-100000.0 out of range for float16"))
row("gpurun.bf16", A(0x1.ffp127), arg_error(1, "bf16", "3.3961775292305e+38 out of range for bfloat16"))
row("gpurun.bf16", A(1e39), arg_error(1, "bf16", "1e+39 out of range for bfloat16"))

-- ---- structs ---------------------------------------------------------------------------

local FIELDS = "list of fields { {name, dtype [, count]}, ... }"
local XN = { { "x", "float32" }, { "n", "uint64" } }
row("gpurun.struct", A(), arg_error(1, "struct", FIELDS .. " expected, got no value"))
row("gpurun.struct", A("x float32"), arg_error(1, "struct", FIELDS .. " expected, got string"))
row("gpurun.struct", A({}), arg_error(1, "struct", "a list of 1 to 1024 fields { {name, dtype [, count]}, ... } expected, got 0"))
row("gpurun.struct", A({ x = "float32" }), "(a list of 1 to 1024 fields")
row("gpurun.struct", A({ 5 }), arg_error(1, "struct", "field 1: { name, dtype [, count] } expected, got number"))
row("gpurun.struct", A({ { "x" } }), arg_error(1, "struct", "field 1: { name, dtype [, count] } expected, got another table"))
row("gpurun.struct", A({ { "x", "float32", 1, 2 } }), "(field 1: { name, dtype [, count] } expected")
row("gpurun.struct", A({ { 1, "float32" } }), arg_error(1, "struct", "field 1: a name expected first, got number"))
row("gpurun.struct", A({ { "x", "float8" } }), "(field 1 ('x'): unknown dtype 'float8' (expected one of: float32,")
row("gpurun.struct", A({ { "x", {} } }), arg_error(1, "struct", "field 1 ('x'): a dtype name expected second, got table"))
row("gpurun.struct", A({ { "x", "int8" }, { "x", "int8" } }), arg_error(1, "struct", "field 2: 'x' is field 1's name too"))
row("gpurun.struct", A({ { "", "int8" } }), "(field 1: name '' is not an identifier")
row("gpurun.struct", A({ { "a.b", "int8" } }), "(field 1: name 'a.b' is not an identifier")
row("gpurun.struct", A({ { "bytes", "int8" } }), "(field 1: 'bytes' is a gpurun.Struct's own member")
row("gpurun.struct", A({ { "v", "int8", 0 } }), arg_error(1, "struct", "field 1 ('v'): count must be an integer from 1 to 32764, got 0"))
row("gpurun.struct", A({ { "v", "int8", NAN } }), P("field 1 %('v'%): count must be an integer from 1 to 32764, got " .. NAN_TEXT))
row("gpurun.struct", A({ { "v", "int8", INF } }), arg_error(1, "struct", "field 1 ('v'): count must be an integer from 1 to 32764, got inf"))
row("gpurun.struct", A({ { "v", "float64", 4095 }, { "c", "int32" }, { "d", "int8" } }),
  arg_error(1, "struct", "field 3 ('d') ends at byte 32765, past the 32764 bytes a kernel's parameters may take"))
row("gpurun.struct", A(XN, 5), arg_error(2, "struct", "table of options expected, got number"))
row("gpurun.struct", A(XN, { alignment = 8 }), arg_error(2, "struct", "unknown option 'alignment' (known: align)"))
row("gpurun.struct", A(XN, { align = 4 }), arg_error(2, "struct", "option 'align' must be a power of two from 8 (the fields' own alignment) to 4096, got 4"))
row("gpurun.struct", A(XN, { align = 12 }), "(option 'align' must be a power of two from 8")
row("gpurun.struct", A(XN, { align = NAN }), P("option 'align' must be a power of two, got " .. NAN_TEXT))
row("gpurun.struct", A({ { "v", "uint8", 32764 } }, { align = 4096 }),
  "(aligned to 4096, the struct is 32768 bytes, past the 32764 bytes")
local FIELD_VALUES = "table of field values { name = value, ... } expected"
row("StructLayout:new", A(R.struct_layout, 5), arg_error(1, "new", FIELD_VALUES .. ", got number"))
row("StructLayout:new", A(R.struct_layout, { y = 1 }), "gpurun.Struct has no field 'y' (its fields: x, n)")
row("StructLayout:new", A(R.struct_layout, { 1.5 }), "gpurun.Struct fields are set by name ({ x = 1.5 }), got a number key")
row("StructLayout:new", A(R.struct_layout, { x = 1e39 }), "gpurun.Struct field 'x': 1e+39 out of range for float32")
row("StructLayout.__call", A(R.struct_layout, "x"), arg_error(2, "__call", FIELD_VALUES .. ", got string"))
row("StructLayout.__call", A(R.struct_layout, { n = -1 }), "gpurun.Struct field 'n': -1 out of range for uint64 (0..18446744073709551615)")
row("StructLayout:offsetof", A(R.struct_layout), arg_error(1, "offsetof", "field name expected, got no value"))
row("StructLayout:offsetof", A(R.struct_layout, "y"), arg_error(1, "offsetof", "field name expected, got 'y', which names no field"))
row("StructLayout:offsetof", A(R.struct_layout, 1), arg_error(1, "offsetof", "field name expected, got number"))
row("Struct.__index", A(R.struct_value, "y"), "gpurun.Struct has no field 'y' (its fields: x, n)")
row("Struct.__index", A(R.struct_value, 1), "gpurun.Struct fields are named by strings, got number")
row("Struct.__newindex", A(R.struct_value, "x", 1e39), "gpurun.Struct field 'x': 1e+39 out of range for float32")
row("Struct.__newindex", A(R.struct_value, "n", 1.5), "gpurun.Struct field 'n': integer expected for uint64, got 1.5")
row("Struct.__newindex", A(R.struct_value, "n", NAN), P("gpurun.Struct field 'n': integer expected for uint64, got " .. NAN_TEXT))
row("Struct.__newindex", A(R.struct_value, "x", "1"), "gpurun.Struct field 'x': number expected, got string")
row("Struct.__newindex", A(R.struct_value, "y", 1), "gpurun.Struct has no field 'y' (its fields: x, n)")
row("Struct.__newindex", A(R.struct_value, "layout", 1), "gpurun.Struct has no field 'layout'")
row("Kernel:check_argument", A(R.add, 4, R.struct_value),
  "kernel 'vec_add' parameter 4 (.u64): not a struct: a gpurun.Struct passes only as a struct parameter")

-- ---- elementwise kernels (Lua parts of the module: their own messages) ----------------

local EW = "elementwise kernel 'k'"
row("gpurun.elementwise", A(), "elementwise kernel 'kernel' in_params: a string such as \"float32 a, float32 b\" expected, got nil")
row("gpurun.elementwise", A(5, "float32 r", "r = 1", "k"), EW .. " in_params: a string such as")
row("gpurun.elementwise", A("float32 a"), "out_params: a string such as")
row("gpurun.elementwise", A("complex64 a", "float32 r", "r = 1", "k"),
  EW .. " in_params: dtype complex64 for a: generated kernels take real dtypes, not complex ones")
row("gpurun.elementwise", A("float32 a", "complex128 r", "r = a", "k"),
  EW .. " out_params: dtype complex128 for r: generated kernels take real dtypes, not complex ones")
row("gpurun.elementwise", A("float32 a", "float32 r"), "the operation must be a non-empty string of CUDA C")
row("gpurun.elementwise", A("float32 a", "float32 r", "", "k"), EW .. ": the operation must be a non-empty string")
row("gpurun.elementwise", A("float32 a", "float32 r", "r = a", 5), "the name must be a C identifier not starting with '_', got 5")
row("gpurun.elementwise", A("float32 a", "float32 r", "r = a", "_k"), "the name must be a C identifier")
row("gpurun.elementwise", A("float8 a", "float32 r", "r = a", "k"), EW .. " in_params: unknown dtype 'float8' for a")
row("gpurun.elementwise", A("float32 a", "float32 r", "r = a", "k", 5), EW .. ": options must be a table, got number")
row("gpurun.elementwise", A("float32 a", "float32 r", "r = a", "k", { cache = "fast" }),
  EW .. ": options.cache must be \"default\" or \"streaming\", got 'fast'")
row("gpurun.guard", A(), arg_error(1, "guard", "function or table expected, got no value"))
row("gpurun.guard", A(5), arg_error(1, "guard", "function or table expected, got number"))
row("gpurun.guard", A("f"), arg_error(1, "guard", "function or table expected, got string"))
row("gpurun.elementwise", A("float32 a", "float32 r", "r = a", "k", { blok = 64 }),
  EW .. ": unknown option 'blok' (known: block, unroll, blocks_per_sm, preamble, cache)")
row("gpurun.elementwise_pipeline", A("float32 a", { "float32 r = a" }, "r", "p", { fusion = "never" }),
  "elementwise pipeline 'p': unknown option 'fusion' (known: fuse, accumulate, block, unroll, blocks_per_sm, preamble, cache)")
row("gpurun.elementwise_pipeline", A(), "elementwise pipeline 'pipeline' in_params: a string such as")
row("gpurun.elementwise_pipeline", A("float32 a", "x", "r1", "p"),
  "elementwise pipeline 'p': stages must be a non-empty list of \"<dtype> <name> = <expression>\"")
row("gpurun.elementwise_pipeline", A("float32 a", { "float32 r1 = a + 1" }, "r9", "p"),
  "elementwise pipeline 'p': output 'r9' is not a stage")
-- Lists read with no metamethod run: a fake's __len or __index never runs.
local PLAIN_LIST = "must be a plain list (no metatable) of "
row("gpurun.elementwise_pipeline", A("float32 a", R.biting_fake, "r", "p"),
  "elementwise pipeline 'p': stages " .. PLAIN_LIST .. "\"<dtype> <name> = <expression>\", got a table with a metatable")
row("gpurun.elementwise_pipeline", A("float32 a", R.raising_fake, "r", "p"),
  "elementwise pipeline 'p': stages " .. PLAIN_LIST .. "\"<dtype> <name> = <expression>\", got a table with a metatable")
row("gpurun.elementwise_pipeline", A("float32 a", { "float32 r = a" }, R.raising_fake, "p"),
  "elementwise pipeline 'p': outputs " .. PLAIN_LIST .. "stage names, got a table with a metatable")
row("gpurun.elementwise_pipeline", A("float32 a", { "float32 r = a" }, R.biting_fake, "p"),
  "elementwise pipeline 'p': outputs " .. PLAIN_LIST .. "stage names, got a table with a metatable")
row("gpurun.elementwise_pipeline", A("float32 a", { "float32 r = a" }, "r", "p", R.table_with_metatable),
  "elementwise pipeline 'p': options must be a plain table (no metatable), got a table with a metatable")
row("gpurun.elementwise_pipeline", A("float32 a", { "float32 r1 = a + 1" }, "r1", R.lying_dtype),
  "elementwise pipeline: the name must be a C identifier not starting with '_', got a table")
row("gpurun.elementwise_pipeline", A("float32 a", { "float32 r1 = a + 1" }, "r1", "_p"),
  "elementwise pipeline: the name must be a C identifier not starting with '_', got '_p'")
row("gpurun.elementwise_pipeline", A("float32 a", { "float32 r1 = a + 1" }, "r1", "p", { fuse = R.lying_dtype }),
  "elementwise pipeline 'p': options.fuse must be \"auto\", \"always\" or \"never\", got a table")

-- ---- reductions and scans (Lua parts of the module: their own messages) ----------------

local RK = "reduction kernel 'k'"
local OPS_TEXT = "sum, prod, min, max, argmin, argmax, any, all"
row("gpurun.reduction", A(), "reduction kernel 'reduction' in_params: a string such as \"float32 a, float32 b\" expected, got nil")
row("gpurun.reduction", A("float32 x"), "reduction kernel 'reduction' out_params: a string such as")
row("gpurun.reduction", A("float32 x", ""), "reduction kernel 'reduction': out_params names no output")
row("gpurun.reduction", A("float32 x", "float32 s"), "reduction kernel 'reduction': map_expr must be a non-empty string of C code, got nil")
row("gpurun.reduction", A("float32 x", "float32 s", "x"),
  "reduce_expr (an expression of a and b, or one of " .. OPS_TEXT .. ") must be a non-empty string of C code, got nil")
row("gpurun.reduction", A("float32 x", "float32 s", "x", "a + b"), "identity must be a number or a non-empty string of C, got nil")
row("gpurun.reduction", A("float32 x", "float32 s", "x", "a + b", nil, 0 / 0), "identity must not be NaN")
row("gpurun.reduction", A("float32 x", "float32 s", "x", "sum", nil, 0, "k"), RK .. ": 'sum' brings its own identity; pass nil for identity")
row("gpurun.reduction", A("float32 x", "float32 s", "x", "sum", nil, nil, "2k"), "reduction: the name must be a C identifier not starting with '_', got '2k'")
row("gpurun.reduction", A("float8 x", "float32 s", "x", "sum", nil, nil, "k"), RK .. " in_params: unknown dtype 'float8' for x")
row("gpurun.reduction", A("float32 x", "float32 s", "x", "sum", nil, nil, "k", { reduce_type = "float8" }),
  RK .. ": options.reduce_type must be a dtype")
row("gpurun.reduction", A("float32 x", "float32 s", "x", "sum", nil, nil, "k", { reduce = "sum" }),
  RK .. ": unknown option 'reduce' (known: reduce_type, block, unroll, blocks_per_sm, preamble, cache)")
row("gpurun.reduction", A("float32 x", "float32 s, float32 t", "x", "sum", nil, nil, "k"), RK .. ": post_map_expr is needed to write several outputs")
row("gpurun.reduction", A("float32 x", "float32 s", "x", "sum", "t = a", nil, "k"), RK .. ": post_map_expr never mentions output 's'")
row("gpurun.reduction", A("float32 x", "float32 count", "x", "sum", nil, nil, "k"), RK .. ": an output cannot be named 'count'")
row("gpurun.reduction", A("float32 x", "float32 s", "x", "any", nil, nil, "k", { reduce_type = "float32" }),
  RK .. ": any reduces as bool; options.reduce_type does not apply")
row("gpurun.reduction", A("float32 x", "float32 s", "x", "sum", nil, nil, "k", 5), RK .. ": options must be a table, got number")
row("gpurun.reduction", A("float32 x", "float32 s", "x", "sum", nil, nil, "k", { block = 100 }), RK .. ": options.block must be a multiple of 32, got 100")

local TARGET = "gpurun.Stream or gpurun.GraphBuilder expected, got "
for _, name in ipairs{ "sum", "prod", "min", "max", "argmin", "argmax", "any", "all", "mean", "norm",
                       "max_abs_diff", "inclusive_scan", "exclusive_scan", "select" } do
  local label = "gpurun." .. name
  local fname = "'" .. label .. "'"
  row(label, A(), "bad argument #1 to " .. fname .. " (" .. TARGET .. "nil)")
  row(label, A(42), "bad argument #1 to " .. fname .. " (" .. TARGET .. "number)")
  row(label, A(R.options), "bad argument #1 to " .. fname .. " (" .. TARGET .. "gpurun.ProgramOptions)")
  row(label, A(R.stream, 5), "bad argument #2 to " .. fname .. " (gpurun.Buffer expected for "
      .. (name == "max_abs_diff" and "a" or "x") .. ", got number)")
  row(label, A(R.stream, R.closed_buffer, R.buffer), "attempt to use a closed gpurun.Buffer")
end
for _, name in ipairs{ "sum", "prod", "min", "max", "argmin", "argmax", "any", "all", "mean", "norm" } do
  local label = "gpurun." .. name
  local fname = "'" .. label .. "'"
  -- argmin and argmax write positions: their out must be an integer buffer
  local arg = name == "argmin" or name == "argmax"
  local out, out_dtype = arg and R.buffer_i32 or R.buffer, arg and "int32" or "float32"
  row(label, A(R.stream, R.buffer, out), ("reduction kernel 'gpurun_%s' output 1 (%s s): has 16 elements, "
      .. "but this reduction gives 1 (one per call)"):format(name, out_dtype))
  row(label, A(R.stream, R.buffer, "x"), "bad argument #3 to " .. fname .. " (gpurun.Buffer or nil expected for out, got string)")
  row(label, A(R.stream, R.buffer, nil, { nope = 1 }), "bad argument #4 to " .. fname
      .. " (unknown option 'nope' (known: accumulate, rows, cols, axis, offsets))")
  row(label, A(R.stream, R.buffer, nil, "x"), "bad argument #4 to " .. fname .. " (options table expected, got string)")
  row(label, A(R.building, R.buffer), "bad argument #3 to " .. fname
      .. " (out is needed on a GraphBuilder: no buffer can be made while capturing)")
  row(label, A(R.stream, R.buffer, out, { rows = 3, cols = 5, axis = 2 }),
      "reduction kernel 'gpurun_" .. name .. "': rows * cols (3 * 5) must be the inputs' 16 elements")
  row(label, A(R.stream, R.buffer_f64, out, { rows = 4, cols = 4, axis = 3 }),
      "shape.axis must be 2 (a result per row) or 1 (a result per column), got 3")
  row(label, A(R.stream, R.buffer_f64, out, { offsets = R.buffer }),
      "shape.offsets must be int32, uint32, int64 or uint64, got float32")
end
row("gpurun.argmin", A(R.stream, R.buffer, R.buffer), "bad argument #3 to 'gpurun.argmin' (out must be an integer buffer (a 1-based position), got float32)")
row("gpurun.argmax", A(R.stream, R.buffer, R.buffer), "bad argument #3 to 'gpurun.argmax' (out must be an integer buffer (a 1-based position), got float32)")
row("gpurun.mean", A(R.stream, R.buffer, R.buffer_i32), "bad argument #3 to 'gpurun.mean' (out must be a float buffer (float32, float64, float16, bfloat16), got int32)")
row("gpurun.norm", A(R.stream, R.buffer, nil, { accumulate = "half" }),
  "bad argument #4 to 'gpurun.norm' (options.accumulate must be a dtype")
row("gpurun.max", A(R.stream, R.buffer, nil, { accumulate = "float64" }),
  "bad argument #4 to 'gpurun.max' (options.accumulate does not apply: max combines values exactly)")
row("gpurun.max_abs_diff", A(R.stream, R.buffer, "x"), "bad argument #3 to 'gpurun.max_abs_diff' (gpurun.Buffer expected for b, got string)")
row("gpurun.max_abs_diff", A(R.stream, R.buffer, R.buffer8), "reduction kernel 'gpurun_max_abs_diff' input 2 (float32 b): has 8 elements, but a has 16")
row("gpurun.max_abs_diff", A(R.stream, R.buffer, R.buffer, R.buffer_i32), "bad argument #4 to 'gpurun.max_abs_diff' (out must be a float buffer (float32, float64, float16, bfloat16), got int32)")
for _, name in ipairs{ "inclusive_scan", "exclusive_scan" } do
  local label = "gpurun." .. name
  local fname = "'" .. label .. "'"
  row(label, A(R.stream, R.buffer, 5), "bad argument #3 to " .. fname .. " (gpurun.Buffer expected for y, got number)")
  row(label, A(R.stream, R.buffer, R.buffer8), "bad argument #3 to " .. fname .. " (y has 8 elements, but x has 16)")
  row(label, A(R.stream, R.buffer, R.buffer, "nope"), "bad argument #4 to " .. fname
      .. " ('nope' is neither an operation (sum, prod, min, max) nor an expression of a and b)")
  row(label, A(R.stream, R.buffer, R.buffer, "argmax"), "bad argument #4 to " .. fname
      .. " (argmax is not a scan operation (sum, prod, min, max))")
  row(label, A(R.stream, R.buffer, R.buffer, "a * b"), "bad argument #5 to " .. fname
      .. " (options.identity (a number or C text) is needed with an expression, got nil)")
  row(label, A(R.stream, R.buffer, R.buffer, "sum", { identity = 0 }), "bad argument #5 to " .. fname
      .. " (options.identity: 'sum' brings its own identity)")
  row(label, A(R.stream, R.buffer, R.buffer, "sum", { items = 0 }), "bad argument #5 to " .. fname
      .. " (options.items must be an integer from 1 to 32, got 0)")
  row(label, A(R.stream, R.buffer, R.buffer, "sum", { deterministic = 1 }), "bad argument #5 to " .. fname
      .. " (options.deterministic must be a boolean, got number)")
  row(label, A(R.stream, R.buffer, R.buffer, "sum", { nope = 1 }), "bad argument #5 to " .. fname
      .. " (unknown option 'nope' (known: identity, deterministic, block, items))")
end
row("gpurun.select", A(R.stream, R.buffer, 5), "bad argument #3 to 'gpurun.select' (predicate: a C expression of x (and i) expected, got number)")
row("gpurun.select", A(R.stream, R.buffer, "x > 0", R.buffer_i32, R.buffer_i32),
  "bad argument #4 to 'gpurun.select' (out must have x's dtype float32, got int32)")
row("gpurun.select", A(R.stream, R.buffer, "x > 0", R.buffer, R.buffer),
  "bad argument #5 to 'gpurun.select' (count must be one int32, uint32, int64 or uint64 element, got 16 float32)")
row("gpurun.select", A(R.stream, R.buffer, "x > 0", R.buffer, nil),
  "bad argument #5 to 'gpurun.select' (gpurun.Buffer expected for count, got nil)")

-- ---- sorts and binary searches -----------------------------------------------------------

for _, name in ipairs{ "sort", "lower_bound", "upper_bound" } do
  local label = "gpurun." .. name
  local fname = "'" .. label .. "'"
  local first = name == "sort" and "keys" or "sorted"
  row(label, A(), "bad argument #1 to " .. fname .. " (" .. TARGET .. "nil)")
  row(label, A(42), "bad argument #1 to " .. fname .. " (" .. TARGET .. "number)")
  row(label, A(R.options), "bad argument #1 to " .. fname .. " (" .. TARGET .. "gpurun.ProgramOptions)")
  row(label, A(R.stream, 5), "bad argument #2 to " .. fname .. " (gpurun.Buffer expected for " .. first
      .. ", got number)")
  row(label, A(R.stream, R.closed_buffer, R.buffer), "attempt to use a closed gpurun.Buffer")
  row(label, A(R.closed_stream, R.buffer, R.buffer), "attempt to use a closed gpurun.Stream")
end
row("gpurun.sort", A(R.stream, R.buffer, "x"), "bad argument #3 to 'gpurun.sort' (options table expected, got string)")
row("gpurun.sort", A(R.stream, R.buffer, { order = 1 }), "bad argument #3 to 'gpurun.sort' (unknown option 'order' "
    .. "(known: values, descending, out, values_out, segments))")
row("gpurun.sort", A(R.stream, R.buffer, { descending = "yes" }),
  "bad argument #3 to 'gpurun.sort' (options.descending must be a boolean, got string)")
row("gpurun.sort", A(R.stream, R.buffer, { values = 5 }),
  "bad argument #3 to 'gpurun.sort' (gpurun.Buffer expected for options.values, got number)")
row("gpurun.sort", A(R.stream, R.buffer, { values = R.closed_buffer }), "attempt to use a closed gpurun.Buffer")
row("gpurun.sort", A(R.stream, R.buffer, { values = R.buffer8 }),
  "bad argument #3 to 'gpurun.sort' (options.values has 8 elements, but keys has 16)")
row("gpurun.sort", A(R.stream, R.buffer, { values = R.buffer }),
  "bad argument #3 to 'gpurun.sort' (keys and options.values share memory)")
row("gpurun.sort", A(R.stream, R.buffer, { values = R.view }),
  "bad argument #3 to 'gpurun.sort' (options.values has 8 elements, but keys has 16)")
row("gpurun.sort", A(R.stream, R.buffer, { out = R.buffer_i32 }),
  "bad argument #3 to 'gpurun.sort' (options.out must have the keys' dtype float32, got int32)")
row("gpurun.sort", A(R.stream, R.buffer, { out = R.buffer8 }),
  "bad argument #3 to 'gpurun.sort' (options.out has 8 elements, fewer than the keys' 16)")
row("gpurun.sort", A(R.stream, R.buffer, { values_out = R.buffer_i32 }),
  "bad argument #3 to 'gpurun.sort' (options.values_out needs options.values)")
row("gpurun.sort", A(R.stream, R.buffer, { segments = R.buffer_f64 }),
  "bad argument #3 to 'gpurun.sort' (options.segments must be int32, uint32, int64 or uint64 offsets "
    .. "(at least one), got 16 float64)")
row("gpurun.sort", A(R.stream, R.buffer, { segments = R.buffer_i32, values = R.buffer_i32 }),
  "bad argument #3 to 'gpurun.sort' (options.values and options.segments share memory)")
for _, name in ipairs{ "lower_bound", "upper_bound" } do
  local label = "gpurun." .. name
  local fname = "'" .. label .. "'"
  row(label, A(R.stream, R.buffer, nil), "bad argument #3 to " .. fname .. " (gpurun.Buffer expected for queries, got nil)")
  row(label, A(R.stream, R.buffer, R.buffer_i32), "bad argument #3 to " .. fname
      .. " (queries must have the sorted buffer's dtype float32, got int32)")
  row(label, A(R.stream, R.buffer, R.buffer, { out = R.buffer_i32 }), "bad argument #4 to " .. fname
      .. " (options.out must be int64 (1-based positions), got int32)")
  row(label, A(R.stream, R.buffer, R.buffer, { nope = 1 }), "bad argument #4 to " .. fname
      .. " (unknown option 'nope' (known: out))")
  row(label, A(R.stream, R.buffer, R.buffer, 5), "bad argument #4 to " .. fname .. " (options table expected, got number)")
  row(label, A(R.building, R.buffer, R.buffer), "bad argument #4 to " .. fname
      .. " (options.out is needed on a GraphBuilder: no buffer can be made while capturing)")
end

-- ---- host callbacks and pipelines ------------------------------------------------------

row("gpurun.HostCallback", A(), arg_error(1, "HostCallback", "function expected, got no value"))
row("gpurun.HostCallback", A(5), arg_error(1, "HostCallback", "function expected, got number"))
row("gpurun.HostCallback", A("print"), arg_error(1, "HostCallback", "function expected, got string"))
row("HostCallback:launch", A(R.callback), arg_error(1, "launch", "gpurun.Stream or gpurun.GraphBuilder expected, got no value"))
row("HostCallback:launch", A(R.callback, 5), arg_error(1, "launch", "gpurun.Stream or gpurun.GraphBuilder expected, got number"))
row("HostCallback:launch", A(R.callback, R.closed_stream), "attempt to use a closed gpurun.Stream")
row("HostCallback:launch", A(R.callback, R.builder), "GraphBuilder is not building (it is idle)")
row("HostCallback:launch", A(R.callback, R.body), "GraphBuilder is not building (it is idle)", { gpu = true })
row("HostCallback:launch", A(R.callback, R.building_body), "a conditional body may run any number of times", { gpu = true })
row("HostCallback:close", nil, "gpurun.HostCallback is used by 1 graph(s) or graph builder(s); close them first",
  { gpu = true, before = { "callback", "building" }, call = function(env)
    env.callback:launch(env.building)
    return env.callback:close()
  end })
local PIPE = "gpurun.pipeline"
row("gpurun.pipeline", A(5), PIPE .. ": options must be a table, got number")
row("gpurun.pipeline", A({ nope = 1 }), PIPE .. ": unknown option 'nope' (known: name, max_streams, fuse, strict, timing, pool, quiet, devices)")
row("gpurun.pipeline", A({ name = "1x" }), PIPE .. ": options.name must be a C identifier not starting with '_', got '1x'")
row("gpurun.pipeline", A({ name = "_x" }), PIPE .. ": options.name must be a C identifier")
row("gpurun.pipeline", A({ max_streams = 0 }), PIPE .. " 'pipeline': options.max_streams must be an integer from 1 to 64, got 0")
row("gpurun.pipeline", A({ max_streams = 1.5 }), "options.max_streams must be an integer from 1 to 64, got 1.5")
row("gpurun.pipeline", A({ fuse = "yes" }), "options.fuse must be a boolean, got string")
row("gpurun.pipeline", A({ timing = "cupti" }), "options.timing must be true, \"events\" or \"nvtx\", got 'cupti'")
row("gpurun.pipeline", A({ devices = "all" }), "options.devices must be a list of device ordinals")
row("gpurun.pipeline", A({ pool = {} }), "options.pool must be a gpurun.MemoryPool, got table")
row("gpurun.pipeline", A(R.table_with_metatable),
  PIPE .. ": options must be a plain table (no metatable), got a table with a metatable")

-- Every method of a pipeline. A declaration refuses what running its
-- stage would refuse, and a table that only names itself a gpurun.Buffer is
-- refused naming the argument that passed it.
local BAD = "pipeline 'bad': "
local NAMED = "a gpurun.Buffer expected, got table named gpurun.Buffer (its ptr is nil)"
local NAME_TEXT = "a name (letters, digits, _ . -, not starting with a digit) expected, got "
row("pipeline:buffer", A(R.pipe, 5, {}), BAD .. "buffer: " .. NAME_TEXT .. "number")
row("pipeline:buffer", A(R.pipe, "t", {}), BAD .. "buffer: the name 't' is taken already")
row("pipeline:buffer", A(R.pipe, "b", 5),
  BAD .. "buffer 'b': a gpurun.Buffer, gpurun.PinnedBuffer or table expected, got number")
row("pipeline:buffer", A(R.pipe, "b", R.named_buffer), BAD .. "buffer 'b': " .. NAMED)
row("pipeline:buffer", A(R.pipe, "b", {}, { filled = 1 }), BAD .. "buffer 'b': options.filled must be a boolean")
row("pipeline:buffer", A(R.pipe, "b", {}, { nope = 1 }), BAD .. "buffer 'b': unknown option 'nope' (known: filled)")
row("pipeline:buffer", A(R.pipe, "b", {}, R.table_with_metatable), BAD .. "buffer 'b': options must be a "
  .. "plain table { filled = boolean } (no metatable), got a table with a metatable")
row("pipeline:buffer", A(R.pipe, "b", R.closed_buffer), BAD .. "buffer 'b': attempt to use a closed gpurun.Buffer")
row("pipeline:buffers", A(R.pipe, 5), BAD .. "buffers: a table { name = buffer, ... } expected, got number")
row("pipeline:buffers", A(R.pipe, { {} }), BAD .. "buffers: names must be strings, got number")
row("pipeline:buffers", A(R.pipe, { b = R.named_buffer }), BAD .. "buffer 'b': " .. NAMED)
row("pipeline:temporary", A(R.pipe, "x", 0), BAD .. "temporary 'x': the count must be an integer from 1 to 2^40, got 0")
row("pipeline:temporary", A(R.pipe, "x", 1.5), BAD .. "temporary 'x': the count must be an integer from 1 to 2^40, got 1.5")
row("pipeline:temporary", A(R.pipe, "x", R.lying_dtype), BAD .. "temporary 'x': the count must be an integer from 1 to 2^40, got a table")
row("pipeline:temporary", A(R.pipe, "x", 4, "float8"), BAD .. "temporary 'x': unknown dtype float8 (one of float32,")
row("pipeline:temporary", A(R.pipe, "x", 4, R.lying_dtype), BAD .. "temporary 'x': a dtype name (one of float32,")
row("pipeline:view", A(R.pipe, "v", "nope", 1), BAD .. "view 'v': a declared buffer, temporary or view (a handle, its "
  .. "name or a gpurun.Buffer) expected, got 'nope', which names none")
row("pipeline:view", A(R.pipe, "v", "t", 0), BAD .. "view 'v': first must be an element of 't' (1 to 16), got 0")
row("pipeline:view", A(R.pipe, "v", "t", R.lying_dtype), BAD .. "view 'v': first must be an element of 't' (1 to 16), got a table")
row("pipeline:view", A(R.pipe, "v", "t", 2, 16), BAD .. "view 'v': count must be from 1 to 15, got 16")
row("pipeline:view", A(R.pipe, "v", R.named_buffer, 1), BAD .. "view 'v': " .. NAMED)
row("pipeline:scalar", A(R.pipe, "x", "1"), BAD .. "scalar 'x': a number expected, got string")
row("pipeline:scalar", A(R.pipe, "x", 1, "float8"), BAD .. "scalar 'x': unknown dtype float8")
row("pipeline:scalar", A(R.pipe, "x", 1, R.lying_dtype), BAD .. "scalar 'x': a dtype name (one of float32,")
row("pipeline:scalar", A(R.pipe, "x", 1e300, "float32"), BAD .. "scalar 'x': 1e+300 out of range for float32")
row("pipeline:scalar", A(R.pipe, "x", 1.5, "int32"), BAD .. "scalar 'x': integer expected for int32, got 1.5")
row("pipeline:scalar", A(R.pipe, "x", 300, "uint8"), BAD .. "scalar 'x': 300 out of range for uint8 (0..255)")
local CALL = "call: a kernel object with params (gpurun.elementwise, a reduction) expected first, got "
row("pipeline:call", A(R.pipe, 5), BAD .. CALL .. "number")
row("pipeline:call", A(R.pipe, { name = "k", params = {} }, "t"), BAD .. CALL .. "table")
row("pipeline:call", A(R.pipe, R.table_with_metatable), BAD .. CALL .. "a table without params")
row("pipeline:call", A(R.pipe, R.twice, "t"), BAD .. "stage 'twice': 'twice' takes 2 arguments (x, y), got 1")
local SCALED = BAD .. "stage 'scaled': argument 2 (float32 s): "
for _, case in ipairs({ { A(R.pipe, R.scaled, "t", nil, "u"), "nil" }, { A(R.pipe, R.scaled, "t", print, "u"), "function" },
    { A(R.pipe, R.scaled, "t", R.coroutine, "u"), "thread" }, { A(R.pipe, R.scaled, "t", io.stdout, "u"), "FILE*" },
    { A(R.pipe, R.scaled, "t", {}, "u"), "table" }, { A(R.pipe, R.scaled, "t", true, "u"), "boolean" } }) do
  row("pipeline:call", case[1], SCALED .. "a gpurun.Buffer, a gpurun scalar or a number expected, got " .. case[2])
end
row("pipeline:call", A(R.pipe, R.scaled, "t", 1e300, "u"), SCALED .. "1e+300 out of range for float32")
row("pipeline:call", A(R.pipe, R.scaled, "t", gpurun.f64(2), "u"), SCALED .. "expected float32, got gpurun.f64")
row("pipeline:call", A(R.pipe, R.scaled, "t", "big", "u"), SCALED .. "scalar 'big': 1e+300 out of range for float32")
row("pipeline:call", A(R.pipe, R.twice, R.named_buffer, "u"), BAD .. "stage 'twice': argument 1 (x): " .. NAMED)
row("pipeline:call", A(R.pipe, R.twice, "t", 5), BAD .. "stage 'twice': output y must be data (a buffer, temporary or view), got number")
row("pipeline:call", A(R.pipe, R.twice, "t", "nope"), BAD .. "stage 'twice': argument 2 (y), 'nope', names no declared data or scalar")
row("pipeline:call", A(R.pipe, R.twice, "i8", "u"), BAD .. "stage 'twice': x is float32, but 'i8' is int8")
row("pipeline:launch", A(R.pipe, 5), BAD .. "launch: a gpurun.Kernel expected first, got number")
row("pipeline:launch", A(R.pipe, R.named_kernel), BAD .. "launch: a gpurun.Kernel expected first, got table named gpurun.Kernel")
row("pipeline:launch", A(R.pipe, R.add, 5), BAD .. "launch of 'vec_add': a gpurun.LaunchConfig expected second, got number")
row("pipeline:launch", A(R.pipe, R.add, R.config, "t"), BAD .. "stage 'vec_add': kernel 'vec_add' takes 4 arguments, got 1")
row("pipeline:launch", A(R.pipe, R.add, R.config, R.named_buffer, "t", "u", 16), BAD .. "stage 'vec_add': argument 1: " .. NAMED)
row("pipeline:launch", A(R.pipe, R.add, R.config, "t", "t", "u", print), BAD .. "stage 'vec_add': argument 4: kernel "
  .. "'vec_add' parameter 4 (.u64): number, boolean, gpurun.Buffer, gpurun scalar or gpurun.Struct expected, got function")
row("pipeline:launch", A(R.pipe, R.scale, R.config, "t", 1e39, 1, 1), BAD .. "stage 'scale_shift': argument 2: kernel "
  .. "'scale_shift' parameter 2 (.f32): 1e+39 is out of range for float32")
row("pipeline:launch", A(R.pipe, R.scale, R.config, "t", "s", 1.5, 1), BAD .. "stage 'scale_shift': argument 3: kernel "
  .. "'scale_shift' parameter 3 (.u32): 1.5 is not an integer (the parameter is an integer)")
row("pipeline:launch", A(R.pipe, R.scale, R.config, "t", "big", 1, 1), BAD .. "stage 'scale_shift': argument 2: kernel "
  .. "'scale_shift' parameter 2 (.f32): 1e+300 is out of range for float32")
row("pipeline:copy", A(R.pipe, "nope", "t"), BAD .. "copy destination: a declared buffer, temporary or view (a handle, "
  .. "its name or a gpurun.Buffer) expected, got 'nope', which names none")
row("pipeline:copy", A(R.pipe, "t", "i8"), BAD .. "stage 'copy t <- i8': 't' is 16 x float32 and 'i8' 16 x int8")
row("pipeline:copy", A(R.pipe, R.named_buffer, "t"), BAD .. "copy destination: " .. NAMED)
row("pipeline:copy", A(R.pipe, "t", R.named_buffer), BAD .. "copy source: " .. NAMED)
row("pipeline:copy", A(R.pipe, "t", "u", { nope = 1 }), BAD .. "copy: unknown option 'nope' (known: name, reads, writes)")
row("pipeline:fill", A(R.pipe, "t", "1"), BAD .. "stage 'fill t': the fill value must be a number, got string")
row("pipeline:fill", A(R.pipe, "i8", 1000), BAD .. "stage 'fill i8': the fill value for 'i8': 1000 out of range for int8 (-128..127)")
row("pipeline:fill", A(R.pipe, "i32", NAN), P("stage 'fill i32': the fill value for 'i32': integer expected for int32, got " .. NAN_TEXT))
row("pipeline:fill", A(R.pipe, "t", 1e300), BAD .. "stage 'fill t': the fill value for 't': 1e+300 out of range for float32")
row("pipeline:fill", A(R.pipe, R.named_buffer, 1), BAD .. "fill destination: " .. NAMED)
local function M(data, r, c, batch) return { buffer = data, rows = r, cols = c, batch = batch } end
local MATMUL = BAD .. "stage 'matmul u = t t': "
row("pipeline:matmul", A(R.pipe, M("t", 4, 4), M("t", 2, 8), M("u", 4, 8)), MATMUL .. "k does not fit: a is 4 x 4, so k is 4, but b has 2 rows")
row("pipeline:matmul", A(R.pipe, M("t", 4, 8), M("t", 8, 2), M("u", 4, 2)), MATMUL .. "a: 4 x 8 (ld 8) needs 32 elements, its buffer has 16")
row("pipeline:matmul", A(R.pipe, M("t", 4, 4), M("t", 4, 4), M("u", 2, 4)), MATMUL .. "m does not fit: out has 2 rows, a gives 4")
row("pipeline:matmul", A(R.pipe, M("t", 4, 4), M("t", 4, 4), M("i8", 4, 4)), BAD .. "stage 'matmul i8 = t t': out.buffer has dtype int8; cuBLAS takes float32, float64, float16 or bfloat16")
row("pipeline:matmul", A(R.pipe, M("t", 4, 4), M("t", 4, 4), M("u", 4, 4), { alpha = "2" }), MATMUL .. "options.alpha must be a number, got string")
row("pipeline:matmul", A(R.pipe, M("t", 4, 4), M("t", 4, 4), M("u", 4, 4), { transa = 1 }), MATMUL .. "options.transa must be a boolean, got number")
row("pipeline:matmul", A(R.pipe, M("t", 4, 4), M("t", 4, 4), M("u", 4, 4), { nope = 1 }), BAD .. "matmul: unknown option 'nope' (known: name, reads, writes, alpha, beta, transa, transb, epilogue, bias)")
row("pipeline:matmul", A(R.pipe, 5, M("t", 4, 4), M("u", 4, 4)), BAD .. "matmul a must be a 2-D view { buffer =, rows =, cols = [, ld =, batch =, stride =] }, got number")
row("pipeline:matmul", A(R.pipe, M("nope", 4, 4), M("t", 4, 4), M("u", 4, 4)), BAD .. "matmul a.buffer: a declared buffer, temporary or view (a handle, its name or a gpurun.Buffer) expected, got 'nope', which names none")
row("pipeline:matmul", A(R.pipe, M("t", 4, 4), M(R.named_buffer, 4, 4), M("u", 4, 4)), BAD .. "matmul b.buffer: " .. NAMED)
row("pipeline:matmul", A(R.pipe, M("t", 4, 4), M("t", 4, 4), M("u", 0, 4)), MATMUL .. "out.rows must be 1..2147483647 (cuBLAS takes 32-bit sizes), got 0")
row("pipeline:matmul", A(R.pipe, M("t", 4, 4), M("t", 4, 4), M("u", 4, 4), { epilogue = "nope" }),
  MATMUL .. "options.epilogue must be one of bias, gelu, gelu_bias, relu, relu_bias (cuBLASLt's epilogues), got 'nope'")
row("pipeline:matmul", A(R.pipe, M("t", 4, 4), M("t", 4, 4), M("u", 4, 4), { epilogue = "gelu_bias" }),
  MATMUL .. "options.epilogue \"gelu_bias\" adds a bias: options.bias (a buffer of out's cols elements) is needed")
row("pipeline:matmul", A(R.pipe, M("t", 4, 4), M("t", 4, 4), M("u", 4, 4), { bias = "t" }),
  MATMUL .. "options.bias is given without options.epilogue")
row("pipeline:matmul", A(R.pipe, M("t", 4, 4), M("t", 4, 4), M("u", 4, 4), { epilogue = "bias", bias = "i8" }),
  MATMUL .. "options.bias has dtype int8 but out float32: cuBLASLt adds a bias of out's dtype")
row("pipeline:matmul", A(R.pipe, M("t", 4, 4), M("t", 4, 4), M("u", 4, 4), { epilogue = "bias", bias = "nope" }),
  BAD .. "matmul bias: " .. "a declared buffer, temporary or view (a handle, its name or a gpurun.Buffer) expected, got 'nope', which names none")
row("pipeline:matmul", A(R.pipe, M("t", 2, 2, 2), M("t", 2, 2), M("u", 2, 2, 2), { epilogue = "relu" }),
  MATMUL .. "an epilogue takes one matrix, got a batch of 2")
local SORT = BAD .. "stage 'sort t': "
local DECLARED = "a declared buffer, temporary or view (a handle, its name or a gpurun.Buffer) expected, got "
row("pipeline:sort", A(R.pipe, "t", { values = "t" }), SORT .. "keys and values are the same data ('t')")
row("pipeline:sort", A(R.pipe, "t", { out = "i8" }), SORT .. "options.out must have the keys' dtype float32, got int8")
row("pipeline:sort", A(R.pipe, "t", { values_out = "u" }), SORT .. "options.values_out needs options.values")
row("pipeline:sort", A(R.pipe, "t", { values = "i8", values_out = "i32" }), SORT .. "options.values_out must have "
  .. "the values' dtype int8, got int32")
row("pipeline:sort", A(R.pipe, "t", { descending = "yes" }), SORT .. "options.descending must be a boolean, got string")
row("pipeline:sort", A(R.pipe, "t", { segments = "u" }), SORT .. "options.segments must be int32, uint32, int64 or "
  .. "uint64 offsets (at least one), got 16 float32")
row("pipeline:sort", A(R.pipe, "nope"), BAD .. "sort keys: " .. DECLARED .. "'nope', which names none")
row("pipeline:sort", A(R.pipe, R.named_buffer), BAD .. "sort keys: " .. NAMED)
row("pipeline:sort", A(R.pipe, "t", { out = 5 }), BAD .. "sort options.out: " .. DECLARED .. "number")
row("pipeline:sort", A(R.pipe, "t", { nope = 1 }), BAD .. "sort: unknown option 'nope' (known: name, reads, writes, "
  .. "values, out, values_out, segments, descending)")
local FFT = BAD .. "stage 'fft u = t': "
row("pipeline:fft", A(R.pipe, "t", "u"), FFT .. "input has dtype float32; the c2c plan's input is complex64")
row("pipeline:fft", A(R.pipe, "t", "u", { kind = "r2c" }), FFT .. "output has dtype float32; the r2c plan's output is complex64")
row("pipeline:fft", A(R.pipe, "t", "t", { kind = "r2c" }), BAD .. "stage 'fft t = t': output has dtype float32; the r2c "
  .. "plan's output is complex64")
row("pipeline:fft", A(R.pipe, "i8", "u"), BAD .. "stage 'fft u = i8': input has dtype int8; gpurun.fft takes complex64, "
  .. "complex128, float32 or float64")
row("pipeline:fft", A(R.pipe, "t", "u", { kind = "z2z" }), FFT .. "options.kind must be 'c2c', 'r2c' or 'c2r', got 'z2z'")
row("pipeline:fft", A(R.pipe, "t", "u", { shape = { 2, 2, 2, 2 } }), FFT .. "options.shape must have 1 to 3 dimensions "
  .. "(cuFFT's plans), got 4")
row("pipeline:fft", A(R.pipe, "t", "u", { shape = 0 }), FFT .. "options.shape[1] must be a positive integer, got 0")
row("pipeline:fft", A(R.pipe, "t", "u", { batch = NAN }), P("stage 'fft u = t': options.batch must be a positive integer, got " .. NAN_TEXT))
row("pipeline:fft", A(R.pipe, "t", "u", { direction = "up" }), FFT .. "options.direction must be 'forward' or 'inverse', got 'up'")
row("pipeline:fft", A(R.pipe, "t", "u", { kind = "r2c", direction = "inverse" }), FFT .. "a r2c plan runs forward only, not inverse")
row("pipeline:fft", A(R.pipe, "nope", "u"), BAD .. "fft input: " .. DECLARED .. "'nope', which names none")
row("pipeline:fft", A(R.pipe, "t", R.named_buffer), BAD .. "fft output: " .. NAMED)
row("pipeline:fft", A(R.pipe, "t", "u", { nope = 1 }), BAD .. "fft: unknown option 'nope' (known: name, reads, writes, "
  .. "shape, kind, batch, direction)")
local function CSR(offsets, indices, values, m, n)
  return { row_offsets = offsets, col_indices = indices, values = values, rows = m, cols = n }
end
local SPMV = BAD .. "stage 'spmv u = A t': "
row("pipeline:spmv", A(R.pipe, CSR("i32", "i32", "t", 15, 16), "t", "u"), SPMV .. "y must hold 15 elements (the rows "
  .. "of A), got 16")
row("pipeline:spmv", A(R.pipe, CSR("i32", "i32", "t", 4, 16), "t", "u"), SPMV .. "A: row_offsets must hold rows + 1 = 5 "
  .. "offsets, got 16")
row("pipeline:spmv", A(R.pipe, CSR("t", "i32", "t", 15, 16), "t", "u"), SPMV .. "A: row_offsets must be int32, got float32")
row("pipeline:spmv", A(R.pipe, CSR("i32", "i8", "t", 15, 16), "t", "u"), SPMV .. "A: col_indices must be int32, got int8")
row("pipeline:spmv", A(R.pipe, CSR("i32", "i32", "i8", 15, 16), "t", "u"), SPMV .. "A: values must be float32 or float64, got int8")
row("pipeline:spmv", A(R.pipe, CSR("i32", "i32", "t", 15, 16), "i8", "u"), BAD .. "stage 'spmv u = A i8': x has dtype "
  .. "int8 but A float32: both must be of one dtype")
row("pipeline:spmv", A(R.pipe, CSR("i32", "i32", "t", 15, 15), "u", "u"), BAD .. "stage 'spmv u = A u': x must hold 15 "
  .. "elements (the cols of A), got 16")
row("pipeline:spmv", A(R.pipe, CSR("i32", "i32", "t", 15, 16), "t", "u", { alpha = 1e300 }), SPMV .. "options.alpha "
  .. "1e+300 is out of range for float32 (the compute dtype)")
row("pipeline:spmv", A(R.pipe, CSR("i32", "i32", "t", 15, 16), "t", "u", { beta = "1" }), SPMV .. "options.beta must be "
  .. "a number, got string")
row("pipeline:spmv", A(R.pipe, CSR("i32", "i32", "t", 15, 16), "t", "u", { transpose = 1 }), SPMV .. "options.transpose "
  .. "must be a boolean, got number")
row("pipeline:spmv", A(R.pipe, CSR("i32", "i32", "t", 0, 16), "t", "u"), SPMV .. "A.rows must be 1..2147483647 (int32 "
  .. "indices), got 0")
row("pipeline:spmv", A(R.pipe, CSR("i32", "i32", "t", NAN, 16), "t", "u"), P("stage 'spmv u = A t': A.rows must be an integer, got " .. NAN_TEXT))
row("pipeline:spmv", A(R.pipe, 5, "t", "u"), SPMV .. "A must be a gpurun.CsrMatrix or a table { row_offsets =, "
  .. "col_indices =, values =, rows =, cols = } of declared data, got number")
row("pipeline:spmv", A(R.pipe, CSR("nope", "i32", "t", 15, 16), "t", "u"), BAD .. "spmv A.row_offsets: " .. DECLARED
  .. "'nope', which names none")
row("pipeline:spmv", A(R.pipe, { rows = 1, cols = 1, nope = 1 }, "t", "u"), BAD .. "spmv A: unknown option 'nope' "
  .. "(known: row_offsets, col_indices, values, rows, cols)")
row("pipeline:spmv", A(R.pipe, CSR("i32", "i32", "t", 15, 16), "t", "u", { nope = 1 }), BAD .. "spmv: unknown option "
  .. "'nope' (known: name, reads, writes, alpha, beta, transpose)")
row("pipeline:host", A(R.pipe, 5), BAD .. "host: a function expected, got number")
row("pipeline:host", A(R.pipe, print, { reads = 5 }), BAD .. "stage 'host': reads must be a list of data, got number")
local NO_STAGES = "pipeline 'empty' has no stages: declare some (p:call, p:launch, p:copy, p:fill, p:host, p:matmul, p:sort, "
  .. "p:fft, p:spmv)"
row("pipeline:plan", A(R.empty_pipe), NO_STAGES)
row("pipeline:plan", A(R.pipe, { nope = 1 }), BAD .. "plan: unknown option 'nope' (known: sources)")
row("pipeline:explain", A(R.empty_pipe), NO_STAGES)
row("pipeline:to_dot", A(R.empty_pipe), NO_STAGES)
row("pipeline:to_dot", A(R.pipe, { nope = 1 }), BAD .. "to_dot: unknown option 'nope' (known: title)")
row("pipeline:run", A(R.staged_pipe, 5), "pipeline 'staged': run: a gpurun.Stream expected, got number")
row("pipeline:run", A(R.split_pipe), "pipeline 'split' over devices: stage 'host' (a host callback) does not work "
  .. "element by element")
row("pipeline:graph", A(R.staged_pipe, 5), "pipeline 'staged': graph: a gpurun.Stream expected, got number")
row("pipeline:graph", A(R.split_pipe, R.stream), "pipeline 'split' over devices: run and graph take no stream")
row("pipeline:set", A(R.pipe, "nope", 1), BAD .. "set: 'nope' names no scalar or data of this pipeline")
row("pipeline:set", A(R.pipe, "s", "1"), BAD .. "set: scalar 's' takes a number, got string")
row("pipeline:set", A(R.pipe, "f32s", 1e300), BAD .. "set: scalar 'f32s': 1e+300 out of range for float32")
row("pipeline:set", A(R.pipe, "t", R.named_buffer), BAD .. "set: 't' is a temporary; it takes no buffer (the pipeline makes it)")
row("pipeline:timings", A(R.pipe), BAD .. "timings: no timed run (make the pipeline with timing = true, then p:run(stream))")

-- ---- ProgramOptions and Program ---------------------------------------------------------

local OPTION = "gpurun.ProgramOptions: "
local option_cases = {
  { "c++17", arg_error(1, "ProgramOptions", "table expected, got string") },
  { 42, arg_error(1, "ProgramOptions", "table expected, got number") },
  { R.options, arg_error(1, "ProgramOptions", "table expected, got gpurun.ProgramOptions") },
  { { nope = 1 }, OPTION .. "unknown option 'nope' (known: std, arch, defines, include_paths" },
  { { [1] = true }, OPTION .. "unknown option: a number key" },
  { { std = 17 }, OPTION .. "'std' must be a C++ standard such as \"c++17\", got number" },
  { { std = "c++1" }, OPTION .. "'std' must be a C++ standard such as \"c++17\", got \"c++1\"" },
  { { std = "c++2x" }, OPTION .. "'std' must be a C++ standard" },
  { { std = "gnu++17" }, OPTION .. "'std' must be a C++ standard" },
  { { arch = 9 }, OPTION .. "'arch' must be an architecture such as \"sm_90\", \"90\" or \"compute_90\", got \"9\"" },
  { { arch = 90.5 }, OPTION .. "'arch' must be an architecture such as \"sm_90\", \"90\" or \"compute_90\", got number" },
  { { arch = NAN }, OPTION .. "'arch' must be an architecture" },
  { { arch = "sm_" }, OPTION .. "'arch' must be an architecture such as \"sm_90\", \"90\" or \"compute_90\", got \"sm_\"" },
  { { arch = "sm_90ab" }, OPTION .. "'arch' must be an architecture" },
  { { arch = {} }, OPTION .. "'arch' must be an architecture" },
  { { defines = "X" }, OPTION .. "'defines' must be a table of macro names or NAME = value pairs, got \"X\"" },
  { { defines = { "" } }, OPTION .. "'defines[1]' must be a macro name (a non-empty string), got string" },
  { { defines = { "A", 5 } }, OPTION .. "'defines[2]' must be a macro name (a non-empty string), got number" },
  { { defines = { ["A=B"] = 1 } }, OPTION .. "'defines' has a bad macro name 'A=B'" },
  { { defines = { [""] = 1 } }, OPTION .. "'defines' has a bad macro name ''" },
  { { defines = { X = {} } }, OPTION .. "'defines.X' must be a string, a number or true, got table" },
  { { defines = { X = false } }, OPTION .. "'defines.X' must be a string, a number or true, got boolean" },
  { { defines = { [2.5] = 1 } }, OPTION .. "'defines' keys must be macro names or list positions, got number key" },
  { { defines = { [0] = "X" } }, OPTION .. "'defines' keys must be macro names or list positions, got number key" },
  { { defines = { [true] = "X" } }, OPTION .. "'defines' keys must be macro names or list positions, got boolean key" },
  { { include_paths = 5 }, OPTION .. "'include_paths' must be a string or a list of strings, got number" },
  { { include_paths = { 5 } }, OPTION .. "'include_paths[1]' must be a non-empty string, got number" },
  { { include_paths = { "" } }, OPTION .. "'include_paths[1]' must be a non-empty string, got string" },
  { { line_info = "yes" }, OPTION .. "'line_info' must be a boolean, got \"yes\"" },
  { { debug = 1 }, OPTION .. "'debug' must be a boolean, got number" },
  { { use_fast_math = {} }, OPTION .. "'use_fast_math' must be a boolean, got table" },
  { { relocatable_device_code = 0 }, OPTION .. "'relocatable_device_code' must be a boolean, got number" },
  { { extra = true }, OPTION .. "'extra' must be a string or a list of strings, got boolean" },
  { { extra = { 1 } }, OPTION .. "'extra[1]' must be a non-empty string, got number" },
  { { extra = { "-DX=\0" } }, OPTION .. "'extra[1]' contains a NUL byte, which would cut the option short" },
  { { extra = "-G\0-DX" }, OPTION .. "'extra[1]' contains a NUL byte" },
  { { include_paths = { "/a", "/b\0" } }, OPTION .. "'include_paths[2]' contains a NUL byte" },
  { { defines = { "X\0Y" } }, OPTION .. "'defines[1]' contains a NUL byte" },
  { { defines = { ["X\0"] = 1 } }, OPTION .. "a name in 'defines' contains a NUL byte" },
  { { defines = { X = "1\0" } }, OPTION .. "'defines.X' contains a NUL byte" },
}
for _, value in ipairs({ 0, 256, -1, 1.5, NAN, INF, BIG_FLOAT, math.maxinteger, "32", true }) do
  option_cases[#option_cases + 1] = { { max_register_count = value },
    OPTION .. "'max_register_count' must be an integer from 1 to 255, got " }
end
for _, case in ipairs(option_cases) do row("gpurun.ProgramOptions", A(case[1]), case[2]) end

row("gpurun.Program", A(), arg_error(1, "Program", "string expected, got no value"))
row("gpurun.Program", A({}, "c++"), arg_error(1, "Program", "string expected, got table"))
row("gpurun.Program", A(R.options, "c++"), arg_error(1, "Program", "string expected, got gpurun.ProgramOptions"))
row("gpurun.Program", A("a\0b", "c++"), arg_error(1, "Program", "source contains a NUL byte"))
row("gpurun.Program", A(SOURCE), arg_error(2, "Program", "string expected, got no value"))
row("gpurun.Program", A(SOURCE, {}), arg_error(2, "Program", "string expected, got table"))
row("gpurun.Program", A(SOURCE, "c"), arg_error(2, "Program", "code type \"c++\" expected, got \"c\""))
row("gpurun.Program", A(SOURCE, "C++"), arg_error(2, "Program", "code type \"c++\" expected, got \"C++\""))
row("gpurun.Program", A(SOURCE, "ptx"), arg_error(2, "Program", "code type \"c++\" expected, got \"ptx\""))
row("gpurun.Program", A(SOURCE, "c++", "std=c++17"),
  arg_error(3, "Program", "gpurun.ProgramOptions or table expected, got string"))
row("gpurun.Program", A(SOURCE, "c++", 42), arg_error(3, "Program", "gpurun.ProgramOptions or table expected, got number"))
row("gpurun.Program", A(SOURCE, "c++", R.config),
  arg_error(3, "Program", "gpurun.ProgramOptions or table expected, got gpurun.LaunchConfig"))
row("gpurun.Program", A(SOURCE, "c++", R.closed_options), "attempt to use a closed gpurun.ProgramOptions")
row("gpurun.Program", A(SOURCE, "c++", setmetatable({}, getmetatable(gpurun.ProgramOptions{}))),
  arg_error(3, "Program", "gpurun.ProgramOptions expected, got a table given its metatable"))
row("gpurun.Program", A(SOURCE, "c++", { std = 11 }), OPTION .. "'std' must be a C++ standard")
row("gpurun.Program", A(SOURCE, "c++", { nope = true }), OPTION .. "unknown option 'nope'")

row("Program:compile", A(R.program, "cubin", nil), "link_time_optimization makes LTO-IR, not cubin: "
  .. "compile(\"ltoir\") and link it with gpurun.Linker", { call = function()
    return gpurun.Program(SOURCE, "c++", { arch = "sm_90", link_time_optimization = true }):compile("cubin")
  end })
row("Program:compile", A(R.compute_program, "ltoir"), "ltoir needs a real architecture: compute_90 makes only PTX")
row("Program:compile", A(R.program), arg_error(1, "compile", "string expected, got no value"))
row("Program:compile", A(R.program, {}), arg_error(1, "compile", "string expected, got table"))
row("Program:compile", A(R.program, "PTX"), arg_error(1, "compile", "\"ptx\", \"cubin\" or \"ltoir\" expected, got \"PTX\""))
row("Program:compile", A(R.program, "sass"), arg_error(1, "compile", "\"ptx\", \"cubin\" or \"ltoir\" expected, got \"sass\""))
row("Program:compile", A(R.program, 5), arg_error(1, "compile", "\"ptx\", \"cubin\" or \"ltoir\" expected, got \"5\""))
row("Program:compile", A(R.program, "ptx", 5), arg_error(2, "compile", "table of options expected, got number"))
row("Program:compile", A(R.program, "ptx", "x.cu"), arg_error(2, "compile", "table of options expected, got string"))
row("Program:compile", A(R.program, "ptx", { foo = 1 }),
  arg_error(2, "compile", "unknown option 'foo' (known: name_expressions, name)"))
row("Program:compile", A(R.program, "ptx", { [1] = 2 }),
  arg_error(2, "compile", "unknown option: a number key (known: name_expressions, name)"))
for _, name in ipairs({ "", 5, "a\0b", {} }) do
  row("Program:compile", A(R.program, "ptx", { name = name }),
    arg_error(2, "compile", "name must be a non-empty string"))
end
row("Program:compile", A(R.program, "ptx", { name_expressions = "k" }),
  arg_error(2, "compile", "name_expressions must be a list of strings"))
row("Program:compile", A(R.program, "ptx", { name_expressions = { "" } }),
  arg_error(2, "compile", "name_expressions[1] must be a non-empty string"))
row("Program:compile", A(R.program, "ptx", { name_expressions = { "k", 5 } }),
  arg_error(2, "compile", "name_expressions[2] must be a non-empty string"))
row("Program:compile", A(R.program, "ptx", { name_expressions = { "k\0<int>" } }),
  arg_error(2, "compile", "name_expressions[1] contains a NUL byte"))
row("Program:compile", A(R.program, "ptx", { name_expressions = { "nope<int>" } }),
  "NVRTC compile of 'k.cu' failed: NVRTC_ERROR_COMPILATION")
row("Program:compile", A(R.broken_program, "ptx"),
  "NVRTC compile of 'gpurun_program.cu' failed: NVRTC_ERROR_COMPILATION\ngpurun_program.cu(1): error")
row("Program:compile", A(R.broken_program, "ptx", { name = "mine.cu" }),
  "NVRTC compile of 'mine.cu' failed: NVRTC_ERROR_COMPILATION\nmine.cu(1): error")
row("Program:compile", A(R.bad_option_program, "ptx"),
  "NVRTC compile of 'k.cu' failed: NVRTC_ERROR_INVALID_OPTION")
row("Program:compile", A(R.compute_program, "cubin"),
  "cubin needs a real architecture: compute_90 makes only PTX; use sm_XX")
row("Program:compile", A(R.program, "cubin"),
  "cubin needs an arch: give ProgramOptions{arch=...} or make a device current", { when = "no_device" })

row("ProgramOptions.__newindex", A(R.options, "std", "c++20"),
  "gpurun.ProgramOptions is read-only: make a new one with the options you want")
row("ProgramOptions.__newindex", A(R.closed_options, "arch", "sm_90"), "gpurun.ProgramOptions is read-only")

row("ObjectCode:get_kernel", A(R.ptx), arg_error(1, "get_kernel", "string expected, got no value"))
row("ObjectCode:get_kernel", A(R.ptx, {}), arg_error(1, "get_kernel", "string expected, got table"))
row("ObjectCode:get_kernel", A(R.ptx, R.program), arg_error(1, "get_kernel", "string expected, got gpurun.Program"))
row("ObjectCode:get_kernel", A(R.ptx, "k"), NO_DRIVER, { when = "no_driver" })
row("ObjectCode:get_kernel", A(R.ptx, "k"), ANY(NO_DRIVER, NO_DEVICE), { when = "no_device" })
row("ObjectCode:get_kernel", A(R.code, "nope"), "kernel 'nope' not found in the cubin of vec_add.cu; it has: "
  .. "bounded, byte_flag, fill_double, out_of_bounds, scale_shift, traps, uses_shared, vec_add, vec_mul, write_index_2d")
row("ObjectCode:get_kernel", A(R.code, ""), "kernel '' not found in the cubin of vec_add.cu")
row("ObjectCode:get_kernel", A(R.code, "vec_add "), "kernel 'vec_add ' not found")

-- ---- device code from elsewhere: ObjectCode.from_<type> and save -----------------------

local CODE_INPUT = "string of code or { path = } table expected, got "
local PTX_TEXT = ".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry k() { ret; }\n"
for _, kind in ipairs({ "cubin", "ptx", "ltoir", "fatbin", "object", "library" }) do
  local label, short = "gpurun.ObjectCode.from_" .. kind, "from_" .. kind
  row(label, A(), arg_error(1, short, CODE_INPUT .. "no value"))
  row(label, A(5), arg_error(1, short, CODE_INPUT .. "number"))
  row(label, A(R.ptx), arg_error(1, short, CODE_INPUT .. "gpurun.ObjectCode"))
  row(label, A(""), arg_error(1, short, "the " .. kind .. " given as bytes is empty"))
  row(label, A({}), arg_error(1, short, '{ path = "..." } needs a non-empty string path'))
  row(label, A({ path = 5 }), arg_error(1, short, '{ path = "..." } needs a non-empty string path'))
  row(label, A({ path = "a\0b" }), arg_error(1, short, "path contains a NUL byte"))
  row(label, A({ file = "k.cubin" }), arg_error(1, short, "unknown option 'file' (known: path)"))
  row(label, A({ path = "/nonexistent/k." .. kind }),
    "cannot read device code from /nonexistent/k." .. kind .. ": No such file or directory")
  row(label, A({ path = "spec" }), "cannot read device code from spec: it is a directory, not a regular file")
end
for _, case in ipairs({
  { "cubin", "is not a cubin: it does not start with ELF's magic number" },
  { "ptx", "is not PTX: it has no .version directive" },
  { "ltoir", "is not LTO-IR: it does not start with the LTO-IR magic number 0x7F4E43ED" },
  { "fatbin", "is not a fatbin: it does not start with the fatbin magic number 0xBA55ED50" },
  { "object", "is not a host object: it does not start with ELF's magic number" },
  { "library", "is not a library: it does not start with an ar archive's \"!<arch>\"" },
}) do
  local label = "gpurun.ObjectCode.from_" .. case[1]
  row(label, A({ path = "CMakeLists.txt" }), "CMakeLists.txt " .. case[2])
  row(label, A("hello"), arg_error(1, "from_" .. case[1], "the " .. case[1] .. " given as bytes " .. case[2]))
end
-- A fatbin whose entries run past its bytes is refused; one whose entries
-- are damaged within them is taken, typed by size (spec/fatbin_ptx_spec.lua).
row("gpurun.ObjectCode.from_fatbin", A("\80\237\85\186\1\0\16\0" .. string.pack("<I8", 64) .. ("\0"):rep(32)),
  arg_error(1, "from_fatbin", "the fatbin given as bytes is truncated: its header says it ends at byte 80 of 48"))
local PTX_LABEL = "gpurun.ObjectCode.from_ptx"
row(PTX_LABEL, A("\127ELF" .. string.rep("\0", 60)), arg_error(1, "from_ptx",
  "the ptx given as bytes is not PTX text: it is an ELF file (a cubin?)"))
row(PTX_LABEL, A(".version 8.0\0.target sm_90"), arg_error(1, "from_ptx",
  "the ptx given as bytes is not PTX text: it holds a NUL byte at offset 12"))
row("gpurun.ObjectCode.from_cubin", A("\127ELF"), arg_error(1, "from_cubin",
  "the cubin given as bytes is truncated: 4 bytes, less than an ELF header"))
row(PTX_LABEL, A(PTX_TEXT, 5), arg_error(2, "from_ptx", "table of options expected, got number"))
row(PTX_LABEL, A(PTX_TEXT, { nope = 1 }), arg_error(2, "from_ptx", "unknown option 'nope' (known: name, symbol_mapping)"))
row(PTX_LABEL, A(PTX_TEXT, { name = 5 }), arg_error(2, "from_ptx", "name must be a string without NUL bytes, got number"))
row(PTX_LABEL, A(PTX_TEXT, { name = "a\0b" }), arg_error(2, "from_ptx", "name must be a string without NUL bytes, got string"))
row(PTX_LABEL, A(PTX_TEXT, { symbol_mapping = "k" }), arg_error(2, "from_ptx",
  "symbol_mapping must be a table of names, got string"))
row(PTX_LABEL, A(PTX_TEXT, { symbol_mapping = { k = 5 } }), arg_error(2, "from_ptx",
  "symbol_mapping must map names to non-empty strings without NUL bytes"))
row(PTX_LABEL, A(PTX_TEXT, { symbol_mapping = { k = "" } }), arg_error(2, "from_ptx",
  "symbol_mapping must map names to non-empty strings without NUL bytes"))
row(PTX_LABEL, A(PTX_TEXT, { symbol_mapping = { [1] = "k" } }), arg_error(2, "from_ptx",
  "symbol_mapping must map names to non-empty strings without NUL bytes"))
row("ObjectCode:save", A(R.ptx), arg_error(1, "save", "path string expected, got no value"))
row("ObjectCode:save", A(R.ptx, 5), arg_error(1, "save", "path string expected, got number"))
row("ObjectCode:save", A(R.ptx, {}), arg_error(1, "save", "path string expected, got table"))
row("ObjectCode:save", A(R.ptx, ""), arg_error(1, "save", "path is empty"))
row("ObjectCode:save", A(R.ptx, "a\0b"), arg_error(1, "save", "path contains a NUL byte"))
row("ObjectCode:save", A(R.ptx, "/nonexistent/dir/k.ptx"),
  "ObjectCode:save: cannot write /nonexistent/dir/k.ptx: No such file or directory")
row("ObjectCode:save", A(R.ptx, "spec"), "ObjectCode:save: cannot write spec: Is a directory")
row("ObjectCode:get_kernel", A(R.ltoir, "k"), "the ltoir given as bytes cannot be loaded into the driver: "
  .. "link it into a cubin first (gpurun.Linker)")

-- ---- LinkerOptions and Linker ------------------------------------------------------------

local LINKER_OPTION = "gpurun.LinkerOptions: "
local linker_option_cases = {
  { "sm_90", arg_error(1, "LinkerOptions", "table expected, got string") },
  { R.linker_options, arg_error(1, "LinkerOptions", "table expected, got gpurun.LinkerOptions") },
  { { nope = 1 }, LINKER_OPTION .. "unknown option 'nope' (known: name, arch, max_register_count" },
  { { [1] = true }, LINKER_OPTION .. "unknown option: a number key" },
  { { name = "" }, LINKER_OPTION .. "'name' must be a non-empty string without NUL bytes, got \"\"" },
  { { name = "a\0b" }, LINKER_OPTION .. "'name' must be a non-empty string without NUL bytes" },
  { { name = 5 }, LINKER_OPTION .. "'name' must be a non-empty string without NUL bytes, got number" },
  { { arch = "x" }, LINKER_OPTION .. "'arch' must be an architecture such as \"sm_90\", \"90\" or \"compute_90\", got \"x\"" },
  { { arch = NAN }, LINKER_OPTION .. "'arch' must be an architecture" },
  { { optimization_level = 2 }, LINKER_OPTION .. "'optimization_level' must be 0 or 3 (what nvJitLink accepts), got number" },
  { { optimization_level = "3" }, LINKER_OPTION .. "'optimization_level' must be 0 or 3" },
  { { ftz = 1 }, LINKER_OPTION .. "'ftz' must be a boolean, got number" },
  { { link_time_optimization = "yes" }, LINKER_OPTION .. "'link_time_optimization' must be a boolean, got \"yes\"" },
  { { kernels_used = 5 }, LINKER_OPTION .. "'kernels_used' must be a string or a list of strings, got number" },
  { { kernels_used = { "" } }, LINKER_OPTION .. "'kernels_used[1]' must be a non-empty string, got string" },
  { { ptxas_options = { "-v\0-O0" } }, LINKER_OPTION .. "'ptxas_options[1]' contains a NUL byte" },
  { { variables_used = { true } }, LINKER_OPTION .. "'variables_used[1]' must be a non-empty string, got boolean" },
}
for _, value in ipairs({ 0, 256, -1, 1.5, NAN, INF, BIG_FLOAT, "32" }) do
  linker_option_cases[#linker_option_cases + 1] = { { max_register_count = value },
    LINKER_OPTION .. "'max_register_count' must be an integer from 1 to 255, got " }
end
for _, value in ipairs({ -1, 1025, 1.5, NAN, "0" }) do
  linker_option_cases[#linker_option_cases + 1] = { { split_compile = value },
    LINKER_OPTION .. "'split_compile' must be an integer from 0 to 1024, got " }
end
for _, case in ipairs(linker_option_cases) do row("gpurun.LinkerOptions", A(case[1]), case[2]) end

local LINKER_FIRST = "gpurun.ObjectCode expected, got "
row("gpurun.Linker", A(), arg_error(1, "Linker", LINKER_FIRST .. "no value: a Linker links one or more ObjectCodes"))
row("gpurun.Linker", A({ arch = "sm_90" }), arg_error(1, "Linker", LINKER_FIRST .. "table: a Linker links one or more ObjectCodes"))
row("gpurun.Linker", A(5), arg_error(1, "Linker", LINKER_FIRST .. "number"))
row("gpurun.Linker", A(R.ptx, "cubin"), arg_error(2, "Linker", LINKER_FIRST .. "string"))
row("gpurun.Linker", A(R.ptx, R.program), arg_error(2, "Linker", LINKER_FIRST .. "gpurun.Program"))
row("gpurun.Linker", A(R.closed_ptx, R.ptx), "attempt to use a closed gpurun.ObjectCode")
row("gpurun.Linker", A(R.ptx, R.closed_linker_options), "attempt to use a closed gpurun.LinkerOptions")
row("gpurun.Linker", A(R.ptx, { arch = 5 }), LINKER_OPTION .. "'arch' must be an architecture")
row("gpurun.Linker", A(R.ptx, R.options), arg_error(2, "Linker",
  "gpurun.LinkerOptions or table expected, got gpurun.ProgramOptions"))
row("Linker:link", A(R.linker), arg_error(1, "link", "string expected, got no value"))
row("Linker:link", A(R.linker, "sass"), arg_error(1, "link", "\"cubin\" or \"ptx\" expected, got \"sass\""))
row("Linker:link", A(R.linker, {}), arg_error(1, "link", "string expected, got table"))
row("Linker:link", A(R.linker, "ptx"), "link(\"ptx\") needs link_time_optimization = true")
row("Linker:link", A(R.compute_linker, "cubin"), "a cubin needs a real architecture: compute_90 makes only PTX")
row("Linker:link", A(R.ltoir_linker, "cubin"), "nvJitLink link of 'bad' failed: adding input 1 'input 1 (ltoir)' "
  .. "(ltoir): NVJITLINK_ERROR_")
row("Linker:link", A(R.linker_closed_code, "cubin"), "attempt to use a closed gpurun.ObjectCode")

-- ---- LaunchConfig ----------------------------------------------------------------------

local CONFIG = "LaunchConfig: "
local config_cases = {
  { nil, arg_error(1, "LaunchConfig", "table expected, got nil") },
  { 16, arg_error(1, "LaunchConfig", "table expected, got number") },
  { "grid=1", arg_error(1, "LaunchConfig", "table expected, got string") },
  { R.config, arg_error(1, "LaunchConfig", "table expected, got gpurun.LaunchConfig") },
  { {}, CONFIG .. "grid and block are required" },
  { { grid = 1 }, CONFIG .. "grid and block are required" },
  { { block = 1 }, CONFIG .. "grid and block are required" },
  { { grid = 1, block = 1, shmem = 4 }, "bad argument #1 to 'gpurun.LaunchConfig' (unknown option 'shmem' (known: grid, block, shmem_size, cluster, is_cooperative, cooperative_launch, programmatic_stream_serialization, priority))" },
  { { grid = 1, block = 1, [1] = 2 }, "bad argument #1 to 'gpurun.LaunchConfig' (unknown option: a number key (known: grid," },
  { { grid = 0, block = 1 }, CONFIG .. "grid.x must be between 1 and 2147483647, got 0" },
  { { grid = -1, block = 1 }, CONFIG .. "grid.x must be between 1 and 2147483647, got -1" },
  { { grid = 2147483648, block = 1 }, CONFIG .. "grid.x must be between 1 and 2147483647, got 2147483648" },
  { { grid = math.maxinteger, block = 1 }, CONFIG .. "grid.x must be between 1 and 2147483647, got 9223372036854775807" },
  { { grid = { 1, 0 }, block = 1 }, CONFIG .. "grid.y must be between 1 and 65535, got 0" },
  { { grid = { 1, 65536 }, block = 1 }, CONFIG .. "grid.y must be between 1 and 65535, got 65536" },
  { { grid = { 1, 1, 65536 }, block = 1 }, CONFIG .. "grid.z must be between 1 and 65535, got 65536" },
  { { grid = { z = 0 }, block = 1 }, CONFIG .. "grid.z must be between 1 and 65535, got 0" },
  { { grid = 1, block = 0 }, CONFIG .. "block.x must be between 1 and 1024, got 0" },
  { { grid = 1, block = 1025 }, CONFIG .. "block.x must be between 1 and 1024, got 1025" },
  { { grid = 1, block = { 1, 0 } }, CONFIG .. "block.y must be between 1 and 1024, got 0" },
  { { grid = 1, block = { 1, 1, 65 } }, CONFIG .. "block.z must be between 1 and 64, got 65" },
  { { grid = 1, block = { 32, 32, 2 } }, CONFIG .. "block of 32 x 32 x 2 = 2048 threads, at most 1024 allowed" },
  { { grid = 1, block = 1, priority = 0.5 }, CONFIG .. "priority must be an integer (a stream priority), got 0.5" },
  { { grid = 1, block = 1, priority = "high" }, CONFIG .. "priority must be an integer (a stream priority), got string" },
  { { grid = 1, block = 1, priority = 1 << 31 }, CONFIG .. "priority must be an integer (a stream priority), got 2147483648" },
  { { grid = 1, block = 1, priority = NAN }, P(CONFIG .. "priority must be an integer %(a stream priority%), got " .. NAN_TEXT) },
  { { grid = 1, block = { 1024, 2 } }, CONFIG .. "block of 1024 x 2 x 1 = 2048 threads, at most 1024 allowed" },
  { { grid = 1.5, block = 1 }, CONFIG .. "grid.x must be an integer, got 1.5" },
  { { grid = NAN, block = 1 }, P("LaunchConfig: grid%.x must be an integer, got " .. NAN_TEXT) },
  { { grid = INF, block = 1 }, CONFIG .. "grid.x must be an integer, got inf" },
  { { grid = BIG_FLOAT, block = 1 }, CONFIG .. "grid.x must be an integer, got 9.2233720368548e+18" },
  { { grid = 1, block = 0.5 }, CONFIG .. "block.x must be an integer, got 0.5" },
  { { grid = { x = 1.5 }, block = 1 }, CONFIG .. "grid.x must be an integer, got 1.5" },
  { { grid = { {} }, block = 1 }, CONFIG .. "grid.x must be an integer, got table" },
  { { grid = "8", block = 1 }, CONFIG .. "grid must be an integer or a table {x, y, z}, got string" },
  { { grid = true, block = 1 }, CONFIG .. "grid must be an integer or a table {x, y, z}, got boolean" },
  { { grid = 1, block = R.config }, CONFIG .. "block must be an integer or a table {x, y, z}, got gpurun.LaunchConfig" },
  { { grid = { 1, 2, 3, 4 }, block = 1 }, CONFIG .. "grid has 4 entries, at most 3 (x, y, z) expected" },
}
for _, value in ipairs({ -1, 1.5, NAN, INF, {}, true }) do
  config_cases[#config_cases + 1] = { { grid = 1, block = 1, shmem_size = value },
    CONFIG .. "shmem_size must be an integer number of bytes >= 0, got " }
end
for _, value in ipairs({ 2 ^ 31, 1 << 40 }) do
  config_cases[#config_cases + 1] = { { grid = 1, block = 1, shmem_size = value },
    CONFIG .. "shmem_size of " .. math.tointeger(value) .. " bytes is more than any device has" }
end
for _, case in ipairs(config_cases) do
  local config = case[1]
  if type(config) == "table" and config.block and getmetatable(config.block) then
    row("gpurun.LaunchConfig", nil, case[2], { call = function(env)
      return gpurun.LaunchConfig({ grid = 1, block = env.config })
    end })
  else
    row("gpurun.LaunchConfig", A(config), case[2])
  end
end

-- ---- launches ------------------------------------------------------------------------

row("gpurun.launch", A(), arg_error(1, "launch", TARGET .. "no value"))
row("gpurun.launch", A(42), arg_error(1, "launch", TARGET .. "number"))
row("gpurun.launch", A("stream"), arg_error(1, "launch", TARGET .. "string"))
row("gpurun.launch", A({}), arg_error(1, "launch", TARGET .. "table"))
row("gpurun.launch", A(R.config, R.config), arg_error(1, "launch", TARGET .. "gpurun.LaunchConfig"))
row("gpurun.launch", A(R.options), arg_error(1, "launch", TARGET .. "gpurun.ProgramOptions"))
for _, wrong in ipairs({ "event", "graph", "buffer", "plan" }) do
  row("gpurun.launch", A(R[wrong], R.config, R.add), "bad argument #1 to 'launch' (" .. TARGET .. "gpurun.")
end
row("gpurun.launch", A(R.closed_stream, R.config, R.add), "attempt to use a closed gpurun.Stream")
row("gpurun.launch", A(R.closed_builder, R.config, R.add), "attempt to use a closed gpurun.GraphBuilder")
row("gpurun.launch", A(R.builder_closed_stream, R.config, R.add), "attempt to use a closed gpurun.Stream")
row("gpurun.launch", A(R.builder, R.config, R.add, R.buffer, R.buffer, R.buffer, 16),
  "GraphBuilder is not building (it is idle): call begin_building() first")
row("gpurun.launch", A(R.built, R.config, R.add, R.buffer, R.buffer, R.buffer, 16),
  "GraphBuilder is not building (it is built)")
row("gpurun.launch", A(R.abandoned, R.config, R.add, R.buffer, R.buffer, R.buffer, 16),
  "GraphBuilder is not building (it is abandoned)")
row("gpurun.launch", A(R.stream), arg_error(2, "launch", "gpurun.LaunchConfig expected, got no value"))
row("gpurun.launch", A(R.stream, { grid = 1, block = 1 }), arg_error(2, "launch", "gpurun.LaunchConfig expected, got table"))
row("gpurun.launch", A(R.stream, R.scalar), arg_error(2, "launch", "gpurun.LaunchConfig expected, got gpurun.Scalar"))
row("gpurun.launch", A(R.stream, R.config), arg_error(3, "launch", "gpurun.Kernel expected, got no value"))
row("gpurun.launch", A(R.stream, R.config, "vec_add"), arg_error(3, "launch", "gpurun.Kernel expected, got string"))
row("gpurun.launch", A(R.stream, R.config, R.plan), arg_error(3, "launch", "gpurun.Kernel expected, got gpurun.LaunchPlan"))
row("gpurun.launch", A(R.stream, R.config, R.code), arg_error(3, "launch", "gpurun.Kernel expected, got gpurun.ObjectCode"))
row("gpurun.launch", A(R.stream, R.config, R.closed_kernel), "attempt to use a closed gpurun.Kernel")
row("gpurun.launch", A(R.stream, R.config, R.orphan_kernel), "attempt to use a closed gpurun.ObjectCode")

-- The argument checks against the kernel, for launch and for bind.
-- call(kernel, ...) makes the argument list of one call.
local function kernel_arg_rows(label, call)
  local function args(...) return call(...) end
  local b = R.buffer
  row(label, args(R.add), "kernel 'vec_add' takes 4 parameters, got 0")
  row(label, args(R.add, b, b, b), "kernel 'vec_add' takes 4 parameters, got 3")
  row(label, args(R.add, b, b, b, 16, 16), "kernel 'vec_add' takes 4 parameters, got 5")
  row(label, args(R.byte_flag, R.buffer_u8, true), "kernel 'byte_flag' takes 3 parameters, got 2")
  local SCALE, ADD, FLAG = "kernel 'scale_shift' parameter ", "kernel 'vec_add' parameter ",
    "kernel 'byte_flag' parameter "
  row(label, args(R.scale, b, b, 1, 1),
    SCALE .. "2 (.f32): a gpurun.Buffer passes as an 8-byte pointer; this parameter is 4 bytes")
  row(label, args(R.scale, b, 1.5, 1 << 40, 1),
    SCALE .. "3 (.u32): integer 1099511627776 does not fit a 4-byte parameter")
  row(label, args(R.scale, b, 1.5, -2147483649, 1),
    SCALE .. "3 (.u32): integer -2147483649 does not fit a 4-byte parameter")
  row(label, args(R.scale, b, 1.5, 1, gpurun.u64(1)), SCALE .. "4 (.u32): takes 4 bytes but gpurun.u64 is 8")
  row(label, args(R.scale, b, gpurun.f64(1), 1, 1), SCALE .. "2 (.f32): takes 4 bytes but gpurun.f64 is 8")
  row(label, args(R.scale, b, gpurun.i32(1), 1, 1), SCALE .. "2 (.f32): floating-point, but gpurun.i32 is an integer")
  row(label, args(R.scale, b, 1.5, gpurun.f32(1), 1), SCALE .. "3 (.u32): an integer, but gpurun.f32 is floating-point")
  row(label, args(R.scale, b, 1e39, 1, 1), SCALE .. "2 (.f32): 1e+39 is out of range for float32")
  row(label, args(R.scale, b, 1.5, 2.5, 1), SCALE .. "3 (.u32): 2.5 is not an integer (the parameter is an integer)")
  row(label, args(R.scale, b, 1.5, NAN, 1), P(SCALE:gsub("%p", "%%%0") .. "3 %(%.u32%): %-?nan is not an integer"))
  row(label, args(R.scale, b, 1.5, INF, 1), SCALE .. "3 (.u32): integer inf does not fit a 4-byte parameter")
  row(label, args(R.scale, b, 1.5, true, 1),
    SCALE .. "3 (.u32): a boolean passes as a 1-byte integer; this parameter is 4 bytes")
  row(label, args(R.scale, b, true, 1, 1),
    SCALE .. "2 (.f32): a boolean passes as a 1-byte integer; this parameter is 4 bytes and floating-point")
  row(label, args(R.add, b, b, b, gpurun.u32(16)), ADD .. "4 (.u64): takes 8 bytes but gpurun.u32 is 4")
  row(label, args(R.add, gpurun.i32(0), b, b, 16), ADD .. "1 (.u64): takes 8 bytes but gpurun.i32 is 4")
  row(label, args(R.add, b, b, b, "16"),
    ADD .. "4 (.u64): number, boolean, gpurun.Buffer, gpurun scalar or gpurun.Struct expected, got string")
  row(label, args(R.add, b, b, {}, 16), ADD .. "3 (.u64): number, boolean, gpurun.Buffer, gpurun scalar or gpurun.Struct expected, got table")
  row(label, args(R.add, b, b, b, nil), ADD .. "4 (.u64): number, boolean, gpurun.Buffer, gpurun scalar or gpurun.Struct expected, got nil")
  row(label, args(R.add, R.pinned, b, b, 16), label == "gpurun.launch"
    and ADD .. "1 (.u64): a gpurun.PinnedBuffer passes only when mapped: allocate it with gpurun.pinned(n, dtype, { mapped = true })"
    or "a gpurun.PinnedBuffer passes to gpurun.launch or into a graph, not into a LaunchPlan")
  row(label, args(R.scale, b, R.mapped_pinned, 1, 1), label == "gpurun.launch"
    and SCALE .. "2 (.f32): not a pointer: a mapped gpurun.PinnedBuffer passes only as one"
    or "a gpurun.PinnedBuffer passes to gpurun.launch or into a graph, not into a LaunchPlan")
  row(label, args(R.add, R.closed_pinned, b, b, 16), label == "gpurun.launch"
    and ADD .. "1 (.u64): attempt to use a closed gpurun.PinnedBuffer"
    or "a gpurun.PinnedBuffer passes to gpurun.launch or into a graph, not into a LaunchPlan")
  row(label, args(R.add, R.stream, b, b, 16), ADD .. "1 (.u64): number, boolean, gpurun.Buffer, gpurun scalar or gpurun.Struct expected")
  row(label, args(R.add, b, print, b, 16), ADD .. "2 (.u64): number, boolean, gpurun.Buffer, gpurun scalar or gpurun.Struct expected, got function")
  row(label, args(R.add, R.closed_buffer, b, b, 16), ADD .. "1 (.u64): attempt to use a closed gpurun.Buffer")
  row(label, args(R.add, b, b, b, true), ADD .. "4 (.u64): a boolean passes as a 1-byte integer; this parameter is 8 bytes")
  row(label, args(R.byte_flag, R.buffer_u8, true, 300), FLAG .. "3 (.u8): integer 300 does not fit a 1-byte parameter")
  row(label, args(R.byte_flag, R.buffer_u8, true, -129), FLAG .. "3 (.u8): integer -129 does not fit a 1-byte parameter")
  row(label, args(R.byte_flag, R.buffer_u8, true, 1.5), FLAG .. "3 (.u8): 1.5 is not an integer")
  row(label, args(R.byte_flag, R.buffer_u8, 1.5, 1), FLAG .. "2 (.u8): 1.5 is not an integer")
end
kernel_arg_rows("gpurun.launch", function(kernel, ...) return A(R.stream, R.config, kernel, ...) end)
row("gpurun.launch", A(R.stream, R.config_big_shmem, R.add, R.buffer, R.buffer, R.buffer, 16),
  P"kernel 'vec_add' may use at most %d+ bytes of dynamic shared memory; the LaunchConfig asks for 1073741824")
-- Argument errors while building end the capture, leaving the stream usable.
row("gpurun.launch", A(R.building, R.config, R.add, R.buffer), "kernel 'vec_add' takes 4 parameters, got 1")

row("Kernel:bind", A(R.add), arg_error(1, "bind", "gpurun.LaunchConfig expected, got no value"))
row("Kernel:bind", A(R.add, { grid = 1, block = 1 }), arg_error(1, "bind", "gpurun.LaunchConfig expected, got table"))
row("Kernel:bind", A(R.add, R.stream), arg_error(1, "bind", "gpurun.LaunchConfig expected, got gpurun.Stream"))
row("Kernel:bind", A(R.add, R.config_big_shmem, R.buffer, R.buffer, R.buffer, 16),
  P"kernel 'vec_add' may use at most %d+ bytes of dynamic shared memory")
kernel_arg_rows("Kernel:bind", function(kernel, ...) return A(kernel, R.config, ...) end)

-- One argument at a time, by the launch's own check.
local CHECK = "check_argument"
row("Kernel:check_argument", A(R.add), arg_error(1, CHECK, "integer parameter index expected, got no value"))
row("Kernel:check_argument", A(R.add, 1.5, 16), arg_error(1, CHECK, "integer parameter index expected, got 1.5"))
row("Kernel:check_argument", A(R.add, 0, 16), arg_error(1, CHECK, "parameter index 0 out of range (1..4)"))
row("Kernel:check_argument", A(R.add, 5, 16), arg_error(1, CHECK, "parameter index 5 out of range (1..4)"))
row("Kernel:check_argument", A(R.scale, 2, 1e39),
  "kernel 'scale_shift' parameter 2 (.f32): 1e+39 is out of range for float32")
row("Kernel:check_argument", A(R.scale, 2, gpurun.i32(1)),
  "kernel 'scale_shift' parameter 2 (.f32): floating-point, but gpurun.i32 is an integer")
row("Kernel:check_argument", A(R.add, 4, "16"),
  "kernel 'vec_add' parameter 4 (.u64): number, boolean, gpurun.Buffer, gpurun scalar or gpurun.Struct expected, got string")
row("Kernel:check_argument", A(R.add, 4),
  "kernel 'vec_add' parameter 4 (.u64): number, boolean, gpurun.Buffer, gpurun scalar or gpurun.Struct expected, got nil")
row("Kernel:check_argument", A(R.add, 1, R.closed_buffer),
  "kernel 'vec_add' parameter 1 (.u64): attempt to use a closed gpurun.Buffer")
row("Kernel:check_argument", A(R.byte_flag, 3, 300),
  "kernel 'byte_flag' parameter 3 (.u8): integer 300 does not fit a 1-byte parameter")

row("LaunchPlan:launch", A(R.plan), arg_error(1, "launch", TARGET .. "no value"))
row("LaunchPlan:launch", A(R.plan, 1), arg_error(1, "launch", TARGET .. "number"))
row("LaunchPlan:launch", A(R.plan, R.graph), arg_error(1, "launch", TARGET .. "gpurun.Graph"))
row("LaunchPlan:launch", A(R.plan, R.closed_stream), "attempt to use a closed gpurun.Stream")
row("LaunchPlan:launch", A(R.plan, R.builder), "GraphBuilder is not building (it is idle)")

-- ---- TMA descriptors ---------------------------------------------------------------------

local TMA = "check_tensor_map"
row("gpurun.check_tensor_map", A(), arg_error(2, TMA, "dtype name expected, got no value"))
row("gpurun.check_tensor_map", A({ box_dim = { 16 } }, "double", 16),
  "bad argument #2 to 'gpurun.check_tensor_map' (unknown dtype 'double' (expected one of: float32,")
row("gpurun.check_tensor_map", A({ box_dim = { 16 } }, "float32", -1),
  arg_error(3, TMA, "positive element count expected, got -1"))
row("gpurun.check_tensor_map", A({ box_dim = { 16 } }, "float32", 16, 1.5),
  arg_error(4, TMA, "a non-negative integer address expected, got 1.5"))
row("gpurun.check_tensor_map", A(nil, "float32", 16), arg_error(1, TMA, "table of options expected (box_dim at least)"))
row("gpurun.check_tensor_map", A("box", "float32", 16), arg_error(1, TMA, "table of options expected, got string"))
row("gpurun.check_tensor_map", A({}, "float32", 16), "bad argument #1 to 'gpurun.check_tensor_map' (box_dim is required: the tile one copy moves")
row("gpurun.check_tensor_map", A({ box_dim = 16 }, "float32", 16),
  arg_error(1, TMA, "box_dim: a sequence of integers expected, got number"))
row("gpurun.check_tensor_map", A({ box_dim = { NAN } }, "float32", 16), P"box_dim%[1%]: an integer expected, got %-?nan")
row("gpurun.check_tensor_map", A({ box_dim = { 16 }, [1] = 16 }, "float32", 16),
  "bad argument #1 to 'gpurun.check_tensor_map' (unknown option: a number key (known: shape, strides, box_dim,")
row("gpurun.check_tensor_map", A({ box_dim = { 16 }, swizzle = "swizzle_16b" }, "float32", 16),
  arg_error(1, TMA, "swizzle: one of none, swizzle_32b, swizzle_64b, swizzle_128b expected, got 'swizzle_16b'"))
row("gpurun.check_tensor_map", A({ box_dim = { 16 } }, "int16", 16),
  "bad argument #1 to 'gpurun.check_tensor_map' (data_type int16 has no TMA element type (TMA moves float32,")
row("gpurun.check_tensor_map", A({ box_dim = { 16 }, data_type = "uint32" }, "uint8", 6),
  arg_error(1, TMA, "shape is required: the buffer's 6 bytes are no whole number of uint32 elements"))
row("gpurun.check_tensor_map", A({ shape = { 4, 4 }, box_dim = { 4, 4 } }, "float32", 15),
  arg_error(1, TMA, "the layout reaches 64 bytes but the buffer holds 60"))

local AS = "as_tensor_map"
row("Buffer:as_tensor_map", A(R.buffer), arg_error(1, AS, "table of options expected (box_dim at least)"))
row("Buffer:as_tensor_map", A(R.buffer, 16), arg_error(1, AS, "table of options expected, got number"))
row("Buffer:as_tensor_map", A(R.buffer, { box_dim = { 16 }, shape = { 8, 8 } }),
  arg_error(1, AS, "box_dim has 1 entries; shape has 2"))
row("Buffer:as_tensor_map", A(R.buffer, { shape = { 8, 8 }, box_dim = { 4, 4 } }),
  arg_error(1, AS, "the layout reaches 256 bytes but the buffer holds 64"))
row("Buffer:as_tensor_map", A(R.buffer_i16, { box_dim = { 8 } }), "bad argument #1 to 'as_tensor_map' (data_type int16 has no TMA element type")
row("Buffer:as_tensor_map", A(R.buffer_u8, { box_dim = { 4 } }),
  arg_error(1, AS, "box_dim[1] is 4 elements = 4 bytes: the innermost box dimension must be a multiple of 16 bytes"))
row("Buffer:as_tensor_map", A(R.orphan_view, { box_dim = { 4 } }),
  "attempt to use a closed gpurun.Buffer (the buffer this is a view of was closed)")
row("TensorMap:replace_address", A(R.tensor_map), arg_error(1, "replace_address", "gpurun.Buffer expected, got no value"))
row("TensorMap:replace_address", A(R.tensor_map, R.pinned),
  arg_error(1, "replace_address", "gpurun.Buffer expected, got gpurun.PinnedBuffer"))
row("TensorMap:replace_address", A(R.tensor_map, R.closed_buffer), "attempt to use a closed gpurun.Buffer")
row("TensorMap:replace_address", A(R.tensor_map, R.buffer_i32),
  arg_error(1, "replace_address", "a float32 buffer expected, as the map was made over; got int32"))
row("TensorMap:replace_address", A(R.tensor_map, R.buffer8),
  arg_error(1, "replace_address", "the map's layout reaches 64 bytes but the buffer holds 32"))
row("gpurun.launch", A(R.stream, R.far_priority_config, R.add, R.buffer, R.buffer, R.buffer, gpurun.u64(16)),
  "kernel 'vec_add': priority 99 out of range: this device's stream priorities run from 0 (least, the default) to ",
  { gpu = true })
row("gpurun.launch", A(R.stream, R.config, R.add, R.tensor_map, R.buffer, R.buffer, 16),
  "kernel 'vec_add' parameter 1 (.u64): a gpurun.TensorMap passes only as a `const __grid_constant__ " ..
  "CUtensorMap` (.align 64 .b8[128])")
row("gpurun.launch", A(R.stream, R.config, R.add, R.closed_tensor_map, R.buffer, R.buffer, 16),
  "kernel 'vec_add' parameter 1 (.u64): attempt to use a closed gpurun.TensorMap")
row("Kernel:bind", A(R.add, R.config, R.buffer, R.tensor_map, R.buffer, 16),
  "kernel 'vec_add' parameter 2 (.u64): a gpurun.TensorMap passes only as a")
row("Kernel:check_argument", A(R.add, 3, R.tensor_map_closed_buffer),
  "kernel 'vec_add' parameter 3 (.u64): a gpurun.TensorMap passes only as a")

-- ---- devices, streams, events ---------------------------------------------------------

row("Device:get_attribute", A(R.device), arg_error(1, "get_attribute", "attribute name or number expected, got no value"))
row("Device:get_attribute", A(R.device, true), arg_error(1, "get_attribute", "attribute name or number expected, got boolean"))
row("Device:get_attribute", A(R.device, {}), arg_error(1, "get_attribute", "attribute name or number expected, got table"))
for _, name in ipairs({ "x", "", "MAX_SHARED_MEMORY_PER_BLOCK_OPTIN", "CU_DEVICE_ATTRIBUTE_WARP_SIZE", "max" }) do
  row("Device:get_attribute", A(R.device, name), arg_error(1, "get_attribute", ("unknown device attribute '%s' "
    .. "(the names are cuda.h's CU_DEVICE_ATTRIBUTE_* in lower case without the prefix, such as "
    .. "'max_shared_memory_per_block_optin')"):format(name)))
end
for _, value in ipairs({ 1.5, NAN, INF, BIG_FLOAT }) do
  row("Device:get_attribute", A(R.device, value), arg_error(1, "get_attribute", "number has no integer representation"))
end
for _, value in ipairs({ 0, -1, 100000, math.maxinteger, math.mininteger }) do
  row("Device:get_attribute", A(R.device, value), arg_error(1, "get_attribute", "CU_DEVICE_ATTRIBUTE_* value expected, got " .. value))
end

row("Stream:record", A(R.stream, "x"), arg_error(1, "record", "gpurun.Event expected, got string"))
row("Stream:record", A(R.stream, 1), arg_error(1, "record", "gpurun.Event expected, got number"))
row("Stream:record", A(R.stream, R.other_stream), arg_error(1, "record", "gpurun.Event expected, got gpurun.Stream"))
row("Stream:record", A(R.stream, R.closed_event), "attempt to use a closed gpurun.Event")
row("Stream:sync", A(R.stream),
  "Stream:sync: the stream is being captured by a GraphBuilder: synchronize before begin_building or after end_building; capture abandoned",
  { before = { "building" } })

row("Event:elapsed_ms", A(R.event), arg_error(1, "elapsed_ms", "gpurun.Event expected, got no value"))
row("Event:elapsed_ms", A(R.event, 5), arg_error(1, "elapsed_ms", "gpurun.Event expected, got number"))
row("Event:elapsed_ms", A(R.event, R.stream), arg_error(1, "elapsed_ms", "gpurun.Event expected, got gpurun.Stream"))
row("Event:elapsed_ms", A(R.event, R.closed_event), "attempt to use a closed gpurun.Event")
row("Event.__sub", A(R.event, 5), arg_error(2, "__sub", "gpurun.Event expected, got number"))
row("Event.__sub", A(5, R.event), arg_error(1, "__sub", "gpurun.Event expected, got number"), { self = "any" })

-- ---- buffers -----------------------------------------------------------------------------

local STREAM_ARG = "gpurun.Stream expected, got "
row("Buffer:fill", A(R.buffer), arg_error(1, "fill", "number expected, got nil"))
row("Buffer:fill", A(R.buffer, "1"), arg_error(1, "fill", "number expected, got string"))
row("Buffer:fill", A(R.buffer, {}), arg_error(1, "fill", "number expected, got table"))
row("Buffer:fill", A(R.buffer, 1e39), arg_error(1, "fill", "1e+39 out of range for float32"))
row("Buffer:fill", A(R.buffer_i32, 1.5), arg_error(1, "fill", "integer expected for int32, got 1.5"))
row("Buffer:fill", A(R.buffer_i32, NAN), P("integer expected for int32, got " .. NAN_TEXT))
row("Buffer:fill", A(R.buffer_i32, INF), "inf out of range for int32")
row("Buffer:fill", A(R.buffer_i32, 2 ^ 31), "2147483648.0 out of range for int32")
row("Buffer:fill", A(R.buffer_u8, 256), arg_error(1, "fill", "256 out of range for uint8 (0..255)"))
row("Buffer:fill", A(R.buffer_u8, -1), "-1 out of range for uint8")
row("Buffer:fill", A(R.buffer, 1, "stream"), arg_error(2, "fill", STREAM_ARG .. "string"))
row("Buffer:fill", A(R.buffer, 1, R.event), arg_error(2, "fill", STREAM_ARG .. "gpurun.Event"))
row("Buffer:fill", A(R.buffer, 1, R.closed_stream), "attempt to use a closed gpurun.Stream")
row("Buffer:fill", A(R.buffer, 1, R.stream), "Buffer:fill: the stream is being captured by a GraphBuilder",
  { before = { "building" } })

row("Buffer:copy_from", A(R.buffer), arg_error(1, "copy_from", "table, string, gpurun.Buffer, gpurun.PinnedBuffer or file expected, got nil"))
row("Buffer:copy_from", A(R.buffer, 5), arg_error(1, "copy_from", "table, string, gpurun.Buffer, gpurun.PinnedBuffer or file expected, got number"))
row("Buffer:copy_from", A(R.buffer, R.stream), arg_error(1, "copy_from", "table, string, gpurun.Buffer, gpurun.PinnedBuffer or file expected, got gpurun.Stream"))
row("Buffer:copy_from", A(R.buffer, { 1, 2 }), arg_error(1, "copy_from", "table of 16 elements expected, got 2"))
row("Buffer:copy_from", A(R.buffer, {}), arg_error(1, "copy_from", "table of 16 elements expected, got 0"))
local sixteen_strings, sixteen_huge = {}, {}
for i = 1, 16 do sixteen_strings[i], sixteen_huge[i] = "x", 1e39 end
row("Buffer:copy_from", A(R.buffer, sixteen_strings), arg_error(1, "copy_from", "element 1: number expected, got string"))
row("Buffer:copy_from", A(R.buffer, sixteen_huge), "element 1: 1e+39 out of range for float32")
row("Buffer:copy_from", A(R.buffer, R.buffer8),
  arg_error(1, "copy_from", "gpurun.Buffer of 16 float32 elements expected, got 8 float32 elements"))
row("Buffer:copy_from", A(R.buffer, R.buffer_i32),
  arg_error(1, "copy_from", "gpurun.Buffer of 16 float32 elements expected, got 16 int32 elements"))
row("Buffer:copy_from", A(R.buffer, R.closed_buffer), "attempt to use a closed gpurun.Buffer")
row("Buffer:copy_from", A(R.buffer, R.buffer, "s"), arg_error(2, "copy_from", STREAM_ARG .. "string"))

row("Buffer:copy_to", A(R.buffer), arg_error(1, "copy_to", "gpurun.Buffer, gpurun.PinnedBuffer or file expected, got nil"))
row("Buffer:copy_to", A(R.buffer, {}), arg_error(1, "copy_to", "gpurun.Buffer, gpurun.PinnedBuffer or file expected, got table"))
row("Buffer:copy_to", A(R.buffer, R.stream), arg_error(1, "copy_to", "gpurun.Buffer, gpurun.PinnedBuffer or file expected, got gpurun.Stream"))
row("Buffer:copy_to", A(R.buffer, R.buffer8),
  arg_error(1, "copy_to", "gpurun.Buffer of 16 float32 elements expected, got 8 float32 elements"))
row("Buffer:copy_to", A(R.buffer, R.buffer_f64), "got 16 float64 elements")
row("Buffer:copy_to", A(R.buffer, R.closed_buffer), "attempt to use a closed gpurun.Buffer")
row("Buffer:copy_to", A(R.buffer, R.buffer, 5), arg_error(2, "copy_to", "16 elements from element 5 run past the last (16)"))
row("Buffer:copy_to", A(R.buffer, R.buffer, {}), arg_error(2, "copy_to", STREAM_ARG .. "table"))

row("Buffer:to_table", A(R.buffer, "x"), arg_error(1, "to_table", STREAM_ARG .. "string"))
row("Buffer:to_table", A(R.buffer, R.graph), arg_error(1, "to_table", STREAM_ARG .. "gpurun.Graph"))
row("Buffer:to_table", A(R.buffer, R.closed_stream), "attempt to use a closed gpurun.Stream")

for _, method in ipairs({ "get", "set" }) do
  local label = "Buffer:" .. method
  local function index_error(what) return arg_error(1, method, what) end
  local function args(index) return method == "get" and A(R.buffer, index) or A(R.buffer, index, 1) end
  row(label, method == "get" and A(R.buffer) or A(R.buffer, nil, 1), index_error("integer element index expected, got nil"))
  row(label, args(0), index_error("element index 0 out of range (1..16)"))
  row(label, args(17), index_error("element index 17 out of range (1..16)"))
  row(label, args(-1), index_error("element index -1 out of range (1..16)"))
  row(label, args(math.mininteger), index_error("element index -9223372036854775808 out of range (1..16)"))
  row(label, args(math.maxinteger), index_error("element index 9223372036854775807 out of range (1..16)"))
  row(label, args(1.5), index_error("integer element index expected, got 1.5"))
  row(label, args(NAN), P(("bad argument #1 to '%s' %%(integer element index expected, got %s%%)"):format(label, NAN_TEXT)))
  row(label, args(INF), index_error("integer element index expected, got inf"))
  row(label, args(BIG_FLOAT), index_error("integer element index expected, got 9.2233720368548e+18"))
  row(label, args("1"), index_error("integer element index expected, got string"))
  row(label, args({}), index_error("integer element index expected, got table"))
end
row("Buffer:get", A(R.buffer, 1, "s"), arg_error(2, "get", STREAM_ARG .. "string"))
row("Buffer:get", A(R.buffer, 1, R.closed_stream), "attempt to use a closed gpurun.Stream")
row("Buffer:set", A(R.buffer, 1), arg_error(2, "set", "number expected, got nil"))
row("Buffer:set", A(R.buffer, 1, "x"), arg_error(2, "set", "number expected, got string"))
row("Buffer:set", A(R.buffer, 1, 1e39), arg_error(2, "set", "1e+39 out of range for float32"))
row("Buffer:set", A(R.buffer_u8, 1, 256), arg_error(2, "set", "256 out of range for uint8 (0..255)"))
row("Buffer:set", A(R.buffer_i32, 1, 0.5), arg_error(2, "set", "integer expected for int32, got 0.5"))
row("Buffer:set", A(R.buffer, 1, 1, {}), arg_error(3, "set", STREAM_ARG .. "table"))
row("Buffer.__index", A(R.buffer, 0), arg_error(2, "__index", "element index 0 out of range (1..16)"))
row("Buffer.__index", A(R.buffer, 17), arg_error(2, "__index", "element index 17 out of range (1..16)"))
row("Buffer.__index", A(R.buffer, 1.5), arg_error(2, "__index", "integer element index expected, got 1.5"))
row("Buffer.__index", A(R.buffer, NAN), P("bad argument #2 to 'Buffer%.__index' %(integer element index expected, got " .. NAN_TEXT .. "%)"))
local CLOSE_STREAM = "expected a gpurun.Stream or a building gpurun.GraphBuilder, got "
row("Buffer:close", A(R.buffer, 5), arg_error(1, "close", CLOSE_STREAM .. "number"))
row("Buffer:close", A(R.buffer, "stream"), arg_error(1, "close", CLOSE_STREAM .. "string"))
row("Buffer:close", A(R.buffer, R.event), arg_error(1, "close", CLOSE_STREAM .. "gpurun.Event"))
row("Buffer:close", A(R.closed_buffer, {}), arg_error(1, "close", CLOSE_STREAM .. "table"))
row("Buffer:close", A(R.buffer, R.closed_stream), "attempt to use a closed gpurun.Stream")
row("Buffer:close", A(R.buffer, R.builder), "GraphBuilder is not building (it is idle)")
row("Buffer:close", A(R.buffer, R.building), "Buffer:close: a graph frees only memory that a graph allocated, "
  .. "and this buffer's memory is cuMemAlloc's: close it with a Stream, or with none")
row("Buffer:close", A(R.managed, R.building), "Buffer:close: a graph frees only memory that a graph allocated, "
  .. "and this buffer's memory is managed: close it with a Stream, or with none")
-- The graph and the builder that made it (still open) both use the buffer.
row("Buffer:close", A(R.buffer), "gpurun.Buffer is used by 2 graph(s) or graph builder(s); close them first",
  { before = { "graph" } })
row("Buffer.__close", A(R.buffer), "gpurun.Buffer is used by 2 graph(s) or graph builder(s); close them first",
  { before = { "graph" } })

-- ---- gpurun.fft (cuFFT): every check comes before a plan is made or cuFFT opens ----------

local FFT_STREAM = setmetatable({}, { __name = "gpurun.Stream", __index = { device = 0 } })
local function fft_stand_in(dtype, n, device)
  return setmetatable({}, { __name = "gpurun.Buffer", __len = function() return n end,
    __index = { dtype = dtype, ptr = 0x7f0000000000, device = device or 0 } })
end
local FP = "gpurun.fft.plan"
row(FP, A(), arg_error(1, FP, "shape must be a positive integer or a sequence of 1 to 3, got nil"))
row(FP, A(0), arg_error(1, FP, "shape[1] must be a positive integer, got 0"))
row(FP, A({ 4, -2 }), arg_error(1, FP, "shape[2] must be a positive integer, got -2"))
row(FP, A({ 2, 2, 2, 2 }), arg_error(1, FP, "shape must have 1 to 3 dimensions (cuFFT's plans), got 4"))
row(FP, A(8, { kind = "dct" }), arg_error(2, FP, "options.kind must be 'c2c', 'r2c' or 'c2r', got 'dct'"))
row(FP, A(8, { dtype = "int8" }), arg_error(2, FP, "options.dtype must be complex64 or complex128 (or "
  .. "float32 or float64, the same precisions), got 'int8'"))
row(FP, A(8, { batch = 1.5 }), arg_error(2, FP, "options.batch must be a positive integer, got 1.5"))
row(FP, A(8, { stream = 5 }), arg_error(2, FP, "options.stream must be a gpurun.Stream or "
  .. "gpurun.GraphBuilder, got number"))
row(FP, A(8, 5), arg_error(2, FP, "options table expected, got number"))
for _, name in ipairs({ "fft", "ifft", "rfft", "irfft" }) do
  local label = "gpurun.fft." .. name
  local dtype = name == "rfft" and "float32" or "complex64"
  row(label, A(), arg_error(1, label, "gpurun.Buffer expected, got nil"))
  row(label, A(fft_stand_in(name == "rfft" and "int32" or "float32", 8)), arg_error(1, label,
    ("x has dtype %s; %s takes %s"):format(name == "rfft" and "int32" or "float32", label,
      name == "rfft" and "float32 or float64" or "complex64 or complex128")))
  row(label, A(fft_stand_in(dtype, 8), { n = 0 }), arg_error(2, label, "options.n must be a positive integer, got 0"))
  row(label, A(fft_stand_in(dtype, 8), { nope = 1 }), arg_error(2, label, "unknown option 'nope' (known: n, stream)"))
  row(label, A(fft_stand_in(dtype, 8, 1), { stream = FFT_STREAM }), arg_error(1, label,
    "x is on device 1 but the stream on device 0"))
end

-- ---- generators ------------------------------------------------------------------------------

row("Generator:random", A(R.rng, 16, "int32"),
  arg_error(2, "random", "float dtype (float32, float64, float16, bfloat16) expected, got int32 (integers() makes integer buffers)"))
row("Generator:random", A(R.rng, 16, "complex64"),
  arg_error(2, "random", "float dtype (float32, float64, float16, bfloat16) expected, got complex64 (integers() makes integer buffers)"))
row("Generator:integers", A(R.rng, 16, 0, 4, "complex128"),
  arg_error(4, "integers", "integer dtype expected, got complex128 (random() makes float buffers)"))
row("Generator:random", A(R.rng, 16), NO_DEVICE, { when = "no_device" })
row("Generator:random", A(R.rng, 16), NO_DRIVER, { when = "no_driver" })
row("Generator:random", A(R.rng, 1 << 40), TOO_BIG, { gpu = true })
row("Generator:random_table", A(R.rng, 16, "int8"),
  arg_error(2, "random_table", "float dtype (float32, float64, float16, bfloat16) expected, got int8 (the values are floats)"))
row("Generator:random_table", A(R.rng, 1 << 31), arg_error(1, "random_table", "too many elements for a Lua table"))
row("Generator:random_table", A(R.rng, math.maxinteger), arg_error(1, "random_table", "too many elements for a Lua table"))
row("Generator:integers", A(R.rng, 16), arg_error(2, "integers", "number expected, got no value"))
row("Generator:integers", A(R.rng, 16, 0), arg_error(3, "integers", "number expected, got no value"))
row("Generator:integers", A(R.rng, 16, {}, 1), arg_error(2, "integers", "number expected, got table"))
for _, value in ipairs({ 1.5, NAN, INF, BIG_FLOAT }) do
  row("Generator:integers", A(R.rng, 16, value, 10), arg_error(2, "integers", "number has no integer representation"))
  row("Generator:integers", A(R.rng, 16, 0, value), arg_error(3, "integers", "number has no integer representation"))
end
row("Generator:integers", A(R.rng, 16, 5, 5), arg_error(3, "integers", "high (5) must be greater than low (5)"))
row("Generator:integers", A(R.rng, 16, 5, 1), arg_error(3, "integers", "high (1) must be greater than low (5)"))
row("Generator:integers", A(R.rng, 16, math.maxinteger, math.mininteger), "must be greater than low")
row("Generator:integers", A(R.rng, 16, 0, 300, "uint8"),
  arg_error(3, "integers", "range [0, 300) does not fit uint8 (0..255)"))
row("Generator:integers", A(R.rng, 16, -1, 10, "uint32"), "range [-1, 10) does not fit uint32 (0..4294967295)")
row("Generator:integers", A(R.rng, 16, -2147483649, 0), "range [-2147483649, 0) does not fit int32")
row("Generator:integers", A(R.rng, 16, 0, 10, "float32"),
  arg_error(4, "integers", "integer dtype expected, got float32 (random() makes float buffers)"))
row("Generator:integers", A(R.rng, 16, 0, 10), NO_DEVICE, { when = "no_device" })
row("Generator:integers", A(R.rng, 1 << 40, 0, 10), TOO_BIG, { gpu = true })

-- ---- graphs ---------------------------------------------------------------------------------

row("GraphBuilder:begin_building", A(R.building), "GraphBuilder:begin_building: already building")
row("GraphBuilder:end_building", A(R.builder), "GraphBuilder:end_building: not building (it is idle)")
row("GraphBuilder:end_building", A(R.built), "GraphBuilder:end_building: not building (it is built)")
row("GraphBuilder:end_building", A(R.abandoned),
  "GraphBuilder:end_building: not building (it is abandoned); the capture was abandoned after an error")
row("GraphBuilder:complete", A(R.builder),
  "GraphBuilder:complete: nothing built (it is idle): call begin_building(), launch, end_building() first")
row("GraphBuilder:complete", A(R.building), "GraphBuilder:complete: nothing built (it is building)")
row("GraphBuilder:complete", A(R.abandoned), "GraphBuilder:complete: nothing built (it is abandoned)")
row("GraphBuilder:complete", A(R.built, { use_node_priority = "yes" }),
  arg_error(1, "complete", "option 'use_node_priority' must be a boolean, got string"))
row("ObjectCode:close", A(R.code),
  "cannot close a gpurun.ObjectCode while 2 graph(s) or graph builder(s) use its kernels: close them first",
  { before = { "graph" } })

for _, method in ipairs({ "launch", "upload" }) do
  local label = "Graph:" .. method
  row(label, A(R.graph), arg_error(1, method, "gpurun.Stream expected, got no value"))
  row(label, A(R.graph, 1), arg_error(1, method, "gpurun.Stream expected, got number"))
  row(label, A(R.graph, R.builder), arg_error(1, method, "gpurun.Stream expected, got gpurun.GraphBuilder"))
  row(label, A(R.graph, R.event), arg_error(1, method, "gpurun.Stream expected, got gpurun.Event"))
  row(label, A(R.graph, R.closed_stream), "attempt to use a closed gpurun.Stream")
end

-- ---- graphs as DAGs: forks, joins, events, conditionals, nodes ------------------------------

for _, method in ipairs({ "split", "record", "wait", "create_condition", "if_then", "if_else",
    "switch", "while_loop" }) do
  row("GraphBuilder:" .. method, A(R.builder, R.condition),
    "GraphBuilder:" .. method .. ": not building (it is idle)")
  row("GraphBuilder:" .. method, A(R.built, R.condition),
    "GraphBuilder:" .. method .. ": not building (it is built)")
end
for _, count in ipairs({ 1, 0, -1, 65 }) do
  row("GraphBuilder:split", A(R.building, count),
    arg_error(1, "split", "a count from 2 to 64 expected, got " .. count))
end
row("GraphBuilder:split", A(R.building), arg_error(1, "split", "integer count expected, got no value"))
row("GraphBuilder:split", A(R.building, 2.5), arg_error(1, "split", "integer count expected, got 2.5"))
row("GraphBuilder:split", A(R.body), "GraphBuilder:split: not building (it is idle)")
row("gpurun.join", A(), "gpurun.join: at least two GraphBuilders expected, got 0", { gpu = false })
row("gpurun.join", A(1, 2), arg_error(1, "gpurun.join", "gpurun.GraphBuilder expected, got number"))
row("gpurun.join", A(R.building), "gpurun.join: at least two GraphBuilders expected, got 1")
row("gpurun.join", A(R.building, R.building), arg_error(2, "gpurun.join",
  "each builder once: this one is also argument #1"))
row("gpurun.join", A(R.building, R.other_building), arg_error(2, "gpurun.join",
  "a builder of the same capture expected: this one builds another graph"))
row("gpurun.join", A(R.building, R.builder), "gpurun.join: builder #2 is not building (it is idle)")
row("gpurun.join", A(R.building, R.closed_builder), "attempt to use a closed gpurun.GraphBuilder")
row("GraphBuilder:record", A(R.building, 5), arg_error(1, "record", "gpurun.Event expected, got number"))
row("GraphBuilder:record", A(R.building, R.closed_event), "attempt to use a closed gpurun.Event")
row("GraphBuilder:wait", A(R.building), arg_error(1, "wait",
  "gpurun.Event or gpurun.GraphBuilder expected, got no value"))
row("GraphBuilder:wait", A(R.building, R.stream), arg_error(1, "wait",
  "gpurun.Event or gpurun.GraphBuilder expected, got gpurun.Stream"))
row("GraphBuilder:wait", A(R.building, R.event), arg_error(1, "wait",
  "an event recorded in this capture expected: this one was recorded outside a capture (a "
  .. "capture cannot wait for work outside it)"))
row("GraphBuilder:wait", A(R.building, R.closed_event), "attempt to use a closed gpurun.Event")
row("GraphBuilder:wait", A(R.building, R.other_building), arg_error(1, "wait",
  "a builder of the same capture expected: this one builds another graph"))
row("Stream:wait", A(R.stream), arg_error(1, "wait",
  "gpurun.Event or gpurun.Stream expected, got no value"))
row("Stream:wait", A(R.stream, R.builder), arg_error(1, "wait",
  "gpurun.Event or gpurun.Stream expected, got gpurun.GraphBuilder"))
row("Stream:wait", A(R.stream, R.closed_event), "attempt to use a closed gpurun.Event")
row("Stream:wait", A(R.stream, R.closed_stream), "attempt to use a closed gpurun.Stream")
row("Stream:wait", A(R.other_stream, R.building), arg_error(1, "wait",
  "gpurun.Event or gpurun.Stream expected, got gpurun.GraphBuilder"))
row("Stream:wait", A(R.other_stream, R.stream), arg_error(1, "wait", "the stream is being "
  .. "captured by a GraphBuilder: wait for it on a builder of that capture; capture abandoned"), { before = { "building" } })
row("Stream:wait", A(R.stream, R.other_stream), "Stream:wait: the stream is being captured by a "
  .. "GraphBuilder: wait on the builder (builder:wait(...)) instead; capture abandoned", { before = { "building" } })
for _, method in ipairs({ "create_condition", "create_conditional_handle" }) do
  for _, value in ipairs({ -1, 4294967296 }) do
    row("GraphBuilder:" .. method, A(R.building, value),
      arg_error(1, method, "a default from 0 to 4294967295 expected, got " .. value))
  end
  row("GraphBuilder:" .. method, A(R.building, "x"),
    arg_error(1, method, "integer default value expected, got string"))
end
for _, method in ipairs({ "if_then", "if_cond", "if_else", "switch", "while_loop" }) do
  row("GraphBuilder:" .. method, A(R.building), arg_error(1, method, "gpurun.Condition expected, got no value"))
  row("GraphBuilder:" .. method, A(R.building, 1), arg_error(1, method, "gpurun.Condition expected, got number"))
  row("GraphBuilder:" .. method, A(R.building, R.closed_condition, 2), "attempt to use a closed gpurun.Condition")
  row("GraphBuilder:" .. method, A(R.building, R.other_condition, 2), arg_error(1, method,
    "a condition of this capture expected: it was made for another graph"))
end
-- Conditions from expressions (lua/gpurun/compute/condition_parse.lua).
local KNOWN_REDUCTIONS = "known: sum, prod, min, max, mean, norm (norm2), max_abs, max_abs_diff, any, all"
for _, method in ipairs({ "if_then", "if_cond", "if_else", "while_loop" }) do
  local function bad_expression(expression, why)
    row("GraphBuilder:" .. method, A(R.building, expression, { x = R.buffer }),
      arg_error(1, method, "bad condition expression: " .. why))
  end
  bad_expression("", "unexpected the end of the expression at position 1 (expected a reduction, a "
    .. "number, 'not' or '(')")
  bad_expression("maxx(x) > 1", "unknown reduction 'maxx' at position 1 (" .. KNOWN_REDUCTIONS .. ")")
  bad_expression("max(x) >", "unexpected the end of the expression at position 9 (expected a number)")
  bad_expression("max(x) 1", "unexpected '1' at position 8 (expected a comparison (<, <=, >, >=, ==, ~=))")
  bad_expression("max(x, x) > 1", "max takes 1 buffer, got 2 at position 1")
  bad_expression("max_abs_diff(x) > 1", "max_abs_diff takes 2 buffers, got 1 at position 1")
  bad_expression("(max(x) > 1", "unexpected the end of the expression at position 12 (expected ')')")
  bad_expression("max(x) > 1 )", "unexpected ')' at position 12 (expected 'and', 'or' or the end)")
  bad_expression("max(x) > 1e", "bad number '1e' at position 10")
  bad_expression("max(x) @ 1", "unexpected character '@' at position 8")
  bad_expression(string.rep("not ", 70) .. "max(x) > 1", "expression nested deeper than 64 at position 261")
  row("GraphBuilder:" .. method, A(R.building, "max(x) > 1"), arg_error(2, method,
    "a table of the expression's buffers by name expected, got no value"))
  row("GraphBuilder:" .. method, A(R.building, "max(x) > 1", 5), arg_error(2, method,
    "a table of the expression's buffers by name expected, got number"))
  row("GraphBuilder:" .. method, A(R.building, "max(x) > 1", {}), arg_error(2, method,
    "the expression reads 'x', which the table does not bind"))
  row("GraphBuilder:" .. method, A(R.building, "max(x) > 1", { x = 5 }), arg_error(2, method,
    "gpurun.Buffer expected for 'x', got number"))
  row("GraphBuilder:" .. method, A(R.building, "max(x) > 1", { x = R.closed_buffer }),
    "attempt to use a closed gpurun.Buffer")
  row("GraphBuilder:" .. method, A(R.building, "max(x) > 1", { x = R.buffer, y = R.buffer }),
    arg_error(2, method, "'y' is bound but the expression never reads it"))
end
row("GraphBuilder:while_loop", A(R.building, R.condition, 5), arg_error(2, "while_loop",
  "options table expected, got number"))
row("GraphBuilder:while_loop", A(R.building, R.condition, { nope = true }), arg_error(2, "while_loop",
  "unknown option 'nope' (known: cancellable)"))
row("GraphBuilder:while_loop", A(R.building, R.condition, { cancellable = 1 }), arg_error(2, "while_loop",
  "options.cancellable must be a boolean, got 1"))
row("GraphBuilder:while_loop", A(R.building, "norm(x) < 0", { x = R.buffer }, { cancellable = "no" }),
  arg_error(3, "while_loop", "options.cancellable must be a boolean, got 'no'"))
row("GraphBuilder:while_loop", A(R.builder, "norm(x) < 0", { x = R.buffer }),
  "GraphBuilder:while_loop: not building (it is idle)")
row("Graph:cancel", A(R.closed_graph), "attempt to use a closed gpurun.Graph")
for _, count in ipairs({ 0, 257 }) do
  row("GraphBuilder:switch", A(R.building, R.condition, count),
    arg_error(2, "switch", "a case count from 1 to 256 expected, got " .. count))
end
row("GraphBuilder:switch", A(R.building, R.condition),
  arg_error(2, "switch", "integer case count expected, got no value"))
row("GraphBuilder:debug_dot_print", A(R.building, "/nonexistent-gpurun/g.dot"),
  "GraphBuilder:debug_dot_print: nothing built (it is building): end_building() first")
row("GraphBuilder:debug_dot_print", A(R.built), arg_error(1, "debug_dot_print", "string expected, got no value"))
row("GraphBuilder:debug_dot_print", A(R.built, "/tmp/x.dot", 5),
  arg_error(2, "debug_dot_print", "table of options expected, got number"))
row("GraphBuilder:debug_dot_print", A(R.built, "/tmp/x.dot", { nope = true }),
  arg_error(2, "debug_dot_print", "unknown option 'nope' (known: verbose, kernel_node_params, "
    .. "memcpy_node_params, memset_node_params, event_node_params, kernel_node_attributes, handles, "
    .. "conditional_node_params)"))
row("GraphBuilder:debug_dot_print", A(R.built, "/nonexistent-gpurun/g.dot"), "writing the graph's DOT file")
row("GraphBuilder:complete", A(R.body), "GraphBuilder:complete: a conditional body builder's work is "
  .. "part of the graph of the builder it came from: complete that one")
for _, mode in ipairs({ { mode = "fast" }, "fast", { mode = "" }, "RELAXED" }) do
  local name = type(mode) == "table" and mode.mode or mode
  row("GraphBuilder:begin_building", A(R.builder, mode), arg_error(1, "begin_building",
    "unknown capture mode '" .. name .. "' (thread_local, global or relaxed expected)"))
end
row("GraphBuilder:begin_building", A(R.builder, { mode = 1 }),
  arg_error(1, "begin_building", "option 'mode' must be a string, got number"))
row("GraphBuilder:begin_building", A(R.builder, { nope = 1 }),
  arg_error(1, "begin_building", "unknown option 'nope' (known: mode)"))
row("GraphBuilder:begin_building", A(R.builder, 5),
  arg_error(1, "begin_building", "table of options expected, got number"))
row("GraphBuilder:begin_building", A(R.building, { mode = "relaxed" }),
  "GraphBuilder:begin_building: already building")
row("GraphBuilder:embed", A(R.builder, R.graph), "GraphBuilder:embed: not building (it is idle)")
row("GraphBuilder:embed", A(R.built, R.graph), "GraphBuilder:embed: not building (it is built)")
row("GraphBuilder:embed", A(R.building), arg_error(1, "embed",
  "gpurun.Graph or gpurun.GraphBuilder expected, got no value"))
row("GraphBuilder:embed", A(R.building, 5), arg_error(1, "embed",
  "gpurun.Graph or gpurun.GraphBuilder expected, got number"))
row("GraphBuilder:embed", A(R.building, R.stream), arg_error(1, "embed",
  "gpurun.Graph or gpurun.GraphBuilder expected, got gpurun.Stream"))
row("GraphBuilder:embed", A(R.building, R.closed_graph), "attempt to use a closed gpurun.Graph")
row("GraphBuilder:embed", A(R.building, R.closed_builder), "attempt to use a closed gpurun.GraphBuilder")
row("GraphBuilder:embed", A(R.building, R.building), arg_error(1, "embed",
  "another builder's graph expected: this one is the graph being built, which cannot contain itself"))
row("GraphBuilder:embed", A(R.building_body, R.building), arg_error(1, "embed",
  "another builder's graph expected: this one is the graph being built, which cannot contain itself"))
row("GraphBuilder:embed", A(R.building, R.other_building), arg_error(1, "embed",
  "a GraphBuilder that has ended building expected (it is building)"))
row("GraphBuilder:embed", A(R.building, R.builder), arg_error(1, "embed",
  "a GraphBuilder that has ended building expected (it is idle)"))
row("GraphBuilder:embed", A(R.building, R.abandoned), arg_error(1, "embed",
  "a GraphBuilder that has ended building expected (it is abandoned)"))
row("GraphBuilder:embed", A(R.building, R.allocating_built), arg_error(1, "embed",
  "a graph without memory allocation or free nodes expected (the driver cannot copy those into a "
  .. "child graph node): make its buffers before its capture"))
row("GraphBuilder:embed", A(R.building, R.conditional_built), arg_error(1, "embed",
  "a graph without conditional nodes expected (the driver cannot copy those into a child graph node)"))
row("Graph:update", A(R.graph), arg_error(1, "update", "gpurun.GraphBuilder expected, got no value"))
row("Graph:update", A(R.graph, R.builder), arg_error(1, "update",
  "a GraphBuilder that has ended building expected (it is idle)"))
row("Graph:update", A(R.graph, R.building), arg_error(1, "update",
  "a GraphBuilder that has ended building expected (it is building)"))
row("Graph:update", A(R.graph, R.closed_builder), "attempt to use a closed gpurun.GraphBuilder")
row("Graph:update", A(R.graph, R.builder_closed_stream), "attempt to use a closed gpurun.Stream")
for _, method in ipairs({ "set_args", "set_config", "set_enabled" }) do
  row("Graph:" .. method, A(R.graph), arg_error(1, method, "integer node index expected, got no value"))
  row("Graph:" .. method, A(R.graph, 0, true), arg_error(1, method, "node index 0 out of range (1..1)"))
  row("Graph:" .. method, A(R.graph, 2, true), arg_error(1, method, "node index 2 out of range (1..1)"))
  row("Graph:" .. method, A(R.graph, 1.5, true), arg_error(1, method, "integer node index expected, got 1.5"))
end
row("Graph:set_args", A(R.graph, 1, R.buffer), "kernel 'vec_add' takes 4 parameters, got 1")
row("Graph:set_args", A(R.graph, 1, R.buffer, R.buffer, R.buffer, "x"),
  "kernel 'vec_add' parameter 4")
row("Graph:set_args", A(R.graph, 1, R.buffer, R.buffer, R.closed_buffer, 16), "attempt to use a closed gpurun.Buffer")
row("Graph:set_arg", A(R.graph, 1), arg_error(2, "set_arg", "integer argument position expected, got no value"))
row("Graph:set_arg", A(R.graph, 1, 0, 1), arg_error(2, "set_arg", "argument position 0 out of range (kernel 'vec_add' takes 4)"))
row("Graph:set_arg", A(R.graph, 1, 5, 1), arg_error(2, "set_arg", "argument position 5 out of range (kernel 'vec_add' takes 4)"))
row("Graph:set_arg", A(R.graph, 1, 4, "x"), "kernel 'vec_add' parameter 4")
row("Graph:set_arg", A(R.graph, 1, 4, 1.5), "kernel 'vec_add' parameter 4")
row("Graph:set_arg", A(R.graph, 1, 1, R.closed_buffer), "attempt to use a closed gpurun.Buffer")
row("Graph:set_arg", A(R.graph, 9, 1, 1), arg_error(1, "set_arg", "node index 9 out of range (1..1)"))
row("Graph:set_config", A(R.graph, 1), arg_error(2, "set_config", "gpurun.LaunchConfig expected, got no value"))
row("Graph:set_config", A(R.graph, 1, R.config_big_shmem), "bytes of dynamic shared memory")
row("Graph:set_enabled", A(R.graph, 1), arg_error(2, "set_enabled", "boolean expected, got no value"))
row("Graph:set_enabled", A(R.graph, 1, 1), arg_error(2, "set_enabled", "boolean expected, got number"))
row("Graph:to_dot", A(R.graph, 5), arg_error(1, "to_dot", "table of options expected, got number"))
row("Graph:to_dot", A(R.graph, { title = 5 }), arg_error(1, "to_dot", "title must be a string, got number"))
row("Graph:to_dot", A(R.graph, { name = {} }), arg_error(1, "to_dot", "name must be a string, got table"))
row("Graph:to_dot", A(R.graph, { titel = "x" }), arg_error(1, "to_dot",
  "unknown option 'titel' (known: name, title, races)"))
row("Graph:to_dot", A(R.graph, { races = 5 }), arg_error(1, "to_dot",
  "races must be a boolean or graph:check()'s list, got number"))
row("Graph:to_dot", A(R.graph, { races = { 5 } }), arg_error(1, "to_dot", "races must be graph:check()'s list"))
row("Graph:to_dot", A(R.graph, { races = { { first = {}, second = {}, hazard = "RAW" } } }),
  arg_error(1, "to_dot", "races must be graph:check()'s list"))
for _, label in ipairs({ "Graph:check", "GraphBuilder:check" }) do
  local self = label == "Graph:check" and R.graph or R.built
  row(label, A(self, 5), arg_error(1, "check", "table of options expected, got number"))
  row(label, A(self, { raise = 1 }), arg_error(1, "check", "option 'raise' must be a boolean, got number"))
  row(label, A(self, { nope = true }), arg_error(1, "check", "unknown option 'nope' (known: raise)"))
end
row("GraphBuilder:check", A(R.builder), "GraphBuilder:check: nothing built to check (it is idle)")
row("GraphBuilder:check", A(R.building), "GraphBuilder:check: nothing built to check (it is building)")
row("GraphBuilder:check", A(R.body), "GraphBuilder:check: nothing built to check (it is idle, not an origin)")
row("GraphBuilder:complete", A(R.built, { check = 1 }), arg_error(1, "complete",
  "option 'check' must be a boolean, got number"))
row("GraphBuilder:complete", A(R.built, { check = false, nope = 1 }), arg_error(1, "complete",
  "unknown option 'nope' (known: auto_free_on_launch, check, device_launch, use_node_priority, upload_stream)"))
row("Kernel:set_access", A(R.add), arg_error(1, "set_access", "table of access modes expected, got no value"))
row("Kernel:set_access", A(R.add, "r"), arg_error(1, "set_access", "table of access modes expected, got string"))
row("Kernel:set_access", A(R.add, { "x" }), arg_error(1, "set_access",
  "parameter 1: \"r\", \"w\", \"rw\" or false expected, got 'x'"))
row("Kernel:set_access", A(R.add, { [5] = "r" }), arg_error(1, "set_access",
  "keys are parameter positions 1 to 4, got 5"))
row("Kernel:set_access", A(R.add, { name = "r" }), arg_error(1, "set_access",
  "keys are parameter positions 1 to 4, got 'name'"))
row("Graph:nodes", A(R.closed_graph), "attempt to use a closed gpurun.Graph")
row("Graph:profile", A(R.graph), arg_error(1, "profile", "gpurun.Stream expected, got no value"))
row("Graph:profile", A(R.graph, 1), arg_error(1, "profile", "gpurun.Stream expected, got number"))
row("Graph:profile", A(R.graph, R.builder), arg_error(1, "profile", "gpurun.Stream expected, got gpurun.GraphBuilder"))
row("Graph:profile", A(R.graph, R.closed_stream), "attempt to use a closed gpurun.Stream")
row("Graph:profile", A(R.graph, R.stream, 5), arg_error(2, "profile", "table of options expected, got number"))
row("Graph:profile", A(R.graph, R.stream, { replays = 0 }),
  arg_error(2, "profile", "replays must be an integer from 1 to 10000, got 0"))
row("Graph:profile", A(R.graph, R.stream, { replays = 2.5 }),
  arg_error(2, "profile", "replays must be an integer from 1 to 10000, got 2.5"))
row("Graph:profile", A(R.graph, R.stream, { replays = 10001 }),
  arg_error(2, "profile", "replays must be an integer from 1 to 10000, got 10001"))
row("Graph:profile", A(R.graph, R.stream, { replay = 3 }),
  arg_error(2, "profile", "unknown option 'replay' (known: replays)"))

-- ---- cuBLAS: matrix, matmul, axpy, scal, dot, nrm2 ------------------------------------------

local BLAS_TYPES = "cuBLAS takes float32, float64, float16 or bfloat16"
local VIEW_EXPECTED = "must be a 2-D view (gpurun.matrix(buffer, rows, cols)), got "
local function v44(buffer) return { buffer = buffer or R.buffer, rows = 4, cols = 4 } end
row("gpurun.matrix", A(), arg_error(1, "matrix", "matrix.buffer must be a gpurun.Buffer, got nil"))
row("gpurun.matrix", A(5, 2, 2), arg_error(1, "matrix", "matrix.buffer must be a gpurun.Buffer, got number"))
row("gpurun.matrix", A(R.buffer, 0, 4), arg_error(2, "matrix", "matrix.rows must be 1..2147483647 (cuBLAS takes 32-bit sizes), got 0"))
row("gpurun.matrix", A(R.buffer, 4, 1.5), arg_error(3, "matrix", "matrix.cols must be an integer, got 1.5"))
row("gpurun.matrix", A(R.buffer, 4, 1 << 40), arg_error(3, "matrix", "matrix.cols must be 1..2147483647 (cuBLAS takes 32-bit sizes), got 1099511627776"))
row("gpurun.matrix", A(R.buffer, 4, 8), arg_error(1, "matrix", "matrix: 4 x 8 (ld 8) needs 32 elements, its buffer has 16"))
row("gpurun.matrix", A(R.buffer, 2, 4, { ld = 2 }), arg_error(4, "matrix", "matrix.ld (2) must be at least its cols (4): rows are ld elements apart"))
row("gpurun.matrix", A(R.buffer, 2, 2, { batch = 0 }), arg_error(4, "matrix", "matrix.batch must be 1..2147483647 (cuBLAS takes 32-bit sizes), got 0"))
row("gpurun.matrix", A(R.buffer, 2, 2, { batch = 2, stride = -1 }), arg_error(4, "matrix", "matrix.stride must be an integer of 0 or more, got -1"))
row("gpurun.matrix", A(R.buffer, 2, 2, { batch = 5 }), arg_error(1, "matrix", "matrix: 2 x 2 (ld 2, batch 5, stride 4) needs 20 elements, its buffer has 16"))
row("gpurun.matrix", A(R.buffer, 2, 2, { nope = 1 }), arg_error(4, "matrix", "unknown option 'nope' (known: ld, batch, stride)"))
row("gpurun.matrix", A(R.buffer, 2, 2, 5), arg_error(4, "matrix", "options table expected, got number"))
row("gpurun.matrix", A(R.buffer_i32, 2, 2), arg_error(1, "matrix", "matrix.buffer has dtype int32; " .. BLAS_TYPES))
row("gpurun.matrix", A(R.closed_buffer, 2, 2), "attempt to use a closed gpurun.Buffer")
row("gpurun.matmul", A(1, 2, 5), arg_error(3, "matmul", "options table expected, got number"))
row("gpurun.matmul", A(1, 2, { nope = 1 }), arg_error(3, "matmul", "unknown option 'nope' (known: out, alpha, beta, transa, transb, stream, epilogue, bias)"))
row("gpurun.matmul", A(1, 2, { alpha = "x" }), arg_error(3, "matmul", "options.alpha must be a number, got string"))
row("gpurun.matmul", A(1, 2, { transa = 1 }), arg_error(3, "matmul", "options.transa must be a boolean, got number"))
row("gpurun.matmul", A(1, 2, { stream = 5 }), arg_error(3, "matmul", "options.stream must be a gpurun.Stream or gpurun.GraphBuilder, got number"))
row("gpurun.matmul", A(5, 5, { stream = R.stream }), arg_error(1, "matmul", "a " .. VIEW_EXPECTED .. "number"))
row("gpurun.matmul", A(v44(), 5, { stream = R.stream }), arg_error(2, "matmul", "b " .. VIEW_EXPECTED .. "number"))
row("gpurun.matmul", A({ buffer = R.buffer, rows = 2, cols = 8 }, v44(), { stream = R.stream }),
  arg_error(2, "matmul", "k does not fit: a is 2 x 8, so k is 8, but b has 4 rows"))
row("gpurun.matmul", A({ buffer = R.buffer, rows = 2, cols = 8 }, v44(), { transa = true, stream = R.stream }),
  arg_error(2, "matmul", "k does not fit: transposed a is 8 x 2, so k is 2, but b has 4 rows"))
row("gpurun.matmul", A(v44(), v44(R.buffer_f64), { stream = R.stream }),
  arg_error(2, "matmul", "b has dtype float64 but a float32: both must be of one dtype"))
row("gpurun.matmul", A(v44(), v44(), { alpha = 1e300, stream = R.stream }),
  arg_error(3, "matmul", "options.alpha 1e+300 is out of range for float32 (the compute dtype)"))
row("gpurun.matmul", A(v44(), v44(), { stream = R.building }),
  arg_error(3, "matmul", "options.out is needed on a GraphBuilder: no buffer can be made while capturing"))
row("gpurun.matmul", A(v44(R.closed_buffer), v44(), { stream = R.stream }), "attempt to use a closed gpurun.Buffer")
row("gpurun.matmul", A(v44(), v44(), { stream = R.closed_stream }), "attempt to use a closed gpurun.Stream")
row("gpurun.matmul", A({ v44() }, v44(), { stream = R.stream }),
  arg_error(2, "matmul", "a and b must both be views or both be lists of views"))
row("gpurun.matmul", A(v44(), v44(), { stream = R.stream, epilogue = "RELU" }),
  arg_error(3, "matmul", "options.epilogue must be one of bias, gelu, gelu_bias, relu, relu_bias (cuBLASLt's epilogues), got 'RELU'"))
row("gpurun.matmul", A(v44(), v44(), { stream = R.stream, epilogue = "bias" }),
  arg_error(3, "matmul", "options.epilogue \"bias\" adds a bias: options.bias (a buffer of out's cols elements) is needed"))
row("gpurun.matmul", A(v44(), v44(), { stream = R.stream, epilogue = "gelu", bias = R.buffer }),
  arg_error(3, "matmul", "options.bias is given but options.epilogue \"gelu\" adds none: use \"bias\", \"relu_bias\" or \"gelu_bias\""))
row("gpurun.matmul", A(v44(), v44(), { stream = R.stream, bias = R.buffer }),
  arg_error(3, "matmul", "options.bias is given without options.epilogue: a bias is added by the \"bias\", \"relu_bias\" and \"gelu_bias\" epilogues"))
row("gpurun.matmul", A(v44(), v44(), { stream = R.stream, epilogue = "relu_bias", bias = R.buffer_f64 }),
  arg_error(3, "matmul", "options.bias has dtype float64 but out float32: cuBLASLt adds a bias of out's dtype"))
row("gpurun.matmul", A(v44(), v44(), { stream = R.stream, epilogue = "relu_bias", bias = R.buffer_i32 }),
  arg_error(3, "matmul", "options.bias has dtype int32; " .. BLAS_TYPES))
row("gpurun.matmul", A(v44(), v44(), { stream = R.stream, epilogue = "gelu_bias", bias = R.closed_buffer }),
  "attempt to use a closed gpurun.Buffer")
row("gpurun.matmul", A({ v44() }, { v44() }, { stream = R.stream, epilogue = "relu" }),
  arg_error(3, "matmul", "an epilogue takes one matrix, not lists of views: run the products one by one"))
row("gpurun.matmul", A({ buffer = R.buffer, rows = 2, cols = 2, batch = 2 }, { buffer = R.buffer, rows = 2, cols = 2 },
  { stream = R.stream, epilogue = "relu" }),
  arg_error(3, "matmul", "an epilogue takes one matrix, got a batch of 2: run the matrices one by one, or without an epilogue"))
row("gpurun.axpy", A(), arg_error(2, "axpy", "x must be a gpurun.Buffer, got nil"))
row("gpurun.axpy", A(1, R.buffer, R.buffer8), arg_error(3, "axpy", "n does not fit: x has 16 elements, y 8"))
row("gpurun.axpy", A(1, R.buffer, R.buffer_f64), arg_error(3, "axpy", "y has dtype float64 but x float32: both must be of one dtype"))
row("gpurun.axpy", A(1, R.buffer_i32, R.buffer_i32), arg_error(2, "axpy", "x has dtype int32; " .. BLAS_TYPES))
row("gpurun.axpy", A("2", R.buffer, R.buffer, { stream = R.stream }), arg_error(1, "axpy", "alpha must be a number or a gpurun.Buffer, got string"))
row("gpurun.axpy", A(R.buffer_f64, R.buffer, R.buffer, { stream = R.stream }),
  arg_error(1, "axpy", "an alpha buffer holds one float32 (the compute dtype of float32), got 16 float64"))
row("gpurun.axpy", A(1, R.buffer, R.buffer, { nope = 1 }), arg_error(4, "axpy", "unknown option 'nope' (known: stream)"))
row("gpurun.scal", A(), arg_error(2, "scal", "x must be a gpurun.Buffer, got nil"))
row("gpurun.scal", A(1, R.buffer, 5), arg_error(3, "scal", "options table expected, got number"))
row("gpurun.scal", A(1e300, R.buffer, { stream = R.stream }), arg_error(1, "scal", "alpha 1e+300 is out of range for float32 (the compute dtype)"))
row("gpurun.dot", A(), arg_error(1, "dot", "x must be a gpurun.Buffer, got nil"))
row("gpurun.dot", A(R.buffer, R.buffer8), arg_error(2, "dot", "n does not fit: x has 16 elements, y 8"))
row("gpurun.dot", A(R.buffer, R.buffer, { out = 5, stream = R.stream }), arg_error(3, "dot", "options.out must be a gpurun.Buffer, got number"))
row("gpurun.dot", A(R.buffer, R.buffer, { out = R.buffer_f64, stream = R.stream }),
  arg_error(3, "dot", "options.out must hold one float32 (x's dtype), got 16 float64"))
row("gpurun.dot", A(R.buffer, R.buffer, { stream = R.building }),
  arg_error(3, "dot", "options.out is needed on a GraphBuilder: no buffer can be made while capturing"))
row("gpurun.nrm2", A(), arg_error(1, "nrm2", "x must be a gpurun.Buffer, got nil"))
row("gpurun.nrm2", A(R.buffer, { nope = 1 }), arg_error(2, "nrm2", "unknown option 'nope' (known: out, stream)"))

-- ---- cuSPARSE: csr, spmv, spmm ---------------------------------------------------------------

local function csr_args(offsets, indices, values, height, width)
  return A(offsets or R.buffer_i32, indices or R.buffer_i32, values or R.buffer, height or 15, width or 4)
end
local ONE_DTYPE = ": both must be of one dtype"
row("gpurun.csr", A(), arg_error(1, "csr", "row_offsets must be a gpurun.Buffer, got nil"))
row("gpurun.csr", A(R.buffer_i32, 5, R.buffer, 15, 4), arg_error(2, "csr", "col_indices must be a gpurun.Buffer, got number"))
row("gpurun.csr", csr_args(nil, nil, nil, 0), arg_error(4, "csr", "rows must be 1..2147483647 (int32 indices), got 0"))
row("gpurun.csr", csr_args(nil, nil, nil, 15, 1.5), arg_error(5, "csr", "cols must be an integer, got 1.5"))
row("gpurun.csr", csr_args(nil, nil, nil, 15, "4"), arg_error(5, "csr", "cols must be an integer, got string"))
row("gpurun.csr", csr_args(R.buffer), arg_error(1, "csr", "row_offsets must be int32, got float32"))
row("gpurun.csr", csr_args(nil, R.buffer), arg_error(2, "csr", "col_indices must be int32, got float32"))
row("gpurun.csr", csr_args(nil, nil, R.buffer_i32), arg_error(3, "csr", "values must be float32 or float64, got int32"))
row("gpurun.csr", csr_args(nil, nil, nil, 4), arg_error(1, "csr", "row_offsets must hold rows + 1 = 5 offsets, got 16"))
row("gpurun.csr", csr_args(nil, nil, R.buffer8), arg_error(2, "csr", "nnz does not fit: 16 col_indices but 8 values"))
row("gpurun.csr", csr_args(R.closed_buffer), "attempt to use a closed gpurun.Buffer")
local S = { stream = R.stream }
row("gpurun.spmv", A(), arg_error(1, "spmv", "A must be a gpurun.CsrMatrix (gpurun.csr), got nil"))
row("gpurun.spmv", A(R.buffer, R.buffer, R.buffer), arg_error(1, "spmv", "A must be a gpurun.CsrMatrix (gpurun.csr), got gpurun.Buffer"))
row("gpurun.spmv", A(R.csr, 5, R.buffer), arg_error(2, "spmv", "x must be a gpurun.Buffer, got number"))
row("gpurun.spmv", A(R.csr, R.buffer, R.buffer, 5), arg_error(4, "spmv", "options table expected, got number"))
row("gpurun.spmv", A(R.csr, R.buffer, R.buffer, { nope = 1 }), arg_error(4, "spmv", "unknown option 'nope' (known: alpha, beta, transpose, stream)"))
row("gpurun.spmv", A(R.csr, R.buffer, R.buffer, { alpha = "x" }), arg_error(4, "spmv", "options.alpha must be a number, got string"))
row("gpurun.spmv", A(R.csr, R.buffer, R.buffer, { beta = 1e300, stream = R.stream }),
  arg_error(4, "spmv", "options.beta 1e+300 is out of range for float32 (the compute dtype)"))
row("gpurun.spmv", A(R.csr, R.buffer, R.buffer, { transpose = 1, stream = R.stream }),
  arg_error(4, "spmv", "options.transpose must be a boolean, got number"))
row("gpurun.spmv", A(R.csr, R.buffer, R.buffer, { stream = 5 }),
  arg_error(4, "spmv", "options.stream must be a gpurun.Stream or gpurun.GraphBuilder, got number"))
row("gpurun.spmv", A(R.csr, R.buffer_f64, R.buffer, S), arg_error(2, "spmv", "x has dtype float64 but A float32" .. ONE_DTYPE))
row("gpurun.spmv", A(R.csr, R.buffer8, R.buffer, S), arg_error(2, "spmv", "x must hold 16 elements (the cols of A), got 8"))
row("gpurun.spmv", A(R.csr, R.buffer, R.buffer8, S), arg_error(3, "spmv", "y must hold 16 elements (the rows of A), got 8"))
row("gpurun.spmv", A(R.closed_csr, R.buffer, R.buffer, S), "attempt to use a closed gpurun.CsrMatrix")
row("gpurun.spmv", A(R.csr, R.closed_buffer, R.buffer, S), "attempt to use a closed gpurun.Buffer")
row("gpurun.spmv", A(R.csr, R.buffer, R.buffer, { stream = R.closed_stream }), "attempt to use a closed gpurun.Stream")
local function col(buffer, height, width)
  return { buffer = buffer or R.buffer, rows = height or 16, cols = width or 1 }
end
row("gpurun.spmm", A(), arg_error(1, "spmm", "A must be a gpurun.CsrMatrix (gpurun.csr), got nil"))
row("gpurun.spmm", A(R.csr, col(), col(), { nope = 1 }), arg_error(4, "spmm", "unknown option 'nope' (known: alpha, beta, transpose, stream)"))
row("gpurun.spmm", A(R.csr, 5, col(), S), arg_error(2, "spmm", "B must be a 2-D view (gpurun.matrix(buffer, rows, cols)), got number"))
row("gpurun.spmm", A(R.csr, col(nil, 4, 4), col(), S), arg_error(2, "spmm", "k does not fit: A is 16 x 16, so k is 16, but B has 4 rows"))
row("gpurun.spmm", A(R.csr, col(), col(R.buffer8, 8, 1), S), arg_error(3, "spmm", "m does not fit: C has 8 rows, A gives 16"))
row("gpurun.spmm", A(R.csr, col(R.buffer_f64), col(), S), arg_error(2, "spmm", "B has dtype float64 but A float32" .. ONE_DTYPE))
row("gpurun.spmm", A(R.csr, { buffer = R.buffer, rows = 8, cols = 1, batch = 2 }, col(), S),
  arg_error(2, "spmm", "B must be one matrix, got a batch of 2"))
row("gpurun.spmm", A(R.csr, col(nil, 16, 2), col(), S), arg_error(2, "spmm", "B: 16 x 2 (ld 2) needs 32 elements, its buffer has 16"))
row("gpurun.spmm", A(R.closed_csr, col(), col(), S), "attempt to use a closed gpurun.CsrMatrix")

-- ---- gpurun.system -----------------------------------------------------------------------------

-- Arguments are checked before NVML is opened, so these need neither NVML
-- nor a GPU.
local SYSTEM_DEVICE = "device index or report of gpurun.system.Device expected"
for _, name in ipairs({ "Device", "get_topology_common_ancestor", "get_p2p_status" }) do
  local label = "gpurun.system." .. name
  row(label, A(), arg_error(1, name, SYSTEM_DEVICE .. ", got no value"))
  row(label, A("0"), arg_error(1, name, SYSTEM_DEVICE .. ", got string"))
  row(label, A(0.5), arg_error(1, name, SYSTEM_DEVICE .. ", got a number with a fraction"))
  row(label, A({ index = "0" }), arg_error(1, name, SYSTEM_DEVICE .. ", got table"))
  row(label, A(R.stream), arg_error(1, name, SYSTEM_DEVICE .. ", got gpurun.Stream"))
  if name ~= "Device" then
    row(label, A(0), arg_error(2, name, SYSTEM_DEVICE .. ", got no value"))
    row(label, A(0, true), arg_error(2, name, SYSTEM_DEVICE .. ", got boolean"))
  end
end
for _, caps in ipairs({ "READ", "bogus", "" }) do
  row("gpurun.system.get_p2p_status", A(0, 1, caps), arg_error(3, "get_p2p_status",
    ("read, write, nvlink, atomics or pci expected, got '%s'"):format(caps)))
end
row("gpurun.system.get_p2p_status", A(0, 1, 2), arg_error(3, "get_p2p_status",
  "read, write, nvlink, atomics or pci expected, got number"))
row("gpurun.system.get_process_name", A(), arg_error(1, "get_process_name", "process id expected, got no value"))
row("gpurun.system.get_process_name", A("1"), arg_error(1, "get_process_name", "process id expected, got string"))
row("gpurun.system.get_process_name", A(-1), arg_error(1, "get_process_name", "process id expected, got -1"))
row("gpurun.system.get_process_name", A(1.5), arg_error(1, "get_process_name", "process id expected, got 1.5"))
row("gpurun.system.get_process_name", A(1 << 40), arg_error(1, "get_process_name",
  "process id expected, got 1099511627776"))

-- ---- gpurun.dist ------------------------------------------------------------------------------

-- Every argument is checked before the world's communicator is made (which
-- would be collective work across ranks), so the type errors need no GPU.
row("dist.init", A(5), arg_error(1, "dist.init", "table of options or nil expected, got number"))
row("dist.init", A("x"), arg_error(1, "dist.init", "table of options or nil expected, got string"))
row("dist.init", A({ devise = 1 }), "dist.init: unknown option 'devise' (known: device)")
row("dist.init", A({ [1] = true }), "dist.init: unknown option: a number key (known: device)")
row("dist.init", A({ device = 1.5 }), "dist.init: 'device' must be a device ordinal or false, got 1.5")
row("dist.init", A({ device = "0" }), "dist.init: 'device' must be a device ordinal or false, got string")
row("dist.init", A({ device = true }), "dist.init: 'device' must be a device ordinal or false, got boolean")
local COLLECTIVES = { all_reduce = 1, broadcast = 1, all_gather = 2, reduce_scatter = 2 }
for _, name in ipairs(catalog.sorted_keys(COLLECTIVES)) do
  local label = "dist." .. name
  row(label, A(), arg_error(1, label, "gpurun.Buffer expected, got no value"))
  row(label, A(5), arg_error(1, label, "gpurun.Buffer expected, got number"))
  row(label, A({ 1, 2 }), arg_error(1, label, "gpurun.Buffer expected, got table"))
  row(label, A(R.options), arg_error(1, label, "gpurun.Buffer expected, got gpurun.ProgramOptions"))
  row(label, A(R.closed_buffer, R.buffer), "attempt to use a closed gpurun.Buffer")
  row(label, A(R.buffer_i16, R.buffer_i16), arg_error(1, label,
    "NCCL has no int16 type (it moves float32, float64, int32, uint32, int64, uint64, int8, uint8, float16 and bfloat16)"))
  if COLLECTIVES[name] == 2 then
    row(label, A(R.buffer), arg_error(2, label, "gpurun.Buffer expected, got no value"))
    row(label, A(R.buffer, "x"), arg_error(2, label, "gpurun.Buffer expected, got string"))
    row(label, A(R.buffer, R.closed_buffer), "attempt to use a closed gpurun.Buffer")
  end
end
for _, name in ipairs({ "all_reduce", "reduce_scatter" }) do
  local label, at = "dist." .. name, name == "all_reduce" and 2 or 3
  local args = name == "all_reduce" and { R.buffer } or { R.buffer, R.buffer }
  local function with(...) local a = A(table.unpack(args)); for _, v in ipairs({ ... }) do a.n = a.n + 1; a[a.n] = v end; return a end
  row(label, with("bogus"), arg_error(at, label,
    "unknown reduction op 'bogus' (expected one of: sum, prod, max, min, avg)"))
  row(label, with("SUM"), arg_error(at, label,
    "unknown reduction op 'SUM' (expected one of: sum, prod, max, min, avg)"))
  row(label, with(1), arg_error(at, label, "reduction op name (sum, prod, max, min, avg) expected, got number"))
  row(label, with("sum", 5), arg_error(at + 1, label, "gpurun.Stream or gpurun.GraphBuilder expected, got number"))
  row(label, with("sum", R.event), arg_error(at + 1, label, "gpurun.Stream or gpurun.GraphBuilder expected, got gpurun.Event"))
  row(label, with("sum", R.closed_stream), "attempt to use a closed gpurun.Stream")
  row(label, with("sum", R.builder), "GraphBuilder is not building (it is idle): call begin_building() first")
end
row("dist.broadcast", A(R.buffer), arg_error(2, "dist.broadcast", "root rank expected, got no value"))
row("dist.broadcast", A(R.buffer, 1.5), arg_error(2, "dist.broadcast", "root rank expected, got 1.5"))
row("dist.broadcast", A(R.buffer, "0"), arg_error(2, "dist.broadcast", "root rank expected, got string"))
row("dist.broadcast", A(R.buffer, 1), arg_error(2, "dist.broadcast", "root rank 1 out of range (0..0)"),
  { before = { "dist" } })
row("dist.broadcast", A(R.buffer, -1), arg_error(2, "dist.broadcast", "root rank -1 out of range (0..0)"),
  { before = { "dist" } })
row("dist.all_gather", A(R.buffer, R.buffer8), arg_error(1, "dist.all_gather",
  "the output must hold size (1) x 8 = 8 elements, it holds 16"), { before = { "dist" } })
row("dist.all_gather", A(R.buffer, R.buffer_f64), arg_error(2, "dist.all_gather",
  "gpurun.Buffer of float32 expected (the output's dtype), got float64"), { before = { "dist" } })
row("dist.reduce_scatter", A(R.buffer8, R.buffer), arg_error(2, "dist.reduce_scatter",
  "the input must hold size (1) x 8 = 8 elements, it holds 16"), { before = { "dist" } })
row("dist.reduce_scatter", A(R.buffer_i32, R.buffer), arg_error(2, "dist.reduce_scatter",
  "gpurun.Buffer of int32 expected (the output's dtype), got float32"), { before = { "dist" } })

-- ---- event and stream options ----------------------------------------------------------

local EVENT_KNOWN = "(known: timing, blocking, ipc)"
row("gpurun.Event", A({ ipc = true, timing = true }), arg_error(1, "Event", "an event with ipc = true has no "
  .. "timing (the driver requires CU_EVENT_DISABLE_TIMING): leave timing out or pass timing = false"))
row("gpurun.Event", A({ ipc = 1 }), arg_error(1, "Event", "option 'ipc' must be a boolean, got number"))
row("gpurun.Event", A(5), arg_error(1, "Event", "table of options expected, got number"))
row("gpurun.Event", A("timing"), arg_error(1, "Event", "table of options expected, got string"))
row("gpurun.Event", A(R.config), arg_error(1, "Event", "table of options expected, got gpurun.LaunchConfig"))
row("gpurun.Event", A({ nope = true }), arg_error(1, "Event", "unknown option 'nope' " .. EVENT_KNOWN))
row("gpurun.Event", A({ [1] = false }), arg_error(1, "Event", "unknown option: a number key " .. EVENT_KNOWN))
row("gpurun.Event", A({ timing = 1 }), arg_error(1, "Event", "option 'timing' must be a boolean, got number"))
row("gpurun.Event", A({ blocking = "yes" }), arg_error(1, "Event", "option 'blocking' must be a boolean, got string"))
row("gpurun.Event", A(), NO_DRIVER, { when = "no_driver" })
row("gpurun.Event", A({ timing = false }), NO_DEVICE, { when = "no_device" })
row("Event:elapsed_ms", nil, "Event:elapsed_ms: an event made with timing = false has no time", { gpu = true,
  call = function(env)
    local untimed = gpurun.Event({ timing = false })
    env.stream:record(untimed)
    return env.stream:record():elapsed_ms(untimed)
  end })
row("Event:elapsed_ms", nil, "Event:elapsed_ms: both events must have been recorded on a stream", { gpu = true,
  call = function(env) return env.stream:record():elapsed_ms(gpurun.Event()) end })

local PRIORITY_RANGE = "out of range: this device's stream priorities run from 0 (least, the default) to "
row("Device:create_stream", A(R.device, 5), arg_error(1, "create_stream", "table of options expected, got number"))
row("Device:create_stream", A(R.device, { prio = 1 }),
  arg_error(1, "create_stream", "unknown option 'prio' (known: priority)"))
row("Device:create_stream", A(R.device, { priority = 0.5 }),
  arg_error(1, "create_stream", "option 'priority' must be an integer, got 0.5"))
row("Device:create_stream", A(R.device, { priority = "high" }),
  arg_error(1, "create_stream", "option 'priority' must be an integer, got string"))
for _, priority in ipairs({ 1, 1000, -1000, math.mininteger }) do
  row("Device:create_stream", A(R.device, { priority = priority }),
    "bad argument #1 to 'Device:create_stream' (priority " .. priority .. " " .. PRIORITY_RANGE)
end

-- ---- kernel attributes and occupancy --------------------------------------------------------

local SET_SHARED = "set_max_dynamic_shared_size_bytes"
row("Kernel:" .. SET_SHARED, A(R.add), arg_error(1, SET_SHARED, "integer number of bytes expected, got no value"))
row("Kernel:" .. SET_SHARED, A(R.add, "1024"), arg_error(1, SET_SHARED, "integer number of bytes expected, got string"))
row("Kernel:" .. SET_SHARED, A(R.add, 1.5), arg_error(1, SET_SHARED, "integer number of bytes expected, got 1.5"))
for _, bytes in ipairs({ -1, 1 << 30, math.maxinteger }) do
  row("Kernel:" .. SET_SHARED, A(R.add, bytes), P("bad argument #1 to 'Kernel:" .. SET_SHARED .. "' %(kernel "
    .. "'vec_add' can use from 0 to %d+ bytes of dynamic shared memory on device 0 %(max_shared_memory_per_block_optin "
    .. "%d+ less its 0 static bytes%), got " .. plain(tostring(bytes)) .. "%)"))
end

local BLOCK_OPTION = "option 'block' must be the threads per block, from 1 to 1024 for kernel 'vec_add', got "
row("Kernel:occupancy", A(R.add), arg_error(1, "occupancy", "table { block = , shmem_size = } expected, got no value"))
row("Kernel:occupancy", A(R.add, 256), arg_error(1, "occupancy", "table { block = , shmem_size = } expected, got number"))
row("Kernel:occupancy", A(R.add, { block = 256, nope = 1 }),
  arg_error(1, "occupancy", "unknown option 'nope' (known: block, shmem_size)"))
for _, case in ipairs({ { nil, "nil" }, { 0, "0" }, { 2048, "2048" }, { 1.5, "1.5" }, { "256", "string" },
    { { 32, 64 }, "{x, y, z} of 2048 threads" }, { {}, "a table that is not {x [, y [, z]]}" },
    { { 1, 2, 3, 4 }, "a table that is not {x [, y [, z]]}" }, { { 0 }, "a table that is not {x [, y [, z]]}" } }) do
  row("Kernel:occupancy", A(R.add, { block = case[1] }), arg_error(1, "occupancy", BLOCK_OPTION .. case[2]))
end
row("Kernel:occupancy", A(R.bounded, { block = 128 }), arg_error(1, "occupancy",
  "option 'block' must be the threads per block, from 1 to 64 for kernel 'bounded', got 128"))
local SHMEM_OPTION = "option 'shmem_size' must be from 0 to %d+ bytes for kernel 'vec_add' %(its limit: raise it "
  .. "with set_max_dynamic_shared_size_bytes%), got "
for _, bytes in ipairs({ -1, 1 << 30 }) do
  row("Kernel:occupancy", A(R.add, { block = 256, shmem_size = bytes }),
    P("bad argument #1 to 'Kernel:occupancy' %(" .. SHMEM_OPTION .. plain(tostring(bytes)) .. "%)"))
  row("Kernel:max_potential_block_size", A(R.add, { shmem_size = bytes }),
    P("bad argument #1 to 'Kernel:max_potential_block_size' %(" .. SHMEM_OPTION .. plain(tostring(bytes)) .. "%)"))
end
row("Kernel:occupancy", A(R.add, { block = 256, shmem_size = 0.5 }),
  arg_error(1, "occupancy", "option 'shmem_size' must be an integer number of bytes, got 0.5"))
row("Kernel:max_potential_block_size", A(R.add, 5),
  arg_error(1, "max_potential_block_size", "table of options expected, got number"))
row("Kernel:max_potential_block_size", A(R.add, { block = 256 }),
  arg_error(1, "max_potential_block_size", "unknown option 'block' (known: shmem_size, block_size_limit)"))
for _, limit in ipairs({ -1, 1025 }) do
  row("Kernel:max_potential_block_size", A(R.add, { block_size_limit = limit }),
    arg_error(1, "max_potential_block_size", "option 'block_size_limit' must be from 0 (none) to 1024, got " .. limit))
end
row("Kernel:max_potential_block_size", A(R.add, { block_size_limit = 1.5 }),
  arg_error(1, "max_potential_block_size", "option 'block_size_limit' must be an integer, got 1.5"))

-- ---- bytes, ranges, views, pinned memory -----------------------------------------------------

-- Bad element ranges of a 16-element R[object] at argument `at` (counting
-- after self) of a call that takes `before` first.
local function range_rows(label, name, object, before, at)
  local function with(...)
    local args = A(R[object], table.unpack(before))
    for i = 1, select("#", ...) do args[args.n + i] = select(i, ...) end
    args.n = args.n + select("#", ...)
    return args
  end
  row(label, with(0), arg_error(at, name, "element index 0 out of range (1..16)"))
  row(label, with(17), arg_error(at, name, "element index 17 out of range (1..16)"))
  row(label, with(-1), arg_error(at, name, "element index -1 out of range (1..16)"))
  row(label, with(math.mininteger), arg_error(at, name, "element index -9223372036854775808 out of range (1..16)"))
  row(label, with(1.5), arg_error(at, name, "integer element index expected, got 1.5"))
  row(label, with(NAN), P(("bad argument #%d to '%s' %%(integer element index expected, got %s%%)")
    :format(at, label, NAN_TEXT)))
  row(label, with(1, 0), arg_error(at + 1, name, "positive element count expected, got 0"))
  row(label, with(1, -3), arg_error(at + 1, name, "positive element count expected, got -3"))
  row(label, with(1, 2.5), arg_error(at + 1, name, "integer element count expected, got 2.5"))
  row(label, with(1, 17), arg_error(at + 1, name, "17 elements from element 1 run past the last (16)"))
  row(label, with(16, 2), arg_error(at + 1, name, "2 elements from element 16 run past the last (16)"))
  row(label, with(2, math.maxinteger),
    arg_error(at + 1, name, "9223372036854775807 elements from element 2 run past the last (16)"))
end

for _, method in ipairs({ "to_table", "to_bytes" }) do
  range_rows("Buffer:" .. method, method, "buffer", {}, 1)
  range_rows("PinnedBuffer:" .. method, method, "pinned", {}, 1)
  row("Buffer:" .. method, A(R.buffer, "x"), arg_error(1, method, STREAM_ARG .. "string"))
  row("Buffer:" .. method, A(R.buffer, 1, 2, "s"), arg_error(3, method, STREAM_ARG .. "string"))
  row("Buffer:" .. method, A(R.buffer, 1, R.event), arg_error(2, method, STREAM_ARG .. "gpurun.Event"))
  row("Buffer:" .. method, A(R.buffer, 1, nil, R.closed_stream), "attempt to use a closed gpurun.Stream")
  row("Buffer:" .. method, A(R.orphan_view),
    "attempt to use a closed gpurun.Buffer (the buffer this is a view of was closed)")
end
range_rows("Buffer:fill", "fill", "buffer", { 1 }, 2)
range_rows("PinnedBuffer:fill", "fill", "pinned", { 1 }, 2)
row("Buffer:fill", A(R.buffer, 1, 1, 2, 3), arg_error(4, "fill", STREAM_ARG .. "number"))
row("Buffer:fill", A(R.orphan_view, 1), "attempt to use a closed gpurun.Buffer (the buffer this is a view of was closed)")
range_rows("Buffer:copy_from", "copy_from", "buffer", { {} }, 2)
range_rows("Buffer:copy_to", "copy_to", "buffer", { R.buffer8 }, 2)

row("Buffer:view", A(R.buffer), arg_error(1, "view", "integer element index expected, got no value"))
row("Buffer:view", A(R.buffer, "1"), arg_error(1, "view", "integer element index expected, got string"))
row("Buffer:view", A(R.buffer, {}), arg_error(1, "view", "integer element index expected, got table"))
range_rows("Buffer:view", "view", "buffer", {}, 1)
row("Buffer:view", A(R.view, 9), arg_error(1, "view", "element index 9 out of range (1..8)"))
row("Buffer:view", A(R.orphan_view, 1), "attempt to use a closed gpurun.Buffer (the buffer this is a view of was closed)")
row("Buffer.__index", A(R.orphan_view, "size"), "attempt to use a closed gpurun.Buffer")
row("gpurun.launch", A(R.stream, R.config, R.add, R.orphan_view, R.buffer, R.buffer, 4),
  "kernel 'vec_add' parameter 1 (.u64): attempt to use a closed gpurun.Buffer")

row("Buffer:copy_from", A(R.buffer, "abc"),
  arg_error(1, "copy_from", "string of 64 bytes (16 float32 elements) expected, got 3 bytes"))
row("Buffer:copy_from", A(R.buffer, string.rep("x", 65)),
  arg_error(1, "copy_from", "string of 64 bytes (16 float32 elements) expected, got 65 bytes"))
row("Buffer:copy_from", A(R.buffer, "abcdefgh", 1, 4),
  arg_error(1, "copy_from", "string of 16 bytes (4 float32 elements) expected, got 8 bytes"))
row("Buffer:copy_from", A(R.buffer, { 1, 2 }, 16), arg_error(2, "copy_from", "2 elements from element 16 run past the last (16)"))
row("Buffer:copy_from", A(R.buffer, { 1, 2 }, 1, 3), arg_error(1, "copy_from", "table of 3 elements expected, got 2"))
row("Buffer:copy_from", A(R.buffer, R.buffer8, 1, 4),
  arg_error(1, "copy_from", "gpurun.Buffer of 4 float32 elements expected, got 8 float32 elements"))
row("Buffer:copy_from", A(R.buffer, R.pinned8),
  arg_error(1, "copy_from", "gpurun.PinnedBuffer of 16 float32 elements expected, got 8 float32 elements"))
row("Buffer:copy_from", A(R.buffer, R.pinned_i32),
  arg_error(1, "copy_from", "gpurun.PinnedBuffer of 16 float32 elements expected, got 16 int32 elements"))
row("Buffer:copy_from", A(R.buffer, R.closed_pinned), "attempt to use a closed gpurun.PinnedBuffer")
row("Buffer:copy_from", A(R.buffer, R.pinned, "s"), arg_error(2, "copy_from", STREAM_ARG .. "string"))
row("Buffer:copy_from", A(R.buffer, R.pinned, R.builder), "GraphBuilder is not building (it is idle)")
row("Buffer:copy_from", A(R.buffer, R.pinned, R.closed_builder), "attempt to use a closed gpurun.GraphBuilder")
row("Buffer:copy_from", A(R.buffer, R.pinned8, R.building),
  "gpurun.PinnedBuffer of 16 float32 elements expected, got 8 float32 elements")
row("Buffer:copy_from", A(R.buffer, { 1 }, 1, R.building),
  "Buffer:copy_from: a copy to or from Lua values cannot be a graph node")
row("Buffer:copy_from", A(R.buffer, R.closed_file), arg_error(1, "copy_from", "attempt to use a closed file"))
row("Buffer:copy_from", A(R.buffer, R.short_file), "Buffer:copy_from: reading the file: it ended after 3 of 64 bytes")
row("Buffer:copy_to", A(R.buffer, R.pinned8),
  arg_error(1, "copy_to", "gpurun.PinnedBuffer of 16 float32 elements expected, got 8 float32 elements"))
row("Buffer:copy_to", A(R.buffer, R.pinned, 2), arg_error(2, "copy_to", "16 elements from element 2 run past the last (16)"))
row("Buffer:copy_to", A(R.buffer, R.closed_pinned), "attempt to use a closed gpurun.PinnedBuffer")
row("Buffer:copy_to", A(R.buffer, R.closed_file), arg_error(1, "copy_to", "attempt to use a closed file"))
row("Buffer:copy_to", A(R.buffer, "abc"), arg_error(1, "copy_to", "gpurun.Buffer, gpurun.PinnedBuffer or file expected, got string"))
row("Buffer:close", A(R.buffer), "gpurun.Buffer is used by 1 graph(s) or graph builder(s); close them first",
  { before = { "pinned_graph" } })
row("PinnedBuffer:close", A(R.pinned), "gpurun.PinnedBuffer is used by 1 graph(s) or graph builder(s); close them first",
  { before = { "pinned_graph" } })
row("PinnedBuffer.__close", A(R.pinned), "gpurun.PinnedBuffer is used by 1 graph(s)", { before = { "pinned_graph" } })

row("gpurun.from_bytes", A(), arg_error(1, "from_bytes", "string expected, got no value"))
row("gpurun.from_bytes", A(1234), arg_error(1, "from_bytes", "string expected, got number"))
row("gpurun.from_bytes", A({}), arg_error(1, "from_bytes", "string expected, got table"))
row("gpurun.from_bytes", A(R.buffer), arg_error(1, "from_bytes", "string expected, got gpurun.Buffer"))
row("gpurun.from_bytes", A(""), arg_error(1, "from_bytes",
  "0 bytes are not a whole, positive number of float32 elements (4 bytes each)"))
row("gpurun.from_bytes", A("abc"), arg_error(1, "from_bytes",
  "3 bytes are not a whole, positive number of float32 elements (4 bytes each)"))
row("gpurun.from_bytes", A("abcdefghij", "float64"), arg_error(1, "from_bytes",
  "10 bytes are not a whole, positive number of float64 elements (8 bytes each)"))
dtype_rows("gpurun.from_bytes", "from_bytes", { "abcdefgh" }, 2)
row("gpurun.from_bytes", A("abcd"), NO_DRIVER, { when = "no_driver" })
row("gpurun.from_bytes", A("abcd"), NO_DEVICE, { when = "no_device" })

count_rows("gpurun.pinned", "pinned", {}, 1)
dtype_rows("gpurun.pinned", "pinned", { 16 }, 2)
row("gpurun.pinned", A(math.maxinteger), arg_error(1, "pinned",
  "element count 9223372036854775807 too large for float32 (the byte size overflows size_t)"))
row("gpurun.pinned", A(16), NO_DRIVER, { when = "no_driver" })
row("gpurun.pinned", A(16), NO_DEVICE, { when = "no_device" })
-- Past any address space (2^48 bytes), so that the attempt fails at once
-- instead of pinning the machine's memory first.
row("gpurun.pinned", A(1 << 46), P"cuMemHostAlloc: CUDA_ERROR_[%u_]+ %b() while allocating 256%.00 TiB of page%-locked host memory",
  { gpu = true })
row("gpurun.pinned", A(16), "cannot allocate a gpurun.PinnedBuffer while a graph is being built", { before = { "building" } })
row("gpurun.pinned", A(16, "float32", 5), arg_error(3, "pinned", "table of options expected, got number"))
row("gpurun.pinned", A(16, "float32", { map = true }), arg_error(3, "pinned", "unknown option 'map' (known: mapped)"))
row("gpurun.pinned", A(16, "float32", { mapped = 1 }), arg_error(3, "pinned", "option 'mapped' must be a boolean, got number"))
row("gpurun.pinned", A(16, "float32", { mapped = true }), NO_DEVICE, { when = "no_device" })

-- ---- managed memory ------------------------------------------------------------------------

count_rows("gpurun.managed", "managed", {}, 1)
dtype_rows("gpurun.managed", "managed", { 16 }, 2)
row("gpurun.managed", A(math.maxinteger), arg_error(1, "managed",
  "element count 9223372036854775807 too large for float32 (the byte size overflows size_t)"))
row("gpurun.managed", A(16, "float32", 5), arg_error(3, "managed", "table of options expected, got number"))
row("gpurun.managed", A(16, "float32", { nope = 1 }), arg_error(3, "managed", "unknown option 'nope' (known: attach)"))
row("gpurun.managed", A(16, "float32", { attach = "device" }),
  arg_error(3, "managed", 'option \'attach\' must be "global" or "host", got "device"'))
row("gpurun.managed", A(16, "float32", { attach = 1 }),
  arg_error(3, "managed", 'option \'attach\' must be "global" or "host", got 1'))
row("gpurun.managed", A(16), NO_DRIVER, { when = "no_driver" })
row("gpurun.managed", A(16), NO_DEVICE, { when = "no_device" })
-- More than any device has free: refused with the figures before the driver is asked.
row("gpurun.managed", A(1 << 46),
  P"gpurun%.managed: 256%.00 TiB for 70368744177664 float32 elements is more than device 0 has free %([%d.]+ %a+ free of [%d.]+ %a+%)",
  { gpu = true })
row("gpurun.managed", A(16), "cannot allocate a managed gpurun.Buffer while a graph is being built",
  { before = { "building" } })

local LOCATION = '"host", a gpurun.Device or a device ordinal expected, got '
local NOT_MANAGED = "the gpurun.Buffer is not managed memory (make it with gpurun.managed(n, dtype))"
row("Buffer:prefetch", A(R.buffer, "host", R.stream), "Buffer:prefetch: " .. NOT_MANAGED)
row("Buffer:prefetch", A(R.managed), arg_error(1, "prefetch", LOCATION .. "no value"))
row("Buffer:prefetch", A(R.managed, "device", R.stream), arg_error(1, "prefetch", LOCATION .. '"device"'))
row("Buffer:prefetch", A(R.managed, 0.5, R.stream), arg_error(1, "prefetch", LOCATION .. "0.5"))
row("Buffer:prefetch", A(R.managed, {}, R.stream), arg_error(1, "prefetch", LOCATION .. "table"))
row("Buffer:prefetch", A(R.managed, -1, R.stream),
  P"bad argument #1 to 'prefetch' %(device %-1 not found: %d+ device%(s%) visible %(the host is \"host\"%)%)")
row("Buffer:prefetch", A(R.managed, 1 << 20, R.stream),
  P"bad argument #1 to 'prefetch' %(device 1048576 not found: %d+ device%(s%) visible")
row("Buffer:prefetch", A(R.managed, R.closed_device, R.stream), "attempt to use a closed gpurun.Device")
row("Buffer:prefetch", A(R.managed, "host"), arg_error(2, "prefetch", "gpurun.Stream expected, got no value"))
row("Buffer:prefetch", A(R.managed, "host", R.event), arg_error(2, "prefetch", "gpurun.Stream expected, got gpurun.Event"))
row("Buffer:prefetch", A(R.managed, "host", R.builder), arg_error(2, "prefetch",
  "a prefetch goes on a gpurun.Stream, not in a graph: prefetch before begin_building or after end_building"))
row("Buffer:prefetch", A(R.managed, "host", R.closed_stream), "attempt to use a closed gpurun.Stream")

local ADVICE = "advice expected (set_read_mostly, unset_read_mostly, set_preferred_location, "
  .. "unset_preferred_location, set_accessed_by, unset_accessed_by), got "
row("Buffer:advise", A(R.buffer, "set_read_mostly"), "Buffer:advise: " .. NOT_MANAGED)
row("Buffer:advise", A(R.managed), arg_error(1, "advise", ADVICE .. "no value"))
row("Buffer:advise", A(R.managed, "read_mostly"), arg_error(1, "advise", ADVICE .. '"read_mostly"'))
row("Buffer:advise", A(R.managed, 1), arg_error(1, "advise", ADVICE .. "1"))
row("Buffer:advise", A(R.managed, "set_preferred_location"), arg_error(2, "advise",
  "advice 'set_preferred_location' is about a location: pass \"host\", a gpurun.Device or a device ordinal"))
row("Buffer:advise", A(R.managed, "set_accessed_by", nil), arg_error(2, "advise",
  "advice 'set_accessed_by' is about a location: pass \"host\", a gpurun.Device or a device ordinal"))
row("Buffer:advise", A(R.managed, "set_accessed_by", "nowhere"), arg_error(2, "advise", LOCATION .. '"nowhere"'))
row("Buffer:advise", A(R.managed, "set_read_mostly", R.stream), arg_error(2, "advise", LOCATION .. "gpurun.Stream"))

for _, method in ipairs({ "get", "set" }) do
  local label = "PinnedBuffer:" .. method
  local function index_error(what) return arg_error(1, method, what) end
  local function args(index) return method == "get" and A(R.pinned, index) or A(R.pinned, index, 1) end
  row(label, method == "get" and A(R.pinned) or A(R.pinned, nil, 1),
    index_error("integer element index expected, got " .. (method == "get" and "no value" or "nil")))
  row(label, args(0), index_error("element index 0 out of range (1..16)"))
  row(label, args(17), index_error("element index 17 out of range (1..16)"))
  row(label, args(math.maxinteger), index_error("element index 9223372036854775807 out of range (1..16)"))
  row(label, args(1.5), index_error("integer element index expected, got 1.5"))
  row(label, args(NAN), P(("bad argument #1 to '%s' %%(integer element index expected, got %s%%)"):format(label, NAN_TEXT)))
  row(label, args("1"), index_error("integer element index expected, got string"))
end
row("PinnedBuffer:set", A(R.pinned, 1), arg_error(2, "set", "number expected, got no value"))
row("PinnedBuffer:set", A(R.pinned, 1, "x"), arg_error(2, "set", "number expected, got string"))
row("PinnedBuffer:set", A(R.pinned, 1, 1e39), arg_error(2, "set", "1e+39 out of range for float32"))
row("PinnedBuffer:set", A(R.pinned_u8, 1, 256), arg_error(2, "set", "256 out of range for uint8 (0..255)"))
row("PinnedBuffer:set", A(R.pinned_i32, 1, 0.5), arg_error(2, "set", "integer expected for int32, got 0.5"))
row("PinnedBuffer:fill", A(R.pinned), arg_error(1, "fill", "number expected, got no value"))
row("PinnedBuffer:fill", A(R.pinned, "1"), arg_error(1, "fill", "number expected, got string"))
row("PinnedBuffer:fill", A(R.pinned_u8, -1), arg_error(1, "fill", "-1 out of range for uint8 (0..255)"))
row("PinnedBuffer:copy_from", A(R.pinned), arg_error(1, "copy_from", "table or string expected, got no value"))
row("PinnedBuffer:copy_from", A(R.pinned, 5), arg_error(1, "copy_from", "table or string expected, got number"))
row("PinnedBuffer:copy_from", A(R.pinned, R.buffer), arg_error(1, "copy_from", "table or string expected, got gpurun.Buffer"))
row("PinnedBuffer:copy_from", A(R.pinned, { 1, 2 }), arg_error(1, "copy_from", "table of 16 elements expected, got 2"))
row("PinnedBuffer:copy_from", A(R.pinned, { 1, 2 }, 1, 3), arg_error(1, "copy_from", "table of 3 elements expected, got 2"))
row("PinnedBuffer:copy_from", A(R.pinned, { 1, 2 }, 16), arg_error(2, "copy_from", "2 elements from element 16 run past the last (16)"))
row("PinnedBuffer:copy_from", A(R.pinned, sixteen_strings), arg_error(1, "copy_from", "element 1: number expected, got string"))
row("PinnedBuffer:copy_from", A(R.pinned_u8, { 1, 2, 3, 256 }), arg_error(1, "copy_from", "element 4: 256 out of range for uint8 (0..255)"))
row("PinnedBuffer:copy_from", A(R.pinned, "abc"),
  arg_error(1, "copy_from", "string of 64 bytes (16 float32 elements) expected, got 3 bytes"))
row("PinnedBuffer:copy_from", A(R.pinned, "abcdefgh", 15, 1),
  arg_error(1, "copy_from", "string of 4 bytes (1 float32 elements) expected, got 8 bytes"))
range_rows("PinnedBuffer:copy_from", "copy_from", "pinned", { {} }, 2)
row("PinnedBuffer.__index", A(R.pinned, 0), arg_error(2, "__index", "element index 0 out of range (1..16)"))
row("PinnedBuffer.__index", A(R.pinned, 1.5), arg_error(2, "__index", "integer element index expected, got 1.5"))
row("PinnedBuffer.__newindex", A(R.pinned, "x", 1), "gpurun.PinnedBuffer: only elements can be set (p[i] = value), not string")
row("PinnedBuffer.__newindex", A(R.pinned, 0, 1), arg_error(2, "__newindex", "element index 0 out of range (1..16)"))
row("PinnedBuffer.__newindex", A(R.pinned, 1, "x"), arg_error(3, "__newindex", "number expected, got string"))
row("PinnedBuffer.__newindex", A(R.pinned_u8, 1, 300), arg_error(3, "__newindex", "300 out of range for uint8 (0..255)"))
row("PinnedBuffer.__newindex", A(R.closed_pinned, 1, 1), "attempt to use a closed gpurun.PinnedBuffer")
row("PinnedBuffer.__len", A(R.closed_pinned), "attempt to use a closed gpurun.PinnedBuffer")

-- ---- .npy files ------------------------------------------------------------------------------

row("gpurun.load", A(), arg_error(1, "load", "path string expected, got no value"))
row("gpurun.load", A(5), arg_error(1, "load", "path string expected, got number"))
row("gpurun.load", A({}), arg_error(1, "load", "path string expected, got table"))
row("gpurun.load", A(R.buffer), arg_error(1, "load", "path string expected, got gpurun.Buffer"))
row("gpurun.load", A("a\0b"), arg_error(1, "load", "path contains a NUL byte"))
row("gpurun.load", A("/nonexistent/x.npy"), "gpurun.load: cannot open /nonexistent/x.npy: No such file or directory")
row("gpurun.load", A("README.md"), "gpurun.load: README.md: not a .npy file (it does not start with \\x93NUMPY)")
local SAVE_PATH = os.tmpname() -- never written: each row fails before opening it
os.remove(SAVE_PATH)
row("Buffer:save", A(R.buffer), arg_error(1, "save", "path string expected, got no value"))
row("Buffer:save", A(R.buffer, 5), arg_error(1, "save", "path string expected, got number"))
row("Buffer:save", A(R.buffer, "a\0b"), arg_error(1, "save", "path contains a NUL byte"))
row("Buffer:save", A(R.buffer, "/nonexistent/dir/x.npy"),
  "Buffer:save: cannot open /nonexistent/dir/x.npy: No such file or directory")
row("Buffer:save", A(R.buffer, SAVE_PATH, { 5 }), arg_error(2, "save", "shape {5} holds 5 elements, the buffer 16"))
row("Buffer:save", A(R.buffer, SAVE_PATH, { 4, 4.5 }),
  arg_error(2, "save", "dimension 2 of the shape is not a non-negative integer"))
row("Buffer:save", A(R.buffer, SAVE_PATH, 16), arg_error(2, "save", "shape table expected, got number"))
row("Buffer:save", A(R.view, SAVE_PATH, { 16 }), arg_error(2, "save", "shape {16} holds 16 elements, the buffer 8"))
row("Buffer:save", A(R.orphan_view, SAVE_PATH), "attempt to use a closed gpurun.Buffer")

-- ---- device generators -----------------------------------------------------------------------

row("gpurun.device_rng", A(), arg_error(1, "device_rng", "integer seed expected, got no value"))
row("gpurun.device_rng", A(nil), arg_error(1, "device_rng", "integer seed expected, got nil"))
row("gpurun.device_rng", A("1"), arg_error(1, "device_rng", "integer seed expected, got string"))
row("gpurun.device_rng", A(R.rng), arg_error(1, "device_rng", "integer seed expected, got gpurun.Generator"))
row("gpurun.device_rng", A(1.5), arg_error(1, "device_rng", "integer seed expected, got 1.5"))
row("gpurun.device_rng", A(NAN), P("integer seed expected, got " .. NAN_TEXT))
row("gpurun.device_rng", A(INF), arg_error(1, "device_rng", "integer seed expected, got inf"))
row("gpurun.device_rng", A(1), NO_DEVICE, { when = "no_device" })
row("gpurun.device_rng", A(1), NO_DRIVER, { when = "no_driver" })

local FILLS = { random = {}, uniform = { 0, 1 }, normal = { 0, 1 }, integers = { 0, 10 } }
for _, method in ipairs({ "random", "uniform", "normal", "integers" }) do
  local label, at = "DeviceGenerator:" .. method, #FILLS[method] + 2
  local function with(first, ...)
    local args = A(R.drng, first, table.unpack(FILLS[method]))
    for i = 1, select("#", ...) do args[args.n + i] = select(i, ...) end
    args.n = args.n + select("#", ...)
    return args
  end
  for _, count in ipairs({ 0, -1, 1.5, "16", {} }) do
    row(label, with(count, nil, { stream = R.stream }),
      arg_error(1, method, "gpurun.Buffer or positive element count expected, got "
        .. (type(count) == "number" and tostring(count) or type(count))))
  end
  row(label, with(16, "float8", { stream = R.stream }), arg_error(at, method, "unknown dtype 'float8' " .. DTYPE_LIST))
  row(label, with(16, 4, { stream = R.stream }), arg_error(at, method, "dtype name expected, got number"))
  row(label, with(16, nil, { strem = R.stream }), "unknown option 'strem' (known: stream)")
  row(label, with(16, nil, { stream = 3 }),
    "options.stream must be a gpurun.Stream or gpurun.GraphBuilder, got number")
  row(label, with(16, nil, "fast"), "options table expected, got string")
  row(label, with(R.closed_buffer, nil, { stream = R.stream }), "attempt to use a closed gpurun.Buffer")
  row(label, with(16, nil, { stream = R.building }), "pass the buffer to fill on a gpurun.GraphBuilder")
end
local FLOAT_ONLY = "float dtype (float32, float64, float16, bfloat16) expected, got int32 (integers() makes integer buffers)"
row("DeviceGenerator:random", A(R.drng, 16, "int32", { stream = R.stream }), arg_error(2, "random", FLOAT_ONLY))
row("DeviceGenerator:random", A(R.drng, R.buffer_i32, { stream = R.stream }), arg_error(1, "random", FLOAT_ONLY))
row("DeviceGenerator:random", A(R.drng, R.buffer, "float64", { stream = R.stream }),
  arg_error(2, "random", "dtype float64 does not match the buffer's, float32"))
row("DeviceGenerator:integers", A(R.drng, R.buffer, 0, 4, { stream = R.stream }),
  arg_error(1, "integers", "integer dtype expected, got float32 (random() makes float buffers)"))
row("DeviceGenerator:uniform", A(R.drng, 16, "0", 1), arg_error(2, "uniform", "number expected for low, got string"))
row("DeviceGenerator:uniform", A(R.drng, 16, 0, INF), arg_error(3, "uniform", "high must be finite, got inf"))
row("DeviceGenerator:uniform", A(R.drng, 16, NAN, 1), P("low must be finite, got " .. NAN_TEXT))
row("DeviceGenerator:uniform", A(R.drng, 16, 1, 1),
  arg_error(3, "uniform", "high (1) must be greater than low (1), with high - low finite"))
row("DeviceGenerator:uniform", A(R.drng, 16, -1e308, 1e308), "with high - low finite")
row("DeviceGenerator:uniform", A(R.drng, 16, 0, 70000, "float16"),
  arg_error(3, "uniform", "range [0, 70000) does not fit float16 (largest 65504)"))
row("DeviceGenerator:normal", A(R.drng, 16, 0, -1), arg_error(3, "normal", "std must be 0 or more, got -1"))
row("DeviceGenerator:normal", A(R.drng, 16, INF, 1), arg_error(2, "normal", "mean must be finite, got inf"))
row("DeviceGenerator:normal", A(R.drng, 16, 0, {}), arg_error(3, "normal", "number expected for std, got table"))
row("DeviceGenerator:integers", A(R.drng, 16, {}, 1), arg_error(2, "integers", "number expected, got table"))
row("DeviceGenerator:integers", A(R.drng, 16, 0, 1.5), arg_error(3, "integers", "number has no integer representation"))
row("DeviceGenerator:integers", A(R.drng, 16, 5, 5), arg_error(3, "integers", "high (5) must be greater than low (5)"))
row("DeviceGenerator:integers", A(R.drng, 16, 0, 300, "uint8"),
  arg_error(3, "integers", "range [0, 300) does not fit uint8 (0..255)"))
row("DeviceGenerator:integers", A(R.drng, 16, -1, 10, "uint32"), "range [-1, 10) does not fit uint32")
row("DeviceGenerator:set_state", A(R.drng, 3),
  arg_error(1, "set_state", "table { seed =, offset =, stream = } expected, got number"))
row("DeviceGenerator:set_state", A(R.drng, {}), arg_error(1, "set_state", "integer seed expected, got nil"))
row("DeviceGenerator:set_state", A(R.drng, { seed = 1.5 }), arg_error(1, "set_state", "integer seed expected, got 1.5"))
row("DeviceGenerator:set_state", A(R.drng, { sed = 1 }), "unknown option 'sed' (known: seed, offset, stream)")
row("DeviceGenerator:set_state", A(R.drng, { seed = 1, offset = -1 }),
  arg_error(1, "set_state", "offset must be an integer of 0 or more, got -1"))
row("DeviceGenerator:set_state", A(R.drng, { seed = 1, stream = "s" }),
  arg_error(1, "set_state", "stream must be a gpurun.Stream or gpurun.GraphBuilder, got string"))
row("DeviceGenerator:get_state", A(R.drng, 5), arg_error(1, "get_state", "options table expected, got number"))
row("DeviceGenerator:get_state", A(R.drng, { nope = 1 }), "unknown option 'nope' (known: stream)")
row("DeviceGenerator:get_state", A(R.drng, { stream = R.building }),
  "options.stream must be a gpurun.Stream (the state is read now, so it cannot be captured), got gpurun.GraphBuilder")

-- ---- memory pools and stream-ordered buffers ---------------------------------------------

-- The constructors' { pool =, stream = } options, at argument `at`.
local PLACED = {
  { "gpurun.empty", "empty", { 16, "float32" }, 3 },
  { "gpurun.zeros", "zeros", { 16, "float32" }, 3 },
  { "gpurun.full", "full", { 16, 1, "float32" }, 4 },
  { "gpurun.array", "array", { { 1, 2 }, "float32" }, 3, host_data = true },
  { "Generator:random", "random", { R.rng, 16, "float32" }, 3, host_data = true },
  { "Generator:integers", "integers", { R.rng, 16, 0, 10, "int32" }, 5, host_data = true },
}

-- A row's call of the constructor with options(env) last.
local function placed(case, options)
  local label, name, before = case[1], case[2], case[3]
  return function(env)
    local args = {}
    for i, value in ipairs(before) do
      args[i] = type(value) == "table" and rawget(value, "ref") and env[value.ref] or value
    end
    args[#args + 1] = options(env)
    if label:find(":", 1, true) then
      return args[1][name](table.unpack(args, 1, #args))
    end
    return gpurun[name](table.unpack(args, 1, #args))
  end
end

for _, case in ipairs(PLACED) do
  local label, name, before, at = case[1], case[2], case[3], case[4]
  local function args(options)
    local list = A(table.unpack(before))
    list[list.n + 1], list.n = options, list.n + 1
    return list
  end
  row(label, args(5), arg_error(at, name, "table of options expected, got number"))
  row(label, args("pool"), arg_error(at, name, "table of options expected, got string"))
  row(label, args({ nope = 1 }), arg_error(at, name, "unknown option 'nope' (known: pool, stream)"))
  row(label, args({ [1] = true }), arg_error(at, name, "unknown option: a number key (known: pool, stream)"))
  row(label, args({ pool = 5 }), arg_error(at, name, "option 'pool' must be a gpurun.MemoryPool, got number"))
  row(label, args({ pool = {} }), arg_error(at, name, "option 'pool' must be a gpurun.MemoryPool, got table"))
  row(label, args({ stream = "s" }),
    arg_error(at, name, "option 'stream' must be a gpurun.Stream or a gpurun.GraphBuilder, got string"))
  local function gpu_row(options, expected)
    row(label, nil, expected, { gpu = true, call = placed(case, options) })
  end
  gpu_row(function(env) return { pool = env.closed_pool } end, "attempt to use a closed gpurun.MemoryPool")
  gpu_row(function(env) return { stream = env.closed_stream } end, "attempt to use a closed gpurun.Stream")
  gpu_row(function(env) return { pool = env.stream } end,
    arg_error(at, name, "option 'pool' must be a gpurun.MemoryPool, got gpurun.Stream"))
  gpu_row(function(env) return { stream = env.pool } end,
    arg_error(at, name, "option 'stream' must be a gpurun.Stream or a gpurun.GraphBuilder, got gpurun.MemoryPool"))
  gpu_row(function(env) return { pool = env.pool } end,
    "a buffer from a memory pool is allocated in order on a stream: pass { stream = s }")
  gpu_row(function(env) return { stream = env.building.stream } end,
    "the stream is being captured by a GraphBuilder: pass the builder as the stream")
  if case.host_data then
    gpu_row(function(env) return { stream = env.building } end,
      arg_error(at, name, "option 'stream' cannot be a GraphBuilder here: the host data is copied "
        .. "when the call is made, not at each replay (make the buffer before begin_building)"))
  else
    gpu_row(function(env) return { stream = env.builder } end,
      "GraphBuilder is not building (it is idle): call begin_building() first")
    gpu_row(function(env) return { stream = env.built } end, "GraphBuilder is not building (it is built)")
  end
end

row("gpurun.empty", nil, "a conditional body's graph cannot allocate memory", { gpu = true,
  call = function(env)
    local body = env.body
    body:begin_building()
    return gpurun.empty(16, "float32", { stream = body })
  end })
row("gpurun.empty", nil, P"gpurun%.MemoryPool%(device %d+, max 64%.00 MiB%): out of memory allocating 128%.00 MiB for 33554432 float32 elements in the graph being built: 64%.00 MiB of its 64%.00 MiB maximum left",
  { gpu = true, call = function(env)
    return gpurun.empty(1 << 25, "float32", { pool = env.small_pool, stream = env.building })
  end })
row("gpurun.zeros", nil, P"gpurun%.MemoryPool%(device %d+, max 64%.00 MiB%): out of memory allocating 128%.00 MiB for 33554432 float32 elements: ",
  { gpu = true, call = function(env)
    return gpurun.zeros(1 << 25, "float32", { pool = env.small_pool, stream = env.stream })
  end })
row("gpurun.empty", A(16), "cannot allocate a gpurun.Buffer while a graph is being built (allocate before "
  .. "begin_building, or pass { stream = builder } to allocate inside the graph)", { before = { "building" } })

-- ---- sharing between processes ---------------------------------------------------

-- A descriptor as Buffer:ipc_descriptor lays one out (base/ipc_descriptor.c),
-- with the fields a row changes.
local function descriptor(fields)
  fields = fields or {}
  return string.pack("<c8I2I2I4I4I4c16I8I8c64", fields.magic or "gpurunIP", fields.version or 1,
    fields.kind or 2, fields.length or 120, fields.device or 0, fields.dtype or 0,
    ("\0"):rep(16), fields.count or 4, fields.bytes or 16, ("\0"):rep(64))
end
local BUFFER_DESCRIPTOR, EVENT_DESCRIPTOR = descriptor(), descriptor({ kind = 3 })
local POOL_DESCRIPTOR = descriptor({ kind = 1 })
local BAD_DESCRIPTORS = {
  { "abc", "bad IPC descriptor: not a gpurun IPC descriptor (3 bytes without its magic)" },
  { BUFFER_DESCRIPTOR:sub(1, 40), "bad IPC descriptor: truncated: 40 of 120 bytes" },
  { BUFFER_DESCRIPTOR:sub(1, 12), "bad IPC descriptor: truncated: 12 of 120 bytes" },
  { descriptor({ magic = "cudaIPC!" }), "bad IPC descriptor: not a gpurun IPC descriptor (120 bytes without its magic)" },
  { descriptor({ version = 2 }), "bad IPC descriptor: descriptor version 2, this gpurun reads version 1" },
  { descriptor({ length = 0xffffffff }), "bad IPC descriptor: its length field says 4294967295 bytes, a version 1 descriptor has 120" },
  { BUFFER_DESCRIPTOR .. "x", "bad IPC descriptor: trailing bytes: 121 of 120 bytes" },
  { descriptor({ kind = 9 }), "bad IPC descriptor: unknown descriptor kind 9" },
  { descriptor({ device = 0x80000000 }), "bad IPC descriptor: device 2147483648 out of range" },
}
for _, case in ipairs(BAD_DESCRIPTORS) do
  row("gpurun.Buffer.from_ipc", A(case[1]), arg_error(1, "from_ipc", case[2]))
  row("gpurun.Event.from_ipc", A(case[1]), arg_error(1, "from_ipc", case[2]))
end
row("gpurun.Buffer.from_ipc", A(), arg_error(1, "from_ipc", "string (an IPC descriptor) expected, got no value"))
row("gpurun.Buffer.from_ipc", A(R.buffer), arg_error(1, "from_ipc", "string (an IPC descriptor) expected, got gpurun.Buffer"))
row("gpurun.Buffer.from_ipc", A(EVENT_DESCRIPTOR), arg_error(1, "from_ipc",
  "IPC descriptor of a buffer expected, got one of a event"))
row("gpurun.Buffer.from_ipc", A(BUFFER_DESCRIPTOR), NO_DRIVER, { when = "no_driver" })
-- The message goes on with the count of devices visible, which the host decides.
row("gpurun.Buffer.from_ipc", A(descriptor({ device = 63 })),
  "bad argument #1 to 'gpurun.Buffer.from_ipc' (the descriptor names CUDA device 63: ", { gpu = true })
row("gpurun.Buffer.from_ipc", A(BUFFER_DESCRIPTOR, 5), arg_error(2, "from_ipc",
  "gpurun.MemoryPool (imported with gpurun.MemoryPool.from_allocation_handle) expected, got number"), { gpu = true })
row("gpurun.Buffer.from_ipc", A(BUFFER_DESCRIPTOR, R.closed_pool), "attempt to use a closed gpurun.MemoryPool", { gpu = true })
row("gpurun.Buffer.from_ipc", A(BUFFER_DESCRIPTOR, R.pool), arg_error(2, "from_ipc",
  "gpurun.MemoryPool(device 0) is not an imported pool: import the exporter's pool with "
  .. "gpurun.MemoryPool.from_allocation_handle"), { gpu = true })
row("gpurun.Event.from_ipc", A(), arg_error(1, "from_ipc", "string (an IPC descriptor) expected, got no value"))
row("gpurun.Event.from_ipc", A(BUFFER_DESCRIPTOR), arg_error(1, "from_ipc",
  "IPC descriptor of a event expected, got one of a buffer"))
row("gpurun.Event.from_ipc", A(EVENT_DESCRIPTOR), NO_DRIVER, { when = "no_driver" })
row("gpurun.Event.from_ipc", A(descriptor({ kind = 3, device = 63 })),
  "bad argument #1 to 'gpurun.Event.from_ipc' (the descriptor names CUDA device 63: ", { gpu = true })

row("gpurun.IPCAllocationHandle", A(), arg_error(1, "IPCAllocationHandle", "a file descriptor (an integer) expected, got no value"))
row("gpurun.IPCAllocationHandle", A(1.5), arg_error(1, "IPCAllocationHandle", "a file descriptor (an integer) expected, got 1.5"))
row("gpurun.IPCAllocationHandle", A(-1), arg_error(1, "IPCAllocationHandle", "-1 is not an open file descriptor"))
row("gpurun.IPCAllocationHandle", A(1 << 40), arg_error(1, "IPCAllocationHandle", "1099511627776 is not an open file descriptor"))
row("gpurun.IPCAllocationHandle", A(2, 5), arg_error(2, "IPCAllocationHandle", "string (a pool's descriptor) or nil expected, got number"))
row("gpurun.MemoryPool.from_allocation_handle", A(), arg_error(1, "from_allocation_handle",
  "gpurun.IPCAllocationHandle expected, got no value"))
row("gpurun.MemoryPool.from_allocation_handle", A(R.closed_handle), "attempt to use a closed gpurun.IPCAllocationHandle")
row("gpurun.MemoryPool.from_allocation_handle", A(R.handle), arg_error(2, "from_allocation_handle",
  "the handle carries no descriptor: pass the pool's descriptor (from the exporter's handle.descriptor)"))
row("gpurun.MemoryPool.from_allocation_handle", A(R.handle, "xyz"), arg_error(2, "from_allocation_handle",
  "bad IPC descriptor: not a gpurun IPC descriptor (3 bytes without its magic)"))
row("gpurun.MemoryPool.from_allocation_handle", A(R.handle, BUFFER_DESCRIPTOR), arg_error(2,
  "from_allocation_handle", "IPC descriptor of a pool expected, got one of a buffer"))
row("gpurun.MemoryPool.from_allocation_handle", A(R.handle, POOL_DESCRIPTOR), NO_DRIVER, { when = "no_driver" })

-- gpurun.ipc: every wait ends at the timeout; a path that is no socket is refused.
local NO_SOCKET = os.tmpname() .. ".no-such-socket"
local NOT_A_SOCKET = os.tmpname() -- a plain file
local LONG_PATH = "/tmp/" .. ("x"):rep(200)
local SHORT = { timeout = 0.05 }
for _, name in ipairs({ "send", "receive" }) do
  local label = "gpurun.ipc." .. name
  local function after_path(...) if name == "send" then return {}, ... end return ... end
  row(label, A(), arg_error(1, name, "socket path (a non-empty string) expected, got nil"))
  row(label, A(""), arg_error(1, name, "socket path (a non-empty string) expected, got an empty string"))
  row(label, A(5), arg_error(1, name, "socket path (a non-empty string) expected, got number"))
  row(label, A("a\0b"), arg_error(1, name, "socket path contains a NUL byte"))
  local at = name == "send" and 3 or 2
  row(label, A(NO_SOCKET, after_path(5)), arg_error(at, name, "options table expected, got number"))
  local prefix = ("bad argument #%d to '%s' ("):format(at, name)
  row(label, A(NO_SOCKET, after_path({ nope = 1 })), prefix .. "unknown option 'nope' (known: ")
  for _, timeout in ipairs({ 0, -1, NAN, INF, "1", 1e9 }) do
    row(label, A(NO_SOCKET, after_path({ timeout = timeout })), prefix
      .. "option 'timeout' must be a number of seconds above 0 and at most 86400, got ")
  end
  row(label, A(LONG_PATH, after_path(SHORT)), "a Unix socket's path has 1 to 107")
end
row("gpurun.ipc.send", A(NO_SOCKET, 5), arg_error(2, "send",
  "sequence of strings, pools and allocation handles expected, got number"))
row("gpurun.ipc.send", A(NO_SOCKET, { 5 }, SHORT), arg_error(2, "send",
  "value 1: string, gpurun.MemoryPool or gpurun.IPCAllocationHandle expected, got number"))
row("gpurun.ipc.send", A(NO_SOCKET, { R.handle }, SHORT), arg_error(2, "send",
  "value 1: the allocation handle carries no descriptor"))
row("gpurun.ipc.send", A(NO_SOCKET, { R.closed_handle }, SHORT), "attempt to use a closed gpurun.IPCAllocationHandle")
row("gpurun.ipc.send", A(NO_SOCKET, { "x" }, SHORT), "gpurun.ipc.send: no receiver at '" .. NO_SOCKET
  .. "' within 0.05 s (no such socket)")
row("gpurun.ipc.receive", A(NO_SOCKET, SHORT), "gpurun.ipc.receive: no sender connected to '" .. NO_SOCKET
  .. "' within 0.05 s")
row("gpurun.ipc.receive", A(NOT_A_SOCKET, SHORT), "exists and is not a socket")
row("gpurun.ipc.receive", A(NO_SOCKET, { import = 1 }), arg_error(2, "receive", "option 'import' must be a boolean, got number"))
row("gpurun.ipc.receive", A(NO_SOCKET, { max_bytes = 3 }), arg_error(2, "receive",
  "option 'max_bytes' must be an integer from 14 to 4294967295, got 3"))

row("gpurun.MemoryPool", A(5), arg_error(1, "MemoryPool", "table of options expected, got number"))
row("gpurun.MemoryPool", A("big"), arg_error(1, "MemoryPool", "table of options expected, got string"))
row("gpurun.MemoryPool", A({ nope = 1 }),
  arg_error(1, "MemoryPool", "unknown option 'nope' (known: device, release_threshold, max_size, ipc)"))
row("gpurun.MemoryPool", A({ ipc = "yes" }), arg_error(1, "MemoryPool", "option 'ipc' must be a boolean, got string"))
row("gpurun.MemoryPool", A({ maxsize = 1 }), "unknown option 'maxsize'")
row("gpurun.MemoryPool", A({ max_size = -1 }), arg_error(1, "MemoryPool",
  "option 'max_size' must be a non-negative integer number of bytes (0: the driver's limit), got -1"))
row("gpurun.MemoryPool", A({ max_size = 1.5 }),
  arg_error(1, "MemoryPool", "option 'max_size' must be a non-negative integer number of bytes, got 1.5"))
row("gpurun.MemoryPool", A({ max_size = "1" }),
  arg_error(1, "MemoryPool", "option 'max_size' must be a non-negative integer number of bytes, got string"))
row("gpurun.MemoryPool", A({ max_size = NAN }), P("option 'max_size' must be a non%-negative integer number of bytes, got " .. NAN_TEXT))
row("gpurun.MemoryPool", A({ release_threshold = -1 }), arg_error(1, "MemoryPool",
  "option 'release_threshold' must be a non-negative integer number of bytes or math.huge, got -1"))
row("gpurun.MemoryPool", A({ release_threshold = 0.5 }), "option 'release_threshold' must be a non-negative "
  .. "integer number of bytes or math.huge, got 0.5")
row("gpurun.MemoryPool", A({ release_threshold = -INF }), "or math.huge, got -inf")
row("gpurun.MemoryPool", A({ release_threshold = true }), "or math.huge, got boolean")
row("gpurun.MemoryPool", A({ device = "x" }),
  arg_error(1, "MemoryPool", "option 'device' must be a gpurun.Device or a device ordinal, got string"))
row("gpurun.MemoryPool", A({ device = 1.5 }), "option 'device' must be a gpurun.Device or a device ordinal, got 1.5")
row("gpurun.MemoryPool", A({ device = {} }), "option 'device' must be a gpurun.Device or a device ordinal, got table")
row("gpurun.MemoryPool", A(), NO_DEVICE, { when = "no_device" })
row("gpurun.MemoryPool", A(), NO_DRIVER, { when = "no_driver" })
row("gpurun.MemoryPool", A({ device = 0 }), NO_DRIVER, { when = "no_driver" })
row("gpurun.MemoryPool", A({ device = 99 }), P"option 'device': CUDA device 99 not found: %d+ device%(s%) visible",
  { gpu = true })
row("gpurun.MemoryPool", A({ device = -1 }), "option 'device': CUDA device -1 not found", { gpu = true })
row("gpurun.MemoryPool", nil, "attempt to use a closed gpurun.Device", { gpu = true,
  call = function(env) return gpurun.MemoryPool({ device = env.closed_device }) end })

row("MemoryPool:trim", A(R.pool, "x"), arg_error(1, "trim", "integer number of bytes expected, got string"))
row("MemoryPool:trim", A(R.pool, 1.5), arg_error(1, "trim", "integer number of bytes expected, got 1.5"))
row("MemoryPool:trim", A(R.pool, {}), arg_error(1, "trim", "integer number of bytes expected, got table"))
row("MemoryPool:trim", A(R.pool, -1),
  arg_error(1, "trim", "a non-negative number of bytes to keep expected, got -1"))
row("MemoryPool:close", nil, P"MemoryPool:close: gpurun%.MemoryPool%(device %d+%) has 1 buffer%(s%) from it still open; close them first",
  { gpu = true, call = function(env)
    local _ = env.pool_buffer
    return env.pool:close()
  end })
row("MemoryPool:close", nil, P"MemoryPool:close: gpurun%.MemoryPool%(device %d+, default%) has 1 buffer%(s%)",
  { gpu = true, call = function(env)
    local buffer = gpurun.empty(16, "float32", { stream = env.stream })
    local _, err = pcall(env.default_pool.close, env.default_pool)
    buffer:close()
    error(err, 0)
  end })

row("GraphBuilder:complete", A(R.built, 5), arg_error(1, "complete", "table of options expected, got number"))
row("GraphBuilder:complete", A(R.built, { nope = 1 }),
  arg_error(1, "complete", "unknown option 'nope' (known: auto_free_on_launch, check, device_launch, use_node_priority, upload_stream)"))
row("GraphBuilder:complete", A(R.built, { auto_free_on_launch = 1 }),
  arg_error(1, "complete", "option 'auto_free_on_launch' must be a boolean, got number"))
row("GraphBuilder:complete", A(R.built, { device_launch = "yes" }),
  arg_error(1, "complete", "option 'device_launch' must be a boolean, got string"))
row("GraphBuilder:complete", A(R.built, { upload_stream = 5 }),
  arg_error(1, "complete", "option 'upload_stream' must be a gpurun.Stream, got number"))
row("GraphBuilder:complete", A(R.built, { device_launch = true, auto_free_on_launch = true }),
  "GraphBuilder:complete: device_launch and auto_free_on_launch cannot be combined")
row("GraphBuilder:complete", nil, "attempt to use a closed gpurun.Stream", { gpu = true,
  call = function(env) return env.built:complete({ upload_stream = env.closed_stream }) end })
row("GraphBuilder:complete", nil, "the stream is being captured by a GraphBuilder", { gpu = true,
  call = function(env)
    local built = env.built
    return built:complete({ upload_stream = env.building.stream })
  end })
row("GraphBuilder:complete", nil, "GraphBuilder:complete: a graph for device launch needs a kernel, memcpy "
  .. "or memset node; this one has none", { gpu = true, call = function(env)
    local builder = env.stream:create_graph_builder()
    builder:begin_building()
    return builder:end_building():complete({ device_launch = true })
  end })
row("GraphBuilder:complete", nil, P("GraphBuilder:complete: a graph for device launch holds only kernel, "
  .. "memcpy and memset nodes; node %d is a host node"), { gpu = true, call = function(env)
    local buffer, callback = env.buffer, gpurun.HostCallback(function() end)
    local builder = env.stream:create_graph_builder()
    builder:begin_building()
    buffer:fill(1, builder)
    callback:launch(builder)
    return builder:end_building():complete({ device_launch = true })
  end })
row("GraphBuilder:complete", nil, "GraphBuilder:complete: a graph for device launch cannot hold conditional "
  .. "nodes", { gpu = true, call = function(env)
    local buffer = env.buffer
    local builder = env.stream:create_graph_builder()
    builder:begin_building()
    local body = builder:if_then(builder:create_condition(1))
    body:begin_building()
    buffer:fill(1, body)
    body:end_building()
    return builder:end_building():complete({ device_launch = true })
  end })

-- A Graph as a kernel argument: vec_add's parameter 4 is an 8-byte integer.
local LAUNCHED_GRAPH = "kernel 'vec_add' parameter 4 (.u64): "
row("gpurun.launch", A(R.stream, R.config, R.add, R.buffer, R.buffer, R.buffer, R.device_graph),
  LAUNCHED_GRAPH .. "a gpurun.Graph passes only in a launch on a GraphBuilder: a kernel launches a "
  .. "graph only while it runs in a graph")
row("gpurun.launch", A(R.building, R.config, R.add, R.buffer, R.buffer, R.buffer, R.graph),
  LAUNCHED_GRAPH .. "the gpurun.Graph was not completed for device launch: complete it with "
  .. "{ device_launch = true }")
row("gpurun.launch", A(R.building, R.config, R.add, R.buffer, R.buffer, R.buffer, R.device_graph_not_uploaded),
  LAUNCHED_GRAPH .. "the gpurun.Graph is not on the device yet: upload it first")
row("gpurun.launch", A(R.building, R.config, R.add, R.buffer, R.buffer, R.buffer, R.closed_graph),
  LAUNCHED_GRAPH .. "attempt to use a closed gpurun.Graph")
row("gpurun.launch", A(R.building, R.config, R.scale, R.buffer, R.device_graph, 1, 16),
  "kernel 'scale_shift' parameter 2 (.f32): a gpurun.Graph passes as an 8-byte integer (cudaGraphExec_t)")
row("gpurun.launch", A(R.building, R.config, R.scale, R.buffer, 1.5, R.device_graph, 16),
  "kernel 'scale_shift' parameter 3 (.u32): a gpurun.Graph passes as an 8-byte integer (cudaGraphExec_t)")
row("Kernel:check_argument", A(R.add, 4, R.device_graph),
  LAUNCHED_GRAPH .. "a gpurun.Graph passes only in a launch on a GraphBuilder")
row("Graph:close", nil, "cannot close a gpurun.Graph while 1 graph(s) or graph builder(s) launch it from "
  .. "the device: close them first", { gpu = true, call = function(env)
    local graph, config, add, buffer = env.device_graph, env.config, env.add, env.buffer
    local builder = env.building
    gpurun.launch(builder, config, add, buffer, buffer, buffer, graph)
    builder:end_building()
    return graph:close()
  end })

-- Buffers a graph's allocation node makes.
local function allocating_graph(env, options)
  local builder = env.builder
  builder:begin_building()
  local buffer = gpurun.empty(16, "float32", { stream = builder })
  buffer:fill(1.5, builder)
  builder:end_building()
  return builder:complete(options), buffer
end

row("Graph:launch", nil, "Graph:launch: 1 buffer(s) this graph allocated at its last launch (64 bytes) "
  .. "are still open, and a launch makes their memory anew: close them first, or complete the graph "
  .. "with { auto_free_on_launch = true }", { gpu = true, call = function(env)
    local graph = allocating_graph(env)
    graph:launch(env.stream)
    return graph:launch(env.stream)
  end })
row("Buffer:to_table", nil, "gpurun.Buffer belongs to a graph that has not been launched yet", { gpu = true,
  call = function(env)
    local _, buffer = allocating_graph(env)
    return buffer:to_table(env.stream)
  end })
row("gpurun.launch", nil, "gpurun.Buffer belongs to a graph that has not been launched yet", { gpu = true,
  call = function(env)
    local _, buffer = allocating_graph(env)
    return gpurun.launch(env.stream, env.config, env.add, buffer, buffer, buffer, gpurun.u64(16))
  end })
row("Buffer:fill", nil, "gpurun.Buffer was made inside a graph capture: it has memory only for that "
  .. "capture's work", { gpu = true, call = function(env)
    local other = env.other_stream -- made before the capture
    local buffer = gpurun.empty(16, "float32", { stream = env.building })
    return buffer:fill(1, other)
  end })
row("Buffer:to_table", nil, "gpurun.Buffer was made inside a graph capture", { gpu = true,
  call = function(env)
    local other = env.other_stream
    local buffer = gpurun.empty(16, "float32", { stream = env.building })
    return buffer:to_table(other)
  end })
row("Kernel:bind", nil, "gpurun.Buffer was made inside a graph capture", { gpu = true,
  call = function(env)
    local add, config = env.add, env.config
    local buffer = gpurun.empty(16, "float32", { stream = env.building })
    return add:bind(config, buffer, buffer, buffer, gpurun.u64(16))
  end })
row("Graph:update", nil, "Graph:update: a graph with memory allocation or free nodes cannot be updated",
  { gpu = true, call = function(env)
    local graph = allocating_graph(env)
    local other = env.other_stream:create_graph_builder()
    local add, config, buffer = env.add, env.config, env.buffer
    other:begin_building()
    gpurun.launch(other, config, add, buffer, buffer, buffer, gpurun.u64(16))
    other:end_building()
    return graph:update(other)
  end })

-- ---- functions that take nothing: junk arguments are ignored -----------------------------

local ACCEPTING = {
  perf_counter = function(r) return math.type(r[1]) == "float" end,
  device_count = function(r) return math.type(r[1]) == "integer" and r[1] >= 0 end,
  driver_error = function(r) return r[1] == nil or type(r[1]) == "string" end,
  nvrtc_version = function(r) return math.type(r[1]) == "integer" and math.type(r[2]) == "integer" end,
  cache_info = function(r) return type(r[1]) == "table" and type(r[1].enabled) == "boolean" end,
  clear_cache_counters = function(r) return r.n == 0 end,
  current_stream = function(r) return r[1] == nil or catalog.type_of(r[1]) == "Stream" end,
  ["fft.clear_cache"] = function(r) return r.n == 0 end,
}

-- ---- sequences that could crash or corrupt memory: each in a child process ---------------

-- Each prints one line: OK (it worked and nothing was corrupted) or RAISED
-- <message>; `accept` says which outcomes are right. A crash or a poisoned
-- context stays in the child. Prelude: gpurun, a device and the test kernels.
local CHILD_PRELUDE = [[
package.path = "./?.lua;" .. package.path
local gpurun = require("gpurun")
local function finish(ok, err) print(ok and "OK" or "RAISED " .. tostring(err)) os.exit(0) end
]]
local GPU_PRELUDE = [[
local device, _, kernel = require("spec.support.kernels").setup()
local stream = device:create_stream()
local n = 256
local config = gpurun.LaunchConfig({ grid = 1, block = n })
-- Buffers only the graph under test uses, dropped before it is replayed,
-- then memory handed out again: a graph that did not keep them writes
-- into freed memory (a fault, or another buffer's contents changed).
local function replay_after_collect(graph)
  collectgarbage(); collectgarbage()
  local fillers = {}
  for i = 1, 8 do fillers[i] = gpurun.full(n, 7, "float32") end
  local ok, err = pcall(function() graph:launch(stream); stream:sync() end)
  if not ok then finish(false, "REPLAY FAILED: " .. tostring(err)) end
  for i = 1, 8 do
    if not gpurun.allclose(fillers[i], 7, 0, 0) then finish(false, "REPLAY CORRUPTED another buffer") end
  end
  finish(true)
end
]]
local CAPTURE = P"[Cc][Aa][Pp][Tt][Uu][Rr]"
local child_rows = {
  { name = "Program:compile whose options table closes the program while it is read",
    label = "Program:compile", accept = { ok = true, raised = "attempt to use a closed gpurun.Program" },
    code = [[
local program = gpurun.Program('extern "C" __global__ void k() {}', "c++")
local hostile = setmetatable({}, { __index = function() program:close(); collectgarbage() end })
finish(pcall(program.compile, program, "ptx", hostile))
]] },
  { name = "GraphBuilder:complete after begin_building failed (its stream was captured by another)",
    label = "GraphBuilder:complete", gpu = true, accept = { ok = true, raised = "nothing built" },
    code = [[
local a = gpurun.zeros(n, "float32")
local first = stream:create_graph_builder()
first:begin_building()
gpurun.launch(first, config, kernel("vec_add"), a, a, a, gpurun.u64(n))
first:end_building()
local second = stream:create_graph_builder()
second:begin_building()
assert(not pcall(first.begin_building, first), "two captures began on one stream")
second:close()
finish(pcall(first.complete, first))
]] },
  { name = "gpurun.launch on the stream (not the builder) while a builder captures it",
    label = "gpurun.launch", gpu = true, accept = { ok = true, raised = CAPTURE },
    code = [[
local a, b, out = gpurun.full(n, 1, "float32"), gpurun.full(n, 2, "float32"), gpurun.zeros(n, "float32")
local builder = stream:create_graph_builder()
builder:begin_building()
local ok, err = pcall(gpurun.launch, stream, config, kernel("vec_add"), a, b, out, gpurun.u64(n))
if not ok then finish(false, err) end
builder:end_building()
local graph = builder:complete()
builder:close()
a, b, out = nil, nil, nil
replay_after_collect(graph)
]] },
  { name = "LaunchPlan:launch on the stream while a builder captures it",
    label = "LaunchPlan:launch", gpu = true, accept = { ok = true, raised = CAPTURE },
    code = [[
local a, out = gpurun.full(n, 1, "float32"), gpurun.zeros(n, "float32")
local plan = kernel("vec_add"):bind(config, a, a, out, gpurun.u64(n))
local builder = stream:create_graph_builder()
builder:begin_building()
local ok, err = pcall(plan.launch, plan, stream)
if not ok then finish(false, err) end
builder:end_building()
local graph = builder:complete()
builder:close()
a, out, plan = nil, nil, nil
replay_after_collect(graph)
]] },
  { name = "Graph:launch on a stream a builder captures, the inner graph closed afterwards",
    label = "Graph:launch", gpu = true, accept = { ok = true, raised = CAPTURE },
    code = [[
local a, out = gpurun.full(n, 1, "float32"), gpurun.zeros(n, "float32")
local inner_builder = stream:create_graph_builder()
inner_builder:begin_building()
gpurun.launch(inner_builder, config, kernel("vec_add"), a, a, out, gpurun.u64(n))
inner_builder:end_building()
local inner = inner_builder:complete()
inner_builder:close()
local builder = stream:create_graph_builder()
builder:begin_building()
local ok, err = pcall(inner.launch, inner, stream)
if not ok then finish(false, err) end
builder:end_building()
local graph = builder:complete()
builder:close()
inner:close()
a, out, inner = nil, nil, nil
replay_after_collect(graph)
]] },
  { name = "Buffer:close while a capture that writes it is in progress",
    label = "Buffer:close", gpu = true, accept = { ok = true, raised = P"[Gg]raph" },
    code = [[
local a, out = gpurun.full(n, 1, "float32"), gpurun.zeros(n, "float32")
local builder = stream:create_graph_builder()
builder:begin_building()
gpurun.launch(builder, config, kernel("vec_add"), a, a, out, gpurun.u64(n))
local ok, err = pcall(out.close, out)
if not ok then finish(false, err) end
builder:end_building()
local graph = builder:complete()
builder:close()
out = nil
replay_after_collect(graph)
]] },
  { name = "a graph that copies from a PinnedBuffer into a view, both dropped before the replay",
    label = "Buffer:copy_from", gpu = true, accept = { ok = true },
    code = [[
local base = gpurun.zeros(2 * n, "float32")
local view = base:view(n + 1, n)
local pinned = gpurun.pinned(n, "float32")
pinned:fill(5)
local builder = stream:create_graph_builder()
builder:begin_building()
view:copy_from(pinned, builder)
builder:end_building()
local graph = builder:complete()
builder:close()
base, view, pinned = nil, nil, nil
replay_after_collect(graph)
]] },
  { name = "Buffer:close of a base while a graph launches a view of it",
    label = "Buffer:close", gpu = true, accept = { ok = true, raised = "gpurun.Buffer is used by" },
    code = [[
local base = gpurun.zeros(2 * n, "float32")
local ones = gpurun.full(n, 1, "float32")
local builder = stream:create_graph_builder()
builder:begin_building()
gpurun.launch(builder, config, kernel("vec_add"), ones, ones, base:view(n + 1), gpurun.u64(n))
builder:end_building()
local graph = builder:complete()
builder:close()
local ok, err = pcall(base.close, base)
if not ok then finish(false, err) end
base = nil
replay_after_collect(graph)
]] },
  { name = "ObjectCode:close while a capture that launches its kernel is in progress",
    label = "ObjectCode:close", gpu = true, accept = { ok = true, raised = P"[Gg]raph" },
    code = [[
local options = gpurun.ProgramOptions({ arch = "sm_" .. device.arch })
local code = gpurun.Program(require("spec.support.kernels").SOURCE, "c++", options):compile("cubin")
local add = code:get_kernel("vec_add")
local a, out = gpurun.full(n, 1, "float32"), gpurun.zeros(n, "float32")
local builder = stream:create_graph_builder()
builder:begin_building()
gpurun.launch(builder, config, add, a, a, out, gpurun.u64(n))
local ok, err = pcall(code.close, code)
if not ok then finish(false, err) end
builder:end_building()
local built, graph = pcall(builder.complete, builder)
if not built then finish(false, "COMPLETE FAILED: " .. tostring(graph)) end
local replayed, why = pcall(function() graph:launch(stream); stream:sync() end)
if not replayed then finish(false, "REPLAY FAILED: " .. tostring(why)) end
finish(gpurun.allclose(out, 2, 0, 0), "REPLAY computed the wrong values")
]] },
}

local function run_child_rows(gpu)
  local counts, failures = { calls = 0, errors = 0, crashes = 0 }, {}
  for _, case in ipairs(child_rows) do
    if (case.gpu or false) == gpu then
      local path = os.tmpname()
      local file = assert(io.open(path, "w"))
      file:write(CHILD_PRELUDE, gpu and GPU_PRELUDE or "", case.code)
      file:close()
      local result = process.gpurun(process.quote(path))
      os.remove(path)
      counts.calls = counts.calls + 1
      if result.code > 128 then counts.crashes = counts.crashes + 1 end
      local line = result.stdout:match("([^\n]*)\n?$") or ""
      local raised = line:match("^RAISED (.*)")
      if raised then counts.errors = counts.errors + 1 end
      local right = result.code == 0 and ((line == "OK" and case.accept.ok)
        or (raised and case.accept.raised and bad.matches(raised, case.accept.raised)))
      if not right then
        failures[#failures + 1] = ("%s (%s): exit status %s, printed %q%s"):format(case.name,
          case.label, tostring(result.code), line,
          result.stderr ~= "" and ("; stderr: " .. result.stderr:sub(-600)) or "")
      end
    end
  end
  return counts, failures
end

-- ---- the specs ----------------------------------------------------------------------------

local function report(part, counts, failures)
  io.write(("\nbad-input suite (%s): %d calls, %d errors raised, %d crashes\n")
    :format(part, counts.calls, counts.errors, counts.crashes or 0))
  io.flush()
  assert(#failures == 0, #failures .. " row(s) failed:\n" .. table.concat(failures, "\n"))
end

local function select_rows(gpu)
  local selected = {}
  for _, r in ipairs(rows) do
    if bad.needs_gpu(r) == gpu then selected[#selected + 1] = r end
  end
  return selected
end

describe("bad input", function()
  it("has rows for every function and method, and the catalog names the whole API", function()
    local problems = catalog.differences(gpurun)
    local labels = bad.labels(rows)
    for _, entry in ipairs(catalog.entries()) do
      if entry.kind ~= "metamethod" and not labels[entry.label] then
        local takes_nothing = entry.kind == "function" and ACCEPTING[entry.name]
        if not takes_nothing then problems[#problems + 1] = entry.label .. " has no bad-input rows" end
      end
    end
    for _, problem in ipairs(catalog.pipeline_differences(gpurun.pipeline())) do
      problems[#problems + 1] = problem
    end
    for _, name in ipairs(catalog.sorted_keys(catalog.pipeline)) do
      if not catalog.pipeline[name].takes_nothing and not labels["pipeline:" .. name] then
        problems[#problems + 1] = "pipeline:" .. name .. " has no bad-input rows"
      end
    end
    for _, problem in ipairs(catalog.dist_differences(require("gpurun.dist"))) do
      problems[#problems + 1] = problem
    end
    for _, name in ipairs(catalog.sorted_keys(catalog.dist)) do
      if not catalog.dist[name].takes_nothing and not labels["dist." .. name] then
        problems[#problems + 1] = "dist." .. name .. " has no bad-input rows"
      end
    end
    for _, problem in ipairs(catalog.system_differences(gpurun.system)) do
      problems[#problems + 1] = problem
    end
    for _, name in ipairs(catalog.sorted_keys(catalog.system)) do
      if not catalog.system[name].takes_nothing and not labels["gpurun.system." .. name] then
        problems[#problems + 1] = "gpurun.system." .. name .. " has no bad-input rows"
      end
    end
    for name in pairs(ACCEPTING) do
      local group, inner = name:match("^(%l+)%.([%w_]+)$") -- "fft.clear_cache": gpurun.fft's
      local entry = group and catalog.type_functions[group][inner] or catalog.functions[name]
      if not entry or not entry.never_raises then
        problems[#problems + 1] = "gpurun." .. name .. " is not a never_raises function in the catalog"
      end
    end
    assert(#problems == 0, table.concat(problems, "\n"))
  end)

  it("refuses bad input to everything that needs no device", function()
    local counts, failures = bad.run(select_rows(false))
    report("no GPU", counts, failures)
  end)

  it("refuses bad input to everything on a device, and launches still work after each #gpu", function()
    local reference = bad.reference()
    local counts, failures = bad.run(select_rows(true), reference)
    report("GPU", counts, failures)
  end)

  -- The capture rule, table-driven: every row above (so every public
  -- function and method, by the completeness check) raises while a builder
  -- captures, and the builder is then abandoned, the stream takes a plain
  -- launch at once, and the builder begins again.
  it("ends the capture on every error raised while a builder captures #gpu", function()
    local reference = bad.reference()
    reference.capture_stream = gpurun.Device(0):create_stream()
    local all = {}
    for _, r in ipairs(rows) do all[#all + 1] = r end
    local counts, failures = bad.run(all, reference, true)
    report("capture rule", counts, failures)
  end)

  it("survives the sequences that once crashed, each in a child process", function()
    local counts, failures = run_child_rows(false)
    report("child processes, no GPU", counts, failures)
  end)

  it("keeps graphs from replaying freed memory, each in a child process #gpu", function()
    local counts, failures = run_child_rows(true)
    report("child processes, GPU", counts, failures)
  end)

  it("ignores junk arguments to the functions that take none", function()
    local junk = { 1, "x", {}, true, 0 / 0 }
    local calls = 0
    for _, name in ipairs(catalog.sorted_keys(ACCEPTING)) do
      for _, value in ipairs(junk) do
        local f = gpurun
        for part in name:gmatch("[^.]+") do f = f[part] end -- "fft.clear_cache": gpurun.fft's
        local results = table.pack(pcall(f, value, value))
        calls = calls + 1
        assert(results[1], ("gpurun.%s(%s) raised %s"):format(name, tostring(value), tostring(results[2])))
        assert(ACCEPTING[name](table.pack(table.unpack(results, 2, results.n))),
          ("gpurun.%s(%s) returned something unexpected"):format(name, tostring(value)))
      end
    end
    io.write(("\nbad-input suite (functions that take nothing): %d calls, 0 errors raised, 0 crashes\n")
      :format(calls))
  end)

  it("closes every object twice without complaint", function()
    for _, name in ipairs({ "closed_options", "closed_program", "closed_ptx", "closed_rng" }) do
      local object = bad.factories[name]()
      assert(pcall(object.close, object), name .. ": a second close raised")
      assert(pcall(getmetatable(object).__close, object), name .. ": __close after close raised")
    end
  end)

  it("closes every device object twice without complaint #gpu", function()
    local env = {}
    setmetatable(env, { __index = function(t, name)
      local object = bad.factories[name](t)
      rawset(t, name, object)
      return object
    end })
    for _, name in ipairs({ "closed_device", "closed_stream", "closed_event", "closed_kernel",
        "closed_plan", "closed_buffer", "closed_builder", "closed_graph", "closed_code" }) do
      local object = env[name]
      assert(pcall(object.close, object), name .. ": a second close raised")
    end
    gpurun.Device(0):set_current()
  end)
end)
