-- jitLtoLinking.lua: a port of NVIDIA cuda-samples' python/2_CoreConcepts/
-- jitLtoLinking (cuda.core). A kernel calls a device function defined in a
-- second, separately compiled source, and gpurun.Linker (nvJitLink) joins
-- them at run time: once from relocatable PTX (no inlining across the two),
-- once from LTO-IR with link-time optimization (the call inlined). Each
-- result is checked against a host reference, and the two against each other.
--
--   gpurun samples/2_CoreConcepts/jitLtoLinking.lua [--elements N] [--device ID]

local gpurun = require("gpurun")
local args = require("gpurun.args")
local kernels = require("gpurun.samples.kernels")

-- The library's kernel (apply_transform) and the user's device function
-- (user_transform), one file each: lua/gpurun/samples/kernels/.
local MAIN_SOURCE = kernels.source("apply_transform")
local USER_SOURCE = kernels.source("user_transform")
local RTOL, ATOL = 1e-5, 1e-5

local cli = args.new("jitLtoLinking.lua", "JIT + LTO linking of two device modules with gpurun.Linker.")
cli:integer_option("--elements", "Number of float32 elements.", 1 << 16)
cli:integer_option("--device", "CUDA device id.", 0, 0)
local options = cli:parse(arg)

local device = cli:open_device(options.device)
local capability = device.compute_capability
print(("Device: %s"):format(device.name))
print(("Compute Capability: %d.%d"):format(capability.major, capability.minor))
local arch = "sm_" .. device.arch

-- Both sources compiled to `target` with `program_options`, then linked.
local function link(target, program_options, linker_options)
  local main <close> = gpurun.Program(MAIN_SOURCE, "c++", program_options)
    :compile(target, { name = "apply_transform.cu" })
  local user <close> = gpurun.Program(USER_SOURCE, "c++", program_options)
    :compile(target, { name = "user_transform.cu" })
  local linker <close> = gpurun.Linker(main, user, gpurun.LinkerOptions(linker_options))
  return linker:link("cubin")
end

-- PTX linking: relocatable device code, each module optimized on its own.
local function link_ptx()
  return link("ptx", { std = "c++17", arch = arch, relocatable_device_code = true }, { arch = arch })
end

-- LTO linking: LTO-IR, optimized again across both modules at link time.
local function link_lto()
  return link("ltoir", { std = "c++17", arch = arch, link_time_optimization = true },
    { arch = arch, link_time_optimization = true })
end

-- Standard normal inputs (Box-Muller over the generator's uniform draws) and
-- the reference max(x^2 + 3x - 1, 0), on the host.
local n = options.elements
local uniform = gpurun.default_rng(0):random_table(2 * n)
local host_in, expected = {}, {}
for i = 1, n do
  local radius = math.sqrt(-2 * math.log(1 - uniform[2 * i - 1]))
  local x = string.unpack("f", string.pack("f", radius * math.cos(2 * math.pi * uniform[2 * i])))
  local y = x * x + 3 * x - 1
  host_in[i], expected[i] = x, y > 0 and y or 0
end

local stream <close> = device:create_stream()
gpurun.set_current_stream(stream)
local d_in <close> = gpurun.array(host_in, "float32")
local d_expected <close> = gpurun.array(expected, "float32")
local config = gpurun.LaunchConfig{ grid = (n + 255) // 256, block = 256 }

-- Runs the linked module's kernel into `out` and checks it.
local function run_one_mode(mode, module, out)
  local kernel = module:get_kernel("apply_transform")
  gpurun.launch(stream, config, kernel, d_in, out, gpurun.u64(n))
  stream:sync()
  local result = gpurun.compare(out, d_expected, RTOL, ATOL)
  if result.mismatches > 0 or result.nan > 0 then
    print(("  [%s] verification FAILED (max_err=%g)"):format(mode, result.worst_abs_diff))
    return false
  end
  print(("  [%s] result verified against the host reference"):format(mode))
  return true
end

print("\n[1] PTX linking (no LTO)")
local ptx_out <close> = gpurun.zeros(n, "float32")
local ptx_module <close> = link_ptx()
local ok_ptx = run_one_mode("ptx", ptx_module, ptx_out)

print("\n[2] LTO linking (link-time optimization)")
local lto_out <close> = gpurun.zeros(n, "float32")
local lto_module <close> = link_lto()
local ok_lto = run_one_mode("lto", lto_module, lto_out)

print()
if not (ok_ptx and ok_lto and gpurun.allclose(lto_out, ptx_out, RTOL, ATOL)) then
  print("The PTX and LTO linked kernels do not agree")
  os.exit(1, true)
end
print("Both PTX and LTO linked kernels produced matching results. Done")
