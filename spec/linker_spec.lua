-- gpurun.Linker and gpurun.LinkerOptions: ObjectCodes linked through
-- nvJitLink (opened at run time; it needs no GPU), Program:compile("ltoir")
-- and the link's errors, which name the input that caused them. Launching
-- what was linked needs a device (#gpu).
local gpurun = require("gpurun")
local process = require("spec.support.process")

-- Two translation units that call each other: a kernel and the device
-- function it calls, defined in the other.
local CALLER = [[
extern "C" __device__ float twice(float x);
extern "C" __global__ void double_all(float *x, unsigned long long n)
{
    unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
    if (i < n) x[i] = twice(x[i]);
}
]]
local CALLEE = [[extern "C" __device__ float twice(float x) { return 2.0f * x; }]]

local RDC = { arch = "sm_90", relocatable_device_code = true }

local function error_of(f, ...)
  local ok, message = pcall(f, ...)
  assert.is_false(ok, "expected an error")
  return tostring(message)
end

local function compiled(target, arch)
  local options = { arch = arch or RDC.arch, relocatable_device_code = true }
  return gpurun.Program(CALLER, "c++", options):compile(target, { name = "caller.cu" }),
    gpurun.Program(CALLEE, "c++", options):compile(target, { name = "callee.cu" })
end

describe("Program:compile(\"ltoir\")", function()
  it("makes LTO-IR, adding -dlto to the options", function()
    local code = gpurun.Program(CALLEE, "c++", RDC):compile("ltoir")
    assert.are.equal("ltoir", code.code_type)
    assert.are.equal("\237\67\78\127", code.code:sub(1, 4))
    assert.are.equal("ltoir", gpurun.Program(CALLEE, "c++", { arch = "sm_90", relocatable_device_code = true,
      link_time_optimization = true }):compile("ltoir").code_type)
  end)

  it("refuses link_time_optimization for PTX and cubin, which NVRTC would leave empty", function()
    local program = gpurun.Program(CALLEE, "c++", { arch = "sm_90", link_time_optimization = true })
    for _, target in ipairs({ "ptx", "cubin" }) do
      assert.matches("link_time_optimization makes LTO-IR, not " .. target .. ": compile(\"ltoir\") and link it "
        .. "with gpurun.Linker", error_of(program.compile, program, target), 1, true)
    end
    assert.are.same({ "--gpu-architecture=sm_90", "--dlink-time-opt" }, program.options:as_list())
  end)
end)

describe("gpurun.LinkerOptions", function()
  it("reads back cuda.core's fields and lists nvJitLink's options in a fixed order", function()
    local options = gpurun.LinkerOptions({ fma = false, arch = "90", link_time_optimization = true,
      kernels_used = { "double_all" }, max_register_count = 64, optimization_level = 3, name = "both" })
    assert.are.equal("sm_90", options.arch)
    assert.are.equal("both", options.name)
    assert.are.same({ "double_all" }, options.kernels_used)
    assert.are.same({ "-arch=sm_90", "-maxrregcount=64", "-lto", "-O3", "-fma=0", "-kernels-used=double_all" },
      options:as_list())
    assert.matches("gpurun.LinkerOptions is read-only", error_of(function() options.arch = "sm_80" end), 1, true)
    options:close()
    assert.matches("attempt to use a closed gpurun.LinkerOptions", error_of(function() return options.arch end),
      1, true)
  end)
end)

describe("gpurun.Linker", function()
  it("links two LTO-IR inputs that call each other into a cubin holding the kernel", function()
    local caller, callee = compiled("ltoir")
    local linker = gpurun.Linker(caller, callee, gpurun.LinkerOptions({ arch = "sm_90", link_time_optimization = true }))
    local cubin = linker:link("cubin")
    assert.are.equal("cubin", cubin.code_type)
    assert.are.equal("\127ELF", cubin.code:sub(1, 4))
    assert.truthy(cubin.code:find(".text.double_all\0", 1, true), "the kernel's section is in the cubin")
    assert.are.equal("<default linker>", cubin.name)
    assert.are.equal("", linker:get_error_log())
    local ptx = linker:link("ptx")
    assert.are.equal("ptx", ptx.code_type)
    assert.matches("%.entry double_all", ptx.code)
    assert.is_nil(ptx.code:find("%.extern %.func[^\n]*twice"), "twice was linked in, not left to another module")
  end)

  it("links PTX of relocatable device code without LTO, and takes the code's name from the options", function()
    local caller, callee = compiled("ptx")
    local cubin = gpurun.Linker(caller, callee, { arch = "sm_90", name = "both.cubin" }):link("cubin")
    assert.are.equal("both.cubin", cubin.name)
    assert.truthy(cubin.code:find(".text.double_all\0", 1, true))
    -- The linked cubin loads again as any other, and links again with what it lacks.
    local again = gpurun.ObjectCode.from_cubin(cubin.code, { name = "again" })
    assert.are.equal(cubin.code, again.code)
  end)

  it("names the input whose symbol is missing, and the input nvJitLink refuses", function()
    local caller = compiled("ptx")
    local message = error_of(gpurun.Linker(caller, { arch = "sm_90" }).link,
      gpurun.Linker(caller, { arch = "sm_90" }), "cubin")
    assert.matches("^nvJitLink link of '<default linker>' failed: nvJitLinkComplete: NVJITLINK_ERROR_", message)
    assert.matches("Undefined reference to 'twice' in 'caller.cu'", message, 1, true)
    local junk = gpurun.ObjectCode.from_ltoir("\237\67\78\127" .. ("\0"):rep(32), { name = "junk.ltoir" })
    local linker = gpurun.Linker(caller, junk, { arch = "sm_90", link_time_optimization = true })
    assert.matches("adding input 2 'junk.ltoir' (ltoir): NVJITLINK_ERROR_", error_of(linker.link, linker, "cubin"),
      1, true)
    assert.truthy(#linker:get_error_log() > 0, "the error log is kept for get_error_log")
  end)

  it("survives an LTO-IR that crashes nvJitLink, naming the input it was adding", function()
    local caller, callee = compiled("ltoir")
    -- The word at byte 17 of the container is an offset that nvJitLink 13.0
    -- reads at without checking it against the size: 2 GB away it faults.
    local damaged = callee.code:sub(1, 18) .. "\127\127" .. callee.code:sub(21)
    local linker = gpurun.Linker(caller, gpurun.ObjectCode.from_ltoir(damaged, { name = "damaged.ltoir" }),
      { arch = "sm_90", link_time_optimization = true })
    local message = error_of(linker.link, linker, "cubin")
    assert.matches("^nvJitLink link of '<default linker>' failed: [^\n]*'damaged%.ltoir'", message)
    assert.matches("nvJitLink crashed (signal 11, Segmentation fault) adding input 2 'damaged.ltoir' (ltoir): "
      .. "the input is damaged, or not ltoir", message, 1, true)
    -- gpurun goes on, and the intact inputs still link.
    assert.are.equal("cubin", gpurun.Linker(caller, callee, { arch = "sm_90", link_time_optimization = true })
      :link("cubin").code_type)
  end)

  it("keeps the info log of a verbose link", function()
    local caller, callee = compiled("ptx")
    local linker = gpurun.Linker(caller, callee, { arch = "sm_90", verbose = true })
    local code = linker:link("cubin")
    assert.truthy(#linker:get_info_log() > 0)
    assert.are.equal(linker:get_info_log(), code.log)
  end)

  it("refuses to link without an arch when no device is current", function()
    local result = process.gpurun("-e " .. process.quote([[
      local g = require("gpurun")
      local code = g.ObjectCode.from_ptx(".version 8.0\n.target sm_90\n.address_size 64\n")
      print(select(2, pcall(function() return g.Linker(code):link("cubin") end)))
    ]]))
    assert.are.equal(0, result.code, result.stderr)
    assert.matches("a link needs an arch: give LinkerOptions{arch=...} or make a device current", result.stdout,
      1, true)
  end)

  -- A script run with nvJitLink out of reach: each printed line is a link's
  -- error, or "linked" and what the kernel computed.
  local function without_nvjitlink(script)
    local prelude = ("local g = require('gpurun')\nlocal CALLER, CALLEE = %q, %q\n"):format(CALLER, CALLEE)
    local result = process.gpurun("-e " .. process.quote(prelude .. script),
      { env = { GPURUN_NVJITLINK_LIBRARY = "/nonexistent/libnvJitLink.so.13" } })
    assert.are.equal(0, result.code, result.stderr)
    return result.stdout
  end
  local MISSING = "nvJitLink link of '<default linker>' failed: nvJitLink could not be loaded "
    .. "(/nonexistent/libnvJitLink.so.13: cannot open shared object file: No such file or directory); install "
    .. "the CUDA toolkit's nvJitLink (libnvJitLink.so beside libnvrtc, NVIDIA's libnvjitlink package) or set "
    .. "GPURUN_NVJITLINK_LIBRARY to the library's path; the driver's linker (cuLink)"

  it("says in one line what to install when nvJitLink cannot be opened, and why cuLink cannot step in", function()
    local out = without_nvjitlink([[
      local ptx = g.ObjectCode.from_ptx(".version 8.0\n.target sm_90\n.address_size 64\n")
      local ltoir = g.ObjectCode.from_ltoir("\237\67\78\127" .. ("\0"):rep(32), { name = "junk.ltoir" })
      for _, link in ipairs({
        function() return g.Linker(ptx, { arch = "sm_90" }):link("cubin") end,
        function() return g.Linker(ptx, ltoir, { arch = "sm_90" }):link("cubin") end,
        function() return g.Linker(ptx, { arch = "sm_90", link_time_optimization = true }):link("ptx") end,
        function() return g.Linker(ptx, { arch = "sm_90", fma = false }):link("cubin") end,
      }) do print((select(2, pcall(link)))) end
    ]])
    local lines = {}
    for line in out:gmatch("[^\n]+") do lines[#lines + 1] = line end
    assert.are.equal(4, #lines, out)
    -- No device is current in that process, GPU or not.
    assert.matches(MISSING .. ", which could make this link instead, needs a current device: ", lines[1], 1, true)
    assert.matches(MISSING .. " cannot make this link instead: LTO-IR ('junk.ltoir') needs nvJitLink", lines[2],
      1, true)
    assert.matches(MISSING .. " cannot make this link instead: it makes no PTX", lines[3], 1, true)
    assert.matches(MISSING .. " cannot make this link instead: it has no counterpart of nvJitLink's -fma=0",
      lines[4], 1, true)
  end)

  it("links PTX through the driver's cuLink where nvJitLink is missing #gpu", function()
    local out = without_nvjitlink([[
      g.Device(0):set_current()
      local arch = "sm_" .. g.Device(0).arch
      local rdc = { arch = arch, relocatable_device_code = true }
      local caller = g.Program(CALLER, "c++", rdc):compile("ptx", { name = "caller.cu" })
      local callee = g.Program(CALLEE, "c++", rdc):compile("ptx", { name = "callee.cu" })
      local linker = g.Linker(caller, callee, { name = "by-driver", max_register_count = 32 })
      local code = linker:link("cubin")
      local stream = g.Device(0):create_stream()
      local x = g.array({ 1, 2, 3 }, "float32")
      g.launch(stream, g.LaunchConfig{ grid = 1, block = 32 }, code:get_kernel("double_all"), x, 3)
      print("linked", code.name, code.code_type, code.from_cache, table.concat(x:to_table(stream), ","))
      local bad = g.ObjectCode.from_ptx(".version 8.0\n.target " .. arch .. "\nnot ptx", { name = "bad.ptx" })
      local broken = g.Linker(caller, bad)
      print((select(2, pcall(broken.link, broken, "cubin"))))
    ]])
    assert.matches("^linked\tby%-driver\tcubin\tfalse\t2%.0?,4%.0?,6%.0?\n", out)
    assert.matches("\ncuLink link of '<default linker>' failed: cuLink[%w]+[^\n]*: CUDA_ERROR_", out)
  end)

  it("keeps linked code in the kernel cache, keyed by every input's bytes and every option", function()
    local folder = os.tmpname()
    os.remove(folder)
    local result = process.gpurun("-e " .. process.quote([[
      local g = require("gpurun")
      local rdc = { arch = "sm_90", relocatable_device_code = true }
      local caller = g.Program(']] .. CALLER:gsub("\n", " ") .. [[', "c++", rdc):compile("ltoir")
      local callee = g.Program(']] .. CALLEE .. [[', "c++", rdc):compile("ltoir")
      local other = g.Program(']] .. CALLEE:gsub("2.0f", "3.0f") .. [[', "c++", rdc):compile("ltoir")
      local function link(b, options)
        local code = g.Linker(caller, b, options):link("cubin")
        return code.from_cache and "hit" or "miss"
      end
      local lto = { arch = "sm_90", link_time_optimization = true }
      print(link(callee, lto), link(callee, lto), link(other, lto),
        link(callee, { arch = "sm_90", link_time_optimization = true, optimization_level = 0 }),
        link(callee, { arch = "sm_90", link_time_optimization = true, name = "named" }))
    ]]), { env = { GPURUN_CACHE_DIR = folder } })
    assert.are.equal(0, result.code, result.stderr)
    -- The name is the ObjectCode's, not nvJitLink's: the same link.
    assert.are.equal("miss\thit\tmiss\tmiss\thit\n", result.stdout)
    -- A damaged entry is said, removed and linked again.
    local chunk = "-e " .. process.quote([[
      local g = require("gpurun")
      local code = g.ObjectCode.from_ptx(".version 8.0\n.target sm_90\n.address_size 64\n")
      print(g.Linker(code, { arch = "sm_90" }):link("cubin").from_cache)
    ]])
    local stored = process.gpurun(chunk, { env = { GPURUN_CACHE_DIR = folder } })
    assert(os.execute("for f in " .. process.quote(folder) .. "/*.entry; do printf junk > \"$f\"; done"))
    local again = process.gpurun(chunk, { env = { GPURUN_CACHE_DIR = folder } })
    local third = process.gpurun(chunk, { env = { GPURUN_CACHE_DIR = folder } })
    os.execute("rm -rf " .. process.quote(folder))
    assert.are.equal("false\n", stored.stdout, stored.stderr)
    assert.are.equal("false\n", again.stdout, again.stderr)
    assert.matches("kernel cache entry [^\n]+ is corrupt %(truncated: 4 bytes", again.stderr)
    assert.are.equal("true\n", third.stdout, third.stderr)
  end)

  it("closes twice, and refuses to be used after", function()
    local caller = compiled("ptx")
    local linker = gpurun.Linker(caller, { arch = "sm_90" })
    assert.matches("^gpurun.Linker%(1 input%(s%)%)$", tostring(linker))
    linker:close()
    linker:close()
    assert.are.equal("gpurun.Linker(closed)", tostring(linker))
    assert.matches("attempt to use a closed gpurun.Linker", error_of(linker.link, linker, "cubin"), 1, true)
  end)

  describe("on a device", function()
    local device
    before_each(function()
      device = gpurun.Device(0)
      device:set_current()
    end)

    local function check_doubles(code)
      local kernel = code:get_kernel("double_all")
      local n = 300
      local x = gpurun.full(n, 1.25, "float32")
      local stream = device:create_stream()
      gpurun.launch(stream, gpurun.LaunchConfig({ grid = 2, block = 256 }), kernel, x, gpurun.u64(n))
      stream:sync()
      assert.is_true(gpurun.allclose(x, 2.5))
      return kernel
    end

    it("launches a kernel linked with link-time optimization for the current device #gpu", function()
      local arch = "sm_" .. device.arch
      local caller, callee = compiled("ltoir", arch)
      local linker = gpurun.Linker(caller, callee, { link_time_optimization = true })
      check_doubles(linker:link("cubin"))
      -- Linked PTX carries the signature: its parameters are typed.
      local kernel = check_doubles(linker:link("ptx"))
      assert.are.equal(".u64", kernel:params()[2].type)
    end)

    it("launches a kernel linked from PTX without LTO, typed by its input's signature #gpu", function()
      local caller, callee = compiled("ptx", "sm_" .. device.arch)
      local kernel = check_doubles(gpurun.Linker(caller, callee):link("cubin"))
      assert.are.equal(".u64", kernel:params()[2].type)
      -- LTO-IR carries no PTX: a cubin linked from it has the driver's sizes alone.
      local lto_caller, lto_callee = compiled("ltoir", "sm_" .. device.arch)
      local untyped = gpurun.Linker(lto_caller, lto_callee, { link_time_optimization = true }):link("cubin")
      assert.is_nil(check_doubles(untyped):params()[2].type)
    end)
  end)
end)
