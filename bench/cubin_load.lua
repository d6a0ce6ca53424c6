-- bench/cubin_load.lua: ms to a launchable kernel (get_kernel included) for
-- the persistentProgramCache sample's kernel: compiled again (a new source
-- each call: a kernel-cache miss and its store), a kernel-cache hit, and a
-- saved cubin loaded (ObjectCode.from_cubin of its path), closed each time
-- or kept loaded; medians of --reps loops. bench/cubin_load_compare.py times
-- cuda.core on what --save writes; bench/device_code_compare.sh runs both
-- with a kernel cache of their own.
--
--   build/gpurun bench/cubin_load.lua [--reps 9] [--seconds 0.5] [--save DIR] [--json]

local gpurun = require("gpurun")
local args = require("gpurun.args")
local bench = require("gpurun.bench")
local kernels = require("gpurun.samples.kernels")
local shell = require("gpurun.shell")
local cjson = require("cjson")

local KERNEL_NAME = "matmul_epilogue"

local cli = args.new("cubin_load.lua",
  "Compile again, a kernel-cache hit, and a saved cubin loaded: the host's cost of a launchable kernel.")
bench.add_options(cli, { reps = 9, seconds = 0.5 })
cli.parser:option("--save", "A directory to write the kernel's source and cubin to, for cuda.core's side.")
cli:flag("--json", "One JSON object instead of the table.")
local options = cli:parse(arg)
if options.seconds <= 0 then cli:usage_error("--seconds: expected a positive number") end

local device = cli:open_device(0)
local stream <close> = device:create_stream()
local program_options = gpurun.ProgramOptions{ std = "c++17", arch = "sm_" .. device.arch }
-- The sample's specialization: 16 x 16 tiles, relu.
local source = "#define TILE_SIZE 16\n#define EPILOGUE(value) ((value) > 0.0f ? (value) : 0.0f)\n"
  .. kernels.source(KERNEL_NAME)

local save_dir = options.save
local temporary = not save_dir
if temporary then
  save_dir = os.tmpname()
  os.remove(save_dir)
end
assert(os.execute("mkdir -p -- " .. shell.quote(save_dir)))
local source_path, cubin_path = save_dir .. "/" .. KERNEL_NAME .. ".cu", save_dir .. "/" .. KERNEL_NAME .. ".cubin"
assert(shell.write_file(source_path, source))
do
  local code <close> = gpurun.Program(source, "c++", program_options):compile("cubin", { name = KERNEL_NAME .. ".cu" })
  code:save(cubin_path)
end

-- One tile of C, for the launches: 16 x 16 matrices, one block.
local TILE_N = 16
local TILE = gpurun.LaunchConfig{ grid = 1, block = { TILE_N, TILE_N } }
local a <close> = gpurun.zeros(TILE_N * TILE_N, "float32")
local b <close> = gpurun.zeros(TILE_N * TILE_N, "float32")
local bias <close> = gpurun.zeros(TILE_N, "float32")
local c <close> = gpurun.zeros(TILE_N * TILE_N, "float32")

local function kernel_of(code)
  code:get_kernel(KERNEL_NAME)
  code:close()
end

local variant = 0
local kept = {}
local steps = {
  { key = "compile", name = "compile again + get_kernel", step = function()
      variant = variant + 1
      kernel_of(gpurun.Program(source .. "// " .. variant .. "\n", "c++", program_options)
        :compile("cubin", { name = KERNEL_NAME .. ".cu" }))
    end },
  { key = "cache_hit", name = "kernel-cache hit + get_kernel", step = function()
      kernel_of(gpurun.Program(source, "c++", program_options):compile("cubin", { name = KERNEL_NAME .. ".cu" }))
    end },
  { key = "cubin_load", name = "saved cubin + get_kernel, closed", step = function()
      kernel_of(gpurun.ObjectCode.from_cubin({ path = cubin_path }, { name = KERNEL_NAME .. ".cubin" }))
    end },
  -- Loaded and left loaded, closed after the loop (untimed): what a user
  -- who keeps the code does, and a row that holds whether or not a peer
  -- unloads what it drops.
  { key = "cubin_kept", name = "saved cubin + get_kernel, kept", step = function()
      local code = gpurun.ObjectCode.from_cubin({ path = cubin_path }, { name = KERNEL_NAME .. ".cubin" })
      code:get_kernel(KERNEL_NAME)
      kept[#kept + 1] = code
    end, after = function()
      for i = #kept, 1, -1 do
        kept[i]:close()
        kept[i] = nil
      end
    end },
  -- The driver may load a module into the context only at the first launch,
  -- so get_kernel alone can leave that cost to the launch: this row pays it.
  { key = "cubin_launch", name = "saved cubin + first launch", step = function()
      local code = gpurun.ObjectCode.from_cubin({ path = cubin_path }, { name = KERNEL_NAME .. ".cubin" })
      gpurun.launch(stream, TILE, code:get_kernel(KERNEL_NAME), a, b, bias, c, TILE_N, TILE_N, TILE_N)
      stream:sync()
      code:close()
    end },
}

local cache_enabled = gpurun.cache_info().enabled
do
  local again <close> = gpurun.Program(source, "c++", program_options):compile("cubin", { name = KERNEL_NAME .. ".cu" })
  if not again.from_cache then
    steps[2].missing = "no kernel-cache hit: the cache is off (GPURUN_NO_CACHE, or no usable directory)"
  end
end

for _, entry in ipairs(steps) do entry.runs = {} end
for rep = 1, options.reps do
  for _, entry in ipairs(steps) do
    if not entry.missing then
      entry.runs[rep] = bench.measure(stream, entry.step, { seconds = options.seconds, warmup = rep == 1 and 3 or 1 })
        .us_per_iter
      if entry.after then entry.after() end
    end
  end
end
if temporary then os.execute("rm -rf -- " .. shell.quote(save_dir)) end

local results = { device = device.name, arch = device.arch, reps = options.reps, unit = "us per call",
                  kernel = KERNEL_NAME, cache_enabled = cache_enabled, program_options = program_options:as_list(),
                  source_path = not temporary and source_path or nil, cubin_path = not temporary and cubin_path or nil,
                  missing = {} }
for _, entry in ipairs(steps) do
  if entry.missing then
    results.missing[entry.key] = entry.missing
  else
    results[entry.key .. "_us"] = bench.median(entry.runs)
  end
end

if options.json then
  print(cjson.encode(results))
  return
end
print(("A launchable kernel from source or a saved cubin on %s, ms per call, medians of %d loops")
  :format(device.name, options.reps))
print(("%-32s %10s %18s"):format("path", "ms", "compile again / it"))
for _, entry in ipairs(steps) do
  local us = results[entry.key .. "_us"]
  if us then
    print(("%-32s %10.3f %18.1f"):format(entry.name, us / 1e3, results.compile_us / us))
  else
    print(("%-32s %s"):format(entry.name, entry.missing))
  end
end
