-- Elementwise kernels in CuPy's shape, and pipelines of them fused into one.
--
--   local ew = require("gpurun.compute.elementwise")   -- ew(...) is ew.elementwise(...)
--   local axpby = ew.elementwise("float32 x, float32 y, float32 a", "float32 r",
--                                "r = a * x + y", "axpby")
--   axpby(stream, x, y, gpurun.f32(2), r)      -- or a graph builder; buffers of one size
--   print(axpby.source)                          -- the generated CUDA C
--
--   local pipe = ew.pipeline("float32 a, float32 b, float32 c",
--                            { "float32 r1 = a + b", "float32 r2 = r1 * c", "float32 r3 = r2 - a" },
--                            "r3", "pipeline")  -- r1, r2 not wanted: one fused kernel
--   pipe(stream, a, b, c, r3)
--
-- A kernel is generated and compiled (through gpurun.Program and the kernel
-- cache) on first use for each signature (the dtypes of the arguments, and
-- which inputs are scalars) and device. Each signature has a kernel with
-- 16-byte loads and stores, used when all buffers share one element size
-- and are 16-byte aligned, and a scalar one for the rest. The operation
-- sees each parameter by name, the element index `i` and the size `n`; type
-- variables (`T x`) are bound from the arguments and usable in it as types.
--
-- Inputs are gpurun.Buffers or scalars: a typed scalar (gpurun.f32(x),
-- checked against the parameter's dtype; for an 8- or 16-bit integer, the
-- 32-bit one of its kind does too, range-checked) or a Lua number (converted
-- by gpurun's one rule, base/dtype.c's; that creates a typed scalar per
-- call, so pass typed ones in loops). Every dtype of gpurun.dtypes works,
-- float16 and bfloat16 computed in float (elementwise_source.lua).
-- Outputs are buffers. An output is read from memory first only if the
-- operation's first mention of it is not a plain `r = ...` statement.
-- With buffers only, a call allocates nothing once its size has been seen.

local gpurun = require("gpurun")
local source = require("gpurun.compute.elementwise_source")

local DTYPES = source.DTYPES
local SCALAR_TAG = {}  -- dtype -> the lookup key of a scalar of it
-- An 8- or 16-bit integer dtype -> the 32-bit one of its kind, whose typed
-- scalar it takes too (gpurun.i32 for int8).
local WIDE_SCALAR = {}
for dtype, info in pairs(DTYPES) do
  SCALAR_TAG[dtype] = dtype .. " scalar"
  for wide, wide_info in pairs(DTYPES) do
    if not info.float and info.size < 4 and wide_info.kind == info.kind and wide_info.size == 4 then
      WIDE_SCALAR[dtype] = wide
    end
  end
end

local MAX_THREADS_PER_MULTIPROCESSOR = 39 -- CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR
local MAX_CACHED_SIZES = 64                -- launch shapes kept per kernel and device

local elementwise = {}

local Kernel = {}
Kernel.__index = Kernel

local function type_name(value)
  local meta = getmetatable(value)
  return type(meta) == "table" and type(meta.__name) == "string" and meta.__name or type(value)
end

local raise = source.raise

local function param_error(kernel, index, fmt, ...)
  local param = kernel.params[index]
  raise(("elementwise kernel '%s' %s %d (%s %s): "):format(kernel.name,
        param.output and "output" or "input", param.output and index - kernel.input_count or index,
        param.type, param.name) .. fmt:format(...))
end

local KERNEL_OPTIONS = { "block", "unroll", "blocks_per_sm", "preamble" }

local function check_options(options, what, known)
  options = options or {}
  if type(options) ~= "table" then
    raise(what .. ": options must be a table, got " .. type(options))
  end
  local unknown = require("gpurun.options").unknown(options, known or KERNEL_OPTIONS)
  if unknown then raise(what .. ": " .. unknown) end
  local function integer(key, low, high, default)
    local value = options[key]
    if value == nil then
      return default
    end
    if math.type(value) ~= "integer" or value < low or value > high then
      raise(("%s: options.%s must be an integer from %d to %d, got %s"):format(
            what, key, low, high, tostring(value)))
    end
    return value
  end
  local block = integer("block", 32, 1024, 256)
  if block % 32 ~= 0 then
    raise(("%s: options.block must be a multiple of 32, got %d"):format(what, block))
  end
  local preamble = options.preamble or ""
  if type(preamble) ~= "string" then
    raise(what .. ": options.preamble must be a string")
  end
  return {
    block = block,
    unroll = integer("unroll", 1, 8, 1),
    blocks_per_sm = integer("blocks_per_sm", 1, 64, nil),
    preamble = preamble,
  }
end

-- elementwise(in_params, out_params, operation [, name [, options]]) -> kernel.
-- options: block (threads per block, 256), blocks_per_sm (default: as many
-- as the device runs at once), unroll (vectors per thread per loop step, 1),
-- preamble (C++ placed before the kernels).
function elementwise.elementwise(in_params, out_params, operation, name, options)
  name = name or "kernel"
  if not source.is_identifier(name) or name:sub(1, 1) == "_" then
    raise(("elementwise: the name must be a C identifier not starting with '_', got %s"):format(
          tostring(name)))
  end
  local what = ("elementwise kernel '%s'"):format(name)
  local inputs, in_error = source.parse_params(in_params, what .. " in_params")
  if not inputs then
    raise(in_error)
  end
  local outputs, out_error = source.parse_params(out_params, what .. " out_params")
  if not outputs then
    raise(out_error)
  end
  if #outputs == 0 then
    raise(what .. ": out_params names no output")
  end
  if type(operation) ~= "string" or operation:match("^%s*$") then
    raise(what .. ": the operation must be a non-empty string of CUDA C")
  end
  local kernel = setmetatable({
    name = name, operation = operation, in_params = in_params, out_params = out_params,
    params = {}, input_count = #inputs, type_variables = {},
    variants = {}, bound = {}, arguments = {}, scalars = {},
  }, Kernel)
  for k, v in pairs(check_options(options, what)) do
    kernel[k] = v
  end
  local seen, output_names, variables = {}, {}, {}
  for index, param in ipairs(inputs) do
    kernel.params[index] = param
  end
  for _, param in ipairs(outputs) do
    param.output = true
    kernel.params[#kernel.params + 1] = param
    output_names[#output_names + 1] = param.name
  end
  for _, param in ipairs(kernel.params) do
    if seen[param.name] then
      raise(("%s: parameter name '%s' is used twice"):format(what, param.name))
    end
    seen[param.name] = true
    if param.variable and not variables[param.type] then
      variables[param.type] = true
      kernel.type_variables[#kernel.type_variables + 1] = param.type
    end
  end
  local uses = source.uses(operation, output_names)
  for _, param in ipairs(kernel.params) do
    if param.output then
      if not uses[param.name].mentioned then
        raise(("%s: the operation never mentions output '%s'"):format(what, param.name))
      end
      param.read = uses[param.name].read_first or nil
    end
  end
  kernel.arity = #kernel.params
  if #kernel.type_variables == 0 then
    kernel.source = kernel:source_for({})
  end
  return kernel
end

-- The generated source for every argument a buffer of its declared dtype,
-- type variables bound by `bindings` ({ T = "float64" }).
function Kernel:source_for(bindings)
  local signature = { dtypes = {}, scalar = {}, bindings = {} }
  for _, variable in ipairs(self.type_variables) do
    local dtype = bindings and bindings[variable]
    if not DTYPES[dtype] then
      raise(("elementwise kernel '%s': source_for needs a dtype for %s (one of %s)"):format(
            self.name, variable, source.DTYPE_NAMES))
    end
    signature.bindings[variable] = dtype
  end
  for index, param in ipairs(self.params) do
    signature.dtypes[index] = param.variable and signature.bindings[param.type] or param.type
  end
  return (source.generate(self, signature))
end

-- ---- a call's arguments -> its variant ------------------------------------

-- What carried a dtype, for messages only (building it allocates).
local function carrier(dtype, scalar_type)
  return scalar_type and "gpurun." .. scalar_type or "a " .. dtype .. " buffer"
end

-- Binds or checks the dtype of argument `index`: `dtype` is what the buffer
-- or the typed scalar (of scalar_type) carries.
local function match_dtype(kernel, index, dtype, scalar_type)
  local param = kernel.params[index]
  if param.variable then
    local bound = kernel.bound[param.type]
    if bound == nil then
      kernel.bound[param.type] = dtype
    elseif bound ~= dtype then
      param_error(kernel, index, "%s is %s, but %s is %s here", param.type, bound,
                  carrier(dtype, scalar_type), dtype)
    end
  elseif param.type ~= dtype then
    param_error(kernel, index, "expected %s, got %s", param.type, carrier(dtype, scalar_type))
  end
end

-- The dtype a typed scalar of `dtype` counts as for a parameter of
-- param_dtype: its own, or param_dtype for the 32-bit scalar of an 8- or
-- 16-bit integer's kind.
local function scalar_dtype_for(param_dtype, dtype)
  if param_dtype and WIDE_SCALAR[param_dtype] == dtype then
    return param_dtype
  end
  return dtype
end

local function dtype_of(kernel, index)
  local param = kernel.params[index]
  return param.variable and kernel.bound[param.type] or param.type
end

-- A number as the typed scalar its parameter takes, made by gpurun's one
-- rule (the scalar's constructor, base/dtype.c's), or an error that gives
-- the constructor's reason ("300 out of range for uint8 (0..255)").
local function scalar_for(kernel, index, value)
  local ok, scalar = pcall(gpurun[DTYPES[dtype_of(kernel, index)].scalar], value)
  if not ok then
    local why = tostring(scalar)
    param_error(kernel, index, "%s", why:match("bad argument #1 to '[^']*' %((.*)%)$") or why)
  end
  return scalar
end

-- First pass over the arguments: their kinds, dtypes, sizes and the type
-- variables they bind. Returns n, the device and whether a Lua number is
-- among them.
local function read_arguments(kernel, ...)
  local bound = kernel.bound
  for _, variable in ipairs(kernel.type_variables) do
    bound[variable] = nil
  end
  local n, device, numbers, first
  for index = 1, kernel.arity do
    local param = kernel.params[index]
    local arg = select(index, ...)
    local kind = type_name(arg)
    if kind == "gpurun.Buffer" then
      local dtype = arg.dtype
      match_dtype(kernel, index, dtype)
      local size = #arg
      if n == nil then
        n, device, first = size, arg.device, param
      elseif size ~= n then
        param_error(kernel, index, "has %d elements, but %s has %d",
                    size, first.name, n)
      elseif arg.device ~= device then
        param_error(kernel, index, "is on device %d, but %s is on device %d",
                    arg.device, first.name, device)
      end
    elseif param.output then
      param_error(kernel, index, "an output must be a gpurun.Buffer, got %s", kind)
    elseif kind == "gpurun.Scalar" then
      local wanted = param.variable and bound[param.type] or param.type
      local dtype = scalar_dtype_for(wanted, arg.dtype)
      match_dtype(kernel, index, dtype, arg.type)
      numbers = numbers or dtype ~= arg.dtype -- a 32-bit scalar to narrow
    elseif kind == "number" then
      numbers = true
    else
      param_error(kernel, index, "a gpurun.Buffer, a gpurun scalar or a number "
                  .. "expected, got %s", kind)
    end
  end
  -- Numbers, and 32-bit scalars for narrower parameters, become the typed
  -- scalars the launch passes (kernel.scalars, for converted()).
  if numbers then
    for index = 1, kernel.arity do
      local param = kernel.params[index]
      local arg = select(index, ...)
      kernel.scalars[index] = nil
      if type(arg) == "number" then
        if param.variable and not bound[param.type] then
          param_error(kernel, index, "a Lua number does not say what %s is: pass a "
                      .. "buffer or a typed scalar (gpurun.f32(x), ...) for a %s parameter",
                      param.type, param.type)
        end
        kernel.scalars[index] = scalar_for(kernel, index, arg)
      elseif type_name(arg) == "gpurun.Scalar" and arg.dtype ~= dtype_of(kernel, index) then
        kernel.scalars[index] = scalar_for(kernel, index, arg.value)
      end
    end
  end
  return n, device, numbers
end


-- The variant for this call's signature: a tree with one level per
-- parameter, keyed by dtype (or "<dtype> scalar"), so that finding it
-- builds no string.
local function find_variant(kernel, ...)
  local node = kernel.variants
  for index = 1, kernel.arity do
    local dtype = dtype_of(kernel, index)
    local tag = type_name(select(index, ...)) == "gpurun.Buffer" and dtype or SCALAR_TAG[dtype]
    local child = node[tag]
    if not child then
      child = {}
      node[tag] = child
    end
    node = child
  end
  local variant = node.variant
  if not variant then
    local signature = { dtypes = {}, scalar = {}, bindings = {} }
    for index = 1, kernel.arity do
      signature.dtypes[index] = dtype_of(kernel, index)
      signature.scalar[index] = type_name(select(index, ...)) ~= "gpurun.Buffer" or nil
    end
    for _, variable in ipairs(kernel.type_variables) do
      signature.bindings[variable] = kernel.bound[variable]
    end
    local text, width = source.generate(kernel, signature)
    variant = { signature = signature, source = text, width = width, devices = {} }
    node.variant = variant
  end
  return variant
end

-- Whether this call's buffers allow the variant's vector kernel.
local function vectorisable(kernel, variant, ...)
  if not variant.width then
    return false
  end
  for index = 1, kernel.arity do
    local arg = select(index, ...)
    if type_name(arg) == "gpurun.Buffer" and arg.ptr % source.VECTOR_BYTES ~= 0 then
      return false
    end
  end
  return true
end

-- ---- compiled kernels and launch shapes -------------------------------------

local function compiled(kernel, variant, device_id)
  local entry = variant.devices[device_id]
  if entry then
    return entry
  end
  local device = gpurun.Device(device_id)
  local options = gpurun.ProgramOptions{ std = "c++17", arch = "sm_" .. device.arch }
  local program = gpurun.Program(variant.source, "c++", options)
  local code = program:compile("cubin", { name = kernel.name .. ".cu" })
  local per_sm = kernel.blocks_per_sm
    or math.max(1, device:get_attribute(MAX_THREADS_PER_MULTIPROCESSOR) // kernel.block)
  entry = {
    program = program, code = code, -- kept: the kernels live as long as their code
    scalar = code:get_kernel(kernel.name .. "_scalar"),
    vec = variant.width and code:get_kernel(kernel.name .. "_vec") or nil,
    max_blocks = device.multiprocessor_count * per_sm,
    shapes = {}, shape_count = 0,
  }
  variant.devices[device_id] = entry
  return entry
end

local function blocks(kernel, entry, work)
  local per_block = kernel.block * kernel.unroll
  return math.max(1, math.min((work + per_block - 1) // per_block, entry.max_blocks))
end

-- The launch configurations and the n argument for size n, made once.
local function shape(kernel, variant, entry, n)
  local found = entry.shapes[n]
  if found then
    return found
  end
  if entry.shape_count >= MAX_CACHED_SIZES then
    entry.shapes, entry.shape_count = {}, 0
  end
  found = {
    n = gpurun.u64(n),
    scalar = gpurun.LaunchConfig{ grid = blocks(kernel, entry, n), block = kernel.block },
    -- blocks() gives at least one block, more threads than any tail
    vec = variant.width and gpurun.LaunchConfig{ grid = blocks(kernel, entry, n // variant.width),
                                                 block = kernel.block } or nil,
  }
  entry.shapes[n] = found
  entry.shape_count = entry.shape_count + 1
  return found
end

-- Everything a launch needs: the kernel to launch, its configuration, the
-- n argument, and whether numbers must be converted first.
local function check_count(kernel, ...)
  local count = select("#", ...)
  if count ~= kernel.arity then
    local names = {}
    for index, param in ipairs(kernel.params) do
      names[index] = param.name
    end
    raise(("elementwise kernel '%s' takes %d argument%s (%s), got %d")
          :format(kernel.name, kernel.arity, kernel.arity == 1 and "" or "s",
                  table.concat(names, ", "), count))
  end
end

local function prepare(kernel, target, ...)
  check_count(kernel, ...)
  local n, device, numbers = read_arguments(kernel, ...)
  local variant = find_variant(kernel, ...)
  -- Loading code is one of the calls a capture forbids (and it would end it).
  if not variant.devices[device] and type_name(target) == "gpurun.GraphBuilder" then
    raise(("elementwise kernel '%s' is compiled on its first call for these dtypes; make that "
           .. "call, or kernel:prepare(...) with the same arguments, before capturing it"):format(
           kernel.name))
  end
  local entry = compiled(kernel, variant, device)
  local found = shape(kernel, variant, entry, n)
  if vectorisable(kernel, variant, ...) then
    return entry.vec, found.vec, found.n, numbers
  end
  return entry.scalar, found.scalar, found.n, numbers
end

-- The arguments with every Lua number (and 32-bit scalar for a narrower
-- parameter) replaced by the typed scalar read_arguments made, in a table
-- the kernel reuses.
local function converted(kernel, ...)
  local arguments, scalars = kernel.arguments, kernel.scalars
  for index = 1, kernel.arity do
    arguments[index] = scalars[index] or select(index, ...)
    scalars[index] = nil
  end
  return table.unpack(arguments, 1, kernel.arity)
end

-- kernel(target, inputs..., outputs...) or kernel:launch(...): target is a
-- stream or a graph builder. Returns the outputs.
function Kernel:launch(target, ...)
  local cuda_kernel, config, n, numbers = prepare(self, target, ...)
  if numbers then
    gpurun.launch(target, config, cuda_kernel, n, converted(self, ...))
  else
    gpurun.launch(target, config, cuda_kernel, n, ...)
  end
  return select(self.input_count + 1, ...)
end
Kernel.__call = Kernel.launch

-- kernel:bind(inputs..., outputs...) -> a gpurun.LaunchPlan: the arguments
-- checked and packed once, then plan:launch(stream or builder).
function Kernel:bind(...)
  local cuda_kernel, config, n, numbers = prepare(self, nil, ...)
  if numbers then
    return cuda_kernel:bind(config, n, converted(self, ...))
  end
  return cuda_kernel:bind(config, n, ...)
end

-- kernel:prepare(inputs..., outputs...) compiles and loads the kernel these
-- arguments need, without launching it: what a capture's first call needs
-- done beforehand. Returns the kernel.
function Kernel:prepare(...)
  prepare(self, nil, ...)
  return self
end

-- kernel:node_arguments(inputs..., outputs...) -> { { kernel = gpurun.Kernel,
-- args = { n, ... } } }: the launch a call with these arguments makes (the
-- compiled kernel and every argument it passes, numbers typed), for
-- Graph:set_args on the node a capture of it made.
function Kernel:node_arguments(...)
  local cuda_kernel, _, n, numbers = prepare(self, nil, ...)
  if numbers then
    return { { kernel = cuda_kernel, args = { n, converted(self, ...) } } }
  end
  return { { kernel = cuda_kernel, args = { n, ... } } }
end

-- kernel:variant(inputs..., outputs...) -> what a call with these arguments
-- would run, without compiling or launching: { kernel = "<name>_vec" or
-- "<name>_scalar", vectorised = bool, width = elements per access or nil,
-- n = elements, source = the program's text }.
function Kernel:variant(...)
  check_count(self, ...)
  local n = read_arguments(self, ...)
  local variant = find_variant(self, ...)
  local vectorised = vectorisable(self, variant, ...)
  return {
    kernel = self.name .. (vectorised and "_vec" or "_scalar"),
    vectorised = vectorised, width = variant.width, n = n, source = variant.source,
  }
end

function Kernel:__tostring()
  return ("gpurun.elementwise(%s -> %s: %s)"):format(self.in_params, self.out_params, self.name)
end

elementwise.Kernel = Kernel
elementwise.pipeline = require("gpurun.compute.elementwise_pipeline").constructor(elementwise.elementwise)

-- The module is callable too, so that installed as gpurun.elementwise it is
-- both gpurun.elementwise(...) and gpurun.elementwise.pipeline(...).
-- Scripts call these (and the kernels' methods) while a builder captures:
-- their errors end the capture as gpurun's own do, whether they came
-- through gpurun.elementwise or straight from this module.
gpurun.guard(Kernel)
gpurun.guard(elementwise)

return setmetatable(elementwise, {
  __call = function(_, ...)
    return elementwise.elementwise(...)
  end,
})
