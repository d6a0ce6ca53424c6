-- gpurun.inclusive_scan, gpurun.exclusive_scan and gpurun.select: single-
-- pass scans with a decoupled look-back (lua/gpurun/compute/scan_source.lua
-- writes them), into device buffers, capturable into graphs.
--
--   gpurun.inclusive_scan(stream, x, y)                 -- y[i] = x[1] + ... + x[i]
--   gpurun.select(stream, x, "x > 0.5f", out, count)    -- count: a 1-element buffer

local gpurun = require("gpurun")
local common = require("gpurun.common")
local options_rule = require("gpurun.options")
local arguments = require("gpurun.compute.arguments")
local device_code = require("gpurun.compute.device_code")
local ops = require("gpurun.compute.reduce_ops")
local ss = require("gpurun.compute.scan_source")
local number_text = require("gpurun.compute.reduction").number_text

local DTYPES = common.DTYPES
local raise = common.raise

local scan = {}

local DEFAULT_BLOCK, DEFAULT_ITEMS = 128, 23
local MAX_EXCHANGE_BYTES = 40 * 1024 -- static shared memory stays under 48 KiB
local COUNT_DTYPES = { int32 = true, uint32 = true, int64 = true, uint64 = true }
local OPTION_NAMES = { "identity", "deterministic", "block", "items" }
local SELECT_OPTION_NAMES = { "block", "items" }

local type_name, bad_argument = common.type_name, common.bad_argument
local check_target = arguments.check_target

local function check_buffer(fname, n, value, what)
  arguments.check_buffer(fname, n, value, what, "scans")
end

-- block and items from the options, checked.
local function launch_options(fname, n, options, known, value_bytes)
  if options == nil then
    return DEFAULT_BLOCK, DEFAULT_ITEMS
  end
  if not common.is_plain_table(options) then
    bad_argument(fname, n, "options table expected, got %s", type_name(options))
  end
  local unknown = options_rule.unknown(options, known)
  if unknown then
    bad_argument(fname, n, "%s", unknown)
  end
  local block, items = rawget(options, "block") or DEFAULT_BLOCK, rawget(options, "items") or DEFAULT_ITEMS
  if math.type(block) ~= "integer" or block < 32 or block > 1024 or block % 32 ~= 0 then
    bad_argument(fname, n, "options.block must be a multiple of 32 from 32 to 1024, got %s",
                 common.quoted(block))
  end
  if math.type(items) ~= "integer" or items < 1 or items > 32 then
    bad_argument(fname, n, "options.items must be an integer from 1 to 32, got %s", common.quoted(items))
  end
  if block * items * value_bytes > MAX_EXCHANGE_BYTES then
    bad_argument(fname, n, "options.block * options.items * %d bytes must stay within %d bytes of "
                 .. "shared memory, got %d * %d", value_bytes, MAX_EXCHANGE_BYTES, block, items)
  end
  return block, items
end

-- ---- kernels -------------------------------------------------------------------

local Kernel = {}
Kernel.__index = Kernel

local function compiled(kernel, device)
  local program = kernel.program
  return device_code.compiled(kernel, program, device)
end

-- The temporaries for `tiles` tiles on this kernel's entry: grown, never
-- on a builder; the shape for n elements (its reset view, launch shape).
-- Each launch is a memset of the temporaries (the tiles' statuses) and one
-- kernel. The temporaries are kept per kernel and device and grow to the
-- largest size seen; calls of one kernel (one operation and dtypes) must
-- not run at the same time.
local function make_shape(n, kernel, entry, target)
  local tiles = (n + kernel.tile - 1) // kernel.tile
  local _, bytes, reset_words = ss.temp_layout(tiles, kernel.packed)
  if not entry.temp or entry.temp_tiles < tiles then
    if type_name(target) == "gpurun.GraphBuilder" then
      raise(("%s makes its temporaries on its first call of this size or larger; make that call "
             .. "on a stream, or prepare it, before capturing it"):format(kernel.what))
    end
    entry.temp = gpurun.empty((bytes + 3) // 4, "uint32")
    entry.temp_tiles = tiles
  end
  return {
    n = gpurun.u64(n), tiles = gpurun.u64(tiles), temp = entry.temp,
    reset = entry.temp:view(1, reset_words), -- the counter, padding, then the statuses (or words)
    config = gpurun.LaunchConfig{ grid = math.max(1, tiles), block = kernel.block },
  }
end

local function shape_for(kernel, entry, n, target)
  local found = entry.shapes[n]
  if found then
    return found
  end
  if entry.shape_count >= 64 then
    entry.shapes, entry.shape_count = {}, 0
  end
  found = make_shape(n, kernel, entry, target)
  entry.shapes[n] = found
  entry.shape_count = entry.shape_count + 1
  return found
end

-- The kernel's program loaded on `device` and the launch shape for n.
function Kernel:ready(target, device, n)
  device_code.refuse_capture(self, self.program, device, target)
  local entry = compiled(self, device)
  return shape_for(self, entry, n, target), entry
end

local function new_kernel(spec)
  spec.value_bytes = spec.value_bytes or 8
  local kernel = setmetatable({
    kind = spec.mode == "select" and "select" or spec.mode .. " scan", name = spec.name,
    what = spec.what, block = spec.block, tile = spec.block * spec.items, packed = ss.packed(spec),
    program = { source = ss.generate(spec), kernel_names = { spec.name }, devices = {} },
  }, Kernel)
  kernel.source = kernel.program.source
  return kernel
end

-- The headers the dtypes' C types need (cuda_fp16.h, cuda_bf16.h), once each.
local function headers(...)
  local list, seen = {}, {}
  for index = 1, select("#", ...) do
    local header = DTYPES[select(index, ...)].header
    if header and not seen[header] then
      seen[header] = true
      list[#list + 1] = header
    end
  end
  return list
end

-- Kernels made so far: mode -> operation -> identity -> x dtype -> y
-- dtype -> flags -> kernel, so that finding one builds no string.
local kernels = {}

local function lookup(...)
  local node = kernels
  local count = select("#", ...)
  for index = 1, count - 1 do
    local key = select(index, ...)
    local child = node[key]
    if not child then
      child = {}
      node[key] = child
    end
    node = child
  end
  return node, select(count, ...)
end

-- ---- scans ------------------------------------------------------------------------

-- The operation: a name or an expression of a and b with its identity.
local function operation_of(fname, op, options)
  if op == nil then
    op = "sum"
  end
  if type(op) ~= "string" or op:match("^%s*$") then
    bad_argument(fname, 4, "an operation (%s) or an expression of a and b expected, got %s",
                 ops.SCAN_NAMES, type_name(op))
  end
  local named = ops.named[op]
  local identity = options and rawget(options, "identity")
  if named then
    if not named.scan then
      bad_argument(fname, 4, "%s is not a scan operation (%s)", op, ops.SCAN_NAMES)
    end
    if identity ~= nil then
      bad_argument(fname, 5, "options.identity: '%s' brings its own identity", op)
    end
    return op, nil
  end
  if not op:find("%f[%w_]a%f[^%w_]") or not op:find("%f[%w_]b%f[^%w_]") then
    bad_argument(fname, 4, "'%s' is neither an operation (%s) nor an expression of a and b", op,
                 ops.SCAN_NAMES)
  end
  if type(identity) == "number" then
    local text = number_text(identity)
    if not text then
      bad_argument(fname, 5, "options.identity must not be NaN")
    end
    return op, text
  elseif type(identity) ~= "string" or identity:match("^%s*$") then
    bad_argument(fname, 5, "options.identity (a number or C text) is needed with an expression, got %s",
                 type_name(identity))
  end
  return op, identity
end

local function scan_kernel(mode, fname, op, identity, x_dtype, y_dtype, deterministic, block, items)
  local node, key = lookup(mode, op, identity or "", x_dtype, y_dtype, deterministic, block, items)
  local kernel = node[key]
  if kernel then
    return kernel
  end
  local named = ops.named[op]
  kernel = new_kernel{
    name = "gpurun_" .. mode .. "_scan", mode = mode, what = ("'%s'"):format(fname),
    in_c = DTYPES[x_dtype].c, in_compute = DTYPES[x_dtype].compute, out_c = DTYPES[y_dtype].c,
    value_c = DTYPES[y_dtype].compute, value_bytes = DTYPES[y_dtype].compute_size,
    headers = headers(x_dtype, y_dtype),
    combine = named and named.combine or op, identity = named and named.identity(y_dtype) or identity,
    deterministic = deterministic, block = block, items = items,
  }
  node[key] = kernel
  return kernel
end

local function run_scan(mode, fname, target, x, y, op, options)
  check_target(fname, target)
  check_buffer(fname, 2, x, "x")
  check_buffer(fname, 3, y, "y")
  if #y ~= #x then
    bad_argument(fname, 3, "y has %d elements, but x has %d", #y, #x)
  end
  if y.device ~= x.device then
    bad_argument(fname, 3, "y is on device %d, but x is on device %d", y.device, x.device)
  end
  local block, items = launch_options(fname, 5, options, OPTION_NAMES, DTYPES[y.dtype].compute_size)
  local operation, identity = operation_of(fname, op, options)
  local deterministic = options and rawget(options, "deterministic") or false
  if type(deterministic) ~= "boolean" then
    bad_argument(fname, 5, "options.deterministic must be a boolean, got %s", type_name(deterministic))
  end
  local kernel = scan_kernel(mode, fname, operation, identity, x.dtype, y.dtype, deterministic,
                             block, items)
  local n = #x
  if n == 0 then
    return y, kernel
  end
  return y, kernel, n
end

local function launch_scan(target, kernel, x, y, n)
  local shape, entry = kernel:ready(target, x.device, n)
  shape.reset:fill(0, target)
  gpurun.launch(target, shape.config, entry.kernels[kernel.name], shape.n, shape.temp, shape.tiles, x, y)
  return y
end

-- inclusive_scan(target, x, y [, op [, options]]) -> y: y[i] is x[1]
-- combined with every element up to x[i]. op: "sum" (default), "prod",
-- "min", "max", or an expression of a and b (associative; options.identity
-- then needed). options: identity, deterministic (float sums in a fixed
-- order, a serial chain of tiles), block (128), items (per thread, 23).
-- y has x's size and any dtype: values are scanned in y's dtype; y may be
-- x itself.
--
--   gpurun.exclusive_scan(stream, x, y, "max")          -- y[1] = identity
--   gpurun.inclusive_scan(stream, x, y, "a * b + a + b", { identity = 0 })
function scan.inclusive_scan(target, x, y, op, options)
  local _, kernel, n = run_scan("inclusive", "gpurun.inclusive_scan", target, x, y, op, options)
  if n then
    launch_scan(target, kernel, x, y, n)
  end
  return y
end

-- exclusive_scan(target, x, y [, op [, options]]) -> y: y[1] is the
-- identity, y[i] every element before x[i] combined.
function scan.exclusive_scan(target, x, y, op, options)
  local _, kernel, n = run_scan("exclusive", "gpurun.exclusive_scan", target, x, y, op, options)
  if n then
    launch_scan(target, kernel, x, y, n)
  end
  return y
end

-- The kernel a scan call would run, compiled and with its temporaries, as
-- a capture's first call needs: prepare_scan(mode, target-less arguments).
function scan.prepare(mode, x, y, op, options)
  local fname = "gpurun." .. mode .. "_scan"
  local _, kernel, n = run_scan(mode, fname, nil, x, y, op, options)
  if n then
    kernel:ready(nil, x.device, n)
  end
  return kernel
end

-- ---- select ------------------------------------------------------------------------

local FNAME = "gpurun.select"

local function select_kernel(predicate, x_dtype, count_dtype, block, items)
  local node, key = lookup("select", predicate, x_dtype, count_dtype, block, items)
  local kernel = node[key]
  if kernel then
    return kernel
  end
  kernel = new_kernel{
    name = "gpurun_select", mode = "select", what = "'gpurun.select'",
    in_c = DTYPES[x_dtype].c, in_compute = DTYPES[x_dtype].compute, headers = headers(x_dtype),
    value_c = "unsigned long long", count_c = DTYPES[count_dtype].c,
    combine = "a + b", identity = "0ull", predicate = predicate, block = block, items = items,
  }
  node[key] = kernel
  return kernel
end

-- select(target, x, predicate, out, count [, options]) -> out, count: the
-- elements of x for which predicate (C, seeing x and its 0-based index i)
-- holds, in order, at the start of out; count[1] becomes how many there
-- are. out may be smaller than x: elements past its end are not written,
-- but count still says how many there were.
function scan.select(target, x, predicate, out, count, options)
  check_target(FNAME, target)
  check_buffer(FNAME, 2, x, "x")
  if type(predicate) ~= "string" or predicate:match("^%s*$") then
    bad_argument(FNAME, 3, "predicate: a C expression of x (and i) expected, got %s", type_name(predicate))
  end
  check_buffer(FNAME, 4, out, "out")
  if out.dtype ~= x.dtype then
    bad_argument(FNAME, 4, "out must have x's dtype %s, got %s", x.dtype, out.dtype)
  end
  if type_name(count) ~= "gpurun.Buffer" then
    bad_argument(FNAME, 5, "gpurun.Buffer expected for count, got %s", type_name(count))
  end
  if not COUNT_DTYPES[count.dtype] or #count ~= 1 then
    bad_argument(FNAME, 5, "count must be one int32, uint32, int64 or uint64 element, got %d %s",
                 #count, count.dtype)
  end
  if out.device ~= x.device then
    bad_argument(FNAME, 4, "out is on device %d, but x is on device %d", out.device, x.device)
  end
  if count.device ~= x.device then
    bad_argument(FNAME, 5, "count is on device %d, but x is on device %d", count.device, x.device)
  end
  local block, items = launch_options(FNAME, 6, options, SELECT_OPTION_NAMES,
                                      math.max(8, DTYPES[x.dtype].size))
  local kernel = select_kernel(predicate, x.dtype, count.dtype, block, items)
  local n = #x
  if n == 0 then
    count:fill(0, target)
    return out, count
  end
  local shape, entry = kernel:ready(target, x.device, n)
  shape.reset:fill(0, target)
  gpurun.launch(target, shape.config, entry.kernels[kernel.name], shape.n, shape.temp, shape.tiles,
                x, out, Kernel.capacity_of(out), count)
  return out, count
end

-- Capacities as typed scalars, made once per size.
local capacities, capacity_count = {}, 0
function Kernel.capacity_of(out)
  local n = #out
  local found = capacities[n]
  if not found then
    if capacity_count >= 64 then
      capacities, capacity_count = {}, 0
    end
    found = gpurun.u64(n)
    capacities[n] = found
    capacity_count = capacity_count + 1
  end
  return found
end

scan.Kernel = Kernel

-- Scripts call these while a builder captures: their errors end the
-- capture as gpurun's own do, through gpurun.inclusive_scan and the others
-- or straight from here.
gpurun.guard(Kernel)
gpurun.guard(scan)

return scan
