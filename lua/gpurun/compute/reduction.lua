-- Reduction kernels in the shape of CuPy's ReductionKernel, into device
-- buffers, so that a reduction captures into a graph like any kernel: what
-- gpurun.reduction runs (docs/reductions.md). reduction_source.lua writes
-- their CUDA C; this file compiles them, picks the launch shape and
-- launches. The order of the combines is fixed by the launch shape, so
-- results are the same bits run to run.
--
--   local red = require("gpurun.compute.reduction")
--   local l2 = red.reduction("T x", "T y", "x * x", "a + b", "y = sqrt(a)", 0, "l2norm")
--   l2(stream, x, y)                        -- y: a 1-element buffer; x any size

local gpurun = require("gpurun")
local common = require("gpurun.common")
local source = require("gpurun.compute.elementwise_source")
local arguments = require("gpurun.compute.arguments")
local device_code = require("gpurun.compute.device_code")
local ops = require("gpurun.compute.reduce_ops")
local rs = require("gpurun.compute.reduction_source")
local kernel_options = require("gpurun.compute.kernel_options")
local launch_plans = require("gpurun.compute.launch_plans")
local unknown_option = require("gpurun.options").unknown

local DTYPES = common.DTYPES
local raise = common.raise
local type_name = common.type_name

local reduction = {}

local Kernel = {}
Kernel.__index = Kernel


-- Names the post-map sees itself: an output cannot take them.
local POST_NAMES = { a = true, b = true, index = true, count = true, segment = true }
local SHAPE_KEYS = { rows = true, cols = true, axis = true, offsets = true }
-- gpurun.reduction's options: reduce_type, then every generated kernel's.
local REDUCTION_OPTIONS = { "reduce_type" }
for _, key in ipairs(kernel_options.NAMES) do
  REDUCTION_OPTIONS[#REDUCTION_OPTIONS + 1] = key
end
local OFFSET_KIND = { int32 = 1, uint32 = 2, int64 = 3, uint64 = 4 }
local OFFSET_KIND_ARG = {}
for dtype, kind in pairs(OFFSET_KIND) do
  OFFSET_KIND_ARG[dtype] = gpurun.u32(kind)
end
local ROWS_KIND_ARG = gpurun.u32(0)
local ZERO = gpurun.u64(0)
-- A segment of at least this many elements on average gets a block of its
-- own; shorter ones a warp each.
local BLOCK_SEGMENT = 1024
-- Columns get a thread each; with fewer columns than this many threads per
-- multiprocessor, the rows are cut into chunks as well.
local COLUMN_THREADS_PER_SM = 1024
local MIN_ROWS_PER_CHUNK = 16

-- A Lua number as C text for an identity.
local function number_text(value)
  if math.type(value) == "integer" then
    if value == math.mininteger then
      return "(-9223372036854775807LL - 1)"
    end
    return ("%dLL"):format(value)
  end
  if value ~= value then
    return nil
  elseif value == math.huge then
    return "__longlong_as_double(0x7ff0000000000000LL)"
  elseif value == -math.huge then
    return "(-__longlong_as_double(0x7ff0000000000000LL))"
  end
  return ("%.17g"):format(value):gsub("^(-?%d+)$", "%1.0")
end
reduction.number_text = number_text

-- `text` is a C expression or statements: a non-empty string.
local function code_text(value, what, allow_nil)
  if value == nil and allow_nil then
    return nil
  end
  if type(value) ~= "string" or value:match("^%s*$") then
    raise(("%s must be a non-empty string of C code, got %s"):format(what,
          type(value) == "string" and "an empty one" or type(value)))
  end
  return value
end

-- The type a/b are held in: `wanted` (options.reduce_type) if given, else
-- the named operation's choice.
local function reduce_type(what, wanted, op, inputs, outputs, variables)
  local named = ops.named[op]
  if named and named.logical then
    if wanted ~= nil then
      raise(("%s: %s reduces as bool; options.reduce_type does not apply"):format(what, op))
    end
    return "bool"
  end
  if wanted ~= nil then
    if type(wanted) ~= "string" or not (DTYPES[wanted] or variables[wanted]) then
      raise(("%s: options.reduce_type must be a dtype (%s) or one of the kernel's type "
             .. "variables, got %s"):format(what, common.DTYPE_NAMES, common.quoted(wanted)))
    end
    return wanted
  end
  if named and named.arg then
    if #inputs == 0 then
      raise(("%s: %s needs options.reduce_type when the kernel has no inputs"):format(what, op))
    end
    return inputs[1].type
  end
  return outputs[1].type
end

-- Builds a kernel from its parts: used by reduction() and by fused
-- pipelines. spec: { name, what, inputs, outputs (results), side_outputs,
-- body, reductions = { { type, map, op | combine + identity, post } },
-- options (elementwise's: block, unroll, blocks_per_sm, preamble) }.
function reduction.kernel(spec)
  local kernel = setmetatable({
    kind = "reduction kernel", name = spec.name, params = {}, input_count = #spec.inputs,
    type_variables = {}, variants = {}, bound = {}, arguments = {}, scalars = {},
    body = spec.body or "", reductions = spec.reductions, extra_shape_keys = spec.extra_shape_keys,
    what = ("reduction kernel '%s'"):format(spec.name),
  }, Kernel)
  for key, value in pairs(kernel_options.check(spec.options, spec.what, { unroll = 4 })) do
    kernel[key] = value
  end
  for index, param in ipairs(spec.inputs) do
    kernel.params[index] = param
  end
  for _, param in ipairs(spec.side_outputs or {}) do
    param.output = true
    kernel.params[#kernel.params + 1] = param
  end
  for _, param in ipairs(spec.outputs) do
    param.output, param.result = true, true
    kernel.params[#kernel.params + 1] = param
  end
  arguments.collect(kernel, spec.what)
  kernel.result_count = #spec.outputs
  if #kernel.type_variables == 0 then
    kernel.source = kernel:source_for({})
  end
  return kernel
end

-- reduction(in_params, out_params, map_expr, reduce_expr, post_map_expr,
-- identity [, name [, options]]) -> kernel. options: reduce_type, and
-- elementwise's block, blocks_per_sm, unroll (vectors per thread per
-- step, 4 here) and preamble.
--
-- map_expr: the value of one element (inputs by name, the element index i,
-- n, and segment); reduce_expr: how two values a and b combine (associative
-- and commutative), or a named operation (sum, prod, min, max, argmin,
-- argmax, any, all) with no identity; identity: C text or a number;
-- post_map_expr: statements writing the outputs from the reduced value a
-- (count: its segment's elements; for argmin/argmax index, 0-based, -1 for
-- an empty segment), by default `<output> = a` (`<output> = index + 1`, a
-- 1-based position, 0 when empty, for argmin/argmax).
--
--   local mx = red.reduction("float32 x", "int64 at", "x", "argmax", nil, nil, "where_max")
function reduction.reduction(in_params, out_params, map_expr, reduce_expr, post_map_expr, identity,
                             name, options)
  local what, inputs, outputs
  name, what, inputs, outputs = source.parse_kernel("reduction", name, "reduction", in_params, out_params)
  for _, param in ipairs(outputs) do
    if POST_NAMES[param.name] then
      raise(("%s: an output cannot be named '%s' (the post-map sees a, index, count and segment "
             .. "as its own)"):format(what, param.name))
    end
  end
  code_text(map_expr, what .. ": map_expr")
  if options ~= nil and type(options) ~= "table" then
    raise(what .. ": options must be a table, got " .. type(options))
  end
  local unknown = unknown_option(options or {}, REDUCTION_OPTIONS)
  if unknown then
    raise(what .. ": " .. unknown)
  end
  local op, combine, identity_text
  if type(reduce_expr) == "string" and ops.named[reduce_expr] then
    op = reduce_expr
    if identity ~= nil then
      raise(("%s: '%s' brings its own identity; pass nil for identity"):format(what, op))
    end
  else
    combine = code_text(reduce_expr, what .. ": reduce_expr (an expression of a and b, or one of "
                        .. ops.NAMES .. ")")
    if type(identity) == "number" then
      identity_text = number_text(identity)
      if not identity_text then
        raise(what .. ": identity must not be NaN")
      end
    elseif type(identity) == "string" and not identity:match("^%s*$") then
      identity_text = identity
    else
      raise(("%s: identity must be a number or a non-empty string of C, got %s"):format(
            what, type(identity)))
    end
  end
  local variables = {}
  for _, param in ipairs(inputs) do
    if param.variable then variables[param.type] = true end
  end
  for _, param in ipairs(outputs) do
    if param.variable then variables[param.type] = true end
  end
  local acc = reduce_type(what, options and rawget(options, "reduce_type"), op, inputs, outputs, variables)
  local post = code_text(post_map_expr ~= "" and post_map_expr or nil, what .. ": post_map_expr", true)
  if not post then
    if #outputs > 1 then
      raise(what .. ": post_map_expr is needed to write several outputs")
    end
    local arg = op and ops.named[op].arg
    post = ("%s = %s;"):format(outputs[1].name, arg and "index + 1" or "a")
  end
  local names = {}
  for index, param in ipairs(outputs) do names[index] = param.name end
  local uses = source.uses(post, names)
  for _, param in ipairs(outputs) do
    if not uses[param.name].mentioned then
      raise(("%s: post_map_expr never mentions output '%s'"):format(what, param.name))
    end
    param.read = uses[param.name].read_first or nil
  end
  local passed_options = {}
  for key, value in pairs(options or {}) do
    if key ~= "reduce_type" then passed_options[key] = value end
  end
  local kernel = reduction.kernel{
    name = name, what = what, inputs = inputs, outputs = outputs, options = passed_options,
    reductions = { { type = acc, map = map_expr, op = op, combine = combine,
                     identity = identity_text, post = post } },
  }
  kernel.in_params, kernel.out_params = in_params, out_params
  kernel.map_expr, kernel.reduce_expr, kernel.post_map_expr = map_expr, reduce_expr, post_map_expr
  kernel.identity = identity
  return kernel
end

-- ---- variants and programs ---------------------------------------------------

local function generate_variant(kernel, signature)
  return { width = rs.vector_width(kernel, signature), programs = {},
           acc_bytes = (rs.accumulator_layout(kernel, signature)) }
end

local function program_of(kernel, variant, family)
  local program = variant.programs[family]
  if not program then
    local text, width = rs.generate(kernel, variant.signature, family)
    program = { source = text, kernel_names = rs.kernel_names(kernel, family, width), devices = {} }
    variant.programs[family] = program
  end
  return program
end

-- The generated source of one family ("full", "segments", "columns") for
-- buffers of the declared dtypes, type variables bound by `bindings`.
function Kernel:source_for(bindings, family)
  family = family or "full"
  if not rs.FAMILIES[family] then
    raise(("%s '%s': source_for: family must be \"full\", \"segments\" or \"columns\", got %s")
          :format(self.kind, self.name, common.quoted(family)))
  end
  return (rs.generate(self, arguments.declared_signature(self, bindings), family))
end

-- Temporaries of `bytes`, zeroed before any kernel can use them: made once
-- (per device and program), never on a builder. These (the blocks'
-- partials and a ticket) belong to the compiled kernel, so calls of one
-- kernel object must not run at the same time (two streams, or a graph
-- replaying while another launch runs).
local function temporaries(kernel, entry, key, bytes, device, target)
  local temp = entry[key]
  if temp then
    return temp
  end
  if type_name(target) == "gpurun.GraphBuilder" then
    raise(("%s '%s' makes its temporaries on its first call of this shape; make that call, or "
           .. "kernel:prepare(...) with the same arguments, before capturing it"):format(
           kernel.kind, kernel.name))
  end
  temp = gpurun.zeros((bytes + 3) // 4, "uint32")
  if temp.device ~= device then
    temp:close()
    raise(("%s '%s': its arguments are on device %d; make that device current for its first call")
          :format(kernel.kind, kernel.name, device))
  end
  -- zeros() is queued on the current stream, which need not be the one the
  -- kernel runs on: wait for it here, once.
  temp:get(1)
  entry[key] = temp
  return temp
end

-- ---- a call's shape ----------------------------------------------------------------

-- What a call's trailing table asks for: "full" with 1 segment, "rows"
-- (axis 2: a result per row), "columns" (axis 1: a result per column) or
-- "offsets". Returns family, segments, rows, cols, offsets buffer.
local function read_shape(kernel, shape, n, device)
  if shape == nil then
    return "full", 1
  end
  local what = kernel.what -- "reduction kernel 'name'", made once
  if not common.is_plain_table(shape) then
    raise(("%s: the argument after the outputs must be a shape table ({ rows =, cols =, axis = } "
           .. "or { offsets = }), got %s"):format(what, type_name(shape)))
  end
  for key in next, shape do
    if not SHAPE_KEYS[key] and not (kernel.extra_shape_keys and kernel.extra_shape_keys[key]) then
      raise(("%s: unknown shape key %s (rows, cols, axis, offsets)"):format(what,
            type(key) == "string" and "'" .. key .. "'" or "of type " .. type(key)))
    end
  end
  local offsets, rows, cols, axis = rawget(shape, "offsets"), rawget(shape, "rows"),
                                    rawget(shape, "cols"), rawget(shape, "axis")
  if offsets ~= nil then
    if rows ~= nil or cols ~= nil or axis ~= nil then
      raise(what .. ": a shape has offsets or rows, cols and axis, not both")
    end
    if type_name(offsets) ~= "gpurun.Buffer" then
      raise(("%s: shape.offsets must be a gpurun.Buffer, got %s"):format(what, type_name(offsets)))
    end
    if not OFFSET_KIND[offsets.dtype] then
      raise(("%s: shape.offsets must be int32, uint32, int64 or uint64, got %s"):format(
            what, offsets.dtype))
    end
    if #offsets < 1 then
      raise(what .. ": shape.offsets needs one entry more than there are segments, got none")
    end
    if offsets.device ~= device then
      raise(("%s: shape.offsets is on device %d, but the inputs are on device %d"):format(
            what, offsets.device, device))
    end
    return "offsets", #offsets - 1, nil, nil, offsets
  end
  if math.type(rows) ~= "integer" or rows < 0 or math.type(cols) ~= "integer" or cols < 0 then
    raise(("%s: a shape needs rows and cols, integers >= 0 (or offsets), got rows = %s, cols = %s")
          :format(what, common.quoted(rows), common.quoted(cols)))
  end
  if rows * cols ~= n or (rows ~= 0 and n // rows ~= cols) then
    raise(("%s: rows * cols (%d * %d) must be the inputs' %d elements"):format(what, rows, cols, n))
  end
  if axis == 2 then
    return "rows", rows, rows, cols
  elseif axis == 1 then
    return "columns", cols, rows, cols
  end
  raise(("%s: shape.axis must be 2 (a result per row) or 1 (a result per column), got %s"):format(
        what, common.quoted(axis)))
end

local FAMILY = { full = "full", rows = "segments", offsets = "segments", columns = "columns" }

local function check_results(kernel, segments, ...)
  for index = kernel.arity - kernel.result_count + 1, kernel.arity do
    local out = select(index, ...)
    if #out ~= segments then
      arguments.param_error(kernel, index, "has %d elements, but this reduction gives %d "
                            .. "(one per %s)", #out, segments, segments == 1 and "call" or "segment")
    end
  end
end

-- ---- launch shapes -----------------------------------------------------------------

local function cached(entry, family, a, b, make, ...)
  local by_family = entry.shapes[family]
  if not by_family then
    by_family = {}
    entry.shapes[family] = by_family
  end
  local by_a = by_family[a]
  if not by_a then
    if entry.shape_count >= 64 then
      entry.shapes, entry.shape_count = { [family] = {} }, 0
      by_family = entry.shapes[family]
    end
    by_a = {}
    by_family[a] = by_a
  end
  local found = by_a[b]
  if not found then
    found = make(...)
    by_a[b] = found
    entry.shape_count = entry.shape_count + 1
  end
  return found
end

local function full_shape(kernel, entry, n, vectorised, width, temp)
  local per_block = kernel.block * kernel.unroll
  local work = vectorised and n // width or n
  return {
    n = gpurun.u64(n), temp = temp,
    kernel = entry.kernels[kernel.name .. (vectorised and "_vec" or "_scalar")],
    config = gpurun.LaunchConfig{ grid = device_code.blocks(entry, work, per_block), block = kernel.block },
  }
end

local function segments_shape(kernel, entry, n, segments, cols)
  local per_warp = n / segments < BLOCK_SEGMENT
  local warps = kernel.block // 32
  return {
    n = gpurun.u64(n), segments = gpurun.u64(segments), cols = cols and gpurun.u64(cols) or ZERO,
    kernel = entry.kernels[kernel.name .. (per_warp and "_segments_warp" or "_segments_block")],
    config = gpurun.LaunchConfig{
      grid = per_warp and device_code.blocks(entry, segments, warps)
             or math.max(1, math.min(segments, entry.max_blocks)),
      block = kernel.block },
  }
end

-- Chunks of rows per column: enough threads to fill the device when the
-- columns alone do not, at least MIN_ROWS_PER_CHUNK rows each.
local function column_chunks(rows, cols, target)
  local chunks = 1
  if cols < target and rows > MIN_ROWS_PER_CHUNK then
    chunks = math.max(1, math.min(target // math.max(cols, 1),
                                  (rows + MIN_ROWS_PER_CHUNK - 1) // MIN_ROWS_PER_CHUNK))
  end
  local per_chunk = math.max(1, (rows + chunks - 1) // chunks)
  return math.max(1, (rows + per_chunk - 1) // per_chunk), per_chunk
end

local function columns_shape(kernel, entry, rows, cols, temp)
  local chunks, per_chunk = column_chunks(rows, cols, entry.multiprocessors * COLUMN_THREADS_PER_SM)
  return {
    n = gpurun.u64(rows * cols), rows = gpurun.u64(rows), cols = gpurun.u64(cols),
    chunks = gpurun.u64(chunks), per_chunk = gpurun.u64(per_chunk), temp = temp,
    kernel = entry.kernels[kernel.name .. "_columns"],
    finish = chunks > 1 and entry.kernels[kernel.name .. "_columns_finish"] or nil,
    config = gpurun.LaunchConfig{ grid = device_code.blocks(entry, chunks * cols, kernel.block),
                                  block = kernel.block },
    -- after the chunks' kernel on the same target: launched as such
    finish_config = select(2, device_code.configs(entry, device_code.blocks(entry, cols, kernel.block),
                                                  kernel.block))
      or gpurun.LaunchConfig{ grid = device_code.blocks(entry, cols, kernel.block), block = kernel.block },
  }
end

-- ---- prepare: everything a launch needs ---------------------------------------------

local function check_n(kernel, n)
  if n == nil then
    raise(("%s '%s' needs an input buffer: its size is the number of elements reduced"):format(
          kernel.kind, kernel.name))
  end
end

-- Returns the launch shape (nil when there is nothing to launch: no
-- segments), its family, the offsets buffer and its kind argument, and
-- whether numbers must be converted.
local function prepare(kernel, target, ...)
  local count = select("#", ...)
  arguments.check_count(kernel, count, 1)
  local n, device, numbers = arguments.read(kernel, ...)
  check_n(kernel, n)
  local shape_kind, segments, rows, cols, offsets = read_shape(kernel,
    count > kernel.arity and select(kernel.arity + 1, ...) or nil, n, device)
  check_results(kernel, segments, ...)
  local variant = arguments.find_variant(kernel, generate_variant, ...)
  local program = program_of(kernel, variant, FAMILY[shape_kind])
  device_code.refuse_capture(kernel, program, device, target)
  local entry = device_code.compiled(kernel, program, device)
  if segments == 0 then
    return nil, shape_kind, nil, nil, numbers
  end
  if shape_kind == "full" then
    local temp = temporaries(kernel, entry, "temp", 16 + entry.max_blocks * variant.acc_bytes,
                             device, target)
    local vectorised = variant.width ~= nil and arguments.aligned(kernel, source.VECTOR_BYTES, ...)
    return cached(entry, "full", n, vectorised, full_shape, kernel, entry, n, vectorised,
                  variant.width, temp), "full", nil, nil, numbers
  elseif shape_kind == "columns" then
    local chunks = column_chunks(rows, cols, entry.multiprocessors * COLUMN_THREADS_PER_SM)
    -- one chunk per column keeps no partials
    local temp = chunks > 1 and temporaries(kernel, entry, "temp",
      16 + entry.multiprocessors * COLUMN_THREADS_PER_SM * variant.acc_bytes, device, target) or nil
    return cached(entry, "columns", rows, cols, columns_shape, kernel, entry, rows, cols, temp),
           "columns", nil, nil, numbers
  end
  local found = cached(entry, shape_kind, n, segments, segments_shape, kernel, entry, n, segments,
                       shape_kind == "rows" and cols or nil)
  return found, shape_kind, offsets, shape_kind == "rows" and ROWS_KIND_ARG
         or OFFSET_KIND_ARG[offsets.dtype], numbers
end

-- The caller's arguments without the shape table, numbers converted, from
-- a table the kernel reuses.
local function plain(kernel, numbers, ...)
  if numbers then
    return arguments.converted(kernel, ...)
  end
  local list = kernel.arguments
  for index = 1, kernel.arity do
    list[index] = select(index, ...)
  end
  return table.unpack(list, 1, kernel.arity)
end

-- The results among the arguments (without the shape table).
local function results(kernel, ...)
  if kernel.result_count == 1 then
    return (select(kernel.arity, ...))
  end
  local list = kernel.arguments
  for index = 1, kernel.arity do
    list[index] = select(index, ...)
  end
  return table.unpack(list, kernel.arity - kernel.result_count + 1, kernel.arity)
end

-- kernel(target, inputs..., outputs... [, shape]) or kernel:launch(...):
-- target is a Stream or a GraphBuilder. Returns the outputs.
--
--   l2(stream, x, rows_out, { rows = R, cols = C, axis = 2 })    -- one per row
--   l2(stream, x, cols_out, { rows = R, cols = C, axis = 1 })    -- one per column
--   l2(stream, x, seg_out, { offsets = offsets })  -- between offsets[s] and offsets[s+1]
function Kernel:launch(target, ...)
  local s, family, offsets, kind, numbers = prepare(self, target, ...)
  if s then
    local launch = gpurun.launch
    if family == "full" then
      launch(target, s.config, s.kernel, s.n, s.temp, plain(self, numbers, ...))
    elseif family == "columns" then
      -- one chunk: the temporaries are never read; the last output stands in
      launch(target, s.config, s.kernel, s.n, s.temp or select(self.arity, ...), s.rows, s.cols,
             s.chunks, s.per_chunk, plain(self, numbers, ...))
      if s.finish then
        launch(target, s.finish_config, s.finish, s.n, s.temp, s.rows, s.cols, s.chunks, s.per_chunk,
               plain(self, numbers, ...))
      end
    else
      -- rows: the offsets pointer is never read; the last output stands in
      launch(target, s.config, s.kernel, s.n, offsets or select(self.arity, ...), s.segments, s.cols,
             kind, plain(self, numbers, ...))
    end
  end
  return results(self, ...)
end
Kernel.__call = Kernel.launch

-- kernel:prepare(inputs..., outputs... [, shape]) compiles and loads what
-- these arguments need and makes its temporaries, without launching (a
-- capture's first call needs that done). Returns the kernel.
function Kernel:prepare(...)
  prepare(self, nil, ...)
  return self
end

-- kernel:bind(inputs..., outputs... [, shape]) -> a list of LaunchPlans
-- with :launch(target) and :close() (and <close>); the arguments checked
-- and packed once.
function Kernel:bind(...)
  local s, family, offsets, kind, numbers = prepare(self, nil, ...)
  local plans = launch_plans.new()
  if s then
    if family == "full" then
      plans[1] = s.kernel:bind(s.config, s.n, s.temp, plain(self, numbers, ...))
    elseif family == "columns" then
      plans[1] = s.kernel:bind(s.config, s.n, s.temp or select(self.arity, ...), s.rows, s.cols,
                               s.chunks, s.per_chunk, plain(self, numbers, ...))
      if s.finish then
        plans[2] = s.finish:bind(s.finish_config, s.n, s.temp, s.rows, s.cols, s.chunks, s.per_chunk,
                                 plain(self, numbers, ...))
      end
    else
      plans[1] = s.kernel:bind(s.config, s.n, offsets or select(self.arity, ...), s.segments, s.cols,
                               kind, plain(self, numbers, ...))
    end
  end
  return plans
end

-- kernel:variant(inputs..., outputs... [, shape]) -> what a call with
-- these arguments would run, without compiling: { family, kernel (its
-- name), vectorised, width, n, segments, source }.
function Kernel:variant(...)
  local count = select("#", ...)
  arguments.check_count(self, count, 1)
  local n, device = arguments.read(self, ...)
  check_n(self, n)
  local shape_kind, segments = read_shape(self, count > self.arity and select(self.arity + 1, ...) or nil,
                                          n, device)
  check_results(self, segments, ...)
  local variant = arguments.find_variant(self, generate_variant, ...)
  local family = FAMILY[shape_kind]
  local program = program_of(self, variant, family)
  local vectorised = family == "full" and variant.width ~= nil
                     and arguments.aligned(self, source.VECTOR_BYTES, ...)
  local name
  if family == "full" then
    name = self.name .. (vectorised and "_vec" or "_scalar")
  elseif family == "segments" then
    name = self.name .. ((segments > 0 and n / segments < BLOCK_SEGMENT) and "_segments_warp"
                         or "_segments_block")
  else
    name = self.name .. "_columns"
  end
  return { family = family, shape = shape_kind, kernel = name, vectorised = vectorised or false,
           width = variant.width, n = n, segments = segments, source = program.source }
end

function Kernel:__tostring()
  return ("gpurun.reduction(%s -> %s: %s)"):format(self.in_params or "?", self.out_params or "?",
                                                    self.name)
end

reduction.Kernel = Kernel

-- Scripts call these (and the kernels' methods) while a builder captures:
-- their errors end the capture as gpurun's own do, whether they came
-- through gpurun.reduction or straight from this module.
gpurun.guard(Kernel)
gpurun.guard(reduction)

return reduction
