-- numpyVsCupy.lua: a port of NVIDIA cuda-samples' python/1_GettingStarted/
-- numpyVsCupy (cuda.core, CuPy and NumPy). Two n x n float64 matrices of
-- uniform draws made on the host, copied to the device and multiplied there
-- (gpurun.matmul, cuBLAS, where the original calls cupy.dot), the copy and
-- the product each timed with events on the stream. The original times
-- NumPy's whole product on the CPU; Lua has no CPU BLAS, so the host here
-- computes --samples entries of the product (timed, and said so) and the
-- device's result is checked against them.
--
--   gpurun samples/1_GettingStarted/numpyVsCupy.lua [-n 4096] [--samples 256] [--device 0]

local gpurun = require("gpurun")
local args = require("gpurun.args")
local check = require("gpurun.check")

local cli = args.new("numpyVsCupy.lua", "A host product against gpurun.matmul on the GPU.")
cli:integer_option("-n --n_size", "Size of the matrix (n * n).", 4096)
cli:integer_option("--samples", "Entries of the product computed on the host to check against.", 256)
cli:integer_option("--device", "CUDA device id.", 0, 0)
local options = cli:parse(arg)
local n = options.n_size

local device = cli:open_device(options.device)
print()
print(("Device Name: %s, SM: %d.%d"):format(device.name, device.compute_capability.major,
                                           device.compute_capability.minor))
print()
local stream <close> = device:create_stream()
gpurun.set_current_stream(stream)

-- Seconds between two events recorded around what run() queues.
local function gpu_seconds(run)
  local start = stream:record()
  run()
  local stop = stream:record()
  stop:sync()
  return stop:elapsed_ms(start) / 1000
end

-- The first product opens cuBLAS and makes the stream's handle.
print("Warmup...")
local ones = gpurun.matrix(gpurun.full(16 * 16, 1, "float64"), 16, 16)
gpurun.matmul(ones, ones, { stream = stream })
stream:sync()

local rng = gpurun.default_rng(1)
local a_host, b_host = rng:random_table(n * n), rng:random_table(n * n)

-- The host's entries: row i of a against column j of b, for --samples
-- (i, j) pairs drawn from the same generator.
local draws = rng:random_table(2 * options.samples)
local picks, expected = {}, {}
local host_start = gpurun.perf_counter()
for s = 1, options.samples do
  local i, j = math.floor(draws[2 * s - 1] * n), math.floor(draws[2 * s] * n)
  local sum, row = 0.0, i * n
  for k = 0, n - 1 do sum = sum + a_host[row + k + 1] * b_host[k * n + j + 1] end
  picks[s], expected[s] = i * n + j + 1, sum
end
print(("Host (Lua) dot of %d sampled entries of %d*%d arrays:  %.6f seconds"):format(
  options.samples, n, n, gpurun.perf_counter() - host_start))

local a = gpurun.matrix(gpurun.empty(n * n, "float64"), n, n)
local b = gpurun.matrix(gpurun.empty(n * n, "float64"), n, n)
print(("Transfer arrays to GPU:  %.6f seconds"):format(gpu_seconds(function()
  a.buffer:copy_from(a_host, stream)
  b.buffer:copy_from(b_host, stream)
end)))

local c = gpurun.matrix(gpurun.empty(n * n, "float64"), n, n)
local product_options = { out = c, stream = stream }
print(("gpurun.matmul of %d*%d arrays:  %.6f seconds"):format(n, n, gpu_seconds(function()
  gpurun.matmul(a, b, product_options)
end)))
print()

local got = {}
for s, at in ipairs(picks) do got[s] = c.buffer[at] end
local checks = check.new(cli.name)
if not checks:tables("sampled entries", got, expected, 1e-9, 1e-9) then
  print("Validation FAILED: host and GPU results do not match within tolerance")
  os.exit(1, true)
end
print("Validation PASSED: host and GPU results match within tolerance")
print("Demo completed successfully!")
