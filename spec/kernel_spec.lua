-- gpurun.Kernel's attributes (num_regs, shared/const/local sizes, the
-- dynamic shared memory limit and raising it), occupancy and the suggested
-- block size.
local gpurun = require("gpurun")

local SOURCE = [[
extern "C" __global__ void static_shared(float *out) {
  __shared__ float tile[256];
  tile[threadIdx.x] = (float)threadIdx.x;
  __syncthreads();
  out[threadIdx.x] = tile[255 - threadIdx.x];
}
extern "C" __global__ void dynamic_shared(float *out, int n) {
  extern __shared__ float scratch[];
  for (int i = threadIdx.x; i < n; i += blockDim.x) scratch[i] = (float)i;
  __syncthreads();
  for (int i = threadIdx.x; i < n; i += blockDim.x) out[i] = scratch[n - 1 - i];
}
__constant__ float table[64];
extern "C" __global__ void uses_constant(float *out) { out[threadIdx.x] = table[threadIdx.x % 64]; }
extern "C" __global__ void uses_local(float *out, int k) {
  volatile float local[64]; // volatile: kept in local memory, not folded away
  for (int i = 0; i < 64; i++) local[i] = out[i] + (float)k; // from memory: not foldable
  out[threadIdx.x] = local[(threadIdx.x * k) % 64];
}
extern "C" __global__ void __launch_bounds__(64) bounded(float *out) { out[threadIdx.x] = 1.0f; }
]]

local expect = require("spec.support.expect")
local error_of = expect.error_of
local assert_contains = expect.contains

describe("kernel attributes", function()
  local device, code
  lazy_setup(function()
    device = gpurun.Device(0)
    device:set_current()
    local options = gpurun.ProgramOptions({ std = "c++17", arch = "sm_" .. device.arch })
    code = gpurun.Program(SOURCE, "c++", options):compile("cubin")
  end)
  before_each(function() device:set_current() end)

  it("report registers, static shared, constant and local memory #gpu", function()
    local shared = code:get_kernel("static_shared")
    assert.is_true(shared.num_regs > 0 and shared.num_regs <= 255)
    assert.are.equal(256 * 4, shared.shared_size_bytes)
    assert.are.equal(0, code:get_kernel("dynamic_shared").shared_size_bytes)
    assert.is_true(code:get_kernel("uses_constant").const_size_bytes >= 64 * 4)
    -- The driver's figure leaves out the stack frame a local array lives in
    -- (on the H200 it was under 64 * 4 bytes for uses_local): an integer, and
    -- no smaller than a kernel's with no local array.
    local with_array = code:get_kernel("uses_local").local_size_bytes
    assert.are.equal("integer", math.type(with_array))
    assert.is_true(with_array >= code:get_kernel("bounded").local_size_bytes)
    assert.are.equal(tonumber(device.arch), shared.binary_version)
    assert.is_true(shared.ptx_version >= 10)
    assert.are.equal(64, code:get_kernel("bounded").max_threads_per_block)
  end)

  it("raise the dynamic shared memory limit up to the device's opt-in maximum #gpu", function()
    local kernel = code:get_kernel("dynamic_shared")
    local default = kernel.max_dynamic_shared_size_bytes
    assert.are.equal(default, kernel.max_dynamic_shared_size)
    assert.is_true(default > 0 and default <= 48 * 1024)
    local n = 16384 -- 64 KiB of floats: more than a kernel may use by default
    local out <close> = gpurun.zeros(n, "float32")
    local stream <close> = device:create_stream()
    local config = gpurun.LaunchConfig({ grid = 1, block = 256, shmem_size = n * 4 })
    assert_contains("kernel 'dynamic_shared' may use at most " .. default .. " bytes of dynamic shared memory",
      error_of(gpurun.launch, stream, config, kernel, out, n))
    assert.are.equal(kernel, kernel:set_max_dynamic_shared_size_bytes(n * 4))
    assert.are.equal(n * 4, kernel.max_dynamic_shared_size_bytes)
    gpurun.launch(stream, config, kernel, out, n)
    stream:sync()
    local values = out:to_table(stream)
    assert.are.equal(n - 1, values[1])
    assert.are.equal(0, values[n])

    local optin = device:get_attribute("max_shared_memory_per_block_optin")
    assert.are.equal(optin, device.max_shared_memory_per_block)
    kernel:set_max_dynamic_shared_size_bytes(optin)
    assert.are.equal(optin, kernel.max_dynamic_shared_size_bytes)
    assert_contains(("can use from 0 to %d bytes of dynamic shared memory on device 0"):format(optin),
      error_of(kernel.set_max_dynamic_shared_size_bytes, kernel, optin + 1))
    local static = code:get_kernel("static_shared")
    assert_contains(("from 0 to %d bytes"):format(optin - 1024),
      error_of(static.set_max_dynamic_shared_size_bytes, static, optin))
    kernel:set_max_dynamic_shared_size_bytes(default)
  end)

  it("give the occupancy of a block size and a suggested block size #gpu", function()
    local kernel = code:get_kernel("static_shared")
    local result = kernel:occupancy({ block = 256 })
    assert.is_true(result.max_active_blocks_per_multiprocessor >= 1)
    assert.are.equal(result.max_active_blocks_per_multiprocessor * 8, result.active_warps_per_multiprocessor)
    local max_threads = device:get_attribute("max_threads_per_multiprocessor")
    assert.are.equal(max_threads // 32, result.max_warps_per_multiprocessor)
    assert.are.equal(result.active_warps_per_multiprocessor / result.max_warps_per_multiprocessor,
      result.occupancy)
    assert.is_true(result.occupancy > 0 and result.occupancy <= 1)
    assert.are.same(result, kernel:occupancy({ block = { 16, 16 } }))

    -- Shared memory bounds the blocks: half the multiprocessor's per block leaves room for one.
    local dynamic = code:get_kernel("dynamic_shared")
    local optin = device:get_attribute("max_shared_memory_per_block_optin")
    dynamic:set_max_dynamic_shared_size_bytes(optin)
    assert.are.equal(1, dynamic:occupancy({ block = 32, shmem_size = optin }).max_active_blocks_per_multiprocessor)
    dynamic:set_max_dynamic_shared_size_bytes(48 * 1024)

    local suggestion = kernel:max_potential_block_size()
    assert.is_true(suggestion.max_block_size >= 32 and suggestion.max_block_size <= 1024)
    assert.are.equal(0, suggestion.max_block_size % 32)
    assert.is_true(suggestion.min_grid_size >= device.multiprocessor_count)
    assert.are.same(suggestion, kernel:max_potential_block_size({ shmem_size = 0, block_size_limit = 0 }))
    assert.is_true(kernel:max_potential_block_size({ block_size_limit = 64 }).max_block_size <= 64)
    assert.is_true(code:get_kernel("bounded"):max_potential_block_size().max_block_size <= 64)
  end)

  it("carry the source they were compiled from, where const pointers show #gpu", function()
    local kernel = code:get_kernel("static_shared")
    assert.are.equal(SOURCE, kernel.source)
    assert.truthy(kernel.source:find("void static_shared(float *out)", 1, true))
  end)

  it("are refused once the ObjectCode is closed #gpu", function()
    local options = gpurun.ProgramOptions({ arch = "sm_" .. device.arch })
    local other = gpurun.Program(SOURCE, "c++", options):compile("cubin")
    local kernel = other:get_kernel("static_shared")
    other:close()
    assert_contains("attempt to use a closed gpurun.ObjectCode", error_of(function() return kernel.num_regs end))
    assert_contains("attempt to use a closed gpurun.ObjectCode", error_of(kernel.occupancy, kernel, { block = 32 }))
  end)
end)
