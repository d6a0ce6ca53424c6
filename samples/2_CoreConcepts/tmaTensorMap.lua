-- tmaTensorMap.lua: a port of NVIDIA cuda-samples' python/2_CoreConcepts/
-- tmaTensorMap (cuda.core). A TMA tensor map over a buffer goes by value
-- (__grid_constant__) to a kernel that bulk-loads 128-element tiles into
-- shared memory with CCCL's TMA wrappers; the copy is checked against the
-- source, then the same map is pointed at another buffer with
-- replace_address (no new encoding) and checked again. TMA needs compute
-- capability 9.0: an older device is named and the sample exits 0.
--
--   gpurun samples/2_CoreConcepts/tmaTensorMap.lua [--elements N] [--device ID]

local gpurun = require("gpurun")
local args = require("gpurun.args")

local TILE = 128 -- elements per tile and threads per block, as the kernel's TILE

-- NVRTC cannot include <cuda.h>, so the kernel declares the descriptor's
-- layout itself (128 opaque bytes, 64-byte aligned) and hands CCCL a
-- CUtensorMap pointer to it. One thread starts the copy and waits on a
-- shared-memory barrier for its bytes; then every thread writes one element.
local KERNEL = [[
#include <cuda/barrier>

struct __align__(64) TensorMap { unsigned long long opaque[16]; };
constexpr int TILE = 128;

extern "C" __global__ void tma_copy(const __grid_constant__ TensorMap map, float *out, int n)
{
  __shared__ alignas(128) float tile[TILE];
  __shared__ cuda::barrier<cuda::thread_scope_block> ready;
  const int first = blockIdx.x * TILE;
  if (threadIdx.x == 0)
    init(&ready, 1);
  __syncthreads();
  if (threadIdx.x == 0) {
    cuda::device::experimental::cp_async_bulk_tensor_1d_global_to_shared(
        tile, reinterpret_cast<const CUtensorMap *>(&map), first, ready);
    ready.wait(cuda::device::barrier_arrive_tx(ready, 1, sizeof tile));
  }
  __syncthreads();
  const int i = first + threadIdx.x;
  if (threadIdx.x < TILE && i < n)
    out[i] = tile[threadIdx.x];
}
]]

local cli = args.new("tmaTensorMap.lua", "Uses a TMA tensor map to bulk-copy data on Hopper and later GPUs.")
cli:integer_option("--elements", "Total number of float32 elements (a multiple of 128).", 1024, 1)
cli:integer_option("--device", "CUDA device id.", 0, 0)
local options = cli:parse(arg)
if options.elements % TILE ~= 0 then
  cli:usage_error(("--elements must be a multiple of %d, got %d"):format(TILE, options.elements))
end
if options.elements > 2147483647 then
  cli:usage_error(("--elements must fit the kernel's int, got %d"):format(options.elements))
end

local device = cli:open_device(options.device)
local capability = device.compute_capability
print(("GPU %d: %s (compute capability %d.%d)"):format(options.device, device.name,
  capability.major, capability.minor))
if capability.major < 9 then
  print(("TMA needs compute capability 9.0 or later (Hopper); this device is %d.%d. Exiting.")
    :format(capability.major, capability.minor))
  os.exit(0, true)
end

local include = (os.getenv("CUDA_HOME") or "/usr/local/cuda") .. "/include"
local program_options = gpurun.ProgramOptions{ std = "c++17", arch = "sm_" .. device.arch,
  include_paths = { include .. "/cccl", include } }
local code <close> = gpurun.Program(KERNEL, "c++", program_options):compile("cubin")
local tma_copy = code:get_kernel("tma_copy")

local n = options.elements
local tiles = n // TILE
local stream <close> = device:create_stream()
gpurun.set_current_stream(stream)
local config = gpurun.LaunchConfig{ grid = tiles, block = TILE }

-- Copies through the map into a fresh buffer and says whether it equals `expected`.
local function copy_matches(map, expected)
  local out <close> = gpurun.zeros(n, "float32")
  gpurun.launch(stream, config, tma_copy, map, out, n)
  stream:sync()
  return gpurun.compare(out, expected, 0, 0).mismatches == 0
end

-- (1) A descriptor over 0, 1, 2, ... in tiles of TILE elements.
local values = {}
for i = 1, n do values[i] = i - 1 end
local source <close> = gpurun.array(values, "float32")
local map <close> = source:as_tensor_map{ box_dim = { TILE } }
if not copy_matches(map, source) then
  print("TMA copy produced incorrect results")
  os.exit(1, true)
end
print(("TMA copy verified: %d elements across %d tiles"):format(n, tiles))

-- (2) The same descriptor over another buffer of the same layout.
local replacement <close> = gpurun.full(n, 42.0, "float32")
map:replace_address(replacement)
if not copy_matches(map, replacement) then
  print("replace_address produced incorrect results")
  os.exit(1, true)
end
print("replace_address verified: the descriptor reused with a new source buffer")
