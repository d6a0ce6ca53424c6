-- A generated program compiled and loaded once per device (through
-- gpurun.Program and the kernel cache), and the launch shapes kept for
-- it: what gpurun.elementwise kernels, reductions and scans share.

local gpurun = require("gpurun")
local common = require("gpurun.common")

local raise = common.raise

local device_code = {}

local MAX_THREADS_PER_MULTIPROCESSOR = 39 -- CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR
local MAX_CACHED_SHAPES = 64               -- launch shapes kept per program and device

local type_name = common.type_name

-- Loading code is one of the calls a capture forbids (and it would end
-- it): a first call on a builder is refused, saying what to do instead.
function device_code.refuse_capture(kernel, variant, device_id, target, why)
  if not variant.devices[device_id] and type_name(target) == "gpurun.GraphBuilder" then
    raise(("%s '%s' is compiled on its first call for these dtypes; make that call, or "
           .. "kernel:prepare(...) with the same arguments, before capturing it%s"):format(
           kernel.kind, kernel.name, why or ""))
  end
end

-- The variant's program on device `device_id`: { code, kernels = { [name]
-- = gpurun.Kernel }, multiprocessors, max_blocks (multiprocessors times
-- kernel.blocks_per_sm, or as many blocks of kernel.block threads as every
-- one of its kernels keeps on a multiprocessor at once), device, shapes,
-- programmatic (compute capability 9.0 or more: launches may use
-- programmatic stream serialization, which the kernels wait for) },
-- compiled and loaded on first use. `names` are the kernels to load
-- (default: variant.kernel_names).
--
-- (Why the occupancy and not the thread count: a grid-stride kernel given
-- more blocks than fit at once runs a second, partly empty wave. argmax's
-- 1,056 blocks of 256 on an H200, where its registers leave room for 792,
-- ran 1.33 waves; one timing since, with this, was no faster, 81.5 us at
-- 2^26 against 79.5, so the wave was not what held argmax back.)
function device_code.compiled(kernel, variant, device_id, names)
  local entry = variant.devices[device_id]
  if entry then
    return entry
  end
  local device = gpurun.Device(device_id)
  local options = gpurun.ProgramOptions{ std = "c++17", arch = "sm_" .. device.arch }
  local program = gpurun.Program(variant.source, "c++", options)
  local code = program:compile("cubin", { name = kernel.name .. ".cu" })
  local kernels = {}
  for _, name in ipairs(names or variant.kernel_names) do
    kernels[name] = code:get_kernel(name)
  end
  local per_sm = kernel.blocks_per_sm
  if not per_sm then
    per_sm = device:get_attribute(MAX_THREADS_PER_MULTIPROCESSOR) // kernel.block
    for _, loaded in pairs(kernels) do
      per_sm = math.min(per_sm, loaded:occupancy{ block = kernel.block }.max_active_blocks_per_multiprocessor)
    end
    per_sm = math.max(1, per_sm)
  end
  entry = {
    program = program, code = code, -- kept: the kernels live as long as their code
    kernels = kernels, device = device,
    multiprocessors = device.multiprocessor_count,
    -- (a stand-in device of the emulated specs may not say: then not)
    programmatic = (device.compute_capability or { major = 0 }).major >= 9,
    max_blocks = device.multiprocessor_count * per_sm,
    shapes = {}, shape_count = 0,
  }
  variant.devices[device_id] = entry
  return entry
end

-- entry's shape for `key` (a size), made by make(key) once. The cache
-- starts again past MAX_CACHED_SHAPES keys (what a graph captured from an
-- older shape uses, it keeps itself).
function device_code.shape(entry, key, make, ...)
  local found = entry.shapes[key]
  if found then
    return found
  end
  if entry.shape_count >= MAX_CACHED_SHAPES then
    entry.shapes, entry.shape_count = {}, 0
  end
  found = make(key, ...)
  entry.shapes[key] = found
  entry.shape_count = entry.shape_count + 1
  return found
end

-- A launch configuration of `grid` blocks of `block` threads, and the same
-- with programmatic stream serialization where the device takes it (else
-- nil): both made once per shape, so that a launch makes neither.
function device_code.configs(entry, grid, block)
  local plain = gpurun.LaunchConfig{ grid = grid, block = block }
  return plain, entry.programmatic and gpurun.LaunchConfig{
    grid = grid, block = block, programmatic_stream_serialization = true } or nil
end

-- Blocks for `work` items at `per_block` a block: at least one, at most
-- entry.max_blocks.
function device_code.blocks(entry, work, per_block)
  return math.max(1, math.min((work + per_block - 1) // per_block, entry.max_blocks))
end

return device_code
