-- Elementwise kernels in CuPy's shape, and pipelines of them fused into one:
-- what gpurun.elementwise runs (docs/elementwise.md). A kernel's CUDA C is
-- elementwise_source's, its arguments are read by arguments.lua, and its
-- pipelines are elementwise_pipeline's; this file compiles and launches.
--
--   local ew = require("gpurun.compute.elementwise")   -- ew(...) is ew.elementwise(...)
--   local axpby = ew.elementwise("float32 x, float32 y, float32 a", "float32 r",
--                                "r = a * x + y", "axpby")
--   axpby(stream, x, y, gpurun.f32(2), r)      -- or a graph builder; buffers of one size

local gpurun = require("gpurun")
local common = require("gpurun.common")
local source = require("gpurun.compute.elementwise_source")
local arguments = require("gpurun.compute.arguments")
local device_code = require("gpurun.compute.device_code")
local kernel_options = require("gpurun.compute.kernel_options")
local elementwise_pipeline = require("gpurun.compute.elementwise_pipeline")

local elementwise = {}

local Kernel = {}
Kernel.__index = Kernel

local raise = common.raise

-- The options every generated kernel takes, and their check (shared with
-- reductions: gpurun.compute.kernel_options).
elementwise.KERNEL_OPTIONS = kernel_options.NAMES
elementwise.check_options = kernel_options.check
local check_options = kernel_options.check

-- elementwise(in_params, out_params, operation [, name [, options]]) -> kernel.
--
-- A kernel is generated and compiled (through gpurun.Program and the kernel
-- cache) on first use for each signature (the dtypes of the arguments, and
-- which inputs are scalars) and device. Each signature has a kernel with
-- 16-byte loads and stores, used when all buffers share one element size
-- and are 16-byte aligned, and a scalar one for the rest. The operation
-- sees each parameter by name, the element index `i` and the size `n`; type
-- variables (`T x`) are bound from the arguments and usable in it as types.
-- print(kernel.source) shows the generated CUDA C.
--
-- options: block (threads per block, 256), blocks_per_sm (default: as many
-- as the device runs at once), unroll (vectors per thread per loop step, 1),
-- preamble (C++ placed before the kernels), cache ("default", or
-- "streaming": the vector kernel's 16-byte loads and stores carry the
-- evict-first hint, ld.global.cs / st.global.cs, for data touched once).
function elementwise.elementwise(in_params, out_params, operation, name, options)
  local what, inputs, outputs
  name, what, inputs, outputs = source.parse_kernel("elementwise", name, "kernel", in_params, out_params)
  if type(operation) ~= "string" or operation:match("^%s*$") then
    raise(what .. ": the operation must be a non-empty string of CUDA C")
  end
  local kernel = setmetatable({
    kind = "elementwise kernel",
    name = name, operation = operation, in_params = in_params, out_params = out_params,
    params = {}, input_count = #inputs, type_variables = {},
    variants = {}, bound = {}, arguments = {}, scalars = {},
  }, Kernel)
  for k, v in pairs(check_options(options, what)) do
    kernel[k] = v
  end
  local output_names = {}
  for index, param in ipairs(inputs) do
    kernel.params[index] = param
  end
  for _, param in ipairs(outputs) do
    param.output = true
    kernel.params[#kernel.params + 1] = param
    output_names[#output_names + 1] = param.name
  end
  arguments.collect(kernel, what)
  local uses = source.uses(operation, output_names)
  for _, param in ipairs(kernel.params) do
    if param.output then
      if not uses[param.name].mentioned then
        raise(("%s: the operation never mentions output '%s'"):format(what, param.name))
      end
      param.read = uses[param.name].read_first or nil
    end
  end
  if #kernel.type_variables == 0 then
    kernel.source = kernel:source_for({})
  end
  return kernel
end

-- The generated source for every argument a buffer of its declared dtype,
-- type variables bound by `bindings` ({ T = "float64" }).
function Kernel:source_for(bindings)
  return (source.generate(self, arguments.declared_signature(self, bindings)))
end

-- ---- a call's arguments -> its variant ------------------------------------

local function generate(kernel, signature)
  local text, width = source.generate(kernel, signature)
  local names = { kernel.name .. "_scalar" }
  if width then
    names[2] = kernel.name .. "_vec"
  end
  return { source = text, width = width, kernel_names = names }
end

-- Whether this call's buffers allow the variant's vector kernel.
local function vectorisable(kernel, variant, ...)
  return variant.width ~= nil and arguments.aligned(kernel, source.VECTOR_BYTES, ...)
end

-- ---- compiled kernels and launch shapes -------------------------------------

-- The launch configurations and the n argument for size n, made once:
-- each with programmatic stream serialization too (scalar_after, vec_after)
-- on devices that take it, else the plain one again.
local function make_shape(n, kernel, variant, entry)
  local per_block = kernel.block * kernel.unroll
  local shape = { n = gpurun.u64(n) }
  shape.scalar, shape.scalar_after = device_code.configs(entry, device_code.blocks(entry, n, per_block),
                                                         kernel.block)
  if variant.width then
    -- blocks() gives at least one block, more threads than any tail
    shape.vec, shape.vec_after = device_code.configs(entry,
      device_code.blocks(entry, n // variant.width, per_block), kernel.block)
  end
  shape.scalar_after = shape.scalar_after or shape.scalar
  shape.vec_after = shape.vec_after or shape.vec
  return shape
end

-- Everything a launch needs: the kernel to launch, its configuration (with
-- programmatic stream serialization when `after_kernel`), the n argument,
-- and whether numbers must be converted first.
local function prepare(kernel, target, after_kernel, ...)
  arguments.check_count(kernel, select("#", ...))
  local n, device, numbers = arguments.read(kernel, ...)
  local variant = arguments.find_variant(kernel, generate, ...)
  device_code.refuse_capture(kernel, variant, device, target)
  local entry = device_code.compiled(kernel, variant, device)
  local found = device_code.shape(entry, n, make_shape, kernel, variant, entry)
  if vectorisable(kernel, variant, ...) then
    return entry.kernels[kernel.name .. "_vec"], after_kernel and found.vec_after or found.vec,
           found.n, numbers
  end
  return entry.kernels[kernel.name .. "_scalar"], after_kernel and found.scalar_after or found.scalar,
         found.n, numbers
end

local function launch(kernel, target, after_kernel, ...)
  local cuda_kernel, config, n, numbers = prepare(kernel, target, after_kernel, ...)
  if numbers then
    gpurun.launch(target, config, cuda_kernel, n, arguments.converted(kernel, ...))
  else
    gpurun.launch(target, config, cuda_kernel, n, ...)
  end
  return select(kernel.input_count + 1, ...)
end

-- kernel(target, inputs..., outputs...) or kernel:launch(...): target is a
-- stream or a graph builder. Returns the outputs.
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
function Kernel:launch(target, ...)
  return launch(self, target, false, ...)
end
Kernel.__call = Kernel.launch

-- kernel:launch_after_kernel(target, ...): kernel:launch(target, ...) for
-- where the node before it on the target is a kernel (a declared
-- pipeline's plan says where): with programmatic stream serialization on
-- devices of compute capability 9.0 and up, so that its launch overlaps
-- the end of the kernel before, which its generated code waits for.
function Kernel:launch_after_kernel(target, ...)
  return launch(self, target, true, ...)
end

-- kernel:bind(inputs..., outputs...) -> a gpurun.LaunchPlan: the arguments
-- checked and packed once, then plan:launch(stream or builder).
function Kernel:bind(...)
  local cuda_kernel, config, n, numbers = prepare(self, nil, false, ...)
  if numbers then
    return cuda_kernel:bind(config, n, arguments.converted(self, ...))
  end
  return cuda_kernel:bind(config, n, ...)
end

-- kernel:prepare(inputs..., outputs...) compiles and loads the kernel these
-- arguments need, without launching it: what a capture's first call needs
-- done beforehand. Returns the kernel.
function Kernel:prepare(...)
  prepare(self, nil, false, ...)
  return self
end

-- kernel:node_arguments(inputs..., outputs...) -> { { kernel = gpurun.Kernel,
-- args = { n, ... } } }: the launch a call with these arguments makes (the
-- compiled kernel and every argument it passes, numbers typed), for
-- Graph:set_args on the node a capture of it made.
function Kernel:node_arguments(...)
  local cuda_kernel, _, n, numbers = prepare(self, nil, false, ...)
  if numbers then
    return { { kernel = cuda_kernel, args = { n, arguments.converted(self, ...) } } }
  end
  return { { kernel = cuda_kernel, args = { n, ... } } }
end

-- kernel:variant(inputs..., outputs...) -> what a call with these arguments
-- would run, without compiling or launching: { kernel = "<name>_vec" or
-- "<name>_scalar", vectorised = bool, width = elements per access or nil,
-- n = elements, source = the program's text }.
function Kernel:variant(...)
  arguments.check_count(self, select("#", ...))
  local n = arguments.read(self, ...)
  local variant = arguments.find_variant(self, generate, ...)
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
-- Stages fused into one kernel where their intermediates are not wanted
-- (elementwise_pipeline.lua says how):
--
--   local pipe = ew.pipeline("float32 a, float32 b, float32 c",
--                            { "float32 r1 = a + b", "float32 r2 = r1 * c", "float32 r3 = r2 - a" },
--                            "r3", "pipeline")  -- r1, r2 not wanted: one fused kernel
--   pipe(stream, a, b, c, r3)
elementwise.pipeline = elementwise_pipeline.constructor(elementwise.elementwise, kernel_options.NAMES)

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
