-- persistentProgramCache.lua: a port of NVIDIA cuda-samples' python/
-- 2_CoreConcepts/persistentProgramCache (cuda.core). A matmul + bias +
-- epilogue kernel, specialized by generating its source, is compiled to a
-- cubin on a miss and saved (code:save) under a key over its source, options
-- and toolchain; a later run (another process) finds the file and loads it
-- with ObjectCode.from_cubin instead of compiling. Each step is timed, and
-- the result is checked against the host. Run it twice: --clear-cache first
-- to see the miss, then again to see the hit.
--
--   gpurun samples/2_CoreConcepts/persistentProgramCache.lua [--m 512] [--n 512]
--       [--k 512] [--tile-size 16|32] [--epilogue identity|relu]
--       [--cache-dir DIR] [--clear-cache] [--warmup 5] [--iterations 20] [--device ID]

local gpurun = require("gpurun")
local args = require("gpurun.args")
local kernels = require("gpurun.samples.kernels")
local shell = require("gpurun.shell")

local KERNEL_NAME = "matmul_epilogue"
local EPILOGUES = { identity = "(value)", relu = "((value) > 0.0f ? (value) : 0.0f)" }
local DEFAULT_CACHE_DIR = (os.getenv("HOME") or ".") .. "/.cache/cuda-samples/persistentProgramCache"
local now = gpurun.perf_counter

local function one_of(choices)
  return function(text)
    for _, choice in ipairs(choices) do
      if text == choice then return text end
    end
    return nil, ("expected one of %s, got '%s'"):format(table.concat(choices, ", "), text)
  end
end

local cli = args.new("persistentProgramCache.lua",
  "Persistent program cache for generated CUDA kernels: compile once, load the saved cubin later.")
cli:integer_option("--device", "CUDA device id.", 0, 0)
cli:integer_option("--m", "Rows of A and C.", 512)
cli:integer_option("--n", "Columns of B and C.", 512)
cli:integer_option("--k", "Columns of A / rows of B.", 512)
cli:converted_option("--tile-size", "Compile-time tile size specialization (16 or 32).", "16",
  function(text)
    local size, why = one_of({ "16", "32" })(text)
    return size and tonumber(size), why
  end)
cli:converted_option("--epilogue", "Compile-time epilogue specialization (identity or relu).", "relu",
  one_of({ "identity", "relu" }))
cli:converted_option("--cache-dir", "Program cache directory.", DEFAULT_CACHE_DIR,
  function(text) if text == "" then return nil, "expected a directory" end return text end)
cli:flag("--clear-cache", "Clear the cache before running.")
cli:integer_option("--warmup", "Warmup launches.", 5)
cli:integer_option("--iterations", "Timed launches.", 20)
local options = cli:parse(arg)
for _, name in ipairs({ "m", "n", "k" }) do
  if options[name] > 2147483647 then
    cli:usage_error(("--%s must fit the kernel's int, got %d"):format(name, options[name]))
  end
end

-- The kernel's source, specialized by text as the original generates it.
local function kernel_source(tile_size, epilogue)
  return ("#define TILE_SIZE %d\n#define EPILOGUE(value) %s\n"):format(tile_size, EPILOGUES[epilogue])
    .. kernels.source(KERNEL_NAME)
end

-- 128 bits of FNV-1a (two 64-bit lanes from different seeds) over the
-- length-prefixed fields, as 32 hex digits: the same for the same source,
-- options, target and toolchain, and so the entry's file name.
local function cache_key(fields)
  local lanes = { 0xcbf29ce484222325, 0x84222325cbf29ce4 }
  local function mix(text)
    for lane = 1, 2 do
      local h = lanes[lane]
      for i = 1, #text do h = (h ~ text:byte(i)) * 0x100000001b3 end
      lanes[lane] = h
    end
  end
  for _, field in ipairs(fields) do
    mix(string.pack("<I8", #field))
    mix(field)
  end
  return ("%016x%016x"):format(lanes[1], lanes[2])
end

local function clear_cache(dir)
  os.execute(("rm -f -- %s/*.cubin"):format(shell.quote(dir)))
end

-- The kernel from the cache directory when it holds the key's cubin, else
-- compiled and stored there; with each step's time in ms.
local function compile_or_load_kernel(source, device, cache_dir)
  local program_options = gpurun.ProgramOptions{ std = "c++17", arch = "sm_" .. device.arch }
  local nvrtc_major, nvrtc_minor = gpurun.nvrtc_version()
  local fields = { source, "c++", "cubin", ("nvrtc %d.%d"):format(nvrtc_major, nvrtc_minor),
                   "gpurun " .. gpurun.version }
  for _, option in ipairs(program_options:as_list()) do fields[#fields + 1] = option end
  local key = cache_key(fields)
  local path = cache_dir .. "/" .. key .. ".cubin"
  local result = { key = key }
  -- The directory is made when the cache is opened, untimed, as the
  -- original's FileStreamProgramCache(cache_dir) makes it.
  os.execute("mkdir -p -- " .. shell.quote(cache_dir))

  local start = now()
  local present = shell.file_exists(path)
  result.lookup_ms = (now() - start) * 1e3
  if present then
    start = now()
    local ok, module = pcall(gpurun.ObjectCode.from_cubin, { path = path }, { name = "persistentProgramCache" })
    local kernel_ok, kernel = ok, nil
    if ok then kernel_ok, kernel = pcall(module.get_kernel, module, KERNEL_NAME) end
    if kernel_ok then
      result.load_ms = (now() - start) * 1e3
      result.status, result.module, result.kernel, result.bytes = "HIT", module, kernel, module.size
      return result
    end
    if ok then module:close() end
    io.stderr:write(("persistentProgramCache.lua: cache entry %s refused (%s); compiling again\n")
      :format(path, tostring(ok and kernel or module):match("^[^\n]*")))
  end

  start = now()
  local module = gpurun.Program(source, "c++", program_options):compile("cubin", { name = KERNEL_NAME .. ".cu" })
  result.compile_ms = (now() - start) * 1e3
  result.compile_cached = module.from_cache
  start = now()
  local partial = ("%s.%d.partial"):format(path, math.floor(now() * 1e6))
  module:save(partial)
  assert(os.rename(partial, path))
  result.store_ms = (now() - start) * 1e3
  start = now()
  result.kernel = module:get_kernel(KERNEL_NAME)
  result.load_ms = (now() - start) * 1e3
  result.status, result.module, result.bytes = "MISS", module, module.size
  return result
end

-- A rows x cols matrix (a flat row-major sequence) of standard normal floats.
local function normal_matrix(rng, count)
  local uniform = rng:random_table(2 * count)
  local values = {}
  for i = 1, count do
    local radius = math.sqrt(-2 * math.log(1 - uniform[2 * i - 1]))
    values[i] = string.unpack("f", string.pack("f", radius * math.cos(2 * math.pi * uniform[2 * i])))
  end
  return values
end

-- EPILOGUE(A @ B + bias) on the host.
local function host_reference(a, b, bias, m, n, k, epilogue)
  local out = {}
  for row = 0, m - 1 do
    local acc = {}
    for col = 1, n do acc[col] = bias[col] end
    for j = 0, k - 1 do
      local a_value, b_base = a[row * k + j + 1], j * n
      for col = 1, n do acc[col] = acc[col] + a_value * b[b_base + col] end
    end
    for col = 1, n do
      local value = acc[col]
      out[row * n + col] = (epilogue == "relu" and value < 0) and 0 or value
    end
  end
  return out
end

if options.clear_cache then clear_cache(options.cache_dir) end
local device = cli:open_device(options.device)
local stream <close> = device:create_stream()
gpurun.set_current_stream(stream)
local m, n, k, tile_size = options.m, options.n, options.k, options.tile_size

print("\nPersistent Program Cache")
local capability = device.compute_capability
print(("Device:             %s"):format(device.name))
print(("Compute Capability: %d.%d"):format(capability.major, capability.minor))
print(("Cache directory:    %s"):format(options.cache_dir))
print(("Workload:           C = %s(A @ B + bias)"):format(options.epilogue))
print(("Matrix sizes:       M=%d, N=%d, K=%d"):format(m, n, k))
print(("Tile size:          %d"):format(tile_size))
print(("Timed launches:     warmup=%d, iterations=%d"):format(options.warmup, options.iterations))
print()

local cached = compile_or_load_kernel(kernel_source(tile_size, options.epilogue), device, options.cache_dir)
local prep_ms = cached.lookup_ms + cached.load_ms + (cached.compile_ms or 0) + (cached.store_ms or 0)
print(("Cache status:       %s"):format(cached.status))
print(("Cache key:          %s..."):format(cached.key:sub(1, 24)))
print(("Artifact size:      %.1f KiB"):format(cached.bytes / 1024))
print(("Cache lookup:       %.3f ms"):format(cached.lookup_ms))
if cached.compile_ms then
  print(("Compile time:       %.3f ms%s"):format(cached.compile_ms,
    cached.compile_cached and " (from gpurun's kernel cache)" or ""))
  print(("Cache store:        %.3f ms"):format(cached.store_ms))
else
  print("Compile time:       skipped")
end
print(("Module load:        %.3f ms"):format(cached.load_ms))
print(("Host prep time:     %.3f ms"):format(prep_ms))

local rng <close> = gpurun.default_rng(123)
local host_a, host_b, host_bias = normal_matrix(rng, m * k), normal_matrix(rng, k * n), normal_matrix(rng, n)
local expected = host_reference(host_a, host_b, host_bias, m, n, k, options.epilogue)
local d_a <close> = gpurun.array(host_a, "float32")
local d_b <close> = gpurun.array(host_b, "float32")
local d_bias <close> = gpurun.array(host_bias, "float32")
local d_c <close> = gpurun.empty(m * n, "float32")
local d_expected <close> = gpurun.array(expected, "float32")

local config = gpurun.LaunchConfig{ grid = { (n + tile_size - 1) // tile_size, (m + tile_size - 1) // tile_size },
                                    block = { tile_size, tile_size } }
local plan <close> = cached.kernel:bind(config, d_a, d_b, d_bias, d_c, gpurun.i32(m), gpurun.i32(n), gpurun.i32(k))
for _ = 1, options.warmup do plan:launch(stream) end
stream:sync()
local start_event <close> = stream:record()
for _ = 1, options.iterations do plan:launch(stream) end
local end_event <close> = stream:record()
local kernel_ms = end_event:elapsed_ms(start_event) / options.iterations

local check = gpurun.compare(d_c, d_expected, 1e-3, 1e-3)
local ok = check.mismatches == 0 and check.nan == 0
local max_error = check.worst_abs_diff or 0
print(("Kernel time:        %.3f ms"):format(kernel_ms))
print(("Max error:          %.6f"):format(max_error))
print(("Validation:         %s"):format(ok and "PASSED" or "FAILED"))
if not ok then os.exit(1, true) end
