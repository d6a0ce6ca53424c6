-- gpurun.sort, gpurun.lower_bound and gpurun.upper_bound: the checks, the
-- plan of passes and the launches over the kernels sort_source.lua writes.
-- Temporaries come from the target's pool (allocation nodes on a
-- GraphBuilder), so a warmed-up sort captures into a graph.
--
--   gpurun.sort(stream, keys, { values = v, descending = true })
--   local at = gpurun.lower_bound(stream, sorted, queries)  -- int64, 1-based

local gpurun = require("gpurun")
local common = require("gpurun.common")
local arguments = require("gpurun.compute.arguments")
local device_code = require("gpurun.compute.device_code")
local source = require("gpurun.compute.sort_source")

local DTYPES = common.DTYPES
local raise = common.raise
local type_name, bad_argument = common.type_name, common.bad_argument
local check_target, check_options = arguments.check_target, arguments.check_options

local sort = {}

local SORT_OPTIONS = { "values", "descending", "out", "values_out", "segments" }
local SEARCH_OPTIONS = { "out" }
local OFFSET_DTYPES = { int32 = true, uint32 = true, int64 = true, uint64 = true }
local MAX_ELEMENTS = 0xffffffff -- places are 32-bit
local BLOCK, TILE = source.BLOCK, source.TILE

local function check_buffer(fname, n, value, what)
  arguments.check_buffer(fname, n, value, what, "sorts")
end

-- ---- programs ------------------------------------------------------------------------

-- Programs made so far: key dtype -> descending -> value size (0: none)
-- -> offset dtype ("": none) -> program.
local programs = {}

local function program_for(dtype, descending, value_size, offset_dtype)
  local node = programs
  for _, key in ipairs{ dtype, descending, value_size or 0 } do
    node[key] = node[key] or {}
    node = node[key]
  end
  local found = node[offset_dtype or ""]
  if not found then
    found = {
      kind = "sort", name = "gpurun_sort", block = BLOCK, blocks_per_sm = 8,
      key_dtype = dtype, value_size = value_size, offset_dtype = offset_dtype,
      source = source.generate(dtype, descending, value_size, offset_dtype),
      kernel_names = source.KERNEL_NAMES, devices = {},
    }
    node[offset_dtype or ""] = found
  end
  return found
end

-- What a program is for, in messages: "float32 keys and int32 values".
local function described(fname, keys, values, segments)
  local text = ("%s keys"):format(keys.dtype)
  if values then text = text .. (" and %s values"):format(values.dtype) end
  if segments then text = text .. (" in %s segments"):format(segments.dtype) end
  return ("%s for %s"):format(fname, text)
end

-- The program's kernels on the buffers' device. Loading code is one of
-- the calls a capture forbids, so a first call on a builder is refused,
-- saying which call to make first.
local function loaded(fname, program, target, device, keys, values, segments)
  if not program.devices[device] and type_name(target) == "gpurun.GraphBuilder" then
    raise(("%s compiles its kernels on its first call; make one call on a stream (any size) "
           .. "before capturing it"):format(described(fname, keys, values, segments)))
  end
  return device_code.compiled(program, program, device).kernels
end

-- ---- checks ------------------------------------------------------------------------

local function bytes_of(buffer)
  return #buffer * DTYPES[buffer.dtype].size
end

-- Whether two buffers' memory overlaps.
local function overlaps(a, b)
  return a.ptr < b.ptr + bytes_of(b) and b.ptr < a.ptr + bytes_of(a) and #a > 0 and #b > 0
end

-- Whether b is exactly a's memory (the same elements).
local function same_memory(a, b)
  return a.ptr == b.ptr and a.dtype == b.dtype and #a == #b
end

-- An option that must be a Buffer of the keys' device when given.
local OPTION_LABELS = { values = "options.values", out = "options.out",
                        values_out = "options.values_out", segments = "options.segments" }
local function option_buffer(fname, n, options, name, device)
  local value = rawget(options, name)
  if value == nil then return nil end
  check_buffer(fname, n, value, OPTION_LABELS[name])
  if value.device ~= device then
    bad_argument(fname, n, "options.%s is on device %d, but the keys are on device %d", name,
                 value.device, device)
  end
  return value
end

-- Refuses two of the named buffers whose memory overlaps, unless `allowed`
-- says the pair may be one buffer (in place).
local function check_overlaps(fname, n, list, allowed)
  for i = 1, #list do
    for j = i + 1, #list do
      local a, b = list[i], list[j]
      if a.buffer and b.buffer and overlaps(a.buffer, b.buffer) then
        local pair = a.name .. "/" .. b.name
        if not (allowed[pair] and same_memory(a.buffer, b.buffer)) then
          bad_argument(fname, n, "%s and %s share memory", a.name, b.name)
        end
      end
    end
  end
end

-- ---- sort ------------------------------------------------------------------------

local function digit_passes(largest)
  local passes = 1
  while largest > 255 do
    largest = largest >> 8
    passes = passes + 1
  end
  return passes
end

-- One pass: a kernel that ranks each tile, looks back for its place and
-- writes it out.
local function run_pass(target, kernels, shape, pass)
  gpurun.launch(target, shape.tiles_config, kernels.gpurun_sort_onesweep, shape.n, shape.tiles, pass.index,
                pass.shift, pass.segment_pass, pass.keys, pass.keys_out, pass.values, pass.values_out,
                pass.segments, pass.segments_out, pass.move_segments, shape.totals, shape.status)
end

local function temporary(count, dtype, target)
  return gpurun.empty(count, dtype, { stream = target })
end

local function measured(buffer)
  return buffer.dtype, #buffer
end

-- The checks of a sort that need only its buffers' dtypes and sizes, so
-- that a declared pipeline makes them before there is memory: nil, or the
-- argument's position (2: keys, 3: options) and why. measure(buffer) gives
-- a buffer's dtype and element count.
function sort.shape_problem(keys, values, out, values_out, segments, measure)
  local dtype, n = measure(keys)
  local values_dtype, values_n, out_dtype, out_n, values_out_dtype, values_out_n
  if values then values_dtype, values_n = measure(values) end
  if out then out_dtype, out_n = measure(out) end
  if values_out then values_out_dtype, values_out_n = measure(values_out) end
  local why = arguments.dtype_problem("keys", dtype, "sorts")
  if why then return 2, why end
  why = values and arguments.dtype_problem("options.values", values_dtype, "sorts")
  if why then return 3, why end
  if values and values_n ~= n then
    return 3, ("options.values has %d elements, but keys has %d"):format(values_n, n)
  end
  if out and out_dtype ~= dtype then
    return 3, ("options.out must have the keys' dtype %s, got %s"):format(dtype, out_dtype)
  end
  if out and out_n < n then
    return 3, ("options.out has %d elements, fewer than the keys' %d"):format(out_n, n)
  end
  if values_out and not values then
    return 3, "options.values_out needs options.values"
  end
  if values_out and values_out_dtype ~= values_dtype then
    return 3, ("options.values_out must have the values' dtype %s, got %s"):format(values_dtype,
               values_out_dtype)
  end
  if values_out and values_out_n < n then
    return 3, ("options.values_out has %d elements, fewer than the keys' %d"):format(values_out_n, n)
  end
  if segments then
    local segments_dtype, segments_n = measure(segments)
    if not OFFSET_DTYPES[segments_dtype] or segments_n < 1 then
      return 3, ("options.segments must be int32, uint32, int64 or uint64 offsets (at least one), "
                 .. "got %d %s"):format(segments_n, segments_dtype)
    end
  end
  if n > MAX_ELEMENTS then
    return 2, ("keys has %d elements; gpurun.sort sorts at most %d"):format(n, MAX_ELEMENTS)
  end
  return nil
end

-- sort(target, keys [, options]) -> keys (or options.out): a stable LSD
-- radix sort. options: values (moved with their keys), descending,
-- out (the keys sorted into it; keys left as they are), values_out,
-- segments (S + 1 offsets: each segment [offsets[s], offsets[s + 1])
-- sorted on its own).
function sort.sort(target, keys, options)
  local fname = "gpurun.sort"
  check_target(fname, target)
  check_buffer(fname, 2, keys, "keys")
  options = check_options(fname, 3, options, SORT_OPTIONS)
  local n, device = #keys, keys.device
  local values = option_buffer(fname, 3, options, "values", device)
  local out = option_buffer(fname, 3, options, "out", device)
  local values_out = option_buffer(fname, 3, options, "values_out", device)
  local segments = option_buffer(fname, 3, options, "segments", device)
  local descending = rawget(options, "descending")
  if descending == nil then descending = false end
  if type(descending) ~= "boolean" then
    bad_argument(fname, 3, "options.descending must be a boolean, got %s", type_name(descending))
  end
  local position, why = sort.shape_problem(keys, values, out, values_out, segments, measured)
  if position then bad_argument(fname, position, "%s", why) end
  if out then out = out:view(1, n) end
  if values_out then values_out = values_out:view(1, n) end
  check_overlaps(fname, 3, {
    { name = "keys", buffer = keys }, { name = "options.values", buffer = values },
    { name = "options.out", buffer = out }, { name = "options.values_out", buffer = values_out },
    { name = "options.segments", buffer = segments },
  }, { ["keys/options.out"] = true, ["options.values/options.values_out"] = true })
  if out and same_memory(out, keys) then out = nil end
  if values_out and same_memory(values_out, values) then values_out = nil end

  local value_size = values and DTYPES[values.dtype].size
  local program = program_for(keys.dtype, descending, value_size, segments and segments.dtype)
  local kernels = loaded(fname, program, target, device, keys, values, segments)
  local keys_dest = out or keys
  if n == 0 then return keys_dest end

  local tiles = (n + TILE - 1) // TILE
  local entry = program.devices[device]
  local grid = device_code.blocks(entry, n, BLOCK)
  local key_passes = DTYPES[keys.dtype].size
  local segment_passes = segments and digit_passes(#segments) or 0
  local passes = key_passes + segment_passes
  local shape = {
    n = gpurun.u64(n), tiles = gpurun.u32(tiles),
    tiles_config = gpurun.LaunchConfig{ grid = tiles, block = BLOCK },
    totals = temporary(256 * passes, "uint32", target),
    status = temporary(256 * tiles + passes, "uint64", target),
  }
  local made = { shape.totals, shape.status }
  local function scratch(count, dtype)
    local buffer = temporary(count, dtype, target)
    made[#made + 1] = buffer
    return buffer
  end
  local grid_config = gpurun.LaunchConfig{ grid = grid, block = BLOCK }

  local values_dest = values and (values_out or values)
  -- Each pass writes to the destination or to a temporary, alternately, so
  -- that the last writes the destination; where that would make the first
  -- pass write over what it reads (in place, an odd count), the sort starts
  -- from a copy.
  local key_tmp = scratch(n, keys.dtype)
  local value_tmp = values and scratch(n, values.dtype)
  local key_from, value_from = keys, values
  local copy_keys = passes % 2 == 1 and keys_dest == keys
  local copy_values = values and passes % 2 == 1 and values_dest == values
  if copy_keys or copy_values then
    gpurun.launch(target, grid_config, kernels.gpurun_sort_copy, shape.n, copy_keys and 1 or 0, keys, key_tmp,
                  copy_values and 1 or 0, values or keys, value_tmp or keys)
    if copy_keys then key_from = key_tmp end
    if copy_values then value_from = value_tmp end
  end
  local segment_from, segment_other
  if segments then
    segment_from, segment_other = scratch(n, "uint32"), scratch(n, "uint32")
    gpurun.launch(target, grid_config, kernels.gpurun_sort_segment_ids, shape.n, segments,
                  gpurun.u64(#segments), segment_from)
  end
  shape.totals:fill(0, target)
  shape.status:fill(0, target)
  gpurun.launch(target, grid_config, kernels.gpurun_sort_upsweep, shape.n, gpurun.u32(key_passes),
                gpurun.u32(segment_passes), key_from, segment_from or keys, shape.totals)
  for pass = 1, passes do
    local last_ones = (passes - pass) % 2 == 0
    local key_to = last_ones and keys_dest or key_tmp
    local value_to = values and (last_ones and values_dest or value_tmp)
    local segment_pass = pass > key_passes
    local step = {
      index = gpurun.u32(pass - 1),
      shift = segment_pass and 8 * (pass - key_passes - 1) or 8 * (pass - 1),
      segment_pass = segment_pass and 1 or 0,
      keys = key_from, keys_out = key_to,
      values = value_from or keys, values_out = value_to or keys,
      segments = segment_from or keys, segments_out = segment_other or keys,
      move_segments = segments and pass < passes and 1 or 0,
    }
    run_pass(target, kernels, shape, step)
    key_from, value_from = key_to, value_to
    if segments then segment_from, segment_other = segment_other, segment_from end
  end
  for _, buffer in ipairs(made) do buffer:close() end
  return keys_dest
end

-- Compiles and loads the kernels that a sort of these dtypes runs on the
-- device (an ordinal), so that a first call may be captured: what a
-- declared pipeline does before capturing its stages.
function sort.prepare(device, key_dtype, descending, value_dtype, segments_dtype)
  local program = program_for(key_dtype, descending, value_dtype and DTYPES[value_dtype].size,
                              segments_dtype)
  device_code.compiled(program, program, device)
end

-- ---- binary search ------------------------------------------------------------------

local function search(fname, upper, target, sorted, queries, options)
  check_target(fname, target)
  check_buffer(fname, 2, sorted, "sorted")
  check_buffer(fname, 3, queries, "queries")
  if queries.dtype ~= sorted.dtype then
    bad_argument(fname, 3, "queries must have the sorted buffer's dtype %s, got %s", sorted.dtype,
                 queries.dtype)
  end
  if queries.device ~= sorted.device then
    bad_argument(fname, 3, "queries is on device %d, but sorted is on device %d", queries.device,
                 sorted.device)
  end
  options = check_options(fname, 4, options, SEARCH_OPTIONS)
  local m, device = #queries, sorted.device
  local out = option_buffer(fname, 4, options, "out", device)
  if out and out.dtype ~= "int64" then
    bad_argument(fname, 4, "options.out must be int64 (1-based positions), got %s", out.dtype)
  end
  if out and #out < m then
    bad_argument(fname, 4, "options.out has %d elements, fewer than the queries' %d", #out, m)
  end
  if out then
    if overlaps(out, sorted) then bad_argument(fname, 4, "options.out and sorted share memory") end
    if overlaps(out, queries) then bad_argument(fname, 4, "options.out and queries share memory") end
  elseif type_name(target) == "gpurun.GraphBuilder" then
    bad_argument(fname, 4, "options.out is needed on a GraphBuilder: no buffer can be made while capturing")
  end
  local program = program_for(sorted.dtype, false, nil, nil)
  local kernels = loaded(fname, program, target, device, sorted)
  out = out or gpurun.empty(m, "int64")
  if m == 0 then return out end
  local entry = program.devices[device]
  local config = gpurun.LaunchConfig{ grid = device_code.blocks(entry, m, BLOCK), block = BLOCK }
  gpurun.launch(target, config, kernels.gpurun_sort_search, gpurun.u64(#sorted), sorted, gpurun.u64(m),
                queries, out, upper and 1 or 0)
  return out
end

-- lower_bound(target, sorted, queries [, { out = }]) -> out (int64): for
-- each query, the 1-based position of the first element of sorted
-- (ascending) not less than it; #sorted + 1 past the end. NumPy's
-- searchsorted(side="left") plus one.
function sort.lower_bound(target, sorted, queries, options)
  return search("gpurun.lower_bound", false, target, sorted, queries, options)
end

-- upper_bound: the same, before the first element greater than the query
-- (searchsorted(side="right") plus one).
function sort.upper_bound(target, sorted, queries, options)
  return search("gpurun.upper_bound", true, target, sorted, queries, options)
end

-- The CUDA C of a sort program, as the specs compile it without a GPU.
function sort.source(dtype, descending, value_dtype, offset_dtype)
  return source.generate(dtype, descending, value_dtype and DTYPES[value_dtype].size, offset_dtype)
end

-- Errors end the capture in progress, as every gpurun error does.
gpurun.guard(sort)

return sort
