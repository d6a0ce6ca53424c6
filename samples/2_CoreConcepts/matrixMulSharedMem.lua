-- matrixMulSharedMem.lua: a port of NVIDIA cuda-samples' python/2_CoreConcepts/
-- matrixMulSharedMem (cuda.core). A tiled matrix product: each 16 x 16
-- block of threads stages a tile of A and a tile of B in shared memory and
-- sums their products (an unrolled inner loop), timed with
-- events against the library's GEMM, here cuBLAS through gpurun.matmul
-- (the original times nvmath's cuBLASLt Matmul). Both results are checked
-- against the same product computed in float64 by cuBLAS. The original takes
-- m, n, k, the device and the iterations as its function's parameters, with
-- these defaults; here they are options.
--
--   gpurun samples/2_CoreConcepts/matrixMulSharedMem.lua [--m 1024] [--n 1024] [--k 1024]
--       [--num_iterations 10] [--device_id 0]

local gpurun = require("gpurun")
local args = require("gpurun.args")
local check = require("gpurun.check")
local kernels = require("gpurun.samples.kernels")

local TILE_SIZE = 16
local INT_MAX = 2147483647
local RULE, LINE = string.rep("=", 60), string.rep("-", 60)

-- The tiled kernel the samples share (lua/gpurun/samples/kernels/
-- matmul_epilogue.cu): with no epilogue and a zero bias it is the original's
-- product, its inner loop unrolled by the compiler.
local KERNEL = ("#define TILE_SIZE %d\n#define EPILOGUE(value) (value)\n"):format(TILE_SIZE)
  .. kernels.source("matmul_epilogue")

local cli = args.new("matrixMulSharedMem.lua",
  "Matrix multiplication with a shared-memory tiled kernel, against cuBLAS.")
cli:integer_option("--m", "Rows of A and C (default: 1024).", 1024)
cli:integer_option("--n", "Columns of B and C (default: 1024).", 1024)
cli:integer_option("--k", "Columns of A and rows of B (default: 1024).", 1024)
cli:integer_option("--num_iterations", "Timed products of each kind (default: 10).", 10)
cli:integer_option("--device_id", "CUDA device id (default: 0).", 0, 0)
local options = cli:parse(arg)
for _, name in ipairs{ "m", "n", "k" } do
  if options[name] > INT_MAX then
    cli:usage_error(("--%s must fit the kernel's int, got %d"):format(name, options[name]))
  end
end
local m, n, k, iterations = options.m, options.n, options.k, options.num_iterations

local device = cli:open_device(options.device_id)
print(RULE)
print("Matrix Multiplication with Shared Memory (GEMM)")
print(RULE)
local stream <close> = device:create_stream()
gpurun.set_current_stream(stream)
print("\nDevice: " .. device.name)
print("Compute Capability: sm_" .. device.arch)

local program <close> = gpurun.Program(KERNEL, "c++", gpurun.ProgramOptions{ arch = "sm_" .. device.arch })
local code <close> = program:compile("cubin")
local kernel = code:get_kernel("matmul_epilogue")
print("Custom kernel compiled ✓")

print(("\nMatrix: A(%dx%d) × B(%dx%d) = C(%dx%d)"):format(m, k, k, n, m, n))
local total_ops = 2 * m * n * k

-- Uniform inputs drawn on the device from seed 42, as the original's.
local rng <close> = gpurun.device_rng(42)
local a = gpurun.matrix(rng:random(m * k, "float32"), m, k)
local b = gpurun.matrix(rng:random(k * n, "float32"), k, n)
local c_blas = gpurun.matrix(gpurun.empty(m * n, "float32"), m, n)
local c_custom = gpurun.matrix(gpurun.zeros(m * n, "float32"), m, n)

-- Milliseconds per call of run(), from events around `iterations` calls
-- after one untimed call.
local function time_ms(run)
  run()
  stream:sync()
  local start = stream:record()
  for _ = 1, iterations do run() end
  local stop = stream:record()
  stop:sync()
  return stop:elapsed_ms(start) / iterations
end

local function report(ms)
  print(("Time: %.3f ms | %.2f GFLOPS"):format(ms, total_ops / 1e9 / (ms / 1e3)))
end

print("\n" .. LINE)
print("cuBLAS (gpurun.matmul) - handle once, execute many")
print(LINE)
-- The stream's cuBLAS handle and workspace are made by the first call.
local matmul_options = { out = c_blas, stream = stream }
report(time_ms(function() gpurun.matmul(a, b, matmul_options) end))

print("\n" .. LINE)
print("CUSTOM KERNEL (tiled + shared memory + unroll)")
print(LINE)
local config = gpurun.LaunchConfig{ grid = { (n + TILE_SIZE - 1) // TILE_SIZE, (m + TILE_SIZE - 1) // TILE_SIZE },
                                    block = { TILE_SIZE, TILE_SIZE } }
local a_buffer, b_buffer, c_buffer = a.buffer, b.buffer, c_custom.buffer
local bias <close> = gpurun.zeros(n, "float32")
report(time_ms(function() gpurun.launch(stream, config, kernel, a_buffer, b_buffer, bias, c_buffer, m, n, k) end))

print("\n" .. LINE)
print("VERIFICATION")
print(LINE)
-- The reference: the same inputs widened to float64, multiplied by cuBLAS in float64.
local a64 = gpurun.matrix(gpurun.array(a.buffer:to_table(), "float64"), m, k)
local b64 = gpurun.matrix(gpurun.array(b.buffer:to_table(), "float64"), k, n)
local reference = gpurun.matmul(a64, b64, { stream = stream })
stream:sync()
local checks = check.new(cli.name)
for _, case in ipairs{ { "cuBLAS", c_blas }, { "custom", c_custom } } do
  print(("%s: %s"):format(case[1],
    checks:buffers(case[1], case[2].buffer, reference.buffer, 1e-4, 1e-4) and "Test PASSED" or "Test FAILED"))
end
if not checks:passed() then os.exit(1, true) end
