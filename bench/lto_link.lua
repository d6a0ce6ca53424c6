-- bench/lto_link.lua: the jitLtoLinking sources (kernels/apply_transform.cu
-- and user_transform.cu) linked by gpurun.Linker from LTO-IR, against nvcc
-- -dlto's one cubin of them (and nvcc on one source, and gpurun's PTX link):
-- each cubin's SASS instructions (cuobjdump -sass, no NOPs) and us per
-- launch at each size, medians of interleaved loops, outputs checked against
-- the LTO link's. Without nvcc or cuobjdump a row or column says why.
--
--   build/gpurun bench/lto_link.lua [--sizes 1048576,16777216] [--reps 9]
--       [--seconds 0.2] [--nvcc PATH] [--cuobjdump PATH] [--json]

local gpurun = require("gpurun")
local args = require("gpurun.args")
local bench = require("gpurun.bench")
local kernels = require("gpurun.samples.kernels")
local shell = require("gpurun.shell")
local cjson = require("cjson")

local cuda_bin = (os.getenv("CUDA_HOME") or "/usr/local/cuda") .. "/bin/"
local function tool_default(name)
  return shell.file_exists(cuda_bin .. name) and cuda_bin .. name or name
end

local cli = args.new("lto_link.lua",
  "An LTO-linked kernel (gpurun.Linker) against nvcc -dlto's cubin of the same sources: SASS and launch time.")
bench.add_options(cli, { sizes = "1048576,16777216", reps = 9, seconds = 0.2 })
cli.parser:option("--nvcc", "The nvcc to build the reference cubins with.", tool_default("nvcc"))
cli.parser:option("--cuobjdump", "The cuobjdump that lists each cubin's SASS.", tool_default("cuobjdump"))
cli:flag("--json", "One JSON object instead of the table.")
local options = cli:parse(arg)
if options.seconds <= 0 then cli:usage_error("--seconds: expected a positive number") end

local device = cli:open_device(0)
local stream <close> = device:create_stream()
gpurun.set_current_stream(stream)
local arch = "sm_" .. device.arch
local work = os.tmpname()
os.remove(work)
assert(os.execute("mkdir -p -- " .. shell.quote(work)))

-- Runs a shell command; nil and its last line of output when it fails.
local function run_command(command)
  local pipe = assert(io.popen(command .. " 2>&1", "r"))
  local output = pipe:read("a")
  local ok = pipe:close()
  if ok then return output end
  return nil, (output:match("([^\n]*)\n*$") or ""):sub(1, 200)
end

local function gpurun_link(target, program_options, linker_options, path)
  local main <close> = gpurun.Program(kernels.source("apply_transform"), "c++", program_options)
    :compile(target, { name = "apply_transform.cu" })
  local user <close> = gpurun.Program(kernels.source("user_transform"), "c++", program_options)
    :compile(target, { name = "user_transform.cu" })
  local linker <close> = gpurun.Linker(main, user, gpurun.LinkerOptions(linker_options))
  local linked <close> = linker:link("cubin")
  linked:save(path)
  return path
end

-- nvcc -dlto: each source to an object holding LTO-IR, then a device link
-- with link-time optimization into one cubin.
local function nvcc_dlto(path)
  local q = shell.quote
  local compile = ("cd %s && %s -std=c++17 -arch=%s -dlto -dc %s %s"):format(q(work), q(options.nvcc), arch,
    q(kernels.path("apply_transform")), q(kernels.path("user_transform")))
  local ok, why = run_command(compile)
  if not ok then return nil, "nvcc -dlto -dc failed: " .. why end
  ok, why = run_command(("cd %s && %s -arch=%s -dlto -dlink apply_transform.o user_transform.o -cubin -o %s")
    :format(q(work), q(options.nvcc), arch, q(path)))
  if not ok then return nil, "nvcc -dlto -dlink failed: " .. why end
  return path
end

-- nvcc on both sources as one translation unit (whole-program, no link).
local function nvcc_one_source(path)
  local source = work .. "/one_source.cu"
  assert(shell.write_file(source, kernels.source("apply_transform") .. kernels.source("user_transform")))
  local ok, why = run_command(("%s -std=c++17 -arch=%s -cubin -o %s %s"):format(shell.quote(options.nvcc), arch,
    shell.quote(path), shell.quote(source)))
  if not ok then return nil, "nvcc -cubin failed: " .. why end
  return path
end

-- The instructions cuobjdump -sass lists, NOPs (padding) left out; nil and
-- why when it cannot.
local function sass_count(path)
  local output, why = run_command(("%s -sass %s"):format(shell.quote(options.cuobjdump), shell.quote(path)))
  if not output then return nil, "cuobjdump -sass failed: " .. why end
  local count = 0
  for line in output:gmatch("[^\n]+") do
    local instruction = line:match("^%s*/%*%x+%*/%s+([^;]-)%s*;")
    if instruction and not instruction:match("^NOP") then count = count + 1 end
  end
  if count == 0 then return nil, "cuobjdump -sass listed no instructions" end
  return count
end

local variants = {
  { name = "gpurun LTO link", build = function(path)
      return gpurun_link("ltoir", { std = "c++17", arch = arch, link_time_optimization = true },
        { arch = arch, link_time_optimization = true }, path)
    end },
  { name = "nvcc -dlto", build = nvcc_dlto },
  { name = "nvcc one source", build = nvcc_one_source },
  { name = "gpurun PTX link", build = function(path)
      return gpurun_link("ptx", { std = "c++17", arch = arch, relocatable_device_code = true }, { arch = arch },
        path)
    end },
}

local sizes = options.sizes
local largest = math.max(table.unpack(sizes))
local rng <close> = gpurun.default_rng(0)
local input <close> = rng:random(largest, "float32")
local reference <close> = gpurun.empty(largest, "float32")
local outputs = {}

for index, variant in ipairs(variants) do
  local path, why = variant.build(("%s/%d.cubin"):format(work, index))
  local loaded, kernel
  if path then
    loaded, why = pcall(gpurun.ObjectCode.from_cubin, { path = path }, { name = variant.name })
    if loaded then
      variant.code = why
      loaded, kernel = pcall(variant.code.get_kernel, variant.code, "apply_transform")
      why = not loaded and kernel or nil
    end
  end
  if loaded then
    variant.sass, variant.sass_missing = sass_count(path)
    variant.kernel = kernel
    variant.runs = {}
    for _, n in ipairs(sizes) do variant.runs[n] = {} end
    outputs[index] = gpurun.zeros(largest, "float32")
  else
    variant.missing = tostring(why):match("^[^\n]*")
  end
end

if not variants[1].kernel then
  error("lto_link.lua: gpurun's LTO link gave no kernel: " .. variants[1].missing)
end

-- Inputs from -4 to 4 reach both sides of the max; every built kernel's
-- output must be the LTO link's.
local config_of = {}
for _, n in ipairs(sizes) do config_of[n] = gpurun.LaunchConfig{ grid = (n + 255) // 256, block = 256 } end
local to_range <close> = gpurun.Program([[
extern "C" __global__ void to_range(float *x, size_t n)
{ size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; if (i < n) x[i] = x[i] * 8.0f - 4.0f; }
]], "c++", { arch = arch }):compile("cubin")
gpurun.launch(stream, config_of[largest], to_range:get_kernel("to_range"), input, gpurun.u64(largest))
gpurun.launch(stream, config_of[largest], variants[1].kernel, input, reference, gpurun.u64(largest))
for index, variant in ipairs(variants) do
  if variant.kernel then
    gpurun.launch(stream, config_of[largest], variant.kernel, input, outputs[index], gpurun.u64(largest))
    stream:sync()
    local check = gpurun.compare(outputs[index], reference, 1e-5, 1e-5)
    if check.mismatches > 0 or check.nan > 0 then
      io.stderr:write(("lto_link.lua: %s's kernel disagrees with the LTO link's at element %d: %g, not %g\n")
        :format(variant.name, check.worst_index, check.worst_actual, check.worst_expected))
      os.exit(1, true)
    end
  end
end

for rep = 1, options.reps do
  for _, n in ipairs(sizes) do
    local config, count = config_of[n], gpurun.u64(n)
    for index, variant in ipairs(variants) do
      if variant.kernel then
        local kernel, out = variant.kernel, outputs[index]
        local function step(s) gpurun.launch(s, config, kernel, input, out, count) end
        variant.runs[n][rep] = bench.measure(stream, step,
          { seconds = options.seconds, warmup = rep == 1 and 20 or 2 }).us_per_iter
      end
    end
  end
end
os.execute("rm -rf -- " .. shell.quote(work))

local results = { device = device.name, arch = arch, reps = options.reps, sizes = sizes, unit = "us per launch",
                  variants = {} }
local base = variants[2].kernel and variants[2] or nil
for _, variant in ipairs(variants) do
  local row = { name = variant.name, sass = variant.sass, sass_missing = variant.sass_missing,
                missing = variant.missing, us = {} }
  if variant.kernel then
    for _, n in ipairs(sizes) do row.us[tostring(n)] = bench.median(variant.runs[n]) end
  end
  variant.row = row
  results.variants[#results.variants + 1] = row
end

if options.json then
  print(cjson.encode(results))
  return
end
print(("LTO link against nvcc -dlto on %s (%s), us per launch, medians of %d loops; ratio to nvcc -dlto")
  :format(device.name, arch, options.reps))
local header = { ("%-18s %8s"):format("cubin", "SASS") }
for _, n in ipairs(sizes) do header[#header + 1] = ("%12s %6s"):format(tostring(n), "ratio") end
print(table.concat(header, " "))
for _, variant in ipairs(variants) do
  local row = variant.row
  if row.missing then
    print(("%-18s %s"):format(row.name, row.missing))
  else
    local cells = { ("%-18s %8s"):format(row.name, row.sass or "-") }
    for _, n in ipairs(sizes) do
      local us = row.us[tostring(n)]
      local ratio = base and ("%6.3f"):format(us / base.row.us[tostring(n)]) or ("%6s"):format("-")
      cells[#cells + 1] = ("%12.3f %s"):format(us, ratio)
    end
    print(table.concat(cells, " "))
  end
end
for _, variant in ipairs(variants) do
  if variant.sass_missing then print(("%s: no SASS count (%s)"):format(variant.name, variant.sass_missing)) end
end
